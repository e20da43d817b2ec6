import GlucoseProfile
import JSON
public import SugarWire

/// The topics and payloads `sugard-forward` publishes (a contract: see the README).
public struct ForwardTopics: Sendable {
    /// The configuration the topics come from (`topic_prefix`, `gateway_id`, Home Assistant's prefix, unit).
    public let config: ForwardConfig

    /// The topics of `config`.
    public init(config: ForwardConfig) { self.config = config }

    /// `c026da013a7f` for `C0:26:DA:01:3A:7F`: the address lower-case without colons.
    public static func meterLevel(_ meter: String) -> String {
        String(meter.lowercased().filter { $0 != ":" })
    }

    /// `<topic_prefix>/<gateway_id>`.
    var base: String { "\(self.config.topicPrefix)/\(self.config.gatewayID)" }
    /// `<topic_prefix>/<gateway_id>/status`: retained `online`, or `offline` (also the will).
    public var status: String { "\(self.base)/status" }
    /// Alert events (QoS 1, not retained): `<topic_prefix>/<gateway_id>/alert`.
    public var alert: String { "\(self.base)/alert" }

    /// The gateway's health message (``GatewayHealthTopic``).
    public var health: String { "\(self.base)/health" }
    /// `<topic_prefix>/<gateway_id>/<meter>/reading`: every reading (QoS 1, not retained).
    public func reading(_ meter: String) -> String { "\(self.base)/\(Self.meterLevel(meter))/reading" }
    /// `<topic_prefix>/<gateway_id>/<meter>/state`: the newest glucose reading (retained).
    public func state(_ meter: String) -> String { "\(self.base)/\(Self.meterLevel(meter))/state" }
    /// `<homeassistant_prefix>/status`: Home Assistant's birth message (`online`) asks for discovery again.
    public var homeAssistantStatus: String { "\(self.config.homeAssistantPrefix)/status" }
    /// `<homeassistant_prefix>/sensor/<gateway_id>_<meter>/glucose/config`: the glucose sensor's discovery.
    public func discovery(_ meter: String) -> String {
        "\(self.config.homeAssistantPrefix)/sensor/\(self.config.gatewayID)_\(Self.meterLevel(meter))/glucose/config"
    }

    /// The reading payload of a reading (the compact form `FollowReadings` sends): its compact
    /// text read back as ``payload(_:from:)`` reads a reply's.
    /// Throws a `WireError` when the written text does not read back as a compact reading.
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
        // What people read: mg/dL as an integer, mmol/L with one decimal (the exact values stay
        // in CSV, JSON and FHIR exports).
        let (mgdL, mmolL) = Self.values(t, from: reader)
        out.append(contentsOf: #","mgdL":"#.utf8)
        Self.write(mgdL, digits: 0, into: &out)
        out.append(contentsOf: #","mmolL":"#.utf8)
        Self.write(mmolL, digits: 1, into: &out)
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
        out.append(contentsOf: #","kind":""#.utf8)
        out.append(contentsOf: t.kind.rawValue.utf8)
        // The time as the meter showed it: ISO 8601 with the reading's own UTC offset.
        out.append(contentsOf: #"","measuredAt":"#.utf8)
        text(t.local)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The reading's mg/dL and mmol/L (nil for null), read from `reader`'s bytes.
    static func values(_ t: Wire.CompactReading.Text, from reader: JSONReader) -> (mgdL: Double?, mmolL: Double?) {
        func number(_ range: Range<Int>?) -> Double? {
            guard let range else { return nil }
            var at = reader.reading(range)
            // ``Wire/CompactReading/Text`` already checked the number.
            return try? at.readDouble()
        }
        return (number(t.mgdL), number(t.mmolL))
    }

    /// A value rounded to `digits` decimals as a JSON number (`null` for nil): `88` for mg/dL,
    /// `4.9` for mmol/L.
    static func write(_ value: Double?, digits: Int, into out: inout [UInt8]) {
        guard let value, value.isFinite else { return out.append(contentsOf: "null".utf8) }
        if digits == 0 {
            JSONValue.int(Int64(value.rounded())).write(into: &out)
        } else {
            out.append(contentsOf: ReadingExport.formatted(value, digits: digits).utf8)
        }
    }

    /// The Home Assistant discovery config of one meter's glucose sensor: its state comes only
    /// from `glucose` readings (the state topic carries no other kind); its attributes are the
    /// reading's `measured_at`, `kind`, `meal` and `id`. `identity` is the
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
        device["via_device"] = .string("sugard_\(self.config.gatewayID)")
        let object: JSONObject = [
            "name": "Glucose",
            "device_class": "blood_glucose_concentration",
            "state_class": "measurement",
            "unit_of_measurement": .string(mmol ? "mmol/L" : "mg/dL"),
            "state_topic": .string(self.state(meter)),
            "value_template": .string(mmol ? "{{ value_json.mmolL }}" : "{{ value_json.mgdL }}"),
            "suggested_display_precision": .int(mmol ? 1 : 0),
            "json_attributes_topic": .string(self.state(meter)),
            "json_attributes_template": .string(
                "{{ {'measured_at': value_json.measuredAt, 'kind': value_json.kind, 'meal': value_json.meal, 'id': value_json.id} | tojson }}"),
            "unique_id": .string("sugard_\(self.config.gatewayID)_\(level)_glucose"),
            "availability_topic": .string(self.status),
            "payload_available": "online",
            "payload_not_available": "offline",
            "device": .object(device),
        ]
        return .object(object)
    }
}
