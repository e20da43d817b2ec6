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
    /// instances. ward-a's meter (assigned to anna) stops syncing and turns overdue by the real
    /// forwarder's health message (`sync_overdue_hours` of 15 s); ward-b's forwarder is
    /// SIGKILLed. A third gateway, ward-c, is published by hand (its health with an active alert,
    /// which the forwarder's alert rules will fill, and a person's low reading). The page, loaded
    /// in headless Chromium, shows ward-b offline, ward-a's overdue meter, ward-c's alert and the
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

    /// The simulated meter of a one-meter sugard.
    static let simMeter = "D4:A0:5E:00:00:00"

    /// sugard with one simulated meter taking a reading a second for 5 s (then it never syncs
    /// again), and sugard-forward. `person`: the meter is assigned to them (for the last two
    /// hours) before the forwarder starts; `overdueHours`: the forwarder's `sync_overdue_hours`.
    func startGateway(
        _ rig: HubRig, _ name: String, person: String? = nil, overdueHours: Double? = nil
    ) async throws -> (sugard: Child, forwarder: Child) {
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
        \(overdueHours.map { "sync_overdue_hours = \($0)" } ?? "")
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
        if let person {
            var last = ""
            // The meter is known once it was seen (at once: it has readings).
            let assigned = try await eventually(within: 30) {
                let out = try await runToEnd(
                    try builtProduct("sugarctl"), ["--socket", dir + "/s", "meters", "assign", Self.simMeter, person, "--from", "2h"],
                    environment: ["PATH": "/usr/bin:/bin"], dir: dir, seconds: 30)
                last = out.stdout + out.stderr
                return out.status == 0
            }
            try #require(assigned, "sugarctl meters assign: \(last)")
        }
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

        let wardA = try await self.startGateway(rig, "ward-a", person: "anna", overdueHours: 15.0 / 3600)
        let wardB = try await self.startGateway(rig, "ward-b")
        _ = wardA
        let store = try rig.store()
        func scalar(_ sql: String) -> String? { try? store.query(sql).scalar }
        let flowing = await eventually(within: 60) {
            scalar("SELECT count(DISTINCT gateway) FROM reading") == "2"
                && scalar("SELECT count(*) FROM gateway WHERE online") == "2"
        }
        try #require(flowing, "no readings from both gateways:\n\(readFile(rig.dir + "/ward-a-forward.log"))\n\(rig.hubLog("hub-a"))")

        // The real forwarders' health messages: each gateway's adapter, storage, database and
        // meters are in PostgreSQL within seconds.
        let described = await eventually(within: 30) {
            scalar("SELECT count(*) FROM gateway WHERE adapter IS NOT NULL AND database_id IS NOT NULL AND storage IS NOT NULL") == "2"
                && scalar("SELECT count(*) FROM meter WHERE reading_count > 0 AND last_sync IS NOT NULL") == "2"
        }
        try #require(described, "no health from the gateways: \(rig.hubLog("hub-a"))\n\(rig.hubLog("hub-b"))")
        let status = try await runToEnd(
            try builtProduct("sugarctl"), ["--socket", rig.dir + "/ward-a/s", "status", "--json"], environment: ["PATH": "/usr/bin:/bin"],
            dir: rig.dir, seconds: 30)
        let databaseId = try JSONValue(parsing: status.stdout)["state"]?["daemon"]?["storage"]?["databaseId"]?.stringValue
        try #require(databaseId != nil, "sugarctl status --json: \(status.stdout) \(status.stderr)")
        // ward-a's meter takes no reading after 5 s: 15 s after its last sync the forwarder says it is overdue.
        let overdue = await eventually(within: 60) {
            scalar("SELECT count(*) FROM meter WHERE gateway = 'ward-a' AND overdue AND person = 'anna'") == "1"
        }
        try #require(overdue, "ward-a's meter never showed overdue: \(scalar("SELECT health::text FROM gateway WHERE id = 'ward-a'") ?? "no health")")
        let api = try JSONValue(parsing: httpGet(port: open, path: "/api/gateways")?.body ?? "")
        let a = try #require(api.arrayValue?.first { $0["id"] == "ward-a" }, "ward-a in /api/gateways: \(api.serialized())")
        #expect(a["adapter"]?["present"] == true && a["adapter"]?["powered"] == true, "\(a.serialized())")
        #expect(a["storage"] == ["ok": true] && a["databaseId"]?.stringValue == databaseId && a["version"]?.stringValue?.isEmpty == false)
        let meterA = try #require(a["meters"]?.arrayValue?.first, "ward-a's meters: \(a.serialized())")
        let meterName = try #require(meterA["name"]?.stringValue, "the meter's name: \(meterA.serialized())")
        #expect(meterA["id"]?.stringValue == Self.simMeter && meterA["person"] == "anna" && meterA["overdue"] == true)
        #expect((meterA["readingCount"]?.intValue ?? 0) >= 5 && ["success", "noNewRecords"].contains(meterA["lastSyncResult"]?.stringValue ?? ""), "\(meterA.serialized())")
        let healthText = scalar("SELECT health::text FROM gateway WHERE id = 'ward-a'") ?? ""
        #expect(try JSONValue(parsing: healthText)["sinks"] == [["kind": "mqtt", "name": "mqtt", "state": "connected"]], "ward-a's health: \(healthText)")

        // ward-c: published by hand, as the forwarder will once its alert rules fill `alerts`
        // (issue 33): an active alert in its health, and two readings of ben's.
        let health = """
            {"gatewayId":"ward-c","version":"0.1.0","time":"2026-12-03T08:00:00Z","adapter":{"present":true,"powered":true,"reason":null},"storage":"ok",\
            "databaseId":null,"meters":[{"id":"C0:26:DA:00:00:01","name":"Ward C meter","person":"ben","lastSync":{"time":"2026-11-20T08:00:00Z","result":"success"},"overdue":true,"readingCount":12}],\
            "alerts":[{"id":"meter-overdue/C0:26:DA:00:00:01","kind":"meterOverdue","message":"Ward C meter has not synced for 13 days"}],"sinks":[]}
            """
        let nowMillis = Int64(Date().timeIntervalSince1970 * 1000)
        let publisher = try TestPublisher(
            port: rig.brokerPort,
            messages: [
                MQTTMessage(topic: "sugard/ward-c/status", payload: Array("online".utf8), retain: true),
                MQTTMessage(topic: "sugard/ward-c/health", payload: Array(health.utf8), retain: true),
                MQTTMessage(
                    topic: "sugard/ward-c/c026da000001/reading",
                    payload: readingPayload(meter: "C0:26:DA:00:00:01", sequence: 1, epochMillis: nowMillis - 3_600_000, mgdl: 54, person: "ben")),
                MQTTMessage(
                    topic: "sugard/ward-c/c026da000001/reading",
                    payload: readingPayload(meter: "C0:26:DA:00:00:01", sequence: 2, epochMillis: nowMillis - 7_200_000, mgdl: 120, person: "ben")),
            ])
        defer { publisher.stop() }
        let healthStored = await eventually(within: 30) {
            scalar("SELECT count(*) FROM alert WHERE gateway = 'ward-c' AND active") == "1"
                && scalar("SELECT count(*) FROM reading WHERE person = 'ben'") == "2"
        }
        try #require(healthStored, "ward-c not stored: \(rig.hubLog("hub-a"))\n\(rig.hubLog("hub-b"))")

        // ward-b's forwarder dies: its will (offline) comes within the keep-alive (30 s x 1.5).
        wardB.forwarder.kill()
        let offline = await eventually(within: 60) { scalar("SELECT online FROM gateway WHERE id = 'ward-b'") == "f" }
        #expect(offline, "ward-b still online after its forwarder was killed")

        let dom = try await Self.dumpDOM(rig.dir, "http://127.0.0.1:\(open)/")
        let rowB = Self.row(dom, id: "gateway-ward-b") ?? ""
        let rowA = Self.row(dom, id: "gateway-ward-a") ?? ""
        let rowC = Self.row(dom, id: "gateway-ward-c") ?? ""
        #expect(rowB.contains(">offline<"), "ward-b's row: \(rowB)")
        #expect(rowA.contains(">online<") && rowA.contains("overdue: \(meterName) (anna)"), "ward-a's row: \(rowA)")
        #expect(rowC.contains(">online<") && rowC.contains("has not synced for 13 days"), "ward-c's row: \(rowC)")
        let ben = Self.row(dom, id: "person-ben") ?? ""
        #expect(ben.contains("54 mg/dL") && ben.contains("1 of 2") && ben.contains("last reading low"), "ben's row: \(ben)")
        #expect(Self.row(dom, id: "person-anna")?.contains("mg/dL") == true, "anna's row (ward-a's real readings)")
        // Problems first: both gateways have one, so ordered by name; the person with a problem before the rest.
        #expect(dom.contains("http-equiv=\"refresh\""))
        #expect(!dom.contains("<script"))

        // The report of `sugarctl report` for ben, from the hub's data.
        let report = httpGet(port: open, path: "/person/ben/report")
        #expect(report?.status == 200 && report?.body.contains("<html") == true, "report: \(report?.status ?? -1)")
        #expect(httpGet(port: open, path: "/person/nobody/report")?.status == 404)

        // The API: JSON, paged readings, alerts.
        let gateways = try JSONValue(parsing: httpGet(port: open, path: "/api/gateways")?.body ?? "")
        #expect(gateways.arrayValue?.count == 3)
        let page1 = try JSONValue(parsing: httpGet(port: open, path: "/api/readings?person=ben&limit=1")?.body ?? "")
        #expect(page1["readings"]?.arrayValue?.count == 1)
        let next = try #require(page1["next"]?.stringValue, "a next page")
        let page2 = try JSONValue(parsing: httpGet(port: open, path: "/api/readings?person=ben&limit=1&after=\(next)")?.body ?? "")
        #expect(page2["readings"]?.arrayValue?.count == 1 && page2["next"]?.isNull == true)
        #expect(httpGet(port: open, path: "/api/readings?since=yesterday")?.status == 400)
        let alerts = try JSONValue(parsing: httpGet(port: open, path: "/api/alerts")?.body ?? "")
        // Ordered by last update, and ward-a's real forwarder publishes alerts of its own (its rules
        // raise sync_overdue for the meter that stopped): ward-c's alert is looked up by gateway.
        let byGateway = Dictionary(grouping: alerts.arrayValue ?? [], by: { $0["gateway"]?.stringValue ?? "" })
        #expect(byGateway["ward-c"]?.map { $0["kind"]?.stringValue } == ["meterOverdue"], "alerts: \(alerts)")
        #expect(byGateway["ward-c"]?.first?["active"]?.boolValue == true)

        // The bearer token: every path but /healthz.
        #expect(httpGet(port: guarded, path: "/")?.status == 401)
        #expect(httpGet(port: guarded, path: "/api/gateways", token: "wrong")?.status == 401)
        #expect(httpGet(port: guarded, path: "/api/gateways", token: token)?.status == 200)
        #expect(httpGet(port: guarded, path: "/healthz")?.status == 200)
        return offline
    }
}
