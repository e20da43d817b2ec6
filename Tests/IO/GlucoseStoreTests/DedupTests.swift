import HealthDataSync
import Testing

@testable import GlucoseStore

@Suite struct DedupTests {
    @Test func meterResendingAllRecordsStoresNothingNewAndKeepsTheHighWaterMark() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        let first = try await store.commit(syncOf(1...10))
        #expect(first.inserted.map(\.reading.sequenceNumber) == Array(1...10))
        #expect(first.meter.highWater == 10)

        // Contour-style: the meter sends everything again, and the engine reports a lower mark.
        let again = try await store.commit(makeBatch((1...10).map { makeReading($0) }, newHighWater: 4))
        #expect(again.inserted.isEmpty)
        #expect(again.duplicates == 10)
        #expect(again.sequenceResets == 0)
        #expect(again.meter.highWater == 10)
        #expect(again.meter.epoch == 0)
        #expect(try await store.readingCount(meter: testMeter) == 10)
        #expect(try await store.events(meter: testMeter, limit: 10).isEmpty)
        #expect(again.session.stored == 0 && again.session.duplicates == 10)
    }

    @Test func recordSentTwiceInARowInsideOneBatchIsStoredOnce() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        let result = try await store.commit(
            makeBatch([makeReading(1), makeReading(2), makeReading(2), makeReading(3)], newHighWater: 3))
        #expect(result.inserted.map(\.reading.sequenceNumber) == [1, 2, 3])
        #expect(result.duplicates == 1)
        #expect(result.sequenceResets == 0)
    }

    @Test func identicalContentAtAnotherSequenceNumberIsANewRecord() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        let base = LocalDateTime(year: 2024, month: 5, day: 1, hour: 7)
        let result = try await store.commit(
            makeBatch([makeReading(1, base: base, mgdL: 99), makeReading(2, base: base, mgdL: 99)], newHighWater: 2))
        #expect(result.inserted.count == 2)
        #expect(result.duplicates == 0)
        #expect(try await store.readingCount(meter: nil) == 2)
    }

    @Test func sameKeyWithOtherBytesOrContextInTheCurrentEpochIsADuplicate() async throws {
        // Rule 1 compares (seq, base time, raw value) only: a re-send whose status byte or context
        // differs is still the same record, and the first stored version is kept unchanged.
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(makeBatch([makeReading(1)], newHighWater: 1))
        let result = try await store.commit(
            makeBatch([makeReading(1, context: [0x02, 0x01, 0x00, 0x01], statusByte: 0x12)], newHighWater: 1))
        #expect(result.duplicates == 1)
        #expect(result.inserted.isEmpty)
        let stored = try await store.readings(ReadingQuery())
        #expect(stored.map(\.reading) == [makeReading(1)])
    }

    @Test func sameSequenceNumberWithOtherContentOpensANewEpoch() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...10))

        // The meter was reset: its counter starts at 1 again, with later records.
        let later = LocalDateTime(year: 2024, month: 9, day: 1)
        let fresh = (1...3).map { makeReading(UInt16($0), base: later.adding(seconds: Int64($0) * 600), mgdL: 140) }
        let result = try await store.commit(makeBatch(fresh, newHighWater: 3))
        #expect(result.sequenceResets == 1)
        #expect(result.inserted.count == 3)
        #expect(result.inserted.allSatisfy { $0.epoch == 1 })
        #expect(result.meter.epoch == 1)
        #expect(result.meter.highWater == 3)
        #expect(try await store.readingCount(meter: testMeter) == 13)

        let events = try await store.events(meter: testMeter, limit: 10)
        #expect(events.count == 1)
        let event = try #require(events.first)
        #expect(event.reason == .sequenceConflict)
        #expect(event.oldEpoch == 0 && event.newEpoch == 1)
        #expect(event.sequenceNumber == 1)
        #expect(event.oldHighWater == 10)
        #expect(event.sessionID == result.session.id)
        #expect(event.at == Instant(epochSeconds: 1_720_000_000))

        // Old-epoch readings keep their epoch.
        let all = try await store.readings(ReadingQuery(meter: testMeter))
        #expect(all.filter { $0.epoch == 0 }.count == 10)
    }

    @Test func sameSequenceNumberAndTimeButAnotherValueIsAResetNotAMerge() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(makeBatch([makeReading(1, mgdL: 100)], newHighWater: 1))
        let result = try await store.commit(makeBatch([makeReading(1, mgdL: 180)], newHighWater: 1))
        #expect(result.sequenceResets == 1)
        #expect(result.inserted.count == 1)
        let values = try await store.readings(ReadingQuery()).map { $0.reading.mgdL }
        #expect(values.sorted { ($0 ?? 0) < ($1 ?? 0) } == [100, 180])
    }

    @Test func batchEndingBelowTheHighWaterMarkWithNewContentOpensANewEpoch() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        // The store first met this meter when it held records 50…60 only.
        _ = try await store.commit(syncOf(50...60))
        // After a reset the meter has records 1…3: no stored sequence number conflicts.
        let later = LocalDateTime(year: 2025, month: 1, day: 1)
        let fresh = (1...3).map { makeReading(UInt16($0), base: later.adding(seconds: Int64($0) * 60)) }
        let result = try await store.commit(makeBatch(fresh, newHighWater: 3))
        #expect(result.sequenceResets == 1)
        #expect(result.inserted.allSatisfy { $0.epoch == 1 })
        #expect(result.meter.highWater == 3)
        let event = try #require(try await store.events(meter: testMeter, limit: 1).first)
        #expect(event.reason == .highWaterBackwards)
        #expect(event.oldHighWater == 60)
    }

    @Test func duplicatesBelowTheHighWaterMarkDoNotOpenAnEpoch() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...60))
        let result = try await store.commit(syncOf(1...3))
        #expect(result.sequenceResets == 0)
        #expect(result.duplicates == 3)
        #expect(result.meter.highWater == 60)
    }

    @Test func replayingRecordsOfAnEarlierEpochStoresNothing() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        let before = syncOf(1...10)
        _ = try await store.commit(before)
        let later = LocalDateTime(year: 2024, month: 9, day: 1)
        let after = makeBatch(
            (1...3).map { makeReading(UInt16($0), base: later.adding(seconds: Int64($0) * 600)) }, newHighWater: 3)
        _ = try await store.commit(after)

        // The same capture replayed twice: the pre-reset records conflict with epoch 1 by sequence
        // number but are identical to epoch-0 records, so they are duplicates, not a new reset.
        for _ in 0..<2 {
            let replayBefore = try await store.commit(before)
            #expect(replayBefore.inserted.isEmpty)
            #expect(replayBefore.duplicates == 10)
            #expect(replayBefore.sequenceResets == 0)
            #expect(replayBefore.meter.highWater == 3)  // numbers of an old epoch don't move the mark
            let replayAfter = try await store.commit(after)
            #expect(replayAfter.inserted.isEmpty)
            #expect(replayAfter.duplicates == 3)
            #expect(replayAfter.sequenceResets == 0)
        }
        #expect(try await store.readingCount(meter: nil) == 13)
        #expect(try await store.events(meter: nil, limit: 10).count == 1)
        #expect(try await store.meter(testMeter)?.epoch == 1)
    }

    @Test func newRecordsAfterAResetGoOnInTheNewEpoch() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...10))
        let later = LocalDateTime(year: 2024, month: 9, day: 1)
        func fresh(_ seq: UInt16) -> Reading { makeReading(seq, base: later.adding(seconds: Int64(seq) * 600)) }
        _ = try await store.commit(makeBatch((1...3).map(fresh), newHighWater: 3))
        // Next sync asks for ≥ 4 and gets 4…12: seq 4…10 exist in epoch 0 with other content, but
        // they are not in the current epoch, so no further reset.
        let next = try await store.commit(makeBatch((4...12).map(fresh), newHighWater: 12))
        #expect(next.sequenceResets == 0)
        #expect(next.inserted.count == 9)
        #expect(next.inserted.allSatisfy { $0.epoch == 1 })
        #expect(next.meter.highWater == 12)
        #expect(try await store.readingCount(meter: testMeter) == 22)
    }

    @Test func resetInsideOneBatchSplitsItAcrossEpochs() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...5))
        let later = LocalDateTime(year: 2024, month: 9, day: 1)
        // Records 6 and 7 of the old counter, then the meter's counter restarts at 1.
        let readings = [makeReading(6), makeReading(7), makeReading(1, base: later), makeReading(2, base: later.adding(seconds: 60))]
        let result = try await store.commit(makeBatch(readings, newHighWater: 2))
        #expect(result.inserted.map(\.epoch) == [0, 0, 1, 1])
        #expect(result.sequenceResets == 1)
        #expect(result.meter.highWater == 2)
    }

    /// Batches of 32 readings or more skip the per-reading lookup for sequence numbers that have
    /// no stored row in any epoch (one range scan per batch): the same decisions as the small
    /// batches above, for new, re-sent, in-batch repeated, conflicting and earlier-epoch readings.
    @Test func largeBatchesDecideLikeSmallOnes() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        let first = try await store.commit(syncOf(1...40))
        #expect(first.inserted.map(\.reading.sequenceNumber) == Array(1...40) && first.duplicates == 0)

        // Everything again plus ten new ones, one of them sent twice in the batch.
        let resent = (1...50).map { makeReading(UInt16($0)) } + [makeReading(45)]
        let again = try await store.commit(makeBatch(resent, newHighWater: 50))
        #expect(again.inserted.map(\.reading.sequenceNumber) == Array(41...50))
        #expect(again.duplicates == 41)
        #expect(again.sequenceResets == 0)

        // The meter was reset: 1…40 again with later records. The first conflicts (a new epoch);
        // the rest exist only in the earlier epoch with other content, so they are new.
        let later = LocalDateTime(year: 2024, month: 9, day: 1)
        let fresh = (1...40).map { makeReading(UInt16($0), base: later.adding(seconds: Int64($0) * 600), mgdL: 140) }
        let reset = try await store.commit(makeBatch(fresh, newHighWater: 40))
        #expect(reset.sequenceResets == 1)
        #expect(reset.inserted.count == 40 && reset.inserted.allSatisfy { $0.epoch == 1 })

        // The pre-reset records replayed: duplicates of epoch 0, no new reset.
        let replay = try await store.commit(syncOf(1...40))
        #expect(replay.inserted.isEmpty && replay.duplicates == 40 && replay.sequenceResets == 0)
        #expect(try await store.readingCount(meter: testMeter) == 90)
        #expect(try await store.events(meter: testMeter, limit: 10).count == 1)
    }

    /// Numbers a large batch brings to a fresh meter are classified from the batch's own inserts,
    /// without lookups: the same decisions as the lookups one-reading batches make.
    @Test func aLargeBatchDecidesItsOwnReSendsLikeTheLookups() async throws {
        let later = LocalDateTime(year: 2024, month: 9, day: 1)
        func other(_ seq: UInt16) -> Reading { makeReading(seq, base: later.adding(seconds: Int64(seq) * 600), mgdL: 140) }
        // 1…40; 7 re-sent (duplicate); 10 with other content (conflict: epoch 1); 11…20 other content
        // (new in epoch 1); 5 and 30 as first sent (earlier-epoch duplicates); 12 of epoch 1 again
        // (duplicate); 15 as first sent (epoch 1 holds another 15, epoch 0 this one: an earlier-epoch
        // duplicate, no reset); 41 new.
        let stream =
            (1...40).map { makeReading(UInt16($0)) } + [makeReading(7), other(10)] + (11...20).map { other(UInt16($0)) }
            + [makeReading(5), makeReading(30), other(12), makeReading(15), makeReading(41)]
        let oneDir = try TempDirectory()
        let one = try openStore(oneDir.database)
        let batch = try await one.commit(makeBatch(stream, newHighWater: nil))
        let eachDir = try TempDirectory()
        let each = try openStore(eachDir.database)
        var inserted: [StoredReading] = []
        var duplicates = 0
        var resets = 0
        for reading in stream {
            let result = try await each.commit(makeBatch([reading], newHighWater: nil))
            inserted += result.inserted
            duplicates += result.duplicates
            resets += result.sequenceResets
        }
        func decided(_ rows: [StoredReading]) -> [[Int]] {
            rows.map { [Int($0.reading.sequenceNumber), $0.epoch, Int($0.reading.concentrationRaw ?? 0)] }
        }
        #expect(batch.duplicates == 5 && batch.sequenceResets == 1 && batch.inserted.count == 52)
        #expect(decided(batch.inserted) == decided(inserted))
        #expect(batch.duplicates == duplicates && batch.sequenceResets == resets)
        #expect(try await one.readingCount(meter: testMeter) == each.readingCount(meter: testMeter))
        #expect(try await one.events(meter: testMeter, limit: 10).count == 1)
    }

    @Test func rePairingUnderTheSameAddressKeepsTheMeter() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...5))
        // A new bond: BlueZ reports the same identity address, perhaps spelled differently, with a
        // new alias; Device Information may not have been read yet.
        let rePaired = MeterIdentity(id: MeterID("c0-26-da-01-02-03"), name: "Accu-Chek 2")
        try await store.noteMeterSeen(rePaired, at: Instant(epochSeconds: 1_710_100_000))
        let meter = try #require(try await store.meter(testMeter))
        #expect(meter.identity.name == "Accu-Chek 2")
        #expect(meter.identity.serialNumber == "SN-1")
        #expect(meter.epoch == 0)
        #expect(meter.highWater == 5)
        let result = try await store.commit(syncOf(1...7, meter: MeterIdentity(id: MeterID("C0:26:DA:01:02:03"))))
        #expect(result.duplicates == 5)
        #expect(result.inserted.count == 2)
        #expect(try await store.meters().count == 1)
    }

    @Test func anotherSerialNumberUnderTheSameAddressOpensAnEpoch() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...5))
        try await store.noteMeterSeen(identity(serial: "SN-2"), at: Instant(epochSeconds: 1_710_100_000))
        let meter = try #require(try await store.meter(testMeter))
        #expect(meter.epoch == 1)
        #expect(meter.highWater == nil)
        let event = try #require(try await store.events(meter: testMeter, limit: 1).first)
        #expect(event.reason == .serialNumberChanged)
        #expect(event.sessionID == nil)
    }

    @Test func failedSyncStoresReceivedRecordsButNoHighWaterMark() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...5))
        let failed = try await store.commit(
            makeBatch((6...8).map { makeReading($0) }, newHighWater: nil, result: .interrupted, error: "Meter disconnected."))
        #expect(failed.inserted.count == 3)
        #expect(failed.meter.highWater == 5)
        #expect(failed.meter.lastSyncResult == .interrupted)
        // The retry re-reads from 6: the stored ones are duplicates; the mark moves on success.
        let retry = try await store.commit(makeBatch((6...9).map { makeReading($0) }, newHighWater: 9))
        #expect(retry.duplicates == 3)
        #expect(retry.inserted.map(\.reading.sequenceNumber) == [9])
        #expect(retry.meter.highWater == 9)
        let sessions = try await store.sessions(meter: testMeter, limit: 10)
        #expect(sessions.map(\.result).contains(.interrupted))
        #expect(sessions.first { $0.result == .interrupted }?.error == "Meter disconnected.")
    }

    @Test func resetInAFailedSyncClearsTheOldEpochsMark() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...10))
        let later = LocalDateTime(year: 2024, month: 9, day: 1)
        let result = try await store.commit(
            makeBatch([makeReading(1, base: later)], newHighWater: nil, result: .failed, error: "RACP error."))
        #expect(result.sequenceResets == 1)
        #expect(result.meter.epoch == 1)
        #expect(result.meter.highWater == nil)
    }

    @Test func noRecordsFoundKeepsOrRaisesTheMark() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...5))
        let none = try await store.commit(makeBatch([], newHighWater: 5, result: .noNewRecords))
        #expect(none.meter.highWater == 5)
        #expect(none.session.result == .noNewRecords)
        let lower = try await store.commit(makeBatch([], newHighWater: 2, result: .noNewRecords))
        #expect(lower.meter.highWater == 5)
        #expect(lower.sequenceResets == 0)
    }

    @Test func highWaterMarkNeverPassesTheRecordsOfTheBatch() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        let result = try await store.commit(makeBatch((1...5).map { makeReading($0) }, newHighWater: 100))
        #expect(result.meter.highWater == 5)
    }

    @Test func forgettingKeepsReadingsAndClearsTheMark() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...5))
        _ = try await store.commit(syncOf(1...2, meter: identity(otherMeter, serial: "X")))
        try await store.forget(testMeter)
        #expect(try await store.meter(testMeter) == nil)
        #expect(try await store.meters().map(\.identity.id) == [otherMeter])
        #expect(try await store.readingCount(meter: testMeter) == 5)
        #expect(try await store.sessions(meter: testMeter, limit: 10).count == 1)
        let summary = try #require(try await store.summaries().first { $0.meter.identity.id == testMeter })
        #expect(summary.forgotten)

        // Seen again: it syncs from scratch and dedup keeps that safe.
        try await store.noteMeterSeen(identity(), at: Instant(epochSeconds: 1_710_200_000))
        let back = try #require(try await store.meter(testMeter))
        #expect(back.highWater == nil)
        #expect(back.readingCount == 5)
        let resync = try await store.commit(syncOf(1...6))
        #expect(resync.duplicates == 5)
        #expect(resync.inserted.count == 1)
        #expect(resync.sequenceResets == 0)
        #expect(resync.meter.highWater == 6)
    }
}
