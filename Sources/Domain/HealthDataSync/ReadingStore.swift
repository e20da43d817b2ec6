/// Why a storage operation failed. The view model shows it; the daemon keeps running.
public struct StoreError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure, from SQLite's result code where there is one.
    public enum Code: String, Hashable, Sendable {
        /// The disk is full (`SQLITE_FULL`).
        case diskFull
        /// The database or its directory cannot be written (`SQLITE_READONLY`).
        case readOnly
        /// Another connection holds the lock past the busy timeout (`SQLITE_BUSY`, `SQLITE_LOCKED`).
        case busy
        /// The file is damaged or not a database (`SQLITE_CORRUPT`, `SQLITE_NOTADB`).
        case corrupt
        /// The file cannot be opened (`SQLITE_CANTOPEN`).
        case cannotOpen
        /// A read or write of the file failed (`SQLITE_IOERR`).
        case io
        /// The operation was refused: a constraint, or a request the stored data does not allow
        /// (an unknown person or meter, a name in use).
        case constraint
        /// Anything else; the message says what.
        case other
        /// The database file was deleted, renamed or replaced while the store had it open.
        case replaced
    }

    /// What kind of failure it is.
    public var code: Code
    /// One sentence for people; never contains reading values.
    public var message: String

    /// An error of `code` saying `message`.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The message.
    public var description: String { self.message }
}

/// How a sync attempt ended.
public enum SyncResult: String, Hashable, Sendable {
    /// RACP success: records received and committed.
    case success
    /// RACP "no records found": nothing new, not a failure.
    case noNewRecords
    /// Ended by an error (timeout, ATT error, RACP error, storage error).
    case failed
    /// The meter disconnected before the RACP response.
    case interrupted
    /// Aborted on purpose (shutdown, forget).
    case aborted
    /// Still running (only in live state, never stored as final).
    case running
}

/// One sync attempt, kept for `sugarctl sessions` and for support.
public struct SyncSessionRecord: Hashable, Sendable {
    /// Store-assigned identifier; nil before it is stored.
    public var id: Int64?
    /// The meter synced.
    public var meter: MeterID
    /// When the attempt started.
    public var started: Instant
    /// When it ended; nil while it runs.
    public var ended: Instant?
    /// How it ended (``SyncResult/running`` while it runs).
    public var result: SyncResult
    /// Records the meter announced (RACP count), when it answered.
    public var expected: Int?
    /// Records received from the meter in this attempt.
    public var received: Int
    /// New readings stored.
    public var stored: Int
    /// Received records that were already stored.
    public var duplicates: Int
    /// What went wrong, in words; nil on success.
    public var error: String?
    /// Sequence resets detected in this attempt (each opened a new epoch: the meter's memory was
    /// cleared or its counter restarted).
    public var sequenceResets: Int
    /// The meter clock this attempt set after its download, when it did.
    public var clockSet: ClockSetting?

    /// Whether this attempt found the meter reset (a new epoch was opened).
    public var reset: Bool { self.sequenceResets > 0 }

    /// A session; the counts start at 0.
    public init(
        id: Int64? = nil, meter: MeterID, started: Instant, ended: Instant? = nil, result: SyncResult,
        expected: Int? = nil, received: Int = 0, stored: Int = 0, duplicates: Int = 0, error: String? = nil,
        sequenceResets: Int = 0, clockSet: ClockSetting? = nil
    ) {
        self.clockSet = clockSet
        self.sequenceResets = sequenceResets
        self.id = id
        self.meter = meter
        self.started = started
        self.ended = ended
        self.result = result
        self.expected = expected
        self.received = received
        self.stored = stored
        self.duplicates = duplicates
        self.error = error
    }
}

/// What a sync hands the store, committed in ONE transaction: a chunk of records that arrived
/// (with the sync's progress), or the end of the attempt (the last records and the session as it
/// ended).
public struct SyncBatch: Sendable {
    /// The meter as identified in this attempt.
    public var meter: MeterIdentity
    /// Glucose Feature (0x2A51) bits, when read.
    public var features: UInt16?
    /// Records received, in arrival order.
    public var readings: [Reading]
    /// The new high-water sequence number: after RACP success or "no records found" the highest
    /// record received; in a chunk, or at the end of a failed or interrupted attempt, the sync's
    /// contiguous mark (every record the meter sent up to it is stored). Nil leaves the stored mark
    /// as it is.
    public var newHighWater: UInt16?
    /// The attempt, as it ended (``SyncResult/running`` in a chunk). Its ``SyncSessionRecord/id``
    /// is set from the second batch of an attempt on: the store adds to that session row.
    public var session: SyncSessionRecord
    /// The sync found that the meter no longer holds what the store believes (its record at the
    /// high-water mark is gone or different): the store opens a new epoch before storing the
    /// readings, which are the meter's whole memory.
    public var meterReset: Bool
    /// False for a chunk committed while the transfer goes on: the meter's last-sync time and result
    /// stay as they are, and the "high water backwards" reset rule waits for the end of the attempt.
    public var isFinal: Bool
    /// The highest sequence number received in the attempt up to and including this batch (nil:
    /// this batch's own highest).
    public var highestReceived: UInt16?
    /// The highest sequence number earlier batches of this attempt stored (or found stored) in the
    /// meter's current epoch; the new high-water mark may rest on it.
    public var storedEarlier: UInt16?
    /// How the meter was downloaded (nil leaves what is stored).
    public var procedure: MeterProcedure?
    /// Whether the meter's clock can be set (nil leaves what is stored).
    public var clockSettable: Bool?

    /// A batch; by default final, without a reset, leaving procedure and clock facts as stored.
    public init(
        meter: MeterIdentity, features: UInt16?, readings: [Reading], newHighWater: UInt16?,
        session: SyncSessionRecord, meterReset: Bool = false, isFinal: Bool = true, highestReceived: UInt16? = nil,
        storedEarlier: UInt16? = nil, procedure: MeterProcedure? = nil, clockSettable: Bool? = nil
    ) {
        self.procedure = procedure
        self.clockSettable = clockSettable
        self.meterReset = meterReset
        self.isFinal = isFinal
        self.highestReceived = highestReceived
        self.storedEarlier = storedEarlier
        self.meter = meter
        self.features = features
        self.readings = readings
        self.newHighWater = newHighWater
        self.session = session
    }
}

/// A reading as stored, with its store identity.
public struct StoredReading: Hashable, Sendable {
    /// The store's row id, unique in its database; later readings get larger ids.
    public var id: Int64
    /// Sequence-reset epoch the reading belongs to (0 until the meter's first reset).
    public var epoch: Int
    /// When the store committed it.
    public var storedAt: Instant
    /// The reading.
    public var reading: Reading
    /// The person the reading belongs to: the one whose assignment of its meter covers its
    /// measured time, or whom it was attributed to (a shared meter's reading).
    public var person: String?
    /// The reading was measured while its meter was shared and nobody was given it yet.
    public var awaitingAttribution: Bool
    /// Its place in the commit order when it came from ``ReadingStore/readings(afterCursor:limit:)``:
    /// a reading comes again, at a later position, each time its person changes (an attribution,
    /// an assignment changed in the past). Nil elsewhere: the position is then ``id``.
    public var position: Int64?

    /// A stored reading.
    public init(
        id: Int64, epoch: Int, storedAt: Instant, reading: Reading, person: String? = nil,
        awaitingAttribution: Bool = false, position: Int64? = nil
    ) {
        self.id = id
        self.epoch = epoch
        self.storedAt = storedAt
        self.reading = reading
        self.person = person
        self.awaitingAttribution = awaitingAttribution
        self.position = position
    }

    /// The cursor a follower resumes after: ``position`` when known, else ``id``.
    public var cursor: Int64 { self.position ?? self.id }
}

/// What the store knows about a meter.
public struct StoredMeter: Hashable, Sendable {
    /// Who the meter is, as last seen.
    public var identity: MeterIdentity
    /// Glucose Feature (0x2A51) bits, when a sync read them.
    public var features: UInt16?
    /// When the meter was first seen.
    public var firstSeen: Instant
    /// When a sync last saw the meter (or it was stored for an assignment).
    public var lastSeen: Instant
    /// Highest sequence number committed after a successful sync in the current epoch.
    public var highWater: UInt16?
    /// Sequence-reset epoch, starting at 0.
    public var epoch: Int
    /// When its last sync ended; nil before the first.
    public var lastSync: Instant?
    /// How its last sync ended.
    public var lastSyncResult: SyncResult?
    /// How many readings are stored for it (every epoch).
    public var readingCount: Int
    /// The person the meter is assigned to now (its open assignment period), when it is.
    public var person: String?
    /// The meter is shared now: its new readings wait for an attribution.
    public var shared: Bool = false
    /// How the meter is downloaded, once a sync found out (nil before).
    public var procedure: MeterProcedure?
    /// Whether the meter's clock can be set (CTS with write, or i-SENS time), once a sync found out.
    public var clockSettable: Bool?
    /// When a sync last set the meter's clock (nil: never).
    public var clockSetAt: Instant?

    /// A stored meter; person unset unless given, procedure and clock facts unknown.
    public init(
        identity: MeterIdentity, features: UInt16?, firstSeen: Instant, lastSeen: Instant, highWater: UInt16?,
        epoch: Int, lastSync: Instant?, lastSyncResult: SyncResult?, readingCount: Int, person: String? = nil
    ) {
        self.person = person
        self.identity = identity
        self.features = features
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
        self.highWater = highWater
        self.epoch = epoch
        self.lastSync = lastSync
        self.lastSyncResult = lastSyncResult
        self.readingCount = readingCount
    }
}

/// The outcome of committing a batch.
public struct CommitResult: Hashable, Sendable {
    /// Readings newly stored, in the order received.
    public var inserted: [StoredReading]
    /// Received readings that were already stored (dropped).
    public var duplicates: Int
    /// Sequence resets detected in this batch (each opened a new epoch and was recorded as an event).
    public var sequenceResets: Int
    /// The meter as stored after the commit.
    public var meter: StoredMeter
    /// The session as stored (with its id), its counts summed over the attempt's batches so far.
    public var session: SyncSessionRecord
    /// The highest sequence number of the attempt stored (inserted or already there) in the meter's
    /// current epoch after this batch, as far as the store followed it.
    public var highestInCurrentEpoch: UInt16?

    /// A commit's outcome.
    public init(
        inserted: [StoredReading], duplicates: Int, sequenceResets: Int, meter: StoredMeter,
        session: SyncSessionRecord, highestInCurrentEpoch: UInt16? = nil
    ) {
        self.highestInCurrentEpoch = highestInCurrentEpoch
        self.inserted = inserted
        self.duplicates = duplicates
        self.sequenceResets = sequenceResets
        self.meter = meter
        self.session = session
    }
}

/// Which readings to list.
public struct ReadingQuery: Hashable, Sendable {
    /// The listing order, by measured instant then row id.
    public enum Order: String, Hashable, Sendable {
        /// Oldest first.
        case ascending = "asc"
        /// Newest first.
        case descending = "desc"
    }

    /// Inclusive lower bound on the instant.
    public var since: Instant?
    /// Exclusive upper bound on the instant.
    public var until: Instant?
    /// Only this meter's readings.
    public var meter: MeterID?
    /// At most this many; nil for all.
    public var limit: Int?
    /// The order of the listing (ascending by default).
    public var order: Order
    /// Only readings that belong to this person (by their measured time).
    public var person: String?
    /// Only readings of shared periods that wait for an attribution.
    public var unattributed: Bool
    /// Only readings after this one in `order` (a keyset cursor: the next page starts right after
    /// the last reading of the previous one, whatever was stored or removed before it meanwhile).
    public var after: Position?

    /// A reading's place in the listing order: its measured instant, then its row id.
    public struct Position: Hashable, Sendable {
        /// The reading's measured instant.
        public var instant: Instant
        /// The reading's row id (breaks ties between readings of the same instant).
        public var id: Int64

        /// A place from its instant and id.
        public init(instant: Instant, id: Int64) {
            self.instant = instant
            self.id = id
        }

        /// The place of a listed reading.
        public init(_ stored: StoredReading) {
            self.init(instant: stored.reading.instant, id: stored.id)
        }
    }

    /// A query; with no argument, every reading, oldest first.
    public init(
        since: Instant? = nil, until: Instant? = nil, meter: MeterID? = nil, limit: Int? = nil,
        order: Order = .ascending, person: String? = nil, unattributed: Bool = false, after: Position? = nil
    ) {
        self.since = since
        self.until = until
        self.meter = meter
        self.limit = limit
        self.order = order
        self.person = person
        self.unattributed = unattributed
        self.after = after
    }
}

/// Whether storage works right now.
public struct StorageHealth: Hashable, Sendable {
    /// Whether storage works, can only be read, or cannot be used.
    public enum Status: String, Hashable, Sendable {
        /// Reads and writes work.
        case ok
        /// Reads work, writes failed last time (disk full, read-only, locked).
        case degraded
        /// The database cannot be used.
        case failed
    }

    /// Whether storage works.
    public var status: Status
    /// The database file's path.
    public var path: String
    /// The last error, when status is not ok.
    public var error: StoreError?
    /// The open database's identity (a random UUID made when it was created, kept by migrations
    /// and backups, new after a restore or a recreate); nil while no database is open.
    public var databaseId: String?
    /// The last integrity check of the open database since the daemon started (running, or its
    /// result); nil when none ran.
    public var check: StorageCheck?

    /// A health report.
    public init(
        status: Status, path: String, error: StoreError? = nil, databaseId: String? = nil, check: StorageCheck? = nil
    ) {
        self.status = status
        self.path = path
        self.error = error
        self.databaseId = databaseId
        self.check = check
    }
}

/// An integrity check of the database file, run beside the daemon's own connection (it never
/// delays start-up or the store's work): `PRAGMA quick_check` after an unclean shutdown and once a
/// week, `PRAGMA integrity_check` when asked (`sugarctl check`).
public struct StorageCheck: Hashable, Sendable {
    /// Which SQLite check.
    public enum Kind: String, Hashable, Sendable {
        /// `PRAGMA quick_check`: every page and record, without matching indexes to tables.
        case quick
        /// `PRAGMA integrity_check`: `quick` plus every index against its table.
        case full
    }

    /// Why it ran.
    public enum Reason: String, Hashable, Sendable {
        /// The daemon did not stop cleanly last time (its marker file, or a write-ahead log, was left).
        case uncleanShutdown
        /// The weekly check while the daemon runs.
        case scheduled
        /// Someone asked (`CheckStorage`, `sugarctl check`).
        case requested
    }

    /// Where the check stands.
    public enum Result: String, Hashable, Sendable {
        /// Still reading the file.
        case running
        /// SQLite found nothing wrong.
        case ok
        /// SQLite reported problems (``problems``).
        case damaged
        /// The check could not run to its end (``message`` says why).
        case failed
    }

    /// The most problems a check keeps (SQLite reports up to 100).
    public static let keptProblems = 10

    /// Which check.
    public var kind: Kind
    /// Why it ran.
    public var reason: Reason
    /// Its result so far.
    public var result: Result
    /// When it started.
    public var started: Instant
    /// When it ended; nil while it runs.
    public var finished: Instant?
    /// How many problems SQLite reported.
    public var problemCount: Int
    /// The first ``keptProblems`` of them, as SQLite wrote them (no reading values).
    public var problems: [String]
    /// Why a `failed` check could not run.
    public var message: String?
    /// The database the check read.
    public var databaseId: String?

    /// A check; no problems unless given.
    public init(
        kind: Kind, reason: Reason, result: Result, started: Instant, finished: Instant? = nil, problemCount: Int = 0,
        problems: [String] = [], message: String? = nil, databaseId: String? = nil
    ) {
        self.kind = kind
        self.reason = reason
        self.result = result
        self.started = started
        self.finished = finished
        self.problemCount = problemCount
        self.problems = problems
        self.message = message
        self.databaseId = databaseId
    }
}

/// Persistent storage for meters, readings and sync sessions.
///
/// Implementations must commit a ``SyncBatch`` atomically (readings, high-water mark and session
/// in one transaction; a sync hands over its records in several batches, see
/// ``SyncBatch/isFinal``) and must never store a record twice: a record with the same meter,
/// sequence number (within the same reset epoch), base time and raw value is a duplicate. The
/// same sequence number with different content, or a high-water mark that goes backwards, is a
/// sequence reset that opens a new epoch.
///
/// Every throwing method throws a ``StoreError`` whose code says why (the message never holds
/// reading values); a write that throws has changed nothing.
public protocol ReadingStore: Sendable {
    /// The stored state of a meter, or nil for a meter never seen.
    func meter(_ id: MeterID) async throws(StoreError) -> StoredMeter?
    /// All known meters, ordered by id.
    func meters() async throws(StoreError) -> [StoredMeter]
    /// Records that a meter was seen (creates it when new; updates identity strings when known).
    func noteMeterSeen(_ identity: MeterIdentity, at: Instant) async throws(StoreError)
    /// Commits a sync attempt in one transaction; see the protocol's rules.
    /// Throws when the batch cannot be committed: then none of it is stored.
    func commit(_ batch: SyncBatch) async throws(StoreError) -> CommitResult
    /// The readings the query selects, in its order.
    func readings(_ query: ReadingQuery) async throws(StoreError) -> [StoredReading]
    /// Up to `limit` readings in commit order whose ``StoredReading/cursor`` (the commit position)
    /// is greater than `cursor`. Positions grow in commit order and are never reused, so a follower
    /// that resumes after the last position it saw misses nothing and sees nothing twice. A reading
    /// whose person changed comes again at a later position (see ``StoredReading/position``).
    func readings(afterCursor cursor: Int64, limit: Int) async throws(StoreError) -> [StoredReading]
    /// ``readings(afterCursor:limit:)`` together with the identity of the database they were read
    /// from (one read: a cursor is a position in that database only).
    func page(afterCursor cursor: Int64, limit: Int) async throws(StoreError) -> ReadingPage
    /// How many readings are stored for the meter, or in all when nil.
    func readingCount(meter: MeterID?) async throws(StoreError) -> Int
    /// Sync sessions, newest first.
    func sessions(meter: MeterID?, limit: Int) async throws(StoreError) -> [SyncSessionRecord]
    /// Forgets a meter: it leaves the meter list and its high-water mark is cleared, so a meter
    /// seen again syncs from scratch (deduplication keeps that safe). Its readings and sessions
    /// are kept: forgetting a meter never deletes health data.
    func forget(_ meter: MeterID) async throws(StoreError)
    /// Assigns a meter to a person (nil: unassigns it). The person is the meter's: its readings,
    /// stored and future, carry it. Throws for a meter never seen.
    func assign(_ meter: MeterID, person: String?) async throws(StoreError)
    /// The person of every assigned meter.
    func people() async throws(StoreError) -> [MeterID: String]
    /// Current storage health (cheap; does not touch the disk).
    func health() async -> StorageHealth
    /// The measurement packet stored under `sequenceNumber` in the meter's current epoch, if any
    /// (the sync compares it with what the meter now holds there to notice a reset).
    func storedMeasurement(meter: MeterID, sequenceNumber: UInt16) async throws(StoreError) -> [UInt8]?
    /// The highest sequence number stored for the meter (any epoch), or nil when none is.
    func highestSequenceNumber(meter: MeterID) async throws(StoreError) -> UInt16?
    /// Which of `candidates` are stored for the meter already (any epoch), compared by content
    /// (``ReadingContent``), not sequence number. Looks up only these, never the whole history.
    func storedContent(meter: MeterID, among candidates: [ReadingContent]) async throws(StoreError) -> Set<ReadingContent>
}

/// What identifies a record of a meter whose sequence numbers cannot (TaiDoc): the raw facts of
/// the measurement other than its number.
public struct ReadingContent: Hashable, Sendable {
    /// Base Time as sent.
    public var baseTime: LocalDateTime
    /// The Time Offset field in minutes, when present.
    public var timeOffsetMinutes: Int?
    /// The concentration's raw SFLOAT bits, when present.
    public var concentrationRaw: UInt16?
    /// The Type field's code, when present.
    public var sampleType: UInt8?
    /// The Sample Location field's code, when present.
    public var sampleLocation: UInt8?
    /// The Sensor Status Annunciation bits, when present.
    public var sensorStatus: UInt16?

    /// Content from its facts.
    public init(
        baseTime: LocalDateTime, timeOffsetMinutes: Int?, concentrationRaw: UInt16?, sampleType: UInt8?,
        sampleLocation: UInt8?, sensorStatus: UInt16?
    ) {
        self.baseTime = baseTime
        self.timeOffsetMinutes = timeOffsetMinutes
        self.concentrationRaw = concentrationRaw
        self.sampleType = sampleType
        self.sampleLocation = sampleLocation
        self.sensorStatus = sensorStatus
    }

    /// The content of a reading.
    public init(_ r: Reading) {
        self.init(
            baseTime: r.baseTime, timeOffsetMinutes: r.timeOffsetMinutes, concentrationRaw: r.concentrationRaw,
            sampleType: r.sampleType, sampleLocation: r.sampleLocation, sensorStatus: r.sensorStatus)
    }
}

/// Readings in commit order and the database they come from (``StorageHealth/databaseId``).
public struct ReadingPage: Sendable {
    /// The identity of the database read; nil when none is open.
    public var databaseId: String?
    /// The readings, in commit order.
    public var readings: [StoredReading]

    /// A page.
    public init(databaseId: String?, readings: [StoredReading]) {
        self.databaseId = databaseId
        self.readings = readings
    }
}

/// Defaults for stores without an identity of their own or indexed lookups.
extension ReadingStore {
    /// For stores without an identity of their own: the readings and the health's identity.
    public func page(afterCursor cursor: Int64, limit: Int) async throws(StoreError) -> ReadingPage {
        let readings = try await self.readings(afterCursor: cursor, limit: limit)
        return ReadingPage(databaseId: await self.health().databaseId, readings: readings)
    }

    // Defaults for stores without indexed lookups (they read the meter's readings); the SQLite
    // store answers each with an indexed query.
    /// The meter's readings, searched for the record under the sequence number in its current epoch.
    public func storedMeasurement(meter: MeterID, sequenceNumber: UInt16) async throws(StoreError) -> [UInt8]? {
        guard let epoch = try await self.meter(meter)?.epoch else { return nil }
        return try await self.readings(ReadingQuery(meter: meter))
            .last { $0.epoch == epoch && $0.reading.sequenceNumber == sequenceNumber }?.reading.measurementBytes
    }

    /// The meter's readings, searched for the highest sequence number.
    public func highestSequenceNumber(meter: MeterID) async throws(StoreError) -> UInt16? {
        try await self.readings(ReadingQuery(meter: meter)).map(\.reading.sequenceNumber).max()
    }

    /// The meter's readings, searched for the candidates' content.
    public func storedContent(meter: MeterID, among candidates: [ReadingContent]) async throws(StoreError) -> Set<ReadingContent> {
        let wanted = Set(candidates)
        return Set(try await self.readings(ReadingQuery(meter: meter)).map { ReadingContent($0.reading) }.filter(wanted.contains))
    }
}
