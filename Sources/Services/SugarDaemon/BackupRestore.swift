import Glibc
import GlucoseStore
import HealthDataSync
import Locking
import ProcessKit
import SugarAPI
import SystemIO

/// The upload `RestoreUpload` is filling: one at a time, in a staging file next to the database
/// (`<database>.restore-<upload>`, 0600), so the swap is a rename within one directory.
final class RestoreUploads: Sendable {
    /// One upload in progress.
    struct Upload {
        /// The client's name for it (`upload` of `RestoreUpload`).
        var name: String
        /// Its staging file.
        var path: String
        /// The bytes received so far: the offset the next part must start at.
        var size: Int64
    }

    /// The open upload; nil when none is. A new one (offset 0) replaces it and deletes its file.
    let current = Lock<Upload?>(nil)
}

/// `Backup`, `RestoreUpload` and `Restore` on the SQLite store.
extension DaemonBackend {
    /// The SQLite store; throws `storageError` when the daemon's store is not one.
    private func requireDatabase() throws(SugarAPIError) -> SQLiteReadingStore {
        guard let database = self.database else {
            throw SugarAPIError(.storageError, "this daemon's storage cannot be backed up or restored")
        }
        return database
    }

    /// A backup into an unlinked file next to the database (the daemon's own directory: it is
    /// sandboxed and writes nowhere else), handed over as an open descriptor.
    public func backup() async throws(SugarAPIError) -> BackupCopy {
        let database = try self.requireDatabase()
        let temporary = Self.directory(of: database.path) + "/.sugard-backup-" + String(DatabaseIdentity.random().prefix(8)) + ".sqlite"
        let facts: DatabaseFacts
        do throws(StoreError) {
            facts = try database.backup(to: temporary)
        } catch {
            self.logger?.error("backup failed: \(error.message)")
            throw SugarAPIError(.storageError, error.message, subject: error.code.rawValue)
        }
        let fd = open(temporary, O_RDONLY | O_CLOEXEC)
        unlink(temporary)
        guard fd >= 0 else {
            throw SugarAPIError(.storageError, "cannot read the backup copy: \(String(cString: strerror(errno)))", subject: "io")
        }
        self.logger?.notice(
            "backup: \(facts.readings) readings, \(facts.size) bytes, database \(facts.databaseId ?? "-") (schema \(facts.schemaVersion))")
        return BackupCopy(
            fileDescriptor: fd, size: facts.size, readings: facts.readings, databaseId: facts.databaseId,
            schemaVersion: facts.schemaVersion)
    }

    /// Appends one part of the upload named `upload` and returns its size so far. Offset 0 starts it
    /// afresh (dropping any other); another offset must equal the size so far. Throws
    /// `invalidParameter` (subject `upload` or `offset`) or `storageError` (subject `io`).
    public func restoreUpload(_ upload: String, offset: Int64, bytes: [UInt8]) async throws(SugarAPIError) -> Int64 {
        let database = try self.requireDatabase()
        let path = database.path + ".restore-" + upload
        return try self.uploads.current.withLock { (current: inout RestoreUploads.Upload?) throws(SugarAPIError) -> Int64 in
            if offset == 0 {
                if let previous = current { unlink(previous.path) }
                current = nil
                let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
                guard fd >= 0 else {
                    throw SugarAPIError(.storageError, "cannot create \(path): \(String(cString: strerror(errno)))", subject: "io")
                }
                close(fd)
                current = RestoreUploads.Upload(name: upload, path: path, size: 0)
            }
            guard var state = current, state.name == upload else {
                throw SugarAPIError(.invalidParameter, "no upload \(upload) is open: start it at offset 0", subject: "upload")
            }
            guard offset == state.size else {
                throw SugarAPIError(.invalidParameter, "the upload has \(state.size) bytes; the next part starts there", subject: "offset")
            }
            let fd = open(state.path, O_WRONLY | O_APPEND | O_CLOEXEC)
            guard fd >= 0 else {
                throw SugarAPIError(.storageError, "cannot write \(state.path): \(String(cString: strerror(errno)))", subject: "io")
            }
            defer { close(fd) }
            let code = writeAll(fd, bytes)
            guard code == 0 else {
                throw SugarAPIError(.storageError, "cannot write \(state.path): \(String(cString: strerror(code)))", subject: "io")
            }
            state.size += Int64(bytes.count)
            current = state
            return state.size
        }
    }

    /// Replaces the database with the finished upload: checks it (migrating an older schema), swaps it
    /// in keeping the previous file, then reads storage health, the counts and the stored meters into
    /// the view model. The staging files are deleted in every case. Throws `invalidParameter` for an
    /// unknown upload, `invalidDatabase` when the file is not a usable sugard database, `storageError`
    /// when the swap fails.
    public func restore(_ upload: String) async throws(SugarAPIError) -> RestoreReport {
        let database = try self.requireDatabase()
        let staged = try self.uploads.current.withLock { (current: inout RestoreUploads.Upload?) throws(SugarAPIError) -> String in
            guard let state = current, state.name == upload else {
                throw SugarAPIError(.invalidParameter, "no upload \(upload) is open: send the file with RestoreUpload first", subject: "upload")
            }
            current = nil
            return state.path
        }
        defer {
            unlink(staged)
            unlink(staged + "-wal")
            unlink(staged + "-shm")
            unlink(staged + "-journal")
        }
        let prepared: DatabaseFacts
        do throws(StoreError) {
            prepared = try SQLiteReadingStore.prepareRestore(staged)
        } catch {
            self.logger?.warning("restore refused: \(error.message)")
            throw SugarAPIError(.invalidDatabase, error.message)
        }
        let outcome: RestoreOutcome
        do throws(StoreError) {
            outcome = try await database.restore(from: staged)
        } catch {
            self.logger?.error("restore failed: \(error.message)")
            throw SugarAPIError(.storageError, error.message, subject: error.code.rawValue)
        }
        self.logger?.notice(
            "restore: database \(outcome.restored.databaseId ?? "-") (\(outcome.restored.readings) readings) replaced database "
                + "\(outcome.previousDatabaseId ?? "-"), kept as \(outcome.keptAs ?? "nothing (no file)")")
        let health = await database.health()
        self.models.viewModel.update { $0.daemon.storage = health }
        if let logger = self.logger {
            await Daemon.restore(models: self.models, from: database, logger: logger)
        }
        return RestoreReport(
            path: database.path, size: outcome.restored.size, readings: outcome.restored.readings,
            databaseId: outcome.restored.databaseId, previousDatabaseId: outcome.previousDatabaseId,
            schemaVersion: outcome.restored.schemaVersion, migratedFrom: prepared.migratedFrom, keptAs: outcome.keptAs)
    }

    /// Removes what an interrupted backup or restore left next to the database (a backup copy
    /// not yet unlinked, a staging file of an upload that never finished).
    static func removeLeftovers(databasePath: String, logger: Logger) {
        let directory = Self.directory(of: databasePath)
        let name = String(databasePath[databasePath.index(after: databasePath.lastIndex(of: "/") ?? databasePath.startIndex)...])
        let base = databasePath.contains("/") ? name : databasePath
        guard let dir = opendir(directory) else { return }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let file = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard file.hasPrefix(".sugard-backup-") || file.hasPrefix(base + ".restore-") else { continue }
            if unlink(directory + "/" + file) == 0 { logger.notice("removed \(directory)/\(file), left by an interrupted backup or restore") }
        }
    }

    /// The directory part of a path: `.` without a slash, `/` for a file at the root.
    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
