internal import CSQLite
import HealthDataSync

#if canImport(Glibc)
import Glibc
#endif

// The thin owner layer over libsqlite3. Nothing here is public: C types never leave this module.
//
// Threading: a `Connection` and its `Statement`s are confined to one serial context (the
// `SQLiteReadingStore` actor, or one benchmark/test function). They are opened with
// SQLITE_OPEN_NOMUTEX, which is safe as long as no two threads use them at the same time.

/// Maps an SQLite result code (primary or extended) to the store's error code.
func storeErrorCode(forSQLiteCode code: CInt) -> StoreError.Code {
    switch code & 0xff {
    case SQLITE_FULL: return .diskFull
    case SQLITE_READONLY: return .readOnly
    case SQLITE_BUSY, SQLITE_LOCKED: return .busy
    case SQLITE_CORRUPT, SQLITE_NOTADB: return .corrupt
    case SQLITE_CANTOPEN: return .cannotOpen
    case SQLITE_IOERR: return .io
    case SQLITE_CONSTRAINT: return .constraint
    default: return .other
    }
}

/// Owns one `sqlite3*` handle. Closes it in `deinit` or ``close()``.
package final class Connection {
    /// The database file, for messages.
    let path: String
    /// The `sqlite3*`; nil once closed.
    private(set) var handle: OpaquePointer?
    /// Prepared statements by SQL text, kept until the connection closes.
    private var statements: [String: Statement] = [:]

    /// Opens (and, unless `readOnly`, creates) the database file.
    ///
    /// The corresponding C function is `sqlite3_open_v2`.
    init(path: String, readOnly: Bool = false, create: Bool = true, busyTimeoutMilliseconds: Int = 5000) throws(StoreError) {
        self.path = path
        var db: OpaquePointer?
        let access = readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0))
        let code = sqlite3_open_v2(path, &db, access | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE, nil)
        guard code == SQLITE_OK, let db else {
            // > Whether or not an error occurs when it is opened, resources associated with the
            // > database connection handle should be released by passing it to sqlite3_close()
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            _ = sqlite3_close_v2(db)
            throw StoreError(
                storeErrorCode(forSQLiteCode: code),
                "Opening the database \(path) failed: \(message) (SQLite code \(code))."
            )
        }
        self.handle = db
        _ = sqlite3_extended_result_codes(db, 1)
        _ = sqlite3_busy_timeout(db, CInt(clamping: busyTimeoutMilliseconds))
    }

    deinit { self.close() }

    /// Finalizes every cached statement and closes the handle. Safe to call twice.
    ///
    /// The corresponding C function is `sqlite3_close_v2`.
    package func close() {
        self.statements.removeAll()  // finalizes them (Statement.deinit)
        if let handle = self.handle {
            // close_v2 turns the connection into a zombie until any statement still alive elsewhere
            // is finalized, so ordering mistakes cannot leak or crash.
            _ = sqlite3_close_v2(handle)
            self.handle = nil
        }
    }

    /// False once ``close()`` ran.
    var isOpen: Bool { self.handle != nil }

    /// The handle, or a ``StoreError/Code/cannotOpen`` naming `operation` when the connection is closed.
    func requireHandle(_ operation: @autoclosure () -> String) throws(StoreError) -> OpaquePointer {
        guard let handle = self.handle else {
            throw StoreError(.cannotOpen, "\(operation()) failed for \(self.path): the database is closed.")
        }
        return handle
    }

    /// Whether SQLite opened the main database read-only (e.g. the file is not writable).
    var isReadOnly: Bool {
        guard let handle = self.handle else { return true }
        return sqlite3_db_readonly(handle, "main") == 1
    }

    /// The one place that turns SQLite error state into a ``StoreError``.
    func error(_ code: CInt, _ operation: String) -> StoreError {
        var extended = code
        var message = String(cString: sqlite3_errstr(code))
        if let handle = self.handle {
            let fromHandle = sqlite3_extended_errcode(handle)
            if fromHandle != SQLITE_OK && (fromHandle & 0xff) == (code & 0xff) { extended = fromHandle }
            message = String(cString: sqlite3_errmsg(handle))
        }
        return StoreError(
            storeErrorCode(forSQLiteCode: extended),
            "\(operation) failed for \(self.path): \(message) (SQLite code \(extended))."
        )
    }

    /// Throws a ``StoreError`` unless `code` is OK, ROW or DONE.
    func check(_ code: CInt, _ operation: @autoclosure () -> String) throws(StoreError) {
        if code == SQLITE_OK || code == SQLITE_ROW || code == SQLITE_DONE { return }
        throw self.error(code, operation())
    }

    /// Runs SQL text that returns no rows (may hold several statements).
    ///
    /// The corresponding C function is `sqlite3_exec`.
    func execute(_ sql: String, _ operation: @autoclosure () -> String) throws(StoreError) {
        let handle = try self.requireHandle(operation())
        try self.check(sqlite3_exec(handle, sql, nil, nil, nil), operation())
    }

    /// A prepared statement, cached for the connection's life. Reset it after use (``withStatement``
    /// does that).
    func cached(_ sql: String) throws(StoreError) -> Statement {
        if let statement = self.statements[sql] { return statement }
        let statement = try self.prepare(sql)
        self.statements[sql] = statement
        return statement
    }

    /// A new prepared statement owned by the caller.
    ///
    /// The corresponding C function is `sqlite3_prepare_v3`.
    func prepare(_ sql: String) throws(StoreError) -> Statement {
        let handle = try self.requireHandle("Preparing a statement")
        var stmt: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, CUnsignedInt(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard code == SQLITE_OK, let stmt else {
            _ = sqlite3_finalize(stmt)
            throw self.error(code == SQLITE_OK ? SQLITE_MISUSE : code, "Preparing \"\(sql.prefix(60))\"")
        }
        return Statement(handle: stmt, connection: self)
    }

    /// Runs `body` with a cached statement and resets it afterwards, whatever happens.
    func withStatement<T>(
        _ sql: String, _ body: (Statement) throws(StoreError) -> T
    ) throws(StoreError) -> T {
        let statement = try self.cached(sql)
        defer { statement.reset() }
        return try body(statement)
    }

    /// Runs `body` inside `BEGIN IMMEDIATE` … `COMMIT`. On any error the transaction is rolled back
    /// (so nothing of it becomes visible) and the error is rethrown.
    package func transaction<T>(_ operation: String, _ body: () throws(StoreError) -> T) throws(StoreError) -> T {
        try self.execute("BEGIN IMMEDIATE", "\(operation) (begin)")
        do throws(StoreError) {
            let result = try body()
            // Nothing is committed to a file the path no longer names (deleted, renamed, replaced):
            // it would be gone at the next open.
            if self.hasMoved { throw self.movedError(operation) }
            try self.execute("COMMIT", "\(operation) (commit)")
            return result
        } catch {
            self.rollbackIfActive()
            throw error
        }
    }

    /// Rolls back an open transaction; some errors (SQLITE_FULL, IOERR) already did that.
    func rollbackIfActive() {
        guard let handle = self.handle, sqlite3_get_autocommit(handle) == 0 else { return }
        _ = sqlite3_exec(handle, "ROLLBACK", nil, nil, nil)
    }

    /// Whether the path no longer names the file this connection has open (it was deleted,
    /// renamed or replaced by another file): SQLite compares the path's inode with the one it
    /// opened. False when the connection is closed.
    ///
    /// The corresponding C function is `sqlite3_file_control(SQLITE_FCNTL_HAS_MOVED)`.
    var hasMoved: Bool {
        guard let handle = self.handle else { return false }
        var moved: CInt = 0
        guard sqlite3_file_control(handle, "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK else { return false }
        return moved != 0
    }

    /// The ``StoreError/Code/replaced`` error for `operation` on a file that was moved away.
    func movedError(_ operation: String) -> StoreError {
        StoreError(
            .replaced,
            "\(operation) stopped: the database file \(self.path) was deleted, renamed or replaced while sugard had it open."
        )
    }

    /// Copies the whole database into `destination` (an open connection to another file) through
    /// SQLite's online backup API, in one step: one read transaction, so the copy is the database
    /// as of one commit, and writers (WAL) go on meanwhile.
    ///
    /// The corresponding C functions are `sqlite3_backup_init`, `_step` and `_finish`.
    func backup(into destination: Connection) throws(StoreError) {
        let source = try self.requireHandle("Backing up")
        let target = try destination.requireHandle("Backing up")
        guard let backup = sqlite3_backup_init(target, "main", source, "main") else {
            throw destination.error(sqlite3_errcode(target), "Starting the backup of \(self.path)")
        }
        var code = sqlite3_backup_step(backup, -1)
        while code == SQLITE_BUSY || code == SQLITE_LOCKED {
            usleep(20_000)
            code = sqlite3_backup_step(backup, -1)
        }
        let finish = sqlite3_backup_finish(backup)
        guard code == SQLITE_DONE else { throw destination.error(code, "Backing up \(self.path)") }
        try destination.check(finish, "Finishing the backup of \(self.path)")
    }

    /// The row id of the last successful INSERT on this connection; 0 when closed.
    var lastInsertRowID: Int64 {
        guard let handle = self.handle else { return 0 }
        return sqlite3_last_insert_rowid(handle)
    }

    /// Rows changed by the last INSERT/UPDATE/DELETE.
    var changes: Int {
        guard let handle = self.handle else { return 0 }
        return Int(sqlite3_changes(handle))
    }

    /// One integer from a query such as `PRAGMA user_version`.
    func scalarInt(_ sql: String, _ operation: @autoclosure () -> String) throws(StoreError) -> Int64? {
        let statement = try self.prepare(sql)
        guard try statement.step(operation()) else { return nil }
        return statement.optionalInt64(0)
    }

    /// Every row's first column as text (for `PRAGMA integrity_check`, `journal_mode`, …).
    func textColumn(
        _ sql: String, column: CInt = 0, _ operation: @autoclosure () -> String
    ) throws(StoreError) -> [String] {
        let statement = try self.prepare(sql)
        var out: [String] = []
        while try statement.step(operation()) { out.append(statement.optionalText(column) ?? "") }
        return out
    }
}

/// Owns one `sqlite3_stmt*`; finalizes it in `deinit`.
///
/// Text and BLOB parameters are copied into a buffer the statement owns, one per parameter, and
/// bound `SQLITE_STATIC` from there: binding a row allocates nothing once the buffers have grown
/// to the row's sizes (`SQLITE_TRANSIENT` made SQLite allocate and free a copy per value). A
/// buffer is rewritten only when its parameter is bound again, and freed after the statement is
/// finalized, so SQLite never sees it change under a binding.
final class Statement {
    /// The `sqlite3_stmt*`, finalized in `deinit`.
    let handle: OpaquePointer
    /// The connection it was prepared on (which outlives it: it holds the cached statements).
    unowned let connection: Connection
    /// Per parameter index (1-based; index 0 unused): the buffer its last text or BLOB was copied
    /// to and that buffer's capacity. Allocated at the first text or BLOB binding.
    private var buffers: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
    /// Per parameter index: the capacity of its buffer.
    private var capacities: UnsafeMutablePointer<Int>?
    /// Entries in `buffers` and `capacities`: the parameter count plus one.
    private var bufferCount = 0

    /// Takes ownership of a prepared statement of `connection`.
    init(handle: OpaquePointer, connection: Connection) {
        self.handle = handle
        self.connection = connection
    }

    /// The corresponding C function is `sqlite3_finalize`.
    deinit {
        _ = sqlite3_finalize(self.handle)
        if let buffers = self.buffers, let capacities = self.capacities {
            for i in 0..<self.bufferCount { free(buffers[i]) }
            buffers.deallocate()
            capacities.deallocate()
        }
    }

    /// Resets the statement and clears its bindings.
    func reset() {
        _ = sqlite3_reset(self.handle)
        _ = sqlite3_clear_bindings(self.handle)
    }

    /// Resets the statement but keeps its bindings, for a caller that binds every parameter again
    /// before the next step (the ingest's per-reading statements).
    func resetKeepingBindings() {
        _ = sqlite3_reset(self.handle)
    }

    /// Throws the binding's error; only a failure touches the connection.
    @inline(__always)
    private func checkBinding(_ code: CInt, _ index: CInt) throws(StoreError) {
        if code != SQLITE_OK { throw self.connection.error(code, "Binding parameter \(index)") }
    }

    /// Copies `count` bytes to the parameter's own buffer (grown as needed, one byte more for a
    /// terminating NUL) and returns it, or nil when `index` is not a parameter of the statement
    /// (the caller then binds a copy and SQLite reports the range error).
    private func ownedCopy(_ bytes: UnsafeRawPointer, count: Int, at index: CInt) -> UnsafeRawPointer? {
        let i = Int(index)
        if self.buffers == nil {
            let n = Int(sqlite3_bind_parameter_count(self.handle)) + 1
            self.buffers = .allocate(capacity: n)
            self.buffers!.initialize(repeating: nil, count: n)
            self.capacities = .allocate(capacity: n)
            self.capacities!.initialize(repeating: 0, count: n)
            self.bufferCount = n
        }
        guard i > 0, i < self.bufferCount, let buffers = self.buffers, let capacities = self.capacities else { return nil }
        if capacities[i] < count + 1 {
            var capacity = 32
            while capacity < count + 1 { capacity <<= 1 }
            guard let grown = realloc(buffers[i], capacity) else { return nil }
            buffers[i] = grown
            capacities[i] = capacity
        }
        let buffer = buffers[i]!
        buffer.copyMemory(from: bytes, byteCount: count)
        buffer.storeBytes(of: 0, toByteOffset: count, as: UInt8.self)
        return UnsafeRawPointer(buffer)
    }

    /// Binds `count` bytes of text (UTF-8) from the parameter's own buffer.
    private func bindText(_ bytes: UnsafeRawPointer, count: Int, at index: CInt) -> CInt {
        guard let owned = self.ownedCopy(bytes, count: count, at: index) else {
            return sqlite3_bind_text(
                self.handle, index, bytes.assumingMemoryBound(to: CChar.self), CInt(count), csqlite_transient())
        }
        return sqlite3_bind_text(self.handle, index, owned.assumingMemoryBound(to: CChar.self), CInt(count), nil)
    }

    // MARK: Binding (1-based indices, as in SQLite)

    /// Binds an integer, or NULL for nil.
    func bind(_ value: Int64?, at index: CInt) throws(StoreError) {
        let code = value.map { sqlite3_bind_int64(self.handle, index, $0) } ?? sqlite3_bind_null(self.handle, index)
        try self.checkBinding(code, index)
    }

    /// Binds an integer, or NULL for nil.
    func bind(_ value: Int?, at index: CInt) throws(StoreError) {
        try self.bind(value.map { Int64($0) }, at: index)
    }

    /// Binds a REAL, or NULL for nil.
    func bind(_ value: Double?, at index: CInt) throws(StoreError) {
        let code = value.map { sqlite3_bind_double(self.handle, index, $0) } ?? sqlite3_bind_null(self.handle, index)
        try self.checkBinding(code, index)
    }

    /// Binds the text up to its first NUL, as a C string (what `sqlite3_bind_text` with length -1 stores).
    func bind(_ value: String?, at index: CInt) throws(StoreError) {
        let code: CInt
        if let value {
            code = value.withCString { p in self.bindText(p, count: strlen(p), at: index) }
        } else {
            code = sqlite3_bind_null(self.handle, index)
        }
        try self.checkBinding(code, index)
    }

    /// Binds `LocalDateTime.isoString`'s text, formatted on the stack (no String per row).
    func bind(isoText t: LocalDateTime, at index: CInt) throws(StoreError) {
        let code = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: LocalDateTime.isoStringMaxBytes) { raw -> CInt in
            let n = t.writeISOString(into: raw)
            return self.bindText(raw.baseAddress!, count: n, at: index)
        }
        try self.checkBinding(code, index)
    }

    /// Binds bytes as a BLOB (an empty array is an empty BLOB, not NULL).
    func bind(blob value: [UInt8]?, at index: CInt) throws(StoreError) {
        let code: CInt
        if let value {
            if value.isEmpty {
                code = sqlite3_bind_zeroblob(self.handle, index, 0)
            } else {
                code = value.withUnsafeBytes { raw in
                    guard let owned = self.ownedCopy(raw.baseAddress!, count: raw.count, at: index) else {
                        return sqlite3_bind_blob(self.handle, index, raw.baseAddress, CInt(raw.count), csqlite_transient())
                    }
                    return sqlite3_bind_blob(self.handle, index, owned, CInt(raw.count), nil)
                }
            }
        } else {
            code = sqlite3_bind_null(self.handle, index)
        }
        try self.checkBinding(code, index)
    }

    // MARK: Stepping

    /// Advances; true when a row is available, false when done.
    ///
    /// The corresponding C function is `sqlite3_step`.
    func step(_ operation: @autoclosure () -> String) throws(StoreError) -> Bool {
        let code = sqlite3_step(self.handle)
        if code == SQLITE_ROW { return true }
        if code == SQLITE_DONE { return false }
        throw self.connection.error(code, operation())
    }

    /// Steps to completion (for INSERT/UPDATE).
    func run(_ operation: @autoclosure () -> String) throws(StoreError) {
        while try self.step(operation()) {}
    }

    // MARK: Columns (0-based indices)

    /// Whether the current row's column is NULL.
    func isNull(_ index: CInt) -> Bool { sqlite3_column_type(self.handle, index) == SQLITE_NULL }

    /// The column as an integer (NULL reads as 0).
    func int64(_ index: CInt) -> Int64 { sqlite3_column_int64(self.handle, index) }

    /// The column as an integer; nil for NULL.
    func optionalInt64(_ index: CInt) -> Int64? { self.isNull(index) ? nil : self.int64(index) }

    /// The column as an `Int`; nil for NULL.
    func optionalInt(_ index: CInt) -> Int? { self.optionalInt64(index).map { Int($0) } }

    /// The column as a REAL; nil for NULL.
    func optionalDouble(_ index: CInt) -> Double? {
        self.isNull(index) ? nil : sqlite3_column_double(self.handle, index)
    }

    /// The column as text (up to its first NUL); nil for NULL.
    func optionalText(_ index: CInt) -> String? {
        guard !self.isNull(index), let text = sqlite3_column_text(self.handle, index) else { return nil }
        return String(cString: text)
    }

    /// The column's bytes; nil for NULL, empty for an empty BLOB.
    func optionalBlob(_ index: CInt) -> [UInt8]? {
        if self.isNull(index) { return nil }
        // Docs: call sqlite3_column_blob first, then sqlite3_column_bytes.
        let pointer = sqlite3_column_blob(self.handle, index)
        let count = Int(sqlite3_column_bytes(self.handle, index))
        guard let pointer, count > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}
