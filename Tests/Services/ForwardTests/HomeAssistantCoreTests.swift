import Foundation
import Glibc
import JSON
import Testing
import TestSupport

/// sugard-forward's entities as a real Home Assistant Core (2024.12, from PyPI, installed by
/// scripts/install-deps into /opt/sugard-ha or $SUGARD_HA_VENV) sees them: the built sugard
/// replays the fixture meters (a LO, a 105 mg/dL control-solution test, a ketone record), the
/// built sugard-forward publishes to a real mosquitto, Home Assistant's MQTT integration (a
/// pre-seeded config entry) discovers the entities, and its REST API (a pre-seeded long-lived
/// token, scripts/ha-config) and recorder show what happened. One Home Assistant start for the
/// suite. Without a usable Home Assistant the test is skipped and says why.
@Suite(.serialized) struct HomeAssistantCoreTests {
    static let venv = environmentValue("SUGARD_HA_VENV") ?? "/opt/sugard-ha"
    static let root = #filePath.split(separator: "/", omittingEmptySubsequences: false).dropLast(4).joined(separator: "/")

    /// Why Home Assistant cannot run here (nil when it can); printed when the test is skipped.
    static let unavailable: String? = {
        let python = Self.venv + "/bin/python"
        guard access(Self.venv + "/bin/hass", X_OK) == 0, access(python, X_OK) == 0 else {
            let reason = "Home Assistant Core is not installed in \(Self.venv) (scripts/install-deps installs it; it needs Python >= 3.12)"
            print("HomeAssistantCoreTests: SKIPPED: \(reason)")
            return reason
        }
        let check = "import sys, homeassistant, hass_frontend, paho.mqtt, sqlalchemy; sys.exit(0 if sys.version_info >= (3, 12) else 3)"
        guard let child = try? Child(python, ["-c", check], environment: ["PATH": "/usr/bin:/bin"], stdout: nil, stderr: nil) else {
            return "cannot run \(python)"
        }
        while child.isRunning { usleep(20_000) }
        guard child.exitStatus == 0 else {
            let reason = "\(Self.venv) cannot import Home Assistant and its MQTT, recorder and frontend requirements (exit \(child.exitStatus ?? -1)); run scripts/install-deps"
            print("HomeAssistantCoreTests: SKIPPED: \(reason)")
            return reason
        }
        return nil
    }()

    /// GET `path` on Home Assistant's REST API (through the venv's Python: no HTTP client here).
    static func get(_ rig: ForwardRig, port: Int, token: String, _ path: String) async throws -> JSONValue? {
        let script = """
            import sys, urllib.request
            request = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + sys.argv[2]})
            try:
                sys.stdout.write(urllib.request.urlopen(request, timeout=10).read().decode())
            except Exception as error:
                sys.stderr.write(str(error)); sys.exit(1)
            """
        let result = try await runToEnd(
            Self.venv + "/bin/python", ["-c", script, "http://127.0.0.1:\(port)\(path)", token], environment: ["PATH": "/usr/bin:/bin"],
            dir: rig.dir, seconds: 30)
        guard result.status == 0 else { return nil }
        return try? JSONValue(parsing: result.stdout)
    }

    @Test(.disabled(if: Self.unavailable != nil, Comment(rawValue: Self.unavailable ?? "")))
    func homeAssistantSeesLOAsGlucoseLowNeverAControlTestAsGlucoseAndEveryReadingAsAnEvent() async throws {
        let fixtures = Self.root + "/fixtures/"
        let rig = try ForwardRig(
            seconds: 0, replays: ["accu-chek-guide-mgdl-mtu23", "contour-mmol-large-mtu", "isens-month13"].map { fixtures + $0 + ".btsnoop" })
        var failed = true
        defer { rig.cleanUp(keep: failed || environmentValue("FORWARD_TESTS_KEEP") != nil) }
        let started = Date()
        try await rig.startBroker()
        try await rig.startSubscriber()

        // Home Assistant, configured headless, on a free port, pointed at the rig's broker.
        let haDir = rig.dir + "/ha"
        let httpPort = try freePort()
        let made = try await runToEnd(
            Self.venv + "/bin/python", [Self.root + "/scripts/ha-config", haDir, "--broker-port", String(rig.port), "--http-port", String(httpPort)],
            environment: ["PATH": "/usr/bin:/bin"], dir: rig.dir, seconds: 60)
        try #require(made.status == 0, "scripts/ha-config: \(made.stderr)")
        let token = made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let log = try rig.log("hass.log")
        rig.others.append(
            try Child(
                Self.venv + "/bin/hass", ["-c", haDir, "--skip-pip"], environment: ["PATH": "/usr/bin:/bin", "HOME": haDir],
                stdout: log, stderr: log))
        func haLog() -> String { String(readFile(rig.dir + "/hass.log").suffix(4000)) }
        let up = try await eventually(within: 240) { try await Self.get(rig, port: httpPort, token: token, "/api/")?["message"] == "API running." }
        try #require(up, "Home Assistant's API did not answer:\n\(haLog())")
        // Its MQTT integration subscribed to discovery (it sends its birth message once it has)
        // before sugard-forward starts.
        let subscribed = await eventually(within: 60) {
            readFile(rig.brokerLog).contains("homeassistant/sensor/+/config") && readFile(rig.dir + "/hass.log").contains("birth message sent")
        }
        try #require(subscribed, "Home Assistant did not subscribe to discovery:\n\(haLog())")

        // Warm-up: Home Assistant loads the MQTT sensor, binary_sensor and event platforms on their
        // first discovery config, which can take longer on a loaded machine than the forwarder's
        // settle time after a new meter; a real installation has loaded them long before.
        for (component, extra) in [("sensor", ""), ("binary_sensor", ""), ("event", #","event_types":["x"]"#)] {
            let config = #"{"name":"Warm up","unique_id":"warm_up_\#(component)","state_topic":"warm/\#(component)"\#(extra),"device":{"identifiers":["warm_up"],"name":"Warm up"}}"#
            let published = try await runToEnd(
                try which("mosquitto_pub"), ["-h", "127.0.0.1", "-p", String(rig.port), "-t", "homeassistant/\(component)/warm/up/config", "-m", config],
                environment: [:], dir: rig.dir, seconds: 10)
            try #require(published.status == 0, "mosquitto_pub: \(published.stderr)")
        }
        let warm = try await eventually(within: 60) {
            let ids = try await Self.get(rig, port: httpPort, token: token, "/api/states")?.arrayValue?.compactMap { $0["entity_id"]?.stringValue } ?? []
            return ["sensor.warm_up_warm_up", "binary_sensor.warm_up_warm_up", "event.warm_up_warm_up"].allSatisfy(ids.contains)
        }
        try #require(warm, "Home Assistant did not set up the warm-up entities:\n\(haLog())")

        try await rig.startSugard()
        try rig.startForwarder()

        // The Accu-Chek's entities (its device is named after the meter).
        var ids: [String: String] = [:]
        let found = try await eventually(within: 90) {
            guard let states = try await Self.get(rig, port: httpPort, token: token, "/api/states")?.arrayValue else { return false }
            for state in states {
                guard let id = state["entity_id"]?.stringValue, id.contains("accu_chek") else { continue }
                for suffix in ["_glucose", "_glucose_low", "_glucose_high", "_reading", "_last_synced", "_sync_overdue"] where id.hasSuffix(suffix) {
                    ids[suffix] = id
                }
            }
            let glucose = states.first { $0["entity_id"]?.stringValue == ids["_glucose"] }
            return ids.count == 6 && glucose?["state"] == "97"
        }
        try #require(found, "Home Assistant did not get the Accu-Chek's entities and its newest value (\(ids)):\n\(haLog())\nforwarder:\n\(readFile(rig.forwarderLog).suffix(2000))")

        // What the recorder holds, oldest first, per entity.
        func history(_ entity: String) async throws -> [JSONValue] {
            let start = ISO8601DateFormatter().string(from: started.addingTimeInterval(-60))
            let reply = try await Self.get(
                rig, port: httpPort, token: token, "/api/history/period/\(start)?filter_entity_id=\(entity)&significant_changes_only=0")
            return reply?.arrayValue?.first?.arrayValue ?? []
        }
        let glucoseID = try #require(ids["_glucose"]), lowID = try #require(ids["_glucose_low"]), eventID = try #require(ids["_reading"])
        var events: [JSONValue] = []
        let recorded = try await eventually(within: 30) {
            events = try await history(eventID).filter { $0["state"] != "unknown" && $0["state"] != "unavailable" }
            return events.count >= 5
        }
        #expect(recorded, "the event entity fired \(events.count) times")

        // A LO turns "Glucose low" on.
        let low = try await history(lowID).compactMap { $0["state"]?.stringValue }
        #expect(low.contains("on"), "Glucose low: \(low)")
        #expect(low.last == "off", "off again after the 142 and the 97: \(low)")

        // The control test (105 mg/dL) never becomes the glucose sensor's state, nor does the LO.
        let glucose = try await history(glucoseID).compactMap { $0["state"]?.stringValue }
        let values = glucose.filter { Double($0) != nil }
        #expect(!values.isEmpty && Set(values).isSubset(of: ["88", "142", "97"]), "glucose sensor states: \(glucose)")
        #expect(!glucose.contains("105"))
        if let first = glucose.firstIndex(where: { Double($0) != nil }) {
            #expect(!glucose[first...].contains("unknown"), "a LO does not make the sensor unknown: \(glucose)")
        }
        let states = try await Self.get(rig, port: httpPort, token: token, "/api/states/\(glucoseID)")
        #expect(states?["attributes"]?["kind"] == "glucose" && states?["attributes"]?["measured_at"]?.stringValue != nil, "\(states?.serialized() ?? "")")

        // Each reading fired the event entity once, with its type.
        let types = events.compactMap { $0["attributes"]?["event_type"]?.stringValue }
        #expect(types == ["glucose", "lo", "control_solution", "glucose", "glucose"], "event types: \(types)")
        #expect(Set(events.compactMap { $0["attributes"]?["id"]?.stringValue }).count == 5)

        // Health: the adapter works, the meters synced just now.
        let adapter = try await Self.get(rig, port: httpPort, token: token, "/api/states")?.arrayValue?
            .first { $0["entity_id"]?.stringValue?.hasSuffix("_bluetooth_adapter") == true }
        #expect(adapter?["state"] == "off", "\(adapter?.serialized() ?? "no Bluetooth adapter entity")")
        let overdue = try await Self.get(rig, port: httpPort, token: token, "/api/states/\(try #require(ids["_sync_overdue"]))")
        #expect(overdue?["state"] == "off")
        failed = false
    }
}
