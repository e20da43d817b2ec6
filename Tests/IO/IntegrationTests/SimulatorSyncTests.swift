import GlucoseProfile
import GlucoseStore
import HealthDataSync
import PacketCapture
import ReplayTransport
import Testing

/// Simulated meters with faults, through the real engine into SQLite.
@Suite(.serialized) struct SimulatorSyncTests {
    /// A plain meter with `count` kg/L records numbered from 1.
    static func plainMeter(count: Int, faults: SimulatorFaults = SimulatorFaults()) -> MeterSimulator {
        let personality = MeterPersonality(
            address: BluetoothAddress(rawValue: 0xD4_A0_03_00_00_01), name: "PLAIN-1", manufacturer: "sugard simulator",
            model: "plain", serialNumber: "P1", clock: .currentTime(DateTime(year: 2025, month: 11, day: 24, hours: 17, minutes: 5)),
            startHandle: 0x0100, faults: faults)
        var meter = MeterSimulator(personality: personality)
        for index in 0..<count {
            meter.addRecord(GlucoseMeasurement(
                sequenceNumber: 0, baseTime: DateTime(year: 2025, month: 11, day: 1 + UInt8(index % 20), hours: 8),
                concentration: SFloat(rawValue: 0xB000 | UInt16(90 + index)), unit: .kilogramsPerLiter,
                type: .capillaryPlasma, sampleLocation: .finger))
        }
        return meter
    }

    @Test func disconnectMidTransferThenTheRestWithoutDuplicates() async throws {
        let meter = Self.plainMeter(count: 10, faults: SimulatorFaults(disconnectAfterRecords: 4))
        try await withSyncStack([meter]) { engine, _, store, _ in
            let first = try await engine.sync(meter: meter.id, force: true)
            #expect(first.result == .interrupted)
            #expect(first.stored == 4)
            // The four records are contiguous: the mark moved to #4.
            #expect(try await store.meter(meter.id)?.highWater == 4)

            let second = try await engine.sync(meter: meter.id, force: true)
            #expect(second.result == .success, "\(second.error ?? "")")
            #expect(second.stored == 6)
            #expect(second.duplicates == 0 && second.received == 6)
            let seqs = try await stored(store, meter.id).map(\.reading.sequenceNumber)
            #expect(seqs == Array(1...10))
            #expect(try await store.meter(meter.id)?.highWater == 10)
        }
    }

    @Test func wrongPasskeyThenRightPasskey() async throws {
        let meter = FixtureMeter.accuChekGuide.simulator
        try await withSyncStack([meter], pins: [111_111, FixtureMeter.accuChekPasskey]) { engine, transport, store, observer in
            let first = try await engine.sync(meter: meter.id, force: true)
            #expect(first.result == .failed)
            #expect(try await store.readingCount(meter: meter.id) == 0)
            #expect(transport.simulator(meter.id)?.isBonded == false)
            #expect(observer.all.contains { if case .failed(_, let f) = $0 { f.code == .pairingFailed } else { false } })

            let second = try await engine.sync(meter: meter.id, force: true)
            #expect(second.result == .success, "\(second.error ?? "")")
            #expect(second.stored == 5)
            #expect(transport.simulator(meter.id)?.isBonded == true)
            #expect(observer.passkeyRequests == 2)

            // Bonded now: the next sync needs no passkey.
            let third = try await engine.sync(meter: meter.id, force: true)
            #expect(third.result == .noNewRecords)
            #expect(observer.passkeyRequests == 2)
        }
    }

    @Test func procedureAlreadyInProgressIsRetriedAfterAbort() async throws {
        let meter = Self.plainMeter(count: 3, faults: .procedureAlreadyInProgressOnce)
        try await withSyncStack([meter]) { engine, transport, store, _ in
            let record = try await engine.sync(meter: meter.id, force: true)
            #expect(record.result == .success, "\(record.error ?? "")")
            #expect(try await store.readingCount(meter: meter.id) == 3)
            #expect(transport.simulator(meter.id)?.pendingFaults.racpWriteErrors.isEmpty == true)
        }
    }

    @Test func countOpCodeNotSupportedStillDownloads() async throws {
        let meter = Self.plainMeter(count: 3, faults: SimulatorFaults(countNotSupported: true))
        try await withSyncStack([meter]) { engine, _, store, observer in
            let record = try await engine.sync(meter: meter.id, force: true)
            #expect(record.result == .success, "\(record.error ?? "")")
            #expect(record.expected == nil)
            #expect(try await store.readingCount(meter: meter.id) == 3)
            #expect(observer.anomalyKinds(meter.id).contains(.countUnavailable))
        }
    }

    @Test func reportOpCodeNotSupportedFails() async throws {
        let meter = Self.plainMeter(count: 3, faults: SimulatorFaults(reportNotSupported: true))
        try await withSyncStack([meter]) { engine, _, store, _ in
            let record = try await engine.sync(meter: meter.id, force: true)
            #expect(record.result == .failed)
            #expect(try await store.readingCount(meter: meter.id) == 0)
        }
    }

    @Test func deltaSyncAfterANewReadingAsksFromTheHighWaterMark() async throws {
        let meter = Self.plainMeter(count: 3)
        try await withSyncStack([meter]) { engine, transport, store, _ in
            #expect(try await engine.sync(meter: meter.id, force: true).stored == 3)
            let seq = transport.addReading(GlucoseMeasurement(
                sequenceNumber: 0, baseTime: DateTime(year: 2025, month: 11, day: 24, hours: 16, minutes: 50),
                concentration: SFloat(rawValue: 0xB000 | 123), unit: .kilogramsPerLiter, type: .capillaryPlasma,
                sampleLocation: .finger), to: meter.id)
            #expect(seq == 4)
            let delta = try await engine.sync(meter: meter.id, force: true)
            #expect(delta.result == .success)
            #expect(delta.stored == 1)
            #expect(delta.duplicates == 0)
            #expect(delta.expected == 1)
            #expect(try await store.meter(meter.id)?.highWater == 4)
        }
    }

    @Test func automaticSyncFollowsANewReading() async throws {
        let meter = Self.plainMeter(count: 2)
        try await withSyncStack([meter], automatic: true) { engine, transport, store, observer in
            try await waitUntil {
                let syncing = await engine.isSyncing(meter.id)
                return try await store.readingCount(meter: meter.id) == 2 && !syncing
            }
            transport.addReading(GlucoseMeasurement(
                sequenceNumber: 0, baseTime: DateTime(year: 2025, month: 11, day: 24, hours: 17),
                concentration: SFloat(rawValue: 0xB000 | 140), unit: .kilogramsPerLiter, type: .capillaryPlasma,
                sampleLocation: .finger), to: meter.id)
            try await waitUntil { try await store.readingCount(meter: meter.id) == 3 }
            #expect(observer.all.contains { if case .meterAppeared = $0 { true } else { false } })
        }
    }

    @Test func slowMeterWithOperationDelay() async throws {
        let meter = Self.plainMeter(count: 6)
        let options = ReplayTransport.Options(operationDelay: .milliseconds(5), wallClock: testWallClock)
        try await withSyncStack([meter], options: options) { engine, _, store, _ in
            let record = try await engine.sync(meter: meter.id, force: true)
            #expect(record.result == .success, "\(record.error ?? "")")
            #expect(try await store.readingCount(meter: meter.id) == 6)
        }
    }

    @Test func twoMetersInParallel() async throws {
        let a = FixtureMeter.contour.simulator
        let b = FixtureMeter.isensMonth13.simulator
        try await withSyncStack([a, b]) { engine, _, store, _ in
            async let first = engine.sync(meter: a.id, force: true)
            async let second = engine.sync(meter: b.id, force: true)
            let results = try await [first, second]
            #expect(results.map(\.result) == [.success, .success])
            #expect(try await store.readingCount(meter: nil) == 9)
        }
    }
}

/// Polls `condition` for up to 10 s.
func waitUntil(_ condition: () async throws -> Bool) async throws {
    for _ in 0..<1000 {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    Issue.record("timed out waiting for a condition")
}
