import GlucoseProfile
import GlucoseStore
import HealthDataSync
import PacketCapture
import ReplayTransport
import Testing

/// The OneTouch Verio and the clock-setting (CTS) fixtures replayed as live meters through the real
/// engine into SQLite (issue 36): exactly once, through a dropped link and a meter reset, like GLS
/// meters; a Verio HI and LO mean what a GLS HI and LO mean; the CTS meter's clock is set after the
/// download, never before and never after an interrupted one.
@Suite(.serialized) struct FixtureReplayResilienceTests {
    static let fixtures: [FixtureMeter] = [.verioReflect, .ctsClockFast]

    static func replay(_ fixture: FixtureMeter) throws -> MeterSimulator {
        try ReplayTransport.meter(fromCapture: fixturePath(fixture.rawValue))
    }

    /// The numbers a full download stores: a Verio's blood-glucose records, every GLS record.
    static func storedNumbers(_ fixture: FixtureMeter) -> [UInt16] {
        fixture.isVerio
            ? fixture.verioRecords.filter(\.record.isBloodGlucose).map(\.number)
            : fixture.records.compactMap(\.sequenceNumber)
    }

    @Test func theVerioFixtureSyncsOnceWithItsHiLoAndNoValueRecords() async throws {
        let meter = try Self.replay(.verioReflect)
        try await withSyncStack([meter]) { engine, _, store, observer in
            let first = try await engine.sync(meter: meter.id, force: true)
            #expect(first.result == .success, "\(first.error ?? "")")
            #expect(first.stored == 5)
            let rows = try await stored(store, meter.id)
            let readings = rows.map(\.reading)
            #expect(readings.map(\.sequenceNumber) == [37, 38, 39, 41, 42])
            #expect(readings.map(\.mgdL) == [104, nil, nil, nil, 98])
            #expect(readings[1].flags.contains(.hi) && !readings[1].flags.contains(.lo))
            #expect(readings[2].flags.contains(.lo) && !readings[2].flags.contains(.hi))
            #expect(readings[3].flags.contains(.noValue))
            #expect(readings.map(\.countsAsGlucose) == [true, false, false, false, true])
            // The 11 bytes as the meter sent them are kept (612 and 12 mg/dL are not lost).
            #expect(readings.map(\.measurementBytes) == [37, 38, 39, 41, 42].map { number in
                FixtureMeter.verioReflect.verioRecords.first { $0.number == number }!.record.encoded()
            })
            #expect(observer.anomalyKinds(meter.id).contains(.notBloodGlucose))
            // 07:45 on a meter clock 20 s fast in Berlin is 06:44:40Z.
            #expect(readings[0].time.method == .meterClock)
            #expect((19...20).contains(readings[0].time.meterClockSkewSeconds ?? 0))
            #expect(try await store.meter(meter.id)?.highWater == 42)
            #expect(try await store.meter(meter.id)?.procedure == .verio)

            #expect(readings[1].mmolL == nil && readings[2].mmolL == nil && readings[3].mmolL == nil)

            let again = try await engine.sync(meter: meter.id, force: true)
            #expect(again.result == .noNewRecords, "\(again.error ?? "")")
            #expect(again.stored == 0)
            #expect(try await store.readingCount(meter: meter.id) == 5)
        }
    }

    /// A Verio HI and LO are stored with the same flags and (absent) values as a GLS meter's HI and LO
    /// (+INF with status bit 5, −INF with status bit 6): the flags every sink's `kind` is decided from.
    @Test func aVerioHiAndLoMeanWhatAGlsHiAndLoMean() async throws {
        var gls = MeterSimulator(personality: MeterPersonality(
            address: BluetoothAddress(rawValue: 0xD4_A0_04_00_0A_01), name: "GLS-HILO", manufacturer: "sugard simulator",
            model: "hi-lo", hasContext: false, clock: .currentTime(DateTime(year: 2025, month: 11, day: 24, hours: 17, minutes: 5))))
        let time = DateTime(year: 2025, month: 11, day: 24, hours: 9)
        for (value, status) in [(SFloat.positiveInfinity, SensorStatus.resultTooHigh), (.negativeInfinity, .resultTooLow)] {
            gls.addRecord(GlucoseMeasurement(
                sequenceNumber: 0, baseTime: time, concentration: value, unit: .kilogramsPerLiter, type: .capillaryPlasma,
                sampleLocation: .finger, sensorStatus: status))
        }
        var verio = MeterSimulator(personality: .verio(
            address: BluetoothAddress(rawValue: 0xD4_A0_04_00_0A_02), clock: DateTime(year: 2025, month: 11, day: 24, hours: 17, minutes: 5)))
        let seconds = try #require(Verio.meterSeconds(time))
        verio.addVerioRecord(VerioRecord(meterSeconds: seconds, mgdL: 601))
        verio.addVerioRecord(VerioRecord(meterSeconds: seconds, mgdL: 19))
        try await withSyncStack([gls, verio]) { engine, _, store, _ in
            for id in [gls.id, verio.id] {
                let session = try await engine.sync(meter: id, force: true)
                #expect(session.result == .success, "\(session.error ?? "")")
            }
            let glsRows = try await stored(store, gls.id)
            let verioRows = try await stored(store, verio.id)
            try #require(glsRows.count == 2 && verioRows.count == 2)
            for (g, v) in zip(glsRows, verioRows) {
                let meaning: ReadingFlags = [.hi, .lo, .noValue, .controlSolution, .ketone]
                #expect(g.reading.flags.intersection(meaning) == v.reading.flags.intersection(meaning))
                #expect(v.reading.mgdL == nil && v.reading.mmolL == nil && g.reading.mgdL == nil)
                #expect(v.reading.countsAsGlucose == g.reading.countsAsGlucose)
                #expect(v.reading.instant == g.reading.instant)
            }
            #expect(verioRows.map { $0.reading.flags.contains(.hi) } == [true, false])
            #expect(verioRows.map { $0.reading.flags.contains(.lo) } == [false, true])
        }
    }

    /// A link dropped part-way through the download: what arrived is kept, the next sync continues
    /// after it, and every reading is stored once. The CTS meter's clock is not set by the interrupted
    /// download, only after the complete one.
    @Test(arguments: fixtures)
    func aDroppedLinkResumesWithoutDuplicates(fixture: FixtureMeter) async throws {
        var meter = try Self.replay(fixture)
        meter.setFaults(SimulatorFaults(disconnectAfterRecords: 2))
        try await withSyncStack([meter]) { engine, transport, store, _ in
            let first = try await engine.sync(meter: meter.id, force: true)
            #expect(first.result == .interrupted, "\(first.error ?? "")")
            #expect(first.stored == 2)
            #expect(first.clockSet == nil)
            #expect(transport.simulator(meter.id)?.clockWrites.isEmpty == true)

            let second = try await engine.sync(meter: meter.id, force: true)
            #expect(second.result == .success, "\(second.error ?? "")")
            #expect(second.stored == Self.storedNumbers(fixture).count - 2)
            let numbers = try await stored(store, meter.id).map(\.reading.sequenceNumber)
            #expect(numbers == Self.storedNumbers(fixture))
            #expect(Set(numbers).count == numbers.count)
            if fixture == .ctsClockFast {
                let clock = try #require(second.clockSet)
                #expect(clock.method == .currentTime)
                #expect((749...750).contains(clock.skewBeforeSeconds ?? 0))
                #expect(clock.skewAfterSeconds == 0)
                #expect(transport.simulator(meter.id)?.clockWrites.count == 1)
            }
            let third = try await engine.sync(meter: meter.id, force: true)
            #expect(third.result == .noNewRecords, "\(third.error ?? "")")
            #expect(third.stored == 0 && third.clockSet == nil)
            #expect(try await store.readingCount(meter: meter.id) == numbers.count)
        }
    }

    /// The meter's memory is cleared and numbering starts again: detected by the same rule as for GLS
    /// meters (the record at the stored mark is gone), stored into a new epoch, nothing lost or doubled.
    @Test(arguments: fixtures)
    func aResetMeterIsDetectedAndStoredInANewEpoch(fixture: FixtureMeter) async throws {
        let meter = try Self.replay(fixture)
        let time = DateTime(year: 2025, month: 11, day: 24, hours: 16, minutes: 30)
        try await withSyncStack([meter]) { engine, transport, store, _ in
            let first = try await engine.sync(meter: meter.id, force: true)
            #expect(first.result == .success, "\(first.error ?? "")")
            let before = Self.storedNumbers(fixture).count
            #expect(first.stored == before)

            transport.updateMeter(meter.id) { sim in
                if fixture.isVerio {
                    sim.clearVerioMemory()
                    let seconds = Verio.meterSeconds(time) ?? 0
                    sim.addVerioRecord(VerioRecord(meterSeconds: seconds, mgdL: 150))
                    sim.addVerioRecord(VerioRecord(meterSeconds: seconds + 600, mgdL: 160))
                } else {
                    sim.clearRecords()
                    for value: UInt16 in [150, 160] {
                        sim.addRecord(GlucoseMeasurement(
                            sequenceNumber: 0, baseTime: time, concentration: SFloat(rawValue: 0xB000 | value),
                            unit: .kilogramsPerLiter, type: .capillaryPlasma, sampleLocation: .finger))
                    }
                }
            }
            let reset = try await engine.sync(meter: meter.id, force: true)
            #expect(reset.result == .success, "\(reset.error ?? "")")
            #expect(reset.reset)
            #expect(reset.stored == 2)
            let row = try await store.meter(meter.id)
            #expect(row?.epoch == 1)
            #expect(row?.highWater == 2)
            let all = try await stored(store, meter.id)
            #expect(all.count == before + 2)
            #expect(all.filter { $0.epoch == 1 }.map(\.reading.mgdL) == [150, 160])
            #expect(all.filter { $0.epoch == 0 }.map(\.reading.sequenceNumber) == Self.storedNumbers(fixture))

            let after = try await engine.sync(meter: meter.id, force: true)
            #expect(after.result == .noNewRecords, "\(after.error ?? "")")
            #expect(!after.reset && after.stored == 0)
        }
    }
}
