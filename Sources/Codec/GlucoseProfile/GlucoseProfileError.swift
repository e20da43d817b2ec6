/// A Glucose Profile packet that could not be decoded: what went wrong, in which field, at which byte.
///
/// `description` is one sentence such as `truncated at offset 10: concentration needs 3 bytes, 1 left`.
/// Offsets count from the first byte of the packet (the flags or op code byte is offset 0).
public struct GlucoseProfileError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Why decoding stopped.
    public enum Reason: Equatable, Sendable {
        /// The packet ends inside `field`: it needs `needed` bytes from `offset`, but only `available` are left.
        case truncated(needed: Int, available: Int)
        /// A field holds a number outside its allowed range (month 13, hour 24, a mantissa of 3000).
        case outOfRange(value: Int, expected: String)
        /// `count` bytes follow the last field the packet's flags or op code announce.
        case trailingBytes(count: Int)
        /// A field holds a value the specification reserves or that does not fit the rest of the packet.
        case invalidValue(value: Int, expected: String)
        /// A RACP response (op code 0x05 or 0x06) carries an operator other than 0x00 (Null).
        case nonNullOperator(value: UInt8)
    }

    /// Byte offset of the field in the packet.
    public var offset: Int
    /// Name of the field, as in the JSON output (`concentration`, `baseTime.month`, `operator`).
    public var field: String
    /// What is wrong with it.
    public var reason: Reason

    /// Creates an error for `field` at byte `offset`.
    public init(offset: Int, field: String, reason: Reason) {
        self.offset = offset
        self.field = field
        self.reason = reason
    }

    /// What was wrong, at which offset and in which field, in words.
    public var description: String {
        switch self.reason {
        case .truncated(let needed, let available):
            let unit = needed == 1 ? "byte" : "bytes"
            return "truncated at offset \(self.offset): \(self.field) needs \(needed) \(unit), \(available) left"
        case .outOfRange(let value, let expected):
            return "out of range at offset \(self.offset): \(self.field) is \(value), expected \(expected)"
        case .trailingBytes(let count):
            let unit = count == 1 ? "byte" : "bytes"
            return "trailing bytes at offset \(self.offset): \(count) \(unit) after the last field of the \(self.field)"
        case .invalidValue(let value, let expected):
            return "invalid value at offset \(self.offset): \(self.field) is \(hexByte(value)), expected \(expected)"
        case .nonNullOperator(let value):
            return "non-null operator at offset \(self.offset): \(self.field) is \(hexByte(Int(value))), "
                + "responses must use 0x00 (null)"
        }
    }
}

/// `0x0a`-style text for a byte or word, used in error messages and readable output.
func hexByte(_ value: Int) -> String {
    let digits = String(value, radix: 16)
    let width = value > 0xFF ? 4 : 2
    return "0x" + String(repeating: "0", count: max(0, width - digits.count)) + digits
}
