#if canImport(Glibc)
import Glibc
#endif
import GlucoseStore
import HealthDataSync

/// `sugar-bench ingest N [--raw]`: stores N synthetic readings (several meters, 10 % re-sent
/// records, one sequence reset) and measures it.
///
/// - store mode: every batch goes through ``SQLiteReadingStore/commit(_:)`` (dedup lookups, one
///   `BEGIN IMMEDIATE` … `COMMIT` with `synchronous=FULL` per batch, session rows, events).
/// - raw mode: the same distinct readings inserted with one plain prepared statement in ONE
///   transaction, no dedup (duplicates are left out beforehand): the ceiling to compare against.
///
/// Generating the data is not timed; `peakRSSBytes` is the whole process's, data included.
public enum IngestBenchmark {
    public struct Result: Hashable, Sendable {
        /// "store" or "raw".
        public var mode: String
        /// Readings handed over, duplicates included.
        public var readings: Int
        public var stored: Int
        public var duplicatesDropped: Int
        public var sequenceResets: Int
        public var batches: Int
        public var seconds: Double
        public var readingsPerSecond: Double
        public var peakRSSBytes: Int
        public var databaseBytes: Int

        /// Name/value pairs in a stable order, for printing as JSON.
        public var fields: [(name: String, value: Double)] {
            [
                ("readings", Double(self.readings)), ("seconds", self.seconds),
                ("readingsPerSecond", self.readingsPerSecond), ("duplicatesDropped", Double(self.duplicatesDropped)),
                ("peakRSSBytes", Double(self.peakRSSBytes)), ("stored", Double(self.stored)),
                ("sequenceResets", Double(self.sequenceResets)), ("batches", Double(self.batches)),
                ("databaseBytes", Double(self.databaseBytes)),
            ]
        }
    }

    /// Runs the benchmark with a fresh database file `ingest-<mode>.sqlite` in `directory`
    /// (removed first if present, left in place afterwards).
    public static func run(
        count: Int, raw: Bool, directory: String, batchSize: Int = 500
    ) async throws(StoreError) -> Result {
        let path = directory + "/ingest-" + (raw ? "raw" : "store") + ".sqlite"
        for suffix in ["", "-wal", "-shm"] { _ = unlink(path + suffix) }
        let plan = SyntheticIngest(readings: count, meters: 4, batchSize: batchSize)
        let batches = plan.batches()
        let submitted = batches.reduce(0) { $0 + $1.readings.count }
        let clock = ContinuousClock()
        var stored = 0
        var duplicates = 0
        var resets = 0
        let elapsed: Duration
        if raw {
            let expected = plan.expected()
            let start = clock.now
            let db = try SQLiteReadingStore.open(path: path, options: StoreOptions(), readOnly: false).0
            let now = systemNow()
            try db.transaction("Raw ingest") { () throws(StoreError) in
                for (index, records) in expected.enumerated() {
                    let identity = MeterIdentity(id: SyntheticIngest.meterID(index))
                    let meter = try MeterRow.upsert(identity, features: nil, seenAt: now, db).0
                    for record in records {
                        _ = try ReadingRows.insert(
                            record.reading, meterRowID: meter.rowID,
                            epoch: record.epoch, storedAt: now, sessionID: nil, db)
                    }
                    stored += records.count
                }
            }
            db.close()
            elapsed = clock.now - start
            duplicates = submitted - stored
            resets = plan.expectedResets
        } else {
            // The schema is made before the clock starts, as the C yardstick's is: the timed part
            // opens an existing, empty database, commits the batches and closes it.
            let fresh = try SQLiteReadingStore(path: path)
            await fresh.close()
            let start = clock.now
            let store = try SQLiteReadingStore(path: path)
            for batch in batches {
                let result = try await store.commit(batch)
                stored += result.inserted.count
                duplicates += result.duplicates
                resets += result.sequenceResets
            }
            await store.close()
            elapsed = clock.now - start
        }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        var info = stat()
        let size = stat(path, &info) == 0 ? Int(info.st_size) : 0
        return Result(
            mode: raw ? "raw" : "store", readings: submitted, stored: stored, duplicatesDropped: duplicates,
            sequenceResets: resets, batches: raw ? 1 : batches.count, seconds: seconds,
            readingsPerSecond: seconds > 0 ? Double(submitted) / seconds : 0, peakRSSBytes: peakResidentSetBytes() ?? 0,
            databaseBytes: size)
    }
}
