public import JSON

extension Wire {
    /// One reading as `FollowReadings(compact: true)` sends it: the keys of the full reading object
    /// that sugard-forward's sinks read, with the same values. Written straight into bytes by the
    /// daemon (``write(into:)``) and read straight from bytes by the forwarder
    /// (``init(reading:)``), without a ``JSONValue`` tree on either side.
    ///
    /// `{"id", "meter", "epoch", "sequenceNumber", "time": {"iso", "epochMillis", "local",
    /// "utcOffsetMinutes"}, "mgdL", "mmolL", "flags", "type", "sampleLocation", "context": {"meal"}
    /// or null, "person"}`; `type`, `sampleLocation` and `meal` are `{"code", "name"}` or null.
    public struct CompactReading: WireValue, Hashable {
        /// `time`: when the reading was taken.
        public struct Time: Sendable, Hashable {
            /// The instant in UTC, ISO 8601.
            public var iso: String
            /// The instant in milliseconds since the epoch.
            public var epochMillis: Int64
            /// ISO 8601 with the zone offset used.
            public var local: String
            /// The offset `local` carries, in minutes.
            public var utcOffsetMinutes: Int64

            /// A time with every field given.
            public init(iso: String, epochMillis: Int64, local: String, utcOffsetMinutes: Int64) {
                self.iso = iso
                self.epochMillis = epochMillis
                self.local = local
                self.utcOffsetMinutes = utcOffsetMinutes
            }
        }

        /// A Glucose Profile enum value (the interface's `Coded`), written `{"code", "name"}` here as
        /// the full reading object has it.
        public typealias Coded = Wire.Coded

        /// The store's id of the reading.
        public var id: Int64
        /// The meter's id.
        public var meter: String
        /// The meter's epoch the reading belongs to.
        public var epoch: Int64
        /// The meter's record number.
        public var sequenceNumber: Int64
        /// When it was taken.
        public var time: Time
        /// The value in mg/dL; nil without a usable glucose value.
        public var mgdL: Double?
        /// The value in mmol/L.
        public var mmolL: Double?
        /// Reading flag names; with `mgdL` they decide ``kind``.
        public var flags: [String]
        /// The sample type, when the measurement says.
        public var type: Coded?
        /// The sample location, when the measurement says.
        public var sampleLocation: Coded?
        /// The context's meal (`context` is `{"meal": ...}`, or null without one).
        public var meal: Coded?
        /// The person the reading belongs to; nil when nobody.
        public var person: String?

        /// A reading with every field given.
        public init(
            id: Int64, meter: String, epoch: Int64, sequenceNumber: Int64, time: Time, mgdL: Double?, mmolL: Double?,
            flags: [String], type: Coded?, sampleLocation: Coded?, meal: Coded?, person: String?
        ) {
            self.id = id
            self.meter = meter
            self.epoch = epoch
            self.sequenceNumber = sequenceNumber
            self.time = time
            self.mgdL = mgdL
            self.mmolL = mmolL
            self.flags = flags
            self.type = type
            self.sampleLocation = sampleLocation
            self.meal = meal
            self.person = person
        }

        /// The compact form of a full reading (`ListReadings`' object): the same values for the keys
        /// the compact form carries, so exports and payloads read one type.
        public init(_ reading: Reading) {
            self.init(
                id: reading.id, meter: reading.meter, epoch: reading.epoch, sequenceNumber: reading.sequenceNumber,
                time: Time(
                    iso: reading.time.iso, epochMillis: reading.time.epochMillis, local: reading.time.local,
                    utcOffsetMinutes: reading.time.utcOffsetMinutes),
                mgdL: reading.mgdL, mmolL: reading.mmolL, flags: reading.flags, type: reading.sampleType,
                sampleLocation: reading.sampleLocation, meal: reading.meal, person: reading.person)
        }

        // MARK: Writing

        /// Appends the reading's compact JSON text: the same bytes as ``json`` serialized.
        public func write(into out: inout [UInt8]) {
            out.append(contentsOf: #"{"id":"#.utf8)
            JSONValue.int(self.id).write(into: &out)
            out.append(contentsOf: #","meter":"#.utf8)
            JSONValue.string(self.meter).write(into: &out)
            out.append(contentsOf: #","epoch":"#.utf8)
            JSONValue.int(self.epoch).write(into: &out)
            out.append(contentsOf: #","sequenceNumber":"#.utf8)
            JSONValue.int(self.sequenceNumber).write(into: &out)
            out.append(contentsOf: #","time":{"iso":"#.utf8)
            JSONValue.string(self.time.iso).write(into: &out)
            out.append(contentsOf: #","epochMillis":"#.utf8)
            JSONValue.int(self.time.epochMillis).write(into: &out)
            out.append(contentsOf: #","local":"#.utf8)
            JSONValue.string(self.time.local).write(into: &out)
            out.append(contentsOf: #","utcOffsetMinutes":"#.utf8)
            JSONValue.int(self.time.utcOffsetMinutes).write(into: &out)
            out.append(contentsOf: #"},"mgdL":"#.utf8)
            JSONValue.from(self.mgdL).write(into: &out)
            out.append(contentsOf: #","mmolL":"#.utf8)
            JSONValue.from(self.mmolL).write(into: &out)
            out.append(contentsOf: #","flags":"#.utf8)
            JSONValue.write(strings: self.flags, into: &out)
            out.append(contentsOf: #","type":"#.utf8)
            Self.write(self.type, into: &out)
            out.append(contentsOf: #","sampleLocation":"#.utf8)
            Self.write(self.sampleLocation, into: &out)
            out.append(contentsOf: #","context":"#.utf8)
            if let meal = self.meal {
                out.append(contentsOf: #"{"meal":"#.utf8)
                Self.write(meal, into: &out)
                out.append(UInt8(ascii: "}"))
            } else {
                out.append(contentsOf: "null".utf8)
            }
            out.append(contentsOf: #","person":"#.utf8)
            JSONValue.from(self.person).write(into: &out)
            out.append(UInt8(ascii: "}"))
        }

        /// Appends `{"code":…,"name":…}` or `null`.
        private static func write(_ coded: Coded?, into out: inout [UInt8]) {
            guard let coded else { return out.append(contentsOf: "null".utf8) }
            out.append(contentsOf: #"{"code":"#.utf8)
            JSONValue.int(coded.code).write(into: &out)
            out.append(contentsOf: #","name":"#.utf8)
            JSONValue.string(coded.name).write(into: &out)
            out.append(UInt8(ascii: "}"))
        }

        /// The same object as a tree (what ``write(into:)`` writes).
        public var json: JSONValue {
            func coded(_ value: Coded?) -> JSONValue {
                value.map { ["code": .int($0.code), "name": .string($0.name)] } ?? .null
            }
            let time: JSONObject = [
                "iso": .string(self.time.iso), "epochMillis": .int(self.time.epochMillis), "local": .string(self.time.local),
                "utcOffsetMinutes": .int(self.time.utcOffsetMinutes),
            ]
            let object: JSONObject = [
                "id": .int(self.id), "meter": .string(self.meter), "epoch": .int(self.epoch),
                "sequenceNumber": .int(self.sequenceNumber), "time": .object(time), "mgdL": .from(self.mgdL),
                "mmolL": .from(self.mmolL), "flags": .array(self.flags.map { .string($0) }), "type": coded(self.type),
                "sampleLocation": coded(self.sampleLocation), "context": self.meal.map { ["meal": coded($0)] } ?? .null,
                "person": .from(self.person),
            ]
            return .object(object)
        }

        // MARK: Reading

        /// Decodes the tree form (through the byte decoder, so both accept the same).
        public init(json: JSONValue) throws(WireError) {
            var bytes: [UInt8] = []
            json.write(into: &bytes)
            var reader = JSONReader(bytes)
            try self.init(reading: &reader)
            try WireByteFields.end(&reader)
        }

        /// Reads one compact reading object at the reader's position. Strict: a missing, null or
        /// mistyped required field, a duplicate key or malformed JSON throws, naming the field's
        /// path (`time.epochMillis: expected an integer`); keys it does not know are skipped. It is
        /// ``Text/init(reading:)`` (which checks all that) with the values made from the text.
        public init(reading reader: inout JSONReader) throws(WireError) {
            let t = try Text(reading: &reader)
            func coded(_ coded: (code: Int64, name: Range<Int>)?) throws(WireError) -> Coded? {
                guard let coded else { return nil }
                return Coded(name: try Self.value(reader, coded.name) { (r: inout JSONReader) throws(JSONParseError) in try r.readString() }, code: coded.code)
            }
            self.init(
                id: t.id, meter: t.meter, epoch: t.epoch, sequenceNumber: t.sequenceNumber,
                time: Time(
                    iso: try Self.value(reader, t.iso) { (r: inout JSONReader) throws(JSONParseError) in try r.readString() },
                    epochMillis: t.epochMillis,
                    local: try Self.value(reader, t.local) { (r: inout JSONReader) throws(JSONParseError) in try r.readString() },
                    utcOffsetMinutes: t.utcOffsetMinutes),
                mgdL: try t.mgdL.map { (range: Range<Int>) throws(WireError) in try Self.value(reader, range) { (r: inout JSONReader) throws(JSONParseError) in try r.readDouble() } },
                mmolL: try t.mmolL.map { (range: Range<Int>) throws(WireError) in try Self.value(reader, range) { (r: inout JSONReader) throws(JSONParseError) in try r.readDouble() } },
                flags: try Self.value(reader, t.flags, WireByteFields.strings),
                type: try coded(t.type), sampleLocation: try coded(t.sampleLocation), meal: try coded(t.meal),
                person: try t.person.map { (range: Range<Int>) throws(WireError) in try Self.value(reader, range) { (r: inout JSONReader) throws(JSONParseError) in try r.readString() } })
        }

        /// The value whose text ``Text`` found at `range` of `reader`'s bytes, read by `read`
        /// (already checked by ``Text``: an error here would be a bug in it).
        private static func value<T>(
            _ reader: JSONReader, _ range: Range<Int>, _ read: (inout JSONReader) throws(JSONParseError) -> T
        ) throws(WireError) -> T {
            var at = reader.reading(range)
            do throws(JSONParseError) { return try read(&at) } catch { throw WireByteFields.parse(error) }
        }

        /// One compact reading as the text the daemon wrote, for a sink that passes its values on
        /// as they are (sugard-forward's MQTT payload): numbers read, the rest given as where its
        /// JSON text lies in the reader's bytes (``JSONReader/appendText(_:to:)``), without making
        /// the reading's strings and arrays. It accepts and rejects what ``init(reading:)`` does.
        public struct Text: Sendable {
            /// The store's id of the reading.
            public var id: Int64
            /// The meter's id.
            public var meter: String
            /// The meter's epoch.
            public var epoch: Int64
            /// The meter's record number.
            public var sequenceNumber: Int64
            /// `time.epochMillis`.
            public var epochMillis: Int64
            /// `time.iso` and `time.local`: JSON strings.
            public var iso: Range<Int>
            /// `time.local`: a JSON string.
            public var local: Range<Int>
            /// `time.utcOffsetMinutes`.
            public var utcOffsetMinutes: Int64
            /// JSON numbers; nil for null.
            public var mgdL: Range<Int>?
            /// `mmolL`: a JSON number; nil for null.
            public var mmolL: Range<Int>?
            /// `flags`: the JSON array of strings.
            public var flags: Range<Int>
            /// `flags` holds `controlSolution`.
            public var controlSolution: Bool
            /// What the reading means, from its flags and whether `mgdL` is a number.
            public var kind: Wire.ReadingKind
            /// `type`, `sampleLocation` and the context's `meal`: each code and its `name` (a JSON
            /// string); nil for null.
            public var type: (code: Int64, name: Range<Int>)?
            /// `sampleLocation`: its code and its `name` (a JSON string); nil for null.
            public var sampleLocation: (code: Int64, name: Range<Int>)?
            /// The context's `meal`: its code and its `name` (a JSON string); nil for null.
            public var meal: (code: Int64, name: Range<Int>)?
            /// A JSON string; nil for null.
            public var person: Range<Int>?

            /// Reads one compact reading object at the reader's position (the same keys, required
            /// fields and types as ``CompactReading/init(reading:)``, the same errors).
            public init(reading reader: inout JSONReader) throws(WireError) {
                var id: Int64?, meter: String?, epoch: Int64?, sequenceNumber: Int64?
                var time: (iso: Range<Int>, millis: Int64, local: Range<Int>, offset: Int64)?
                var flags: (Range<Int>, Wire.ReadingKind.Facts)?, mgdL: Range<Int>?, mmolL: Range<Int>?, person: Range<Int>?
                var type: (code: Int64, name: Range<Int>)?, sampleLocation: (code: Int64, name: Range<Int>)?, meal: (code: Int64, name: Range<Int>)?
                try WireByteFields.object(&reader, Key.self) { (member: Key, r: inout JSONReader) throws(WireError) in
                    let key = member.rawValue
                    switch member {
                    case .id: id = try WireByteFields.int(key, &r)
                    case .meter: meter = try WireByteFields.repeatedString(key, &r)
                    case .epoch: epoch = try WireByteFields.int(key, &r)
                    case .sequenceNumber: sequenceNumber = try WireByteFields.int(key, &r)
                    case .time: time = try WireByteFields.nested(key, &r, Self.time)
                    case .mgdL: mgdL = try WireByteFields.optional(key, &r) { (r: inout JSONReader) throws(JSONParseError) in try r.readNumberText() }
                    case .mmolL: mmolL = try WireByteFields.optional(key, &r) { (r: inout JSONReader) throws(JSONParseError) in try r.readNumberText() }
                    case .flags: flags = try WireByteFields.required(key, &r, Self.flags)
                    case .type: type = try WireByteFields.optionalNested(key, &r, Self.coded)
                    case .sampleLocation: sampleLocation = try WireByteFields.optionalNested(key, &r, Self.coded)
                    case .context: meal = try WireByteFields.optionalNested(key, &r, Self.contextMeal) ?? nil
                    case .person: person = try WireByteFields.optional(key, &r) { (r: inout JSONReader) throws(JSONParseError) in try r.readStringText() }
                    }
                }
                self.id = try WireByteFields.present(id, "id")
                self.meter = try WireByteFields.present(meter, "meter")
                self.epoch = try WireByteFields.present(epoch, "epoch")
                self.sequenceNumber = try WireByteFields.present(sequenceNumber, "sequenceNumber")
                let t = try WireByteFields.present(time, "time")
                (self.iso, self.epochMillis, self.local, self.utcOffsetMinutes) = (t.iso, t.millis, t.local, t.offset)
                let facts: Wire.ReadingKind.Facts
                (self.flags, facts) = try WireByteFields.present(flags, "flags")
                self.controlSolution = facts.controlSolution
                self.kind = Wire.ReadingKind(facts, hasValue: mgdL != nil)
                self.mgdL = mgdL
                self.mmolL = mmolL
                self.type = type
                self.sampleLocation = sampleLocation
                self.meal = meal
                self.person = person
            }

            /// The `time` object: its strings as ranges, its numbers read; every member required.
            private static func time(_ reader: inout JSONReader) throws(WireError) -> (iso: Range<Int>, millis: Int64, local: Range<Int>, offset: Int64) {
                var iso: Range<Int>?, epochMillis: Int64?, local: Range<Int>?, offset: Int64?
                try WireByteFields.object(&reader, TimeKey.self) { (member: TimeKey, r: inout JSONReader) throws(WireError) in
                    let key = member.rawValue
                    switch member {
                    case .iso: iso = try WireByteFields.required(key, &r) { (r: inout JSONReader) throws(JSONParseError) in try r.readStringText() }
                    case .epochMillis: epochMillis = try WireByteFields.int(key, &r)
                    case .local: local = try WireByteFields.required(key, &r) { (r: inout JSONReader) throws(JSONParseError) in try r.readStringText() }
                    case .utcOffsetMinutes: offset = try WireByteFields.int(key, &r)
                    }
                }
                return (
                    try WireByteFields.present(iso, "iso"), try WireByteFields.present(epochMillis, "epochMillis"),
                    try WireByteFields.present(local, "local"), try WireByteFields.present(offset, "utcOffsetMinutes"))
            }

            /// The `flags` array as a range, noting the flags that decide the kind on the way.
            private static func flags(_ reader: inout JSONReader) throws(JSONParseError) -> (Range<Int>, Wire.ReadingKind.Facts) {
                let start = reader.offset
                var facts = Wire.ReadingKind.Facts()
                try reader.beginArray()
                // Flag names are short (small strings, no allocation): each is noted by the one
                // place that knows which flags decide a kind.
                while try reader.nextElement() { facts.note(try reader.readString()) }
                return (start..<reader.offset, facts)
            }

            /// A `{"code","name"}` object: the code read, the name as a range; both required.
            private static func coded(_ reader: inout JSONReader) throws(WireError) -> (code: Int64, name: Range<Int>) {
                var code: Int64?, name: Range<Int>?
                try WireByteFields.object(&reader, CodedKey.self) { (member: CodedKey, r: inout JSONReader) throws(WireError) in
                    switch member {
                    case .code: code = try WireByteFields.int(member.rawValue, &r)
                    case .name:
                        name = try WireByteFields.required(member.rawValue, &r) { (r: inout JSONReader) throws(JSONParseError) in
                            try r.readStringText()
                        }
                    }
                }
                return (try WireByteFields.present(code, "code"), try WireByteFields.present(name, "name"))
            }

            /// The `context` object's `meal`; nil when it has none.
            private static func contextMeal(_ reader: inout JSONReader) throws(WireError) -> (code: Int64, name: Range<Int>)? {
                var meal: (code: Int64, name: Range<Int>)?
                try WireByteFields.object(&reader, ContextKey.self) { (member: ContextKey, r: inout JSONReader) throws(WireError) in
                    meal = try WireByteFields.optionalNested(member.rawValue, &r, Self.coded)
                }
                return meal
            }
        }

        /// The members of a compact reading.
        private enum Key: String, WireKeys {
            case id, meter, epoch, sequenceNumber, time, mgdL, mmolL, flags, type, sampleLocation, context, person
            static let table = WireKeyTable(Self.self)
        }

        /// The members of `time`.
        private enum TimeKey: String, WireKeys {
            case iso, epochMillis, local, utcOffsetMinutes
            static let table = WireKeyTable(Self.self)
        }

        /// The members of a coded value.
        private enum CodedKey: String, WireKeys {
            case code, name
            static let table = WireKeyTable(Self.self)
        }

        /// The members of `context` a compact reading keeps.
        private enum ContextKey: String, WireKeys {
            case meal
            static let table = WireKeyTable(Self.self)
        }
    }

    /// One reply of `FollowReadings(compact: true)`, batched (`readings`) or not (`reading`), read
    /// straight from its parameters' bytes: every reading with its cursor, in commit order.
    public struct CompactFollowReply: Sendable {
        /// The (last) reading's place in the commit order: `after` for the next call.
        public var cursor: Int64
        /// Every reading of the reply with its cursor, in commit order.
        public var readings: [(cursor: Int64, reading: CompactReading)]
        /// The database the cursors are positions in (absent from a daemon before identities).
        public var databaseId: String?

        /// A reply with every field given.
        public init(cursor: Int64, readings: [(cursor: Int64, reading: CompactReading)], databaseId: String? = nil) {
            self.cursor = cursor
            self.readings = readings
            self.databaseId = databaseId
        }

        /// Reads the reply's parameters object at the reader's position (see ``CompactReading/init(reading:)``
        /// for what is rejected). A reply with neither `reading` nor `readings` is an error.
        public init(reading reader: inout JSONReader) throws(WireError) {
            (self.cursor, self.readings, self.databaseId) = try Self.read(&reader) { (r: inout JSONReader) throws(WireError) in
                try CompactReading(reading: &r)
            }
        }

        /// Reads a reply's parameters object at the reader's position as ``init(reading:)`` does,
        /// each reading as text (``CompactReading/Text``, for a sink that passes the text on):
        /// every reading with its cursor, in commit order.
        public static func texts(_ reader: inout JSONReader) throws(WireError) -> [(cursor: Int64, reading: CompactReading.Text)] {
            try Self.textReply(&reader).readings
        }

        /// ``texts(_:)`` and the reply's `databaseId`.
        public static func textReply(
            _ reader: inout JSONReader
        ) throws(WireError) -> (databaseId: String?, readings: [(cursor: Int64, reading: CompactReading.Text)]) {
            let reply = try Self.read(&reader) { (r: inout JSONReader) throws(WireError) in try CompactReading.Text(reading: &r) }
            return (reply.databaseId, reply.readings)
        }

        /// The reply's cursor and its readings, each read by `item` (specialized here for the
        /// two public readers).
        private static func read<Item>(
            _ reader: inout JSONReader, _ item: (inout JSONReader) throws(WireError) -> Item
        ) throws(WireError) -> (cursor: Int64, readings: [(cursor: Int64, reading: Item)], databaseId: String?) {
            var cursor: Int64?, single: Item?, list: [(cursor: Int64, reading: Item)]?, databaseId: String?
            try WireByteFields.object(&reader, Key.self) { (member: Key, r: inout JSONReader) throws(WireError) in
                let key = member.rawValue
                switch member {
                case .cursor: cursor = try WireByteFields.int(key, &r)
                case .reading: single = try WireByteFields.optionalNested(key, &r, item)
                case .readings:
                    list = try WireByteFields.optionalNested(key, &r) { (r: inout JSONReader) throws(WireError) in try Self.followed(&r, item) }
                case .databaseId:
                    databaseId = try WireByteFields.optional(key, &r) { (r: inout JSONReader) throws(JSONParseError) -> String in
                        try r.readRepeatedString()
                    }
                }
            }
            let last = try WireByteFields.present(cursor, "cursor")
            if let list { return (last, list, databaseId) }
            if let single { return (last, [(last, single)], databaseId) }
            throw WireError(path: [], reason: "a FollowReadings reply without reading or readings")
        }

        /// Reads the reply from the bytes of its parameters object (nothing else may follow).
        public init(bytes: [UInt8]) throws(WireError) {
            var reader = JSONReader(bytes)
            try self.init(reading: &reader)
            try WireByteFields.end(&reader)
        }

        /// The `readings` array: each `{"cursor","reading"}` object with its reading decoded by `item`;
        /// errors name the `[index]`.
        private static func followed<Item>(
            _ reader: inout JSONReader, _ item: (inout JSONReader) throws(WireError) -> Item
        ) throws(WireError) -> [(cursor: Int64, reading: Item)] {
            var out: [(cursor: Int64, reading: Item)] = []
            try WireByteFields.array(&reader) { (index: Int, r: inout JSONReader) throws(WireError) in
                var cursor: Int64?, reading: Item?
                do throws(WireError) {
                    try WireByteFields.object(&r, FollowedKey.self) { (member: FollowedKey, r: inout JSONReader) throws(WireError) in
                        switch member {
                        case .cursor: cursor = try WireByteFields.int(member.rawValue, &r)
                        case .reading: reading = try WireByteFields.nested(member.rawValue, &r, item)
                        }
                    }
                    out.append((try WireByteFields.present(cursor, "cursor"), try WireByteFields.present(reading, "reading")))
                } catch {
                    throw error.within("[\(index)]")
                }
            }
            return out
        }

        /// Appends a batched reply's parameters, `{"cursor": <last>, "readings": [{"cursor", "reading"}...]}`,
        /// for readings already written by ``CompactReading/write(into:)``: `write(i, &out)` writes the
        /// `i`-th reading.
        public static func write(
            cursors: [Int64], databaseId: String? = nil, into out: inout [UInt8], reading write: (Int, inout [UInt8]) -> Void
        ) {
            out.append(contentsOf: #"{"cursor":"#.utf8)
            JSONValue.int(cursors.last ?? 0).write(into: &out)
            out.append(contentsOf: #","readings":["#.utf8)
            for (index, cursor) in cursors.enumerated() {
                out.append(contentsOf: index == 0 ? #"{"cursor":"#.utf8 : #",{"cursor":"#.utf8)
                JSONValue.int(cursor).write(into: &out)
                out.append(contentsOf: #","reading":"#.utf8)
                write(index, &out)
                out.append(UInt8(ascii: "}"))
            }
            out.append(UInt8(ascii: "]"))
            if let databaseId {
                out.append(contentsOf: #","databaseId":"#.utf8)
                JSONValue.string(databaseId).write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }

        /// The members of a compact follow reply.
        private enum Key: String, WireKeys {
            case cursor, reading, readings, databaseId
            static let table = WireKeyTable(Self.self)
        }

        /// The members of a batched reading.
        private enum FollowedKey: String, WireKeys {
            case cursor, reading
            static let table = WireKeyTable(Self.self)
        }
    }
}

/// The members a byte decoder reads: an enum whose raw values are the keys, with its table
/// (`static let table = WireKeyTable(Self.self)`).
protocol WireKeys: RawRepresentable<String>, CaseIterable, Sendable {
    /// The key table of the enum, made once.
    static var table: WireKeyTable<Self> { get }
}

/// The keys of a ``WireKeys`` enum, looked up on their bytes (``JSONReader/nextKey(in:)``).
struct WireKeyTable<Key: WireKeys>: Sendable {
    /// The raw values, for ``JSONReader/nextKey(in:expected:)``.
    let keys: JSONKeys
    /// The cases, in the same order.
    let cases: [Key]

    /// The table of every case of `type`, in declaration order.
    init(_ type: Key.Type) {
        self.cases = Array(Key.allCases)
        self.keys = JSONKeys(self.cases.map(\.rawValue))
    }
}

/// Reading an object's members from bytes for the byte decoders of the wire types: errors carry
/// the field's path, as ``WireFields``' do.
enum WireByteFields {
    /// A JSON error as a wire error (no path: the caller adds it).
    static func parse(_ error: JSONParseError) -> WireError { WireError(path: [], reason: error.description) }

    /// The members of the object at the reader, for a decoder whose keys are `Key`'s:
    /// `member(key, &reader)` reads a known member's value; other keys are skipped. A key given
    /// twice is an error.
    static func object<Key: WireKeys>(
        _ reader: inout JSONReader, _ keys: Key.Type, _ member: (Key, inout JSONReader) throws(WireError) -> Void
    ) throws(WireError) {
        let table = Key.table
        var seen: UInt64 = 0
        var others: [String] = []
        // The writers put the keys in their declared order: the one after the last is tried first.
        var expected = 0
        do throws(JSONParseError) { try reader.beginObject() } catch { throw Self.parse(error) }
        while true {
            let next: JSONKey?
            do throws(JSONParseError) { next = try reader.nextKey(in: table.keys, expected: expected) } catch { throw Self.parse(error) }
            switch next {
            case nil:
                return
            case .known(let index):
                expected = index + 1
                let key = table.cases[index]
                guard seen & (1 << UInt64(index)) == 0 else { throw WireError(path: [key.rawValue], reason: "duplicate key") }
                seen |= 1 << UInt64(index)
                try member(key, &reader)
            case .other(let key):
                guard !others.contains(key) else { throw WireError(path: [key], reason: "duplicate key") }
                others.append(key)
                do throws(JSONParseError) { _ = try reader.readValue() } catch { throw Self.parse(error).within(key) }
            }
        }
    }

    /// The elements of the array at the reader.
    static func array(_ reader: inout JSONReader, _ element: (Int, inout JSONReader) throws(WireError) -> Void) throws(WireError) {
        do throws(JSONParseError) { try reader.beginArray() } catch { throw Self.parse(error) }
        var index = 0
        while true {
            let more: Bool
            do throws(JSONParseError) { more = try reader.nextElement() } catch { throw Self.parse(error).within("[\(index)]") }
            guard more else { return }
            try element(index, &reader)
            index += 1
        }
    }

    /// A required scalar: not null.
    static func required<T>(
        _ key: String, _ reader: inout JSONReader, _ read: (inout JSONReader) throws(JSONParseError) -> T
    ) throws(WireError) -> T {
        if try Self.null(key, &reader) { throw WireError(path: [key], reason: "missing required field") }
        do throws(JSONParseError) { return try read(&reader) } catch { throw Self.parse(error).within(key) }
    }

    /// An optional scalar: nil for null.
    static func optional<T>(
        _ key: String, _ reader: inout JSONReader, _ read: (inout JSONReader) throws(JSONParseError) -> T
    ) throws(WireError) -> T? {
        if try Self.null(key, &reader) { return nil }
        do throws(JSONParseError) { return try read(&reader) } catch { throw Self.parse(error).within(key) }
    }

    /// A required object or array read by a decoder of its own.
    static func nested<T>(
        _ key: String, _ reader: inout JSONReader, _ read: (inout JSONReader) throws(WireError) -> T
    ) throws(WireError) -> T {
        if try Self.null(key, &reader) { throw WireError(path: [key], reason: "missing required field") }
        do throws(WireError) { return try read(&reader) } catch { throw error.within(key) }
    }

    /// An optional object or array read by a decoder of its own: nil for null.
    static func optionalNested<T>(
        _ key: String, _ reader: inout JSONReader, _ read: (inout JSONReader) throws(WireError) -> T
    ) throws(WireError) -> T? {
        if try Self.null(key, &reader) { return nil }
        do throws(WireError) { return try read(&reader) } catch { throw error.within(key) }
    }

    /// A required integer.
    static func int(_ key: String, _ reader: inout JSONReader) throws(WireError) -> Int64 {
        try Self.required(key, &reader) { (r: inout JSONReader) throws(JSONParseError) -> Int64 in try r.readInt() }
    }

    /// A required string that repeats from reading to reading in one reply (a meter, a
    /// name): see ``JSONReader/readRepeatedString()``.
    static func repeatedString(_ key: String, _ reader: inout JSONReader) throws(WireError) -> String {
        try Self.required(key, &reader) { (r: inout JSONReader) throws(JSONParseError) -> String in try r.readRepeatedString() }
    }

    /// `[]string` of names that repeat from reading to reading (flags).
    static func strings(_ reader: inout JSONReader) throws(JSONParseError) -> [String] {
        var out: [String] = []
        try reader.beginArray()
        while try reader.nextElement() { out.append(try reader.readRepeatedString()) }
        return out
    }

    /// Reads a null value when one comes (true).
    static func null(_ key: String, _ reader: inout JSONReader) throws(WireError) -> Bool {
        do throws(JSONParseError) { return try reader.readNull() } catch { throw Self.parse(error).within(key) }
    }

    /// `value`, or "missing required field" at `key`.
    static func present<T>(_ value: T?, _ key: String) throws(WireError) -> T {
        guard let value else { throw WireError(path: [key], reason: "missing required field") }
        return value
    }

    /// Only white space may follow.
    static func end(_ reader: inout JSONReader) throws(WireError) {
        do throws(JSONParseError) { try reader.end() } catch { throw Self.parse(error) }
    }
}
