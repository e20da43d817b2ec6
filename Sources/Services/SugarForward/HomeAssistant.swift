import GlucoseProfile
import JSON
import MQTT
public import SugarWire

/// One meter's topics, made once per meter (not per message).
struct MeterTopics: Sendable {
    /// `<base>/<meter>/reading`: every reading.
    var reading: String
    /// `<base>/<meter>/state`: the newest glucose reading (retained).
    var state: String
    /// `<base>/<meter>/low`: "Glucose low", `ON`/`OFF` (retained).
    var low: String
    /// `<base>/<meter>/high`: "Glucose high", `ON`/`OFF` (retained).
    var high: String
    /// `<base>/<meter>/event`: the "Reading" event entity.
    var event: String
    /// `<base>/<meter>/last_synced`: its last good sync, ISO 8601 UTC (retained).
    var lastSynced: String
    /// `<base>/<meter>/sync_overdue`: `ON`/`OFF` (retained).
    var syncOverdue: String
}

/// A person's topics (the readings of the meters assigned to them), made once per person.
struct PersonTopics: Sendable {
    /// `<base>/person/<person>/state`: the person's newest glucose reading (retained).
    var state: String
    /// `<base>/person/<person>/low` (retained).
    var low: String
    /// `<base>/person/<person>/high` (retained).
    var high: String
    /// `<base>/person/<person>/event`.
    var event: String
}

/// What one reading publishes besides its reading message, decided when it arrives.
struct ReadingUpdates: Sendable, Equatable {
    /// The retained state topic (the glucose sensor): a `glucose` reading newer than the newest.
    var state: Bool
    /// "Glucose low" and "Glucose high": a glucose value, LO or HI newer than the newest.
    var level: Bool
    /// The same for the reading's person (the newest of all their meters).
    var personState = false
    /// The same for "Glucose low" and "Glucose high" of the person.
    var personLevel = false
}

/// The topics and messages of the Home Assistant entities: per meter, per person and the gateway's.
extension ForwardTopics {
    /// The topics of `meter`, under `<topic_prefix>/<gateway_id>/<meter level>`.
    func meterTopics(_ meter: String) -> MeterTopics {
        let base = "\(self.base)/\(Self.meterLevel(meter))"
        return MeterTopics(
            reading: base + "/reading", state: base + "/state", low: base + "/low", high: base + "/high", event: base + "/event",
            lastSynced: base + "/last_synced", syncOverdue: base + "/sync_overdue")
    }

    /// A person's topic level: the name in lower case, each character other than a-z and 0-9 as
    /// `_`, then `_` and the first 6 hex digits of the name's SHA-1 (so "Mia" and "mia" stay two):
    /// `mia_1b2c3d`.
    public static func personLevel(_ person: String) -> String {
        let slug = String(person.lowercased().unicodeScalars.map { ("a"..."z").contains($0) || ("0"..."9").contains($0) ? Character($0) : "_" })
        let digest = SHA1.digest(Array(person.utf8)).prefix(3)
        let hex = digest.map { byte in String(byte >> 4, radix: 16) + String(byte & 0x0F, radix: 16) }.joined()
        return slug + "_" + hex
    }

    /// The topics of `person`, under `<topic_prefix>/<gateway_id>/person/<person level>`.
    func personTopics(_ person: String) -> PersonTopics {
        let base = "\(self.base)/person/\(Self.personLevel(person))"
        return PersonTopics(state: base + "/state", low: base + "/low", high: base + "/high", event: base + "/event")
    }

    /// `<prefix>/<gateway>/adapter`: `ON` while the gateway's Bluetooth adapter is missing or off.
    public var adapter: String { "\(self.base)/adapter" }

    /// The messages of one reading, in the order they go out: the reading; with Home Assistant
    /// discovery, its event (not for a reading without a value); when it updates the glucose state,
    /// the state; when it is the newest glucose value, LO or HI, "Glucose low" and "Glucose high"
    /// (`ON`/`OFF`, retained).
    /// With a person (the meter is assigned to one), the same again on the person's topics.
    func messages(
        _ topics: MeterTopics, person: PersonTopics?, payload: [UInt8], kind: Wire.ReadingKind, mgdL: Double?,
        updates: ReadingUpdates
    ) -> [MQTTMessage] {
        var out = [MQTTMessage(topic: topics.reading, payload: payload, qos: 1, retain: false)]
        if updates.state { out.append(MQTTMessage(topic: topics.state, payload: payload, qos: 1, retain: true)) }
        guard self.config.homeAssistantDiscovery else { return out }
        let event = Self.eventPayload(payload, kind: kind)
        let (low, high) = self.levels(kind: kind, mgdL: mgdL)
        func entities(event eventTopic: String, low lowTopic: String, high highTopic: String, level: Bool) {
            if let event { out.append(MQTTMessage(topic: eventTopic, payload: event, qos: 1, retain: false)) }
            if level {
                out.append(MQTTMessage(topic: lowTopic, payload: Array((low ? "ON" : "OFF").utf8), qos: 1, retain: true))
                out.append(MQTTMessage(topic: highTopic, payload: Array((high ? "ON" : "OFF").utf8), qos: 1, retain: true))
            }
        }
        entities(event: topics.event, low: topics.low, high: topics.high, level: updates.level)
        if let person {
            if updates.personState { out.append(MQTTMessage(topic: person.state, payload: payload, qos: 1, retain: true)) }
            entities(event: person.event, low: person.low, high: person.high, level: updates.personLevel)
        }
        return out
    }

    /// Whether a reading of this kind and value is low and high: LO is low, HI is high, a glucose
    /// value is low below `glucose_low_mgdl` and high above `glucose_high_mgdl`.
    public func levels(kind: Wire.ReadingKind, mgdL: Double?) -> (low: Bool, high: Bool) {
        switch kind {
        case .lo: return (true, false)
        case .hi: return (false, true)
        case .glucose:
            guard let mgdL else { return (false, false) }
            return (mgdL < self.config.glucoseLowMgdL, mgdL > self.config.glucoseHighMgdL)
        case .controlSolution, .ketone, .noValue: return (false, false)
        }
    }

    /// The event entity's payload: `{"event_type": ..., <the reading payload's keys>}` (Home
    /// Assistant keeps the other keys as the event's attributes); nil for a reading without a value.
    static func eventPayload(_ payload: [UInt8], kind: Wire.ReadingKind) -> [UInt8]? {
        guard let type = kind.eventType, payload.first == UInt8(ascii: "{") else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(payload.count + 32)
        out.append(contentsOf: #"{"event_type":""#.utf8)
        out.append(contentsOf: type.utf8)
        out.append(contentsOf: #"","#.utf8)
        out.append(contentsOf: payload.dropFirst())
        return out
    }

    // MARK: Discovery

    var gatewayDevice: String { "sugard_\(self.config.gatewayID)" }

    /// The gateway's Home Assistant device (the meters' `via_device`).
    var gatewayDeviceJSON: JSONValue {
        ["identifiers": .array([.string(self.gatewayDevice)]), "name": .string("sugard gateway \(self.config.gatewayID)"),
         "manufacturer": "sugard", "model": "sugard-forward"]
    }

    /// Every discovery config of one meter: (topic, config), the glucose sensor first.
    public func meterDiscovery(meter: String, identity: Wire.MeterIdentity?) -> [(topic: String, config: JSONValue)] {
        let level = Self.meterLevel(meter)
        let node = "\(self.config.gatewayID)_\(level)"
        let prefix = self.config.homeAssistantPrefix
        let topics = self.meterTopics(meter)
        let glucose = self.discoveryConfig(meter: meter, identity: identity)
        let device = glucose["device"] ?? .null
        func entity(_ name: String, _ object: String, _ extra: JSONObject) -> JSONValue {
            var config: JSONObject = [
                "name": .string(name),
                "unique_id": .string("sugard_\(node)_\(object)"),
                "availability_topic": .string(self.status),
                "payload_available": "online",
                "payload_not_available": "offline",
                "device": device,
            ]
            for entry in extra.entries { config[entry.key] = entry.value }
            return .object(config)
        }
        return [
            (self.discovery(meter), glucose),
            ("\(prefix)/binary_sensor/\(node)/glucose_low/config",
             entity("Glucose low", "glucose_low", ["state_topic": .string(topics.low), "icon": "mdi:arrow-down-bold"])),
            ("\(prefix)/binary_sensor/\(node)/glucose_high/config",
             entity("Glucose high", "glucose_high", ["state_topic": .string(topics.high), "icon": "mdi:arrow-up-bold"])),
            ("\(prefix)/event/\(node)/reading/config",
             entity("Reading", "reading", [
                "state_topic": .string(topics.event),
                "event_types": ["glucose", "lo", "hi", "control_solution", "ketone"],
                "icon": "mdi:water",
             ])),
            ("\(prefix)/sensor/\(node)/last_synced/config",
             entity("Last synced", "last_synced", ["state_topic": .string(topics.lastSynced), "device_class": "timestamp"])),
            ("\(prefix)/binary_sensor/\(node)/sync_overdue/config",
             entity("Sync overdue", "sync_overdue", ["state_topic": .string(topics.syncOverdue), "device_class": "problem"])),
        ]
    }

    /// A person's discovery configs (a device named after the person, under the gateway): "Glucose",
    /// "Glucose low", "Glucose high" and "Reading", fed by every meter assigned to them.
    public func personDiscovery(person: String) -> [(topic: String, config: JSONValue)] {
        let node = "\(self.config.gatewayID)_person_\(Self.personLevel(person))"
        let prefix = self.config.homeAssistantPrefix
        let topics = self.personTopics(person)
        let mmol = self.config.unit == .mmol
        let device: JSONValue = [
            "identifiers": .array([.string("sugard_\(node)")]), "name": .string(person), "model": "person",
            "manufacturer": "sugard", "via_device": .string(self.gatewayDevice),
        ]
        func entity(_ name: String, _ object: String, _ extra: JSONObject) -> JSONValue {
            var config: JSONObject = [
                "name": .string(name), "unique_id": .string("sugard_\(node)_\(object)"), "availability_topic": .string(self.status),
                "payload_available": "online", "payload_not_available": "offline", "device": device,
            ]
            for entry in extra.entries { config[entry.key] = entry.value }
            return .object(config)
        }
        return [
            ("\(prefix)/sensor/\(node)/glucose/config",
             entity("Glucose", "glucose", [
                "device_class": "blood_glucose_concentration", "state_class": "measurement",
                "unit_of_measurement": .string(mmol ? "mmol/L" : "mg/dL"), "state_topic": .string(topics.state),
                "value_template": .string(mmol ? "{{ value_json.mmolL }}" : "{{ value_json.mgdL }}"),
                "suggested_display_precision": .int(mmol ? 1 : 0), "json_attributes_topic": .string(topics.state),
                "json_attributes_template": .string(
                    "{{ {'measured_at': value_json.measuredAt, 'kind': value_json.kind, 'meal': value_json.meal, 'id': value_json.id, 'meter': value_json.meter} | tojson }}"),
             ])),
            ("\(prefix)/binary_sensor/\(node)/glucose_low/config",
             entity("Glucose low", "glucose_low", ["state_topic": .string(topics.low), "icon": "mdi:arrow-down-bold"])),
            ("\(prefix)/binary_sensor/\(node)/glucose_high/config",
             entity("Glucose high", "glucose_high", ["state_topic": .string(topics.high), "icon": "mdi:arrow-up-bold"])),
            ("\(prefix)/event/\(node)/reading/config",
             entity("Reading", "reading", [
                "state_topic": .string(topics.event), "event_types": ["glucose", "lo", "hi", "control_solution", "ketone"],
                "icon": "mdi:water",
             ])),
        ]
    }

    /// The gateway's discovery configs: "Bluetooth adapter" (device_class problem: on while the
    /// adapter is missing or powered off).
    public func gatewayDiscovery() -> [(topic: String, config: JSONValue)] {
        let config: JSONObject = [
            "name": "Bluetooth adapter",
            "unique_id": .string("sugard_\(self.config.gatewayID)_adapter"),
            "device_class": "problem",
            "state_topic": .string(self.adapter),
            "availability_topic": .string(self.status),
            "payload_available": "online",
            "payload_not_available": "offline",
            "device": self.gatewayDeviceJSON,
        ]
        return [("\(self.config.homeAssistantPrefix)/binary_sensor/\(self.config.gatewayID)/adapter/config", .object(config))]
    }
}
