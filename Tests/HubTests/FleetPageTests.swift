import Foundation
import Glibc
import HubStore
import JSON
import MQTT
import Testing
import TestSupport

@Suite("sugard-hub fleet page", .serialized)
struct FleetPageTests {
    static let chromium = "/usr/bin/chromium"

    /// The page in headless Chromium (as a browser renders it, no script involved).
    static func dumpDOM(_ dir: String, _ url: String) async throws -> String {
        let out = try await runToEnd(
            chromium,
            [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=\(dir)/chromium-profile",
                "--dump-dom", url,
            ], environment: ["HOME": dir, "PATH": "/usr/bin:/bin"], dir: dir, seconds: 120)
        try #require(out.status == 0, "chromium: \(out.stderr)")
        return out.stdout
    }

    /// One `<tr id="...">` row of the dumped page.
    static func row(_ dom: String, id: String) -> String? {
        guard let start = dom.range(of: "<tr id=\"\(id)\"") ?? dom.range(of: "id=\"\(id)\"") else { return nil }
        let rest = dom[start.lowerBound...]
        guard let end = rest.range(of: "</tr>") else { return nil }
        return String(rest[..<end.upperBound])
    }

    /// Two real gateways (sugard on simulated meters + sugard-forward each) into two hub
    /// instances; one gateway reports an overdue meter and an alert in its health, the other's
    /// forwarder is SIGKILLed: the page, loaded in headless Chromium, shows it offline and the
    /// problems first; the API and the bearer token work as documented.
    @Test(.enabled(if: Tools.missing.isEmpty && access(chromium, X_OK) == 0, "needs postgresql, mosquitto, setpriv and chromium (scripts/install-deps)"))
    func realGatewaysOnThePage() async throws {
        let rig = try HubRig()
        let ok: Bool
        do {
            ok = try await self.run(rig)
        } catch {
            await rig.cleanUp(keep: true)
            throw error
        }
        await rig.cleanUp(keep: !ok)
    }

    func startGateway(_ rig: HubRig, _ name: String) async throws -> (sugard: Child, forwarder: Child) {
        let dir = rig.dir + "/" + name
        mkdir(dir, 0o755)
        let now = Int64(Date().timeIntervalSince1970)
        try """
        state_dir = \(dir)/state
        socket = \(dir)/s
        simulate_meters = 1
        simulate_start = \(now - 20)
        simulate_stop = \(now + 5)
        demo_interval = 1
        cooldown_seconds = 1
        timezone = UTC
        """.write(toFile: dir + "/sugard.conf", atomically: true, encoding: .utf8)
        try """
        mqtt_url = mqtt://127.0.0.1:\(rig.brokerPort)
        gateway_id = \(name)
        homeassistant_discovery = false
        """.write(toFile: dir + "/forward.conf", atomically: true, encoding: .utf8)
        chmod(dir + "/forward.conf", 0o640)
        let log = try rig.log("\(name)-sugard.log")
        defer { close(log) }
        let sugard = try Child(
            try builtProduct("sugard"), ["--config", dir + "/sugard.conf"], environment: ["TZ": "UTC", "PATH": "/usr/bin:/bin"], stdout: log,
            stderr: log)
        rig.others.append(sugard)
        let up = await eventually(within: 30) { access(dir + "/s", F_OK) == 0 }
        try #require(up, "sugard \(name) did not start: \(readFile(rig.dir + "/\(name)-sugard.log"))")
        let flog = try rig.log("\(name)-forward.log")
        defer { close(flog) }
        let forwarder = try Child(
            try builtProduct("sugard-forward"), ["--config", dir + "/forward.conf", "--socket", dir + "/s", "--state-dir", dir + "/fwd"],
            environment: ["PATH": "/usr/bin:/bin"], stdout: flog, stderr: flog)
        rig.others.append(forwarder)
        return (sugard, forwarder)
    }

    func run(_ rig: HubRig) async throws -> Bool {
        try await rig.startPostgres()
        try await rig.startBroker()
        let open = try freePort()
        let guarded = try freePort()
        let token = "t0ken-\(UInt64.random(in: 0...UInt64.max))"
        try (token + "\n").write(toFile: rig.dir + "/token", atomically: true, encoding: .utf8)
        chmod(rig.dir + "/token", 0o600)
        _ = try rig.writeHubConfig("hub-a", httpPort: open)
        _ = try rig.writeHubConfig("hub-b", httpPort: guarded, extra: "auth_token_file = \(rig.dir)/token")
        try rig.startHub("hub-a")
        try rig.startHub("hub-b")
        let up = await eventually(within: 30) {
            httpGet(port: open, path: "/healthz")?.status == 200 && httpGet(port: guarded, path: "/healthz")?.status == 200
        }
        try #require(up, "hubs: \(rig.hubLog("hub-a"))\n\(rig.hubLog("hub-b"))")
        _ = await eventually(within: 20) { rig.hubLog("hub-a").contains("connected to") && rig.hubLog("hub-b").contains("connected to") }

        let wardA = try await self.startGateway(rig, "ward-a")
        let wardB = try await self.startGateway(rig, "ward-b")
        _ = wardA
        let store = try rig.store()
        func scalar(_ sql: String) -> String? { try? store.query(sql).scalar }
        let flowing = await eventually(within: 60) {
            scalar("SELECT count(DISTINCT gateway) FROM reading") == "2"
                && scalar("SELECT count(*) FROM gateway WHERE online") == "2"
        }
        try #require(flowing, "no readings from both gateways:\n\(readFile(rig.dir + "/ward-a-forward.log"))\n\(rig.hubLog("hub-a"))")

        // ward-a's health: an overdue meter of a person and an active alert (what sugard-forward's
        // health topic carries), plus two readings of that person.
        let health = """
            {"gatewayId":"ward-a","version":"0.1.0","time":"2026-12-03T08:00:00Z","adapter":{"present":true,"powered":true},"storage":"ok",\
            "meters":[{"id":"C0:26:DA:00:00:01","name":"Ward A meter","person":"anna","lastSync":{"time":"2026-11-20T08:00:00Z","result":"ok"},"overdue":true,"readingCount":12}],\
            "alerts":[{"id":"meter-overdue/C0:26:DA:00:00:01","kind":"meterOverdue","message":"Ward A meter has not synced for 13 days"}],"sinks":[]}
            """
        let nowMillis = Int64(Date().timeIntervalSince1970 * 1000)
        let publisher = try TestPublisher(
            port: rig.brokerPort,
            messages: [
                MQTTMessage(topic: "sugard/ward-a/health", payload: Array(health.utf8), retain: true),
                MQTTMessage(
                    topic: "sugard/ward-a/c026da000001/reading",
                    payload: readingPayload(meter: "C0:26:DA:00:00:01", sequence: 1, epochMillis: nowMillis - 3_600_000, mgdl: 54, person: "anna")),
                MQTTMessage(
                    topic: "sugard/ward-a/c026da000001/reading",
                    payload: readingPayload(meter: "C0:26:DA:00:00:01", sequence: 2, epochMillis: nowMillis - 7_200_000, mgdl: 120, person: "anna")),
            ])
        defer { publisher.stop() }
        let healthStored = await eventually(within: 30) {
            scalar("SELECT count(*) FROM meter WHERE overdue") == "1" && scalar("SELECT count(*) FROM reading WHERE person = 'anna'") == "2"
        }
        try #require(healthStored, "health not stored: \(rig.hubLog("hub-a"))\n\(rig.hubLog("hub-b"))")

        // ward-b's forwarder dies: its will (offline) comes within the keep-alive (30 s x 1.5).
        wardB.forwarder.kill()
        let offline = await eventually(within: 60) { scalar("SELECT online FROM gateway WHERE id = 'ward-b'") == "f" }
        #expect(offline, "ward-b still online after its forwarder was killed")

        let dom = try await Self.dumpDOM(rig.dir, "http://127.0.0.1:\(open)/")
        let b = Self.row(dom, id: "gateway-ward-b") ?? ""
        let a = Self.row(dom, id: "gateway-ward-a") ?? ""
        #expect(b.contains(">offline<"), "ward-b's row: \(b)")
        #expect(a.contains(">online<") && a.contains("overdue: Ward A meter (anna)") && a.contains("has not synced for 13 days"), "ward-a's row: \(a)")
        let anna = Self.row(dom, id: "person-anna") ?? ""
        #expect(anna.contains("54 mg/dL") && anna.contains("1 of 2") && anna.contains("last reading low"), "anna's row: \(anna)")
        // Problems first: both gateways have one, so ordered by name; the person with a problem before the rest.
        #expect(dom.contains("http-equiv=\"refresh\""))
        #expect(!dom.contains("<script"))

        // The report of `sugarctl report` for anna, from the hub's data.
        let report = httpGet(port: open, path: "/person/anna/report")
        #expect(report?.status == 200 && report?.body.contains("<html") == true, "report: \(report?.status ?? -1)")
        #expect(httpGet(port: open, path: "/person/nobody/report")?.status == 404)

        // The API: JSON, paged readings, alerts.
        let gateways = try JSONValue(parsing: httpGet(port: open, path: "/api/gateways")?.body ?? "")
        #expect(gateways.arrayValue?.count == 2)
        let page1 = try JSONValue(parsing: httpGet(port: open, path: "/api/readings?person=anna&limit=1")?.body ?? "")
        #expect(page1["readings"]?.arrayValue?.count == 1)
        let next = try #require(page1["next"]?.stringValue, "a next page")
        let page2 = try JSONValue(parsing: httpGet(port: open, path: "/api/readings?person=anna&limit=1&after=\(next)")?.body ?? "")
        #expect(page2["readings"]?.arrayValue?.count == 1 && page2["next"]?.isNull == true)
        #expect(httpGet(port: open, path: "/api/readings?since=yesterday")?.status == 400)
        let alerts = try JSONValue(parsing: httpGet(port: open, path: "/api/alerts")?.body ?? "")
        #expect(alerts.arrayValue?.first?["kind"]?.stringValue == "meterOverdue")

        // The bearer token: every path but /healthz.
        #expect(httpGet(port: guarded, path: "/")?.status == 401)
        #expect(httpGet(port: guarded, path: "/api/gateways", token: "wrong")?.status == 401)
        #expect(httpGet(port: guarded, path: "/api/gateways", token: token)?.status == 200)
        #expect(httpGet(port: guarded, path: "/healthz")?.status == 200)
        return offline
    }
}
