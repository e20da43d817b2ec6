public import JSON

/// Why a reply does not have the shape `io.sugard.HealthDataSync` describes. `path` leads from the
/// reply's top level to the offending value, e.g. `["state", "meters", "[0]", "lastSync", "at"]`.
public struct WireError: Error, Sendable, Equatable, CustomStringConvertible {
    public var path: [String]
    public var reason: String

    public init(path: [String], reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String {
        self.path.isEmpty ? self.reason : "\(self.path.joined(separator: ".")): \(self.reason)"
    }

    public func within(_ key: String) -> WireError { WireError(path: [key] + self.path, reason: self.reason) }
}

/// A value of the interface: decoded from its JSON form (throwing on a missing or mistyped field,
/// never defaulting) and encoded back to exactly that form.
public protocol WireValue: Sendable {
    init(json: JSONValue) throws(WireError)
    var json: JSONValue { get }
}

/// A Varlink enum: sent as one of its stable names.
public protocol WireEnum: WireValue, RawRepresentable<String>, CaseIterable {}

extension WireEnum {
    public init(json: JSONValue) throws(WireError) {
        guard let name = json.stringValue else { throw WireError(path: [], reason: "expected a name, got \(json.kindName)") }
        guard let value = Self(rawValue: name) else {
            let names = Self.allCases.map(\.rawValue).joined(separator: ", ")
            throw WireError(path: [], reason: "\"\(name)\" is not one of (\(names))")
        }
        self = value
    }

    public var json: JSONValue { .string(self.rawValue) }
}

extension String: WireValue {
    public init(json: JSONValue) throws(WireError) {
        guard let value = json.stringValue else { throw WireError(path: [], reason: "expected a string, got \(json.kindName)") }
        self = value
    }

    public var json: JSONValue { .string(self) }
}

extension Int64: WireValue {
    public init(json: JSONValue) throws(WireError) {
        guard let value = json.intValue else { throw WireError(path: [], reason: "expected an integer, got \(json.kindName)") }
        self = value
    }

    public var json: JSONValue { .int(self) }
}

extension Double: WireValue {
    public init(json: JSONValue) throws(WireError) {
        guard let value = json.doubleValue else { throw WireError(path: [], reason: "expected a number, got \(json.kindName)") }
        self = value
    }

    public var json: JSONValue { .from(self) }
}

extension Bool: WireValue {
    public init(json: JSONValue) throws(WireError) {
        guard let value = json.boolValue else { throw WireError(path: [], reason: "expected a boolean, got \(json.kindName)") }
        self = value
    }

    public var json: JSONValue { .bool(self) }
}

/// A `[string]T` map, keeping the order the keys came in (so it re-encodes to the same bytes).
public struct WireMap<Value: WireValue>: WireValue {
    public var entries: [(key: String, value: Value)]

    public init(_ entries: [(key: String, value: Value)]) { self.entries = entries }

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

    public var json: JSONValue { .object(JSONObject(self.entries.map { ($0.key, $0.value.json) })) }

    public subscript(key: String) -> Value? { self.entries.first { $0.key == key }?.value }

    public var isEmpty: Bool { self.entries.isEmpty }
}

/// Reads the fields of one object of the interface.
public struct WireFields {
    public let object: JSONObject

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
    var items: [Element]

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
    public init(json: JSONValue) throws(WireError) {
        guard let object = json.objectValue else { throw WireError(path: [], reason: "expected an object, got \(json.kindName)") }
        self = object
    }

    public var json: JSONValue { .object(self) }
}
