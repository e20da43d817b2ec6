#if canImport(Glibc)
import Glibc
#endif
import HealthDataSync
import SystemIO

/// The SQLite implementation of ``ReadingStore``: one database file in WAL mode with
/// `synchronous=FULL`, foreign keys on and a busy timeout.
///
/// All work runs on this actor, which owns the single connection. Failures never stop the store:
/// each throws a ``StoreError`` whose code says what went wrong (disk full, read-only, busy,
/// corrupt, cannot open, I/O); ``health()`` turns `degraded` after a failed write and `ok` again
/// after the next successful one. After a read-only, I/O, corruption or open error the connection
/// is reopened before the next operation, so a file that became writable again (or a database
/// restored from backup) is picked up without restarting the daemon.
///
/// Deduplication and sequence resets are described at ``commit(_:)``.
public actor SQLiteReadingStore: ReadingStore {
    /// The database file.
    public nonisolated let path: String
    /// How the store opens and runs its connection.
    let options: StoreOptions
    /// The one connection; nil while the database cannot be opened (then every operation tries again).
    var connection: Connection?
    /// An earlier failure asked for the connection to be reopened before the next operation.
    var needsReopen = false
    /// ``close()`` ran: operations throw.
    private var closed = false
    /// Health as the last operation left it (``healthWithChecks()`` adds the checks).
    var healthState: StorageHealth
    /// The open database's identity (``StorageHealth/databaseId``).
    var databaseId: String?
    /// The latest integrity check started (``check(_:reason:)``), running or finished.
    var currentCheck: StorageCheck?
    /// The last finished check that could tell (ok or damaged); damage it found shows in health.
    var verdict: StorageCheck?
    /// Counts checks started, so only the latest one becomes ``currentCheck``.
    var checkSerial = 0

    // Test hooks (internal; reached with `@testable import`).
    /// Open every (re)opened connection read-only, as if the file were not writable.
    var forceReadOnlyOpenForTesting = false
    /// Throw an I/O error after this many reading inserts within one commit.
    var failAfterInsertsForTesting: Int?

    /// Opens the database at `path`, creating it when missing, and migrates it to the current
    /// schema. Throws when the file cannot be opened, is not a database, fails its quick check
    /// (``StoreOptions/quickCheckOnOpen``), or has a schema newer than this build.
    public init(path: String, options: StoreOptions = StoreOptions()) throws(StoreError) {
        self.path = path
        self.options = options
        let (connection, health) = try Self.open(path: path, options: options, readOnly: false)
        self.connection = connection
        self.healthState = health
        self.databaseId = health.databaseId
    }

    /// Like ``init(path:options:)`` but never throws: when the database cannot be opened now, the
    /// store starts with ``StorageHealth/Status/failed`` and tries again on every operation, so the
    /// daemon keeps running and recovers once the condition clears.
    public init(retryingOpenAt path: String, options: StoreOptions = StoreOptions()) {
        self.path = path
        self.options = options
        do throws(StoreError) {
            let (connection, health) = try Self.open(path: path, options: options, readOnly: false)
            self.connection = connection
            self.healthState = health
            self.databaseId = health.databaseId
        } catch {
            self.connection = nil
            self.healthState = StorageHealth(status: .failed, path: path, error: error)
        }
    }

    /// Closes the database. Later calls throw ``StoreError/Code/cannotOpen``. Safe to call twice.
    public func close() {
        self.connection?.close()
        self.connection = nil
        self.closed = true
    }

    /// The schema version this build writes.
    public static var schemaVersion: Int { Int(Schema.latestVersion) }

    // MARK: Opening and health

    /// Opens `path` (creating it 0600 when missing, tightening looser modes), switches it to WAL
    /// with `synchronous=FULL` and foreign keys, runs the quick check when configured, and migrates
    /// it. A file SQLite opens read-only is served `degraded` (reads only) when its schema is current.
    /// - Throws: ``StoreError`` when the file cannot be opened, is damaged, or cannot be migrated.
    package static func open(path: String, options: StoreOptions, readOnly: Bool) throws(StoreError) -> (
        Connection, StorageHealth
    ) {
        let isNew = !readOnly && !fileExists(path)
        // Readings are health data: the file is created 0600 (SQLite gives its WAL and SHM files the
        // database's mode), and files an older version or another tool left more open are tightened.
        if isNew { createPrivateFile(path) }
        if !readOnly { tightenModes(databasePath: path) }
        // On any throw below, `db` is released and its deinit closes the handle.
        let db = try Connection(path: path, readOnly: readOnly, busyTimeoutMilliseconds: options.busyTimeoutMilliseconds)
        if !db.isReadOnly {
            // WAL: readers never block the writer; FULL: the WAL is fsynced on every commit, so a
            // committed sync survives power loss (ecosystem notes §5.1).
            let mode = try db.textColumn("PRAGMA journal_mode = WAL", "Switching \(path) to WAL mode")
            guard mode.first?.lowercased() == "wal" else {
                throw StoreError(.io, "Switching \(path) to WAL mode failed: SQLite kept journal mode \(mode).")
            }
        }
        try db.execute("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;", "Configuring \(path)")
        if options.quickCheckOnOpen {
            let result = try db.textColumn("PRAGMA quick_check", "Checking the integrity of \(path)")
            guard result == ["ok"] else {
                throw StoreError(.corrupt, "The database \(path) is damaged: quick_check reported \(result.count) problem(s).")
            }
        }
        if db.isReadOnly {
            let version = try Schema.userVersion(db)
            guard version == Schema.latestVersion else {
                throw StoreError(
                    .readOnly,
                    "The database \(path) is read-only and at schema version \(version), not \(Schema.latestVersion)."
                )
            }
            let error = StoreError(.readOnly, "The database \(path) is read-only: readings can be listed but not stored.")
            return (db, StorageHealth(status: .degraded, path: path, error: error, databaseId: try Schema.identity(db)))
        }
        try Schema.migrate(db)
        if isNew { syncDirectory(containing: path) }
        return (db, StorageHealth(status: .ok, path: path, databaseId: try Schema.identity(db)))
    }

    /// The open connection, reopening it first when an earlier failure asked for that.
    func usableConnection() throws(StoreError) -> Connection {
        if self.closed { throw StoreError(.cannotOpen, "The store for \(self.path) is closed.") }
        if let connection = self.connection, !self.needsReopen {
            if !connection.hasMoved { return connection }
            return try self.replaceMovedDatabase()
        }
        self.connection?.close()
        self.connection = nil
        do throws(StoreError) {
            let (db, health) = try Self.open(path: self.path, options: self.options, readOnly: self.forceReadOnlyOpenForTesting)
            self.connection = db
            self.needsReopen = false
            self.databaseId = health.databaseId
            if health.status != .ok {
                self.healthState = health
            } else if self.healthState.status == .failed {
                self.healthState = health
            }
            return db
        } catch {
            self.healthState = StorageHealth(status: .failed, path: self.path, error: error)
            throw error
        }
    }

    /// The path no longer names the open file (deleted, renamed, replaced): closes it and opens
    /// (or creates) the file at the path under a NEW identity, even when that file is an older
    /// copy of a database (its positions would mislead a follower). Health turns `degraded` with a
    /// `replaced` error saying what happened, until the next successful write; `failed` when the
    /// path cannot be opened (tried again by the next operation).
    private func replaceMovedDatabase() throws(StoreError) -> Connection {
        let previous = self.databaseId
        if let connection = self.connection {
            // What the WAL holds goes into the moved file (through the open descriptor), so that
            // file is whole wherever it went; the WAL and shared-memory files left at the path
            // belong to it and must never be applied to the file now at the path (SQLite would
            // replay them into it).
            _ = try? connection.textColumn("PRAGMA wal_checkpoint(TRUNCATE)", "Checkpointing the moved \(self.path)")
            connection.close()
            unlink(self.path + "-wal")
            unlink(self.path + "-shm")
        }
        self.connection = nil
        self.databaseId = nil
        let what = "The database file \(self.path) (database \(previous ?? "without an identity")) was deleted, renamed or replaced while sugard had it open"
        do throws(StoreError) {
            let (db, _) = try Self.open(path: self.path, options: self.options, readOnly: self.forceReadOnlyOpenForTesting)
            if !db.isReadOnly {
                try db.transaction("Giving \(self.path) a new identity") { () throws(StoreError) in
                    try Schema.setIdentity(DatabaseIdentity.random(), on: db)
                }
            }
            let id = try Schema.identity(db)
            self.connection = db
            self.needsReopen = false
            self.databaseId = id
            self.replacements += 1
            self.replacedAt = ContinuousClock.now
            self.replacedAtWall = systemNow()
            self.healthState = StorageHealth(
                status: .degraded, path: self.path,
                error: StoreError(
                    .replaced,
                    "\(what); sugard now stores into \(self.path) as database \(id ?? "?"). Readings stored before are only in the "
                        + "file that was moved away (if it still exists); meters sync their records again."),
                databaseId: id)
            return db
        } catch {
            self.needsReopen = true
            self.healthState = StorageHealth(
                status: .failed, path: self.path, error: StoreError(.replaced, "\(what); reopening it failed: \(error.message)"))
            throw error
        }
    }

    /// How often the open file was found moved and replaced (``checkFile()``, or before an operation).
    public private(set) var replacements = 0
    /// When the last replacement was noticed (monotonic), for ``StoreOptions/replacedNotice``.
    private var replacedAt: ContinuousClock.Instant?
    /// When the last replacement was noticed (wall clock, as sync sessions' start times are).
    var replacedAtWall: Instant?

    /// Whether health still shows the last replacement (``StoreOptions/replacedNotice``).
    private var showsReplacement: Bool {
        guard let at = self.replacedAt, self.healthState.error?.code == .replaced else { return false }
        return ContinuousClock.now - at < self.options.replacedNotice
    }

    /// Checks that the path still names the open file (one `stat`); when it does not, replaces the
    /// connection as every operation would (see ``replaceMovedDatabase()``). Returns the health
    /// afterwards. The daemon calls it every few seconds, so a deleted file is noticed even
    /// while nothing is read or written.
    @discardableResult
    public func checkFile() -> StorageHealth {
        if !self.closed, !self.needsReopen, let connection = self.connection, connection.hasMoved {
            _ = try? self.replaceMovedDatabase()
        }
        return self.healthWithChecks()
    }

    /// The open database's identity.
    public func identity() -> String? { self.databaseId }

    /// Runs `body` on the connection and keeps ``health()`` in step with the outcome.
    func withDatabase<T>(
        writing: Bool, _ body: (Connection) throws(StoreError) -> T
    ) throws(StoreError) -> T {
        var attempts = 0
        while true {
            attempts += 1
            let db = try self.usableConnection()
            do throws(StoreError) {
                let result = try body(db)
                if writing, !self.showsReplacement {
                    self.healthState = StorageHealth(status: .ok, path: self.path, databaseId: self.databaseId)
                }
                return result
            } catch {
                // The file went away between the check and the commit (the transaction checks
                // again before COMMIT and rolled back): once more, into the replacement.
                if error.code == .replaced, attempts == 1 { continue }
                switch error.code {
                case .readOnly, .io, .corrupt, .cannotOpen, .replaced: self.needsReopen = true
                case .diskFull, .busy, .constraint, .other: break
                }
                switch error.code {
                case .corrupt, .cannotOpen, .replaced:
                    self.healthState = StorageHealth(status: .failed, path: self.path, error: error, databaseId: self.databaseId)
                case .constraint:
                    break  // the caller's batch was malformed; storage itself is fine
                case .diskFull, .readOnly, .busy, .io, .other:
                    if writing {
                        self.healthState = StorageHealth(status: .degraded, path: self.path, error: error, databaseId: self.databaseId)
                    }
                }
                throw error
            }
        }
    }

    /// Whether the database works now, with the latest integrity check laid over it.
    public func health() -> StorageHealth { self.healthWithChecks() }

    /// Runs `PRAGMA integrity_check`; `["ok"]` when the file is sound, else one line per problem.
    public func integrityCheck() throws(StoreError) -> [String] {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) -> [String] in
            try db.textColumn("PRAGMA integrity_check", "Checking the integrity of \(db.path)")
        }
    }

    // MARK: Meters

    /// The stored meter with this id; nil when unknown or forgotten.
    public func meter(_ id: MeterID) throws(StoreError) -> StoredMeter? {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) -> StoredMeter? in
            guard let row = try MeterRow.load(id, db), row.forgotten == nil else { return nil }
            return try row.stored(db)
        }
    }

    /// Every stored meter that is not forgotten.
    public func meters() throws(StoreError) -> [StoredMeter] {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) -> [StoredMeter] in
            try MeterRow.loadAll(db).filter { $0.forgotten == nil }.map { (row) throws(StoreError) in try row.stored(db) }
        }
    }

    /// Records that the meter was seen at `at` (adding it, or updating its identity and last sighting);
    /// a changed serial number opens a new epoch (`serialNumberChanged`).
    public func noteMeterSeen(_ identity: MeterIdentity, at: Instant) throws(StoreError) {
        let now = self.options.now()
        try self.withDatabase(writing: true) { (db: Connection) throws(StoreError) in
            try db.transaction("Recording that meter \(identity.id) was seen") { () throws(StoreError) in
                let (row, serialChanged) = try MeterRow.upsert(identity, features: nil, seenAt: at, db)
                if serialChanged {
                    var row = row
                    try Ingest.openEpoch(
                        &row, reason: .serialNumberChanged, sequenceNumber: nil, sessionID: nil, now: now, db)
                    try row.saveSyncState(db)
                }
            }
        }
    }

    /// Marks the meter forgotten and clears its high-water mark: it leaves the meter list and syncs
    /// from scratch when seen again. Its readings stay.
    public func forget(_ meter: MeterID) throws(StoreError) {
        let now = self.options.now()
        try self.withDatabase(writing: true) { (db: Connection) throws(StoreError) in
            try db.withStatement(
                "UPDATE meter SET forgotten_ms = ?, high_water = NULL WHERE address = ?"
            ) { (statement) throws(StoreError) in
                try statement.bind(now.epochMillis, at: 1)
                try statement.bind(meter.rawValue, at: 2)
                try statement.run("Forgetting meter \(meter) in \(db.path)")
            }
        }
    }

    /// Assigns a meter to a person from now on, or unassigns it (`person` nil): the legacy form
    /// of ``setAssignment(_:holder:from:)``. An unknown person is added first.
    public func assign(_ meter: MeterID, person: String?) throws(StoreError) {
        if let person, person.isEmpty || person.count > Schema.maxPersonLength {
            throw StoreError(.constraint, "A person's name has 1 to \(Schema.maxPersonLength) characters.")
        }
        let now = self.options.now()
        try self.withDatabase(writing: true) { (db: Connection) throws(StoreError) in
            try db.transaction("Assigning meter \(meter)") { () throws(StoreError) in
                let row = try self.meterRow(meter, db)
                if let person, try PersonRows.named(person, counts: false, db) == nil {
                    try self.insertPersonRow(PersonRecord(id: 0, name: person, created: now), now: now, db)
                }
                let holder = person.map { MeterHolder.person($0) }
                let current = try AssignmentRows.load(meterRowID: row.rowID, db).first { $0.covers(now.epochMillis) }
                if current?.holder == holder || (holder == nil && current == nil) { return }
                _ = try AssignmentRows.set(meter: row, holder: holder, from: now.epochMillis, now: now.epochMillis, db)
            }
        }
    }

    /// The person of every meter assigned to one now (forgotten ones too).
    public func people() throws(StoreError) -> [MeterID: String] {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) -> [MeterID: String] in
            try db.withStatement(
                """
                SELECT m.address, p.name FROM meter_assignment a JOIN meter m ON m.id = a.meter_id
                JOIN person p ON p.id = a.person_id WHERE a.until_ms IS NULL
                """
            ) { (s) throws(StoreError) -> [MeterID: String] in
                var out: [MeterID: String] = [:]
                while try s.step("Listing people in \(db.path)") {
                    if let person = s.optionalText(1) { out[MeterID(rawValue: s.optionalText(0) ?? "")] = person }
                }
                return out
            }
        }
    }

    /// The meter's row; throws ``StoreError/Code/constraint`` when no such meter is stored.
    private func meterRow(_ meter: MeterID, _ db: Connection) throws(StoreError) -> MeterRow {
        guard let row = try MeterRow.load(meter, db) else { throw StoreError(.constraint, "No meter \(meter) is stored.") }
        return row
    }

    /// Adds a person with their identifiers (inside the caller's transaction) and returns the row id.
    /// - Throws: ``StoreError/Code/constraint`` for a bad name or thresholds, a name taken, or an
    ///   identifier held by someone else.
    @discardableResult
    func insertPersonRow(_ person: PersonRecord, now: Instant, _ db: Connection) throws(StoreError) -> Int64 {
        if person.name.isEmpty || person.name.count > Schema.maxPersonLength {
            throw StoreError(.constraint, "A person's name has 1 to \(Schema.maxPersonLength) characters.")
        }
        try PersonRows.checkThresholds(low: person.lowMgdL, high: person.highMgdL)
        if try PersonRows.named(person.name, counts: false, db) != nil {
            throw StoreError(.constraint, "A person named \(person.name) exists already.")
        }
        try db.withStatement("INSERT INTO person (name, low_mgdl, high_mgdl, unit, created_ms) VALUES (?, ?, ?, ?, ?)") {
            (s) throws(StoreError) in
            try s.bind(person.name, at: 1)
            try s.bind(person.lowMgdL, at: 2)
            try s.bind(person.highMgdL, at: 3)
            try s.bind(PersonRows.unitText(person.unit), at: 4)
            try s.bind(now.epochMillis, at: 5)
            try s.run("Adding person \(person.name) to \(db.path)")
        }
        let id = db.lastInsertRowID
        try PersonRows.addIdentifiers(person.identifiers, personID: id, name: person.name, db)
        return id
    }

    // MARK: Commit

    /// Commits a sync attempt in ONE transaction: meter identity, readings, high-water mark, session
    /// and any sequence-reset events. On any error nothing of it becomes visible.
    ///
    /// Rules, applied to the readings in arrival order, each against everything stored before it
    /// (including earlier readings of the same batch):
    /// 1. **Duplicate (current epoch)**: a stored reading of this meter in the current epoch has the
    ///    same sequence number, base time and raw concentration. Dropped and counted.
    /// 2. **Duplicate (earlier epoch)**: a stored reading of this meter in an earlier epoch has the
    ///    same sequence number, base time, raw concentration AND identical measurement bytes (a
    ///    replayed capture or a re-sent old record after a reset). Dropped and counted.
    /// 3. **Sequence conflict**: the current epoch holds this sequence number with other content.
    ///    The meter's counter restarted: a new epoch opens (a `sequenceConflict` event), and the
    ///    reading is stored in it.
    /// 4. **High water backwards**: the batch's highest sequence number is below the stored
    ///    high-water mark and this is the first reading of the batch that is not a duplicate. A new
    ///    epoch opens (`highWaterBackwards`) before it is stored. A batch of nothing but duplicates
    ///    never opens an epoch (a meter that re-sends everything is not a reset).
    /// 5. Otherwise the reading is new and is stored in the current epoch.
    ///
    /// The same content at a different sequence number is a different record (stored). A meter is
    /// its Bluetooth address, so re-pairing keeps its epochs and high-water mark; a different
    /// Device Information serial number under the same address opens an epoch (`serialNumberChanged`).
    ///
    /// High-water mark (per epoch): left unchanged when `batch.newHighWater` is nil (failed or
    /// interrupted attempts). Otherwise it becomes max(stored mark, candidate), where the candidate
    /// is `newHighWater` for an empty batch ("no records found"), and for a non-empty batch
    /// min(newHighWater, highest sequence number of this batch stored in the current epoch), so
    /// the mark never claims a record the current epoch does not hold. A batch made only of
    /// earlier-epoch duplicates (an old capture replayed) does not move it. A reset clears the old
    /// epoch's mark, even in a failed attempt, so the next sync reads the meter from the start
    /// (dedup keeps that safe).
    ///
    /// The session is stored with the store's counts: `stored` and `duplicates` as found here,
    /// `received` = max(session.received, readings in the batch).
    ///
    /// A sync that started before the database file was replaced (see ``checkFile()``) stores its
    /// readings in the new file without its high-water mark: the records before the mark are only
    /// in the file that went away, so the meter's next sync reads it from the start again.
    public func commit(_ batch: SyncBatch) throws(StoreError) -> CommitResult {
        let now = self.options.now()
        let failAfter = self.failAfterInsertsForTesting
        return try self.withDatabase(writing: true) { (db: Connection) throws(StoreError) -> CommitResult in
            var batch = batch
            if let replaced = self.replacedAtWall, batch.session.started <= replaced { batch.newHighWater = nil }
            return try db.transaction("Committing a sync batch for meter \(batch.meter.id)") {
                () throws(StoreError) -> CommitResult in
                var ingest = Ingest(db: db, now: now, failAfterInserts: failAfter)
                return try ingest.commit(batch)
            }
        }
    }

    // MARK: Queries

    /// The readings `query` selects, in its order.
    public func readings(_ query: ReadingQuery) throws(StoreError) -> [StoredReading] {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) -> [StoredReading] in
            try ReadingRows.query(query, db)
        }
    }

    /// Readings after `cursor` in commit order: the `feed` row id (schema v5), an `INTEGER PRIMARY
    /// KEY` assigned as max + 1 by the single writer and never reused. A reading is in the feed
    /// once when stored and once more each time its person changes (an attribution, an assignment
    /// changed in the past), carrying the person it got then; ``StoredReading/position`` holds
    /// the feed id.
    public func readings(afterCursor cursor: Int64, limit: Int) throws(StoreError) -> [StoredReading] {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) -> [StoredReading] in
            try ReadingRows.query(afterCursor: cursor, limit: limit, db)
        }
    }

    /// ``readings(afterCursor:limit:)`` together with the identity of the database they come from.
    public func page(afterCursor cursor: Int64, limit: Int) throws(StoreError) -> ReadingPage {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) -> ReadingPage in
            ReadingPage(databaseId: self.databaseId, readings: try ReadingRows.query(afterCursor: cursor, limit: limit, db))
        }
    }

    /// Stored readings of `meter`, or of every meter.
    public func readingCount(meter: MeterID?) throws(StoreError) -> Int {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) -> Int in
            try ReadingRows.count(meter: meter, db)
        }
    }

    /// Recorded sync sessions of `meter` (or every meter), newest first, at most `limit`.
    public func sessions(meter: MeterID?, limit: Int) throws(StoreError) -> [SyncSessionRecord] {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) -> [SyncSessionRecord] in
            try SessionRows.query(meter: meter, limit: limit, db)
        }
    }

    /// The stored measurement packet with this sequence number in the meter's current epoch, if any.
    public func storedMeasurement(meter: MeterID, sequenceNumber: UInt16) throws(StoreError) -> [UInt8]? {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) -> [UInt8]? in
            try ReadingRows.measurement(meter: meter, sequenceNumber: sequenceNumber, db)
        }
    }

    /// The highest sequence number stored for the meter, over all its epochs.
    public func highestSequenceNumber(meter: MeterID) throws(StoreError) -> UInt16? {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) -> UInt16? in
            try ReadingRows.highestSequenceNumber(meter: meter, db)
        }
    }

    /// Which of `candidates` (matched by content, for meters without usable sequence numbers) are stored.
    public func storedContent(meter: MeterID, among candidates: [ReadingContent]) throws(StoreError) -> Set<ReadingContent> {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) -> Set<ReadingContent> in
            try ReadingRows.storedContent(meter: meter, among: candidates, db)
        }
    }

    /// Detected sequence resets, newest first (all meters when `meter` is nil).
    public func events(meter: MeterID?, limit: Int) throws(StoreError) -> [SequenceResetEvent] {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) -> [SequenceResetEvent] in
            try EventRows.query(meter: meter, limit: limit, db)
        }
    }

    /// Per-meter figures for every meter ever seen (forgotten ones too), ordered by address.
    public func summaries() throws(StoreError) -> [MeterSummary] {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) -> [MeterSummary] in
            try MeterRow.loadAll(db).map { (row) throws(StoreError) -> MeterSummary in try row.summary(db) }
        }
    }

    // MARK: Test hooks

    /// Runs SQL on the store's own connection (e.g. `PRAGMA max_page_count` to simulate a full disk).
    func executeForTesting(_ sql: String) throws(StoreError) {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) in
            try db.execute(sql, "Test SQL")
        }
    }

    /// The first column of each row of `sql` as text, on the store's own connection.
    func textForTesting(_ sql: String, column: Int = 0) throws(StoreError) -> [String] {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) -> [String] in
            try db.textColumn(sql, column: CInt(column), "Test SQL")
        }
    }

    /// Test hook: reopen read-only from the next operation on.
    func setForceReadOnlyOpenForTesting(_ value: Bool) {
        self.forceReadOnlyOpenForTesting = value
        self.needsReopen = true
    }

    /// Test hook: fail a commit after `value` inserts (nil: never).
    func setFailAfterInsertsForTesting(_ value: Int?) { self.failAfterInsertsForTesting = value }
}
