/// 16-bit Bluetooth SIG UUIDs the glucose daemon uses (GLS §1, DIS, CTS).
public enum GlucoseUUID {
    /// Glucose service.
    public static let glucoseService: UInt16 = 0x1808
    /// Glucose Measurement characteristic (notify).
    public static let glucoseMeasurement: UInt16 = 0x2A18
    /// Glucose Measurement Context characteristic (notify, optional).
    public static let glucoseMeasurementContext: UInt16 = 0x2A34
    /// Glucose Feature characteristic (read).
    public static let glucoseFeature: UInt16 = 0x2A51
    /// Record Access Control Point (write + indicate).
    public static let recordAccessControlPoint: UInt16 = 0x2A52
    /// Date Time characteristic (Roche meters put one inside the glucose service).
    public static let dateTime: UInt16 = 0x2A08
    /// Current Time Service.
    public static let currentTimeService: UInt16 = 0x1805
    /// Current Time characteristic.
    public static let currentTime: UInt16 = 0x2A2B
    /// Device Information service.
    public static let deviceInformationService: UInt16 = 0x180A
    /// Manufacturer Name String (DIS).
    public static let manufacturerName: UInt16 = 0x2A29
    /// Model Number String (DIS).
    public static let modelNumber: UInt16 = 0x2A24
    /// Serial Number String (DIS).
    public static let serialNumber: UInt16 = 0x2A25
    /// Firmware Revision String (DIS).
    public static let firmwareRevision: UInt16 = 0x2A26
    /// Client Characteristic Configuration descriptor.
    public static let clientCharacteristicConfiguration: UInt16 = 0x2902

    /// The full 128-bit UUID string BlueZ uses for a 16-bit SIG UUID, lowercase:
    /// `00002a18-0000-1000-8000-00805f9b34fb`.
    public static func uuidString(_ short: UInt16) -> String {
        let digits = String(short, radix: 16)
        return "0000" + String(repeating: "0", count: 4 - digits.count) + digits + "-0000-1000-8000-00805f9b34fb"
    }

    /// The 16-bit UUID in a 128-bit SIG-base UUID string (any case), or nil for another UUID.
    public static func shortUUID(_ uuidString: String) -> UInt16? {
        let lower = uuidString.lowercased()
        guard lower.count == 36, lower.hasPrefix("0000"), lower.hasSuffix("-0000-1000-8000-00805f9b34fb") else {
            return nil
        }
        return UInt16(lower.dropFirst(4).prefix(4), radix: 16)
    }
}
