import HealthDataSync

/// Why a backend operation failed; the interface maps each code to its Varlink error.
public struct SugarAPIError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kinds of failure, one per interface error.
    public enum Code: String, Hashable, Sendable {
        /// `io.sugard.HealthDataSync.MeterNotFound`
        case meterNotFound
        /// `io.sugard.HealthDataSync.AdapterUnavailable`
        case adapterUnavailable
        /// `io.sugard.HealthDataSync.SyncInProgress`
        case syncInProgress
        /// `io.sugard.HealthDataSync.StorageError`
        case storageError
        /// `io.sugard.HealthDataSync.InvalidParameter`
        case invalidParameter
        /// `io.sugard.HealthDataSync.PermissionDenied`
        case permissionDenied
        /// `io.sugard.HealthDataSync.PairingFailed`
        case pairingFailed
        /// `io.sugard.HealthDataSync.SyncFailed`
        case syncFailed
        /// `io.sugard.HealthDataSync.InvalidDatabase`
        case invalidDatabase
    }

    /// Which interface error it becomes.
    public var code: Code
    /// One sentence for people (never contains reading values).
    public var message: String
    /// The meter concerned, or the parameter name for `invalidParameter`.
    public var subject: String?

    /// An error of `code` saying `message` about `subject`.
    public init(_ code: Code, _ message: String, subject: String? = nil) {
        self.code = code
        self.message = message
        self.subject = subject
    }

    /// The message.
    public var description: String { self.message }
}

/// What the daemon offers the `io.sugard.HealthDataSync` interface. The daemon implements it;
/// the interface layer only validates, authorises and translates.
public protocol SugarBackend: Sendable {
    /// The view model and the per-meter models (the only source of truth for live state).
    var models: ModelStore { get }
    /// Stored readings, meters and sync sessions.
    var store: any ReadingStore { get }
    /// Runs a sync of one meter, or of every known meter when `meter` is nil, and returns the
    /// sessions as they ended. An unforced sync within the cooldown is skipped (not an error:
    /// no session is returned for it).
    /// Throws `meterNotFound` (an unknown meter, or none known), `adapterUnavailable`,
    /// `syncInProgress`, `storageError` or `syncFailed`.
    func sync(meter: MeterID?, force: Bool) async throws(SugarAPIError) -> [SyncSessionRecord]
    /// Forgets a meter (its readings stay).
    /// Throws `meterNotFound` or `storageError`.
    func forget(meter: MeterID) async throws(SugarAPIError)
    /// Pairs with a meter; returns when pairing ended. Passkey requests show up in the meter
    /// model's `pairing` field (`waitingForPasskey`) meanwhile.
    /// Throws `adapterUnavailable`, `meterNotFound` or `pairingFailed`.
    func pair(meter: MeterID) async throws(SugarAPIError)
    /// Answers a passkey request.
    /// Throws `meterNotFound`, or `pairingFailed` when no pairing takes it.
    func submitPasskey(_ passkey: UInt32, meter: MeterID) async throws(SugarAPIError)
    /// Starts a period of the meter for `holder` at `from` (nil: ends the covering period); a meter
    /// that is live but not stored yet is stored first. Throws `meterNotFound` for a meter neither
    /// live nor stored, `invalidParameter` for a change the store refuses (with its reason).
    func setAssignment(meter: MeterID, holder: MeterHolder?, from: Instant) async throws(SugarAPIError) -> AttributionResult
    /// Makes a consistent copy of the database (see ``BackupCopy``).
    /// Throws `storageError` when the copy cannot be made or read.
    func backup() async throws(SugarAPIError) -> BackupCopy
    /// Appends `bytes` at `offset` to the upload `upload` (offset 0 starts it, dropping any other
    /// upload); returns the size received.
    /// Throws `invalidParameter` (subject `upload` or `offset`) for a part that does not continue
    /// the open upload, `storageError` when it cannot be written.
    func restoreUpload(_ upload: String, offset: Int64, bytes: [UInt8]) async throws(SugarAPIError) -> Int64
    /// Checks the upload and swaps it in as the database (``RestoreReport``). A file that is not a
    /// sound sugard database throws `invalidDatabase` and changes nothing.
    func restore(_ upload: String) async throws(SugarAPIError) -> RestoreReport
    /// Checks the whole database file now (`PRAGMA integrity_check` beside the daemon's work) and
    /// returns the finished check; its result also shows in the status.
    /// Throws `storageError` when this daemon's storage cannot be checked.
    func checkStorage() async throws(SugarAPIError) -> StorageCheck
}

/// Defaults: the people store when the store keeps people, and refusals of backups, restores and
/// storage checks for a backend that does not offer them.
extension SugarBackend {
    /// People, assignments and attributions, when the store keeps them (the SQLite store does).
    public var people: (any PeopleStore)? { self.store as? any PeopleStore }

    /// Refuses: this backend makes no backups.
    public func backup() async throws(SugarAPIError) -> BackupCopy {
        throw SugarAPIError(.storageError, "this daemon cannot make backups")
    }

    /// Refuses: this backend restores nothing.
    public func restoreUpload(_ upload: String, offset: Int64, bytes: [UInt8]) async throws(SugarAPIError) -> Int64 {
        throw SugarAPIError(.storageError, "this daemon cannot restore backups")
    }

    /// Refuses: this backend restores nothing.
    public func restore(_ upload: String) async throws(SugarAPIError) -> RestoreReport {
        throw SugarAPIError(.storageError, "this daemon cannot restore backups")
    }

    /// Refuses: this backend's storage cannot be checked.
    public func checkStorage() async throws(SugarAPIError) -> StorageCheck {
        throw SugarAPIError(.storageError, "this daemon's storage cannot be checked")
    }
}

/// A backup the daemon made: an open, already unlinked file (its descriptor, owned by the
/// receiver, who closes it) and what it holds.
public struct BackupCopy: Sendable {
    /// The open copy's descriptor (read-only; the receiver closes it).
    public var fileDescriptor: Int32
    /// Its size in bytes.
    public var size: Int64
    /// Readings in it.
    public var readings: Int
    /// Its database identity (nil before schema version 4).
    public var databaseId: String?
    /// Its schema version.
    public var schemaVersion: Int

    /// A copy's facts.
    public init(fileDescriptor: Int32, size: Int64, readings: Int, databaseId: String?, schemaVersion: Int) {
        self.fileDescriptor = fileDescriptor
        self.size = size
        self.readings = readings
        self.databaseId = databaseId
        self.schemaVersion = schemaVersion
    }
}

/// What a restore did.
public struct RestoreReport: Sendable, Hashable {
    /// The database's path, where the restored file now is.
    public var path: String
    /// Its size in bytes.
    public var size: Int64
    /// Readings in it.
    public var readings: Int
    /// Its identity: a new one, made by the restore.
    public var databaseId: String?
    /// The identity of the database it replaced.
    public var previousDatabaseId: String?
    /// Its schema version after any migration.
    public var schemaVersion: Int
    /// The schema version the file had before this build migrated it; nil when it needed none.
    public var migratedFrom: Int?
    /// Where the replaced database file was kept; nil when there was none at the path.
    public var keptAs: String?

    /// A report's facts.
    public init(
        path: String, size: Int64, readings: Int, databaseId: String?, previousDatabaseId: String?, schemaVersion: Int,
        migratedFrom: Int?, keptAs: String?
    ) {
        self.path = path
        self.size = size
        self.readings = readings
        self.databaseId = databaseId
        self.previousDatabaseId = previousDatabaseId
        self.schemaVersion = schemaVersion
        self.migratedFrom = migratedFrom
        self.keptAs = keptAs
    }
}
