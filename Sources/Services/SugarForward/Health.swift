import JSON
import Locking
import MQTT
import SugarWire
import SystemIO
import Varlink

/// What the forwarder knows about the gateway's health from sugard: its adapter, its storage and
/// each meter (name, person, last sync, reading count). A value: the follower sends a new one on
/// each change.
struct GatewayHealth: Sendable, Equatable {
    /// One meter as sugard knows it.
    struct Meter: Sendable, Equatable {
        /// What people call it (the identity's display name).
        var name: String?
        /// The person it is assigned to, when it is.
        var person: String?
        /// When sugard first saw it (epoch milliseconds; nil: not stored yet).
        var firstSeen: Int64?
        /// Its last sync that ended, well or not: when (epoch milliseconds) and how.
        var lastAttempt: Int64?
        /// How that sync ended.
        var lastResult: Wire.SyncResult?
        /// Its last sync that ended well (success or no new records), epoch milliseconds.
        var lastGood: Int64?
        /// Its readings in sugard's store (nil: not known yet).
        var readingCount: Int64?
    }

    /// sugard's Bluetooth adapter (nil: not known yet).
    var adapter: Wire.Adapter?
    /// sugard's storage: ok, degraded or failed, and the open database's identity (nil: not known yet).
    var storage: Wire.Storage?
    /// Why sugard cannot be reached now (nil: it answers, or was not tried yet).
    var unreachable: String?
    /// Each meter sugard knows, by id.
    var meters: [String: Meter] = [:]

    /// The adapter is present and powered (nil: not known yet).
    var adapterWorking: Bool? { self.adapter.map { $0.present && $0.powered } }

    /// Each meter's last sync that ended well, epoch milliseconds.
    var lastSync: [String: Int64] { self.meters.compactMapValues(\.lastGood) }

    /// sugard's storage has failed (nil: not known yet); the alert rule `gateway_failed` reads it.
    var storageFailed: Bool? { self.storage.map { $0.status == .failed } }

    /// Whether a sync result means the meter was read (its readings are all stored).
    static func synced(_ result: Wire.SyncResult?) -> Bool { result == .success || result == .noNewRecords }

    /// The one rule for "sync overdue" (Home Assistant's "Sync overdue" and the health topic's
    /// `overdue`): more than `limitMillis` passed since the meter's last sync that ended well or,
    /// when it never synced well, since sugard first saw it. nil: nothing to tell it by.
    func overdue(_ meter: String, now: Int64, limitMillis: Int64) -> Bool? {
        guard let m = self.meters[meter], let since = m.lastGood ?? m.firstSeen else { return nil }
        return now - since > limitMillis
    }

    /// Takes the meters of `ListMeters`, every meter sugard knows (their last sync and count
    /// survive a restart of sugard); a meter it no longer lists (forgotten) is dropped.
    mutating func take(_ entries: [Wire.MeterEntry]) {
        let listed = Set(entries.map(\.id))
        self.meters = self.meters.filter { listed.contains($0.key) }
        for entry in entries {
            var m = self.meters[entry.id] ?? Meter()
            m.name = entry.identity.displayName
            m.person = entry.person ?? entry.stored?.person
            if let stored = entry.stored {
                m.firstSeen = stored.firstSeen.epochMillis
                m.readingCount = stored.readingCount
                if let at = stored.lastSync { Self.note(&m, at.epochMillis, stored.lastSyncResult) }
            }
            self.meters[entry.id] = m
            if let live = entry.live { self.take(live) }
        }
    }

    /// Takes one field of a `Watch` reply on the view model.
    mutating func take(_ field: Wire.WatchedField) {
        switch field {
        case .daemon(let daemon): self.storage = daemon.storage
        case .adapter(let adapter): self.adapter = adapter
        case .meters(let meters): for meter in meters { self.take(meter) }
        default: break
        }
    }

    /// Takes one meter of a `Watch` reply: its name when none is known, its last sync.
    private mutating func take(_ meter: Wire.Meter) {
        var m = self.meters[meter.id] ?? Meter()
        if m.name == nil { m.name = meter.identity.displayName }
        if let last = meter.lastSync { Self.note(&m, last.at.epochMillis, last.result) }
        self.meters[meter.id] = m
    }

    /// Notes a sync that ended at `millis` with `result`: the last attempt when it is the newest,
    /// the last good one when it read the meter.
    private static func note(_ m: inout Meter, _ millis: Int64, _ result: Wire.SyncResult?) {
        if millis >= (m.lastAttempt ?? .min) {
            m.lastAttempt = millis
            m.lastResult = result
        }
        if Self.synced(result) { m.lastGood = max(m.lastGood ?? .min, millis) }
    }

    /// The meters whose last sync changed between `self` and `other`, or that are new in `other`:
    /// their reading counts (and persons) are read again.
    func syncsEnded(comparedTo other: GatewayHealth) -> Bool {
        other.meters.contains { id, m in self.meters[id]?.lastAttempt != m.lastAttempt }
    }
}

/// Follows sugard's health over its socket (`ListMeters` once per connection, after every sync
/// that ended and once a minute, and `Watch` on the view model's `daemon`, `adapter` and `meters`)
/// and hands every change on as a ``GatewayHealth``; reconnects with a capped backoff when sugard
/// restarts (handing on why it cannot reach it). Runs until its task is cancelled.
/// Home Assistant's "Last synced", "Sync overdue" and "Bluetooth adapter" and the gateway's
/// health topic are made from it.
struct HealthFollower: Sendable {
    /// `io.sugard.HealthDataSync`.
    static let interface = "io.sugard.HealthDataSync"
    /// How often `ListMeters` is read again without a sync ending (a meter assigned to a person).
    static let relistSeconds = 60

    /// sugard's socket.
    let socketPath: String
    /// Receives each new health.
    let emit: @Sendable (GatewayHealth) -> Void

    /// Follows sugard until cancelled: the watch, and `ListMeters` again every ``relistSeconds``.
    func run() async {
        let health = Lock(GatewayHealth())
        let emit = self.emit
        /// Changes the shared value and hands it on when it changed.
        let change: @Sendable (_ body: (inout GatewayHealth) -> Void) -> Void = { body in
            let changed = health.withLock { h -> GatewayHealth? in
                let before = h
                body(&h)
                return h == before ? nil : h
            }
            if let changed { emit(changed) }
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.watch(change) }
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(Self.relistSeconds))
                    if let entries = try? await self.listMeters() { change { $0.take(entries) } }
                }
            }
            await group.waitForAll()
        }
    }

    /// `ListMeters` on a connection of its own.
    private func listMeters() async throws -> [Wire.MeterEntry] {
        let client = try VarlinkClient(socketPath: self.socketPath)
        defer { client.close() }
        return try Wire.MetersReply(json: .object(try await client.call(Self.interface + ".ListMeters"))).meters
    }

    /// `ListMeters`, then `Watch` on the view model, on one connection; reconnects after 0.2 s,
    /// doubling to 5 s, noting why sugard cannot be reached.
    private func watch(_ change: @Sendable (_ body: (inout GatewayHealth) -> Void) -> Void) async {
        var failures = 0
        while !Task.isCancelled {
            do {
                let client = try VarlinkClient(socketPath: self.socketPath)
                defer { client.close() }
                let meters = try Wire.MetersReply(json: .object(try await client.call(Self.interface + ".ListMeters")))
                change {
                    $0.unreachable = nil
                    $0.take(meters.meters)
                }
                failures = 0
                var known = GatewayHealth()
                for try await reply in client.callMore(Self.interface + ".Watch", ["fields": ["daemon", "adapter", "meters"]]) {
                    let fields = try Wire.WatchReply(json: .object(reply)).watchedFields()
                    var next = known
                    for (_, field) in fields { next.take(field) }
                    let ended = known.syncsEnded(comparedTo: next)
                    known = next
                    change { for (_, field) in fields { $0.take(field) } }
                    // A sync ended: its meter's reading count changed (read on a second connection).
                    if ended, let entries = try? await self.listMeters() { change { $0.take(entries) } }
                }
                change { $0.unreachable = "sugard ended the Watch call" }
            } catch {
                if Task.isCancelled { return }
                change { $0.unreachable = "\(error)" }
            }
            failures += 1
            try? await Task.sleep(for: RetryBackoff.delay(failures: failures, initial: .milliseconds(200), max: .seconds(5)))
        }
    }
}

/// The retained health messages for Home Assistant: `<base>/adapter` (`ON` while the adapter is
/// missing or off), and per meter `<meter>/last_synced` (ISO 8601, UTC) and `<meter>/sync_overdue`
/// (`ON` once ``GatewayHealth/overdue(_:now:limitMillis:)`` says so). Each goes out when its value
/// changes (and all again on a new broker connection).
struct HealthPublisher: Sendable {
    /// The forwarder's topics.
    let topics: ForwardTopics
    /// `sync_overdue_hours` in milliseconds.
    let overdueMillis: Int64
    /// sugard's health as last taken.
    private var health = GatewayHealth()
    /// What was last published per topic.
    private var published: [String: String] = [:]

    /// A publisher with nothing published yet.
    init(topics: ForwardTopics, overdueHours: Double) {
        self.topics = topics
        self.overdueMillis = Int64(overdueHours * 3_600_000)
    }

    /// Every message of the current health (after a new connection).
    mutating func all(now: Int64) -> [MQTTMessage] {
        self.published.removeAll()
        return self.changes(now: now)
    }

    /// Takes new health; the messages whose values changed.
    mutating func update(_ health: GatewayHealth, now: Int64) -> [MQTTMessage] {
        self.health = health
        return self.changes(now: now)
    }

    /// The time passed: the overdue flags that turned.
    mutating func tick(now: Int64) -> [MQTTMessage] { self.changes(now: now) }

    /// The state of every health topic now: meters that synced well at least once.
    func states(now: Int64) -> [(topic: String, value: String)] {
        var out: [(String, String)] = []
        if let working = self.health.adapterWorking { out.append((self.topics.adapter, working ? "OFF" : "ON")) }
        for (meter, millis) in self.health.lastSync.sorted(by: { $0.key < $1.key }) {
            let topics = self.topics.meterTopics(meter)
            let overdue = self.health.overdue(meter, now: now, limitMillis: self.overdueMillis) ?? false
            out.append((topics.lastSynced, Wire.Instant(epochMillis: millis).iso))
            out.append((topics.syncOverdue, overdue ? "ON" : "OFF"))
        }
        return out
    }

    /// The messages whose topic's value differs from what was last published (retained, QoS 1);
    /// none without Home Assistant discovery.
    private mutating func changes(now: Int64) -> [MQTTMessage] {
        guard self.topics.config.homeAssistantDiscovery else { return [] }
        var out: [MQTTMessage] = []
        for (topic, value) in self.states(now: now) where self.published[topic] != value {
            self.published[topic] = value
            out.append(MQTTMessage(topic: topic, payload: Array(value.utf8), qos: 1, retain: true))
        }
        return out
    }
}

/// One sink as the health topic names it: `kind` (`mqtt`, `nightscout`), `name`, `state`
/// (`connected`, `retrying`, `failing`).
struct HealthSink: Sendable, Equatable {
    /// `mqtt` or `nightscout`.
    var kind: String
    /// The sink's name.
    var name: String
    /// `connected`, `retrying` or `failing`.
    var state: String

    /// A sink's line.
    init(kind: String, name: String, state: String) {
        self.kind = kind
        self.name = name
        self.state = state
    }

    /// The line of a forwarder sink's status.
    init(_ sink: Wire.ForwardSink) { self.init(kind: sink.kind.rawValue, name: sink.name, state: sink.state.rawValue) }
}

/// The gateway's health message on `<topic_prefix>/<gateway_id>/health` (retained, QoS 1), for
/// sugard-hub and anything else watching a fleet: made from sugard's health (``GatewayHealth``),
/// the forwarder's sinks and its active alerts. It goes out when its content (all but `time`)
/// changes, at least every ``refreshMillis`` (so a watcher can tell a gateway that stopped from
/// one with nothing new: ``refreshMillis`` plus the tick stays within 5 minutes), and again on
/// each new broker connection (the retained copy may have gone with the broker).
///
/// ```
/// {"gatewayId":"ward-3","version":"0.1.0","time":"2026-12-03T09:30:00Z",
///  "adapter":{"present":true,"powered":true,"reason":null},"storage":"ok","databaseId":"…",
///  "meters":[{"id":"C0:26:DA:01:3A:7F","name":"Contour Next One","person":"mia",
///             "lastSync":{"time":"2026-12-03T07:12:40Z","result":"success"},"overdue":false,"readingCount":412}],
///  "alerts":[],"sinks":[{"kind":"mqtt","name":"mqtt","state":"connected"}]}
/// ```
struct GatewayHealthTopic: Sendable {
    /// The longest time between two messages without a change (4½ minutes; the forwarder looks
    /// every ``Forwarder/healthTickMillis`` at most, so one goes out at least every 5 minutes).
    static let refreshMillis: Int64 = 270_000

    /// `<topic_prefix>/<gateway_id>/health`.
    let topic: String
    /// The gateway's id.
    let gatewayID: String
    /// sugard-forward's version.
    let version: String
    /// `sync_overdue_hours` in milliseconds.
    let overdueMillis: Int64
    /// The inputs: sugard's health, the sinks' states, the active alerts (each as its alert
    /// message's object; empty until the alert rules are wired to ``Forwarder/activeAlertsChanged(_:)``).
    var health = GatewayHealth()
    var sinks: [HealthSink] = []
    var alerts: [JSONObject] = []
    /// What went out last on this connection (without `time`) and when (monotonic milliseconds).
    private var last: (body: JSONObject, at: Int64)?

    /// A topic for the configured gateway.
    init(topics: ForwardTopics, version: String) {
        self.topic = topics.health
        self.gatewayID = topics.config.gatewayID
        self.version = version
        self.overdueMillis = Int64(topics.config.syncOverdueHours * 3_600_000)
    }

    /// Whether a message goes out: nothing went out on this connection yet, the content changed,
    /// or ``refreshMillis`` passed since the last one.
    static func due(_ body: JSONObject, last: (body: JSONObject, at: Int64)?, now: Int64) -> Bool {
        guard let last else { return true }
        return body != last.body || now - last.at >= Self.refreshMillis
    }

    /// A new broker connection: the next look publishes.
    mutating func reconnected() { self.last = nil }

    /// The message due at `now` (monotonic) and `wallClock` (epoch milliseconds), if one is;
    /// it counts as sent. `databaseId`: the one the forwarder's feed reported, for when sugard's
    /// storage did not say.
    mutating func next(now: Int64, wallClock: Int64, databaseId: String?) -> MQTTMessage? {
        let body = self.body(wallClock: wallClock, databaseId: databaseId)
        guard Self.due(body, last: self.last, now: now) else { return nil }
        self.last = (body, now)
        var object: JSONObject = ["gatewayId": .string(self.gatewayID), "version": .string(self.version)]
        object["time"] = .string(Wire.Instant(epochMillis: wallClock).iso)
        for entry in body.entries where entry.key != "gatewayId" && entry.key != "version" { object[entry.key] = entry.value }
        return MQTTMessage(topic: self.topic, payload: Array(JSONValue.object(object).serialized().utf8), qos: 1, retain: true)
    }

    /// The message's content at `wallClock`, without `time`.
    func body(wallClock: Int64, databaseId: String?) -> JSONObject {
        var object: JSONObject = ["gatewayId": .string(self.gatewayID), "version": .string(self.version)]
        if let adapter = self.health.adapter {
            let reason: String? =
                !adapter.present ? "no Bluetooth adapter" : !adapter.powered ? "the Bluetooth adapter is powered off" : nil
            object["adapter"] = ["present": .bool(adapter.present), "powered": .bool(adapter.powered), "reason": .from(reason)]
        } else {
            object["adapter"] = .null
        }
        object["storage"] = self.storage
        object["databaseId"] = .from(self.health.storage?.databaseId ?? databaseId)
        object["meters"] = .array(
            self.health.meters.sorted { $0.key < $1.key }.map { id, m in
                var meter: JSONObject = ["id": .string(id), "name": .from(m.name), "person": .from(m.person)]
                if let at = m.lastAttempt {
                    meter["lastSync"] = ["time": .string(Wire.Instant(epochMillis: at).iso), "result": .from(m.lastResult?.rawValue)]
                } else {
                    meter["lastSync"] = .null
                }
                meter["overdue"] = .bool(self.health.overdue(id, now: wallClock, limitMillis: self.overdueMillis) ?? false)
                meter["readingCount"] = .from(m.readingCount)
                return .object(meter)
            })
        object["alerts"] = .array(self.alerts.map { .object($0) })
        object["sinks"] = .array(
            self.sinks.map { .object(["kind": .string($0.kind), "name": .string($0.name), "state": .string($0.state)]) })
        return object
    }

    /// `"ok"`, or the error as sugard reports it (`{code, message}`); null while sugard's
    /// storage is not known. sugard not answering is an error too (`sugardUnreachable`).
    private var storage: JSONValue {
        if let reason = self.health.unreachable {
            return ["code": "sugardUnreachable", "message": .string("sugard does not answer: \(reason)")]
        }
        guard let storage = self.health.storage else { return .null }
        if storage.status == .ok { return "ok" }
        if let error = storage.error { return error.json }
        return ["code": .string(storage.status.rawValue), "message": .string("sugard's storage is \(storage.status.rawValue)")]
    }
}
