@testable import SugarForward
import MQTT
import SugarWire
import Testing

/// The health entities' messages (`HealthPublisher`, from the `GatewayHealth` the follower
/// gathers from sugard): each topic's value goes out when it changes, all of them again after a
/// new broker connection, and a meter turns overdue as time passes.
@Suite struct HealthPublisherTests {
    static let topics = ForwardTopics(config: ForwardConfig(gatewayID: "gw1", socketPath: "/tmp/s", stateDirectory: "/tmp"))

    static func texts(_ messages: [MQTTMessage]) -> [String] {
        messages.map { "\($0.topic) \(String(decoding: $0.payload, as: UTF8.self))\($0.retain ? "" : " (not retained)")" }
    }

    @Test func adapterSyncTimesAndOverdueGoOutWhenTheyChange() {
        var publisher = HealthPublisher(topics: Self.topics, overdueHours: 24)
        let hour: Int64 = 3_600_000
        let synced: Int64 = 1_764_000_000_000
        var health = GatewayHealth()
        #expect(publisher.update(health, now: synced).isEmpty, "nothing known, nothing said")
        health = .with(adapterWorking: false, lastSync: ["C0:26:DA:11:22:33": synced])
        #expect(Self.texts(publisher.update(health, now: synced + hour)) == [
            "sugard/gw1/adapter ON",
            "sugard/gw1/c026da112233/last_synced 2025-11-24T16:00:00Z",
            "sugard/gw1/c026da112233/sync_overdue OFF",
        ])
        #expect(publisher.update(health, now: synced + 2 * hour).isEmpty, "no change, no message")
        #expect(publisher.tick(now: synced + 23 * hour).isEmpty)
        #expect(Self.texts(publisher.tick(now: synced + 25 * hour)) == ["sugard/gw1/c026da112233/sync_overdue ON"])
        // The adapter is back and the meter synced again.
        health = .with(adapterWorking: true, lastSync: ["C0:26:DA:11:22:33": synced + 25 * hour])
        #expect(Self.texts(publisher.update(health, now: synced + 25 * hour)) == [
            "sugard/gw1/adapter OFF",
            "sugard/gw1/c026da112233/last_synced 2025-11-25T17:00:00Z",
            "sugard/gw1/c026da112233/sync_overdue OFF",
        ])
        // A new connection: everything again (retained values may have been lost with the broker).
        #expect(publisher.all(now: synced + 26 * hour).count == 3)
    }

    @Test func onlySyncsThatEndedWellCount() {
        var health = GatewayHealth()
        func meter(_ id: String, _ result: Wire.SyncResult, at millis: Int64) -> Wire.WatchedField {
            let identity = Wire.MeterIdentity(id: id, name: nil, manufacturer: nil, model: nil, serialNumber: nil, firmware: nil, displayName: id)
            let last = Wire.LastSync(meter: id, at: Wire.Instant(epochMillis: millis), result: result, stored: 1, duplicates: 0, reset: false)
            return .meters([
                Wire.Meter(
                    id: id, identity: identity, link: .disconnected, sync: .idle, progress: Wire.Progress(received: 0, expected: nil),
                    lastSync: last, highWater: nil, pairing: .unknown, lastError: nil, nextAttempt: nil)
            ])
        }
        health.take(meter("A", .success, at: 1000))
        health.take(meter("B", .failed, at: 2000))
        health.take(meter("A", .noNewRecords, at: 3000))
        health.take(meter("A", .interrupted, at: 4000))
        #expect(health.lastSync == ["A": 3000])
    }
}
