import GlucoseProfile

/// A 48-bit Bluetooth device address (BD_ADDR).
///
/// On the wire an address is 6 bytes, least significant byte first; it is written most significant
/// byte first, `AA:BB:CC:DD:EE:FF`.
public struct BluetoothAddress: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The address in the low 48 bits.
    public let rawValue: UInt64

    /// Creates an address from its 48-bit value; higher bits are dropped.
    public init(rawValue: UInt64) {
        self.rawValue = rawValue & 0xFFFF_FFFF_FFFF
    }

    /// Creates an address from its 6 wire bytes (least significant first).
    /// - Precondition: `littleEndianBytes` holds exactly 6 bytes.
    public init(littleEndianBytes: [UInt8]) {
        precondition(littleEndianBytes.count == 6, "a Bluetooth address has 6 bytes")
        var value: UInt64 = 0
        for (index, byte) in littleEndianBytes.enumerated() { value |= UInt64(byte) << (8 * UInt64(index)) }
        self.init(rawValue: value)
    }

    /// Parses `AA:BB:CC:DD:EE:FF` (also with `-` separators or none).
    /// - Throws: `CaptureError` with code `.invalidArgument` when the text is not an address.
    public init(parsing text: String) throws(CaptureError) {
        let digits = text.filter { $0 != ":" && $0 != "-" }
        guard digits.count == 12, let value = UInt64(digits, radix: 16) else {
            throw CaptureError(.invalidArgument, "“\(text)” is not a Bluetooth address (expected AA:BB:CC:DD:EE:FF).")
        }
        self.init(rawValue: value)
    }

    /// The 6 wire bytes, least significant first.
    public var littleEndianBytes: [UInt8] {
        (0..<6).map { UInt8(truncatingIfNeeded: self.rawValue >> (8 * UInt64($0))) }
    }

    /// Most significant byte first, in lower-case hex: `aa:bb:cc:dd:ee:ff`.
    public var description: String {
        var text = ""
        text.reserveCapacity(17)
        for index in stride(from: 5, through: 0, by: -1) {
            let byte = UInt8(truncatingIfNeeded: self.rawValue >> (8 * UInt64(index)))
            text += hexByte(byte)
            if index != 0 { text += ":" }
        }
        return text
    }

    /// Orders by the 48-bit value.
    public static func < (lhs: BluetoothAddress, rhs: BluetoothAddress) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// How an LE peer address was given in the connection event (Core Vol 4 Part E 7.7.65.1).
public struct AddressType: Hashable, Sendable, CustomStringConvertible {
    /// The Address_Type byte as the controller reported it.
    public let rawValue: UInt8
    /// Wraps any byte; values above 3 are kept and shown as `type-N`.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// A public device address (IEEE-assigned).
    public static let `public` = AddressType(rawValue: 0x00)
    /// A random device address (static or private).
    public static let random = AddressType(rawValue: 0x01)
    /// A public identity address resolved by the controller from a resolvable private address.
    public static let publicIdentity = AddressType(rawValue: 0x02)
    /// A random (static) identity address resolved by the controller.
    public static let randomIdentity = AddressType(rawValue: 0x03)

    /// `public`, `random`, `public-identity`, `random-identity` or `type-N`.
    public var description: String {
        switch self.rawValue {
        case 0: "public"
        case 1: "random"
        case 2: "public-identity"
        case 3: "random-identity"
        default: "type-\(self.rawValue)"
        }
    }
}

// The wire forms of GlucoseProfile's `BluetoothUUID` (ATT carries 2, 4 or 16 bytes, least significant
// first), and its parser with this module's error.
extension BluetoothUUID {
    /// Creates a UUID from its wire form: 2, 4 or 16 bytes, least significant byte first.
    /// - Throws: `CaptureError` with code `.invalidArgument` for any other length.
    public init(littleEndianBytes bytes: [UInt8]) throws(CaptureError) {
        guard let uuid = bytes.withUnsafeBytes({ BluetoothUUID(wire: $0) }) else {
            throw CaptureError(.invalidArgument, "A UUID has 2, 4 or 16 bytes, not \(bytes.count).")
        }
        self = uuid
    }

    /// Parses `2a18`, `0x2A18`, `0000fff1` or `00002a18-0000-1000-8000-00805f9b34fb`.
    /// - Throws: `CaptureError` with code `.invalidArgument` when the text is not a UUID.
    public init(parsing text: String) throws(CaptureError) {
        guard let uuid = BluetoothUUID(string: text) else {
            throw CaptureError(.invalidArgument, "“\(text)” is not a Bluetooth UUID (expected 2a18 or a 128-bit UUID).")
        }
        self = uuid
    }

    /// Reads a wire UUID of 2, 4 or 16 bytes; nil for any other length.
    init?(wire bytes: UnsafeRawBufferPointer) {
        switch bytes.count {
        case 2: self.init(bytes.loadLE16(at: 0))
        case 4: self.init(uuid32: bytes.loadLE32(at: 0))
        case 16:
            self.init(high: bytes.loadLE64(at: 8), low: bytes.loadLE64(at: 0))
        default: return nil
        }
    }

    /// The shortest wire form: 2 bytes for a 16-bit alias, else 16 bytes, least significant first.
    public var littleEndianBytes: [UInt8] {
        if let short = self.uuid16 { return [UInt8(truncatingIfNeeded: short), UInt8(truncatingIfNeeded: short >> 8)] }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        for index in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: self.low >> (8 * UInt64(index)))) }
        for index in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: self.high >> (8 * UInt64(index)))) }
        return bytes
    }
}

/// Which way a packet travelled, seen from the host that made the capture.
public enum Direction: UInt8, Hashable, Sendable, CustomStringConvertible {
    /// Host to controller: the capturing device sent it to the peer.
    case sent = 0
    /// Controller to host: the capturing device received it.
    case received = 1

    /// The other direction.
    public var reversed: Direction { self == .sent ? .received : .sent }

    /// `sent` or `received`.
    public var description: String { self == .sent ? "sent" : "received" }
}

/// A btsnoop record timestamp: microseconds since midnight, 1 January 0 AD (nominal Gregorian).
public struct CaptureTimestamp: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The btsnoop field as stored (BlueZ and Android both use 2000-01-01 = 0x00E03AB44A676000).
    public let microsecondsSinceYear0: Int64

    /// Microseconds between 0 AD and the Unix epoch in the btsnoop convention.
    public static let unixEpochOffset: Int64 = 0x00DC_DDB3_0F2F_8000

    /// A timestamp from the stored btsnoop field.
    public init(microsecondsSinceYear0: Int64) {
        self.microsecondsSinceYear0 = microsecondsSinceYear0
    }

    /// A timestamp from microseconds since the Unix epoch.
    public init(unixMicroseconds: Int64) {
        self.microsecondsSinceYear0 = unixMicroseconds &+ Self.unixEpochOffset
    }

    /// Microseconds since 1970-01-01T00:00:00Z.
    public var unixMicroseconds: Int64 { self.microsecondsSinceYear0 &- Self.unixEpochOffset }

    /// Earlier first.
    public static func < (lhs: CaptureTimestamp, rhs: CaptureTimestamp) -> Bool {
        lhs.microsecondsSinceYear0 < rhs.microsecondsSinceYear0
    }

    /// ISO 8601 UTC with microseconds, e.g. `2026-11-30T10:39:17.123456Z`.
    public var description: String {
        let micros = self.unixMicroseconds
        var seconds = micros / 1_000_000
        var fraction = micros % 1_000_000
        if fraction < 0 {
            fraction += 1_000_000
            seconds -= 1
        }
        return CivilCalendar.isoUTC(secondsSinceEpoch: seconds, fraction: Int(fraction), fractionDigits: 6)
    }
}

/// Two hex digits for `byte`, lower-case unless `upper`.
func hexByte(_ byte: UInt8, upper: Bool = false) -> String {
    let digits: StaticString = upper ? "0123456789ABCDEF" : "0123456789abcdef"
    return digits.withUTF8Buffer { table in
        String(decoding: [table[Int(byte >> 4)], table[Int(byte & 0x0F)]], as: UTF8.self)
    }
}

/// `0x0012` style for handles in messages.
func hex16(_ value: UInt16) -> String {
    "0x" + hexByte(UInt8(value >> 8)) + hexByte(UInt8(value & 0xFF))
}

/// Bytes as space-separated lower-case hex pairs (`01 06 00`), for messages and inspection text.
func hexBytes(_ bytes: some Sequence<UInt8>) -> String {
    bytes.map { hexByte($0) }.joined(separator: " ")
}

// Unaligned little/big-endian loads; callers check bounds first.
extension UnsafeRawBufferPointer {
    /// Little-endian UInt16 at `offset`.
    func loadLE16(at offset: Int) -> UInt16 {
        UInt16(littleEndian: self.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
    }
    /// Little-endian UInt32 at `offset`.
    func loadLE32(at offset: Int) -> UInt32 {
        UInt32(littleEndian: self.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }
    /// Little-endian UInt64 at `offset`.
    func loadLE64(at offset: Int) -> UInt64 {
        UInt64(littleEndian: self.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }
    /// Big-endian UInt32 at `offset` (btsnoop headers).
    func loadBE32(at offset: Int) -> UInt32 {
        UInt32(bigEndian: self.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }
    /// Big-endian UInt64 at `offset` (btsnoop timestamps).
    func loadBE64(at offset: Int) -> UInt64 {
        UInt64(bigEndian: self.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }
    /// The 6-byte little-endian Bluetooth address at `offset`.
    func address(at offset: Int) -> BluetoothAddress {
        var value: UInt64 = 0
        for index in 0..<6 { value |= UInt64(self[offset + index]) << (8 * UInt64(index)) }
        return BluetoothAddress(rawValue: value)
    }
}
