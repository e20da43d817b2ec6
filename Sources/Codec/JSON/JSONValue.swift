/// A JSON value, as RFC 8259 defines it.
///
/// Objects keep their keys in insertion order, so output is deterministic and reads the way the
/// code built it. Integers that fit `Int64` stay integers; every other number is a `Double`.
public enum JSONValue: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number written without fraction or exponent that fits `Int64` (what the parser makes of one).
    case int(Int64)
    /// Any other number; always finite (the parser rejects out-of-range numbers, the writer turns
    /// NaN and infinities into `null`).
    case double(Double)
    /// A string, valid Unicode (the parser rejects invalid UTF-8 and unpaired surrogates).
    case string(String)
    /// An array, elements in order.
    case array([JSONValue])
    /// An object, keys unique and in insertion order.
    case object(JSONObject)
}

/// A JSON object whose keys keep the order in which they were added.
///
/// Lookup, insert and replace cost O(1) on average once an object has more than
/// ``JSONObject/linearLimit`` keys (a hash index next to the ordered entries), so building or
/// parsing an object with n keys is O(n), whatever the keys are; String hashing is seeded per
/// process, so crafted keys cannot force collisions. Smaller objects (nearly all: a reading's
/// are at most about 30 keys, most under 10) have no index and compare keys in order, at most
/// `linearLimit` comparisons, which is cheaper than hashing. Removing a key is O(n).
public struct JSONObject: Sendable, Hashable, ExpressibleByDictionaryLiteral {
    /// One member: a key and its value.
    public struct Entry: Sendable, Hashable {
        /// The member's name.
        public var key: String
        /// The member's value.
        public var value: JSONValue
    }

    /// Objects with up to this many keys are searched in order; larger ones get the hash index.
    public static let linearLimit = 16

    /// The members in insertion order, each key once: what serialization writes and what `==` compares.
    public private(set) var entries: [Entry]
    /// Position of each key in `entries`; nil while there are at most ``linearLimit`` keys.
    private var index: [String: Int]?

    /// An empty object.
    public init() {
        self.entries = []
        self.index = nil
    }

    /// An object from a literal; a repeated key keeps its first position and its last value.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init()
        self.reserveCapacity(elements.count)
        for (key, value) in elements { self[key] = value }
    }

    /// An object from `pairs` in order; a repeated key keeps its first position and its last value.
    public init(_ pairs: [(String, JSONValue)]) {
        self.init()
        self.reserveCapacity(pairs.count)
        for (key, value) in pairs { self[key] = value }
    }

    /// Makes room for `count` members; above ``linearLimit`` it builds the hash index at once.
    public mutating func reserveCapacity(_ count: Int) {
        self.entries.reserveCapacity(count)
        if count > Self.linearLimit { self.buildIndex(capacity: count) }
    }

    /// How many members there are.
    public var count: Int { self.entries.count }
    /// The keys in insertion order.
    public var keys: [String] { self.entries.map(\.key) }

    /// Builds the key → position index (a no-op when there is one), sized for `capacity` keys.
    private mutating func buildIndex(capacity: Int = 0) {
        guard self.index == nil else { return }
        var index: [String: Int] = [:]
        index.reserveCapacity(max(capacity, self.entries.count))
        for (position, entry) in self.entries.enumerated() { index[entry.key] = position }
        self.index = index
    }

    /// Where `key` is in `entries`.
    private func position(of key: String) -> Int? {
        if let index = self.index { return index[key] }
        for position in self.entries.indices where self.entries[position].key == key { return position }
        return nil
    }

    /// Appends a key known to be absent; builds the index when the object grows past ``linearLimit``.
    private mutating func append(_ key: String, _ value: JSONValue) {
        let position = self.entries.count
        self.entries.append(Entry(key: key, value: value))
        if self.index != nil {
            self.index![key] = position
        } else if self.entries.count > Self.linearLimit {
            self.buildIndex()
        }
    }

    /// Adds `key` unless it is already there; returns false (and changes nothing) when it is.
    /// The parser's insert: one lookup for the duplicate check and the insert together.
    public mutating func insertNew(_ key: String, _ value: JSONValue) -> Bool {
        if self.index != nil {
            let position = self.entries.count
            if let existing = self.index!.updateValue(position, forKey: key) {
                self.index![key] = existing
                return false
            }
            self.entries.append(Entry(key: key, value: value))
            return true
        }
        if self.position(of: key) != nil { return false }
        self.append(key, value)
        return true
    }

    /// The value for `key`, or nil when the key is absent. Setting nil removes the key; to store a
    /// JSON null, set `.null`.
    public subscript(key: String) -> JSONValue? {
        get { self.position(of: key).map { self.entries[$0].value } }
        set {
            if let position = self.position(of: key) {
                if let newValue {
                    self.entries[position].value = newValue
                } else {
                    self.entries.remove(at: position)
                    if self.index != nil {
                        self.index![key] = nil
                        for later in position..<self.entries.count { self.index![self.entries[later].key] = later }
                    }
                }
            } else if let newValue {
                self.append(key, newValue)
            }
        }
    }

    // Equality and hashing follow the ordered entries; the index is derived from them.
    /// Equal when the same members are in the same order (`{"a":1,"b":2}` differs from `{"b":2,"a":1}`).
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool { lhs.entries == rhs.entries }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.entries) }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    /// `nil` in a literal is `.null`.
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(JSONObject(elements)) }
}

extension JSONValue {
    /// `.int` for any integer, `.null` for nil.
    public static func from<T: BinaryInteger>(_ value: T?) -> JSONValue {
        guard let value else { return .null }
        return .int(Int64(value))
    }

    /// `.double` for a finite number, `.null` for nil, NaN or an infinity (JSON has no such numbers).
    public static func from(_ value: Double?) -> JSONValue {
        guard let value, value.isFinite else { return .null }
        return .double(value)
    }

    /// `.string`, or `.null` for nil.
    public static func from(_ value: String?) -> JSONValue {
        guard let value else { return .null }
        return .string(value)
    }

    /// What kind of value this is, for error messages: "null", "a boolean", "a number", "a string",
    /// "an array" or "an object".
    public var kindName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .int, .double: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

    /// True for `.null` only (not for a missing member: ``subscript(_:)`` gives nil for that).
    public var isNull: Bool { if case .null = self { return true } else { return false } }
    /// The Boolean of a `.bool`; nil for any other value (no truthiness).
    public var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }
    /// The text of a `.string`; nil for any other value (numbers are not converted).
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    /// The elements of an `.array`; nil for any other value.
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a } else { return nil } }
    /// The members of an `.object`; nil for any other value.
    public var objectValue: JSONObject? { if case .object(let o) = self { return o } else { return nil } }

    /// The value as an integer: an `.int`, or a `.double` with no fractional part that fits.
    public var intValue: Int64? {
        switch self {
        case .int(let i): return i
        case .double(let d):
            guard d.isFinite, d.rounded() == d, d >= -9.2e18, d <= 9.2e18 else { return nil }
            return Int64(d)
        default: return nil
        }
    }

    /// The value as a `Double`: an `.int` or a `.double`.
    public var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    /// Member lookup for objects; nil for any other value or a missing key.
    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }
}
