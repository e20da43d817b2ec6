import Foundation
import HealthDataSync
import Testing

@Suite struct TimeResolverTests {
    let host = Instant(epochSeconds: utc(2024, 6, 15, 10))  // 12:00 in Berlin (CEST)

    @Test func appliesOffsetSkewAndZone() throws {
        let berlin = try systemZone("Europe/Berlin")
        // The meter clock shows 12:05:00 when Berlin shows 12:00:00: five minutes fast.
        let clock = MeterClockSample(meterTime: LocalDateTime(year: 2024, month: 6, day: 15, hour: 12, minute: 5), hostTime: self.host)
        let resolver = TimeResolver(zone: berlin, clock: clock)
        #expect(resolver.skewSeconds == 300)
        // Base 2024-06-14 08:05 + 60 min offset = 09:05 user-facing, minus 5 min skew = 09:00 CEST = 07:00Z.
        let r = resolver.resolve(baseTime: LocalDateTime(year: 2024, month: 6, day: 14, hour: 8, minute: 5), timeOffsetMinutes: 60)
        #expect(r.instant == Instant(epochSeconds: utc(2024, 6, 14, 7)))
        #expect(r.resolution.method == .meterClock)
        #expect(r.resolution.zone == "Europe/Berlin")
        #expect(r.resolution.utcOffsetSeconds == 7200)
        #expect(r.resolution.meterClockSkewSeconds == 300)
        #expect(r.resolution.meterLocalTime.isoString == "2024-06-14T09:05:00")
        #expect(r.flags.isEmpty)
    }

    @Test func negativeOffsetsMoveBack() throws {
        let ny = try systemZone("America/New_York")
        let resolver = TimeResolver(zone: ny, skewSeconds: 0)
        // Base 2024-01-01 00:30 with offset -60 min: user-facing 2023-12-31 23:30 EST = 2024-01-01 04:30Z.
        let r = resolver.resolve(baseTime: LocalDateTime(year: 2024, month: 1, day: 1, minute: 30), timeOffsetMinutes: -60)
        #expect(r.resolution.meterLocalTime.isoString == "2023-12-31T23:30:00")
        #expect(r.instant == Instant(epochSeconds: utc(2024, 1, 1, 4, 30)))
        #expect(r.resolution.utcOffsetSeconds == -18_000)
    }

    @Test func aMeterClockHoursOffIsCorrected() throws {
        let berlin = try systemZone("Europe/Berlin")
        // The meter was never set: it shows 2024-06-15 03:00 when Berlin shows 12:00 (9 h slow).
        let clock = MeterClockSample(meterTime: LocalDateTime(year: 2024, month: 6, day: 15, hour: 3), hostTime: self.host)
        let resolver = TimeResolver(zone: berlin, clock: clock)
        // Unwrapped first: `#expect(optionalInt64 == -9 * 3600)` made the compiler emit an AnyHashable
        // thunk that hands Swift Testing an 8-byte slot for the 9-byte Int64?, which ASan reported as a
        // stack-buffer-overflow in about half the runs (Swift 6.3.1; no other test has that thunk).
        let skew = try #require(resolver.skewSeconds)
        #expect(skew == -9 * 3600)
        // A record the meter stamped 2024-06-14 23:30 really happened at 2024-06-15 08:30 CEST.
        let r = resolver.resolve(baseTime: LocalDateTime(year: 2024, month: 6, day: 14, hour: 23, minute: 30), timeOffsetMinutes: nil)
        #expect(r.instant == Instant(epochSeconds: utc(2024, 6, 15, 6, 30)))
        #expect(r.resolution.method == .meterClock)
    }

    @Test func aMeterWithNoClockIsAssumedRightAndFlagged() throws {
        let berlin = try systemZone("Europe/Berlin")
        let resolver = TimeResolver(zone: berlin, clock: nil)
        let r = resolver.resolve(baseTime: LocalDateTime(year: 2024, month: 1, day: 10, hour: 8), timeOffsetMinutes: 0)
        #expect(r.instant == Instant(epochSeconds: utc(2024, 1, 10, 7)))
        #expect(r.resolution.method == .assumedClock)
        #expect(r.resolution.meterClockSkewSeconds == nil)
        #expect(r.flags == .clockUnverified)
    }

    @Test func readingsAcrossTheBerlinDSTChangesResolveAndAreNoted() throws {
        let berlin = try systemZone("Europe/Berlin")
        let resolver = TimeResolver(zone: berlin, skewSeconds: 0)
        let gap = resolver.resolve(baseTime: LocalDateTime(year: 2024, month: 3, day: 31, hour: 2, minute: 15), timeOffsetMinutes: nil)
        #expect(gap.localTimeKind == .nonexistent)
        #expect(gap.instant == Instant(epochSeconds: utc(2024, 3, 31, 1, 15)))
        #expect(gap.resolution.quirks == ["time.nonexistentLocalTime"])
        let fold = resolver.resolve(baseTime: LocalDateTime(year: 2024, month: 10, day: 27, hour: 2, minute: 15), timeOffsetMinutes: nil)
        #expect(fold.localTimeKind == .ambiguous)
        #expect(fold.instant == Instant(epochSeconds: utc(2024, 10, 27, 0, 15)))
        #expect(fold.resolution.quirks == ["time.ambiguousLocalTime"])
        // Readings an hour either side use their own offsets.
        let winter = resolver.resolve(baseTime: LocalDateTime(year: 2024, month: 10, day: 27, hour: 4), timeOffsetMinutes: nil)
        #expect(winter.resolution.utcOffsetSeconds == 3600)
        let summer = resolver.resolve(baseTime: LocalDateTime(year: 2024, month: 10, day: 27, hour: 1), timeOffsetMinutes: nil)
        #expect(summer.resolution.utcOffsetSeconds == 7200)
        #expect(winter.instant.epochMillis - summer.instant.epochMillis == 4 * 3_600_000)
    }

    @Test func offsetPolicyIgnoreKeepsBaseTime() throws {
        let resolver = TimeResolver(zone: .utc, skewSeconds: 0)
        let r = resolver.resolve(baseTime: LocalDateTime(year: 2024, month: 5, day: 1, hour: 10), timeOffsetMinutes: 120, policy: .ignore)
        #expect(r.instant == Instant(epochSeconds: utc(2024, 5, 1, 10)))
        #expect(r.resolution.quirks == ["time.offsetIgnored"])
        let unknown = resolver.resolve(baseTime: LocalDateTime(year: 2024, month: 5, day: 1, hour: 10), timeOffsetMinutes: 0x7FFF)
        #expect(unknown.instant == Instant(epochSeconds: utc(2024, 5, 1, 10)))
        #expect(unknown.resolution.quirks == ["time.offsetUnknown"])
    }

    @Test func timeFaultIsFlaggedAndUntrusted() throws {
        let resolver = TimeResolver(zone: .utc, skewSeconds: 10)
        let r = resolver.resolve(baseTime: LocalDateTime(year: 2024, month: 5, day: 1, hour: 10), timeOffsetMinutes: nil, timeFault: true, quirks: ["vendor.x"])
        #expect(r.flags.contains(.timeFault))
        #expect(r.resolution.method == .untrusted)
        #expect(r.resolution.quirks == ["vendor.x"])
        let invalid = resolver.resolve(baseTime: LocalDateTime(year: 0, month: 0, day: 0), timeOffsetMinutes: nil)
        #expect(invalid.flags.contains(.timeFault))
        #expect(invalid.resolution.quirks == ["time.invalidBaseTime"])
    }
}
