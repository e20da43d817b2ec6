#if canImport(Glibc)
import Glibc
#endif
import HealthDataSync
import SystemIO

/// What a backup or a restore found in a database file (for `sugarctl backup` and `restore`).
public struct DatabaseFacts: Hashable, Sendable {
    /// The database file described.
    public var path: String
    /// The file's size in bytes.
    public var size: Int64
    /// Readings in it.
    public var readings: Int
    /// Its identity (nil before schema version 4).
    public var databaseId: String?
    /// Its schema version (`PRAGMA user_version`).
    public var schemaVersion: Int
    /// The schema version the file had before this build migrated it (restore only).
    public var migratedFrom: Int?

    /// Facts with every field given.
    public init(path: String, size: Int64, readings: Int, databaseId: String?, schemaVersion: Int, migratedFrom: Int? = nil) {
        self.path = path
        self.size = size
        self.readings = readings
        self.databaseId = databaseId
        self.schemaVersion = schemaVersion
        self.migratedFrom = migratedFrom
    }
}

/// What a restore did.
public struct RestoreOutcome: Hashable, Sendable {
    /// The restored database, now at the store's path, with its new identity.
    public var restored: DatabaseFacts
    /// Where the database it replaced was kept (nil when there was no file at the path).
    public var keptAs: String?
    /// The identity of the database it replaced.
    public var previousDatabaseId: String?
}

extension SQLiteReadingStore {
    /// Writes a consistent copy of the database to `destination` (a new file, created 0600; it
    /// must not exist) through SQLite's online backup API, on a connection of its own: the copy
    /// is the database as of one commit, and the store's writes (a sync's commits) go on meanwhile
    /// (WAL). The copy keeps the database's identity; it is checked (`PRAGMA integrity_check`)
    /// before this returns. On any error the partial copy is removed.
    public nonisolated func backup(to destination: String) throws(StoreError) -> DatabaseFacts {
        // create: false: a database deleted under the daemon is not silently recreated by a backup.
        let source = try Connection(path: self.path, create: false, busyTimeoutMilliseconds: 10_000)
        defer { source.close() }
        let fd = Glibc.open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw StoreError(.cannotOpen, "Creating the backup file \(destination) failed: \(String(cString: strerror(errno))).")
        }
        _ = Glibc.close(fd)
        do throws(StoreError) {
            let target = try Connection(path: destination, create: false)
            defer { target.close() }
            try source.backup(into: target)
            let check = try target.textColumn("PRAGMA integrity_check", "Checking the backup \(destination)")
            guard check == ["ok"] else {
                throw StoreError(.corrupt, "The backup \(destination) failed its integrity check (\(check.count) problem(s)).")
            }
            var facts = try Self.facts(of: target)
            target.close()
            facts.size = fileSize(destination)
            return facts
        } catch {
            unlink(destination)
            unlink(destination + "-journal")
            throw error
        }
    }

    /// Checks that `staged` is a sound sugard database this build can use and makes it ready to
    /// be restored: `PRAGMA integrity_check` must say ok, the schema must be sugard's (version 1
    /// to ``schemaVersion``, its tables present), and it is migrated to the current schema and
    /// given a NEW identity (followers of the restored data start over rather than skip). Throws
    /// for a file that is not SQLite, is damaged, is not a sugard database or has a newer schema;
    /// the file is then left as it was (a failed migration rolls back).
    public static func prepareRestore(_ staged: String) throws(StoreError) -> DatabaseFacts {
        guard fileExists(staged) else { throw StoreError(.cannotOpen, "No file \(staged) to restore.") }
        let db = try Connection(path: staged, create: false)
        defer { db.close() }
        let version: Int64
        let check: [String]
        do throws(StoreError) {
            version = try Schema.userVersion(db)
            check = try db.textColumn("PRAGMA integrity_check", "Checking the integrity of \(staged)")
        } catch {
            throw StoreError(.corrupt, "The file is not a readable SQLite database: \(error.message)")
        }
        guard check == ["ok"] else {
            throw StoreError(
                .corrupt,
                "The file is a damaged SQLite database: integrity_check reported \(check.count) problem(s), first: \(check.first ?? "")")
        }
        let tables = Set(try db.textColumn("SELECT name FROM sqlite_schema WHERE type = 'table'", "Listing the tables of \(staged)"))
        guard version >= 1, tables.isSuperset(of: ["meter", "reading", "sync_session", "sequence_reset"]) else {
            throw StoreError(.constraint, "The file is an SQLite database but not a sugard database (schema version \(version), no sugard tables).")
        }
        guard version <= Schema.latestVersion else {
            throw StoreError(
                .constraint,
                "The file is a sugard database with schema version \(version), newer than this sugard understands (\(Schema.latestVersion)).")
        }
        let mode = try db.textColumn("PRAGMA journal_mode = WAL", "Switching \(staged) to WAL mode")
        guard mode.first?.lowercased() == "wal" else {
            throw StoreError(.io, "Switching \(staged) to WAL mode failed: SQLite kept journal mode \(mode).")
        }
        try Schema.migrate(db)
        try db.transaction("Giving \(staged) a new identity") { () throws(StoreError) in
            try Schema.setIdentity(DatabaseIdentity.random(), on: db)
        }
        var facts = try Self.facts(of: db)
        facts.migratedFrom = version < Schema.latestVersion ? Int(version) : nil
        db.close()  // checkpoints the WAL into the file and removes it
        facts.size = fileSize(staged)
        return facts
    }

    /// Swaps a database made ready by ``prepareRestore(_:)`` in at the store's path: the current
    /// file (checkpointed and closed) is renamed to `<path>.before-restore-<time>` next to it,
    /// `staged` (in the same directory) is renamed to the path, and the store reopens it. Both
    /// renames are atomic; when the second fails, the first is undone. No write of the store runs
    /// meanwhile (this is one actor turn): a sync's next commit goes into the restored database.
    public func restore(from staged: String, at now: Instant = systemNow()) throws(StoreError) -> RestoreOutcome {
        let previous = self.databaseId
        if let connection = self.connection {
            // Everything committed goes into the main file, so the kept file is whole by itself.
            _ = try? connection.textColumn("PRAGMA wal_checkpoint(TRUNCATE)", "Checkpointing \(self.path)")
            connection.close()
        }
        self.connection = nil
        self.needsReopen = true
        var kept: String?
        if fileExists(self.path) {
            // 2026-03-31T06:15:00.254Z -> 20260331T061500Z (whole seconds, no separators).
            let stamp = String(now.isoString.filter { $0 != "-" && $0 != ":" }.prefix { $0 != "." && $0 != "Z" }) + "Z"
            var candidate = "\(self.path).before-restore-\(stamp)"
            var n = 1
            while fileExists(candidate) {
                n += 1
                candidate = "\(self.path).before-restore-\(stamp)-\(n)"
            }
            guard rename(self.path, candidate) == 0 else {
                let reason = String(cString: strerror(errno))
                _ = try? self.usableConnection()
                throw StoreError(.io, "Keeping \(self.path) as \(candidate) failed: \(reason); nothing was changed.")
            }
            if fileExists(self.path + "-wal") { _ = rename(self.path + "-wal", candidate + "-wal") }
            unlink(self.path + "-shm")
            kept = candidate
        }
        guard rename(staged, self.path) == 0 else {
            let reason = String(cString: strerror(errno))
            if let kept {
                _ = rename(kept, self.path)
                if fileExists(kept + "-wal") { _ = rename(kept + "-wal", self.path + "-wal") }
            }
            _ = try? self.usableConnection()
            throw StoreError(.io, "Moving the restored database to \(self.path) failed: \(reason); the current database stays.")
        }
        syncDirectory(containing: self.path)
        // A sync running now read the meter against the database that went away: its mark must
        // not go into the restored one (see ``commit(_:)``).
        self.replacedAtWall = systemNow()
        let db = try self.usableConnection()
        var facts = try Self.facts(of: db)
        facts.size = fileSize(self.path)
        self.healthState = StorageHealth(status: .ok, path: self.path, databaseId: self.databaseId)
        return RestoreOutcome(restored: facts, keptAs: kept, previousDatabaseId: previous)
    }

    /// Readings, identity and schema version of an open database; `size` is left 0 for the caller.
    static func facts(of db: Connection) throws(StoreError) -> DatabaseFacts {
        DatabaseFacts(
            path: db.path, size: 0,
            readings: Int(try db.scalarInt("SELECT count(*) FROM reading", "Counting the readings of \(db.path)") ?? 0),
            databaseId: try Schema.identity(db), schemaVersion: Int(try Schema.userVersion(db)))
    }
}

/// The size of the file at `path` in bytes (0 when it cannot be read).
func fileSize(_ path: String) -> Int64 {
    var info = stat()
    guard stat(path, &info) == 0 else { return 0 }
    return Int64(info.st_size)
}
