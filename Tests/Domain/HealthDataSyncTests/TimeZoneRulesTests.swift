import Foundation
import HealthDataSync
import Testing

/// Reads a real zone file from the system's tz database.
func systemZone(_ name: String) throws -> TimeZoneRules {
    let data = try #require(FileManager.default.contents(atPath: "/usr/share/zoneinfo/" + name), "missing zone \(name)")
    return try TimeZoneRules(tzif: [UInt8](data), identifier: name)
}

func utc(_ y: Int, _ mo: Int, _ d: Int, _ h: Int = 0, _ mi: Int = 0, _ s: Int = 0) -> Int64 {
    LocalDateTime(year: y, month: mo, day: d, hour: h, minute: mi, second: s).secondsSinceEpoch
}

@Suite struct TimeZoneRulesTests {
    @Test func berlinOffsetsAroundTheSpring2024Change() throws {
        let berlin = try systemZone("Europe/Berlin")
        // 2024-03-31 01:00Z is the change: CET before, CEST from then on.
        let before = berlin.offset(atEpochSeconds: utc(2024, 3, 31, 0, 59, 59))
        let after = berlin.offset(atEpochSeconds: utc(2024, 3, 31, 1, 0, 0))
        #expect(before == ZoneOffset(utcOffsetSeconds: 3600, isDST: false, abbreviation: "CET"))
        #expect(after == ZoneOffset(utcOffsetSeconds: 7200, isDST: true, abbreviation: "CEST"))
    }

    @Test func berlinGapShiftsForwardAndIsFlagged() throws {
        let berlin = try systemZone("Europe/Berlin")
        // 02:30 on 2024-03-31 never happened in Berlin: read with CET it is 01:30Z = 03:30 CEST.
        let r = berlin.resolve(LocalDateTime(year: 2024, month: 3, day: 31, hour: 2, minute: 30))
        #expect(r.kind == .nonexistent)
        #expect(r.epochSeconds == utc(2024, 3, 31, 1, 30))
        #expect(r.offset.utcOffsetSeconds == 7200)
        // Just outside the gap on both sides.
        let early = berlin.resolve(LocalDateTime(year: 2024, month: 3, day: 31, hour: 1, minute: 59, second: 59))
        #expect(early.kind == .unique && early.epochSeconds == utc(2024, 3, 31, 0, 59, 59))
        let late = berlin.resolve(LocalDateTime(year: 2024, month: 3, day: 31, hour: 3))
        #expect(late.kind == .unique && late.epochSeconds == utc(2024, 3, 31, 1))
    }

    @Test func berlinFoldTakesTheEarlierInstant() throws {
        let berlin = try systemZone("Europe/Berlin")
        // 02:30 on 2024-10-27 happened twice: 00:30Z (CEST) and 01:30Z (CET). The earlier wins.
        let r = berlin.resolve(LocalDateTime(year: 2024, month: 10, day: 27, hour: 2, minute: 30))
        #expect(r.kind == .ambiguous)
        #expect(r.epochSeconds == utc(2024, 10, 27, 0, 30))
        #expect(r.offset.abbreviation == "CEST")
        let after = berlin.resolve(LocalDateTime(year: 2024, month: 10, day: 27, hour: 3))
        #expect(after.kind == .unique && after.epochSeconds == utc(2024, 10, 27, 2))
    }

    @Test func newYorkIsNegativeAndChangesOnItsOwnDates() throws {
        let ny = try systemZone("America/New_York")
        #expect(ny.offset(atEpochSeconds: utc(2024, 1, 15, 12)).utcOffsetSeconds == -18_000)
        #expect(ny.offset(atEpochSeconds: utc(2024, 7, 15, 12)).utcOffsetSeconds == -14_400)
        // 2024-03-10 02:30 local does not exist in New York.
        let gap = ny.resolve(LocalDateTime(year: 2024, month: 3, day: 10, hour: 2, minute: 30))
        #expect(gap.kind == .nonexistent && gap.epochSeconds == utc(2024, 3, 10, 7, 30))
        // 2024-11-03 01:30 local happened twice; the first was EDT (05:30Z).
        let fold = ny.resolve(LocalDateTime(year: 2024, month: 11, day: 3, hour: 1, minute: 30))
        #expect(fold.kind == .ambiguous && fold.epochSeconds == utc(2024, 11, 3, 5, 30))
        #expect(ny.localTime(at: Instant(epochSeconds: utc(2024, 1, 1, 3))).isoString == "2023-12-31T22:00:00")
    }

    @Test func lordHoweHasAHalfHourDSTStep() throws {
        let lh = try systemZone("Australia/Lord_Howe")
        #expect(lh.offset(atEpochSeconds: utc(2024, 7, 1)).utcOffsetSeconds == 37_800)  // +10:30 in winter
        #expect(lh.offset(atEpochSeconds: utc(2024, 1, 1)).utcOffsetSeconds == 39_600)  // +11 in summer
        // DST starts 2024-10-06 02:00 local (+10:30) -> 02:30; 02:15 does not exist.
        let gap = lh.resolve(LocalDateTime(year: 2024, month: 10, day: 6, hour: 2, minute: 15))
        #expect(gap.kind == .nonexistent)
        #expect(gap.epochSeconds == utc(2024, 10, 6, 2, 15) - 37_800)
        // DST ends 2024-04-07 02:00 local (+11) -> 01:30; 01:45 happened twice.
        let fold = lh.resolve(LocalDateTime(year: 2024, month: 4, day: 7, hour: 1, minute: 45))
        #expect(fold.kind == .ambiguous && fold.offset.utcOffsetSeconds == 39_600)
    }

    @Test func stJohnsHasANegativeHalfHourOffset() throws {
        let z = try systemZone("America/St_Johns")
        #expect(z.offset(atEpochSeconds: utc(2024, 1, 15)).utcOffsetSeconds == -12_600)
        let r = z.resolve(LocalDateTime(year: 2024, month: 1, day: 15, hour: 8))
        #expect(r.kind == .unique && r.epochSeconds == utc(2024, 1, 15, 11, 30))
    }

    @Test func datesBeyondTheTableUseTheFooterRule() throws {
        let berlin = try systemZone("Europe/Berlin")
        // 2090 is past every table (fat files end in 2037); the footer CET-1CEST,M3.5.0,M10.5.0/3 rules.
        #expect(berlin.offset(atEpochSeconds: utc(2090, 7, 1)).utcOffsetSeconds == 7200)
        #expect(berlin.offset(atEpochSeconds: utc(2090, 12, 1)).utcOffsetSeconds == 3600)
        // Last Sunday of March 2090 is the 26th: the change is at 01:00Z.
        #expect(berlin.offset(atEpochSeconds: utc(2090, 3, 26, 0, 59, 59)).utcOffsetSeconds == 3600)
        #expect(berlin.offset(atEpochSeconds: utc(2090, 3, 26, 1)).utcOffsetSeconds == 7200)
        let fold = berlin.resolve(LocalDateTime(year: 2090, month: 10, day: 29, hour: 2, minute: 30))
        #expect(fold.kind == .ambiguous)
    }

    @Test func posixRulesAgreeWithTheTableInSouthernHemisphere() throws {
        let sydney = try systemZone("Australia/Sydney")
        let rule = try TimeZoneRules(posix: "AEST-10AEDT,M10.1.0,M4.1.0/3")
        var t = utc(2023, 1, 1)
        while t < utc(2026, 1, 1) {
            #expect(rule.offset(atEpochSeconds: t).utcOffsetSeconds == sydney.offset(atEpochSeconds: t).utcOffsetSeconds)
            t += 3 * 3600 + 17
        }
    }

    @Test func quotedNamesAndJulianRules() throws {
        let lh = try TimeZoneRules(posix: "<+1030>-10:30<+11>-11,M10.1.0,M4.1.0")
        #expect(lh.offset(atEpochSeconds: utc(2030, 1, 1)).abbreviation == "+11")
        let julian = try TimeZoneRules(posix: "XST3XDT,J60/2,J300/2")
        // J60 is March 1 in every year (February 29 never counted).
        #expect(julian.offset(atEpochSeconds: utc(2024, 3, 1, 4, 59)).utcOffsetSeconds == -10_800)
        #expect(julian.offset(atEpochSeconds: utc(2024, 3, 1, 5)).utcOffsetSeconds == -7200)
        let fixed = try TimeZoneRules(posix: "<-03>3")
        #expect(fixed.offset(atEpochSeconds: 0).utcOffsetSeconds == -10_800)
    }

    @Test func utcAndSlimLikeFilesWork() throws {
        let utcZone = try systemZone("Etc/UTC")
        #expect(utcZone.offset(atEpochSeconds: utc(2024, 6, 1)).utcOffsetSeconds == 0)
        let r = utcZone.resolve(LocalDateTime(year: 2024, month: 6, day: 1, hour: 12))
        #expect(r.kind == .unique && r.epochSeconds == utc(2024, 6, 1, 12))
        #expect(TimeZoneRules.utc.offset(atEpochSeconds: 123).utcOffsetSeconds == 0)
    }

    @Test func everySystemZoneParses() throws {
        // A broad check that the reader accepts every real file the host ships.
        let root = "/usr/share/zoneinfo/"
        let names = ["Europe/London", "Asia/Kolkata", "Pacific/Chatham", "America/Sao_Paulo", "Africa/Casablanca",
                     "Asia/Tehran", "Pacific/Apia", "Antarctica/Troll", "Europe/Dublin", "America/Godthab"]
        for name in names where FileManager.default.fileExists(atPath: root + name) {
            let z = try systemZone(name)
            _ = z.resolve(LocalDateTime(year: 2024, month: 6, day: 1, hour: 12))
        }
        let dublin = try systemZone("Europe/Dublin")  // negative DST in the data ("IST" is standard).
        #expect(dublin.offset(atEpochSeconds: utc(2024, 7, 1)).utcOffsetSeconds == 3600)
        #expect(dublin.offset(atEpochSeconds: utc(2024, 1, 1)).utcOffsetSeconds == 0)
    }

    @Test func malformedFilesThrowWithAReason() throws {
        #expect(throws: TimeZoneRulesError.self) { try TimeZoneRules(tzif: Array("TZ".utf8), identifier: "x") }
        #expect(throws: TimeZoneRulesError.self) { try TimeZoneRules(tzif: [UInt8](repeating: 0, count: 60), identifier: "x") }
        let berlin = [UInt8](try #require(FileManager.default.contents(atPath: "/usr/share/zoneinfo/Europe/Berlin")))
        for cut in [10, 44, 100, berlin.count - 5] {
            #expect(throws: TimeZoneRulesError.self) { try TimeZoneRules(tzif: Array(berlin[0..<cut]), identifier: "cut") }
        }
        #expect(throws: TimeZoneRulesError.self) { try TimeZoneRules(posix: "C1") }
        #expect(throws: TimeZoneRulesError.self) { try TimeZoneRules(posix: "CET-1CEST,M13.5.0,M10.5.0") }
    }
}

@Suite struct TimeZoneRulesVersion1Tests {
    @Test func aVersion1OnlyFileReadsItsThirtyTwoBitTable() throws {
        let berlin = [UInt8](try #require(FileManager.default.contents(atPath: "/usr/share/zoneinfo/Europe/Berlin")))
        func count(_ i: Int) -> Int { Int(berlin[20 + 4 * i]) << 24 | Int(berlin[21 + 4 * i]) << 16 | Int(berlin[22 + 4 * i]) << 8 | Int(berlin[23 + 4 * i]) }
        let (isut, isstd, leap, time, type, char) = (count(0), count(1), count(2), count(3), count(4), count(5))
        let v1Length = 44 + time * 5 + type * 6 + char + leap * 8 + isstd + isut
        var v1 = Array(berlin[0..<v1Length])
        v1[4] = 0  // version 1: no 64-bit block, no footer
        let z = try TimeZoneRules(tzif: v1, identifier: "Europe/Berlin")
        #expect(z.offset(atEpochSeconds: utc(2024, 7, 1)).utcOffsetSeconds == 7200)
        #expect(z.offset(atEpochSeconds: utc(2024, 1, 1)).utcOffsetSeconds == 3600)
        let fold = z.resolve(LocalDateTime(year: 2024, month: 10, day: 27, hour: 2, minute: 30))
        #expect(fold.kind == .ambiguous)
    }
}
