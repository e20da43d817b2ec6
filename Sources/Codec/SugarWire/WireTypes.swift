public import JSON
import GlucoseProfile

/// The value types of `io.sugard.HealthDataSync` (io.sugard.HealthDataSync.varlink), one Swift type
/// per `type` declaration, with the JSON form the daemon sends. WireTypeTests checks them against the
/// interface description field by field.
public enum Wire {}

extension Wire {
    /// `type Instant (iso: string, epochMillis: int)`
    public struct Instant: WireValue, Hashable {
        /// ISO 8601 in UTC, e.g. `2024-03-31T06:15:00Z`.
        public var iso: String
        /// Milliseconds since 1970-01-01T00:00:00Z.
        public var epochMillis: Int64

        /// An instant from both forms as given (not checked against each other).
        public init(iso: String, epochMillis: Int64) {
            self.iso = iso
            self.epochMillis = epochMillis
        }

        /// The instant `epochMillis` after the epoch, its `iso` in UTC as the daemon writes it.
        public init(epochMillis: Int64) {
            self.init(iso: CivilCalendar.isoUTC(epochMillis: epochMillis), epochMillis: epochMillis)
        }

        /// Requires `iso` and `epochMillis`.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.iso = try f.required("iso")
            self.epochMillis = try f.required("epochMillis")
        }

        /// The object with every key.
        public var json: JSONValue { ["iso": .string(self.iso), "epochMillis": .int(self.epochMillis)] }
    }

    /// `type Glucose (mgdL: float, mmolL: float)`
    public struct Glucose: WireValue, Hashable {
        /// The concentration in mg/dL.
        public var mgdL: Double
        /// The same in mmol/L (mg/dL ÷ 18.0156).
        public var mmolL: Double

        /// A concentration in both units, as given (not converted).
        public init(mgdL: Double, mmolL: Double) {
            self.mgdL = mgdL
            self.mmolL = mmolL
        }

        /// Requires `mgdL` and `mmolL`.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.mgdL = try f.required("mgdL")
            self.mmolL = try f.required("mmolL")
        }

        /// The object with every key.
        public var json: JSONValue { ["mgdL": self.mgdL.json, "mmolL": self.mmolL.json] }
    }

    /// `type Coded (name: string, code: int)`
    public struct Coded: WireValue, Hashable {
        /// The stable name, e.g. `capillaryPlasma`.
        public var name: String
        /// The code in the Glucose Profile, e.g. 2.
        public var code: Int64

        /// A coded value from its name and code.
        public init(name: String, code: Int64) {
            self.name = name
            self.code = code
        }

        /// Requires `name` and `code`.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.name = try f.required("name")
            self.code = try f.required("code")
        }

        /// The object with every key.
        public var json: JSONValue { ["name": .string(self.name), "code": .int(self.code)] }
    }

    /// `type StoreFailure (code: string, message: string)`
    public struct StoreFailure: WireValue, Hashable {
        /// A stable machine name, e.g. `diskFull`, `corrupt`, `replaced`.
        public var code: String
        /// One sentence for people.
        public var message: String

        /// A failure with its code and sentence.
        public init(code: String, message: String) {
            self.code = code
            self.message = message
        }

        /// Requires `code` and `message`.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.code = try f.required("code")
            self.message = try f.required("message")
        }

        /// The object with every key.
        public var json: JSONValue { ["code": .string(self.code), "message": .string(self.message)] }
    }

    /// `type Storage (status: (ok, degraded, failed), path: string, error: ?StoreFailure, databaseId: ?string,
    /// check: ?StorageCheck)`
    public struct Storage: WireValue, Hashable {
        /// `ok`; `degraded`: reads work but the last write failed, the file was replaced, or a check found
        /// damage; `failed`: the database cannot be used.
        public enum Status: String, WireEnum { case ok, degraded, failed }

        /// Whether the database works.
        public var status: Status
        /// The database file.
        public var path: String
        /// Why it is degraded or failed; absent when ok.
        public var error: StoreFailure?
        /// The open database's identity (a random UUID, lowercase); absent while none is open.
        public var databaseId: String?
        /// The latest integrity check since the daemon started; absent when none ran.
        public var check: StorageCheck?

        /// A storage status with every field given.
        public init(status: Status, path: String, error: StoreFailure?, databaseId: String? = nil, check: StorageCheck? = nil) {
            self.status = status
            self.path = path
            self.error = error
            self.databaseId = databaseId
            self.check = check
        }

        /// Requires `status` and `path`; `error`, `databaseId` and `check` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.status = try f.required("status")
            self.path = try f.required("path")
            self.error = try f.optional("error")
            self.databaseId = try f.optional("databaseId")
            self.check = try f.optional("check")
        }

        /// The object with every key; a value that is absent is null.
        public var json: JSONValue {
            [
                "status": self.status.json, "path": .string(self.path), "error": .wire(self.error),
                "databaseId": self.databaseId.map { .string($0) } ?? .null, "check": .wire(self.check),
            ]
        }
    }

    /// `type StorageCheck (kind: (quick, full), reason: (uncleanShutdown, scheduled, requested),
    /// result: (running, ok, damaged, failed), startedAt: Instant, finishedAt: ?Instant, problemCount: int,
    /// problems: []string, message: ?string)`
    public struct StorageCheck: WireValue, Hashable {
        /// `quick` (`PRAGMA quick_check`) or `full` (`PRAGMA integrity_check`).
        public enum Kind: String, WireEnum { case quick, full }
        /// Why it ran: after an unclean shutdown, the weekly check, or `CheckStorage`.
        public enum Reason: String, WireEnum { case uncleanShutdown, scheduled, requested }
        /// `running`, `ok`, `damaged` (problems found) or `failed` (the check could not run).
        public enum Result: String, WireEnum { case running, ok, damaged, failed }

        /// Quick or full.
        public var kind: Kind
        /// Why it ran.
        public var reason: Reason
        /// How it went (so far).
        public var result: Result
        /// When it started.
        public var startedAt: Instant
        /// When it finished; absent while running.
        public var finishedAt: Instant?
        /// How many problem lines SQLite reported.
        public var problemCount: Int64
        /// The first 10 of them.
        public var problems: [String]
        /// Why a failed check could not run.
        public var message: String?

        /// A check with every field given.
        public init(
            kind: Kind, reason: Reason, result: Result, startedAt: Instant, finishedAt: Instant?, problemCount: Int64,
            problems: [String], message: String?
        ) {
            self.kind = kind
            self.reason = reason
            self.result = result
            self.startedAt = startedAt
            self.finishedAt = finishedAt
            self.problemCount = problemCount
            self.problems = problems
            self.message = message
        }

        /// Requires `kind`, `reason`, `result`, `startedAt`, `problemCount` and `problems`; `finishedAt` and
        /// `message` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.kind = try f.required("kind")
            self.reason = try f.required("reason")
            self.result = try f.required("result")
            self.startedAt = try f.required("startedAt")
            self.finishedAt = try f.optional("finishedAt")
            self.problemCount = try f.required("problemCount")
            self.problems = try f.array("problems")
            self.message = try f.optional("message")
        }

        /// The object with every key; a value that is absent is null.
        public var json: JSONValue {
            [
                "kind": self.kind.json, "reason": self.reason.json, "result": self.result.json,
                "startedAt": self.startedAt.json, "finishedAt": .wire(self.finishedAt),
                "problemCount": .int(self.problemCount), "problems": .array(self.problems.map { .string($0) }),
                "message": .from(self.message),
            ]
        }

        /// How long the check ran, when it finished.
        public var durationMillis: Int64? { self.finishedAt.map { $0.epochMillis - self.startedAt.epochMillis } }
    }

    /// `CheckStorage() -> (check: StorageCheck)`
    public struct CheckStorageReply: WireValue {
        /// The check that just ran.
        public var check: StorageCheck

        /// The reply carrying `check`.
        public init(check: StorageCheck) { self.check = check }

        /// Requires `check`.
        public init(json: JSONValue) throws(WireError) {
            self.check = try WireFields(json).required("check")
        }

        /// The object with every key.
        public var json: JSONValue { ["check": self.check.json] }
    }

    /// `type Daemon (version: string, startedAt: Instant, storage: Storage)`
    public struct Daemon: WireValue, Hashable {
        /// The daemon's version.
        public var version: String
        /// When it started (uptime is now minus this).
        public var startedAt: Instant
        /// Whether its database works.
        public var storage: Storage

        /// The daemon's record with every field given.
        public init(version: String, startedAt: Instant, storage: Storage) {
            self.version = version
            self.startedAt = startedAt
            self.storage = storage
        }

        /// Requires `version`, `startedAt` and `storage`.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.version = try f.required("version")
            self.startedAt = try f.required("startedAt")
            self.storage = try f.required("storage")
        }

        /// The object with every key.
        public var json: JSONValue {
            ["version": .string(self.version), "startedAt": self.startedAt.json, "storage": self.storage.json]
        }
    }

    /// `type Adapter (present: bool, powered: bool, discovering: bool, name: ?string, address: ?string)`
    public struct Adapter: WireValue, Hashable {
        /// An adapter exists.
        public var present: Bool
        /// It is powered on.
        public var powered: Bool
        /// It is scanning now.
        public var discovering: Bool
        /// Its name as BlueZ reports it, when known.
        public var name: String?
        /// Its Bluetooth address, when known.
        public var address: String?

        /// The adapter's record with every field given.
        public init(present: Bool, powered: Bool, discovering: Bool, name: String?, address: String?) {
            self.present = present
            self.powered = powered
            self.discovering = discovering
            self.name = name
            self.address = address
        }

        /// Requires `present`, `powered` and `discovering`; `name` and `address` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.present = try f.required("present")
            self.powered = try f.required("powered")
            self.discovering = try f.required("discovering")
            self.name = try f.optional("name")
            self.address = try f.optional("address")
        }

        /// The object with every key; a value that is absent is null.
        public var json: JSONValue {
            [
                "present": .bool(self.present), "powered": .bool(self.powered), "discovering": .bool(self.discovering),
                "name": .from(self.name), "address": .from(self.address),
            ]
        }
    }

    /// `type MeterIdentity (id, name?, manufacturer?, model?, serialNumber?, firmware?, displayName)`
    public struct MeterIdentity: WireValue, Hashable {
        /// The meter's stable id: its Bluetooth address.
        public var id: String
        /// The advertised name.
        public var name: String?
        /// Device Information Manufacturer Name.
        public var manufacturer: String?
        /// Device Information Model Number.
        public var model: String?
        /// Device Information Serial Number.
        public var serialNumber: String?
        /// Device Information Firmware Revision.
        public var firmware: String?
        /// The name to show: built from the fields above, the id when nothing else is known.
        public var displayName: String

        /// An identity with every field given.
        public init(
            id: String, name: String?, manufacturer: String?, model: String?, serialNumber: String?, firmware: String?,
            displayName: String
        ) {
            self.id = id
            self.name = name
            self.manufacturer = manufacturer
            self.model = model
            self.serialNumber = serialNumber
            self.firmware = firmware
            self.displayName = displayName
        }

        /// Requires `id` and `displayName`; `name`, `manufacturer`, `model`, `serialNumber` and `firmware` may be
        /// null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.id = try f.required("id")
            self.name = try f.optional("name")
            self.manufacturer = try f.optional("manufacturer")
            self.model = try f.optional("model")
            self.serialNumber = try f.optional("serialNumber")
            self.firmware = try f.optional("firmware")
            self.displayName = try f.required("displayName")
        }

        /// The object with every key; a value that is absent is null.
        public var json: JSONValue {
            [
                "id": .string(self.id), "name": .from(self.name), "manufacturer": .from(self.manufacturer),
                "model": .from(self.model), "serialNumber": .from(self.serialNumber), "firmware": .from(self.firmware),
                "displayName": .string(self.displayName),
            ]
        }
    }

    /// `type SyncResult`: how a sync attempt ended.
    public enum SyncResult: String, WireEnum { case success, noNewRecords, failed, interrupted, aborted, running }

    /// `type SyncPhase`: where a sync of one meter is.
    public enum SyncPhase: String, WireEnum {
        /// `queued`: waiting for one of the `max_connections` connection slots (served in queue order).
        case idle, queued, connecting, pairing, readingDeviceInfo, readingClock, subscribing, counting, receiving
        case waitingToRetry, settingClock, committing, disconnecting, done, failed
    }

    /// `type PairingState`.
    public enum PairingState: String, WireEnum { case unknown, notPaired, pairing, waitingForPasskey, paired, failed }

    /// `type Progress (received: int, expected: ?int)`
    public struct Progress: WireValue, Hashable {
        /// Records received in the running attempt.
        public var received: Int64
        /// How many the meter announced (RACP count), when it did.
        public var expected: Int64?

        /// Progress with both counts.
        public init(received: Int64, expected: Int64?) {
            self.received = received
            self.expected = expected
        }

        /// Requires `received`; `expected` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.received = try f.required("received")
            self.expected = try f.optional("expected")
        }

        /// The object with every key; a value that is absent is null.
        public var json: JSONValue { ["received": .int(self.received), "expected": .from(self.expected)] }
    }

    /// `type LastSync (meter, at: Instant, result: SyncResult, stored, duplicates, reset: bool)`
    public struct LastSync: WireValue, Hashable {
        /// The meter's id.
        public var meter: String
        /// When the attempt ended.
        public var at: Instant
        /// How it ended.
        public var result: SyncResult
        /// Readings newly stored.
        public var stored: Int64
        /// Records received that were already stored.
        public var duplicates: Int64
        /// The attempt found the meter reset (memory cleared or counter restarted): a new epoch began.
        public var reset: Bool
        /// The meter clock the attempt set, if it did.
        public var clockSet: ClockSet?

        /// A last sync with every field given.
        public init(
            meter: String, at: Instant, result: SyncResult, stored: Int64, duplicates: Int64, reset: Bool, clockSet: ClockSet? = nil
        ) {
            self.clockSet = clockSet
            self.meter = meter
            self.at = at
            self.result = result
            self.stored = stored
            self.duplicates = duplicates
            self.reset = reset
        }

        /// Requires `meter`, `at`, `result`, `stored`, `duplicates` and `reset`; `clockSet` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.meter = try f.required("meter")
            self.at = try f.required("at")
            self.result = try f.required("result")
            self.stored = try f.required("stored")
            self.duplicates = try f.required("duplicates")
            self.reset = try f.required("reset")
            self.clockSet = try f.optional("clockSet")
        }

        /// The object with every key; a value that is absent is null.
        public var json: JSONValue {
            [
                "meter": .string(self.meter), "at": self.at.json, "result": self.result.json, "stored": .int(self.stored),
                "duplicates": .int(self.duplicates), "reset": .bool(self.reset), "clockSet": .wire(self.clockSet),
            ]
        }
    }

    /// `type ReportedError (code, message, hint?, at: Instant, meter?, specCode?)`
    public struct ReportedError: WireValue, Hashable {
        /// A stable machine name, e.g. `timeout`, `attError`, `authenticationRequired`, `storage.diskFull`.
        public var code: String
        /// One sentence; never contains reading values.
        public var message: String
        /// What the user can do about it, when there is something.
        public var hint: String?
        /// When it happened.
        public var at: Instant
        /// The meter it concerns, if any.
        public var meter: String?
        /// The ATT or RACP error code behind it, where there is one.
        public var specCode: Int64?

        /// An error with every field given.
        public init(code: String, message: String, hint: String?, at: Instant, meter: String?, specCode: Int64?) {
            self.code = code
            self.message = message
            self.hint = hint
            self.at = at
            self.meter = meter
            self.specCode = specCode
        }

        /// Requires `code`, `message` and `at`; `hint`, `meter` and `specCode` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.code = try f.required("code")
            self.message = try f.required("message")
            self.hint = try f.optional("hint")
            self.at = try f.required("at")
            self.meter = try f.optional("meter")
            self.specCode = try f.optional("specCode")
        }

        /// The object with every key; a value that is absent is null.
        public var json: JSONValue {
            [
                "code": .string(self.code), "message": .string(self.message), "hint": .from(self.hint), "at": self.at.json,
                "meter": .from(self.meter), "specCode": .from(self.specCode),
            ]
        }
    }

    /// `type Meter`: one meter as the daemon sees it now.
    public struct Meter: WireValue, Hashable {
        /// The Bluetooth link to the meter.
        public enum Link: String, WireEnum { case disconnected, connecting, connected, disconnecting }

        /// The meter's id (its Bluetooth address).
        public var id: String
        /// Who the meter is.
        public var identity: MeterIdentity
        /// The link now.
        public var link: Link
        /// Where its sync is.
        public var sync: SyncPhase
        /// Records received in the running attempt.
        public var progress: Progress
        /// The last finished attempt.
        public var lastSync: LastSync?
        /// Highest committed sequence number in the current epoch.
        public var highWater: Int64?
        /// Bond and pairing state.
        public var pairing: PairingState
        /// The latest error about the meter; cleared when a sync ends with success or no new records.
        public var lastError: ReportedError?
        /// When the next attempt (a retry or a deferred sync) runs, if one is scheduled.
        public var nextAttempt: Instant?

        /// A meter with every field given.
        public init(
            id: String, identity: MeterIdentity, link: Link, sync: SyncPhase, progress: Progress, lastSync: LastSync?,
            highWater: Int64?, pairing: PairingState, lastError: ReportedError?, nextAttempt: Instant?
        ) {
            self.id = id
            self.identity = identity
            self.link = link
            self.sync = sync
            self.progress = progress
            self.lastSync = lastSync
            self.highWater = highWater
            self.pairing = pairing
            self.lastError = lastError
            self.nextAttempt = nextAttempt
        }

        /// Requires `id`, `identity`, `link`, `sync`, `progress` and `pairing`; `lastSync`, `highWater`,
        /// `lastError` and `nextAttempt` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.id = try f.required("id")
            self.identity = try f.required("identity")
            self.link = try f.required("link")
            self.sync = try f.required("sync")
            self.progress = try f.required("progress")
            self.lastSync = try f.optional("lastSync")
            self.highWater = try f.optional("highWater")
            self.pairing = try f.required("pairing")
            self.lastError = try f.optional("lastError")
            self.nextAttempt = try f.optional("nextAttempt")
        }

        /// The object with every key; a value that is absent is null.
        public var json: JSONValue {
            [
                "id": .string(self.id), "identity": self.identity.json, "link": self.link.json, "sync": self.sync.json,
                "progress": self.progress.json, "lastSync": .wire(self.lastSync), "highWater": .from(self.highWater),
                "pairing": self.pairing.json, "lastError": .wire(self.lastError), "nextAttempt": .wire(self.nextAttempt),
            ]
        }
    }

    /// `type LastReading`: the newest stored reading, summarised.
    public struct LastReading: WireValue, Hashable {
        /// How the instant was found: `meterClock` (the clock read at sync, skew applied), `assumedClock`
        /// (no readable clock: the meter's time taken as right in the zone), `untrusted` (a time fault or
        /// unusable fields: a best guess).
        public enum TimeMethod: String, WireEnum { case meterClock, assumedClock, untrusted }

        /// The meter's id.
        public var meter: String
        /// The meter's record number.
        public var sequenceNumber: Int64
        /// When it was measured (UTC).
        public var instant: Instant
        /// The concentration; absent for a special value (HI, LO, NaN) or a record without one.
        public var glucose: Glucose?
        /// A ketone value in mmol/L, for meters that send one.
        public var ketoneMmolL: Double?
        /// Reading flags by name (control solution, out of range, time fault…).
        public var flags: [String]
        /// The sample type, when the record has one.
        public var sampleType: Coded?
        /// The sample location, when the record has one.
        public var sampleLocation: Coded?
        /// The meter's own wall-clock time for the reading (after quirks), without a zone.
        public var meterLocalTime: String
        /// The UTC offset of the zone the reading was placed in.
        public var utcOffsetSeconds: Int64
        /// How `instant` was found.
        public var timeMethod: TimeMethod
        /// The store's row id, when it came from the store.
        public var storeID: Int64?
        /// When it was stored.
        public var storedAt: Instant?

        /// A summary with every field given.
        public init(
            meter: String, sequenceNumber: Int64, instant: Instant, glucose: Glucose?, ketoneMmolL: Double?, flags: [String],
            sampleType: Coded?, sampleLocation: Coded?, meterLocalTime: String, utcOffsetSeconds: Int64,
            timeMethod: TimeMethod, storeID: Int64?, storedAt: Instant?
        ) {
            self.meter = meter
            self.sequenceNumber = sequenceNumber
            self.instant = instant
            self.glucose = glucose
            self.ketoneMmolL = ketoneMmolL
            self.flags = flags
            self.sampleType = sampleType
            self.sampleLocation = sampleLocation
            self.meterLocalTime = meterLocalTime
            self.utcOffsetSeconds = utcOffsetSeconds
            self.timeMethod = timeMethod
            self.storeID = storeID
            self.storedAt = storedAt
        }

        /// Requires `meter`, `sequenceNumber`, `instant`, `flags`, `meterLocalTime`, `utcOffsetSeconds` and
        /// `timeMethod`; `glucose`, `ketoneMmolL`, `sampleType`, `sampleLocation`, `storeID` and `storedAt` may be
        /// null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.meter = try f.required("meter")
            self.sequenceNumber = try f.required("sequenceNumber")
            self.instant = try f.required("instant")
            self.glucose = try f.optional("glucose")
            self.ketoneMmolL = try f.optional("ketoneMmolL")
            self.flags = try f.array("flags")
            self.sampleType = try f.optional("sampleType")
            self.sampleLocation = try f.optional("sampleLocation")
            self.meterLocalTime = try f.required("meterLocalTime")
            self.utcOffsetSeconds = try f.required("utcOffsetSeconds")
            self.timeMethod = try f.required("timeMethod")
            self.storeID = try f.optional("storeID")
            self.storedAt = try f.optional("storedAt")
        }

        /// The object with every key; a value that is absent is null.
        public var json: JSONValue {
            [
                "meter": .string(self.meter), "sequenceNumber": .int(self.sequenceNumber), "instant": self.instant.json,
                "glucose": .wire(self.glucose), "ketoneMmolL": .from(self.ketoneMmolL), "flags": .wire(self.flags),
                "sampleType": .wire(self.sampleType), "sampleLocation": .wire(self.sampleLocation),
                "meterLocalTime": .string(self.meterLocalTime), "utcOffsetSeconds": .int(self.utcOffsetSeconds),
                "timeMethod": self.timeMethod.json, "storeID": .from(self.storeID), "storedAt": .wire(self.storedAt),
            ]
        }
    }

    /// `type SyncOverview (phase: (idle, syncing), activeMeters: []string, lastResult: ?LastSync)`
    public struct SyncOverview: WireValue, Hashable {
        /// `syncing` while any meter syncs.
        public enum Phase: String, WireEnum { case idle, syncing }

        /// Idle or syncing.
        public var phase: Phase
        /// Ids of the meters syncing now.
        public var activeMeters: [String]
        /// The latest finished attempt of any meter.
        public var lastResult: LastSync?

        /// An overview with every field given.
        public init(phase: Phase, activeMeters: [String], lastResult: LastSync?) {
            self.phase = phase
            self.activeMeters = activeMeters
            self.lastResult = lastResult
        }

        /// Requires `phase` and `activeMeters`; `lastResult` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.phase = try f.required("phase")
            self.activeMeters = try f.array("activeMeters")
            self.lastResult = try f.optional("lastResult")
        }

        /// The object with every key; a value that is absent is null.
        public var json: JSONValue {
            ["phase": self.phase.json, "activeMeters": .wire(self.activeMeters), "lastResult": .wire(self.lastResult)]
        }
    }

    /// `type State`: the view model.
    public struct State: WireValue, Hashable {
        /// The daemon and its storage.
        public var daemon: Daemon
        /// The Bluetooth adapter.
        public var adapter: Adapter
        /// Every meter the daemon has a model for.
        public var meters: [Meter]
        /// The newest stored reading.
        public var lastReading: LastReading?
        /// Readings in the database.
        public var readingCount: Int64
        /// The daemon-wide sync picture.
        public var sync: SyncOverview
        /// Recent errors, oldest first (the daemon keeps a bounded number).
        public var errors: [ReportedError]

        /// A view model with every field given.
        public init(
            daemon: Daemon, adapter: Adapter, meters: [Meter], lastReading: LastReading?, readingCount: Int64,
            sync: SyncOverview, errors: [ReportedError]
        ) {
            self.daemon = daemon
            self.adapter = adapter
            self.meters = meters
            self.lastReading = lastReading
            self.readingCount = readingCount
            self.sync = sync
            self.errors = errors
        }

        /// Requires `daemon`, `adapter`, `meters`, `readingCount`, `sync` and `errors`; `lastReading` may be null
        /// or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.daemon = try f.required("daemon")
            self.adapter = try f.required("adapter")
            self.meters = try f.array("meters")
            self.lastReading = try f.optional("lastReading")
            self.readingCount = try f.required("readingCount")
            self.sync = try f.required("sync")
            self.errors = try f.array("errors")
        }

        /// The object with every key; a value that is absent is null.
        public var json: JSONValue {
            [
                "daemon": self.daemon.json, "adapter": self.adapter.json, "meters": .wire(self.meters),
                "lastReading": .wire(self.lastReading), "readingCount": .int(self.readingCount), "sync": self.sync.json,
                "errors": .wire(self.errors),
            ]
        }
    }

    /// `type Unit (mgdl, mmol)`: the display unit a client should use unless told otherwise
    /// (GlucoseProfile's ``GlucoseUnit``, the one unit type).
    public typealias Unit = GlucoseUnit

    /// `type StoredMeter`: what the database holds about a meter.
    public struct StoredMeter: WireValue, Hashable {
        /// When the meter was first seen.
        public var firstSeen: Instant
        /// When it was last seen.
        public var lastSeen: Instant
        /// Highest stored sequence number in the current epoch.
        public var highWater: Int64?
        /// The current epoch: it grows each time a sync finds the meter reset.
        public var epoch: Int64
        /// When its last sync ended.
        public var lastSync: Instant?
        /// How its last sync ended.
        public var lastSyncResult: SyncResult?
        /// Its stored readings.
        public var readingCount: Int64
        /// Its Glucose Feature bits (0x2A51), when read.
        public var features: Int64?
        /// Who it is assigned to now (`AssignMeter`).
        public var person: String?
        /// Shared now: its new readings wait for an attribution (nil from a daemon before people records).
        public var shared: Bool?

        /// A stored meter with every field given.
        public init(
            firstSeen: Instant, lastSeen: Instant, highWater: Int64?, epoch: Int64, lastSync: Instant?,
            lastSyncResult: SyncResult?, readingCount: Int64, features: Int64?, person: String?,
            shared: Bool? = nil
        ) {
            self.firstSeen = firstSeen
            self.lastSeen = lastSeen
            self.highWater = highWater
            self.epoch = epoch
            self.lastSync = lastSync
            self.lastSyncResult = lastSyncResult
            self.readingCount = readingCount
            self.features = features
            self.person = person
            self.shared = shared
        }

        /// Requires `firstSeen`, `lastSeen`, `epoch` and `readingCount`; `highWater`, `lastSync`, `lastSyncResult`,
        /// `features`, `person` and `shared` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.firstSeen = try f.required("firstSeen")
            self.lastSeen = try f.required("lastSeen")
            self.highWater = try f.optional("highWater")
            self.epoch = try f.required("epoch")
            self.lastSync = try f.optional("lastSync")
            self.lastSyncResult = try f.optional("lastSyncResult")
            self.readingCount = try f.required("readingCount")
            self.features = try f.optional("features")
            self.person = try f.optional("person")
            self.shared = try f.optional("shared")
        }

        /// The object with every key; a value that is absent is null.
        public var json: JSONValue {
            [
                "firstSeen": self.firstSeen.json, "lastSeen": self.lastSeen.json, "highWater": .from(self.highWater),
                "epoch": .int(self.epoch), "lastSync": .wire(self.lastSync), "lastSyncResult": .wire(self.lastSyncResult),
                "readingCount": .int(self.readingCount), "features": .from(self.features), "person": .from(self.person),
                "shared": .wire(self.shared),
            ]
        }
    }

    /// `type Procedure (gls, verio)`: how a meter's records are downloaded.
    public enum Procedure: String, WireEnum { case gls, verio }

    /// `type MeterEntry (id, identity, live: ?Meter, stored: ?StoredMeter, person: ?string,
    /// procedure: ?Procedure, clockSettable: ?bool)`; procedure and clockSettable are null until a
    /// sync connected to the meter.
    public struct MeterEntry: WireValue, Hashable {
        /// The meter's id (its Bluetooth address).
        public var id: String
        /// Who the meter is.
        public var identity: MeterIdentity
        /// Its live model, when the daemon has one.
        public var live: Meter?
        /// What the database holds about it, when anything.
        public var stored: StoredMeter?
        /// The person it is assigned to; nil when it is not.
        public var person: String?
        /// How its records are downloaded.
        public var procedure: Procedure?
        /// Whether the daemon can set its clock.
        public var clockSettable: Bool?

        /// An entry with every field given.
        public init(
            id: String, identity: MeterIdentity, live: Meter?, stored: StoredMeter?, person: String?,
            procedure: Procedure? = nil, clockSettable: Bool? = nil
        ) {
            self.id = id
            self.identity = identity
            self.live = live
            self.stored = stored
            self.person = person
            self.procedure = procedure
            self.clockSettable = clockSettable
        }

        /// Requires `id` and `identity`; `live`, `stored`, `person`, `procedure` and `clockSettable` may be null or
        /// absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.id = try f.required("id")
            self.identity = try f.required("identity")
            self.live = try f.optional("live")
            self.stored = try f.optional("stored")
            self.person = try f.optional("person")
            self.procedure = try f.optional("procedure")
            self.clockSettable = try f.optional("clockSettable")
        }

        /// The object with every key; a value that is absent is null.
        public var json: JSONValue {
            [
                "id": .string(self.id), "identity": self.identity.json, "live": .wire(self.live),
                "stored": .wire(self.stored), "person": .from(self.person), "procedure": .wire(self.procedure),
                "clockSettable": .wire(self.clockSettable),
            ]
        }
    }

    /// `type ClockSet`: the meter clock a sync set after its download. The skews are meter − host in
    /// seconds: before (null: the clock was unset or unreadable) and after (null: not read back).
    public struct ClockSet: WireValue, Hashable {
        /// Current Time (0x2A2B) or the i-SENS vendor time characteristic (0xFFF1).
        public enum Method: String, WireEnum { case currentTime, isens }

        /// How the clock was set.
        public var method: Method
        /// When.
        public var at: Instant
        /// The local wall-clock time written (ISO 8601 without a zone).
        public var written: String
        /// Meter minus host before setting; nil when the clock was unset or unreadable.
        public var skewBeforeSeconds: Int64?
        /// Meter minus host after setting; nil when not read back.
        public var skewAfterSeconds: Int64?

        /// A clock setting with every field given.
        public init(method: Method, at: Instant, written: String, skewBeforeSeconds: Int64?, skewAfterSeconds: Int64?) {
            self.method = method
            self.at = at
            self.written = written
            self.skewBeforeSeconds = skewBeforeSeconds
            self.skewAfterSeconds = skewAfterSeconds
        }

        /// Requires `method`, `at` and `written`; `skewBeforeSeconds` and `skewAfterSeconds` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.method = try f.required("method")
            self.at = try f.required("at")
            self.written = try f.required("written")
            self.skewBeforeSeconds = try f.optional("skewBeforeSeconds")
            self.skewAfterSeconds = try f.optional("skewAfterSeconds")
        }

        /// The object with every key; a value that is absent is null.
        public var json: JSONValue {
            [
                "method": self.method.json, "at": self.at.json, "written": .string(self.written),
                "skewBeforeSeconds": .from(self.skewBeforeSeconds), "skewAfterSeconds": .from(self.skewAfterSeconds),
            ]
        }
    }

    /// `type Session`: one sync attempt as recorded.
    public struct Session: WireValue, Hashable {
        /// The recorded session's id; nil before it is stored.
        public var id: Int64?
        /// The meter synced.
        public var meter: String
        /// When the attempt started.
        public var started: Instant
        /// When it ended; nil while it runs.
        public var ended: Instant?
        /// How it ended.
        public var result: SyncResult
        /// How many records the meter announced, when it did.
        public var expected: Int64?
        /// Records received.
        public var received: Int64
        /// Readings newly stored.
        public var stored: Int64
        /// Records received that were already stored.
        public var duplicates: Int64
        /// Why it failed, in one sentence.
        public var error: String?
        /// The attempt found the meter reset (`sequenceResets` > 0).
        public var reset: Bool
        /// Sequence resets detected, each opening a new epoch.
        public var sequenceResets: Int64
        /// The meter clock this attempt set, if it did.
        public var clockSet: ClockSet?

        /// A session with every field given.
        public init(
            id: Int64?, meter: String, started: Instant, ended: Instant?, result: SyncResult, expected: Int64?,
            received: Int64, stored: Int64, duplicates: Int64, error: String?, reset: Bool, sequenceResets: Int64,
            clockSet: ClockSet? = nil
        ) {
            self.clockSet = clockSet
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
            self.reset = reset
            self.sequenceResets = sequenceResets
        }

        /// Requires `meter`, `started`, `result`, `received`, `stored`, `duplicates`, `reset` and `sequenceResets`;
        /// `id`, `ended`, `expected`, `error` and `clockSet` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.id = try f.optional("id")
            self.meter = try f.required("meter")
            self.started = try f.required("started")
            self.ended = try f.optional("ended")
            self.result = try f.required("result")
            self.expected = try f.optional("expected")
            self.received = try f.required("received")
            self.stored = try f.required("stored")
            self.duplicates = try f.required("duplicates")
            self.error = try f.optional("error")
            self.reset = try f.required("reset")
            self.sequenceResets = try f.required("sequenceResets")
            self.clockSet = try f.optional("clockSet")
        }

        /// The object with every key; a value that is absent is null.
        public var json: JSONValue {
            [
                "id": .from(self.id), "meter": .string(self.meter), "started": self.started.json, "ended": .wire(self.ended),
                "result": self.result.json, "expected": .from(self.expected), "received": .int(self.received),
                "stored": .int(self.stored), "duplicates": .int(self.duplicates), "error": .from(self.error),
                "reset": .bool(self.reset), "sequenceResets": .int(self.sequenceResets), "clockSet": .wire(self.clockSet),
            ]
        }
    }
}

extension GlucoseUnit: WireEnum {}
