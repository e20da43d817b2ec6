import Foundation
import HealthDataSync
import Testing

@testable import GlucoseStore

/// Schema version 4: each database has an identity, made when it is created (or when an earlier
/// version is migrated), kept by reopening and by backups, new after a restore or after the file
/// was replaced under the store.
@Suite struct IdentityTests {
    static func isIdentity(_ id: String?) -> Bool {
        guard let id, DatabaseIdentity.isValid(id) else { return false }
        return Array(id.utf8)[14] == UInt8(ascii: "4") && "89ab".utf8.contains(Array(id.utf8)[19])
    }

    @Test func aNewDatabaseHasAnIdentityThatSurvivesReopen() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        let id = await store.identity()
        #expect(Self.isIdentity(id), "\(id ?? "nil")")
        #expect(await store.health().databaseId == id)
        _ = try await store.commit(syncOf(1...3))
        await store.close()
        let reopened = try openStore(dir.database)
        #expect(await reopened.identity() == id)
        #expect(try await reopened.page(afterCursor: 0, limit: 10).databaseId == id)

        let other = try TempDirectory()
        let second = try openStore(other.database)
        #expect(await second.identity() != id, "every database gets its own")
    }

    /// Every earlier version gets an identity in the migration, keeps its rows, and keeps that
    /// identity afterwards.
    @Test(arguments: [Int64(1), 2, 3])
    func earlierVersionsGetAnIdentity(version: Int64) async throws {
        let dir = try TempDirectory()
        do {
            let db = try Connection(path: dir.database)
            try Schema.migrate(db, to: version)
            try V1Fixture.write(db)
            #expect(try Schema.identity(db) == nil)
            db.close()
        }
        let store = try openStore(dir.database)
        #expect(try await store.textForTesting("PRAGMA user_version") == ["\(Schema.latestVersion)"])
        let id = await store.identity()
        #expect(Self.isIdentity(id))
        #expect(try await store.readingCount(meter: nil) == V1Fixture.readings.count)
        await store.close()
        let reopened = try openStore(dir.database)
        #expect(await reopened.identity() == id)
        #expect(try await ints(reopened, "SELECT count(*) FROM store_identity") == [1])
    }

    /// A file deleted under the store: noticed by the next check, the file is recreated at the
    /// path under a new identity, health says what happened, and the next commit lands in the new
    /// file (nothing goes to the unlinked one).
    @Test func aDeletedFileIsNoticedAndRecreatedUnderANewIdentity() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...3))
        let before = await store.identity()
        #expect(await store.checkFile().status == .ok)

        try FileManager.default.removeItem(atPath: dir.database)
        let health = await store.checkFile()
        #expect(health.status == .degraded)
        #expect(health.error?.code == .replaced)
        #expect(health.error?.message.contains("deleted, renamed or replaced") == true)
        #expect(health.databaseId != nil && health.databaseId != before)
        #expect(await store.replacements == 1)
        #expect(FileManager.default.fileExists(atPath: dir.database))

        _ = try await store.commit(syncOf(4...5))
        #expect(await store.health().error?.code == .replaced, "shown for a while, whatever commits succeed")
        await store.close()
        let reopened = try openStore(dir.database)
        #expect(try await reopened.readings(ReadingQuery()).map(\.reading.sequenceNumber) == [4, 5])
        #expect(await reopened.identity() == health.databaseId)
    }

    /// No check runs before the commit (no timer): the commit itself notices the rename and
    /// commits into the recreated file, never into the moved one.
    @Test func aCommitAfterARenameGoesToTheFileAtThePath() async throws {
        let dir = try TempDirectory()
        let store = try SQLiteReadingStore(path: dir.database, options: StoreOptions(replacedNotice: .zero))
        _ = try await store.commit(syncOf(1...2))
        let first = await store.identity()
        // Only the main file is moved (what `mv` of the database alone does): its WAL stays behind.
        try FileManager.default.moveItem(atPath: dir.database, toPath: dir.path + "/moved.sqlite")
        _ = try await store.commit(syncOf(3...4))
        #expect(await store.identity() != first)
        #expect(await store.health().status == .ok, "without a notice time, the successful commit clears it")
        await store.close()

        let atPath = try openStore(dir.database)
        #expect(try await atPath.readings(ReadingQuery()).map(\.reading.sequenceNumber) == [3, 4])
        await atPath.close()
        let moved = try openStore(dir.path + "/moved.sqlite")
        #expect(try await moved.readings(ReadingQuery()).map(\.reading.sequenceNumber) == [1, 2], "nothing added to the moved file")
        #expect(await moved.identity() == first)
    }

    /// A sync that started before the file was replaced commits its readings into the new file
    /// but not its high-water mark: the records before it are gone with the old file, so the next
    /// sync must read the meter from the start. A sync started afterwards keeps its mark.
    @Test func aSyncSpanningTheReplacementLeavesNoMark() async throws {
        let dir = try TempDirectory()
        let store = try SQLiteReadingStore(path: dir.database)
        _ = try await store.commit(syncOf(1...10, started: systemNow()))
        let started = systemNow()
        try FileManager.default.removeItem(atPath: dir.database)
        await store.checkFile()
        _ = try await store.commit(syncOf(11...12, started: started))
        #expect(try await store.meter(testMeter)?.highWater == nil, "the next sync reads everything again")
        #expect(try await store.readingCount(meter: nil) == 2)
        try await Task.sleep(for: .milliseconds(5))
        _ = try await store.commit(syncOf(1...12, started: systemNow()))
        #expect(try await store.meter(testMeter)?.highWater == 12)
        #expect(try await store.readingCount(meter: nil) == 12)
    }

    /// A file replaced by an older copy of the same database: it gets a new identity all the same
    /// (its positions may be behind a follower's cursor).
    @Test func aFileReplacedByACopyGetsANewIdentity() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...2))
        let copy = dir.path + "/copy.sqlite"
        _ = try store.backup(to: copy)
        let id = await store.identity()
        _ = try await store.commit(syncOf(3...4))
        #expect(rename(copy, dir.database) == 0)
        let health = await store.checkFile()
        #expect(health.error?.code == .replaced)
        #expect(health.databaseId != id)
        let seqs = try await store.readings(ReadingQuery()).map(\.reading.sequenceNumber)
        #expect(seqs == [1, 2], "\(seqs)")
    }

    @Test func backupIsConsistentAndKeepsTheIdentityWhileCommitsGoOn() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...200))
        let id = await store.identity()
        // Commits go on while backups run (another connection, WAL).
        let writer = Task {
            for start in stride(from: UInt16(201), to: 1201, by: 50) {
                _ = try await store.commit(syncOf(start...(start + 49)))
            }
        }
        var copies: [(String, DatabaseFacts)] = []
        for n in 0..<5 {
            let path = dir.path + "/backup-\(n).sqlite"
            copies.append((path, try store.backup(to: path)))
        }
        try await writer.value
        for (path, facts) in copies {
            var info = stat()
            #expect(stat(path, &info) == 0)
            #expect(info.st_mode & 0o777 == 0o600)
            #expect(facts.databaseId == id)
            #expect(facts.schemaVersion == Int(Schema.latestVersion))
            #expect(facts.size == Int64(info.st_size))
            let copy = try openStore(path)
            #expect(try await copy.integrityCheck() == ["ok"])
            #expect(await copy.identity() == id)
            let seqs = try await copy.readings(ReadingQuery()).map { Int($0.reading.sequenceNumber) }
            #expect(seqs.count == facts.readings)
            // A snapshot of whole commits: 1...N in steps of whole batches.
            #expect(seqs == Array(1...seqs.count))
            #expect(seqs.count >= 200 && (seqs.count - 200) % 50 == 0)
            await copy.close()
        }
        // An existing destination is refused and left alone.
        let existing = dir.path + "/existing"
        _ = FileManager.default.createFile(atPath: existing, contents: Data("keep".utf8))
        #expect(throws: StoreError.self) { try store.backup(to: existing) }
        #expect(try String(contentsOfFile: existing, encoding: .utf8) == "keep")
    }

    @Test func restoreKeepsTheCurrentFileAndGivesANewIdentity() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...10))
        let staged = dir.database + ".restore-test"
        _ = try store.backup(to: staged)
        let original = await store.identity()
        _ = try await store.commit(syncOf(11...20))

        let prepared = try SQLiteReadingStore.prepareRestore(staged)
        #expect(prepared.readings == 10)
        #expect(prepared.databaseId != original)
        let outcome = try await store.restore(from: staged, at: Instant(epochMillis: 1_760_000_000_254))
        #expect(outcome.previousDatabaseId == original)
        #expect(outcome.restored.databaseId == prepared.databaseId)
        #expect(outcome.keptAs == dir.database + ".before-restore-20251009T085320Z")
        #expect(await store.identity() == prepared.databaseId)
        #expect(await store.health().status == .ok)
        #expect(try await store.readingCount(meter: nil) == 10)
        #expect(!FileManager.default.fileExists(atPath: staged))
        // The kept file is whole by itself (checkpointed): all 20 readings, the old identity.
        let kept = try openStore(outcome.keptAs!)
        #expect(try await kept.readingCount(meter: nil) == 20)
        #expect(await kept.identity() == original)
        // The store goes on: the next commit goes into the restored database; a sync that began
        // before the restore leaves no mark there (the fixed clock of openStore is in the past).
        _ = try await store.commit(syncOf(11...12))
        #expect(try await store.readingCount(meter: nil) == 12)
        #expect(try await store.meter(testMeter)?.highWater == 10, "the restored mark, not the spanning sync's")
        #expect(await store.checkFile().status == .ok, "a restore is not a replacement")
    }

    /// Every earlier version (1 to 4, before the people step) is accepted and migrated.
    @Test(arguments: [Int64(1), 2, 3, 4])
    func olderSchemasAreMigratedOnRestore(version: Int64) async throws {
        let dir = try TempDirectory()
        let staged = dir.path + "/v\(version).sqlite"
        var before: String?
        do {
            let db = try Connection(path: staged)
            try Schema.migrate(db, to: version)
            try V1Fixture.write(db)
            before = try Schema.identity(db)
            db.close()
        }
        let facts = try SQLiteReadingStore.prepareRestore(staged)
        #expect(facts.migratedFrom == Int(version))
        #expect(facts.databaseId != before, "a restore gives a new identity")
        #expect(facts.schemaVersion == Int(Schema.latestVersion))
        #expect(Self.isIdentity(facts.databaseId))
        #expect(facts.readings == V1Fixture.readings.count)
    }

    /// Not SQLite, damaged, not sugard's, newer: refused, and the file is left as it was.
    @Test func badFilesAreRefusedUnchanged() async throws {
        let dir = try TempDirectory()
        func refused(_ path: String, _ fragment: String) throws {
            let before = try Data(contentsOf: URL(fileURLWithPath: path))
            do {
                _ = try SQLiteReadingStore.prepareRestore(path)
                Issue.record("\(path) was accepted")
            } catch {
                #expect(error.message.contains(fragment), "\(error.message)")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "\(path) changed")
        }
        let text = dir.path + "/text"
        _ = FileManager.default.createFile(atPath: text, contents: Data(String(repeating: "not a database\n", count: 400).utf8))
        try refused(text, "not a readable SQLite database")

        let other = dir.path + "/other.sqlite"
        do {
            let db = try Connection(path: other)
            try db.execute("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('x');", "test")
            db.close()
        }
        try refused(other, "not a sugard database")

        let newer = dir.path + "/newer.sqlite"
        do {
            let db = try Connection(path: newer)
            try Schema.migrate(db)
            try db.execute("PRAGMA user_version = 99", "test")
            db.close()
        }
        try refused(newer, "newer than this sugard")

        // A damaged database: a sound one with garbage over its second page.
        let damaged = dir.path + "/damaged.sqlite"
        let store = try openStore(damaged)
        _ = try await store.commit(syncOf(1...300))
        await store.close()
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: damaged))
        try handle.seek(toOffset: 4096)
        handle.write(Data(repeating: 0x5a, count: 4096))
        try handle.close()
        try refused(damaged, "damaged")
    }
}
