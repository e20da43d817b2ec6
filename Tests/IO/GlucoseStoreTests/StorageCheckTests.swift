import Foundation
import HealthDataSync
import Testing

@testable import GlucoseStore

/// The integrity check that replaced the whole-file `quick_check` on the way to ready: it runs
/// beside the store's own connection, reports what SQLite found, and damage it finds shows in
/// health (degraded, code corrupt) without the store refusing to work.
@Suite struct StorageCheckTests {
    /// The root page of an index nothing reads while readings are stored or listed.
    static func untouchedIndexPage(_ store: SQLiteReadingStore) async throws -> (page: Int, pageSize: Int) {
        let page = try #require(try await ints(store, "SELECT rootpage FROM sqlite_schema WHERE name = 'person_identifier_by_person'").first)
        let pageSize = try #require(try await ints(store, "PRAGMA page_size").first)
        return (page, pageSize)
    }

    @Test func aSoundFileChecksOkAndHealthShowsTheCheck() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...50))
        #expect(await store.health().check == nil)
        let seen = Seen()
        let check = await store.check(.full, reason: .requested) { health in seen.append(health.check?.result ?? .failed) }
        #expect(seen.values == [.running])
        #expect(check.result == .ok && check.kind == .full && check.reason == .requested)
        #expect(check.problemCount == 0 && check.problems.isEmpty && check.finished != nil)
        let health = await store.health()
        #expect(health.status == .ok)
        #expect(health.check == check)
    }

    @Test func damageIsReportedWithoutStoppingTheStore() async throws {
        let dir = try TempDirectory()
        do {
            let store = try openStore(dir.database)
            _ = try await store.commit(syncOf(1...200))
            let (page, pageSize) = try await Self.untouchedIndexPage(store)
            await store.close()
            try FailureTests.overwrite(dir.database, at: (page - 1) * pageSize, with: [UInt8](repeating: 0xA5, count: pageSize))
        }
        // Opening without the whole-file check works, and so do reads and writes.
        let store = try SQLiteReadingStore(path: dir.database, options: StoreOptions(quickCheckOnOpen: false))
        #expect(try await store.readingCount(meter: nil) == 200)
        #expect(await store.health().status == .ok)

        let check = await store.check(.quick, reason: .uncleanShutdown)
        #expect(check.result == .damaged, "\(check)")
        #expect(check.problemCount >= 1 && !check.problems.isEmpty)
        #expect(check.problems.count <= StorageCheck.keptProblems)
        var health = await store.health()
        #expect(health.status == .degraded)
        #expect(health.error?.code == .corrupt)
        #expect(health.check?.result == .damaged)

        // A successful write does not hide the damage; nothing is lost.
        _ = try await store.commit(syncOf(201...210))
        #expect(try await store.readingCount(meter: nil) == 210)
        health = await store.health()
        #expect(health.status == .degraded && health.error?.code == .corrupt)

        // integrity_check finds it too.
        let full = await store.check(.full, reason: .requested)
        #expect(full.result == .damaged)
        await store.close()
    }

    @Test func aMissingFileFailsTheCheckWithAReason() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        unlink(dir.database)
        unlink(dir.database + "-wal")
        unlink(dir.database + "-shm")
        let check = await store.check(.quick, reason: .scheduled)
        #expect(check.result == .failed)
        #expect(check.message?.isEmpty == false)
        await store.close()
    }

    @Test func cancellingTheCallerStopsTheCheck() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...20))
        let task = Task { await store.check(.full, reason: .requested) }
        task.cancel()
        let check = await task.value
        // Either it was interrupted, or it finished before the cancel landed: never a hang.
        #expect(check.result == .failed || check.result == .ok)
        await store.close()
    }
}

/// What the check's `started` callback saw.
private final class Seen: @unchecked Sendable {
    // Invariant: `results` is only touched under `lock`.
    private let lock = NSLock()
    private var results: [StorageCheck.Result] = []

    func append(_ result: StorageCheck.Result) { self.lock.withLock { self.results.append(result) } }
    var values: [StorageCheck.Result] { self.lock.withLock { self.results } }
}
