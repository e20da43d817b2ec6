public import JSON

extension Wire {
    /// `io.sugard.Forward`'s `type Sink`: one of sugard-forward's sinks and its delivery state.
    public struct ForwardSink: WireValue, Hashable {
        /// Which kind of sink it is.
        public enum Kind: String, WireEnum { case mqtt, nightscout }
        /// `connected`; `retrying`: a transient failure, retried with backoff; `failing`: credentials, TLS,
        /// an unknown host, a refused API secret or a batch the site will not take, retried slowly.
        public enum State: String, WireEnum { case connected, retrying, failing }
        /// A Nightscout sink's own state.
        public enum NightscoutState: String, WireEnum {
            /// Everything offered so far is delivered.
            case idle
            /// A batch is on its way.
            case delivering
            /// A transient failure (refused, timeout, 5xx, TLS): retried with capped backoff.
            case retrying
            /// 401/403: "Nightscout refused the API secret"; retried slowly.
            case refused
            /// Another 4xx: the server's message; the same batch is offered again later.
            case paused
        }

        /// `mqtt` for the MQTT sink; a Nightscout sink's section name (`nightscout` for the keys before any section).
        public var name: String
        /// MQTT or Nightscout.
        public var kind: Kind
        /// The MQTT sink's `mqtt_url`.
        public var broker: String?
        /// A Nightscout sink's site.
        public var url: String?
        /// The one person whose readings the sink takes; nil: every reading, unassigned meters' too.
        public var person: String?
        /// Connected, retrying or failing.
        public var state: State
        /// A Nightscout sink's own state.
        public var nightscoutState: NightscoutState?
        /// Why it is not connected (for Nightscout: "Nightscout refused the API secret", or the site's message).
        public var reason: String?
        /// Readings held and not yet acknowledged by the broker or the site.
        public var pending: Int64
        /// When the last acknowledgement moved the saved cursor (epoch ms).
        public var lastDeliveryMillis: Int64?
        /// The saved cursor: the position in sugard's commit order delivered up to.
        public var cursor: Int64
        /// What the sink delivered since it started.
        public var delivered: Int64
        /// The sink's feed of sugard's readings is up.
        public var feedConnected: Bool
        /// Why the feed is not up.
        public var feedReason: String?
        /// The sugard database the sink's cursor is a position in.
        public var databaseId: String? = nil
        /// The last time sugard's database changed and the sink started over from its beginning.
        public var databaseReset: DatabaseReset? = nil

        /// A sink status with every field given.
        public init(
            name: String, kind: Kind, broker: String? = nil, url: String? = nil, person: String?, state: State,
            nightscoutState: NightscoutState? = nil, reason: String?, pending: Int64, lastDeliveryMillis: Int64?, cursor: Int64,
            delivered: Int64, feedConnected: Bool, feedReason: String?, databaseId: String? = nil, databaseReset: DatabaseReset? = nil
        ) {
            self.databaseId = databaseId
            self.databaseReset = databaseReset
            self.name = name
            self.kind = kind
            self.broker = broker
            self.url = url
            self.person = person
            self.state = state
            self.nightscoutState = nightscoutState
            self.reason = reason
            self.pending = pending
            self.lastDeliveryMillis = lastDeliveryMillis
            self.cursor = cursor
            self.delivered = delivered
            self.feedConnected = feedConnected
            self.feedReason = feedReason
        }

        /// Requires `name`, `kind`, `state`, `pending`, `cursor`, `delivered` and `feedConnected`; `broker`, `url`,
        /// `person`, `nightscoutState`, `reason`, `lastDeliveryMillis`, `feedReason`, `databaseId` and
        /// `databaseReset` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.name = try f.required("name")
            self.kind = try f.required("kind")
            self.broker = try f.optional("broker")
            self.url = try f.optional("url")
            self.person = try f.optional("person")
            self.state = try f.required("state")
            self.nightscoutState = try f.optional("nightscoutState")
            self.reason = try f.optional("reason")
            self.pending = try f.required("pending")
            self.lastDeliveryMillis = try f.optional("lastDeliveryMillis")
            self.cursor = try f.required("cursor")
            self.delivered = try f.required("delivered")
            self.feedConnected = try f.required("feedConnected")
            self.feedReason = try f.optional("feedReason")
            self.databaseId = try f.optional("databaseId")
            self.databaseReset = try f.optional("databaseReset")
        }

        /// The object with every key; a value that is absent is null.
        public var json: JSONValue {
            [
                "name": .string(self.name), "kind": self.kind.json, "broker": .from(self.broker), "url": .from(self.url),
                "person": .from(self.person), "state": self.state.json, "nightscoutState": .wire(self.nightscoutState),
                "reason": .from(self.reason), "pending": .int(self.pending), "lastDeliveryMillis": .from(self.lastDeliveryMillis),
                "cursor": .int(self.cursor), "delivered": .int(self.delivered), "feedConnected": .bool(self.feedConnected),
                "feedReason": .from(self.feedReason), "databaseId": .from(self.databaseId), "databaseReset": .wire(self.databaseReset),
            ]
        }
    }

    /// `type DatabaseReset (atMillis: int, previousDatabaseId: string, databaseId: string)`
    public struct DatabaseReset: WireValue, Hashable {
        /// When the sink noticed (epoch ms).
        public var atMillis: Int64
        /// The database its cursor belonged to.
        public var previousDatabaseId: String
        /// The database it started over from the beginning of (receivers drop readings they have, by id).
        public var databaseId: String

        /// A reset with every field given.
        public init(atMillis: Int64, previousDatabaseId: String, databaseId: String) {
            self.atMillis = atMillis
            self.previousDatabaseId = previousDatabaseId
            self.databaseId = databaseId
        }

        /// Requires `atMillis`, `previousDatabaseId` and `databaseId`.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.atMillis = try f.required("atMillis")
            self.previousDatabaseId = try f.required("previousDatabaseId")
            self.databaseId = try f.required("databaseId")
        }

        /// The object with every key.
        public var json: JSONValue {
            [
                "atMillis": .int(self.atMillis), "previousDatabaseId": .string(self.previousDatabaseId),
                "databaseId": .string(self.databaseId),
            ]
        }
    }

    /// `io.sugard.Forward.GetStatus() -> (sinks: []Sink, alerts: ?AlertsSummary)`
    public struct ForwardStatusReply: WireValue {
        /// The MQTT sink first (when it runs), then the Nightscout sinks in config file order.
        public var sinks: [ForwardSink]
        /// The alert rules' state (nil from a forwarder without alerts).
        public var alerts: ForwardAlertsSummary?

        /// A status reply.
        public init(sinks: [ForwardSink], alerts: ForwardAlertsSummary? = nil) {
            self.sinks = sinks
            self.alerts = alerts
        }

        /// Requires `sinks`; `alerts` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.sinks = try f.array("sinks")
            self.alerts = try f.optional("alerts")
        }

        /// `alerts` is left out when nil (a reply's absent optional field).
        public var json: JSONValue {
            var object: JSONObject = ["sinks": .wire(self.sinks)]
            if let alerts = self.alerts { object["alerts"] = alerts.json }
            return .object(object)
        }
    }

    /// `io.sugard.Forward`'s `type Alert`: one alert event (an alert firing, or resolved). The
    /// same keys as the MQTT `<topic_prefix>/<gateway_id>/alert` payload: `id` names the episode
    /// (its firing and its resolved event share it), `reading` is the reading's id
    /// (`<meter>/<epoch>/<sequence>`, as in the reading payload) or null, `time` ISO 8601 UTC,
    /// `value` the reading's mg/dL (null for LO, HI and rules without a reading).
    public struct ForwardAlert: WireValue, Hashable {
        /// The alert rule, with its snake_case wire name.
        public enum Rule: String, WireEnum {
            case low
            case urgentLow = "urgent_low"
            case high
            case syncOverdue = "sync_overdue"
            case gatewayFailed = "gateway_failed"
        }

        /// The alert started (`firing`) or ended (`resolved`).
        public enum State: String, WireEnum { case firing, resolved }

        /// Names the episode: its firing and its resolved event share it.
        public var id: String
        /// Which rule.
        public var rule: Rule
        /// Firing or resolved.
        public var state: State
        /// The person it is about, when one.
        public var person: String?
        /// The meter it is about, when one.
        public var meter: String?
        /// The reading's id (`<meter>/<epoch>/<sequence>`), when a reading set it off.
        public var reading: String?
        /// When, ISO 8601 UTC.
        public var time: String
        /// The same in epoch milliseconds.
        public var timeMillis: Int64
        /// The reading's mg/dL; nil for LO, HI and the meter and gateway rules.
        public var value: Double?
        /// One sentence for people.
        public var message: String

        /// An alert event; `time` is made from `timeMillis`.
        public init(
            id: String, rule: Rule, state: State, person: String?, meter: String?, reading: String?, timeMillis: Int64,
            value: Double?, message: String
        ) {
            self.id = id
            self.rule = rule
            self.state = state
            self.person = person
            self.meter = meter
            self.reading = reading
            self.time = Instant(epochMillis: timeMillis).iso
            self.timeMillis = timeMillis
            self.value = value
            self.message = message
        }

        /// Requires `id`, `rule`, `state`, `time`, `timeMillis` and `message`; `person`, `meter`, `reading` and
        /// `value` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.id = try f.required("id")
            self.rule = try f.required("rule")
            self.state = try f.required("state")
            self.person = try f.optional("person")
            self.meter = try f.optional("meter")
            self.reading = try f.optional("reading")
            self.time = try f.required("time")
            self.timeMillis = try f.required("timeMillis")
            self.value = try f.optional("value")
            self.message = try f.required("message")
        }

        /// The object with every key; a value that is absent is null.
        public var json: JSONValue {
            [
                "id": .string(self.id), "rule": self.rule.json, "state": self.state.json, "person": .from(self.person),
                "meter": .from(self.meter), "reading": .from(self.reading), "time": .string(self.time),
                "timeMillis": .int(self.timeMillis), "value": self.value.map { JSONValue.double($0) } ?? .null,
                "message": .string(self.message),
            ]
        }

        /// Who or what it is about: the person, else the meter, else "the gateway".
        public var subject: String { self.person ?? self.meter ?? "the gateway" }
    }

    /// `type Webhook`: one `[webhook NAME]` sink. state: idle (everything delivered), delivering,
    /// retrying (the last attempt failed: `reason`); pending: alert events not delivered yet.
    public struct ForwardWebhook: WireValue, Hashable {
        /// `idle` (all delivered), `delivering`, or `retrying` (the last attempt failed).
        public enum State: String, WireEnum { case idle, delivering, retrying }

        /// The `NAME` of its `[webhook NAME]` section.
        public var name: String
        /// Where alert events are posted.
        public var url: String
        /// `json`, `ntfy` or `gotify`.
        public var format: String
        /// Idle, delivering or retrying.
        public var state: State
        /// The last failure, while retrying.
        public var reason: String?
        /// Alert events not delivered yet.
        public var pending: Int64
        /// When the last event was delivered (epoch ms).
        public var lastDeliveryMillis: Int64?

        /// A webhook status with every field given.
        public init(
            name: String, url: String, format: String, state: State, reason: String?, pending: Int64, lastDeliveryMillis: Int64?
        ) {
            self.name = name
            self.url = url
            self.format = format
            self.state = state
            self.reason = reason
            self.pending = pending
            self.lastDeliveryMillis = lastDeliveryMillis
        }

        /// Requires `name`, `url`, `format`, `state` and `pending`; `reason` and `lastDeliveryMillis` may be null
        /// or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.name = try f.required("name")
            self.url = try f.required("url")
            self.format = try f.required("format")
            self.state = try f.required("state")
            self.reason = try f.optional("reason")
            self.pending = try f.required("pending")
            self.lastDeliveryMillis = try f.optional("lastDeliveryMillis")
        }

        /// The object with every key; a value that is absent is null.
        public var json: JSONValue {
            [
                "name": .string(self.name), "url": .string(self.url), "format": .string(self.format), "state": self.state.json,
                "reason": .from(self.reason), "pending": .int(self.pending), "lastDeliveryMillis": .from(self.lastDeliveryMillis),
            ]
        }
    }

    /// `type AlertsSummary (enabled: bool, active: []Alert)`: GetStatus's view of the alerts: the
    /// firing ones (each its firing event).
    public struct ForwardAlertsSummary: WireValue, Hashable {
        /// False with `alerts = off`.
        public var enabled: Bool
        /// The firing alerts, each as its firing event.
        public var active: [ForwardAlert]

        /// A summary with both fields.
        public init(enabled: Bool, active: [ForwardAlert]) {
            self.enabled = enabled
            self.active = active
        }

        /// Requires `enabled` and `active`.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.enabled = try f.required("enabled")
            self.active = try f.array("active")
        }

        /// The object with every key.
        public var json: JSONValue { ["enabled": .bool(self.enabled), "active": .wire(self.active)] }
    }

    /// `io.sugard.Forward.GetAlerts() -> (enabled: bool, active: []Alert, recent: []Alert, webhooks: []Webhook)`:
    /// the firing alerts, the recent alert events (newest last) and the webhook sinks.
    public struct ForwardAlertsReply: WireValue {
        /// False with `alerts = off`.
        public var enabled: Bool
        /// The firing alerts.
        public var active: [ForwardAlert]
        /// Recent alert events, oldest first.
        public var recent: [ForwardAlert]
        /// The webhook sinks.
        public var webhooks: [ForwardWebhook]

        /// An alerts reply with every parameter given.
        public init(enabled: Bool, active: [ForwardAlert], recent: [ForwardAlert], webhooks: [ForwardWebhook]) {
            self.enabled = enabled
            self.active = active
            self.recent = recent
            self.webhooks = webhooks
        }

        /// Requires `enabled`, `active`, `recent` and `webhooks`.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.enabled = try f.required("enabled")
            self.active = try f.array("active")
            self.recent = try f.array("recent")
            self.webhooks = try f.array("webhooks")
        }

        /// The object with every key.
        public var json: JSONValue {
            ["enabled": .bool(self.enabled), "active": .wire(self.active), "recent": .wire(self.recent), "webhooks": .wire(self.webhooks)]
        }
    }
}
