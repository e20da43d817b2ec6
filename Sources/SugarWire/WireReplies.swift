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
        public var revision: Int64
        public var revisions: WireMap<Int64>
        public var state: State
        public var unit: Unit
        public var people: WireMap<String>?

        public init(revision: Int64, revisions: WireMap<Int64>, state: State, unit: Unit, people: WireMap<String>?) {
            self.revision = revision
            self.revisions = revisions
            self.state = state
            self.unit = unit
            self.people = people
        }

        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.revision = try f.required("revision")
            self.revisions = try f.required("revisions")
            self.state = try f.required("state")
            self.unit = try f.required("unit")
            self.people = try f.optional("people")
        }

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
        public var generation: Int64
        public var revision: Int64
        public var snapshot: Bool
        public var fields: JSONObject
        public var revisions: WireMap<Int64>
        public var meter: String?

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

        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.generation = try f.required("generation")
            self.revision = try f.required("revision")
            self.snapshot = try f.required("snapshot")
            self.fields = try f.required("fields")
            self.revisions = try f.required("revisions")
            self.meter = try f.optional("meter")
        }

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
        public var readings: [JSONObject]
        /// With `csv: true`: the page's CSV rows, and how many (``CSVPage`` reads them from bytes).
        public var csv: String?
        public var csvRows: Int64?
        public var truncated: Bool?
        public var unit: Unit

        public init(readings: [JSONObject], csv: String? = nil, csvRows: Int64? = nil, truncated: Bool?, unit: Unit) {
            self.readings = readings
            self.csv = csv
            self.csvRows = csvRows
            self.truncated = truncated
            self.unit = unit
        }

        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.readings = try f.array("readings")
            self.csv = try f.optional("csv")
            self.csvRows = try f.optional("csvRows")
            self.truncated = try f.optional("truncated")
            self.unit = try f.required("unit")
        }

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
        public var cursor: Int64
        public var reading: JSONObject?
        public var readings: [FollowedReading]?
        /// The database the cursor is a position in.
        public var databaseId: String?

        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.cursor = try f.required("cursor")
            self.reading = try f.optional("reading")
            self.readings = try f.optionalArray("readings")
            self.databaseId = try f.optional("databaseId")
        }

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
        public var size: Int64
        public var readings: Int64
        public var databaseId: String?
        public var schemaVersion: Int64
        public var offset: Int64
        /// Base64 of the part's bytes.
        public var data: String

        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.size = try f.required("size")
            self.readings = try f.required("readings")
            self.databaseId = try f.optional("databaseId")
            self.schemaVersion = try f.required("schemaVersion")
            self.offset = try f.required("offset")
            self.data = try f.required("data")
        }

        public var json: JSONValue {
            .parameters([
                ("size", .int(self.size)), ("readings", .int(self.readings)), ("databaseId", .from(self.databaseId)),
                ("schemaVersion", .int(self.schemaVersion)), ("offset", .int(self.offset)), ("data", .string(self.data)),
            ])
        }
    }

    /// `RestoreUpload(upload, offset, data) -> (size)`
    public struct RestoreUploadReply: WireValue {
        public var size: Int64

        public init(json: JSONValue) throws(WireError) { self.size = try WireFields(json).required("size") }

        public var json: JSONValue { .parameters([("size", .int(self.size))]) }
    }

    /// `Restore(upload) -> (path, size, readings, databaseId, previousDatabaseId, schemaVersion, migratedFrom, keptAs)`
    public struct RestoreReply: WireValue {
        public var path: String
        public var size: Int64
        public var readings: Int64
        public var databaseId: String?
        public var previousDatabaseId: String?
        public var schemaVersion: Int64
        public var migratedFrom: Int64?
        public var keptAs: String?

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
        public var cursor: Int64
        public var reading: JSONObject

        public init(cursor: Int64, reading: JSONObject) {
            self.cursor = cursor
            self.reading = reading
        }

        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.cursor = try f.required("cursor")
            self.reading = try f.required("reading")
        }

        public var json: JSONValue { ["cursor": .int(self.cursor), "reading": .object(self.reading)] }

        /// The reading read as a ``Reading``.
        public func storedReading() throws(WireError) -> Reading {
            do throws(WireError) { return try Reading(json: .object(self.reading)) } catch { throw error.within("reading") }
        }
    }

    /// `ListMeters() -> (meters: []MeterEntry)`
    public struct MetersReply: WireValue {
        public var meters: [MeterEntry]

        public init(meters: [MeterEntry]) { self.meters = meters }

        public init(json: JSONValue) throws(WireError) { self.meters = try WireFields(json).array("meters") }

        public var json: JSONValue { ["meters": .wire(self.meters)] }
    }

    /// `Sync(meter, force) -> (meter, phase, received, expected, sessions)`: progress replies carry
    /// meter, phase, received and expected (the daemon sends `expected` as null, not left out, until
    /// the meter has said); the final one the sessions.
    public struct SyncReply: WireValue {
        public var meter: String?
        public var phase: SyncPhase?
        public var received: Int64?
        public var expected: Int64?
        public var sessions: [Session]?

        public init(
            meter: String? = nil, phase: SyncPhase? = nil, received: Int64? = nil, expected: Int64? = nil, sessions: [Session]? = nil
        ) {
            self.meter = meter
            self.phase = phase
            self.received = received
            self.expected = expected
            self.sessions = sessions
        }

        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.meter = try f.optional("meter")
            self.phase = try f.optional("phase")
            self.received = try f.optional("received")
            self.expected = try f.optional("expected")
            self.sessions = try f.optionalArray("sessions")
        }

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
        public enum State: String, WireEnum { case pairing, waitingForPasskey, paired, failed }

        public var meter: String
        public var state: State
        public var message: String?

        public init(meter: String, state: State, message: String? = nil) {
            self.meter = meter
            self.state = state
            self.message = message
        }

        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.meter = try f.required("meter")
            self.state = try f.required("state")
            self.message = try f.optional("message")
        }

        public var json: JSONValue {
            .parameters([("meter", .string(self.meter)), ("state", self.state.json), ("message", .from(self.message))])
        }
    }

    /// `ListSyncSessions(meter, limit) -> (sessions: []Session)`
    public struct SessionsReply: WireValue {
        public var sessions: [Session]

        public init(sessions: [Session]) { self.sessions = sessions }

        public init(json: JSONValue) throws(WireError) { self.sessions = try WireFields(json).array("sessions") }

        public var json: JSONValue { ["sessions": .wire(self.sessions)] }
    }
}
