import JSON
import SugarWire

/// One reply of `ListReadings` (full reading objects) read straight from its bytes for the json and
/// ndjson exports, which pass each object on as it is: every reading's compact JSON text as sugard
/// wrote it (the bytes `JSONValue.write` gives for the object, which is what sugarctl wrote from the
/// parsed object before), checked as JSON on the way, without a ``JSONValue`` tree per reading.
struct ReadingTextsPage: Sendable {
    /// The readings' texts, one after another; `ends[i]` is where the i-th ends.
    var bytes: [UInt8] = []
    var ends: [Int] = []
    var truncated: Bool?
    var unit: Wire.Unit?

    var count: Int { self.ends.count }

    /// Reads the reply's parameters object at the reader's position.
    init(reading reader: inout JSONReader) throws {
        try reader.beginObject()
        while let key = try reader.nextKey() {
            switch key {
            case "readings":
                try reader.beginArray()
                while try reader.nextElement() {
                    let range = try Self.valueText(&reader)
                    reader.appendText(range, to: &self.bytes)
                    self.ends.append(self.bytes.count)
                }
            case "truncated": self.truncated = try reader.readNull() ? nil : try reader.readBool()
            case "unit":
                let name = try reader.readString()
                guard let unit = Wire.Unit(rawValue: name) else { throw reader.error("unknown unit '\(name)'") }
                self.unit = unit
            default: _ = try reader.readValue()
            }
        }
        guard self.unit != nil else { throw reader.error("a ListReadings reply without unit") }
    }

    /// Where the value at the reader lies (read and checked, nothing built but its keys).
    static func valueText(_ reader: inout JSONReader) throws(JSONParseError) -> Range<Int> {
        switch reader.nextKind() {
        case "an object":
            let start = reader.offset
            try reader.beginObject()
            while try reader.nextKey() != nil { _ = try Self.valueText(&reader) }
            return start..<reader.offset
        case "an array":
            let start = reader.offset
            try reader.beginArray()
            while try reader.nextElement() { _ = try Self.valueText(&reader) }
            return start..<reader.offset
        case "a string": return try reader.readStringText()
        case "a number": return try reader.readNumberText()
        case "a boolean":
            let start = reader.offset
            _ = try reader.readBool()
            return start..<reader.offset
        default:
            let start = reader.offset
            guard try reader.readNull() else { throw reader.error("expected a value, got \(reader.nextKind())") }
            return start..<reader.offset
        }
    }

    /// Each reading's text.
    func forEach(_ body: (UnsafeBufferPointer<UInt8>) -> Void) {
        self.bytes.withUnsafeBufferPointer { all in
            var start = 0
            for end in self.ends {
                body(UnsafeBufferPointer(rebasing: all[start..<end]))
                start = end
            }
        }
    }

    /// Appends a value's compact JSON text (no white space outside strings, as `JSONValue.write`
    /// writes it) indented as `writePretty(into:indent:)` writes the same value `indent` levels deep.
    static func appendPretty(_ text: UnsafeBufferPointer<UInt8>, indent: Int, into out: inout [UInt8]) {
        var depth = indent
        func newline() {
            out.append(UInt8(ascii: "\n"))
            for _ in 0..<(depth * 2) { out.append(UInt8(ascii: " ")) }
        }
        var i = 0
        while i < text.count {
            let c = text[i]
            switch c {
            case UInt8(ascii: "\""):
                // A string, escapes and all, as it is.
                let start = i
                i += 1
                while i < text.count, text[i] != UInt8(ascii: "\"") { i += text[i] == UInt8(ascii: "\\") ? 2 : 1 }
                i = min(i + 1, text.count)
                out.append(contentsOf: UnsafeBufferPointer(rebasing: text[start..<i]))
                continue
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                let close = c == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
                out.append(c)
                if i + 1 < text.count, text[i + 1] == close {
                    out.append(close)
                    i += 2
                    continue
                }
                depth += 1
                newline()
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                newline()
                out.append(c)
            case UInt8(ascii: ","):
                out.append(c)
                newline()
            case UInt8(ascii: ":"):
                out.append(c)
                out.append(UInt8(ascii: " "))
            default: out.append(c)
            }
            i += 1
        }
    }
}
