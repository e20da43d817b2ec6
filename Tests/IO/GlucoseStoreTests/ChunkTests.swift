import HealthDataSync
import Testing

@testable import GlucoseStore

/// A sync hands its records over in chunks: each chunk one transaction with the contiguous mark;
/// the attempt keeps one session row; the meter's last sync changes only with the final batch.
@Suite struct ChunkTests {
    static func chunk(_ seqs: ClosedRange<UInt16>, mark: UInt16?, session: Int64?, storedEarlier: UInt16? = nil) -> SyncBatch {
        var batch = makeBatch(seqs.map { makeReading($0) }, newHighWater: mark, result: .running)
        batch.session.ended = nil
        batch.session.id = session
        batch.isFinal = false
        batch.highestReceived = seqs.upperBound
        batch.storedEarlier = storedEarlier
        return batch
    }

    @Test func chunksOfOneAttemptShareASessionAndMoveTheMark() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        let first = try await store.commit(Self.chunk(1...256, mark: 256, session: nil))
        let id = try #require(first.session.id)
        #expect(first.meter.highWater == 256 && first.highestInCurrentEpoch == 256)
        #expect(first.meter.lastSync == nil && first.meter.lastSyncResult == nil, "a chunk is not the end of a sync")
        #expect(try await store.sessions(meter: testMeter, limit: 5).first?.result == .running)

        let second = try await store.commit(Self.chunk(257...400, mark: 400, session: id, storedEarlier: 256))
        #expect(second.session.id == id && second.session.stored == 400, "counts summed over the attempt")
        #expect(second.meter.highWater == 400)

        // The end: nothing left to store, the attempt succeeded.
        var last = makeBatch([], newHighWater: 400)
        last.session.id = id
        last.session.received = 400
        last.highestReceived = 400
        last.storedEarlier = 400
        let end = try await store.commit(last)
        #expect(end.session.stored == 400 && end.session.result == .success)
        #expect(end.meter.highWater == 400 && end.meter.lastSyncResult == .success)
        let sessions = try await store.sessions(meter: testMeter, limit: 5)
        #expect(sessions.count == 1 && sessions[0].stored == 400 && sessions[0].received == 400 && sessions[0].result == .success)
        #expect(try await store.readingCount(meter: testMeter) == 400)
    }

    /// An empty final batch after chunks of nothing but earlier-epoch copies does not claim a
    /// record the current epoch lacks (the mark rests on what the chunks stored).
    @Test func anEmptyEndAfterChunksRestsTheMarkOnWhatWasStored() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        let first = try await store.commit(Self.chunk(1...10, mark: 10, session: nil))
        var last = makeBatch([], newHighWater: 12)
        last.session.id = first.session.id
        last.storedEarlier = 10
        #expect(try await store.commit(last).meter.highWater == 10)
    }

    /// A chunk below the stored mark (a full download of a meter that holds more) is the start of
    /// the transfer, not a reset: only the end of an attempt can show the meter went backwards.
    @Test func aChunkBelowTheMarkOpensNoEpoch() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...600))
        // Record 5 was never stored (say its packet did not decode then): it is new now.
        _ = try await store.executeForTesting("DELETE FROM feed WHERE reading_id IN (SELECT id FROM reading WHERE seq = 5); DELETE FROM reading WHERE seq = 5")
        let chunk = try await store.commit(Self.chunk(1...256, mark: 256, session: nil))
        #expect(chunk.sequenceResets == 0 && chunk.inserted.map(\.reading.sequenceNumber) == [5])
        #expect(chunk.meter.highWater == 600 && chunk.meter.epoch == 0)
    }

    /// A daemon killed mid-transfer leaves its session running; the meter's next attempt closes it.
    @Test func aSessionCutOffByAKillIsClosedByTheNextAttempt() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(Self.chunk(1...256, mark: 256, session: nil))
        _ = try await store.commit(syncOf(257...300))
        let sessions = try await store.sessions(meter: testMeter, limit: 5)
        #expect(sessions.map(\.result).sorted { $0.rawValue < $1.rawValue } == [.interrupted, .success])
        #expect(sessions.first { $0.result == .interrupted }?.error?.contains("stopped") == true)
    }
}
