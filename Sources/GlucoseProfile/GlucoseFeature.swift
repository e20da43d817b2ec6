/// Glucose Feature (0x2A51, GLS §5): what the meter can detect; exactly 2 bytes.
///
/// Names in bit order: `lowBatteryDetection`, `sensorMalfunctionDetection`, `sampleSize`,
/// `stripInsertionErrorDetection`, `stripTypeErrorDetection`, `resultHighLowDetection`,
/// `temperatureHighLowDetection`, `readInterruptDetection`, `generalDeviceFault`, `timeFault`,
/// `multipleBond`, then `reserved11` … `reserved15`.
public struct GlucoseFeature: OptionSet, Hashable, Sendable {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let lowBatteryDetection = GlucoseFeature(rawValue: 1 << 0)
    public static let sensorMalfunctionDetection = GlucoseFeature(rawValue: 1 << 1)
    public static let sampleSize = GlucoseFeature(rawValue: 1 << 2)
    public static let stripInsertionErrorDetection = GlucoseFeature(rawValue: 1 << 3)
    public static let stripTypeErrorDetection = GlucoseFeature(rawValue: 1 << 4)
    public static let resultHighLowDetection = GlucoseFeature(rawValue: 1 << 5)
    public static let temperatureHighLowDetection = GlucoseFeature(rawValue: 1 << 6)
    public static let readInterruptDetection = GlucoseFeature(rawValue: 1 << 7)
    public static let generalDeviceFault = GlucoseFeature(rawValue: 1 << 8)
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
    public init(parsing reader: inout ByteReader) throws(GlucoseProfileError) {
        self.rawValue = try reader.readUInt16LE(field: "feature")
    }

    /// Decodes exactly 2 bytes.
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
