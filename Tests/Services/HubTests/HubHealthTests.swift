import HubStore
import JSON
import MQTT
import SugarHub
import SugarWire
import Testing

@testable import SugarForward

/// What sugard-forward publishes on `<prefix>/<gateway>/health` is what the hub reads: every
/// part of the message made by the forwarder's own code, parsed by the hub's.
@Suite struct HubHealthTests {
    @Test func theHubReadsTheForwardersHealthMessage() throws {
        var config = ForwardConfig(gatewayID: "ward-3", socketPath: "/tmp/s", stateDirectory: "/tmp")
        config.syncOverdueHours = 24
        var topic = GatewayHealthTopic(topics: ForwardTopics(config: config), version: "0.1.0")
        let t0: Int64 = 1_764_000_000_000
        let identity = Wire.MeterIdentity(
            id: "C0:26:DA:01:3A:7F", name: nil, manufacturer: nil, model: nil, serialNumber: nil, firmware: nil, displayName: "Contour")
        let stored = Wire.StoredMeter(
            firstSeen: Wire.Instant(epochMillis: t0 - 90_000_000), lastSeen: Wire.Instant(epochMillis: t0), highWater: 9, epoch: 0,
            lastSync: Wire.Instant(epochMillis: t0 - 90_000_000), lastSyncResult: .success, readingCount: 9, features: nil, person: "mia")
        topic.health.take([Wire.MeterEntry(id: "C0:26:DA:01:3A:7F", identity: identity, live: nil, stored: stored, person: "mia")])
        topic.health.adapter = Wire.Adapter(present: true, powered: false, discovering: false, name: nil, address: nil)
        topic.health.storage = Wire.Storage(status: .ok, path: "/x", error: nil, databaseId: "db-1")
        topic.sinks = [HealthSink(kind: "mqtt", name: "mqtt", state: "connected")]
        topic.alerts = [["id": "meterOverdue/C0:26:DA:01:3A:7F", "kind": "meterOverdue", "meter": "C0:26:DA:01:3A:7F", "message": "late"]]
        let next = topic.next(now: 0, wallClock: t0, databaseId: nil)
        let message = try #require(next)

        guard case .health(let gateway, let h) = HubMessage.parse(topic: message.topic, payload: message.payload, prefix: "sugard") else {
            Issue.record("the hub does not take \(message.topic) as health")
            return
        }
        #expect(gateway == "ward-3" && h.version == "0.1.0" && h.databaseID == "db-1")
        let adapter = try JSONValue(parsing: h.adapter ?? "")
        #expect(adapter["present"] == true && adapter["powered"] == false && adapter["reason"]?.stringValue?.contains("powered off") == true)
        #expect(try JSONValue(parsing: h.storage ?? "") == ["ok": true])
        #expect(
            h.meters == [
                HubMeter(
                    id: "C0:26:DA:01:3A:7F", name: "Contour", person: "mia", lastSync: Wire.Instant(epochMillis: t0 - 90_000_000).iso,
                    lastSyncResult: "success", overdue: true, readingCount: 9)
            ])
        #expect(h.alerts.map(\.id) == ["meterOverdue/C0:26:DA:01:3A:7F"] && h.alerts.first?.active == true && h.alerts.first?.message == "late")
        #expect(h.payload == String(decoding: message.payload, as: UTF8.self), "the whole message is kept (sinks too)")
    }
}
