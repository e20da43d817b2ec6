/// Glucose Feature (0x2A51, GLS §5): what the meter can detect; exactly 2 bytes.
///
/// Names in bit order: `lowBatteryDetection`, `sensorMalfunctionDetection`, `sampleSize`,
/// `stripInsertionErrorDetection`, `stripTypeErrorDetection`, `resultHighLowDetection`,
/// `temperatureHighLowDetection`, `readInterruptDetection`, `generalDeviceFault`, `timeFault`,
/// `multipleBond`, then `reserved11` … `reserved15`.
public struct GlucoseFeature: OptionSet, Hashable, Sendable {
    /// The 16 feature bits as received.
    public let rawValue: UInt16
    /// Features from their bits (reserved bits kept).
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// Bit 0: low battery detection during measurement.
    public static let lowBatteryDetection = GlucoseFeature(rawValue: 1 << 0)
    /// Bit 1: sensor malfunction detection.
    public static let sensorMalfunctionDetection = GlucoseFeature(rawValue: 1 << 1)
    /// Bit 2: sensor sample size.
    public static let sampleSize = GlucoseFeature(rawValue: 1 << 2)
    /// Bit 3: sensor strip insertion error detection.
    public static let stripInsertionErrorDetection = GlucoseFeature(rawValue: 1 << 3)
    /// Bit 4: sensor strip type error detection.
    public static let stripTypeErrorDetection = GlucoseFeature(rawValue: 1 << 4)
    /// Bit 5: sensor result high-low detection (HI and LO).
    public static let resultHighLowDetection = GlucoseFeature(rawValue: 1 << 5)
    /// Bit 6: sensor temperature high-low detection.
    public static let temperatureHighLowDetection = GlucoseFeature(rawValue: 1 << 6)
    /// Bit 7: sensor read interrupt detection.
    public static let readInterruptDetection = GlucoseFeature(rawValue: 1 << 7)
    /// Bit 8: general device fault.
    public static let generalDeviceFault = GlucoseFeature(rawValue: 1 << 8)
    /// Bit 9: time fault.
    public static let timeFault = GlucoseFeature(rawValue: 1 << 9)
    /// The meter keeps more than one bond. Without it, pairing the daemon may unpair the user's phone.
    public static let multipleBond = GlucoseFeature(rawValue: 1 << 10)

    /// Bit names, index = bit number.
    public static let bitNames: [String] = [
        "lowBatteryDetection", "sensorMalfunctionDetection", "sampleSize", "stripInsertionErrorDetection",
        "stripTypeErrorDetection", "resultHighLowDetection", "temperatureHighLowDetection",
        "readInterruptDetection", "generalDeviceFault", "timeFault", "multipleBond",
        "reserved11", "reserved12", "reserved13", "reserved14", "reserved15",
    ]

    /// Reads the 2-byte field.
    /// Throws `truncated` when fewer than 2 bytes are left.
    public init(parsing reader: inout ByteReader) throws(GlucoseProfileError) {
        self.rawValue = try reader.readUInt16LE(field: "feature")
    }

    /// Decodes exactly 2 bytes.
    /// Throws `truncated` for fewer, `trailingBytes` for more.
    public init(bytes: [UInt8]) throws(GlucoseProfileError) {
        var reader = ByteReader(bytes)
        try self.init(parsing: &reader)
        try reader.expectEnd(of: "feature")
    }

    /// The 2-byte encoding.
    public func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 2)
        writer.writeUInt16LE(self.rawValue)
        return writer.bytes
    }

    /// Names of the set bits, lowest first.
    public var names: [String] { setBitNames(UInt64(self.rawValue), Self.bitNames) }
}
