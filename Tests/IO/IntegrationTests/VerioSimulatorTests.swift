import GlucoseProfile
import GlucoseStore
import HealthDataSync
import PacketCapture
import ReplayTransport
import Testing

/// A simulated OneTouch Verio through the real engine into SQLite: exactly once, through interrupted
/// transfers and a cleared memory, like GLS meters.
@Suite(.serialized) struct VerioSimulatorTests {
    /// 2025-11-24 17:05:00 on the meter clock: `fixedNow` in Berlin, so the clock is right.
    static let meterClock = DateTime(year: 2025, month: 11, day: 24, hours: 17, minutes: 5)

    /// A Verio with `count` records taken an hour apart before the clock time.
    static func verio(count: Int, faults: SimulatorFaults = SimulatorFaults()) -> MeterSimulator {
        var meter = MeterSimulator(personality: .verio(
            address: BluetoothAddress(rawValue: 0xD4_A0_03_00_0F_01), clock: meterClock, faults: faults))
        let base = Verio.meterSeconds(meterClock)!
        for index in 0..<count {
            meter.addVerioRecord(VerioRecord(meterSeconds: base - UInt32(count - index) * 3600, mgdL: 100 + UInt16(index)))
        }
        return meter
    }

    @Test func syncsExactlyOnceThenOnlyWhatIsNew() async throws {
        let meter = Self.verio(count: 5)
        try await withSyncStack([meter]) { engine, transport, store, _ in
            let first = try await engine.sync(meter: meter.id, force: true)
            #expect(first.result == .success, "\(first.error ?? "")")
            #expect(first.stored == 5 && first.expected == 5)
            // The meter needs a bond: the first command was refused "not allowed" and the engine paired.
            #expect(transport.simulator(meter.id)?.isBonded == true)
            let readings = try await stored(store, meter.id)
            #expect(readings.map(\.reading.sequenceNumber) == [1, 2, 3, 4, 5])
            #expect(readings.map(\.reading.mgdL) == [100, 101, 102, 103, 104])
            // 16:05 Berlin local on the meter clock (right clock) is 15:05Z.
            #expect(readings.last?.reading.instant == Instant(epochMillis: fixedNow.epochMillis - 3_600_000))
            #expect(readings.last?.reading.time.method == .meterClock)
            #expect(readings.last?.reading.measurementBytes.count == VerioRecord.byteCount)
            #expect(try await store.meter(meter.id)?.highWater == 5)
            #expect(try await store.meter(meter.id)?.identity.manufacturer == "LifeScan")

            let again = try await engine.sync(meter: meter.id, force: true)
            #expect(again.result == .noNewRecords, "\(again.error ?? "")")
            #expect(again.stored == 0 && again.duplicates == 0 && again.received == 0)

            transport.updateMeter(meter.id) { $0.addVerioRecord(VerioRecord(meterSeconds: Verio.meterSeconds(Self.meterClock)! - 60, mgdL: 222)) }
            let delta = try await engine.sync(meter: meter.id, force: true)
            #expect(delta.result == .success, "\(delta.error ?? "")")
            #expect(delta.stored == 1 && delta.duplicates == 0)
            #expect(try await stored(store, meter.id).map(\.reading.sequenceNumber) == [1, 2, 3, 4, 5, 6])
            #expect(try await store.meter(meter.id)?.highWater == 6)
        }
    }

    @Test func anInterruptedTransferContinuesWithoutDuplicates() async throws {
        let meter = Self.verio(count: 8, faults: SimulatorFaults(disconnectAfterRecords: 3))
        try await withSyncStack([meter]) { engine, _, store, _ in
            let first = try await engine.sync(meter: meter.id, force: true)
            #expect(first.result == .interrupted)
            #expect(first.stored == 3)
            #expect(try await store.meter(meter.id)?.highWater == 3)

            let second = try await engine.sync(meter: meter.id, force: true)
            #expect(second.result == .success, "\(second.error ?? "")")
            #expect(second.stored == 5 && second.duplicates == 0 && second.received == 5)
            #expect(try await stored(store, meter.id).map(\.reading.sequenceNumber) == Array(1...8))
        }
    }

    @Test func aClearedMemoryIsAResetIntoANewEpoch() async throws {
        let meter = Self.verio(count: 4)
        try await withSyncStack([meter]) { engine, transport, store, _ in
            #expect(try await engine.sync(meter: meter.id, force: true).stored == 4)
            transport.updateMeter(meter.id) { sim in
                sim.clearVerioMemory()
                let base = Verio.meterSeconds(Self.meterClock)!
                sim.addVerioRecord(VerioRecord(meterSeconds: base - 600, mgdL: 180))
                sim.addVerioRecord(VerioRecord(meterSeconds: base - 300, mgdL: 181))
            }
            let reset = try await engine.sync(meter: meter.id, force: true)
            #expect(reset.result == .success, "\(reset.error ?? "")")
            #expect(reset.reset)
            #expect(reset.stored == 2)
            let meterRow = try await store.meter(meter.id)
            #expect(meterRow?.epoch == 1)
            #expect(meterRow?.highWater == 2)
            let all = try await stored(store, meter.id)
            #expect(all.count == 6)
            #expect(all.filter { $0.epoch == 1 }.map(\.reading.mgdL) == [180, 181])

            let after = try await engine.sync(meter: meter.id, force: true)
            #expect(after.result == .noNewRecords)
            #expect(!after.reset)
        }
    }

    /// A Verio download recorded as a btsnoop capture replays as a Verio meter (records by number, clock)
    /// that the engine downloads again into SQLite.
    @Test func aCapturedVerioDownloadReplaysAsAMeter() async throws {
        var original = Self.verio(count: 3)
        original.startRecording(format: .h4)
        SimulatedClient.download(&original)
        let capture = try #require(original.stopRecording()?.image)
        let replayed = try ReplayTransport.meter(fromCaptureBytes: capture)
        #expect(replayed.personality.isVerio)
        #expect(replayed.id == original.id)
        #expect(replayed.personality.manufacturer == "LifeScan")
        #expect(replayed.verioRecords.map(\.number) == [1, 2, 3])
        #expect(replayed.verioRecords.map(\.record) == original.verioRecords.map(\.record))
        #expect(replayed.verioHighest == 3)
        #expect(replayed.personality.clock.value == Self.meterClock)
        try await withSyncStack([replayed]) { engine, _, store, _ in
            let session = try await engine.sync(meter: replayed.id, force: true)
            #expect(session.result == .success, "\(session.error ?? "")")
            #expect(try await stored(store, replayed.id).map(\.reading.mgdL) == [100, 101, 102])
        }
    }
}