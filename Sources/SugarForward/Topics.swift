import JSON
public import SugarWire

/// The topics and payloads `sugard-forward` publishes (a contract: see the README).
public struct ForwardTopics: Sendable {
    public let config: ForwardConfig

    public init(config: ForwardConfig) { self.config = config }

    /// `c026da013a7f` for `C0:26:DA:01:3A:7F`: the address lower-case without colons.
    public static func meterLevel(_ meter: String) -> String {
        String(meter.lowercased().filter { $0 != ":" })
    }

    var base: String { "\(self.config.topicPrefix)/\(self.config.gatewayID)" }
    public var status: String { "\(self.base)/status" }
    public func reading(_ meter: String) -> String { "\(self.base)/\(Self.meterLevel(meter))/reading" }
    public func state(_ meter: String) -> String { "\(self.base)/\(Self.meterLevel(meter))/state" }
    public var homeAssistantStatus: String { "\(self.config.homeAssistantPrefix)/status" }
    public func discovery(_ meter: String) -> String {
        "\(self.config.homeAssistantPrefix)/sensor/\(self.config.gatewayID)_\(Self.meterLevel(meter))/glucose/config"
    }

    /// The reading payload of a reading (the compact form `FollowReadings` sends): its compact
    /// text read back as ``payload(_:from:)`` reads a reply's.
    public static func payloadBytes(_ r: Wire.CompactReading) throws(WireError) -> [UInt8] {
        var compact: [UInt8] = []
        r.write(into: &compact)
        var reader = JSONReader(compact)
        return Self.payload(try Wire.CompactReading.Text(reading: &reader), from: reader)
    }

    /// The reading payload of a reading read as text from `reader`'s bytes (a `FollowReadings`
    /// reply): its values copied as sugard wrote them, the `id` made from its parts.
    public static func payload(_ t: Wire.CompactReading.Text, from reader: JSONReader) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(384)
        func text(_ range: Range<Int>?) {
            if let range { reader.appendText(range, to: &out) } else { out.append(contentsOf: "null".utf8) }
        }
        // `id` is "<meter>/<epoch>/<sequence>" (``ReadingExport/identifier(_:)``): the meter's JSON
        // string with the two numbers put in before its closing quote.
        out.append(contentsOf: #"{"id":"#.utf8)
        JSONValue.string(t.meter).write(into: &out)
        out.removeLast()
        out.append(UInt8(ascii: "/"))
        JSONValue.int(t.epoch).write(into: &out)
        out.append(UInt8(ascii: "/"))
        JSONValue.int(t.sequenceNumber).write(into: &out)
        out.append(contentsOf: #"","meter":"#.utf8)
        JSONValue.string(t.meter).write(into: &out)
        out.append(contentsOf: #","sequenceNumber":"#.utf8)
        JSONValue.int(t.sequenceNumber).write(into: &out)
        out.append(contentsOf: #","time":"#.utf8)
        text(t.iso)
        out.append(contentsOf: #","epochMillis":"#.utf8)
        JSONValue.int(t.epochMillis).write(into: &out)
        out.append(contentsOf: #","mgdL":"#.utf8)
        text(t.mgdL)
        out.append(contentsOf: #","mmolL":"#.utf8)
        text(t.mmolL)
        out.append(contentsOf: #","flags":"#.utf8)
        text(t.flags)
        out.append(contentsOf: #","sampleType":"#.utf8)
        text(t.type?.name)
        out.append(contentsOf: #","sampleLocation":"#.utf8)
        text(t.sampleLocation?.name)
        out.append(contentsOf: #","meal":"#.utf8)
        text(t.meal?.name)
        out.append(contentsOf: t.controlSolution ? #","controlSolution":true"#.utf8 : #","controlSolution":false"#.utf8)
        out.append(contentsOf: #","person":"#.utf8)
        text(t.person)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The Home Assistant discovery config of one meter's glucose sensor. `identity` is the
    /// `MeterIdentity` object of `ListMeters` (or nil when sugard did not know it yet).
    public func discoveryConfig(meter: String, identity: Wire.MeterIdentity?) -> JSONValue {
        let level = Self.meterLevel(meter)
        let mmol = self.config.unit == .mmol
        var device: JSONObject = [
            "identifiers": .array([.string("sugard_\(self.config.gatewayID)_\(level)")]),
            "name": .string(identity?.displayName ?? "Glucose meter \(meter)"),
        ]
        for (key, text) in [("manufacturer", identity?.manufacturer), ("model", identity?.model), ("serial_number", identity?.serialNumber)] {
            if let text, !text.isEmpty { device[key] = .string(text) }
        }
        if let firmware = identity?.firmware, !firmware.isEmpty { device["sw_version"] = .string(firmware) }
        let object: JSONObject = [
            "name": "Glucose",
            "device_class": "blood_glucose_concentration",
            "state_class": "measurement",
            "unit_of_measurement": .string(mmol ? "mmol/L" : "mg/dL"),
            "state_topic": .string(self.state(meter)),
            "value_template": .string(mmol ? "{{ value_json.mmolL }}" : "{{ value_json.mgdL }}"),
            "json_attributes_topic": .string(self.state(meter)),
            "unique_id": .string("sugard_\(self.config.gatewayID)_\(level)_glucose"),
            "availability_topic": .string(self.status),
            "payload_available": "online",
            "payload_not_available": "offline",
            "device": .object(device),
        ]
        return .object(object)
    }
}
