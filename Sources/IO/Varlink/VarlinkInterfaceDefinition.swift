public import JSON

/// A type in a Varlink interface description.
public indirect enum VarlinkType: Sendable, Hashable, CustomStringConvertible {
    /// `bool`: JSON `true` or `false`.
    case bool
    /// `int`: a JSON number with no fractional part that fits `Int64` (`3.0` passes).
    case int
    /// `float`: any JSON number.
    case float
    /// `string`: a JSON string.
    case string
    /// Any JSON object (`object`, "foreign" data the interface does not describe).
    case object
    /// A `type` declared in the same interface.
    case named(String)
    /// `[]T`
    case array(VarlinkType)
    /// `[string]T`
    case map(VarlinkType)
    /// `?T`: the value may be null or absent.
    case optional(VarlinkType)
    /// `(a: T, b: U)`
    case structure([VarlinkField])
    /// `(one, two)`, sent as one of the strings.
    case enumeration([String])

    /// The type in interface-description syntax (`?[]string`, `(a: int, b: string)`).
    public var description: String {
        switch self {
        case .bool: return "bool"
        case .int: return "int"
        case .float: return "float"
        case .string: return "string"
        case .object: return "object"
        case .named(let name): return name
        case .array(let element): return "[]\(element)"
        case .map(let element): return "[string]\(element)"
        case .optional(let wrapped): return "?\(wrapped)"
        case .structure(let fields): return "(" + fields.map { "\($0.name): \($0.type)" }.joined(separator: ", ") + ")"
        case .enumeration(let cases): return "(" + cases.joined(separator: ", ") + ")"
        }
    }
}

/// A named member of a struct, a method's input or output, or an error's parameters.
public struct VarlinkField: Sendable, Hashable {
    /// The field name (`[A-Za-z](_?[A-Za-z0-9])*`).
    public var name: String
    /// The field's type; `?T` makes it optional (null or absent).
    public var type: VarlinkType

    /// A field `name: type`.
    public init(name: String, type: VarlinkType) {
        self.name = name
        self.type = type
    }
}

/// A `method` declaration.
public struct VarlinkMethod: Sendable, Hashable {
    /// The member name, e.g. `Ping`.
    public var name: String
    /// The call's parameters, in declaration order.
    public var input: [VarlinkField]
    /// The reply's parameters, in declaration order.
    public var output: [VarlinkField]
}

/// Why an interface description was rejected, with the 1-based line and column of the problem.
public struct VarlinkIDLError: Error, Sendable, Equatable, CustomStringConvertible {
    /// 1-based line of the problem.
    public var line: Int
    /// 1-based column of the problem, counted in Unicode scalars.
    public var column: Int
    /// What was wrong, in words (`expected ',' or ')', found '}'`).
    public var reason: String

    /// `interface description line L, column C: reason`.
    public var description: String { "interface description line \(self.line), column \(self.column): \(self.reason)" }
}

/// Why a value does not match its declared type. `path` leads from the top-level parameter to the offending
/// value, e.g. `["reading", "values", "[2]"]`.
public struct VarlinkValidationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Field names, map keys and `[index]` steps from the top-level parameter down; empty when
    /// the whole call is wrong (an unknown method or error).
    public var path: [String]
    /// What was wrong (`unknown field`, `missing required int value`, `expected string, got a number`).
    public var reason: String

    /// The top-level parameter concerned: what `org.varlink.service.InvalidParameter` names.
    public var parameter: String { self.path.first ?? "" }

    /// `path.joined(".")` (or `parameters`) and the reason.
    public var description: String {
        let location = self.path.isEmpty ? "parameters" : self.path.joined(separator: ".")
        return "\(location): \(self.reason)"
    }
}

/// A parsed Varlink interface description (the `.varlink` text), kept together with its verbatim text.
public struct VarlinkInterfaceDefinition: Sendable {
    /// The interface name, e.g. `org.example.ping`.
    public let name: String
    /// The text exactly as given; `GetInterfaceDescription` returns it.
    public let text: String
    /// `type` declarations by name.
    public let types: [String: VarlinkType]
    /// `method` declarations by member name.
    public let methods: [String: VarlinkMethod]
    /// `error` declarations: member name to parameters.
    public let errors: [String: [VarlinkField]]
    /// Member names in declaration order.
    public let memberOrder: [String]

    /// Parses an interface description.
    ///
    /// - Throws: `VarlinkIDLError` naming the line and column of the first problem: a syntax error, an
    ///   invalid name, a duplicate member or field, or a reference to an undeclared type.
    public init(description text: String) throws(VarlinkIDLError) {
        var parser = IDLParser(text: text)
        let parsed = try parser.parseInterface()
        self.name = parsed.name
        self.text = text
        self.types = parsed.types
        self.methods = parsed.methods
        self.errors = parsed.errors
        self.memberOrder = parsed.order
    }

    /// Checks call parameters against method `method` (member name, not qualified).
    public func validateCall(method: String, parameters: JSONObject) throws(VarlinkValidationError) {
        guard let declaration = self.methods[method] else {
            throw VarlinkValidationError(path: [], reason: "interface \(self.name) has no method \(method)")
        }
        try self.validate(parameters, fields: declaration.input, path: [])
    }

    /// Checks reply parameters against the output of method `method` (member name, not qualified).
    public func validateReply(method: String, parameters: JSONObject) throws(VarlinkValidationError) {
        guard let declaration = self.methods[method] else {
            throw VarlinkValidationError(path: [], reason: "interface \(self.name) has no method \(method)")
        }
        try self.validate(parameters, fields: declaration.output, path: [])
    }

    /// Checks an error reply: `name` must be declared here (member name or fully qualified) and its
    /// parameters must match.
    public func validateError(name: String, parameters: JSONObject) throws(VarlinkValidationError) {
        var member = Substring(name)
        if name.hasPrefix(self.name + ".") { member = name.dropFirst(self.name.count + 1) }
        guard let fields = self.errors[String(member)] else {
            throw VarlinkValidationError(path: [], reason: "interface \(self.name) has no error \(name)")
        }
        try self.validate(parameters, fields: fields, path: [])
    }

    /// Checks one value against a type of this interface.
    public func validate(_ value: JSONValue, as type: VarlinkType) throws(VarlinkValidationError) {
        try self.validate(value, as: type, path: [])
    }

    /// Checks an object against struct fields: no unknown field, every non-optional field present and
    /// not null, each value of its type.
    private func validate(_ object: JSONObject, fields: [VarlinkField], path: [String]) throws(VarlinkValidationError) {
        for entry in object.entries where !fields.contains(where: { $0.name == entry.key }) {
            throw VarlinkValidationError(path: path + [entry.key], reason: "unknown field")
        }
        for field in fields {
            let value = object[field.name] ?? .null
            if value.isNull {
                if case .optional = field.type { continue }
                throw VarlinkValidationError(path: path + [field.name], reason: "missing required \(field.type) value")
            }
            try self.validate(value, as: field.type, path: path + [field.name])
        }
    }

    /// Checks `value` against `type`, resolving named types; `path` leads to the value for the error.
    private func validate(_ value: JSONValue, as type: VarlinkType, path: [String]) throws(VarlinkValidationError) {
        func mismatch() -> VarlinkValidationError {
            VarlinkValidationError(path: path, reason: "expected \(type), got \(value.kindName)")
        }
        switch type {
        case .bool:
            guard value.boolValue != nil else { throw mismatch() }
        case .int:
            guard value.intValue != nil else { throw mismatch() }
        case .float:
            guard value.doubleValue != nil else { throw mismatch() }
        case .string:
            guard value.stringValue != nil else { throw mismatch() }
        case .object:
            guard value.objectValue != nil else { throw mismatch() }
        case .named(let name):
            guard let resolved = self.types[name] else {
                throw VarlinkValidationError(path: path, reason: "type \(name) is not declared")
            }
            try self.validate(value, as: resolved, path: path)
        case .array(let element):
            guard let items = value.arrayValue else { throw mismatch() }
            for (index, item) in items.enumerated() {
                try self.validateElement(item, as: element, path: path + ["[\(index)]"])
            }
        case .map(let element):
            guard let object = value.objectValue else { throw mismatch() }
            for entry in object.entries {
                try self.validateElement(entry.value, as: element, path: path + [entry.key])
            }
        case .optional(let wrapped):
            if value.isNull { return }
            try self.validate(value, as: wrapped, path: path)
        case .structure(let fields):
            guard let object = value.objectValue else { throw mismatch() }
            try self.validate(object, fields: fields, path: path)
        case .enumeration(let cases):
            guard let string = value.stringValue else { throw mismatch() }
            guard cases.contains(string) else {
                throw VarlinkValidationError(path: path, reason: "\"\(string)\" is not one of \(type)")
            }
        }
    }

    /// Checks an array element or map value: null only where the element type is optional.
    private func validateElement(_ value: JSONValue, as type: VarlinkType, path: [String]) throws(VarlinkValidationError) {
        if value.isNull {
            if case .optional = type { return }
            throw VarlinkValidationError(path: path, reason: "expected \(type), got null")
        }
        try self.validate(value, as: type, path: path)
    }
}

/// Recursive-descent parser for the Varlink interface definition grammar
/// (https://varlink.org/Interface-Definition). `#` starts a comment that runs to the end of the line.
private struct IDLParser {
    /// What the parser collected; becomes the ``VarlinkInterfaceDefinition``.
    struct Parsed {
        var name = ""
        var types: [String: VarlinkType] = [:]
        var methods: [String: VarlinkMethod] = [:]
        var errors: [String: [VarlinkField]] = [:]
        /// Member names in declaration order.
        var order: [String] = []
    }

    /// A place in the text: byte index plus the 1-based line and column for messages.
    struct Position {
        /// Byte offset in the text.
        var index: Int
        var line: Int
        var column: Int
    }

    /// The description's UTF-8.
    let bytes: [UInt8]
    /// Offset of the next unread byte.
    var index = 0
    var line = 1
    var column = 1
    /// Named-type references, checked once every `type` is known.
    var references: [(name: String, at: Position)] = []

    /// A parser at the start of `text`.
    init(text: String) {
        self.bytes = Array(text.utf8)
    }

    /// Where the parser is now.
    var position: Position { Position(index: self.index, line: self.line, column: self.column) }

    /// An error at `position`, or at the current position.
    func error(_ reason: String, at position: Position? = nil) -> VarlinkIDLError {
        let at = position ?? self.position
        return VarlinkIDLError(line: at.line, column: at.column, reason: reason)
    }

    /// True when the whole text is read.
    var atEnd: Bool { self.index >= self.bytes.count }
    /// The next byte, nil at the end.
    var current: UInt8? { self.index < self.bytes.count ? self.bytes[self.index] : nil }

    /// Steps over one byte, keeping line and column (a column per UTF-8 lead byte, not per byte).
    mutating func advance() {
        if self.bytes[self.index] == UInt8(ascii: "\n") {
            self.line += 1
            self.column = 1
        } else if self.bytes[self.index] & 0xC0 != 0x80 {
            self.column += 1
        }
        self.index += 1
    }

    /// Skips white space and `#` comments.
    mutating func skipBlanks() {
        while let byte = self.current {
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                self.advance()
            case UInt8(ascii: "#"):
                while let c = self.current, c != UInt8(ascii: "\n") { self.advance() }
            default:
                return
            }
        }
    }

    /// A byte that may be part of a word: ASCII letter, digit, `_`, `.` or `-`.
    static func isWordByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }

    /// Reads the next word (letters, digits, `_`, `.`, `-`) after blanks; "" when none is there.
    mutating func word() -> (String, Position) {
        self.skipBlanks()
        let start = self.position
        while let byte = self.current, Self.isWordByte(byte) { self.advance() }
        return (String(decoding: self.bytes[start.index..<self.index], as: UTF8.self), start)
    }

    /// Consumes `symbol` after blanks, or throws "expected 'symbol', found …".
    mutating func expect(_ symbol: String) throws(VarlinkIDLError) {
        self.skipBlanks()
        let symbolBytes = Array(symbol.utf8)
        guard self.index + symbolBytes.count <= self.bytes.count,
            Array(self.bytes[self.index..<(self.index + symbolBytes.count)]) == symbolBytes
        else {
            throw self.error("expected '\(symbol)', found \(self.found())")
        }
        for _ in symbolBytes { self.advance() }
    }

    /// Consumes `byte` after blanks when it comes next; false (nothing consumed but blanks) otherwise.
    mutating func consume(_ byte: UInt8) -> Bool {
        self.skipBlanks()
        guard self.current == byte else { return false }
        self.advance()
        return true
    }

    /// What stands at the current position, for messages: the quoted word or byte, or "end of text".
    func found() -> String {
        guard let byte = self.current else { return "end of text" }
        if Self.isWordByte(byte) {
            var end = self.index
            while end < self.bytes.count, Self.isWordByte(self.bytes[end]) { end += 1 }
            return "'\(String(decoding: self.bytes[self.index..<end], as: UTF8.self))'"
        }
        return "'\(String(decoding: [byte], as: UTF8.self))'"
    }

    /// A reverse-domain interface name of at least two labels (`org.example.ping`); see the comment
    /// inside for where it is more lenient than the spec.
    static func isInterfaceName(_ name: String) -> Bool {
        // The spec's grammar is [a-z]([-]*[a-z0-9])*(\.[a-z0-9]([-]*[a-z0-9])*)+, but systemd
        // (io.systemd.Resolve) and the reference Python implementation accept upper-case letters after
        // the first label, so this does too: [a-z]([-]*[a-z0-9])*(\.[A-Za-z0-9]([-]*[A-Za-z0-9])*)+
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 2 else { return false }
        for (index, part) in parts.enumerated() {
            let bytes = Array(part.utf8)
            guard let first = bytes.first, let last = bytes.last else { return false }
            let lower = UInt8(ascii: "a")...UInt8(ascii: "z")
            let upper = UInt8(ascii: "A")...UInt8(ascii: "Z")
            let digit = UInt8(ascii: "0")...UInt8(ascii: "9")
            let letter = { (byte: UInt8) in lower.contains(byte) || (index > 0 && upper.contains(byte)) }
            if index == 0 {
                guard lower.contains(first) else { return false }
            } else {
                guard letter(first) || digit.contains(first) else { return false }
            }
            guard last != UInt8(ascii: "-") else { return false }
            for byte in bytes where !(letter(byte) || digit.contains(byte) || byte == UInt8(ascii: "-")) {
                return false
            }
        }
        return true
    }

    /// A type, method or error name: an upper-case letter, then letters and digits.
    static func isMemberName(_ name: String) -> Bool {
        // [A-Z][A-Za-z0-9]*
        let bytes = Array(name.utf8)
        guard let first = bytes.first, (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(first) else { return false }
        return bytes.allSatisfy { Self.isAlphanumeric($0) }
    }

    /// A field or enum value name: a letter, then letters and digits, with single `_` between them.
    static func isFieldName(_ name: String) -> Bool {
        // [A-Za-z](_?[A-Za-z0-9])*
        let bytes = Array(name.utf8)
        guard let first = bytes.first, Self.isLetter(first), bytes.last != UInt8(ascii: "_") else { return false }
        var previousUnderscore = false
        for byte in bytes.dropFirst() {
            if byte == UInt8(ascii: "_") {
                if previousUnderscore { return false }
                previousUnderscore = true
            } else if Self.isAlphanumeric(byte) {
                previousUnderscore = false
            } else {
                return false
            }
        }
        return true
    }

    /// An ASCII letter.
    static func isLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }

    /// An ASCII letter or digit.
    static func isAlphanumeric(_ byte: UInt8) -> Bool {
        Self.isLetter(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    /// The whole description: `interface name`, then `type`, `method` and `error` members until the
    /// end. Member names must be unique; named-type references are checked once all types are known.
    mutating func parseInterface() throws(VarlinkIDLError) -> Parsed {
        var parsed = Parsed()
        let (keyword, keywordAt) = self.word()
        guard keyword == "interface" else {
            throw self.error(
                keyword.isEmpty ? "expected 'interface', found \(self.found())" : "expected 'interface', found '\(keyword)'",
                at: keywordAt)
        }
        let (name, nameAt) = self.word()
        guard Self.isInterfaceName(name) else {
            throw self.error(name.isEmpty ? "expected an interface name, found \(self.found())"
                : "'\(name)' is not a valid interface name (like org.example.service)", at: nameAt)
        }
        parsed.name = name
        var members: Set<String> = []
        while true {
            self.skipBlanks()
            if self.atEnd { break }
            let (keyword, keywordAt) = self.word()
            guard ["type", "method", "error"].contains(keyword) else {
                throw self.error(keyword.isEmpty ? "expected 'type', 'method' or 'error', found \(self.found())"
                    : "expected 'type', 'method' or 'error', found '\(keyword)'", at: keywordAt)
            }
            let (member, memberAt) = self.word()
            guard Self.isMemberName(member) else {
                throw self.error(member.isEmpty ? "expected a \(keyword) name, found \(self.found())"
                    : "'\(member)' is not a valid \(keyword) name (must start with an upper-case letter)", at: memberAt)
            }
            guard members.insert(member).inserted else {
                throw self.error("'\(member)' is declared twice", at: memberAt)
            }
            parsed.order.append(member)
            switch keyword {
            case "type":
                self.skipBlanks()
                guard self.current == UInt8(ascii: "(") else {
                    throw self.error("expected '(' to start the definition of type \(member), found \(self.found())")
                }
                parsed.types[member] = try self.parseStructOrEnum()
            case "method":
                let input = try self.parseStruct(what: "the input of method \(member)")
                try self.expect("->")
                let output = try self.parseStruct(what: "the output of method \(member)")
                parsed.methods[member] = VarlinkMethod(name: member, input: input, output: output)
            default:
                parsed.errors[member] = try self.parseStruct(what: "the parameters of error \(member)")
            }
        }
        for reference in self.references where parsed.types[reference.name] == nil {
            throw self.error("type '\(reference.name)' is not declared in \(name)", at: reference.at)
        }
        return parsed
    }

    /// A `( … )` that must be a struct (method input or output, error parameters); `what` names it in
    /// errors.
    mutating func parseStruct(what: String) throws(VarlinkIDLError) -> [VarlinkField] {
        self.skipBlanks()
        let start = self.position
        guard self.current == UInt8(ascii: "(") else {
            throw self.error("expected '(' to start \(what), found \(self.found())")
        }
        guard case .structure(let fields) = try self.parseStructOrEnum() else {
            throw self.error("expected a struct with named fields for \(what), found an enum", at: start)
        }
        return fields
    }

    /// Parses `( ... )`: a struct when the first item has a `:`, an enum otherwise. `()` is an empty struct.
    mutating func parseStructOrEnum() throws(VarlinkIDLError) -> VarlinkType {
        try self.expect("(")
        if self.consume(UInt8(ascii: ")")) { return .structure([]) }
        var fields: [VarlinkField] = []
        var cases: [String] = []
        var isStruct: Bool?
        var seen: Set<String> = []
        while true {
            let (name, nameAt) = self.word()
            guard Self.isFieldName(name) else {
                throw self.error(name.isEmpty ? "expected a field name, found \(self.found())"
                    : "'\(name)' is not a valid field name", at: nameAt)
            }
            guard seen.insert(name).inserted else { throw self.error("'\(name)' appears twice", at: nameAt) }
            let hasType = self.consume(UInt8(ascii: ":"))
            if let isStruct, isStruct != hasType {
                throw self.error(isStruct ? "expected ':' and a type after '\(name)'"
                    : "enum values take no type, but '\(name)' has one", at: nameAt)
            }
            isStruct = hasType
            if hasType {
                fields.append(VarlinkField(name: name, type: try self.parseType()))
            } else {
                cases.append(name)
            }
            if self.consume(UInt8(ascii: ",")) { continue }
            if self.consume(UInt8(ascii: ")")) { break }
            throw self.error("expected ',' or ')', found \(self.found())")
        }
        return isStruct == true ? .structure(fields) : .enumeration(cases)
    }

    /// A type: `?T`, `[]T`, `[string]T`, an inline struct or enum, a built-in name or a declared
    /// type's name (recorded for the check at the end).
    mutating func parseType() throws(VarlinkIDLError) -> VarlinkType {
        self.skipBlanks()
        let start = self.position
        switch self.current {
        case UInt8(ascii: "?"):
            self.advance()
            self.skipBlanks()
            if self.current == UInt8(ascii: "?") { throw self.error("'??' is not a type: a type is nullable once") }
            return .optional(try self.parseType())
        case UInt8(ascii: "["):
            self.advance()
            if self.consume(UInt8(ascii: "]")) { return .array(try self.parseType()) }
            let (key, keyAt) = self.word()
            guard key == "string" else {
                throw self.error(key.isEmpty ? "expected ']' or 'string]', found \(self.found())"
                    : "map keys must be 'string', found '\(key)'", at: keyAt)
            }
            try self.expect("]")
            return .map(try self.parseType())
        case UInt8(ascii: "("):
            return try self.parseStructOrEnum()
        default:
            let (name, _) = self.word()
            switch name {
            case "bool": return .bool
            case "int": return .int
            case "float": return .float
            case "string": return .string
            case "object": return .object
            case "":
                throw self.error("expected a type, found \(self.found())", at: start)
            default:
                guard Self.isMemberName(name) else {
                    throw self.error("'\(name)' is not a type (bool, int, float, string, object, or a declared type)",
                        at: start)
                }
                self.references.append((name, start))
                return .named(name)
            }
        }
    }
}
