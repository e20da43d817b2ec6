import Foundation
import Glibc
import HubStore
import Locking
import MQTT
import Testing
import TestSupport

/// Publishes readings in the forwarder's contract (QoS 1, `<prefix>/<gateway>/<meter>/reading`,
/// the reading payload with its `id`) like sugard-forward does: everything not yet acknowledged
/// is published again after each reconnect.
final class TestPublisher: Sendable {
    struct State {
        var pending: [Int64: MQTTMessage] = [:]
        var session = 0
    }
    let state = Lock(State())
    let client: Lock<MQTTClient?> = Lock(nil)

    init(port: Int, messages: [MQTTMessage]) throws {
        self.state.withLock { s in for (i, m) in messages.enumerated() { s.pending[Int64(i)] = m } }
        var options = MQTTOptions(host: "127.0.0.1", port: Int32(port), clientID: "test-publisher-\(UInt32.random(in: 0...UInt32.max))")
        options.maxInFlight = 20
        let state = self.state
        let holder = self.client
        let client = MQTTClient(options: options) { event in
            switch event {
            case .connected(let session):
                let all = state.withLock { s -> [(Int64, MQTTMessage)] in
                    s.session = session
                    return s.pending.sorted { $0.key < $1.key }
                }
                holder.withLock { c in for (token, m) in all { c?.publish(m, token: token, session: session) } }
            case .acknowledged(let tokens, _):
                state.withLock { s in for t in tokens { s.pending.removeValue(forKey: t) } }
            default: break
            }
        }
        self.client.withLock { $0 = client }
        try client.start()
    }

    var unacknowledged: Int { self.state.withLock { $0.pending.count } }
    func stop() { self.client.withLock { $0?.stop() } }
}

/// The forwarder's reading payload for one simulated reading.
func readingPayload(meter: String, sequence: Int, epochMillis: Int64, mgdl: Double, person: String?) -> [UInt8] {
    let person = person.map { "\"\($0)\"" } ?? "null"
    return Array(
        """
        {"id":"\(meter)/1/\(sequence)","meter":"\(meter)","sequenceNumber":\(sequence),"time":"2026-12-01T08:00:00+01:00","epochMillis":\(epochMillis),"mgdL":\(mgdl),"mmolL":\((mgdl / 18.016 * 10).rounded() / 10),"flags":[],"sampleType":"capillaryWholeBlood","sampleLocation":"finger","meal":null,"controlSolution":false,"person":\(person),"kind":"glucose","unknownKeyFromTheFuture":{"x":1}}
        """.utf8)
}

@Suite("sugard-hub delivery", .serialized)
struct HubDeliveryTests {
    /// Two hub instances in one shared-subscription group; 5 gateways publish 300 readings each.
    /// One hub is SIGKILLed mid-stream (and restarted as systemd would), then the broker is
    /// stopped and started again: every reading is in PostgreSQL exactly once.
    @Test(.enabled(if: Tools.missing.isEmpty, "needs postgresql, mosquitto and setpriv (scripts/install-deps); see the printed SKIP"))
    func everyReadingOnceThroughKillsAndBrokerRestart() async throws {
        let rig = try HubRig()
        let ok: Bool
        do {
            ok = try await self.killsAndRestart(rig)
        } catch {
            await rig.cleanUp(keep: true)
            throw error
        }
        await rig.cleanUp(keep: !ok)
    }

    func killsAndRestart(_ rig: HubRig) async throws -> Bool {
        try await rig.startPostgres()
        try await rig.startBroker()
        let portA = try freePort()
        let portB = try freePort()
        _ = try rig.writeHubConfig("hub-a", httpPort: portA)
        _ = try rig.writeHubConfig("hub-b", httpPort: portB)
        // Both at once: the migration's advisory lock lets one create the tables.
        try rig.startHub("hub-a")
        try rig.startHub("hub-b")
        let healthy = await eventually(within: 30) {
            httpGet(port: portA, path: "/healthz")?.status == 200 && httpGet(port: portB, path: "/healthz")?.status == 200
        }
        try #require(healthy, "hubs did not come up:\nA: \(rig.hubLog("hub-a"))\nB: \(rig.hubLog("hub-b"))")
        // Subscribed (the session exists at the broker) before anything is published.
        let subscribed = await eventually(within: 20) {
            rig.hubLog("hub-a").contains("connected to") && rig.hubLog("hub-b").contains("connected to")
        }
        try #require(subscribed)
        try await Task.sleep(for: .milliseconds(300))

        let gateways = (1...5).map { "ward\($0)" }
        var messages: [MQTTMessage] = []
        var expected = Set<String>()
        let base: Int64 = 1_796_000_000_000
        for sequence in 1...300 {
            for (g, gateway) in gateways.enumerated() {
                let meter = "c026da01\(String(format: "%04x", g))"
                let payload = readingPayload(meter: meter, sequence: sequence, epochMillis: base + Int64(sequence) * 60_000, mgdl: Double(80 + sequence % 120), person: "p\(g)")
                messages.append(MQTTMessage(topic: "sugard/\(gateway)/\(meter)/reading", payload: payload))
                expected.insert("\(gateway) \(meter)/1/\(sequence)")
            }
        }
        let store = try rig.store()
        func count() -> Int { (try? store.query("SELECT count(*) FROM reading").scalar.flatMap { Int($0) }) ?? -1 }
        let publisher = try TestPublisher(port: rig.brokerPort, messages: messages)
        defer { publisher.stop() }

        let some = await eventually(within: 60) { count() >= 200 }
        try #require(some, "readings did not arrive: \(count())\n\(rig.hubLog("hub-a"))")
        rig.hubs["hub-a"]?.kill()
        try await Task.sleep(for: .milliseconds(500))
        try rig.startHub("hub-a")

        let more = await eventually(within: 60) { count() >= 700 }
        try #require(more, "readings stalled after the kill: \(count())")
        await rig.stopBroker()
        try await Task.sleep(for: .milliseconds(500))
        try await rig.startBroker()

        let all = await eventually(within: 120) { count() >= expected.count && publisher.unacknowledged == 0 }
        let rows = try store.query("SELECT gateway, id FROM reading").rows
        let stored = rows.map { "\($0[0] ?? "") \($0[1] ?? "")" }
        #expect(all, "stored \(stored.count) of \(expected.count), \(publisher.unacknowledged) unacknowledged")
        let missing = expected.subtracting(stored)
        #expect(missing.isEmpty, "\(missing.count) missing, e.g. \(missing.sorted().prefix(10))")
        #expect(Set(stored).isSubset(of: expected), "stored readings nobody published")
        #expect(stored.count == Set(stored).count, "a reading stored twice")
        // The readings carry what the hub queries by.
        let person = try store.query("SELECT count(*) FROM reading WHERE person = 'p0' AND kind = 'glucose' AND mgdl IS NOT NULL").scalar
        #expect(person == "300")
        // Both instances took a share (the shared subscription split the load).
        #expect(rig.hubLog("hub-b").contains("connected to"))
        return all && missing.isEmpty
    }

    /// PostgreSQL stops (immediate shutdown) mid-stream and comes back: the hubs withhold the
    /// PUBACKs of what they could not commit, the broker sends those again, and every reading is
    /// stored once; the hubs keep running and say why in their logs.
    @Test(.enabled(if: Tools.missing.isEmpty, "needs postgresql, mosquitto and setpriv (scripts/install-deps); see the printed SKIP"))
    func databaseOutageLosesNothing() async throws {
        let rig = try HubRig()
        let ok: Bool
        do {
            ok = try await self.outage(rig)
        } catch {
            await rig.cleanUp(keep: true)
            throw error
        }
        await rig.cleanUp(keep: !ok)
    }

    func outage(_ rig: HubRig) async throws -> Bool {
        try await rig.startPostgres()
        try await rig.startBroker()
        for name in ["hub-a", "hub-b"] {
            _ = try rig.writeHubConfig(name, httpPort: try freePort())
            try rig.startHub(name)
        }
        let subscribed = await eventually(within: 30) {
            rig.hubLog("hub-a").contains("connected to") && rig.hubLog("hub-b").contains("connected to")
        }
        try #require(subscribed, "\(rig.hubLog("hub-a"))\n\(rig.hubLog("hub-b"))")
        try await Task.sleep(for: .milliseconds(300))
        var messages: [MQTTMessage] = []
        for sequence in 1...400 {
            for g in 0..<3 {
                let meter = "c026da02000\(g)"
                messages.append(
                    MQTTMessage(
                        topic: "sugard/site\(g)/\(meter)/reading",
                        payload: readingPayload(meter: meter, sequence: sequence, epochMillis: 1_796_000_000_000 + Int64(sequence) * 1000, mgdl: 100, person: nil)))
            }
        }
        let publisher = try TestPublisher(port: rig.brokerPort, messages: messages)
        defer { publisher.stop() }
        var store = try rig.store()
        let some = await eventually(within: 60) { ((try? store.query("SELECT count(*) FROM reading").scalar).flatMap { Int($0) } ?? 0) >= 100 }
        try #require(some)
        await rig.stopPostgres()
        try await Task.sleep(for: .seconds(2))
        try await rig.restartPostgres()
        store = try rig.store()
        let all = await eventually(within: 120) {
            (try? store.query("SELECT count(*) FROM reading").scalar) == "1200" && publisher.unacknowledged == 0
        }
        let distinct = try store.query("SELECT count(DISTINCT (gateway, id)) FROM reading").scalar
        let count = (try? store.query("SELECT count(*) FROM reading").scalar) ?? "?"
        #expect(all, "stored \(count) of 1200")
        #expect(distinct == "1200")
        let running = rig.hubs.values.filter { $0.isRunning }.count
        #expect(running == 2, "a hub exited")
        let logs = rig.hubLog("hub-a") + rig.hubLog("hub-b")
        #expect(logs.contains("not acknowledged until it is stored"), "no hub noticed the outage")
        return all && distinct == "1200"
    }
}
