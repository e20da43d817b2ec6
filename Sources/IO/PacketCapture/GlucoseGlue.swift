import GlucoseProfile

// Builder calls that take codec values. Decoding of
// glucose payloads belongs to the layer that folds `GATTEvent`s; this module only moves bytes.

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
