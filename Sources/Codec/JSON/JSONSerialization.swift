extension JSONValue {
    /// The value as compact JSON text (no white space).
    public func serialized() -> String {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        self.write(into: &out, pretty: false, indent: 0)
        return String(decoding: out, as: UTF8.self)
    }

    /// The value as indented JSON text (two spaces per level), for people to read.
    public func prettySerialized() -> String {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        self.write(into: &out, pretty: true, indent: 0)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the compact UTF-8 encoding of the value to `out`.
    public func write(into out: inout [UInt8]) {
        self.write(into: &out, pretty: false, indent: 0)
    }

    /// Appends the indented encoding of the value as it appears `indent` levels deep in a
    /// ``prettySerialized()`` document (an element of a streamed array is one level deep).
    public func writePretty(into out: inout [UInt8], indent: Int) {
        self.write(into: &out, pretty: true, indent: indent)
    }

    /// Appends compact JSON text (as ``write(into:)`` writes it: no white space outside strings)
    /// indented as ``writePretty(into:indent:)`` writes the same value, without parsing it again:
    /// for values passed on as the text they came as.
    public static func writePretty(compactText text: UnsafeBufferPointer<UInt8>, indent: Int, into out: inout [UInt8]) {
        var depth = indent
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
                Self.newline(into: &out, indent: depth)
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                Self.newline(into: &out, indent: depth)
                out.append(c)
            case UInt8(ascii: ","):
                out.append(c)
                Self.newline(into: &out, indent: depth)
            case UInt8(ascii: ":"):
                out.append(c)
                out.append(UInt8(ascii: " "))
            default: out.append(c)
            }
            i += 1
        }
    }

    /// Appends `strings` as a compact JSON array of strings (what `.array(strings.map { .string($0) })`
    /// writes), without making the array of values.
    public static func write(strings: [String], into out: inout [UInt8]) {
        out.append(UInt8(ascii: "["))
        for (index, string) in strings.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            Self.writeString(string, into: &out)
        }
        out.append(UInt8(ascii: "]"))
    }

    /// Appends a JSON string whose text is the UTF-8 `bytes` (what `.string(String(decoding: bytes,
    /// as: UTF8.self))` writes for valid UTF-8), without making the String: for text written into
    /// bytes first, such as a page of CSV rows.
    public static func write(stringUTF8 bytes: [UInt8], into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        bytes.withUnsafeBufferPointer { Self.writeEscaped($0, into: &out) }
        out.append(UInt8(ascii: "\""))
    }

    /// The one writer behind every public entry point: compact, or indented two spaces per level
    /// starting `indent` levels deep. Empty arrays and objects are written `[]` and `{}` either way.
    private func write(into out: inout [UInt8], pretty: Bool, indent: Int) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): Self.writeInt(i, into: &out)
        case .double(let d): Self.writeDouble(d, into: &out)
        case .string(let s): Self.writeString(s, into: &out)
        case .array(let items):
            if items.isEmpty {
                out.append(contentsOf: "[]".utf8)
                return
            }
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                if pretty { Self.newline(into: &out, indent: indent + 1) }
                item.write(into: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty { Self.newline(into: &out, indent: indent) }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            if object.entries.isEmpty {
                out.append(contentsOf: "{}".utf8)
                return
            }
            out.append(UInt8(ascii: "{"))
            for (index, entry) in object.entries.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                if pretty { Self.newline(into: &out, indent: indent + 1) }
                Self.writeString(entry.key, into: &out)
                out.append(UInt8(ascii: ":"))
                if pretty { out.append(UInt8(ascii: " ")) }
                entry.value.write(into: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty { Self.newline(into: &out, indent: indent) }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// A line break followed by `indent` levels of two spaces.
    private static func newline(into out: inout [UInt8], indent: Int) {
        out.append(UInt8(ascii: "\n"))
        for _ in 0..<(indent * 2) { out.append(UInt8(ascii: " ")) }
    }

    /// Appends a double as JSON: `null` when not finite, integral values below 2^53 as integers,
    /// others in Swift's shortest round-trip spelling.
    private static func writeDouble(_ d: Double, into out: inout [UInt8]) {
        guard d.isFinite else {
            // JSON has no NaN or infinity.
            out.append(contentsOf: "null".utf8)
            return
        }
        if d.rounded() == d, abs(d) < 9.007_199_254_740_992e15 {
            // Integral values print without a fraction ("88", not "88.0").
            Self.writeInt(Int64(d), into: &out)
            return
        }
        // Swift prints the shortest text that reads back as the same Double; it may use an
        // exponent ("1e-05"), which JSON accepts.
        out.append(contentsOf: d.description.utf8)
    }

    /// Appends an integer's decimal digits (what `String(value)` spells), without making a string.
    private static func writeInt(_ value: Int64, into out: inout [UInt8]) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = digits.count
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start...]))
        }
    }

    /// Lower-case hex digits for `\u00XX` escapes.
    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `s` quoted: `"` and `\` escaped, `\n` `\r` `\t` as such, other control characters as
    /// `\u00XX`; everything else (including `/` and non-ASCII) copied as UTF-8.
    private static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most strings need no escape: one scan, then one copy.
        let copied =
            s.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
                guard !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else { return false }
                out.append(contentsOf: bytes)
                return true
            } ?? false
        if copied {
            out.append(UInt8(ascii: "\""))
            return
        }
        var text = s
        text.withUTF8 { Self.writeEscaped($0, into: &out) }
        out.append(UInt8(ascii: "\""))
    }

    /// Appends `bytes` as the inside of a JSON string: runs that need no escape copied at once, `"`,
    /// `\\` and control characters escaped.
    private static func writeEscaped(_ bytes: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        var run = 0
        for index in 0..<bytes.count {
            let byte = bytes[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<index]))
            run = index + 1
            out.append(UInt8(ascii: "\\"))
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(byte)
            case 0x0A: out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(UInt8(ascii: "r"))
            case 0x09: out.append(UInt8(ascii: "t"))
            default:
                out.append(contentsOf: "u00".utf8)
                out.append(Self.hexDigits[Int(byte >> 4)])
                out.append(Self.hexDigits[Int(byte & 0x0F)])
            }
        }
        out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<bytes.count]))
    }
}
