#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a JSON text was rejected, and where.
public struct JSONParseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Byte offset in the input where the problem was found.
    public var offset: Int
    /// What was wrong, in words.
    public var reason: String

    /// `invalid JSON at byte N: reason`.
    public var description: String { "invalid JSON at byte \(self.offset): \(self.reason)" }
}

/// Bounds on what one parse may cost, for text from someone untrusted (a socket peer).
///
/// Parsing is linear in the input's size (object keys are hashed), so a byte cap on the message
/// already bounds the time; these limits stop a hostile message early and put a ceiling on the
/// CPU time and the memory of the values it would build.
public struct JSONParseLimits: Sendable, Hashable {
    /// How deeply arrays and objects may nest; deeper input is rejected rather than exhausting the
    /// stack.
    public var maxDepth: Int
    /// Values (every scalar, array and object) plus object keys in the whole text; nil: no bound.
    public var maxElements: Int?
    /// Thread CPU time one parse may use (checked every 1 024 elements); nil: no budget.
    public var cpuBudget: Duration?

    /// The defaults bound only the depth (64): enough for trusted input such as our own files.
    public init(maxDepth: Int = 64, maxElements: Int? = nil, cpuBudget: Duration? = nil) {
        self.maxDepth = maxDepth
        self.maxElements = maxElements
        self.cpuBudget = cpuBudget
    }
}

extension JSONValue {
    /// Parses one JSON text (RFC 8259). White space may surround the value; anything else after it
    /// is an error.
    ///
    /// - Parameters:
    ///   - bytes: UTF-8 text.
    ///   - maxDepth: how deeply arrays and objects may nest; deeper input is rejected rather than
    ///     exhausting the stack.
    public init(parsing bytes: some Collection<UInt8>, maxDepth: Int = 64) throws(JSONParseError) {
        try self.init(parsing: bytes, limits: JSONParseLimits(maxDepth: maxDepth))
    }

    /// Parses one JSON text within `limits`; a text over a limit is rejected where the limit was
    /// reached, without reading the rest.
    public init(parsing bytes: some Collection<UInt8>, limits: JSONParseLimits) throws(JSONParseError) {
        let buffer = Array(bytes)
        var parser = JSONParser(bytes: buffer, limits: limits)
        self = try parser.parseDocument()
    }

    /// Parses JSON text held in a `String`.
    public init(parsing text: String, maxDepth: Int = 64) throws(JSONParseError) {
        try self.init(parsing: Array(text.utf8), maxDepth: maxDepth)
    }
}

/// The recursive-descent parser behind ``JSONValue/init(parsing:limits:)`` and ``JSONReader``:
/// a cursor over the whole text, with the limits of one parse.
struct JSONParser {
    /// The whole text.
    let bytes: [UInt8]
    /// See ``JSONParseLimits/maxDepth``.
    let maxDepth: Int
    /// See ``JSONParseLimits/maxElements``; `.max` when unbounded.
    let maxElements: Int
    /// Thread CPU time (ns) at which the parse gives up; nil: no budget.
    let cpuDeadline: Int64?
    /// The budget as given, for the error message.
    let cpuBudget: Duration?
    /// Offset of the next unread byte.
    var index = 0
    /// Values and keys counted so far.
    var elements = 0

    /// A parser at the start of `bytes`; a CPU budget starts counting now.
    init(bytes: [UInt8], limits: JSONParseLimits) {
        self.bytes = bytes
        self.maxDepth = limits.maxDepth
        self.maxElements = limits.maxElements ?? .max
        self.cpuBudget = limits.cpuBudget
        if let budget = limits.cpuBudget {
            let (seconds, attoseconds) = budget.components
            self.cpuDeadline = Self.threadCPUNanoseconds() &+ seconds &* 1_000_000_000 &+ attoseconds / 1_000_000_000
        } else {
            self.cpuDeadline = nil
        }
    }

    /// CPU time of the calling thread. The corresponding C function is
    /// `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`.
    static func threadCPUNanoseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }

    /// Counts one element (a value or a key) against the limits.
    mutating func countElement() throws(JSONParseError) {
        self.elements += 1
        if self.elements > self.maxElements {
            throw self.error("more than \(self.maxElements) values and keys")
        }
        if self.elements & 1023 == 0, let deadline = self.cpuDeadline, Self.threadCPUNanoseconds() > deadline {
            throw self.error("parsing used more than its CPU budget of \(self.cpuBudget ?? .zero)")
        }
    }

    /// One value with optional white space around it, and nothing else.
    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        self.skipWhitespace()
        let value = try self.parseValue(depth: 0)
        self.skipWhitespace()
        if self.index != self.bytes.count {
            throw self.error("unexpected data after the value")
        }
        return value
    }

    /// An error at `offset`, or at the current position.
    func error(_ reason: String, at offset: Int? = nil) -> JSONParseError {
        JSONParseError(offset: offset ?? self.index, reason: reason)
    }

    /// Skips the four white-space bytes JSON allows: space, tab, LF, CR.
    mutating func skipWhitespace() {
        while self.index < self.bytes.count {
            switch self.bytes[self.index] {
            case 0x20, 0x09, 0x0A, 0x0D: self.index += 1
            default: return
            }
        }
    }

    /// The value starting at the current byte (white space already skipped), counted against the
    /// limits; `depth` is how many containers enclose it.
    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard self.index < self.bytes.count else { throw self.error("unexpected end of input") }
        try self.countElement()
        switch self.bytes[self.index] {
        case UInt8(ascii: "{"): return try self.parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try self.parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try self.parseString())
        case UInt8(ascii: "t"): try self.expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try self.expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try self.expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try self.parseNumber()
        default: throw self.error("unexpected character")
        }
    }

    /// Consumes `literal` (`true`, `false`, `null`) or throws "invalid literal" at its start.
    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let start = self.index
        let count = literal.utf8CodeUnitCount
        guard self.bytes.count - self.index >= count else { throw self.error("invalid literal", at: start) }
        let expected = UnsafeBufferPointer(start: literal.utf8Start, count: count)
        for offset in 0..<count where self.bytes[self.index + offset] != expected[offset] {
            throw self.error("invalid literal", at: start)
        }
        self.index += count
    }

    /// An object at `{`. Throws on a duplicate key (at the key's offset) and past ``maxDepth``.
    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= self.maxDepth else { throw self.error("nesting deeper than \(self.maxDepth)") }
        self.index += 1
        var object = JSONObject()
        self.skipWhitespace()
        if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "}") {
            self.index += 1
            return .object(object)
        }
        while true {
            self.skipWhitespace()
            guard self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "\"") else {
                throw self.error("expected a string key")
            }
            let keyOffset = self.index
            try self.countElement()
            let key = try self.parseString()
            self.skipWhitespace()
            guard self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: ":") else {
                throw self.error("expected ':'")
            }
            self.index += 1
            self.skipWhitespace()
            let value = try self.parseValue(depth: depth)
            // One hashed lookup checks for a duplicate and inserts: O(1), so n keys cost O(n).
            guard object.insertNew(key, value) else { throw self.error("duplicate key \"\(key)\"", at: keyOffset) }
            self.skipWhitespace()
            guard self.index < self.bytes.count else { throw self.error("unexpected end of input in object") }
            if self.bytes[self.index] == UInt8(ascii: ",") {
                self.index += 1
                continue
            }
            if self.bytes[self.index] == UInt8(ascii: "}") {
                self.index += 1
                return .object(object)
            }
            throw self.error("expected ',' or '}'")
        }
    }

    /// An array at `[`. Throws past ``maxDepth``.
    mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= self.maxDepth else { throw self.error("nesting deeper than \(self.maxDepth)") }
        self.index += 1
        var items: [JSONValue] = []
        self.skipWhitespace()
        if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "]") {
            self.index += 1
            return .array(items)
        }
        while true {
            self.skipWhitespace()
            items.append(try self.parseValue(depth: depth))
            self.skipWhitespace()
            guard self.index < self.bytes.count else { throw self.error("unexpected end of input in array") }
            if self.bytes[self.index] == UInt8(ascii: ",") {
                self.index += 1
                continue
            }
            if self.bytes[self.index] == UInt8(ascii: "]") {
                self.index += 1
                return .array(items)
            }
            throw self.error("expected ',' or ']'")
        }
    }

    /// The four hex digits of a `\u` escape (either case), as a UTF-16 code unit.
    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard self.bytes.count - self.index >= 4 else { throw self.error("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = self.bytes[self.index]
            let digit: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw self.error("invalid hex digit in \\u escape")
            }
            value = value << 4 | digit
            self.index += 1
        }
        return value
    }

    /// A string at its opening quote, escapes decoded and surrogate pairs joined. Throws on raw
    /// control characters, unknown escapes, unpaired surrogates and invalid UTF-8 (never repaired).
    mutating func parseString() throws(JSONParseError) -> String {
        let start = self.index
        self.index += 1
        // Fast path: no escape before the closing quote, so the string is the bytes themselves.
        var scan = self.index
        while scan < self.bytes.count {
            let c = self.bytes[scan]
            if c == UInt8(ascii: "\"") {
                let (from, to) = (self.index, scan)
                let validated = self.bytes.withUnsafeBufferPointer { buffer -> String? in
                    let text = UnsafeBufferPointer(rebasing: buffer[from..<to])
                    // ASCII (every key, most values) is valid UTF-8 as it stands: no generic validation.
                    if text.allSatisfy({ $0 < 0x80 }) { return String(decoding: text, as: UTF8.self) }
                    return String(validating: text, as: UTF8.self)
                }
                guard let string = validated else {
                    throw self.error("string is not valid UTF-8", at: start)
                }
                self.index = scan + 1
                return string
            }
            if c == UInt8(ascii: "\\") || c < 0x20 { break }
            scan += 1
        }
        var out: [UInt8] = []
        out.append(contentsOf: self.bytes[self.index..<scan])
        self.index = scan
        var runStart = self.index
        while true {
            guard self.index < self.bytes.count else { throw self.error("unterminated string", at: start) }
            let c = self.bytes[self.index]
            if c == UInt8(ascii: "\"") {
                out.append(contentsOf: self.bytes[runStart..<self.index])
                self.index += 1
                break
            }
            if c < 0x20 { throw self.error("control character in string") }
            if c != UInt8(ascii: "\\") {
                self.index += 1
                continue
            }
            out.append(contentsOf: self.bytes[runStart..<self.index])
            self.index += 1
            guard self.index < self.bytes.count else { throw self.error("unterminated escape") }
            let e = self.bytes[self.index]
            self.index += 1
            switch e {
            case UInt8(ascii: "\""): out.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\"))
            case UInt8(ascii: "/"): out.append(UInt8(ascii: "/"))
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try self.parseHex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard self.bytes.count - self.index >= 6, self.bytes[self.index] == UInt8(ascii: "\\"),
                        self.bytes[self.index + 1] == UInt8(ascii: "u")
                    else { throw self.error("unpaired surrogate in \\u escape") }
                    self.index += 2
                    let low = try self.parseHex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw self.error("invalid low surrogate") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw self.error("unpaired surrogate in \\u escape")
                }
                guard let unicode = Unicode.Scalar(scalar) else { throw self.error("invalid \\u escape") }
                // UTF-8 by hand: no String or Character per escape.
                UTF8.encode(unicode) { out.append($0) }
            default: throw self.error("invalid escape")
            }
            runStart = self.index
        }
        // Validate UTF-8 rather than silently repairing it.
        guard let string = String(validating: out, as: UTF8.self) else {
            throw self.error("string is not valid UTF-8", at: start)
        }
        return string
    }

    /// A number's text as ``parseNumber()`` reads it, without its value: where it starts and
    /// what it has. Throws what ``parseNumber()`` throws for malformed text.
    mutating func scanNumber() throws(JSONParseError) -> (start: Int, isInteger: Bool, fractionDigits: Int, hasExponent: Bool) {
        let start = self.index
        var isInteger = true
        var fractionDigits = 0
        var hasExponent = false
        if self.bytes[self.index] == UInt8(ascii: "-") { self.index += 1 }
        guard self.index < self.bytes.count else { throw self.error("truncated number", at: start) }
        if self.bytes[self.index] == UInt8(ascii: "0") {
            self.index += 1
        } else if (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(self.bytes[self.index]) {
            while self.index < self.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self.bytes[self.index]) {
                self.index += 1
            }
        } else {
            throw self.error("invalid number", at: start)
        }
        if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: ".") {
            isInteger = false
            self.index += 1
            let digitsStart = self.index
            while self.index < self.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self.bytes[self.index]) {
                self.index += 1
            }
            guard self.index > digitsStart else { throw self.error("expected digits after '.'") }
            fractionDigits = self.index - digitsStart
        }
        if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "e") || self.bytes[self.index] == UInt8(ascii: "E") {
            isInteger = false
            hasExponent = true
            self.index += 1
            if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "+") || self.bytes[self.index] == UInt8(ascii: "-") {
                self.index += 1
            }
            let digitsStart = self.index
            while self.index < self.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self.bytes[self.index]) {
                self.index += 1
            }
            guard self.index > digitsStart else { throw self.error("expected digits in exponent") }
        }
        return (start, isInteger, fractionDigits, hasExponent)
    }

    /// A number at its first byte: `.int` when it has no fraction or exponent and fits `Int64`,
    /// else a finite `.double` (an overflowing one such as `1e400` throws "number out of range").
    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let (start, isInteger, fractionDigits, hasExponent) = try self.scanNumber()
        if isInteger, self.index - start <= 18 {
            // Fits in an Int64 with room to spare: the digits themselves, no text.
            var digit = start
            let negative = self.bytes[digit] == UInt8(ascii: "-")
            if negative { digit += 1 }
            var value: Int64 = 0
            while digit < self.index {
                value = value * 10 + Int64(self.bytes[digit] - UInt8(ascii: "0"))
                digit += 1
            }
            return .int(negative ? -value : value)
        }
        if !isInteger, !hasExponent, let value = self.shortDecimal(start, fractionDigits: fractionDigits) { return .double(value) }
        let text = String(decoding: self.bytes[start..<self.index], as: UTF8.self)
        if isInteger, let value = Int64(text) { return .int(value) }
        guard let value = Double(text), value.isFinite else { throw self.error("number out of range", at: start) }
        return .double(value)
    }

    /// Exact powers of ten as doubles (10^0 ... 10^22 are all representable).
    private static let powersOfTen: [Double] = (0...22).map { exponent in
        var value = 1.0
        for _ in 0..<exponent { value *= 10 }
        return value
    }

    /// A decimal without exponent of at most 15 significant digits (`104.5`, `-5.83`), from its
    /// digits: an integer below 2^53 divided by an exact power of ten is one correctly rounded
    /// division, so the result is the double nearest the text, as `Double(text)` gives it.
    /// nil for anything longer (the text takes `Double(_:)`).
    private func shortDecimal(_ start: Int, fractionDigits: Int) -> Double? {
        let negative = self.bytes[start] == UInt8(ascii: "-")
        let digitsStart = negative ? start + 1 : start
        // The digits and the point.
        guard self.index - digitsStart <= 16, fractionDigits <= 22 else { return nil }
        var mantissa: Int64 = 0
        for i in digitsStart..<self.index {
            let byte = self.bytes[i]
            if byte == UInt8(ascii: ".") { continue }
            mantissa = mantissa * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        let value = Double(mantissa) / Self.powersOfTen[fractionDigits]
        return negative ? -value : value
    }
}
