import Foundation
import GlucoseProfile
import GlucoseStore
import HealthDataSync
import PacketCapture
import ReplayTransport
import Testing

/// Meter clocks set after the download, through the real engine, the simulator and SQLite:
/// Current Time with write, the i-SENS vendor time, and a time-zone change between syncs.
@Suite(.serialized) struct ClockSettingSyncTests {
    /// `fixedNow` (2025-11-24T16:05:00Z) is 17:05 in Berlin, the engine's zone.
    static let berlinNow = DateTime(year: 2025, month: 11, day: 24, hours: 17, minutes: 5)

    static func london() throws -> TimeZoneRules {
        let data = try #require(FileManager.default.contents(atPath: "/usr/share/zoneinfo/Europe/London"))
        return try TimeZoneRules(tzif: Array(data), identifier: "Europe/London")
    }

    static func reading(_ sim: inout MeterSimulator, mgdL: UInt16, at time: DateTime) {
        sim.addRecord(GlucoseMeasurement(
            sequenceNumber: 0, baseTime: time, concentration: SFloat(rawValue: 0xB000 | mgdL), unit: .kilogramsPerLiter,
            type: .capillaryPlasma, sampleLocation: .finger))
    }

    static func ctsMeter(clock: DateTime) -> MeterSimulator {
        var meter = MeterSimulator(personality: MeterPersonality(
            address: BluetoothAddress(rawValue: 0xD4_A0_03_00_0C_01), name: "CTS-1", manufacturer: "sugard simulator",
            model: "cts-writable", serialNumber: "C1", clock: .currentTime(clock), clockWritable: true))
        Self.reading(&meter, mgdL: 120, at: DateTime(year: 2025, month: 11, day: 24, hours: 9))
        return meter
    }

    @Test func aFastCTSClockIsSetAfterTheDownloadAndRecordedInTheSession() async throws {
        let meter = Self.ctsMeter(clock: DateTime(year: 2025, month: 11, day: 24, hours: 17, minutes: 15))
        try await withSyncStack([meter]) { engine, transport, store, _ in
            let first = try await engine.sync(meter: meter.id, force: true)
            #expect(first.result == .success, "\(first.error ?? "")")
            #expect(transport.simulator(meter.id)?.clockWrites == [Self.berlinNow])
            let clock = try #require(first.clockSet)
            #expect(clock.method == .currentTime)
            #expect(clock.skewBeforeSeconds == 600)
            #expect(clock.skewAfterSeconds == 0)
            // Stored with the session, and the meter row knows its procedure and clock.
            let session = try #require(try await store.sessions(meter: meter.id, limit: 1).first)
            #expect(session.clockSet == clock)
            let row = try #require(try await store.meter(meter.id))
            #expect(row.procedure == .gls)
            #expect(row.clockSettable == true)
            // The reading downloaded before the write was resolved with the skew measured then:
            // 09:00 on a clock 10 min fast is 08:50 Berlin, 07:50Z.
            let stored = try #require(try await stored(store, meter.id).first)
            #expect(stored.reading.instant == Instant(epochSeconds: 1_763_970_600))

            // Right now: the next sync leaves it alone.
            let second = try await engine.sync(meter: meter.id, force: true)
            #expect(second.result == .noNewRecords)
            #expect(second.clockSet == nil)
            #expect(transport.simulator(meter.id)?.clockWrites.count == 1)
        }
    }

    @Test func setMeterClockFalseLeavesTheClock() async throws {
        let meter = Self.ctsMeter(clock: DateTime(year: 2025, month: 11, day: 24, hours: 17, minutes: 15))
        var configuration = testConfiguration
        configuration.setMeterClock = false
        try await withSyncStack([meter], configuration: configuration) { engine, transport, store, _ in
            let first = try await engine.sync(meter: meter.id, force: true)
            #expect(first.result == .success)
            #expect(first.clockSet == nil)
            #expect(transport.simulator(meter.id)?.clockWrites.isEmpty == true)
            #expect(try await store.meter(meter.id)?.clockSettable == true)
        }
    }

    @Test func aTimeZoneChangeSetsTheNewLocalTimeAndKeepsEarlierTimes() async throws {
        // Right for Berlin at first.
        var meter = Self.ctsMeter(clock: Self.berlinNow)
        Self.reading(&meter, mgdL: 130, at: DateTime(year: 2025, month: 11, day: 24, hours: 16))
        try await withSyncStack([meter]) { engine, transport, store, _ in
            let first = try await engine.sync(meter: meter.id, force: true)
            #expect(first.result == .success)
            #expect(first.clockSet == nil)
            let before = try await stored(store, meter.id).map(\.reading.instant)
            #expect(before == [Instant(epochSeconds: 1_763_971_200), Instant(epochSeconds: 1_763_996_400)])

            // The household moves to London: the meter (still on Berlin time) is an hour fast there.
            await engine.setZone(try Self.london(), for: meter.id)
            transport.updateMeter(meter.id) { sim in
                // Taken on the meter's Berlin clock at 17:00, i.e. 16:00 in London.
                Self.reading(&sim, mgdL: 140, at: DateTime(year: 2025, month: 11, day: 24, hours: 17))
            }
            let second = try await engine.sync(meter: meter.id, force: true)
            #expect(second.result == .success, "\(second.error ?? "")")
            let clock = try #require(second.clockSet)
            #expect(clock.skewBeforeSeconds == 3600)
            #expect(clock.skewAfterSeconds == 0)
            #expect(transport.simulator(meter.id)?.clockWrites == [DateTime(year: 2025, month: 11, day: 24, hours: 16, minutes: 5)])
            let after = try await stored(store, meter.id)
            // Earlier readings keep their resolved times; the new one is 16:00 London = 16:00Z.
            #expect(Array(after.map(\.reading.instant).prefix(2)) == before)
            #expect(after.last?.reading.instant == Instant(epochSeconds: 1_764_000_000))

            // Later readings are taken on the corrected clock: 16:03 London on the meter is 16:03Z.
            transport.updateMeter(meter.id) { sim in
                Self.reading(&sim, mgdL: 150, at: DateTime(year: 2025, month: 11, day: 24, hours: 16, minutes: 3))
            }
            let third = try await engine.sync(meter: meter.id, force: true)
            #expect(third.clockSet == nil)
            #expect(try await stored(store, meter.id).last?.reading.instant == Instant(epochSeconds: 1_764_000_180))
            #expect(try await stored(store, meter.id).last?.reading.time.meterClockSkewSeconds == 0)
        }
    }

    @Test func anISensMeterIsSetThroughItsVendorTime() async throws {
        var meter = MeterSimulator(personality: MeterPersonality(
            address: BluetoothAddress(rawValue: 0xD4_A0_03_00_0C_02), name: "CareSens 1", manufacturer: "i-SENS",
            model: "CareSens N Premier", serialNumber: "I1", clock: .none, pairing: .justWorks, isensTime: true))
        Self.reading(&meter, mgdL: 101, at: DateTime(year: 2025, month: 11, day: 24, hours: 12))
        try await withSyncStack([meter]) { engine, transport, store, _ in
            let first = try await engine.sync(meter: meter.id, force: true)
            #expect(first.result == .success, "\(first.error ?? "")")
            let clock = try #require(first.clockSet)
            #expect(clock.method == .isens)
            #expect(clock.skewBeforeSeconds == nil)
            #expect(transport.simulator(meter.id)?.clockWrites == [Self.berlinNow])
            #expect(try await store.meter(meter.id)?.clockSettable == true)
            #expect(try await store.sessions(meter: meter.id, limit: 1).first?.clockSet?.method == .isens)
            // Its clock cannot be read: the reading before the set is unverified...
            let before = try #require(try await stored(store, meter.id).first)
            #expect(before.reading.flags.contains(.clockUnverified))
            #expect(try await store.meter(meter.id)?.clockSetAt == fixedNow)

            // ...one the meter stamped after sugard set its clock is read on the corrected clock:
            // 17:30 on the meter is 17:30 Berlin, 16:30Z.
            transport.updateMeter(meter.id) { sim in
                Self.reading(&sim, mgdL: 160, at: DateTime(year: 2025, month: 11, day: 24, hours: 17, minutes: 30))
            }
            let second = try await engine.sync(meter: meter.id, force: true)
            #expect(second.result == .success, "\(second.error ?? "")")
            let later = try #require(try await stored(store, meter.id).last)
            #expect(later.reading.instant == Instant(epochSeconds: 1_764_001_800))
            #expect(!later.reading.flags.contains(.clockUnverified))
            #expect(later.reading.time.method == .meterClock)
            #expect(later.reading.time.meterClockSkewSeconds == 0)
        }
    }

    /// `clock_tolerance` through the engine: a CTS clock 10 minutes fast is left alone with a 15-minute
    /// tolerance and set with a 5-minute one.
    @Test func clockToleranceDecidesWhetherAClockIsSet() async throws {
        for (tolerance, written) in [(900.0, false), (300.0, true)] {
            let meter = Self.ctsMeter(clock: DateTime(year: 2025, month: 11, day: 24, hours: 17, minutes: 15))
            var configuration = testConfiguration
            configuration.clockToleranceSeconds = tolerance
            try await withSyncStack([meter], configuration: configuration) { engine, transport, _, _ in
                let first = try await engine.sync(meter: meter.id, force: true)
                #expect(first.result == .success, "\(first.error ?? "")")
                #expect((first.clockSet != nil) == written, "tolerance \(tolerance)")
                #expect(transport.simulator(meter.id)?.clockWrites == (written ? [Self.berlinNow] : []))
            }
        }
    }

    /// An i-SENS meter (clock not readable, set after every complete download) across a time-zone
    /// change: each write is the local time of the zone then in force; readings stay where they were.
    @Test func anISensMeterIsSetToTheNewZonesLocalTimeAfterAZoneChange() async throws {
        var meter = MeterSimulator(personality: MeterPersonality(
            address: BluetoothAddress(rawValue: 0xD4_A0_03_00_0C_03), name: "CareSens 2", manufacturer: "i-SENS",
            model: "CareSens N Premier", serialNumber: "I2", clock: .none, pairing: .justWorks, isensTime: true))
        Self.reading(&meter, mgdL: 111, at: DateTime(year: 2025, month: 11, day: 24, hours: 12))
        try await withSyncStack([meter]) { engine, transport, store, _ in
            let first = try await engine.sync(meter: meter.id, force: true)
            #expect(first.result == .success, "\(first.error ?? "")")
            #expect(first.clockSet?.method == .isens)
            #expect(transport.simulator(meter.id)?.clockWrites == [Self.berlinNow])
            let before = try await stored(store, meter.id).map(\.reading.instant)

            // The household moves to London: the next write is London's 16:05, not Berlin's 17:05.
            await engine.setZone(try Self.london(), for: meter.id)
            transport.updateMeter(meter.id) { sim in
                // Taken at 16:02 on the clock sugard set to London time.
                Self.reading(&sim, mgdL: 122, at: DateTime(year: 2025, month: 11, day: 24, hours: 16, minutes: 2))
            }
            let second = try await engine.sync(meter: meter.id, force: true)
            #expect(second.result == .success, "\(second.error ?? "")")
            let clock = try #require(second.clockSet)
            #expect(clock.method == .isens)
            #expect(clock.skewBeforeSeconds == nil && clock.skewAfterSeconds == nil)
            #expect(clock.written == LocalDateTime(year: 2025, month: 11, day: 24, hour: 16, minute: 5))
            #expect(transport.simulator(meter.id)?.clockWrites
                == [Self.berlinNow, DateTime(year: 2025, month: 11, day: 24, hours: 16, minutes: 5)])
            #expect(try await store.sessions(meter: meter.id, limit: 1).first?.clockSet == clock)
            let after = try await stored(store, meter.id)
            #expect(Array(after.map(\.reading.instant).prefix(1)) == before)
            #expect(after.count == 2)
        }
    }

    /// Never before the download and never after an interrupted one: an i-SENS meter whose link drops
    /// part-way gets no time write; the complete download after it writes once.
    @Test func anInterruptedISensDownloadLeavesTheClockAlone() async throws {
        var meter = MeterSimulator(personality: MeterPersonality(
            address: BluetoothAddress(rawValue: 0xD4_A0_03_00_0C_04), name: "CareSens 3", manufacturer: "i-SENS",
            model: "CareSens N Premier", serialNumber: "I3", clock: .none, pairing: .justWorks,
            faults: SimulatorFaults(disconnectAfterRecords: 1), isensTime: true))
        for hour: UInt8 in [8, 9, 10] { Self.reading(&meter, mgdL: 100 + UInt16(hour), at: DateTime(year: 2025, month: 11, day: 24, hours: hour)) }
        try await withSyncStack([meter]) { engine, transport, store, _ in
            let first = try await engine.sync(meter: meter.id, force: true)
            #expect(first.result == .interrupted, "\(first.error ?? "")")
            #expect(first.clockSet == nil)
            #expect(transport.simulator(meter.id)?.clockWrites.isEmpty == true)
            let second = try await engine.sync(meter: meter.id, force: true)
            #expect(second.result == .success, "\(second.error ?? "")")
            #expect(second.clockSet?.method == .isens)
            #expect(transport.simulator(meter.id)?.clockWrites == [Self.berlinNow])
            #expect(try await store.readingCount(meter: meter.id) == 3)
        }
    }
}
