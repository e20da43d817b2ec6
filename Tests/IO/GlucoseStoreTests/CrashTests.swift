import Foundation
import HealthDataSync
import Testing
import TestSupport

@testable import GlucoseStore
@testable import GlucoseStoreFixtures

/// SIGKILLs a writing process at random points during a large ingest, then checks that a re-run
/// completes the ingest with every record stored exactly once in the right epoch, no partial batch
/// ever visible, and `PRAGMA integrity_check` ok.
///
/// Set `SUGARD_KILLTEST_SEED` to replay a run; the seed is printed.
@Suite(.serialized) struct CrashTests {
    static let readings = 6000
    static let meters = 3
    static let batchSize = 40
    static let interruptedEvery = 7
    static let dataSeed: UInt64 = 7
    static let kills = 20

    static func plan() -> SyntheticIngest {
        SyntheticIngest(
            readings: Self.readings, meters: Self.meters, batchSize: Self.batchSize,
            interruptedEvery: Self.interruptedEvery, seed: Self.dataSeed)
    }

    /// The writer executable, built next to the test bundle (`.build/<triple>/debug`).
    static func writerPath() throws -> String {
        let name = "store-killtest-writer"
        var candidates: [String] = []
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        candidates.append(bundle.appendingPathComponent(name).path)
        candidates.append(bundle.deletingLastPathComponent().appendingPathComponent(name).path)
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        candidates.append(root.appendingPathComponent(".build/debug/\(name)").path)
        for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        throw StoreError(.cannotOpen, "\(name) not found in \(candidates); run `swift build` first.")
    }

    static func writer(_ path: String, database: String) -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = [
            database, String(Self.readings), String(Self.meters), String(Self.batchSize), String(Self.dataSeed),
            String(Self.interruptedEvery),
        ]
        process.standardOutput = FileHandle.nullDevice
        return process
    }

    /// Opens the database as the daemon would after a crash and checks it is consistent.
    static func checkConsistent(_ database: String, after kill: Int) async throws -> Int {
        let store = try SQLiteReadingStore(path: database)
        #expect(try await store.integrityCheck() == ["ok"], "integrity after kill \(kill)")
        // Every committed session's readings are all there: no batch is ever half visible.
        let partial = try await store.textForTesting(
            "SELECT count(*) FROM sync_session s WHERE s.stored != (SELECT count(*) FROM reading r WHERE r.session_id = s.id)")
        #expect(partial == ["0"], "partial batches after kill \(kill)")
        let count = try await store.readingCount(meter: nil)
        await store.close()
        return count
    }

    @Test(.timeLimit(.minutes(2))) func killedWriterLosesAndDuplicatesNothing() async throws {
        let seed = ProcessInfo.processInfo.environment["SUGARD_KILLTEST_SEED"].flatMap { UInt64($0) }
            ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("CrashTests seed: \(seed) (SUGARD_KILLTEST_SEED=\(seed) to replay)")
        var random = SplitMix64(seed: seed)
        let writer = try Self.writerPath()
        let dir = try TempDirectory()

        // Slices cover all but the last two batches, so the writer is still running when killed.
        let batches = Self.plan().batches().count - 2
        var counts: [Int] = []
        var landed = 0
        for kill in 1...Self.kills {
            // Kill i lands in the i-th slice of the ingest: once the writer reports a randomly
            // chosen batch of that slice committed, wait a random part of a commit, then SIGKILL.
            // Each run starts over (stored records come back as duplicates), so kills hit both
            // re-checked and new batches, and every slice of the ingest is interrupted once.
            let sliceStart = (kill - 1) * batches / Self.kills
            let sliceEnd = max(sliceStart + 1, kill * batches / Self.kills)
            let target = sliceStart + Int(random.next() % UInt64(sliceEnd - sliceStart))
            let process = Self.writer(writer, database: dir.database)
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            var buffer = ""
            var reached = false
            while !reached {
                let data = pipe.fileHandleForReading.readSomeRetryingInterrupts() ?? Data()
                if data.isEmpty { break }  // the writer ended
                buffer += String(decoding: data, as: UTF8.self)
                let lines = buffer.split(separator: "\n")
                reached = lines.contains { Int($0).map { $0 >= target } ?? false }
            }
            usleep(useconds_t(random.next() % 8000))
            Foundation.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            try? pipe.fileHandleForReading.close()
            if process.terminationReason == .uncaughtSignal { landed += 1 }
            guard FileManager.default.fileExists(atPath: dir.database) else { continue }
            counts.append(try await Self.checkConsistent(dir.database, after: kill))
        }
        print("CrashTests readings visible after each kill: \(counts); \(landed) kills hit a running writer")
        #expect(landed >= Self.kills / 2, "most kills must interrupt a running writer")
        #expect(counts == counts.sorted(), "committed readings never disappear")

        let final = Self.writer(writer, database: dir.database)
        try final.run()
        final.waitUntilExit()
        #expect(final.terminationStatus == 0)

        let plan = Self.plan()
        let expected = plan.expected().flatMap { $0 }
        let store = try SQLiteReadingStore(path: dir.database)
        let stored = try await store.readings(ReadingQuery())
        #expect(stored.count == expected.count)
        let storedSet = Set(stored.map { SyntheticIngest.Expected(reading: $0.reading, epoch: $0.epoch) })
        #expect(storedSet.count == stored.count, "a record is stored twice")
        #expect(storedSet == Set(expected), "stored records differ from the ingest")
        let events = try await store.events(meter: nil, limit: 100)
        #expect(events.count == plan.expectedResets)
        #expect(events.allSatisfy { $0.meter == plan.resetMeter && $0.reason == .sequenceConflict })
        #expect(try await store.integrityCheck() == ["ok"])
        await store.close()
    }
}
