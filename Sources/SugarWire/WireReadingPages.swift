public import JSON

extension Wire {
    /// One reply of `ListReadings` with `csv: true`, read straight from its bytes: the page's rows
    /// of the CSV export (``ReadingExport/writeCSVRow(_:into:)``, no header) in `csv`, how many in
    /// `csvRows`, and `readings` empty. sugarctl writes `text` as it is.
    public struct CSVPage: Sendable {
        public var text: String
        public var rows: Int64
        public var truncated: Bool?
        public var unit: Unit

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
        public var readings: [CompactReading]
        public var truncated: Bool?
        public var unit: Unit

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
