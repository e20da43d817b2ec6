import GlucoseProfile
import GlucoseStore
import HealthDataSync
import JSON
import ReplayTransport
import Testing

/// Every committed fixture, replayed as a live meter through the real sync engine into SQLite.
@Suite(.serialized) struct FixtureSyncTests {
    /// GLS fixtures (the Verio one has no `records` in its decode: FixtureReplayResilienceTests checks it).
    static let names = FixtureMeter.allCases.filter { !$0.isVerio }.map(\.rawValue)

    @Test(arguments: names)
    func fixtureSyncsToItsExpectedRecordsAndOnlyOnce(name: String) async throws {
        let meter = try ReplayTransport.meter(fromCapture: fixturePath(name), passkey: FixtureMeter.accuChekPasskey)
        let id = meter.id
        // What the capture's decode promises, with a record sent twice in a row counted once.
        var expected: [JSONValue] = []
        for record in try expectedRecords(name) where record["sequenceNumber"] != expected.last?["sequenceNumber"] {
            expected.append(record)
        }
        #expect(!expected.isEmpty)

        try await withSyncStack([meter], pins: [FixtureMeter.accuChekPasskey]) { engine, _, store, observer in
            let first = try await engine.sync(meter: id, force: true)
            #expect(first.result == .success, "\(first.error ?? "")")
            let readings = try await stored(store, id).map(\.reading)
            #expect(readings.map { Int($0.sequenceNumber) } == expected.map { Int($0["sequenceNumber"]?.intValue ?? -1) })
            for (reading, record) in zip(readings, expected) {
                let raw = record["concentration"]?["raw"]?.intValue
                #expect(reading.concentrationRaw.map { Int64($0) } == raw, "record \(reading.sequenceNumber)")
                #expect((reading.contextBytes != nil) == !(record["context"]?.isNull ?? true), "record \(reading.sequenceNumber)")
                #expect(reading.meal.map { Int64($0) } == record["context"]?["meal"]?["code"]?.intValue)
                #expect(reading.timeOffsetMinutes.map { Int64($0) } == record["timeOffsetMinutes"]?.intValue)
                #expect(reading.unit?.rawValue == record["concentration"]?["unit"]?.stringValue)
            }
            let meterState = try #require(try await store.meter(id))
            let highWater = meterState.highWater
            #expect(highWater != nil)
            #expect(first.stored == expected.count)

            // A second sync stores nothing and leaves the high-water mark where it was.
            let second = try await engine.sync(meter: id, force: true)
            #expect(second.result == .success || second.result == .noNewRecords, "\(second.error ?? "")")
            #expect(second.stored == 0)
            #expect(try await store.readingCount(meter: id) == expected.count)
            #expect(try await store.meter(id)?.highWater == highWater)
            #expect(try await store.meter(id)?.epoch == 0)

            try self.checkSpecifics(name, readings, observer.anomalyKinds(id), passkeys: observer.passkeyRequests)
        }
    }

    private func checkSpecifics(
        _ name: String, _ readings: [Reading], _ anomalies: [SyncAnomaly.Kind], passkeys: Int
    ) throws {
        func reading(_ seq: UInt16) throws -> Reading { try #require(readings.first { $0.sequenceNumber == seq }) }
        switch FixtureMeter(rawValue: name)! {
        case .accuChekGuide:
            #expect(passkeys == 1)
            let lo = try reading(5)
            #expect(lo.flags.contains(.lo))
            #expect(lo.mgdL == nil && lo.concentrationRaw == 0x0802)
            let control = try reading(6)
            #expect(control.flags.contains(.controlSolution))
            #expect(!control.countsAsGlucose)
            let first = try reading(4)
            #expect(first.mgdL == 88)
            #expect(first.countsAsGlucose)
            // Date Time 0x2A08 was read. In the capture the meter showed 17:00:42 Berlin (16:00:42 UTC) when the
            // capture's clock said 16:00:00.07 UTC; the replayed clock runs on from there, so the skew is the
            // recorded one (+42 s, give or take the rounding), not the capture's age.
            #expect(first.time.method == .meterClock)
            #expect(first.time.meterLocalTime == LocalDateTime(year: 2025, month: 11, day: 23, hour: 7, minute: 10))
            #expect((41...42).contains(first.time.meterClockSkewSeconds ?? 0))
        case .contour:
            let third = try reading(3)
            #expect(third.unit == .molesPerLiter)
            #expect(abs((third.mmolL ?? 0) - 3.2) < 1e-9)
            #expect(third.timeOffsetMinutes == -120)
            #expect(third.time.meterLocalTime == LocalDateTime(year: 2025, month: 11, day: 21, hour: 7, minute: 40))
            #expect(readings.allSatisfy { $0.countsAsGlucose && $0.time.method == .meterClock })
        case .wrap:
            #expect(anomalies.contains(.repeatedRecord))
            #expect(readings.allSatisfy { $0.countsAsGlucose })
        case .malformed:
            #expect(try reading(23).flags.contains(.noValue))
            #expect(try reading(25).contextBytes == nil)
            for kind in [SyncAnomaly.Kind.malformedMeasurement, .orphanContext, .malformedRACP, .missingContext] {
                #expect(anomalies.contains(kind), "\(kind)")
            }
        case .isensMonth13:
            let thirteen = try reading(31)
            #expect(thirteen.baseTime.month == 13)
            #expect(thirteen.time.meterLocalTime == LocalDateTime(year: 2025, month: 1, day: 1, hour: 0, minute: 20))
            #expect(thirteen.flags.contains(.quirkApplied))
            #expect(thirteen.time.quirks.contains(QuirkID.monthThirteen.rawValue))
            let ketone = try reading(32)
            #expect(ketone.flags.contains(.ketone))
            #expect(ketone.mgdL == nil && ketone.ketoneMmolL.map { abs($0 - 1.4) < 1e-9 } == true)
            #expect(!ketone.countsAsGlucose)
            #expect(try reading(33).countsAsGlucose)
        case .ctsClockFast:
            // The replayed clock runs on from the one read before the capture's write: 12 min 30 s fast.
            #expect(readings.allSatisfy { $0.countsAsGlucose && $0.time.method == .meterClock })
            #expect((749...750).contains(readings.first?.time.meterClockSkewSeconds ?? 0))
            #expect(try reading(11).time.meterLocalTime == LocalDateTime(year: 2025, month: 11, day: 23, hour: 8, minute: 0))
        case .verioReflect:
            Issue.record("the Verio fixture is checked in FixtureReplayResilienceTests")
        }
    }
}
