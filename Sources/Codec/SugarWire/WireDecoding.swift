public import JSON

/// Why a reply does not have the shape `io.sugard.HealthDataSync` describes. `path` leads from the
/// reply's top level to the offending value, e.g. `["state", "meters", "[0]", "lastSync", "at"]`.
public struct WireError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Keys and `[index]` steps from the reply's top level to the value; empty for the top level.
    public var path: [String]
    /// What was wrong (`missing required field`, `expected a string, got a number`).
    public var reason: String

    /// An error at `path`.
    public init(path: [String], reason: String) {
        self.path = path
        self.reason = reason
    }

    /// `state.meters.[0].lastSync.at: reason`, or the reason alone at the top level.
    public var description: String {
        self.path.isEmpty ? self.reason : "\(self.path.joined(separator: ".")): \(self.reason)"
    }

    /// The same error one level down, under `key` (how nested decoders build the path).
    public func within(_ key: String) -> WireError { WireError(path: [key] + self.path, reason: self.reason) }
}

/// A value of the interface: decoded from its JSON form (throwing on a missing or mistyped field,
/// never defaulting) and encoded back to exactly that form.
public protocol WireValue: Sendable {
    /// Decodes the JSON form; throws ``WireError`` for a missing or mistyped field.
    init(json: JSONValue) throws(WireError)
    /// The JSON form, with every declared field (absent optional ones as `null`).
    var json: JSONValue { get }
}

/// A Varlink enum: sent as one of its stable names.
public protocol WireEnum: WireValue, RawRepresentable<String>, CaseIterable {}

extension WireEnum {
    /// One of the names; throws for any other string or a non-string.
    public init(json: JSONValue) throws(WireError) {
        guard let name = json.stringValue else { throw WireError(path: [], reason: "expected a name, got \(json.kindName)") }
        guard let value = Self(rawValue: name) else {
            let names = Self.allCases.map(\.rawValue).joined(separator: ", ")
            throw WireError(path: [], reason: "\"\(name)\" is not one of (\(names))")
        }
        self = value
    }

    /// The stable name.
    public var json: JSONValue { .string(self.rawValue) }
}

extension String: WireValue {
    /// A JSON string.
    public init(json: JSONValue) throws(WireError) {
        guard let value = json.stringValue else { throw WireError(path: [], reason: "expected a string, got \(json.kindName)") }
        self = value
    }

    /// A JSON string.
    public var json: JSONValue { .string(self) }
}

extension Int64: WireValue {
    /// A JSON number with no fractional part that fits `Int64`.
    public init(json: JSONValue) throws(WireError) {
        guard let value = json.intValue else { throw WireError(path: [], reason: "expected an integer, got \(json.kindName)") }
        self = value
    }

    /// A JSON integer.
    public var json: JSONValue { .int(self) }
}

extension Double: WireValue {
    /// Any JSON number.
    public init(json: JSONValue) throws(WireError) {
        guard let value = json.doubleValue else { throw WireError(path: [], reason: "expected a number, got \(json.kindName)") }
        self = value
    }

    /// A number; NaN and infinities become `null`.
    public var json: JSONValue { .from(self) }
}

extension Bool: WireValue {
    /// `true` or `false`.
    public init(json: JSONValue) throws(WireError) {
        guard let value = json.boolValue else { throw WireError(path: [], reason: "expected a boolean, got \(json.kindName)") }
        self = value
    }

    /// A JSON boolean.
    public var json: JSONValue { .bool(self) }
}

/// A `[string]T` map, keeping the order the keys came in (so it re-encodes to the same bytes).
public struct WireMap<Value: WireValue>: WireValue {
    /// The entries in the order they came.
    public var entries: [(key: String, value: Value)]

    /// A map of `entries`, in this order.
    public init(_ entries: [(key: String, value: Value)]) { self.entries = entries }

    /// An object whose every value decodes as `Value`; an error names the key.
    public init(json: JSONValue) throws(WireError) {
        guard let object = json.objectValue else { throw WireError(path: [], reason: "expected an object, got \(json.kindName)") }
        var entries: [(key: String, value: Value)] = []
        for entry in object.entries {
            do throws(WireError) {
                entries.append((entry.key, try Value(json: entry.value)))
            } catch {
                throw error.within(entry.key)
            }
        }
        self.entries = entries
    }

    /// The object, keys in order.
    public var json: JSONValue { .object(JSONObject(self.entries.map { ($0.key, $0.value.json) })) }

    /// The value of the first entry with `key` (a linear search).
    public subscript(key: String) -> Value? { self.entries.first { $0.key == key }?.value }

    /// True when there are no entries.
    public var isEmpty: Bool { self.entries.isEmpty }
}

/// Reads the fields of one object of the interface.
public struct WireFields {
    /// The object being read.
    public let object: JSONObject

    /// Reads the fields of `json`; throws when it is not an object.
    public init(_ json: JSONValue) throws(WireError) {
        guard let object = json.objectValue else { throw WireError(path: [], reason: "expected an object, got \(json.kindName)") }
        self.object = object
    }

    /// A required field: present, not null, of type `T`.
    public func required<T: WireValue>(_ key: String, as type: T.Type = T.self) throws(WireError) -> T {
        guard let value = self.object[key], !value.isNull else {
            throw WireError(path: [key], reason: "missing required field")
        }
        do throws(WireError) { return try T(json: value) } catch { throw error.within(key) }
    }

    /// An optional field (`?T`): nil when absent or null.
    public func optional<T: WireValue>(_ key: String, as type: T.Type = T.self) throws(WireError) -> T? {
        guard let value = self.object[key], !value.isNull else { return nil }
        do throws(WireError) { return try T(json: value) } catch { throw error.within(key) }
    }

    /// A required `[]T` field.
    public func array<T: WireValue>(_ key: String, of type: T.Type = T.self) throws(WireError) -> [T] {
        let items: WireArray<T> = try self.required(key)
        return items.items
    }

    /// An optional `?[]T` field.
    public func optionalArray<T: WireValue>(_ key: String, of type: T.Type = T.self) throws(WireError) -> [T]? {
        let items: WireArray<T>? = try self.optional(key)
        return items?.items
    }
}

/// `[]T`.
struct WireArray<Element: WireValue>: WireValue {
    /// The decoded elements.
    var items: [Element]

    /// An array whose every element decodes as `Element`; an error names the `[index]`.
    init(json: JSONValue) throws(WireError) {
        guard let array = json.arrayValue else { throw WireError(path: [], reason: "expected an array, got \(json.kindName)") }
        var items: [Element] = []
        items.reserveCapacity(array.count)
        for (index, item) in array.enumerated() {
            do throws(WireError) { items.append(try Element(json: item)) } catch { throw error.within("[\(index)]") }
        }
        self.items = items
    }

    var json: JSONValue { .array(self.items.map(\.json)) }
}

extension JSONValue {
    /// `.null` for nil, else the value's wire form.
    public static func wire(_ value: (some WireValue)?) -> JSONValue { value?.json ?? .null }

    /// `[]T` as JSON.
    public static func wire(_ values: [some WireValue]) -> JSONValue { .array(values.map(\.json)) }
}

/// A decoded `object` (data the interface does not describe further) is kept as it came.
extension JSONObject: WireValue {
    /// Any JSON object, as it is.
    public init(json: JSONValue) throws(WireError) {
        guard let object = json.objectValue else { throw WireError(path: [], reason: "expected an object, got \(json.kindName)") }
        self = object
    }

    /// The object as it is.
    public var json: JSONValue { .object(self) }
}
