import Foundation
import HealthDataSync
import Testing

@testable import GlucoseStore

/// Storage failures: each gives a clear error code, leaves no partial batch, degrades health,
/// and the store recovers once the condition clears.
@Suite struct FailureTests {
    /// What is visible in the database, to show a failed commit left nothing behind.
    struct Visible: Equatable {
        var readings: Int
        var sessions: Int
        var highWater: UInt16?
        var events: Int
    }

    static func visible(_ store: SQLiteReadingStore) async throws -> Visible {
        Visible(
            readings: try await store.readingCount(meter: nil),
            sessions: try await store.sessions(meter: nil, limit: 1000).count,
            highWater: try await store.meter(testMeter)?.highWater,
            events: try await store.events(meter: nil, limit: 1000).count)
    }

    /// A batch that needs many new pages.
    static func bigBatch() -> SyncBatch { syncOf(11...400) }

    @Test func errorInjectedMidBatchLeavesNothing() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        await store.setFailAfterInsertsForTesting(3)
        let error = await #expect(throws: StoreError.self) { try await store.commit(syncOf(1...10)) }
        #expect(error?.code == .io)
        #expect(try await store.meter(testMeter) == nil)  // even the new meter row was rolled back
        #expect(try await Self.visible(store) == Visible(readings: 0, sessions: 0, highWater: nil, events: 0))
        #expect(await store.health().status == .degraded)

        await store.setFailAfterInsertsForTesting(nil)
        let result = try await store.commit(syncOf(1...10))
        #expect(result.inserted.count == 10)
        #expect(await store.health().status == .ok)
    }

    @Test func failureAfterAResetRollsTheResetBackToo() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...5))
        let before = try await Self.visible(store)
        let later = LocalDateTime(year: 2024, month: 9, day: 1)
        let fresh = (1...4).map { makeReading(UInt16($0), base: later.adding(seconds: Int64($0) * 60)) }
        await store.setFailAfterInsertsForTesting(2)
        await #expect(throws: StoreError.self) { try await store.commit(makeBatch(fresh, newHighWater: 4)) }
        #expect(try await Self.visible(store) == before)
        #expect(try await store.meter(testMeter)?.epoch == 0)
    }

    @Test func readingFromAnotherMeterRejectsTheWholeBatch() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        let readings = [makeReading(1), makeReading(2), makeReading(3, meter: otherMeter), makeReading(4)]
        let error = await #expect(throws: StoreError.self) {
            try await store.commit(makeBatch(readings, newHighWater: 4))
        }
        #expect(error?.code == .constraint)
        #expect(try await Self.visible(store) == Visible(readings: 0, sessions: 0, highWater: nil, events: 0))
        #expect(await store.health().status == .ok)  // the batch was wrong, not the storage
    }

    @Test func diskFullFailsCleanlyAndRecovers() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...10))
        let before = try await Self.visible(store)
        let pages = try #require(Int(try await store.textForTesting("PRAGMA page_count").first ?? ""))
        try await store.executeForTesting("PRAGMA max_page_count = \(pages)")

        let error = await #expect(throws: StoreError.self) { try await store.commit(Self.bigBatch()) }
        #expect(error?.code == .diskFull)
        #expect(error?.message.contains(dir.database) == true)
        #expect(try await Self.visible(store) == before)
        let health = await store.health()
        #expect(health.status == .degraded)
        #expect(health.error?.code == .diskFull)
        // Reads keep working while writes fail.
        #expect(try await store.readings(ReadingQuery(limit: 3)).count == 3)

        try await store.executeForTesting("PRAGMA max_page_count = 1000000")
        let result = try await store.commit(Self.bigBatch())
        #expect(result.inserted.count == 390)
        #expect(await store.health() == StorageHealth(status: .ok, path: dir.database, databaseId: await store.identity()))
        #expect(try await store.integrityCheck() == ["ok"])
    }

    @Test func readOnlyDatabaseFailsCleanlyAndRecoversWhenWritableAgain() async throws {
        // Root ignores file modes, so the test opens the file read-only the way SQLite does when it
        // cannot write it (SQLITE_OPEN_READONLY); `chmodReadOnly…` below covers the real mode bits.
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...10))
        let before = try await Self.visible(store)
        await store.setForceReadOnlyOpenForTesting(true)

        let error = await #expect(throws: StoreError.self) { try await store.commit(Self.bigBatch()) }
        #expect(error?.code == .readOnly)
        #expect(await store.health().status == .degraded)
        #expect(await store.health().error?.code == .readOnly)
        #expect(try await Self.visible(store) == before)
        // Still read-only on the next attempt: the store reopens and fails the same way.
        await #expect(throws: StoreError.self) { try await store.commit(Self.bigBatch()) }

        await store.setForceReadOnlyOpenForTesting(false)  // the condition clears
        let result = try await store.commit(Self.bigBatch())
        #expect(result.inserted.count == 390)
        #expect(await store.health().status == .ok)
    }

    @Test(.enabled(if: geteuid() != 0, "root bypasses file modes"))
    func chmodReadOnlyFileFailsCleanlyAndRecovers() async throws {
        let dir = try TempDirectory()
        do {
            let store = try openStore(dir.database)
            _ = try await store.commit(syncOf(1...10))
            await store.close()
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o444], ofItemAtPath: dir.database)
        let store = try openStore(dir.database)
        #expect(await store.health().status == .degraded)
        let error = await #expect(throws: StoreError.self) { try await store.commit(Self.bigBatch()) }
        #expect(error?.code == .readOnly)
        #expect(try await store.readingCount(meter: nil) == 10)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: dir.database)
        _ = try await store.commit(Self.bigBatch())
        #expect(await store.health().status == .ok)
    }

    @Test func lockedDatabaseFailsWithBusyAndRecovers() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database, busyMilliseconds: 100)
        _ = try await store.commit(syncOf(1...10))
        let before = try await Self.visible(store)

        let other = try Connection(path: dir.database)
        try other.execute("BEGIN EXCLUSIVE", "lock")
        let error = await #expect(throws: StoreError.self) { try await store.commit(Self.bigBatch()) }
        #expect(error?.code == .busy)
        #expect(await store.health().status == .degraded)
        #expect(try await Self.visible(store) == before)  // WAL readers are not blocked

        try other.execute("ROLLBACK", "unlock")
        other.close()
        _ = try await store.commit(Self.bigBatch())
        #expect(await store.health().status == .ok)
    }

    /// Writes a populated database, closes it (checkpointing the WAL into the file) and returns
    /// the file's bytes.
    static func populatedFile(_ path: String) async throws -> Data {
        let store = try openStore(path)
        _ = try await store.commit(Self.bigBatch())
        await store.close()
        return try Data(contentsOf: URL(fileURLWithPath: path))
    }

    static func overwrite(_ path: String, at offset: Int, with bytes: [UInt8]) throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seek(toOffset: UInt64(offset))
        try handle.write(contentsOf: bytes)
        try handle.close()
    }

    @Test func corruptHeaderFailsToOpenAndRecoversWhenRestored() async throws {
        let dir = try TempDirectory()
        let original = try await Self.populatedFile(dir.database)
        try Self.overwrite(dir.database, at: 0, with: Array("this is not sqlite!!".utf8))

        let error = #expect(throws: StoreError.self) { _ = try SQLiteReadingStore(path: dir.database) }
        #expect(error?.code == .corrupt)

        // The daemon's way: keep running with failed health and retry on each call.
        let store = SQLiteReadingStore(retryingOpenAt: dir.database)
        #expect(await store.health().status == .failed)
        #expect(await store.health().error?.code == .corrupt)
        let again = await #expect(throws: StoreError.self) { try await store.readingCount(meter: nil) }
        #expect(again?.code == .corrupt)

        try original.write(to: URL(fileURLWithPath: dir.database))  // restored from backup
        #expect(try await store.readingCount(meter: nil) == 390)
        #expect(await store.health().status == .ok)
        _ = try await store.commit(syncOf(1...10))
        #expect(try await store.readingCount(meter: nil) == 400)
    }

    @Test func damagedPagesAreCaughtByTheOpeningCheck() async throws {
        let dir = try TempDirectory()
        let original = try await Self.populatedFile(dir.database)
        let pageSize = 4096
        #expect(original.count > 6 * pageSize)
        // Scribble over the middle of the file (b-tree pages of readings and indexes).
        try Self.overwrite(dir.database, at: 3 * pageSize, with: [UInt8](repeating: 0x5A, count: 2 * pageSize))

        let error = #expect(throws: StoreError.self) { _ = try SQLiteReadingStore(path: dir.database) }
        #expect(error?.code == .corrupt)

        let unchecked = try SQLiteReadingStore(path: dir.database, options: StoreOptions(quickCheckOnOpen: false))
        do {
            let report = try await unchecked.integrityCheck()
            #expect(report != ["ok"])
        } catch {
            #expect(error.code == .corrupt)
        }
    }
}
