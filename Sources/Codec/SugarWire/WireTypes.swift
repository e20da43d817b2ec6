public import JSON
import GlucoseProfile

/// The value types of `io.sugard.HealthDataSync` (io.sugard.HealthDataSync.varlink), one Swift type
/// per `type` declaration, with the JSON form the daemon sends. WireTypeTests checks them against the
/// interface description field by field.
public enum Wire {}

extension Wire {
    /// `type Instant (iso: string, epochMillis: int)`
    public struct Instant: WireValue, Hashable {
        public var iso: String
        public var epochMillis: Int64

        public init(iso: String, epochMillis: Int64) {
            self.iso = iso
            self.epochMillis = epochMillis
        }

        /// The instant `epochMillis` after the epoch, its `iso` in UTC as the daemon writes it.
        public init(epochMillis: Int64) {
            self.init(iso: CivilCalendar.isoUTC(epochMillis: epochMillis), epochMillis: epochMillis)
        }

        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.iso = try f.required("iso")
            self.epochMillis = try f.required("epochMillis")
        }

        public var json: JSONValue { ["iso": .string(self.iso), "epochMillis": .int(self.epochMillis)] }
    }

    /// `type Glucose (mgdL: float, mmolL: float)`
    public struct Glucose: WireValue, Hashable {
        public var mgdL: Double
        public var mmolL: Double

        public init(mgdL: Double, mmolL: Double) {
            self.mgdL = mgdL
            self.mmolL = mmolL
        }

        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.mgdL = try f.required("mgdL")
            self.mmolL = try f.required("mmolL")
        }

        public var json: JSONValue { ["mgdL": self.mgdL.json, "mmolL": self.mmolL.json] }
    }

    /// `type Coded (name: string, code: int)`
    public struct Coded: WireValue, Hashable {
        public var name: String
        public var code: Int64

        public init(name: String, code: Int64) {
            self.name = name
            self.code = code
        }

        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.name = try f.required("name")
            self.code = try f.required("code")
        }

        public var json: JSONValue { ["name": .string(self.name), "code": .int(self.code)] }
    }

    /// `type StoreFailure (code: string, message: string)`
    public struct StoreFailure: WireValue, Hashable {
        public var code: String
        public var message: String

        public init(code: String, message: String) {
            self.code = code
            self.message = message
        }

        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.code = try f.required("code")
            self.message = try f.required("message")
        }

        public var json: JSONValue { ["code": .string(self.code), "message": .string(self.message)] }
    }

    /// `type Storage (status: (ok, degraded, failed), path: string, error: ?StoreFailure, databaseId: ?string,
    /// check: ?StorageCheck)`
    public struct Storage: WireValue, Hashable {
        public enum Status: String, WireEnum { case ok, degraded, failed }

        public var status: Status
        public var path: String
        public var error: StoreFailure?
        /// The open database's identity (a random UUID, lowercase); absent while none is open.
        public var databaseId: String?
        /// The latest integrity check since the daemon started; absent when none ran.
        public var check: StorageCheck?

        public init(status: Status, path: String, error: StoreFailure?, databaseId: String? = nil, check: StorageCheck? = nil) {
            self.status = status
            self.path = path
            self.error = error
            self.databaseId = databaseId
            self.check = check
        }

        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.status = try f.required("status")
            self.path = try f.required("path")
            self.error = try f.optional("error")
            self.databaseId = try f.optional("databaseId")
            self.check = try f.optional("check")
        }

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
        public enum Kind: String, WireEnum { case quick, full }
        public enum Reason: String, WireEnum { case uncleanShutdown, scheduled, requested }
        public enum Result: String, WireEnum { case running, ok, damaged, failed }

        public var kind: Kind
        public var reason: Reason
        public var result: Result
        public var startedAt: Instant
        public var finishedAt: Instant?
        public var problemCount: Int64
        public var problems: [String]
        public var message: String?

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
        public var check: StorageCheck

        public init(check: StorageCheck) { self.check = check }

        public init(json: JSONValue) throws(WireError) {
            self.check = try WireFields(json).required("check")
        }

        public var json: JSONValue { ["check": self.check.json] }
    }

    /// `type Daemon (version: string, startedAt: Instant, storage: Storage)`
    public struct Daemon: WireValue, Hashable {
        public var version: String
        public var startedAt: Instant
        public var storage: Storage

        public init(version: String, startedAt: Instant, storage: Storage) {
            self.version = version
            self.startedAt = startedAt
            self.storage = storage
        }

        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.version = try f.required("version")
            self.startedAt = try f.required("startedAt")
            self.storage = try f.required("storage")
        }

        public var json: JSONValue {
            ["version": .string(self.version), "startedAt": self.startedAt.json, "storage": self.storage.json]
        }
    }

    /// `type Adapter (present: bool, powered: bool, discovering: bool, name: ?string, address: ?string)`
    public struct Adapter: WireValue, Hashable {
        public var present: Bool
        public var powered: Bool
        public var discovering: Bool
        public var name: String?
        public var address: String?

        public init(present: Bool, powered: Bool, discovering: Bool, name: String?, address: String?) {
            self.present = present
            self.powered = powered
            self.discovering = discovering
            self.name = name
            self.address = address
        }

        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.present = try f.required("present")
            self.powered = try f.required("powered")
            self.discovering = try f.required("discovering")
            self.name = try f.optional("name")
            self.address = try f.optional("address")
        }

        public var json: JSONValue {
            [
                "present": .bool(self.present), "powered": .bool(self.powered), "discovering": .bool(self.discovering),
                "name": .from(self.name), "address": .from(self.address),
            ]
        }
    }

    /// `type MeterIdentity (id, name?, manufacturer?, model?, serialNumber?, firmware?, displayName)`
    public struct MeterIdentity: WireValue, Hashable {
        public var id: String
        public var name: String?
        public var manufacturer: String?
        public var model: String?
        public var serialNumber: String?
        public var firmware: String?
        public var displayName: String

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
        case idle, queued, connecting, pairing, readingDeviceInfo, readingClock, subscribing, counting, receiving
        case waitingToRetry, settingClock, committing, disconnecting, done, failed
    }

    /// `type PairingState`.
    public enum PairingState: String, WireEnum { case unknown, notPaired, pairing, waitingForPasskey, paired, failed }

    /// `type Progress (received: int, expected: ?int)`
    public struct Progress: WireValue, Hashable {
        public var received: Int64
        public var expected: Int64?

        public init(received: Int64, expected: Int64?) {
            self.received = received
            self.expected = expected
        }

        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.received = try f.required("received")
            self.expected = try f.optional("expected")
        }

        public var json: JSONValue { ["received": .int(self.received), "expected": .from(self.expected)] }
    }

    /// `type LastSync (meter, at: Instant, result: SyncResult, stored, duplicates, reset: bool)`
    public struct LastSync: WireValue, Hashable {
        public var meter: String
        public var at: Instant
        public var result: SyncResult
        public var stored: Int64
        public var duplicates: Int64
        public var reset: Bool
        /// The meter clock the attempt set, if it did.
        public var clockSet: ClockSet?

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

        public var json: JSONValue {
            [
                "meter": .string(self.meter), "at": self.at.json, "result": self.result.json, "stored": .int(self.stored),
                "duplicates": .int(self.duplicates), "reset": .bool(self.reset), "clockSet": .wire(self.clockSet),
            ]
        }
    }

    /// `type ReportedError (code, message, hint?, at: Instant, meter?, specCode?)`
    public struct ReportedError: WireValue, Hashable {
        public var code: String
        public var message: String
        public var hint: String?
        public var at: Instant
        public var meter: String?
        public var specCode: Int64?

        public init(code: String, message: String, hint: String?, at: Instant, meter: String?, specCode: Int64?) {
            self.code = code
            self.message = message
            self.hint = hint
            self.at = at
            self.meter = meter
            self.specCode = specCode
        }

        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.code = try f.required("code")
            self.message = try f.required("message")
            self.hint = try f.optional("hint")
            self.at = try f.required("at")
            self.meter = try f.optional("meter")
            self.specCode = try f.optional("specCode")
        }

        public var json: JSONValue {
            [
                "code": .string(self.code), "message": .string(self.message), "hint": .from(self.hint), "at": self.at.json,
                "meter": .from(self.meter), "specCode": .from(self.specCode),
            ]
        }
    }

    /// `type Meter`: one meter as the daemon sees it now.
    public struct Meter: WireValue, Hashable {
        public enum Link: String, WireEnum { case disconnected, connecting, connected, disconnecting }

        public var id: String
        public var identity: MeterIdentity
        public var link: Link
        public var sync: SyncPhase
        public var progress: Progress
        public var lastSync: LastSync?
        public var highWater: Int64?
        public var pairing: PairingState
        public var lastError: ReportedError?
        public var nextAttempt: Instant?

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
        public enum TimeMethod: String, WireEnum { case meterClock, assumedClock, untrusted }

        public var meter: String
        public var sequenceNumber: Int64
        public var instant: Instant
        public var glucose: Glucose?
        public var ketoneMmolL: Double?
        public var flags: [String]
        public var sampleType: Coded?
        public var sampleLocation: Coded?
        public var meterLocalTime: String
        public var utcOffsetSeconds: Int64
        public var timeMethod: TimeMethod
        public var storeID: Int64?
        public var storedAt: Instant?

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
        public enum Phase: String, WireEnum { case idle, syncing }

        public var phase: Phase
        public var activeMeters: [String]
        public var lastResult: LastSync?

        public init(phase: Phase, activeMeters: [String], lastResult: LastSync?) {
            self.phase = phase
            self.activeMeters = activeMeters
            self.lastResult = lastResult
        }

        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.phase = try f.required("phase")
            self.activeMeters = try f.array("activeMeters")
            self.lastResult = try f.optional("lastResult")
        }

        public var json: JSONValue {
            ["phase": self.phase.json, "activeMeters": .wire(self.activeMeters), "lastResult": .wire(self.lastResult)]
        }
    }

    /// `type State`: the view model.
    public struct State: WireValue, Hashable {
        public var daemon: Daemon
        public var adapter: Adapter
        public var meters: [Meter]
        public var lastReading: LastReading?
        public var readingCount: Int64
        public var sync: SyncOverview
        public var errors: [ReportedError]

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

        public var json: JSONValue {
            [
                "daemon": self.daemon.json, "adapter": self.adapter.json, "meters": .wire(self.meters),
                "lastReading": .wire(self.lastReading), "readingCount": .int(self.readingCount), "sync": self.sync.json,
                "errors": .wire(self.errors),
            ]
        }
    }

    /// `type Unit (mgdl, mmol)`: the display unit a client should use unless told otherwise.
    public enum Unit: String, WireEnum { case mgdl, mmol }

    /// `type StoredMeter`: what the database holds about a meter.
    public struct StoredMeter: WireValue, Hashable {
        public var firstSeen: Instant
        public var lastSeen: Instant
        public var highWater: Int64?
        public var epoch: Int64
        public var lastSync: Instant?
        public var lastSyncResult: SyncResult?
        public var readingCount: Int64
        public var features: Int64?
        public var person: String?
        /// Shared now: its new readings wait for an attribution (nil from a daemon before people records).
        public var shared: Bool?

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
        public var id: String
        public var identity: MeterIdentity
        public var live: Meter?
        public var stored: StoredMeter?
        public var person: String?
        public var procedure: Procedure?
        public var clockSettable: Bool?

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
        public enum Method: String, WireEnum { case currentTime, isens }

        public var method: Method
        public var at: Instant
        /// The local wall-clock time written (ISO 8601 without a zone).
        public var written: String
        public var skewBeforeSeconds: Int64?
        public var skewAfterSeconds: Int64?

        public init(method: Method, at: Instant, written: String, skewBeforeSeconds: Int64?, skewAfterSeconds: Int64?) {
            self.method = method
            self.at = at
            self.written = written
            self.skewBeforeSeconds = skewBeforeSeconds
            self.skewAfterSeconds = skewAfterSeconds
        }

        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.method = try f.required("method")
            self.at = try f.required("at")
            self.written = try f.required("written")
            self.skewBeforeSeconds = try f.optional("skewBeforeSeconds")
            self.skewAfterSeconds = try f.optional("skewAfterSeconds")
        }

        public var json: JSONValue {
            [
                "method": self.method.json, "at": self.at.json, "written": .string(self.written),
                "skewBeforeSeconds": .from(self.skewBeforeSeconds), "skewAfterSeconds": .from(self.skewAfterSeconds),
            ]
        }
    }

    /// `type Session`: one sync attempt as recorded.
    public struct Session: WireValue, Hashable {
        public var id: Int64?
        public var meter: String
        public var started: Instant
        public var ended: Instant?
        public var result: SyncResult
        public var expected: Int64?
        public var received: Int64
        public var stored: Int64
        public var duplicates: Int64
        public var error: String?
        public var reset: Bool
        public var sequenceResets: Int64
        /// The meter clock this attempt set, if it did.
        public var clockSet: ClockSet?

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
