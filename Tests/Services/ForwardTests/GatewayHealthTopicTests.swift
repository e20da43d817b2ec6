import JSON
import MQTT
import SugarWire
import Testing

@testable import SugarForward

extension GatewayHealth {
    /// Health with the adapter working or not and meters that synced well at these times.
    static func with(adapterWorking: Bool?, lastSync: [String: Int64] = [:]) -> GatewayHealth {
        var health = GatewayHealth()
        health.adapter = adapterWorking.map { Wire.Adapter(present: true, powered: $0, discovering: false, name: nil, address: nil) }
        for (meter, millis) in lastSync {
            health.meters[meter] = GatewayHealth.Meter(lastAttempt: millis, lastResult: .success, lastGood: millis)
        }
        return health
    }
}

/// The gateway's health message (`<prefix>/<gateway>/health`): its JSON keys exactly, the one
/// overdue rule, and when it goes out (a change, every 4½ minutes, each connection).
@Suite struct GatewayHealthTopicTests {
    static let hour: Int64 = 3_600_000
    static let t0: Int64 = 1_764_000_000_000  // 2025-11-24T16:00:00Z
    static let meter = "C0:26:DA:11:22:33"

    static func topics(discovery: Bool = false) -> ForwardTopics {
        var config = ForwardConfig(gatewayID: "ward-3", socketPath: "/tmp/s", stateDirectory: "/tmp")
        config.homeAssistantDiscovery = discovery
        return ForwardTopics(config: config)
    }

    static func entry(
        _ id: String, name: String, person: String?, firstSeen: Int64, lastSync: Int64?, result: Wire.SyncResult?, count: Int64
    ) -> Wire.MeterEntry {
        let identity = Wire.MeterIdentity(
            id: id, name: name, manufacturer: nil, model: nil, serialNumber: nil, firmware: nil, displayName: name)
        let stored = Wire.StoredMeter(
            firstSeen: Wire.Instant(epochMillis: firstSeen), lastSeen: Wire.Instant(epochMillis: firstSeen), highWater: nil, epoch: 0,
            lastSync: lastSync.map { Wire.Instant(epochMillis: $0) }, lastSyncResult: result, readingCount: count, features: nil,
            person: person)
        return Wire.MeterEntry(id: id, identity: identity, live: nil, stored: stored, person: person)
    }

    static func object(_ message: MQTTMessage) throws -> JSONObject {
        try #require(try JSONValue(parsing: message.payload, maxDepth: 16).objectValue)
    }

    /// A gateway with a failing store, its adapter off, a meter synced an hour ago (Mia's) and one
    /// whose last sync failed and that has not synced well for two days.
    static func sampleHealth() -> GatewayHealth {
        var health = GatewayHealth()
        health.take([
            Self.entry(Self.meter, name: "Contour Next One", person: "mia", firstSeen: t0 - 100 * hour, lastSync: t0 - hour, result: .success, count: 412),
            Self.entry("C0:26:DA:44:55:66", name: "Guide Me", person: nil, firstSeen: t0 - 100 * hour, lastSync: t0 - 48 * hour, result: .noNewRecords, count: 7),
        ])
        health.take(.adapter(Wire.Adapter(present: true, powered: false, discovering: false, name: "hci0", address: nil)))
        health.take(
            .daemon(
                Wire.Daemon(
                    version: "0.1.0", startedAt: Wire.Instant(epochMillis: t0 - 200 * hour),
                    storage: Wire.Storage(
                        status: .failed, path: "/var/lib/sugard/readings.db", error: Wire.StoreFailure(code: "diskFull", message: "disk full"),
                        databaseId: "5c1e0d1e-1d2a-4a8e-9a59-7bb0c0e0d001"))))
        // The second meter's latest attempt failed: lastSync says so, overdue follows the last good one.
        let identity = Wire.MeterIdentity(
            id: "C0:26:DA:44:55:66", name: nil, manufacturer: nil, model: nil, serialNumber: nil, firmware: nil, displayName: "Guide Me")
        health.take(
            .meters([
                Wire.Meter(
                    id: "C0:26:DA:44:55:66", identity: identity, link: .disconnected, sync: .failed,
                    progress: Wire.Progress(received: 0, expected: nil),
                    lastSync: Wire.LastSync(
                        meter: "C0:26:DA:44:55:66", at: Wire.Instant(epochMillis: t0 - 2 * hour), result: .failed, stored: 0, duplicates: 0,
                        reset: false),
                    highWater: nil, pairing: .unknown, lastError: nil, nextAttempt: nil)
            ]))
        return health
    }

    @Test func theMessageCarriesExactlyTheContractsKeys() throws {
        var topic = GatewayHealthTopic(topics: Self.topics(), version: "9.9.9")
        topic.health = Self.sampleHealth()
        topic.sinks = [HealthSink(kind: "mqtt", name: "mqtt", state: "connected"), HealthSink(kind: "nightscout", name: "mia", state: "failing")]
        topic.alerts = [["id": "meterOverdue/C0:26:DA:44:55:66", "kind": "meterOverdue", "message": "Guide Me has not synced for 2 days"]]
        let next = topic.next(now: 0, wallClock: Self.t0, databaseId: "other")
        let message = try #require(next)
        #expect(message.topic == "sugard/ward-3/health" && message.retain && message.qos == 1)
        let o = try Self.object(message)
        #expect(o.keys == ["gatewayId", "version", "time", "adapter", "storage", "databaseId", "meters", "alerts", "sinks"])
        #expect(o["gatewayId"] == "ward-3" && o["version"] == "9.9.9" && o["time"]?.stringValue == Wire.Instant(epochMillis: Self.t0).iso)
        #expect(o["adapter"] == ["present": true, "powered": false, "reason": "the Bluetooth adapter is powered off"])
        #expect(o["storage"] == ["code": "diskFull", "message": "disk full"], "the error as sugard reports it")
        #expect(o["databaseId"] == "5c1e0d1e-1d2a-4a8e-9a59-7bb0c0e0d001", "sugard's storage says which database")
        let meters = try #require(o["meters"]?.arrayValue)
        #expect(meters.count == 2)
        #expect(meters[0].objectValue?.keys == ["id", "name", "person", "lastSync", "overdue", "readingCount"])
        #expect(meters[0] == [
            "id": .string(Self.meter), "name": "Contour Next One", "person": "mia",
            "lastSync": ["time": .string(Wire.Instant(epochMillis: Self.t0 - Self.hour).iso), "result": "success"], "overdue": false,
            "readingCount": 412,
        ])
        #expect(meters[1] == [
            "id": "C0:26:DA:44:55:66", "name": "Guide Me", "person": nil,
            "lastSync": ["time": .string(Wire.Instant(epochMillis: Self.t0 - 2 * Self.hour).iso), "result": "failed"], "overdue": true,
            "readingCount": 7,
        ])
        #expect(o["alerts"]?.arrayValue?.first?["kind"] == "meterOverdue")
        #expect(o["sinks"] == [["kind": "mqtt", "name": "mqtt", "state": "connected"], ["kind": "nightscout", "name": "mia", "state": "failing"]])
    }

    @Test func unknownPartsAreNullAndStorageOkIsAWord() throws {
        var topic = GatewayHealthTopic(topics: Self.topics(), version: "1")
        var next = topic.next(now: 0, wallClock: Self.t0, databaseId: nil)
        var o = try Self.object(try #require(next))
        #expect(o["adapter"] == .null && o["storage"] == .null && o["databaseId"] == .null && o["meters"] == [] && o["alerts"] == [])
        topic.health.storage = Wire.Storage(status: .ok, path: "/x", error: nil, databaseId: nil)
        topic.health.adapter = Wire.Adapter(present: false, powered: false, discovering: false, name: nil, address: nil)
        next = topic.next(now: 1, wallClock: Self.t0, databaseId: "from-the-feed")
        o = try Self.object(try #require(next))
        #expect(o["storage"] == "ok" && o["databaseId"] == "from-the-feed")
        #expect(o["adapter"] == ["present": false, "powered": false, "reason": "no Bluetooth adapter"])
        // sugard stops answering: the storage says so.
        topic.health.unreachable = "connection refused"
        next = topic.next(now: 2, wallClock: Self.t0, databaseId: nil)
        o = try Self.object(try #require(next))
        #expect(o["storage"]?["code"] == "sugardUnreachable")
    }

    @Test func publishNowWhenChangedOrRefreshDue() {
        let body: JSONObject = ["meters": []]
        let other: JSONObject = ["meters": [1]]
        let refresh = GatewayHealthTopic.refreshMillis
        #expect(GatewayHealthTopic.due(body, last: nil, now: 5), "nothing sent on this connection yet")
        #expect(!GatewayHealthTopic.due(body, last: (body, 5), now: 5 + refresh - 1))
        #expect(GatewayHealthTopic.due(body, last: (body, 5), now: 5 + refresh))
        #expect(GatewayHealthTopic.due(other, last: (body, 5), now: 6))
        // With the forwarder's tick, at least every 5 minutes.
        #expect(refresh + Forwarder.healthTickMillis <= 300_000)
    }

    @Test func theTimeAloneIsNoChangeButOverdueIs() {
        var topic = GatewayHealthTopic(topics: Self.topics(), version: "1")
        topic.health = .with(adapterWorking: true, lastSync: [Self.meter: Self.t0])
        #expect(topic.next(now: 0, wallClock: Self.t0, databaseId: nil) != nil)
        #expect(topic.next(now: 1000, wallClock: Self.t0 + 1000, databaseId: nil) == nil, "only the time moved")
        #expect(topic.next(now: 2000, wallClock: Self.t0 + 25 * Self.hour, databaseId: nil) != nil, "the meter turned overdue (24 h)")
        #expect(topic.next(now: 3000, wallClock: Self.t0 + 26 * Self.hour, databaseId: nil) == nil)
        #expect(topic.next(now: 3000 + GatewayHealthTopic.refreshMillis, wallClock: Self.t0 + 26 * Self.hour, databaseId: nil) != nil)
        topic.reconnected()
        #expect(topic.next(now: 3001 + GatewayHealthTopic.refreshMillis, wallClock: Self.t0 + 26 * Self.hour, databaseId: nil) != nil)
    }

    @Test func overdueIsOneRuleFromTheLastGoodSyncOrTheFirstSighting() {
        var health = GatewayHealth()
        health.take([
            Self.entry("A", name: "A", person: nil, firstSeen: Self.t0, lastSync: nil, result: nil, count: 0),
            Self.entry("B", name: "B", person: nil, firstSeen: Self.t0 - 50 * Self.hour, lastSync: Self.t0, result: .failed, count: 0),
        ])
        #expect(health.overdue("A", now: Self.t0 + 23 * Self.hour, limitMillis: 24 * Self.hour) == false, "new, never synced: not yet")
        #expect(health.overdue("A", now: Self.t0 + 25 * Self.hour, limitMillis: 24 * Self.hour) == true)
        #expect(health.overdue("B", now: Self.t0, limitMillis: 24 * Self.hour) == true, "a failed sync does not count")
        #expect(health.overdue("C", now: Self.t0, limitMillis: 24 * Self.hour) == nil)
        #expect(health.lastSync.isEmpty)
        // A meter sugard no longer lists (forgotten) leaves the health.
        health.take([Self.entry("B", name: "B", person: nil, firstSeen: Self.t0, lastSync: nil, result: nil, count: 0)])
        #expect(Array(health.meters.keys) == ["B"])
    }

    /// Through the delivery state machine: on each connection (before the readings), on a change
    /// of health, sinks or alerts, on a tick when due; never while disconnected; with or without
    /// Home Assistant discovery.
    @Test(arguments: [false, true]) func theMachinePublishesItOnItsOwnTopic(discovery: Bool) {
        var limits = DeliveryStateMachine.Limits(maxInFlight: 4)
        limits.settleMillis = 0
        var machine = DeliveryStateMachine(saved: ForwardState(), limits: limits, topics: Self.topics(discovery: discovery), now: 0)
        func healthMessages(_ actions: [DeliveryStateMachine.Action]) -> [String] {
            actions.compactMap {
                if case .publish(.gatewayHealth(let m), 1) = $0, m.topic == "sugard/ward-3/health", m.retain, m.qos == 1 {
                    String(decoding: m.payload, as: UTF8.self)
                } else {
                    nil
                }
            }
        }
        let t0 = Self.t0
        #expect(machine.handle(.health(.with(adapterWorking: true, lastSync: [Self.meter: t0])), at: 0, wallClock: t0).isEmpty)
        _ = machine.handle(.readings([(Int64(1), ForwardedReading(meter: Self.meter, epochMillis: t0, payload: Array("{}".utf8), kind: .glucose, mgdL: 90, person: nil))]), at: 0, wallClock: t0)
        let connected = machine.handle(.connected(session: 1), at: 10, wallClock: t0)
        #expect(healthMessages(connected).count == 1)
        let healthIndex = connected.firstIndex { if case .publish(.gatewayHealth, _) = $0 { true } else { false } }
        let readingIndex = connected.firstIndex { if case .publish(.reading, _) = $0 { true } else { false } }
        #expect(healthIndex != nil && readingIndex != nil && healthIndex! < readingIndex!)
        #expect(healthMessages(machine.handle(.tick, at: 20, wallClock: t0 + 1000)).isEmpty)
        #expect(healthMessages(machine.handle(.sinks([HealthSink(kind: "mqtt", name: "mqtt", state: "connected")]), at: 30, wallClock: t0)).count == 1)
        #expect(healthMessages(machine.handle(.sinks([HealthSink(kind: "mqtt", name: "mqtt", state: "connected")]), at: 31, wallClock: t0)).isEmpty)
        let alert: JSONObject = ["id": "x", "kind": "low"]
        let withAlert = healthMessages(machine.handle(.activeAlerts([alert]), at: 40, wallClock: t0))
        #expect(withAlert.count == 1 && withAlert[0].contains(#""alerts":[{"id":"x","kind":"low"}]"#))
        #expect(healthMessages(machine.handle(.health(.with(adapterWorking: false, lastSync: [Self.meter: t0])), at: 50, wallClock: t0)).count == 1)
        #expect(healthMessages(machine.handle(.tick, at: 40 + GatewayHealthTopic.refreshMillis, wallClock: t0)).isEmpty)
        #expect(healthMessages(machine.handle(.tick, at: 50 + GatewayHealthTopic.refreshMillis, wallClock: t0)).count == 1, "4½ minutes: again")
        _ = machine.handle(.disconnected, at: 60 + GatewayHealthTopic.refreshMillis)
        #expect(machine.handle(.health(.with(adapterWorking: true)), at: 70 + GatewayHealthTopic.refreshMillis, wallClock: t0).isEmpty)
        let again = healthMessages(machine.handle(.connected(session: 1), at: 80 + GatewayHealthTopic.refreshMillis, wallClock: t0))
        #expect(again.count == 1 && again[0].contains(#""powered":true"#), "re-published after a reconnect, as it is now")
    }
}
