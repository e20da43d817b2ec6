import GlucoseProfile
import HealthDataSync
import Testing

/// Transfers advance, at the state-machine level: chunk commits as actions, the contiguous mark,
/// the resume point of the next attempt, the reset check before the delta, bounded anomalies.
@Suite struct SyncChunkTests {
    static func harness(
        highWater: UInt16? = nil, highWaterRecord: [UInt8]? = nil, chunkRecords: Int = 3, chunkSeconds: Double = 2
    ) -> Harness {
        var h = Harness(highWater: highWater)
        h.sm = SyncStateMachine(.init(
            meter: Harness.meter, highWater: highWater, highWaterRecord: highWaterRecord, zone: .utc,
            configuration: SyncConfiguration(chunkRecords: chunkRecords, chunkSeconds: chunkSeconds)))
        return h
    }

    /// The store's answer to a batch: session id 42, the mark as asked.
    static func committed(_ batch: SyncBatch, stored: Int, top: UInt16?) -> SyncEvent {
        var session = batch.session
        session.id = 42
        session.stored = stored
        return .committed(CommitResult(
            inserted: [], duplicates: 0, sequenceResets: 0,
            meter: StoredMeter(
                identity: batch.meter, features: nil, firstSeen: Instant(epochMillis: 0), lastSeen: Instant(epochMillis: 0),
                highWater: batch.newHighWater, epoch: 0, lastSync: nil, lastSyncResult: nil, readingCount: stored),
            session: session, highestInCurrentEpoch: top))
    }

    @Test func chunksGoToTheStoreEveryNRecordsWithTheContiguousMarkOneAtATime() throws {
        var h = Self.harness()
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x07, 0x00])
        _ = h.record(1)
        _ = h.record(2)
        #expect(h.record(3) == ["startTimer(operation, 20.0)", "commit(3, hw 3, running) chunk"])
        let first = try #require(h.committedBatch)
        #expect(!first.isFinal && first.session.id == nil && first.readings.map(\.sequenceNumber) == [1, 2, 3])
        // While that chunk is with the store, the next records wait.
        _ = h.record(4)
        _ = h.record(5)
        #expect(h.record(6) == ["startTimer(operation, 20.0)"])
        #expect(h.send(Self.committed(first, stored: 3, top: 3)) == ["commit(3, hw 6, running) chunk"])
        #expect(h.published.contains { if case .committed = $0 { true } else { false } })
        let second = try #require(h.committedBatch)
        #expect(second.session.id == 42, "later chunks add to the first one's session row")
        #expect(second.storedEarlier == 3 && second.highestReceived == 6)
        _ = h.record(7)
        // The transfer ends while the second chunk is with the store: the final batch waits for it.
        #expect(h.racp([0x06, 0x00, 0x01, 0x01]) == ["cancelTimer(operation)", "cancelTimer(retry)"])
        #expect(h.sm.phase == .committing)
        #expect(h.send(Self.committed(second, stored: 6, top: 6)) == ["commit(1, hw 7, success)"])
        let last = try #require(h.committedBatch)
        #expect(last.isFinal && last.session.id == 42 && last.session.received == 7 && last.storedEarlier == 6)
        #expect(h.sm.chunksCommitted == 2)
        let closed = h.close()
        #expect(closed?.result == .success)
    }

    /// A record whose context has not come yet stays for the next chunk, so it is stored with it.
    @Test func aRecordWaitingForItsContextWaitsForTheNextChunk() throws {
        var h = Self.harness()
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x04, 0x00])
        _ = h.record(1, context: true)
        _ = h.send(.value(.glucoseMeasurementContext, contextBytes(seq: 1, meal: 1)))
        _ = h.record(2)
        #expect(h.record(3, context: true).last == "commit(2, hw 2, running) chunk")
        let chunk = try #require(h.committedBatch)
        #expect(chunk.readings.map(\.meal) == [1, nil])
        _ = h.send(.value(.glucoseMeasurementContext, contextBytes(seq: 3, meal: 2)))
        _ = h.send(Self.committed(chunk, stored: 2, top: 2))
        _ = h.record(4)
        #expect(h.racp([0x06, 0x00, 0x01, 0x01]).last == "commit(2, hw 4, success)")
        #expect(try #require(h.committedBatch).readings.map(\.meal) == [2, nil])
        #expect(h.sm.anomalies.isEmpty, "\(h.sm.anomalies)")
    }

    @Test func aChunkAlsoGoesWhenItsFirstRecordWaitedTwoSeconds() {
        var h = Self.harness(chunkRecords: 256)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x03, 0x00])
        #expect(h.record(1) == ["startTimer(operation, 20.0)"])
        h.now = Instant(epochMillis: h.now.epochMillis + 1_999)
        #expect(h.record(2) == ["startTimer(operation, 20.0)"])
        h.now = Instant(epochMillis: h.now.epochMillis + 1)
        #expect(h.record(3) == ["startTimer(operation, 20.0)", "commit(3, hw 3, running) chunk"])
    }

    /// The mark stops at a packet that did not decode: the record it was may be the one missing.
    /// The next attempt asks for the records after the mark.
    @Test func anInterruptedTransferResumesAfterTheContiguousMark() throws {
        var h = Self.harness(chunkRecords: 256)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x06, 0x00])
        _ = h.record(1)
        _ = h.record(2)
        _ = h.record(3)
        _ = h.send(.value(.glucoseMeasurement, [0x02, 0x04, 0x00, 0xE8]))  // record 4, truncated
        _ = h.record(5)
        #expect(h.sm.contiguousMark == nil, "nothing handed to the store yet")
        #expect(h.send(.disconnected(reason: "link lost")).last == "commit(4, hw 3, interrupted)")
        #expect(try #require(h.committedBatch).readings.map(\.sequenceNumber) == [1, 2, 3, 5])

        var next = Self.harness(highWater: 3)
        next.toCounting()
        #expect(next.lastStrings.contains("write(04 03 01 04 00 count)"))
        #expect(next.racp([0x05, 0x00, 0x03, 0x00]).first == "write(01 03 01 04 00 report)")
    }

    /// Numbers going backwards (a meter sending out of order, or a wrap) stop the mark too.
    @Test func numbersGoingBackwardsStopTheMark() {
        var h = Self.harness(chunkRecords: 2)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x04, 0x00])
        _ = h.record(10)
        #expect(h.record(11).last == "commit(2, hw 11, running) chunk")
        _ = h.send(Self.committed(h.committedBatch!, stored: 2, top: 11))
        _ = h.record(3)
        #expect(h.record(12).last == "commit(2, hw 11, running) chunk")
    }

    @Test func theResetCheckRunsBeforeTheDeltaAndAResetDownloadsEverythingIntoANewEpoch() throws {
        let stored = measurementBytes(seq: 5, 2024, 6, 14, 8, 5, sfloat: mgdl(100))
        var same = Self.harness(highWater: 5, highWaterRecord: stored)
        same.toCounting()
        #expect(same.lastStrings.contains("write(01 04 01 05 00 05 00 verify)"))
        _ = same.send(.value(.glucoseMeasurement, stored))
        #expect(same.racp([0x06, 0x00, 0x01, 0x01]).contains("write(04 03 01 06 00 count)"))
        #expect(!same.sm.resetDetected)

        var reset = Self.harness(highWater: 5, highWaterRecord: stored)
        reset.toCounting()
        _ = reset.send(.value(.glucoseMeasurement, measurementBytes(seq: 5, 2024, 7, 1, 9, sfloat: mgdl(150))))
        #expect(reset.racp([0x06, 0x00, 0x01, 0x01]).contains("write(04 01 count)"))
        #expect(reset.sm.resetDetected)
        #expect(reset.racp([0x05, 0x00, 0x04, 0x00]).first == "write(01 01 report)")
        _ = reset.record(1)
        _ = reset.record(2)
        #expect(reset.record(3).last == "commit(3, hw 3, running) chunk")
        let chunk = try #require(reset.committedBatch)
        #expect(chunk.meterReset, "the first chunk opens the new epoch")
        _ = reset.send(Self.committed(chunk, stored: 3, top: 3))
        _ = reset.record(4)
        #expect(reset.racp([0x06, 0x00, 0x01, 0x01]).last == "commit(1, hw 4, success)")
        #expect(try #require(reset.committedBatch).meterReset == false, "only once")
    }

    @Test func aChunkTheStoreRefusesEndsTheAttemptAndTheMarkStaysWhereItWas() throws {
        var h = Self.harness()
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x05, 0x00])
        _ = h.record(1)
        _ = h.record(2)
        _ = h.record(3)
        _ = h.record(4)
        let actions = h.send(.commitFailed(StoreError(.diskFull, "disk full")))
        #expect(actions.last == "commit(1, hw nil, failed)")
        #expect(try #require(h.committedBatch).readings.map(\.sequenceNumber) == [4])
        _ = h.send(.commitFailed(StoreError(.diskFull, "disk full")))
        _ = h.send(.disconnectCompleted)
        guard case .failed(let failure) = h.sm.phase else { Issue.record("not failed"); return }
        #expect(failure.code == .storeError)
    }

    /// A hostile meter: 5 000 undecodable packets. The machine keeps a count per kind and the
    /// first 20 in full, and the published summary is as small.
    @Test func anomaliesAreCountedNotListed() {
        var h = Self.harness(chunkRecords: 256)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x01, 0x00])
        for _ in 0..<5_000 { _ = h.send(.value(.glucoseMeasurement, [0x02, 0x05])) }
        _ = h.record(1)
        _ = h.racp([0x06, 0x00, 0x01, 0x01])
        #expect(h.sm.anomalies.count == SyncAnomalySummary.sampleLimit)
        #expect(h.sm.anomalySummary.total == 5_000)
        #expect(h.sm.anomalySummary.description == "malformedMeasurement=5000")
        _ = h.close()
        let published = h.published.compactMap { if case .anomalies(_, let summary) = $0 { summary } else { nil } }
        #expect(published.map(\.total) == [5_000] && published.first?.samples.count == 20)
    }
}
