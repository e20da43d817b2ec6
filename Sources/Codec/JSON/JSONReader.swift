#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads one JSON text value by value, without building a ``JSONValue`` tree: for decoders of a
/// known shape on a hot path (a typed reply read straight from the socket's bytes).
///
/// It accepts exactly what ``JSONValue/init(parsing:limits:)`` accepts (the same string, number
/// and literal rules, duplicate keys rejected by the caller's decoder) and throws the same
/// ``JSONParseError`` with the byte offset where the text went wrong, or where a value was not of
/// the type the decoder asked for ("expected a string, got a number").
///
/// ```swift
/// var reader = JSONReader(bytes)
/// try reader.beginObject()
/// while let key = try reader.nextKey() {
///     switch key {
///     case "id": id = try reader.readInt()
///     default: _ = try reader.readValue()   // a key this decoder does not know
///     }
/// }
/// try reader.end()
/// ```
public struct JSONReader {
    /// The cursor and limits; the reader adds the container bookkeeping.
    private var parser: JSONParser
    /// Containers opened and not closed yet.
    private var depth = 0
    /// The innermost open container has given no member yet.
    private var first = false
    /// The strings ``readRepeatedString()`` made so far (at most ``repeatedLimit``).
    private var repeated: [String] = []
    /// How many distinct strings ``readRepeatedString()`` remembers; later new ones are not kept.
    private static var repeatedLimit: Int { 32 }

    /// A reader at the start of `bytes`, counting every value and key against `limits`.
    public init(_ bytes: [UInt8], limits: JSONParseLimits = JSONParseLimits()) {
        self.parser = JSONParser(bytes: bytes, limits: limits)
    }

    /// The byte offset of the next value.
    public var offset: Int { self.parser.index }

    /// An error at the current offset.
    public func error(_ reason: String) -> JSONParseError { self.parser.error(reason) }

    /// What the next value is, for messages ("a string", "an object", "the end of input").
    public mutating func nextKind() -> String {
        self.parser.skipWhitespace()
        guard self.parser.index < self.parser.bytes.count else { return "the end of input" }
        switch self.parser.bytes[self.parser.index] {
        case UInt8(ascii: "{"): return "an object"
        case UInt8(ascii: "["): return "an array"
        case UInt8(ascii: "\""): return "a string"
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return "a boolean"
        case UInt8(ascii: "n"): return "null"
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return "a number"
        default: return "an unexpected character"
        }
    }

    /// Whether the next value starts with `byte` (white space skipped).
    private mutating func next(is byte: UInt8) -> Bool {
        self.parser.skipWhitespace()
        return self.parser.index < self.parser.bytes.count && self.parser.bytes[self.parser.index] == byte
    }

    /// Whether the next value starts with a byte in `bytes` (white space skipped).
    private mutating func next(in bytes: ClosedRange<UInt8>) -> Bool {
        self.parser.skipWhitespace()
        return self.parser.index < self.parser.bytes.count && bytes.contains(self.parser.bytes[self.parser.index])
    }

    /// Throws "expected `what`, got …" unless the next value starts with `byte`; consumes nothing.
    private mutating func expect(_ byte: UInt8, _ what: String) throws(JSONParseError) {
        guard self.next(is: byte) else {
            throw self.parser.error("expected \(what), got \(self.nextKind())")
        }
    }

    /// Reads `null` when it comes next (true), else reads nothing (false).
    public mutating func readNull() throws(JSONParseError) -> Bool {
        self.parser.skipWhitespace()
        guard self.parser.index < self.parser.bytes.count, self.parser.bytes[self.parser.index] == UInt8(ascii: "n") else {
            return false
        }
        try self.parser.countElement()
        try self.parser.expectLiteral("null")
        return true
    }

    /// A string value, escapes decoded; throws when the next value is not a string.
    public mutating func readString() throws(JSONParseError) -> String {
        try self.expect(UInt8(ascii: "\""), "a string")
        try self.parser.countElement()
        return try self.parser.parseString()
    }

    /// A string as ``readString()`` reads it, for a value that repeats within one text (a
    /// meter's address, an enum's name): an unescaped string equal to one this reader made
    /// before is that `String` again, matched on its bytes, not a new one.
    public mutating func readRepeatedString() throws(JSONParseError) -> String {
        try self.expect(UInt8(ascii: "\""), "a string")
        try self.parser.countElement()
        let start = self.parser.index + 1
        let repeated = self.repeated
        let found: (string: String?, end: Int)? = self.parser.bytes.withUnsafeBufferPointer { bytes in
            guard let end = Self.plainStringEnd(bytes, from: start) else { return nil }
            let text = UnsafeBufferPointer(rebasing: bytes[start..<end])
            for string in repeated where string.utf8.count == text.count {
                let equal = string.utf8.withContiguousStorageIfAvailable { stored in
                    text.isEmpty || memcmp(stored.baseAddress!, text.baseAddress!, text.count) == 0
                }
                if equal == true { return (string, end) }
            }
            return (nil, end)
        }
        guard let found else { return try self.parser.parseString() }
        self.parser.index = found.end + 1
        if let string = found.string { return string }
        let string = self.parser.bytes.withUnsafeBufferPointer { bytes in
            String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<found.end]), as: UTF8.self)
        }
        if self.repeated.count < Self.repeatedLimit { self.repeated.append(string) }
        return string
    }

    /// A string as ``readString()`` accepts it, given as where its JSON text lies (quotes
    /// included) instead of made into a `String`: for a value passed on as it is
    /// (``appendText(_:to:)``).
    public mutating func readStringText() throws(JSONParseError) -> Range<Int> {
        try self.expect(UInt8(ascii: "\""), "a string")
        try self.parser.countElement()
        let start = self.parser.index
        let plain = self.parser.bytes.withUnsafeBufferPointer { bytes in Self.plainStringEnd(bytes, from: start + 1) }
        if let end = plain {
            self.parser.index = end + 1
        } else {
            _ = try self.parser.parseString()
        }
        return start..<self.parser.index
    }

    /// A number as ``readDouble()`` accepts it, given as where its text lies. Its value is
    /// computed only where the text alone cannot tell it is in range (an exponent, or hundreds
    /// of digits).
    public mutating func readNumberText() throws(JSONParseError) -> Range<Int> {
        try self.beginNumber()
        let start = self.parser.index
        let scanned = try self.parser.scanNumber()
        if scanned.hasExponent || self.parser.index - start > 300 {
            self.parser.index = start
            _ = try self.parser.parseNumber()
        }
        return start..<self.parser.index
    }

    /// Any value as ``readValue()`` accepts it, given as where its JSON text lies instead of made
    /// into a tree (only object keys are made into strings on the way): for a value passed on as
    /// it is (``appendText(_:to:)``).
    public mutating func readValueText() throws(JSONParseError) -> Range<Int> {
        switch self.nextKind() {
        case "an object":
            let start = self.parser.index
            try self.beginObject()
            while try self.nextKey() != nil { _ = try self.readValueText() }
            return start..<self.parser.index
        case "an array":
            let start = self.parser.index
            try self.beginArray()
            while try self.nextElement() { _ = try self.readValueText() }
            return start..<self.parser.index
        case "a string": return try self.readStringText()
        case "a number": return try self.readNumberText()
        case "a boolean":
            let start = self.parser.index
            _ = try self.readBool()
            return start..<self.parser.index
        default:
            let start = self.parser.index
            guard try self.readNull() else { throw self.parser.error("expected a value, got \(self.nextKind())") }
            return start..<self.parser.index
        }
    }

    /// Appends the text at `range` (from ``readStringText()``, ``readNumberText()`` or two
    /// ``offset``s) to `out`, byte for byte.
    public func appendText(_ range: Range<Int>, to out: inout [UInt8]) {
        out.append(contentsOf: self.parser.bytes[range])
    }

    /// A reader of the same bytes at `range` (from ``readStringText()`` or ``readNumberText()``),
    /// to read that value again as a value.
    public func reading(_ range: Range<Int>) -> JSONReader {
        var reader = self
        reader.parser.index = range.lowerBound
        reader.depth = 0
        reader.first = false
        return reader
    }

    /// Whether the text at `range` is `text`, byte for byte.
    public func text(_ range: Range<Int>, is text: StaticString) -> Bool {
        guard range.count == text.utf8CodeUnitCount else { return false }
        return self.parser.bytes.withUnsafeBufferPointer { bytes in
            range.isEmpty || memcmp(bytes.baseAddress! + range.lowerBound, text.utf8Start, range.count) == 0
        }
    }

    /// An integer (as ``JSONValue/intValue`` takes it: a number with no fractional part that fits).
    public mutating func readInt() throws(JSONParseError) -> Int64 {
        let at = self.parser.index
        guard let value = try self.readNumber().intValue else { throw JSONParseError(offset: at, reason: "expected an integer") }
        return value
    }

    /// A number as a `Double`, integral or not; throws when the next value is not a number.
    public mutating func readDouble() throws(JSONParseError) -> Double {
        guard let value = try self.readNumber().doubleValue else { throw self.parser.error("expected a number") }
        return value
    }

    /// The next number as `.int` or `.double`, by the parser's rules.
    private mutating func readNumber() throws(JSONParseError) -> JSONValue {
        try self.beginNumber()
        return try self.parser.parseNumber()
    }

    /// A number comes next (white space skipped); counted.
    private mutating func beginNumber() throws(JSONParseError) {
        guard self.next(is: UInt8(ascii: "-")) || self.next(in: UInt8(ascii: "0")...UInt8(ascii: "9")) else {
            throw self.parser.error("expected a number, got \(self.nextKind())")
        }
        try self.parser.countElement()
    }

    /// `true` or `false`; throws for anything else (no truthiness).
    public mutating func readBool() throws(JSONParseError) -> Bool {
        guard self.next(is: UInt8(ascii: "t")) || self.next(is: UInt8(ascii: "f")) else {
            throw self.parser.error("expected a boolean, got \(self.nextKind())")
        }
        try self.parser.countElement()
        if self.parser.bytes[self.parser.index] == UInt8(ascii: "t") {
            try self.parser.expectLiteral("true")
            return true
        }
        try self.parser.expectLiteral("false")
        return false
    }

    /// Any value, as a tree (a member this decoder does not read).
    public mutating func readValue() throws(JSONParseError) -> JSONValue {
        self.parser.skipWhitespace()
        let value = try self.parser.parseValue(depth: self.depth)
        self.first = false
        return value
    }

    /// Opens an object; then ``nextKey()`` until it returns nil.
    public mutating func beginObject() throws(JSONParseError) {
        try self.open(UInt8(ascii: "{"), "an object")
    }

    /// The next member's key (the reader is then at its value), or nil after the closing brace.
    public mutating func nextKey() throws(JSONParseError) -> String? {
        guard try self.next(close: UInt8(ascii: "}"), "'}'") else { return nil }
        try self.expect(UInt8(ascii: "\""), "a string key")
        try self.parser.countElement()
        let key = try self.parser.parseString()
        try self.expect(UInt8(ascii: ":"), "':'")
        self.parser.index += 1
        return key
    }

    /// Where the string whose text starts at `start` ends (its closing quote) when that text is
    /// plain ASCII without escapes or control characters, the bytes themselves; nil otherwise
    /// (an escape, a control character, non-ASCII or no closing quote: the string parser decides).
    private static func plainStringEnd(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        var end = start
        while end < bytes.count {
            let c = bytes[end]
            if c == UInt8(ascii: "\"") { return end }
            if c == UInt8(ascii: "\\") || c < 0x20 || c >= 0x80 { return nil }
            end += 1
        }
        return nil
    }

    /// The next member's key looked up in `keys` (the reader is then at its value), or nil after
    /// the closing brace: `.known(i)` for `keys.names[i]`, `.other(text)` for a key not among
    /// them. A key without escapes is matched on its bytes, without making a string of it, trying
    /// `keys.names[expected]` first (the key a writer puts next); the same keys are accepted and
    /// the same errors thrown as by ``nextKey()``.
    public mutating func nextKey(in keys: JSONKeys, expected: Int = 0) throws(JSONParseError) -> JSONKey? {
        guard try self.next(close: UInt8(ascii: "}"), "'}'") else { return nil }
        try self.expect(UInt8(ascii: "\""), "a string key")
        try self.parser.countElement()
        let start = self.parser.index + 1
        let matched: (key: JSONKey, end: Int)? = self.parser.bytes.withUnsafeBufferPointer { bytes in
            guard let end = Self.plainStringEnd(bytes, from: start) else { return nil }
            return (keys.match(UnsafeBufferPointer(rebasing: bytes[start..<end]), expected: expected), end)
        }
        let key: JSONKey
        if let matched {
            key = matched.key
            self.parser.index = matched.end + 1
        } else {
            let text = try self.parser.parseString()
            key = keys.names.firstIndex(of: text).map { .known($0) } ?? .other(text)
        }
        try self.expect(UInt8(ascii: ":"), "':'")
        self.parser.index += 1
        return key
    }

    /// Opens an array; then ``nextElement()`` before each element until it returns false.
    public mutating func beginArray() throws(JSONParseError) {
        try self.open(UInt8(ascii: "["), "an array")
    }

    /// True when another element follows (the reader is at it), false after the closing bracket.
    public mutating func nextElement() throws(JSONParseError) -> Bool {
        try self.next(close: UInt8(ascii: "]"), "']'")
    }

    /// Nothing but white space is left.
    public mutating func end() throws(JSONParseError) {
        self.parser.skipWhitespace()
        guard self.parser.index == self.parser.bytes.count else { throw self.parser.error("unexpected data after the value") }
    }

    /// Enters a container starting with `byte`, counted and checked against the depth limit.
    private mutating func open(_ byte: UInt8, _ what: String) throws(JSONParseError) {
        try self.expect(byte, what)
        try self.parser.countElement()
        self.depth += 1
        guard self.depth <= self.parser.maxDepth else { throw self.parser.error("nesting deeper than \(self.parser.maxDepth)") }
        self.parser.index += 1
        self.first = true
    }

    /// Steps past the separator before the next member or element (true), or past the closing
    /// `close` byte (false, the container is left); throws on anything else.
    private mutating func next(close: UInt8, _ what: String) throws(JSONParseError) -> Bool {
        self.parser.skipWhitespace()
        guard self.parser.index < self.parser.bytes.count else { throw self.parser.error("unexpected end of input") }
        let byte = self.parser.bytes[self.parser.index]
        if byte == close {
            self.parser.index += 1
            self.depth -= 1
            self.first = false
            return false
        }
        if self.first {
            self.first = false
            return true
        }
        guard byte == UInt8(ascii: ",") else { throw self.parser.error("expected ',' or \(what)") }
        self.parser.index += 1
        return true
    }
}

/// A key read by ``JSONReader/nextKey(in:)``.
public enum JSONKey: Equatable, Sendable {
    /// `names[i]` of the ``JSONKeys`` looked in.
    case known(Int)
    /// A key not among them, as text.
    case other(String)
}

/// The member names a byte decoder knows, for ``JSONReader/nextKey(in:)`` (at most 64).
public struct JSONKeys: Sendable {
    /// The names, in the order ``JSONKey/known(_:)`` indexes them.
    public let names: [String]
    /// The names' UTF-8, compared byte for byte.
    private let bytes: [[UInt8]]

    /// Keys for `names`; traps with more than 64.
    public init(_ names: [String]) {
        precondition(names.count <= 64, "at most 64 keys")
        self.names = names
        self.bytes = names.map { Array($0.utf8) }
    }

    /// The key whose bytes are `text`: `names[expected]` tried first, then the others in order.
    func match(_ text: UnsafeBufferPointer<UInt8>, expected: Int) -> JSONKey {
        func equal(_ index: Int) -> Bool {
            self.bytes[index].withUnsafeBufferPointer { name in
                name.count == text.count && (text.isEmpty || memcmp(name.baseAddress!, text.baseAddress!, text.count) == 0)
            }
        }
        if expected >= 0, expected < self.bytes.count, equal(expected) { return .known(expected) }
        for index in self.bytes.indices where index != expected && equal(index) { return .known(index) }
        return .other(String(decoding: text, as: UTF8.self))
    }
}
