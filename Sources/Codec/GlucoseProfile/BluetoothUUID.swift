/// A Bluetooth UUID, held as its 128-bit value. 16- and 32-bit UUIDs are aliases inside the Bluetooth
/// base UUID `0000xxxx-0000-1000-8000-00805F9B34FB`, so `BluetoothUUID(0x2A18)` equals its 128-bit
/// spelling. This is the one UUID type: the codec names the Glucose Profile's UUIDs here, the sync
/// engine addresses characteristics with it, captures decode into it, and BlueZ gets ``uuidString``.
public struct BluetoothUUID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The most significant 64 bits of the 128-bit value.
    public let high: UInt64
    /// The least significant 64 bits of the 128-bit value.
    public let low: UInt64

    /// The Bluetooth Base UUID's high 64 bits without the 16/32-bit part (`0000xxxx-0000-1000`).
    private static let baseHighLow: UInt64 = 0x0000_1000
    /// The Bluetooth Base UUID's low 64 bits (`8000-00805F9B34FB`).
    private static let baseLow: UInt64 = 0x8000_0080_5F9B_34FB

    /// Creates a UUID from its 128-bit value.
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Creates the 128-bit alias of a 16-bit (SIG-assigned) UUID.
    public init(_ short: UInt16) {
        self.init(high: UInt64(short) << 32 | Self.baseHighLow, low: Self.baseLow)
    }

    /// Creates the 128-bit alias of a 32-bit UUID.
    public init(uuid32: UInt32) {
        self.init(high: UInt64(uuid32) << 32 | Self.baseHighLow, low: Self.baseLow)
    }

    /// Parses `2a18`, `0x2A18`, `0000fff1`, `00002a18-0000-1000-8000-00805f9b34fb` (any case; dashes
    /// are ignored); nil for anything else.
    public init?(string text: String) {
        var digits = Substring(text)
        if digits.hasPrefix("0x") || digits.hasPrefix("0X") { digits = digits.dropFirst(2) }
        let hex = digits.filter { $0 != "-" }
        guard hex.allSatisfy({ $0.isASCII && $0.isHexDigit }) else { return nil }
        switch hex.count {
        case 4:
            guard let value = UInt16(hex, radix: 16) else { return nil }
            self.init(value)
        case 8:
            guard let value = UInt32(hex, radix: 16) else { return nil }
            self.init(uuid32: value)
        case 32:
            guard let high = UInt64(hex.prefix(16), radix: 16), let low = UInt64(hex.suffix(16), radix: 16) else {
                return nil
            }
            self.init(high: high, low: low)
        default:
            return nil
        }
    }

    /// The 16-bit value when this UUID is a 16-bit alias of the base UUID, else nil.
    public var uuid16: UInt16? {
        guard self.low == Self.baseLow, self.high & 0xFFFF_FFFF == Self.baseHighLow, self.high >> 48 == 0 else {
            return nil
        }
        return UInt16(truncatingIfNeeded: self.high >> 32)
    }

    /// The full 128-bit form, lowercase with dashes, as BlueZ spells it on D-Bus:
    /// `00002a18-0000-1000-8000-00805f9b34fb`.
    public var uuidString: String {
        var text = ""
        text.reserveCapacity(36)
        for index in stride(from: 7, through: 0, by: -1) {
            text += Self.hex(UInt8(truncatingIfNeeded: self.high >> (8 * UInt64(index))), upper: false)
            if index == 4 || index == 2 { text += "-" }
        }
        text += "-"
        for index in stride(from: 7, through: 0, by: -1) {
            text += Self.hex(UInt8(truncatingIfNeeded: self.low >> (8 * UInt64(index))), upper: false)
            if index == 6 { text += "-" }
        }
        return text
    }

    /// `2a18` for a 16-bit alias, else ``uuidString``; all lowercase (how messages, the socket and
    /// `capture inspect` name a characteristic).
    public var shortString: String { self.shortForm(upper: false) }

    /// `2A18` for a 16-bit alias, else the lower-case 128-bit form with dashes (capture JSON and
    /// handle overrides).
    public var description: String { self.shortForm(upper: true) }

    /// The 16-bit UUID as four hex digits when this is one, else the full UUID string.
    private func shortForm(upper: Bool) -> String {
        guard let short = self.uuid16 else { return self.uuidString }
        return Self.hex(UInt8(short >> 8), upper: upper) + Self.hex(UInt8(short & 0xFF), upper: upper)
    }

    /// Two hex digits of `byte`.
    private static func hex(_ byte: UInt8, upper: Bool) -> String {
        let digits: StaticString = upper ? "0123456789ABCDEF" : "0123456789abcdef"
        return digits.withUTF8Buffer { table in
            String(decoding: [table[Int(byte >> 4)], table[Int(byte & 0x0F)]], as: UTF8.self)
        }
    }

    /// Orders by the 128-bit value (the same order as ``uuidString``).
    public static func < (lhs: BluetoothUUID, rhs: BluetoothUUID) -> Bool {
        (lhs.high, lhs.low) < (rhs.high, rhs.low)
    }
}

// The 16-bit SIG UUIDs the glucose daemon uses (GLS §1, DIS, CTS, GATT), named once.
extension BluetoothUUID {
    /// Glucose service (0x1808).
    public static let glucoseService = BluetoothUUID(0x1808)
    /// Glucose Measurement characteristic (0x2A18, notify).
    public static let glucoseMeasurement = BluetoothUUID(0x2A18)
    /// Glucose Measurement Context characteristic (0x2A34, notify, optional).
    public static let glucoseMeasurementContext = BluetoothUUID(0x2A34)
    /// Glucose Feature characteristic (0x2A51, read).
    public static let glucoseFeature = BluetoothUUID(0x2A51)
    /// Record Access Control Point (0x2A52, write + indicate).
    public static let recordAccessControlPoint = BluetoothUUID(0x2A52)
    /// Date Time characteristic (0x2A08; Roche meters put one inside the glucose service).
    public static let dateTime = BluetoothUUID(0x2A08)
    /// Current Time Service (0x1805).
    public static let currentTimeService = BluetoothUUID(0x1805)
    /// Current Time characteristic (0x2A2B).
    public static let currentTime = BluetoothUUID(0x2A2B)
    /// Device Information service (0x180A).
    public static let deviceInformationService = BluetoothUUID(0x180A)
    /// Manufacturer Name String (0x2A29, DIS).
    public static let manufacturerName = BluetoothUUID(0x2A29)
    /// Model Number String (0x2A24, DIS).
    public static let modelNumber = BluetoothUUID(0x2A24)
    /// Serial Number String (0x2A25, DIS).
    public static let serialNumber = BluetoothUUID(0x2A25)
    /// Firmware Revision String (0x2A26, DIS).
    public static let firmwareRevision = BluetoothUUID(0x2A26)
    /// The Device Information strings a download reads after Glucose Feature, in order.
    public static let deviceInformationStrings: [BluetoothUUID] = [.manufacturerName, .modelNumber, .serialNumber, .firmwareRevision]
    /// Primary Service declaration (0x2800).
    public static let primaryService = BluetoothUUID(0x2800)
    /// Secondary Service declaration (0x2801).
    public static let secondaryService = BluetoothUUID(0x2801)
    /// Include declaration (0x2802).
    public static let include = BluetoothUUID(0x2802)
    /// Characteristic declaration (0x2803).
    public static let characteristic = BluetoothUUID(0x2803)
    /// Client Characteristic Configuration descriptor (0x2902).
    public static let clientCharacteristicConfiguration = BluetoothUUID(0x2902)
}
