public import HubStore
import JSON

/// What one message on the hub's topics is. Parsed tolerantly: unknown keys are ignored, `kind`
/// and `person` are optional, so gateways of newer and older versions mix.
public enum HubMessage: Sendable, Equatable {
    /// `<prefix>/<gateway>/<meter>/reading`: one reading (it needs an `id`).
    case reading(HubReading)
    /// `<prefix>/<gateway>/alert` (or a meter's own level): an alert raised or cleared.
    case alert(HubAlert)
    /// `<prefix>/<gateway>/status`: `online`, or `offline` (also the gateway's will, and an empty payload).
    case status(gateway: String, online: Bool)
    /// `<prefix>/<gateway>/health`: the gateway's health message.
    case health(gateway: String, Health)
    /// Not for the hub, or malformed: acknowledged and logged (never retried forever).
    case ignored(reason: String)

    /// A health message, with its objects kept as JSON text for the hub's `jsonb` columns.
    public struct Health: Sendable, Equatable {
        /// The gateway's sugard version.
        public var version: String?
        /// Its adapter state, as JSON text.
        public var adapter: String?
        /// Its storage state, as JSON text (`ok` becomes `{"ok":true}`, another string `{"error":…}`).
        public var storage: String?
        /// The identity of the gateway's database.
        public var databaseID: String?
        /// The meters it lists.
        public var meters: [HubMeter]
        /// Its active alerts (those it no longer lists are cleared).
        public var alerts: [HubAlert]
        /// The whole message as received.
        public var payload: String
    }

    /// Parses a message received on `topic` under `prefix`.
    public static func parse(topic: String, payload: [UInt8], prefix: String) -> HubMessage {
        guard topic.hasPrefix(prefix + "/") else { return .ignored(reason: "topic outside \(prefix)/") }
        let levels = topic.dropFirst(prefix.count + 1).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        switch (levels.count, levels.last) {
        case (2, "status"):
            switch String(decoding: payload, as: UTF8.self) {
            case "online": return .status(gateway: levels[0], online: true)
            case "offline", "": return .status(gateway: levels[0], online: false)
            case let other: return .ignored(reason: "status \"\(other.prefix(20))\" is neither online nor offline")
            }
        case (2, "health"):
            guard let object = Self.object(payload) else { return .ignored(reason: "health is not a JSON object") }
            return .health(gateway: levels[0], Self.health(object, gateway: levels[0], payload: payload))
        case (3, "reading"):
            guard let object = Self.object(payload) else { return .ignored(reason: "reading is not a JSON object") }
            guard let id = object["id"]?.stringValue, !id.isEmpty else { return .ignored(reason: "reading without an id") }
            let reading = HubReading(
                gateway: levels[0], id: id, meter: object["meter"]?.stringValue ?? levels[1], person: object["person"]?.stringValue,
                sequenceNumber: object["sequenceNumber"]?.intValue, time: object["time"]?.stringValue,
                epochMillis: object["epochMillis"]?.intValue, mgdl: object["mgdL"]?.doubleValue, mmolL: object["mmolL"]?.doubleValue,
                kind: object["kind"]?.stringValue, controlSolution: object["controlSolution"]?.boolValue ?? false,
                payload: String(decoding: payload, as: UTF8.self))
            return .reading(reading)
        case (3, "alert"), (2, "alert"):
            // sugard-forward publishes <prefix>/<gateway>/alert (the meter in the payload); a
            // meter's own level is taken too.
            guard let object = Self.object(payload) else { return .ignored(reason: "alert is not a JSON object") }
            return .alert(
                Self.alert(
                    object, gateway: levels[0], meterLevel: levels.count == 3 ? levels[1] : nil, payload: JSONValue.object(object).serialized()))
        default:
            return .ignored(reason: "not a reading, alert, status or health topic")
        }
    }

    /// The payload as a JSON object (at most 16 levels deep); nil when it is not one.
    static func object(_ payload: [UInt8]) -> JSONObject? {
        guard let value = try? JSONValue(parsing: payload, maxDepth: 16) else { return nil }
        return value.objectValue
    }

    /// An alert from its object, tolerating older forms: kind from `rule`, `kind` or `type`; the id
    /// made from kind and meter when absent; active unless `active` is false or `state` is
    /// `cleared`/`resolved`.
    static func alert(_ o: JSONObject, gateway: String, meterLevel: String?, payload: String) -> HubAlert {
        let kind = o["rule"]?.stringValue ?? o["kind"]?.stringValue ?? o["type"]?.stringValue
        let meter = o["meter"]?.stringValue ?? meterLevel
        let id = o["id"]?.stringValue ?? [kind ?? "alert", meter ?? ""].joined(separator: "/")
        return HubAlert(
            gateway: gateway, id: id, kind: kind, meter: meter, person: o["person"]?.stringValue,
            active: o["active"]?.boolValue ?? (o["state"]?.stringValue.map { $0 != "cleared" && $0 != "resolved" } ?? true),
            message: o["message"]?.stringValue ?? o["text"]?.stringValue, payload: payload)
    }

    /// A health message from its object; meters without an id are skipped, every listed alert is active.
    static func health(_ o: JSONObject, gateway: String, payload: [UInt8]) -> Health {
        /// A health field as text for the page: nil for absent or null, a bare string as
        /// `{"error": ...}` JSON.
        func text(_ v: JSONValue?) -> String? {
            guard let v, !v.isNull else { return nil }
            if case .string = v { return JSONValue.object(["error": v]).serialized() }
            return v.serialized()
        }
        var meters: [HubMeter] = []
        for m in o["meters"]?.arrayValue ?? [] {
            guard let mo = m.objectValue, let id = mo["id"]?.stringValue else { continue }
            let last = mo["lastSync"]
            meters.append(
                HubMeter(
                    id: id, name: mo["name"]?.stringValue, person: mo["person"]?.stringValue,
                    lastSync: last?.stringValue ?? last?.objectValue?["time"]?.stringValue,
                    lastSyncResult: last?.objectValue?["result"]?.stringValue ?? mo["lastSyncResult"]?.stringValue,
                    overdue: mo["overdue"]?.boolValue ?? false, readingCount: mo["readingCount"]?.intValue))
        }
        var alerts: [HubAlert] = []
        for a in o["alerts"]?.arrayValue ?? [] {
            guard let ao = a.objectValue else { continue }
            var alert = Self.alert(ao, gateway: gateway, meterLevel: nil, payload: a.serialized())
            alert.active = true
            alerts.append(alert)
        }
        let storage: String?
        if let s = o["storage"], case .string(let word) = s, word == "ok" {
            storage = JSONValue.object(["ok": true]).serialized()
        } else {
            storage = text(o["storage"])
        }
        return Health(
            version: o["version"]?.stringValue, adapter: text(o["adapter"]), storage: storage, databaseID: o["databaseId"]?.stringValue,
            meters: meters, alerts: alerts, payload: String(decoding: payload, as: UTF8.self))
    }

    /// Stores the message; throws when it could not be committed (the caller then withholds the
    /// acknowledgement). An ignored message stores nothing.
    public func apply(to store: HubStore) throws(PostgresError) {
        switch self {
        case .reading(let r): try store.store(r)
        case .alert(let a): try store.record(a)
        case .status(let gateway, let online): try store.setStatus(gateway: gateway, online: online)
        case .health(let gateway, let h):
            try store.setHealth(
                gateway: gateway, version: h.version, adapter: h.adapter, storage: h.storage, databaseID: h.databaseID, meters: h.meters,
                alerts: h.alerts, payload: h.payload)
        case .ignored: break
        }
    }
}
