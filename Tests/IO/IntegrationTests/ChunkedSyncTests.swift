import GlucoseProfile
import GlucoseStore
import HealthDataSync
import PacketCapture
import ReplayTransport
import Testing

/// Transfers advance: records are committed in chunks as they arrive, each with the sync's
/// contiguous mark, and the next attempt resumes after it. Simulated meters through the real
/// engine into SQLite.
@Suite(.serialized) struct ChunkedSyncTests {
    static let address = BluetoothAddress(rawValue: 0xD4_A0_03_00_00_02)

    /// A plain meter with records `first...last`, values from `base`.
    static func meter(_ range: ClosedRange<Int>, base: Int = 90, faults: SimulatorFaults = SimulatorFaults()) -> MeterSimulator {
        let personality = MeterPersonality(
            address: Self.address, name: "CHUNK-1", manufacturer: "sugard simulator", model: "plain", serialNumber: "C1",
            clock: .currentTime(DateTime(year: 2025, month: 11, day: 24, hours: 17, minutes: 5)), startHandle: 0x0100,
            faults: faults)
        var meter = MeterSimulator(personality: personality)
        for index in range {
            meter.addRecord(
                SimulatedRecord(GlucoseMeasurement(
                    sequenceNumber: UInt16(index),
                    baseTime: DateTime(year: 2025, month: 1 + UInt8(index / 28 % 10), day: 1 + UInt8(index % 28), hours: UInt8(index % 24), minutes: UInt8(index % 60)),
                    concentration: SFloat(rawValue: 0xB000 | UInt16(base + index % 200)), unit: .kilogramsPerLiter,
                    type: .capillaryPlasma, sampleLocation: .finger)))
        }
        return meter
    }

    /// Issue 32: with the link dropping after 3 records, every attempt used to ask again from the
    /// unmoved mark (2 009 attempts stored 3 of 20). Now each attempt resumes after what is stored.
    @Test func aMeterThatAlwaysDropsAfterThreeRecordsDeliversAllTwentyWithinTenAttempts() async throws {
        let meter = Self.meter(1...20, faults: SimulatorFaults(alwaysDisconnectAfterRecords: 3))
        try await withSyncStack([meter]) { engine, transport, store, _ in
            var attempts = 0
            var last: SyncSessionRecord?
            while attempts < 10, last?.result != .success {
                attempts += 1
                last = try await engine.sync(meter: meter.id, force: true)
                if last?.result != .success {
                    #expect(last?.result == .interrupted, "attempt \(attempts): \(last?.error ?? "")")
                    // Three more records stored each time, and the mark follows them.
                    #expect(try await store.meter(meter.id)?.highWater == UInt16(3 * attempts))
                }
            }
            #expect(last?.result == .success, "\(last?.error ?? "")")
            #expect(attempts == 7, "20 records at 3 per attempt: 6 interrupted attempts, then the last 2")
            let seqs = try await stored(store, meter.id).map(\.reading.sequenceNumber)
            #expect(seqs == (1...20).map { UInt16($0) }, "each record stored once, in order")
            #expect(try await store.meter(meter.id)?.highWater == 20)
            let sessions = try await store.sessions(meter: meter.id, limit: 20)
            #expect(sessions.count == attempts)
            #expect(sessions.allSatisfy { $0.duplicates == 0 }, "no attempt asked again for what was stored")
            #expect(transport.simulator(meter.id)?.records.count == 20)
        }
    }

    /// The same over a meter that trickles its records (a report streamed one record at a time).
    @Test func theSameWhenTheMeterTricklesItsRecords() async throws {
        let meter = Self.meter(1...20, faults: SimulatorFaults(alwaysDisconnectAfterRecords: 3))
        let options = ReplayTransport.Options(operationDelay: .microseconds(200), wallClock: testWallClock)
        try await withSyncStack([meter], options: options) { engine, _, store, _ in
            var attempts = 0
            while attempts < 10, try await engine.sync(meter: meter.id, force: true).result != .success { attempts += 1 }
            #expect(attempts == 6)
            #expect(try await stored(store, meter.id).map(\.reading.sequenceNumber) == (1...20).map { UInt16($0) })
        }
    }

    /// 600 records: two chunks of 256 are committed while the transfer goes on (one session row
    /// that grows), the rest with the end of the attempt.
    @Test func chunksAreCommittedWhileRecordsArriveIntoOneSession() async throws {
        let meter = Self.meter(1...600)
        try await withSyncStack([meter]) { engine, _, store, observer in
            let session = try await engine.sync(meter: meter.id, force: true)
            #expect(session.result == .success && session.stored == 600 && session.received == 600)
            let commits = observer.all.compactMap { event -> CommitResult? in
                if case .committed(_, let result) = event { return result } else { return nil }
            }
            #expect(commits.map(\.inserted.count) == [256, 256, 88])
            #expect(commits.map(\.session.result) == [.running, .running, .success])
            #expect(commits.map(\.meter.highWater) == [256, 512, 600], "each chunk moved the mark")
            #expect(commits.map(\.session.stored) == [256, 512, 600], "one session row, its counts summed")
            #expect(Set(commits.compactMap(\.session.id)).count == 1)
            let sessions = try await store.sessions(meter: meter.id, limit: 10)
            #expect(sessions.count == 1 && sessions.first?.stored == 600 && sessions.first?.result == .success)
            #expect(try await store.readingCount(meter: meter.id) == 600)
        }
    }

    /// After an interrupted attempt moved the mark, the meter is reset (new content under the same
    /// numbers): the check of the record at the mark notices it before anything else is asked for,
    /// and everything goes into a new epoch; the first epoch keeps what it had.
    @Test func resetDetectionStillWorksAfterAPartialSync() async throws {
        let meter = Self.meter(1...10, faults: SimulatorFaults(disconnectAfterRecords: 5))
        try await withSyncStack([meter]) { engine, transport, store, _ in
            let first = try await engine.sync(meter: meter.id, force: true)
            #expect(first.result == .interrupted && first.stored == 5)
            #expect(try await store.meter(meter.id)?.highWater == 5)
            // The meter's memory is cleared and it takes 12 new readings, numbered from 1 again.
            transport.removeMeter(meter.id)
            transport.addMeter(Self.meter(1...12, base: 150))
            let second = try await engine.sync(meter: meter.id, force: true)
            #expect(second.result == .success && second.reset && second.stored == 12, "\(second.error ?? "")")
            let after = try #require(try await store.meter(meter.id))
            #expect(after.epoch == 1 && after.highWater == 12)
            let rows = try await stored(store, meter.id)
            #expect(rows.filter { $0.epoch == 0 }.map(\.reading.sequenceNumber) == [1, 2, 3, 4, 5])
            #expect(rows.filter { $0.epoch == 1 }.map(\.reading.sequenceNumber) == (1...12).map { UInt16($0) })
            let third = try await engine.sync(meter: meter.id, force: true)
            #expect(third.result == .noNewRecords && !third.reset)
        }
    }
}
