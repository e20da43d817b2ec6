public import JSON

extension Wire {
    /// `io.sugard.Forward`'s `type Sink`: one of sugard-forward's sinks and its delivery state.
    public struct ForwardSink: WireValue, Hashable {
        public enum Kind: String, WireEnum { case mqtt, nightscout }
        public enum State: String, WireEnum { case connected, retrying, failing }
        /// A Nightscout sink's own state.
        public enum NightscoutState: String, WireEnum {
            /// Everything offered so far is delivered.
            case idle
            case delivering
            /// A transient failure (refused, timeout, 5xx, TLS): retried with capped backoff.
            case retrying
            /// 401/403: "Nightscout refused the API secret"; retried slowly.
            case refused
            /// Another 4xx: the server's message; the same batch is offered again later.
            case paused
        }

        public var name: String
        public var kind: Kind
        public var broker: String?
        public var url: String?
        public var person: String?
        public var state: State
        public var nightscoutState: NightscoutState?
        public var reason: String?
        public var pending: Int64
        public var lastDeliveryMillis: Int64?
        public var cursor: Int64
        public var delivered: Int64
        public var feedConnected: Bool
        public var feedReason: String?
        /// The sugard database the sink's cursor is a position in.
        public var databaseId: String? = nil
        /// The last time sugard's database changed and the sink started over from its beginning.
        public var databaseReset: DatabaseReset? = nil

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
        public var atMillis: Int64
        public var previousDatabaseId: String
        public var databaseId: String

        public init(atMillis: Int64, previousDatabaseId: String, databaseId: String) {
            self.atMillis = atMillis
            self.previousDatabaseId = previousDatabaseId
            self.databaseId = databaseId
        }

        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.atMillis = try f.required("atMillis")
            self.previousDatabaseId = try f.required("previousDatabaseId")
            self.databaseId = try f.required("databaseId")
        }

        public var json: JSONValue {
            [
                "atMillis": .int(self.atMillis), "previousDatabaseId": .string(self.previousDatabaseId),
                "databaseId": .string(self.databaseId),
            ]
        }
    }

    /// `io.sugard.Forward.GetStatus() -> (sinks: []Sink)`
    public struct ForwardStatusReply: WireValue {
        public var sinks: [ForwardSink]

        public init(sinks: [ForwardSink]) { self.sinks = sinks }

        public init(json: JSONValue) throws(WireError) { self.sinks = try WireFields(json).array("sinks") }

        public var json: JSONValue { ["sinks": .wire(self.sinks)] }
    }
}
