import JSON
import MQTT
import SugarWire
import Varlink

/// What the forwarder knows about the gateway's health from sugard: its adapter and each meter's
/// last good sync. A value: the follower sends a new one on each change.
struct GatewayHealth: Sendable, Equatable {
    /// The Bluetooth adapter is present and powered (nil: not known yet).
    var adapterWorking: Bool?
    /// sugard's storage has failed (nil: not known yet); the alert rule `gateway_failed` reads it.
    var storageFailed: Bool?
    /// Each meter's last sync that ended well (success or no new records), epoch milliseconds.
    var lastSync: [String: Int64] = [:]

    /// Whether a sync result means the meter was read (its readings are all stored).
    static func synced(_ result: Wire.SyncResult?) -> Bool { result == .success || result == .noNewRecords }

    /// Takes the stored meters of `ListMeters` (their last sync survives a restart of sugard).
    mutating func take(_ entries: [Wire.MeterEntry]) {
        for entry in entries {
            if let stored = entry.stored, let at = stored.lastSync, Self.synced(stored.lastSyncResult) {
                self.note(entry.id, at.epochMillis)
            }
            if let live = entry.live { self.take(live) }
        }
    }

    /// Takes one field of a `Watch` reply on the view model.
    mutating func take(_ field: Wire.WatchedField) {
        switch field {
        case .adapter(let adapter): self.adapterWorking = adapter.present && adapter.powered
        case .daemon(let daemon): self.storageFailed = daemon.storage.status == .failed
        case .meters(let meters): for meter in meters { self.take(meter) }
        default: break
        }
    }

    private mutating func take(_ meter: Wire.Meter) {
        guard let last = meter.lastSync, Self.synced(last.result) else { return }
        self.note(meter.id, last.at.epochMillis)
    }

    private mutating func note(_ meter: String, _ millis: Int64) {
        self.lastSync[meter] = max(self.lastSync[meter] ?? .min, millis)
    }
}

/// Follows sugard's health over its socket (`ListMeters` once per connection, then `Watch` on the
/// view model's `adapter` and `meters`) and hands every change on as a ``GatewayHealth``;
/// reconnects with a capped backoff when sugard restarts. Runs until its task is cancelled.
/// Home Assistant's "Last synced", "Sync overdue" and "Bluetooth adapter" are made from it, and a
/// health topic or alert rules can take the same values.
struct HealthFollower: Sendable {
    static let interface = "io.sugard.HealthDataSync"

    let socketPath: String
    let emit: @Sendable (GatewayHealth) -> Void

    func run() async {
        var health = GatewayHealth()
        var delay = 0.2
        while !Task.isCancelled {
            do {
                let client = try VarlinkClient(socketPath: self.socketPath)
                defer { client.close() }
                let meters = try Wire.MetersReply(json: .object(try await client.call(Self.interface + ".ListMeters")))
                health.take(meters.meters)
                self.emit(health)
                delay = 0.2
                for try await reply in client.callMore(Self.interface + ".Watch", ["fields": ["adapter", "meters", "daemon"]]) {
                    let before = health
                    for (_, field) in try Wire.WatchReply(json: .object(reply)).watchedFields() { health.take(field) }
                    if health != before { self.emit(health) }
                }
            } catch {
                if Task.isCancelled { return }
            }
            try? await Task.sleep(for: .milliseconds(Int(delay * 1000)))
            delay = min(delay * 2, 5)
        }
    }
}

/// The retained health messages for Home Assistant: `<base>/adapter` (`ON` while the adapter is
/// missing or off), and per meter `<meter>/last_synced` (ISO 8601, UTC) and `<meter>/sync_overdue`
/// (`ON` once the last good sync is older than `sync_overdue_hours`). Each goes out when its value
/// changes (and all again on a new broker connection).
struct HealthPublisher: Sendable {
    let topics: ForwardTopics
    let overdueMillis: Int64
    private var health = GatewayHealth()
    /// What was last published per topic.
    private var published: [String: String] = [:]

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

    /// The state of every health topic now.
    func states(now: Int64) -> [(topic: String, value: String)] {
        var out: [(String, String)] = []
        if let working = self.health.adapterWorking { out.append((self.topics.adapter, working ? "OFF" : "ON")) }
        for (meter, millis) in self.health.lastSync.sorted(by: { $0.key < $1.key }) {
            let topics = self.topics.meterTopics(meter)
            out.append((topics.lastSynced, Wire.Instant(epochMillis: millis).iso))
            out.append((topics.syncOverdue, now - millis > self.overdueMillis ? "ON" : "OFF"))
        }
        return out
    }

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
