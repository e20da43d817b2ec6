import HealthDataSync
import Testing

@testable import GlucoseStore

/// The indexed lookups a sync uses instead of loading a meter's history, and a meter reset the
/// sync detected.
@Suite struct LookupTests {
    @Test func theHighWaterRecordIsLookedUpInTheCurrentEpoch() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...5))
        let five = try await store.storedMeasurement(meter: testMeter, sequenceNumber: 5)
        #expect(five == makeReading(5).measurementBytes)
        #expect(try await store.storedMeasurement(meter: testMeter, sequenceNumber: 6) == nil)
        #expect(try await store.storedMeasurement(meter: otherMeter, sequenceNumber: 5) == nil)
        #expect(try await store.highestSequenceNumber(meter: testMeter) == 5)
        #expect(try await store.highestSequenceNumber(meter: otherMeter) == nil)
    }

    @Test func storedContentFindsOnlyTheCandidatesHeld() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...3))
        let held = ReadingContent(makeReading(2))
        let otherValue = ReadingContent(makeReading(2, mgdL: 140))
        let notHeld = ReadingContent(makeReading(9))
        let found = try await store.storedContent(meter: testMeter, among: [held, otherValue, notHeld])
        #expect(found == [held])
        #expect(try await store.storedContent(meter: otherMeter, among: [held]).isEmpty)
        // An indexed lookup per base time, never a scan of the meter's history.
        let plan = try await store.textForTesting(
            "EXPLAIN QUERY PLAN SELECT time_offset_min FROM reading WHERE meter_id = 1 AND base_time = 'x'", column: 3)
        #expect(plan.contains { $0.contains("reading_by_meter_base_time") }, "\(plan)")
        let maxPlan = try await store.textForTesting("EXPLAIN QUERY PLAN SELECT max(seq) FROM reading WHERE meter_id = 1", column: 3)
        #expect(maxPlan.contains { $0.contains("reading_by_seq") }, "\(maxPlan)")
    }

    @Test func aMeterResetOpensANewEpochAndIsRecordedInTheSession() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...10))
        // The meter's whole memory after a reset: 1-12 with other values.
        var batch = makeBatch((1...12).map { makeReading($0, mgdL: 150) }, newHighWater: 12, started: Instant(epochSeconds: 1_710_001_000))
        batch.meterReset = true
        let result = try await store.commit(batch)
        #expect(result.inserted.count == 12 && result.sequenceResets == 1 && result.session.reset)
        #expect(result.meter.epoch == 1 && result.meter.highWater == 12)
        let sessions = try await store.sessions(meter: testMeter, limit: 5)
        #expect(sessions.map(\.sequenceResets) == [1, 0])
        let event = try #require(try await store.events(meter: testMeter, limit: 1).first)
        #expect(event.reason == .meterReset && event.oldHighWater == 10 && event.newEpoch == 1)
        #expect(try await store.storedMeasurement(meter: testMeter, sequenceNumber: 10) == makeReading(10, mgdL: 150).measurementBytes)
        #expect(try await store.readingCount(meter: testMeter) == 22)
    }
}
