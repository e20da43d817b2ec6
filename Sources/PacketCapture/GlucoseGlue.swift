import GlucoseProfile

// The Glucose Profile's UUIDs as `BluetoothUUID`s, and builder calls that take codec values. Decoding of
// glucose payloads belongs to the layer that folds `GATTEvent`s; this module only moves bytes.

extension BluetoothUUID {
    /// Glucose service (0x1808).
    public static let glucoseService = BluetoothUUID(GlucoseUUID.glucoseService)
    /// Glucose Measurement (0x2A18).
    public static let glucoseMeasurement = BluetoothUUID(GlucoseUUID.glucoseMeasurement)
    /// Glucose Measurement Context (0x2A34).
    public static let glucoseMeasurementContext = BluetoothUUID(GlucoseUUID.glucoseMeasurementContext)
    /// Glucose Feature (0x2A51).
    public static let glucoseFeature = BluetoothUUID(GlucoseUUID.glucoseFeature)
    /// Record Access Control Point (0x2A52).
    public static let recordAccessControlPoint = BluetoothUUID(GlucoseUUID.recordAccessControlPoint)
    /// Date Time (0x2A08), inside the glucose service on Roche meters.
    public static let dateTime = BluetoothUUID(GlucoseUUID.dateTime)
    /// Device Information service (0x180A).
    public static let deviceInformationService = BluetoothUUID(GlucoseUUID.deviceInformationService)
}

extension CaptureBuilder {
    /// Notification carrying an encoded Glucose Profile value (measurement, context…).
    public mutating func notify(handle: UInt16, attribute: UInt16, _ value: some GlucoseProfileEncodable) {
        var bytes: [UInt8] = []
        value.serialize(into: &bytes)
        self.notify(handle: handle, attribute: attribute, value: bytes)
    }

    /// Indication (and confirmation) carrying an encoded Glucose Profile value (RACP response…).
    public mutating func indicate(handle: UInt16, attribute: UInt16, _ value: some GlucoseProfileEncodable) {
        var bytes: [UInt8] = []
        value.serialize(into: &bytes)
        self.indicate(handle: handle, attribute: attribute, value: bytes)
    }

    /// Write Request (and response, or `error`) carrying an encoded value (RACP request…).
    public mutating func write(
        handle: UInt16, attribute: UInt16, _ value: some GlucoseProfileEncodable, error: ATTErrorCode? = nil
    ) {
        var bytes: [UInt8] = []
        value.serialize(into: &bytes)
        self.write(handle: handle, attribute: attribute, value: bytes, withResponse: true, error: error)
    }
}
