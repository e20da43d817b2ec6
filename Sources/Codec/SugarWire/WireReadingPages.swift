import GlucoseProfile
public import JSON

extension Wire {
    /// One reply of `ListReadings` with `csv: true`, read straight from its bytes: the page's rows
    /// of the CSV export (``ReadingExport/writeCSVRow(_:into:)``, no header) in `csv`, how many in
    /// `csvRows`, and `readings` empty. sugarctl writes `text` as it is.
    public struct CSVPage: Sendable {
        /// `csv`: the page's CSV rows, without the header, as sugard wrote them.
        public var text: String
        /// `csvRows`: how many rows `text` holds.
        public var rows: Int64
        /// In the last reply: the limit cut the list.
        public var truncated: Bool?
        /// The configured display unit.
        public var unit: Unit

        /// A page with every parameter given.
        public init(text: String, rows: Int64, truncated: Bool?, unit: Unit) {
            self.text = text
            self.rows = rows
            self.truncated = truncated
            self.unit = unit
        }

        /// Reads the reply's parameters object at the reader's position.
        public init(reading reader: inout JSONReader) throws(WireError) {
            var text: String?, rows: Int64?, truncated: Bool?, unit: Unit?
            try WireByteFields.object(&reader, PageKey.self) { (member: PageKey, r: inout JSONReader) throws(WireError) in
                let key = member.rawValue
                switch member {
                case .readings:
                    try WireByteFields.array(&r) { (_: Int, r: inout JSONReader) throws(WireError) in
                        throw WireError(path: [key], reason: "a csv reply carries its readings in csv")
                    }
                case .truncated: truncated = try WireByteFields.optional(key, &r) { (r: inout JSONReader) throws(JSONParseError) in try r.readBool() }
                case .unit: unit = try Self.unit(key, &r)
                case .csv: text = try WireByteFields.required(key, &r) { (r: inout JSONReader) throws(JSONParseError) in try r.readString() }
                case .csvRows: rows = try WireByteFields.int(key, &r)
                }
            }
            self.init(
                text: try WireByteFields.present(text, PageKey.csv.rawValue), rows: try WireByteFields.present(rows, PageKey.csvRows.rawValue),
                truncated: truncated, unit: try WireByteFields.present(unit, PageKey.unit.rawValue))
        }

        /// Appends the reply's parameters for rows already written into `rows` (`count` of them).
        public static func write(rows: [UInt8], count: Int, truncated: Bool?, unit: Unit, into out: inout [UInt8]) {
            out.append(contentsOf: #"{"readings":[],"csv":"#.utf8)
            JSONValue.write(stringUTF8: rows, into: &out)
            out.append(contentsOf: #","csvRows":"#.utf8)
            JSONValue.int(Int64(count)).write(into: &out)
            Wire.writePageEnd(truncated: truncated, unit: unit, into: &out)
        }

        static func unit(_ key: String, _ reader: inout JSONReader) throws(WireError) -> Unit {
            let name = try WireByteFields.repeatedString(key, &reader)
            guard let unit = Unit(rawValue: name) else { throw WireError(path: [key], reason: "unknown unit '\(name)'") }
            return unit
        }
    }

    /// One reply of `ListReadings` with `compact: true`, read straight from its bytes (no
    /// ``JSONValue`` per reading): the readings as ``CompactReading``s.
    public struct CompactPage: Sendable {
        /// The page's readings, in the order sent.
        public var readings: [CompactReading]
        /// In the last reply: the limit cut the list.
        public var truncated: Bool?
        /// The configured display unit.
        public var unit: Unit

        /// A page with every parameter given.
        public init(readings: [CompactReading], truncated: Bool?, unit: Unit) {
            self.readings = readings
            self.truncated = truncated
            self.unit = unit
        }

        /// Reads the reply's parameters object at the reader's position.
        public init(reading reader: inout JSONReader) throws(WireError) {
            var readings: [CompactReading]?, truncated: Bool?, unit: Unit?
            try WireByteFields.object(&reader, PageKey.self) { (member: PageKey, r: inout JSONReader) throws(WireError) in
                let key = member.rawValue
                switch member {
                case .readings:
                    var list: [CompactReading] = []
                    do throws(WireError) {
                        try WireByteFields.array(&r) { (index: Int, r: inout JSONReader) throws(WireError) in
                            do throws(WireError) { list.append(try CompactReading(reading: &r)) } catch { throw error.within("[\(index)]") }
                        }
                    } catch {
                        throw error.within(key)
                    }
                    readings = list
                case .truncated: truncated = try WireByteFields.optional(key, &r) { (r: inout JSONReader) throws(JSONParseError) in try r.readBool() }
                case .unit: unit = try CSVPage.unit(key, &r)
                case .csv, .csvRows:
                    do throws(JSONParseError) { _ = try r.readValue() } catch { throw WireByteFields.parse(error).within(key) }
                }
            }
            self.init(
                readings: try WireByteFields.present(readings, PageKey.readings.rawValue), truncated: truncated,
                unit: try WireByteFields.present(unit, PageKey.unit.rawValue))
        }
    }

    /// One reply of `ListReadings` with full reading objects, read straight from its bytes for an
    /// export that passes each object on as it is (sugarctl's json and ndjson): every reading's
    /// compact JSON text as sugard wrote it (the bytes ``JSONValue/write(into:)`` gives for the
    /// object), checked as JSON on the way, without a ``JSONValue`` tree per reading.
    public struct ReadingTextPage: Sendable {
        /// The readings' texts one after another; the i-th ends at `ends[i]`.
        public var bytes: [UInt8] = []
        /// Where each reading's text ends in `bytes` (an exclusive end offset); ascending.
        public var ends: [Int] = []
        /// In the last reply: the limit cut the list.
        public var truncated: Bool?
        /// The configured display unit.
        public var unit: Unit

        /// How many readings the page holds.
        public var count: Int { self.ends.count }

        /// Reads the reply's parameters object at the reader's position.
        public init(reading reader: inout JSONReader) throws(WireError) {
            var bytes: [UInt8] = [], ends: [Int] = [], sawReadings = false, truncated: Bool?, unit: Unit?
            try WireByteFields.object(&reader, PageKey.self) { (member: PageKey, r: inout JSONReader) throws(WireError) in
                let key = member.rawValue
                switch member {
                case .readings:
                    sawReadings = true
                    try WireByteFields.array(&r) { (index: Int, r: inout JSONReader) throws(WireError) in
                        do throws(JSONParseError) {
                            r.appendText(try r.readValueText(), to: &bytes)
                        } catch {
                            throw WireByteFields.parse(error).within("[\(index)]").within(key)
                        }
                        ends.append(bytes.count)
                    }
                case .truncated: truncated = try WireByteFields.optional(key, &r) { (r: inout JSONReader) throws(JSONParseError) in try r.readBool() }
                case .unit: unit = try CSVPage.unit(key, &r)
                case .csv, .csvRows:
                    do throws(JSONParseError) { _ = try r.readValue() } catch { throw WireByteFields.parse(error).within(key) }
                }
            }
            guard sawReadings else { throw WireError(path: [PageKey.readings.rawValue], reason: "missing required field") }
            self.bytes = bytes
            self.ends = ends
            self.truncated = truncated
            self.unit = try WireByteFields.present(unit, PageKey.unit.rawValue)
        }

        /// Each reading's text, in order.
        public func withEachText(_ body: (UnsafeBufferPointer<UInt8>) -> Void) {
            self.bytes.withUnsafeBufferPointer { all in
                var start = 0
                for end in self.ends {
                    body(UnsafeBufferPointer(rebasing: all[start..<end]))
                    start = end
                }
            }
        }
    }

    /// The keys of a `ListReadings` reply, in the order the daemon writes them.
    enum PageKey: String, WireKeys {
        case readings, csv, csvRows, truncated, unit
        static let table = WireKeyTable(Self.self)
    }

    /// Appends a `ListReadings` reply's `truncated` (when given), `unit` and the closing brace.
    public static func writePageEnd(truncated: Bool?, unit: Unit, into out: inout [UInt8]) {
        if let truncated { out.append(contentsOf: (truncated ? #","truncated":true"# : #","truncated":false"#).utf8) }
        out.append(contentsOf: #","unit":"#.utf8)
        unit.json.write(into: &out)
        out.append(UInt8(ascii: "}"))
    }
}
