public import JSON

// The reply parameters of each `io.sugard.HealthDataSync` method, one type per method. Unlike the
// fields of a `type` (always present, null when empty), an optional reply parameter is left out
// when it has no value, as the daemon sends it.

extension JSONValue {
    /// A reply's parameters: null ones left out.
    static func parameters(_ pairs: [(String, JSONValue)]) -> JSONValue {
        .object(JSONObject(pairs.filter { !$0.1.isNull }))
    }
}

extension Wire {
    /// `GetStatus() -> (revision, revisions, state, unit, people)`
    public struct StatusReply: WireValue {
        /// The view model's revision this status is at.
        public var revision: Int64
        /// Each field's last-changed revision, by field name.
        public var revisions: WireMap<Int64>
        /// The whole view model.
        public var state: State
        /// The configured display unit.
        public var unit: Unit
        /// Each assigned meter's id → its person (from the database, not the view model).
        public var people: WireMap<String>?

        /// A status reply with every parameter given.
        public init(revision: Int64, revisions: WireMap<Int64>, state: State, unit: Unit, people: WireMap<String>?) {
            self.revision = revision
            self.revisions = revisions
            self.state = state
            self.unit = unit
            self.people = people
        }

        /// Requires `revision`, `revisions`, `state` and `unit`; `people` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.revision = try f.required("revision")
            self.revisions = try f.required("revisions")
            self.state = try f.required("state")
            self.unit = try f.required("unit")
            self.people = try f.optional("people")
        }

        /// The reply's parameters; those without a value are left out, not sent as null.
        public var json: JSONValue {
            .parameters(
                [
                    ("revision", .int(self.revision)), ("revisions", self.revisions.json), ("state", self.state.json),
                    ("unit", self.unit.json), ("people", .wire(self.people)),
                ])
        }
    }

    /// `Watch(...) -> (generation, revision, snapshot, fields: object, revisions, meter)`. `fields` has
    /// the shape of `State` (or `Meter`) restricted to the fields present: read them with
    /// ``WatchFields``.
    public struct WatchReply: WireValue {
        /// Advances each time a `followSyncing` watch rebinds to another meter.
        public var generation: Int64
        /// The revision this reply brings the watcher to.
        public var revision: Int64
        /// The reply carries every watched field (the first, and the first after a rebind), not only changes.
        public var snapshot: Bool
        /// The fields present, each with its value.
        public var fields: JSONObject
        /// The last-changed revision of each field present.
        public var revisions: WireMap<Int64>
        /// The meter a meter-model reply is about.
        public var meter: String?

        /// A watch reply with every parameter given.
        public init(
            generation: Int64, revision: Int64, snapshot: Bool, fields: JSONObject, revisions: WireMap<Int64>, meter: String?
        ) {
            self.generation = generation
            self.revision = revision
            self.snapshot = snapshot
            self.fields = fields
            self.revisions = revisions
            self.meter = meter
        }

        /// Requires `generation`, `revision`, `snapshot`, `fields` and `revisions`; `meter` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.generation = try f.required("generation")
            self.revision = try f.required("revision")
            self.snapshot = try f.required("snapshot")
            self.fields = try f.required("fields")
            self.revisions = try f.required("revisions")
            self.meter = try f.optional("meter")
        }

        /// The reply's parameters; those without a value are left out, not sent as null.
        public var json: JSONValue {
            .parameters(
                [
                    ("generation", .int(self.generation)), ("revision", .int(self.revision)),
                    ("snapshot", .bool(self.snapshot)), ("fields", .object(self.fields)),
                    ("revisions", self.revisions.json), ("meter", .from(self.meter)),
                ])
        }
    }

    /// `ListReadings(...) -> (readings: []object, truncated: ?bool, unit)`. Each reading is kept as the
    /// object it came as (its keys are those of `sugarctl decode measurement --json` plus the stored
    /// facts); ``Reading`` reads the stored facts.
    public struct ReadingsReply: WireValue {
        /// The readings, each as the object it came as.
        public var readings: [JSONObject]
        /// With `csv: true`: the page's CSV rows, and how many (``CSVPage`` reads them from bytes).
        public var csv: String?
        /// With `csv: true`: how many rows `csv` holds.
        public var csvRows: Int64?
        /// In the last reply: the limit cut the list.
        public var truncated: Bool?
        /// The configured display unit.
        public var unit: Unit

        /// A readings reply with every parameter given.
        public init(readings: [JSONObject], csv: String? = nil, csvRows: Int64? = nil, truncated: Bool?, unit: Unit) {
            self.readings = readings
            self.csv = csv
            self.csvRows = csvRows
            self.truncated = truncated
            self.unit = unit
        }

        /// Requires `readings` and `unit`; `truncated` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.readings = try f.array("readings")
            self.csv = try f.optional("csv")
            self.csvRows = try f.optional("csvRows")
            self.truncated = try f.optional("truncated")
            self.unit = try f.required("unit")
        }

        /// The reply's parameters; those without a value are left out, not sent as null.
        public var json: JSONValue {
            .parameters([
                ("readings", .wire(self.readings)), ("csv", .wire(self.csv)), ("csvRows", .wire(self.csvRows)),
                ("truncated", .wire(self.truncated)), ("unit", self.unit.json),
            ])
        }
        /// The readings read as ``Reading``s.
        public func storedReadings() throws(WireError) -> [Reading] {
            do throws(WireError) { return try Reading.list(self.readings) } catch { throw error.within("readings") }
        }
    }

    /// `FollowReadings(after, batch) -> (cursor, reading: ?object, readings: ?[]FollowedReading)`:
    /// without `batch` each reply has `reading`; with it, `readings` (several when several wait) and
    /// `cursor` is the last one's.
    public struct FollowReply: WireValue {
        /// The (last) reading's place in the commit order: pass it as `after` to resume.
        public var cursor: Int64
        /// The one reading of an unbatched reply.
        public var reading: JSONObject?
        /// The readings of a batched reply, in commit order.
        public var readings: [FollowedReading]?
        /// The database the cursor is a position in.
        public var databaseId: String?

        /// Requires `cursor`; `reading`, `readings` and `databaseId` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.cursor = try f.required("cursor")
            self.reading = try f.optional("reading")
            self.readings = try f.optionalArray("readings")
            self.databaseId = try f.optional("databaseId")
        }

        /// The reply's parameters; those without a value are left out, not sent as null.
        public var json: JSONValue {
            .parameters([
                ("cursor", .int(self.cursor)), ("reading", .wire(self.reading)), ("readings", self.readings.map { .wire($0) } ?? .null),
                ("databaseId", .from(self.databaseId)),
            ])
        }

        /// Every reading of the reply with its cursor, in commit order.
        public var followed: [FollowedReading] {
            if let readings = self.readings { return readings }
            return self.reading.map { [FollowedReading(cursor: self.cursor, reading: $0)] } ?? []
        }
    }

    /// `Backup() -> (size, readings, databaseId, schemaVersion, offset, data)`: one part of the copy.
    public struct BackupReply: WireValue {
        /// The copy's total size in bytes.
        public var size: Int64
        /// Readings in the copy.
        public var readings: Int64
        /// The copied database's identity (a backup keeps it).
        public var databaseId: String?
        /// The copy's schema version.
        public var schemaVersion: Int64
        /// Where this part's bytes start in the copy.
        public var offset: Int64
        /// Base64 of the part's bytes.
        public var data: String

        /// Requires `size`, `readings`, `schemaVersion`, `offset` and `data`; `databaseId` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.size = try f.required("size")
            self.readings = try f.required("readings")
            self.databaseId = try f.optional("databaseId")
            self.schemaVersion = try f.required("schemaVersion")
            self.offset = try f.required("offset")
            self.data = try f.required("data")
        }

        /// The reply's parameters; those without a value are left out, not sent as null.
        public var json: JSONValue {
            .parameters([
                ("size", .int(self.size)), ("readings", .int(self.readings)), ("databaseId", .from(self.databaseId)),
                ("schemaVersion", .int(self.schemaVersion)), ("offset", .int(self.offset)), ("data", .string(self.data)),
            ])
        }
    }

    /// `RestoreUpload(upload, offset, data) -> (size)`
    public struct RestoreUploadReply: WireValue {
        /// Bytes received so far for the upload.
        public var size: Int64

        /// Requires `size`.
        public init(json: JSONValue) throws(WireError) { self.size = try WireFields(json).required("size") }

        /// The reply's parameters; those without a value are left out, not sent as null.
        public var json: JSONValue { .parameters([("size", .int(self.size))]) }
    }

    /// `Restore(upload) -> (path, size, readings, databaseId, previousDatabaseId, schemaVersion, migratedFrom, keptAs)`
    public struct RestoreReply: WireValue {
        /// The database file now served.
        public var path: String
        /// Its size in bytes.
        public var size: Int64
        /// Readings in it.
        public var readings: Int64
        /// Its new identity (a restore always gets a new one, so followers start over).
        public var databaseId: String?
        /// The identity of the database it replaced.
        public var previousDatabaseId: String?
        /// Its schema version after migration.
        public var schemaVersion: Int64
        /// The schema version it had, when it was migrated.
        public var migratedFrom: Int64?
        /// Where the replaced database was kept (`<database>.before-restore-<time>`).
        public var keptAs: String?

        /// Requires `path`, `size`, `readings` and `schemaVersion`; `databaseId`, `previousDatabaseId`,
        /// `migratedFrom` and `keptAs` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.path = try f.required("path")
            self.size = try f.required("size")
            self.readings = try f.required("readings")
            self.databaseId = try f.optional("databaseId")
            self.previousDatabaseId = try f.optional("previousDatabaseId")
            self.schemaVersion = try f.required("schemaVersion")
            self.migratedFrom = try f.optional("migratedFrom")
            self.keptAs = try f.optional("keptAs")
        }

        /// The reply's parameters; those without a value are left out, not sent as null.
        public var json: JSONValue {
            .parameters([
                ("path", .string(self.path)), ("size", .int(self.size)), ("readings", .int(self.readings)),
                ("databaseId", .from(self.databaseId)), ("previousDatabaseId", .from(self.previousDatabaseId)),
                ("schemaVersion", .int(self.schemaVersion)), ("migratedFrom", .from(self.migratedFrom)), ("keptAs", .from(self.keptAs)),
            ])
        }
    }

    /// `type FollowedReading (cursor: int, reading: object)`: one reading of a batched reply.
    public struct FollowedReading: WireValue {
        /// The reading's place in the commit order.
        public var cursor: Int64
        /// The reading, as the object it came as.
        public var reading: JSONObject

        /// A followed reading at `cursor`.
        public init(cursor: Int64, reading: JSONObject) {
            self.cursor = cursor
            self.reading = reading
        }

        /// Requires `cursor` and `reading`.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.cursor = try f.required("cursor")
            self.reading = try f.required("reading")
        }

        /// `{"cursor": ..., "reading": {...}}`, the reading as it came.
        public var json: JSONValue { ["cursor": .int(self.cursor), "reading": .object(self.reading)] }

        /// The reading read as a ``Reading``.
        public func storedReading() throws(WireError) -> Reading {
            do throws(WireError) { return try Reading(json: .object(self.reading)) } catch { throw error.within("reading") }
        }
    }

    /// `ListMeters() -> (meters: []MeterEntry)`
    public struct MetersReply: WireValue {
        /// Every meter known to the daemon or its database, sorted by id.
        public var meters: [MeterEntry]

        /// The reply carrying `meters`.
        public init(meters: [MeterEntry]) { self.meters = meters }

        /// Requires `meters`.
        public init(json: JSONValue) throws(WireError) { self.meters = try WireFields(json).array("meters") }

        /// The object with every key.
        public var json: JSONValue { ["meters": .wire(self.meters)] }
    }

    /// `Sync(meter, force) -> (meter, phase, received, expected, sessions)`: progress replies carry
    /// meter, phase, received and expected (the daemon sends `expected` as null, not left out, until
    /// the meter has said); the final one the sessions.
    public struct SyncReply: WireValue {
        /// The meter a progress reply is about.
        public var meter: String?
        /// Where that meter's sync is.
        public var phase: SyncPhase?
        /// Records received so far.
        public var received: Int64?
        /// Records the meter announced; null until it has said.
        public var expected: Int64?
        /// In the final reply: the sessions the sync recorded.
        public var sessions: [Session]?

        /// A sync reply with the parameters given.
        public init(
            meter: String? = nil, phase: SyncPhase? = nil, received: Int64? = nil, expected: Int64? = nil, sessions: [Session]? = nil
        ) {
            self.meter = meter
            self.phase = phase
            self.received = received
            self.expected = expected
            self.sessions = sessions
        }

        /// `meter`, `phase`, `received`, `expected` and `sessions` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.meter = try f.optional("meter")
            self.phase = try f.optional("phase")
            self.received = try f.optional("received")
            self.expected = try f.optional("expected")
            self.sessions = try f.optionalArray("sessions")
        }

        /// The reply's parameters; those without a value are left out, not sent as null.
        public var json: JSONValue {
            .parameters(
                [
                    ("meter", .from(self.meter)), ("phase", .wire(self.phase)), ("received", .from(self.received)),
                    ("expected", .from(self.expected)), ("sessions", self.sessions.map { .wire($0) } ?? .null),
                ])
        }
    }

    /// `Pair(meter) -> (meter, state: (pairing, waitingForPasskey, paired, failed), message)`
    public struct PairReply: WireValue {
        /// Where pairing is; at `waitingForPasskey`, send the meter's PIN with `SubmitPasskey`.
        public enum State: String, WireEnum { case pairing, waitingForPasskey, paired, failed }

        /// The meter being paired.
        public var meter: String
        /// Where pairing is.
        public var state: State
        /// A sentence about the state, when the daemon has one.
        public var message: String?

        /// A pairing reply.
        public init(meter: String, state: State, message: String? = nil) {
            self.meter = meter
            self.state = state
            self.message = message
        }

        /// Requires `meter` and `state`; `message` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.meter = try f.required("meter")
            self.state = try f.required("state")
            self.message = try f.optional("message")
        }

        /// The reply's parameters; those without a value are left out, not sent as null.
        public var json: JSONValue {
            .parameters([("meter", .string(self.meter)), ("state", self.state.json), ("message", .from(self.message))])
        }
    }

    /// `ListSyncSessions(meter, limit) -> (sessions: []Session)`
    public struct SessionsReply: WireValue {
        /// Recorded sessions, newest first.
        public var sessions: [Session]

        /// The reply carrying `sessions`.
        public init(sessions: [Session]) { self.sessions = sessions }

        /// Requires `sessions`.
        public init(json: JSONValue) throws(WireError) { self.sessions = try WireFields(json).array("sessions") }

        /// The object with every key.
        public var json: JSONValue { ["sessions": .wire(self.sessions)] }
    }
}
