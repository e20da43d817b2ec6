/// One key/value pair of a D-Bus dictionary (`a{..}`).
public struct DBusDictEntry: Sendable, Hashable {
    /// The key: a basic type, usually a string or object path.
    public var key: DBusValue
    /// The value, of the dictionary's value signature.
    public var value: DBusValue

    /// An entry `key` → `value`.
    public init(_ key: DBusValue, _ value: DBusValue) {
        self.key = key
        self.value = value
    }
}

/// A D-Bus value with its wire type.
///
/// Reading a message always produces `.bytes` for `ay` and `.dict` for arrays of dict entries; when
/// building values, `.array(elementSignature: "y", …)` is accepted too and marshals the same.
public indirect enum DBusValue: Sendable, Hashable {
    /// `y`
    case byte(UInt8)
    /// `b`
    case bool(Bool)
    /// `n`
    case int16(Int16)
    /// `q`
    case uint16(UInt16)
    /// `i`
    case int32(Int32)
    /// `u`
    case uint32(UInt32)
    /// `x`
    case int64(Int64)
    /// `t`
    case uint64(UInt64)
    /// `d`
    case double(Double)
    /// `s`: UTF-8 without NUL.
    case string(String)
    /// `o`: a valid object path (checked before sending).
    case objectPath(String)
    /// `g`: a type signature.
    case signature(String)
    /// `ay`, the byte array BlueZ uses for GATT values.
    case bytes([UInt8])
    /// `a<elementSignature>`; every element must have exactly `elementSignature` as its signature.
    case array(elementSignature: String, [DBusValue])
    /// `a{<keySignature><valueSignature>}`; the key signature must be a basic type.
    case dict(keySignature: String, valueSignature: String, [DBusDictEntry])
    /// `v`
    case variant(DBusValue)
    /// `(...)`
    case structure([DBusValue])

    /// The D-Bus type signature of this value, e.g. `a{sv}`.
    public var signature: String {
        switch self {
        case .byte: return "y"
        case .bool: return "b"
        case .int16: return "n"
        case .uint16: return "q"
        case .int32: return "i"
        case .uint32: return "u"
        case .int64: return "x"
        case .uint64: return "t"
        case .double: return "d"
        case .string: return "s"
        case .objectPath: return "o"
        case .signature: return "g"
        case .bytes: return "ay"
        case .array(let element, _): return "a" + element
        case .dict(let key, let value, _): return "a{" + key + value + "}"
        case .variant: return "v"
        case .structure(let fields): return "(" + fields.map(\.signature).joined() + ")"
        }
    }

    /// The signature of a list of arguments (the concatenation of their signatures).
    public static func signature(of values: [DBusValue]) -> String {
        values.map(\.signature).joined()
    }
}

// MARK: - Building

extension DBusValue {
    /// An `as` array of strings.
    public static func stringArray(_ strings: [String]) -> DBusValue {
        .array(elementSignature: "s", strings.map { .string($0) })
    }

    /// An `ao` array of object paths.
    public static func objectPathArray(_ paths: [String]) -> DBusValue {
        .array(elementSignature: "o", paths.map { .objectPath($0) })
    }

    /// An `a{sv}` dictionary (the values are wrapped in variants here), with keys in sorted order.
    public static func vardict(_ entries: [String: DBusValue]) -> DBusValue {
        .dict(
            keySignature: "s", valueSignature: "v",
            entries.sorted { $0.key < $1.key }.map { DBusDictEntry(.string($0.key), .variant($0.value)) })
    }
}

// MARK: - Reading

extension DBusValue {
    /// The value inside any number of variant wrappers.
    public var unwrapped: DBusValue {
        if case .variant(let inner) = self { return inner.unwrapped }
        return self
    }

    /// The text of a string, object path or signature (looking through variants).
    public var string: String? {
        switch self.unwrapped {
        case .string(let s), .objectPath(let s), .signature(let s): return s
        default: return nil
        }
    }

    /// The value of a boolean (looking through variants).
    public var bool: Bool? {
        if case .bool(let b) = self.unwrapped { return b }
        return nil
    }

    /// Any integer type widened to `Int64` (a `uint64` above `Int64.max` gives nil).
    public var integer: Int64? {
        switch self.unwrapped {
        case .byte(let v): return Int64(v)
        case .int16(let v): return Int64(v)
        case .uint16(let v): return Int64(v)
        case .int32(let v): return Int64(v)
        case .uint32(let v): return Int64(v)
        case .int64(let v): return v
        case .uint64(let v): return Int64(exactly: v)
        default: return nil
        }
    }

    /// The bytes of an `ay` (looking through variants).
    public var bytes: [UInt8]? {
        switch self.unwrapped {
        case .bytes(let b): return b
        case .array("y", let items):
            var out: [UInt8] = []
            out.reserveCapacity(items.count)
            for item in items {
                guard case .byte(let b) = item else { return nil }
                out.append(b)
            }
            return out
        default: return nil
        }
    }

    /// The elements of an array (dict entries are returned as two-field structures).
    public var array: [DBusValue]? {
        switch self.unwrapped {
        case .array(_, let items): return items
        case .bytes(let b): return b.map { .byte($0) }
        case .dict(_, _, let entries): return entries.map { .structure([$0.key, $0.value]) }
        default: return nil
        }
    }

    /// The strings of an `as` or `ao` (looking through variants).
    public var strings: [String]? {
        guard let items = self.array else { return nil }
        var out: [String] = []
        for item in items {
            guard let s = item.string else { return nil }
            out.append(s)
        }
        return out
    }

    /// A dictionary keyed by string or object path (e.g. `a{sv}`, `a{oa{sa{sv}}}`); values are returned as
    /// stored (variants are not unwrapped).
    public var dictionary: [String: DBusValue]? {
        guard case .dict(_, _, let entries) = self.unwrapped else { return nil }
        var out: [String: DBusValue] = [:]
        for entry in entries {
            guard let key = entry.key.string else { return nil }
            out[key] = entry.value
        }
        return out
    }
}

// MARK: - Signatures

extension DBusValue {
    /// Whether a single complete type code is basic (usable as a dictionary key).
    static func isBasicSignature(_ signature: String) -> Bool {
        ["y", "b", "n", "q", "i", "u", "x", "t", "d", "s", "o", "g", "h"].contains(signature)
    }
}
