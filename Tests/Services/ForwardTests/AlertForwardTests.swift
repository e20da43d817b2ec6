import Foundation
import Glibc
import HTTPClient
import JSON
import SugarWire
import Testing
import TestSupport

/// The webhook receiver (Tests/Support/webhook-receiver/webhook.py) on a loopback port: records
/// every request, answers 200, or 500/503 when told to (`control`).
final class WebhookReceiver: Sendable {
    let port: Int

    let tls: Bool
    /// The rig's CA (``ForwardRig/makeCertificates()``) for a TLS receiver.
    let caFile: String?

    init(_ rig: ForwardRig, name: String = "webhook", tls: Bool = false) async throws {
        self.tls = tls
        self.caFile = tls ? rig.dir + "/ca.pem" : nil
        let portFile = rig.dir + "/\(name).port"
        let out = open(portFile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        defer { close(out) }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Support/webhook-receiver/webhook.py").path
        let arguments = [script] + (tls ? ["--tls", rig.dir + "/server.pem", rig.dir + "/server.key"] : [])
        rig.others.append(try Child(try which("python3"), arguments, environment: ["PATH": "/usr/bin:/bin"], stdout: out, stderr: try rig.log("\(name).log")))
        var port: Int?
        _ = await eventually(within: 10) {
            let text = readFile(portFile)
            port = text.hasSuffix("\n") ? Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) : nil
            return port != nil
        }
        guard let port else { throw RigError("the webhook receiver did not start:\n\(readFile(rig.dir + "/\(name).log"))") }
        self.port = port
    }

    /// The address forward.conf names (https://localhost with the rig's CA for a TLS receiver).
    var url: String { self.tls ? "https://localhost:\(self.port)" : "http://127.0.0.1:\(self.port)" }

    /// The receiver's own pages, read by the test.
    private func local(_ path: String, body: [UInt8]? = nil) async throws -> HTTPResponse {
        var request = HTTPRequest(method: body == nil ? "GET" : "POST", url: self.url + path, body: body ?? [])
        if self.tls { request.caFile = self.caFile }
        return try await HTTPClient.send(request)
    }

    func control(_ settings: JSONObject) async throws {
        let response = try await self.local("/control", body: Array(JSONValue.object(settings).serialized().utf8))
        try #require(response.status == 200)
    }

    var log: [JSONValue] {
        get async { (try? JSONValue(parsing: try await self.local("/log").text).arrayValue) ?? [] }
    }

    /// The bodies it accepted (answered 200), in order.
    var accepted: [JSONValue] {
        get async { await self.log.filter { $0["status"] == 200 } }
    }
}

/// The alert rules end to end: the built sugard replaying a real meter's capture (88 mg/dL, a LO,
/// a 105 mg/dL control test, 142, 97 mg/dL, measured in 2025: `alert_max_age = off` lets them fire), the built sugard-forward, a real mosquitto with
/// mosquitto_sub, a webhook receiver on loopback, and sugarctl reading `io.sugard.Forward`.
@Suite(.serialized) struct AlertForwardTests {
    static let root = #filePath.split(separator: "/", omittingEmptySubsequences: false).dropLast(4).joined(separator: "/")
    static let capture = Self.root + "/fixtures/accu-chek-guide-mgdl-mtu23.btsnoop"

    static func alerts(_ rig: ForwardRig) -> [JSONValue] {
        rig.received(on: "sugard/gw1/alert").compactMap { try? JSONValue(parsing: $0) }
    }

    static func summary(_ alerts: [JSONValue]) -> [String] {
        alerts.map { "\($0["rule"]?.stringValue ?? "?") \($0["state"]?.stringValue ?? "?")" }
    }

    func sugarctl(_ rig: ForwardRig, _ arguments: [String]) async throws -> ProcessResult {
        try await runToEnd(
            try builtProduct("sugarctl"), arguments,
            environment: ["SUGARD_SOCKET": rig.socket, "SUGARD_FORWARD_SOCKET": rig.statusSocket, "PATH": "/usr/bin:/bin", "TZ": "UTC"],
            dir: rig.dir, seconds: 30)
    }

    @Test func aLOFiresUrgentLowOnceAndAReadingInRangeResolvesItOnMQTTAndTheWebhookAcrossAKill() async throws {
        let rig = try ForwardRig(seconds: 0, replays: [Self.capture])
        var failed = true
        defer { rig.cleanUp(keep: failed || environmentValue("FORWARD_TESTS_KEEP") != nil) }
        let hook = try await WebhookReceiver(rig)
        try await hook.control(["down": true])
        let secret = rig.dir + "/webhook.secret"
        try "a shared secret\n".write(toFile: secret, atomically: true, encoding: .utf8)
        chmod(secret, 0o600)
        try rig.writeForwardConfig("alert_max_age = off\n[webhook pager]\nurl = \(hook.url)/hook\nsecret_file = \(secret)\n")
        try await rig.startAll()

        // MQTT: urgent low fires for the LO and the 142 mg/dL after it resolves it (the control
        // test between them counts for nothing).
        let both = await eventually(within: 30) { Self.alerts(rig).count >= 2 }
        try #require(both, "no alert pair on sugard/gw1/alert; forwarder log:\n\(readFile(rig.forwarderLog).suffix(3000))")
        let published = Self.alerts(rig)
        #expect(Self.summary(published) == ["urgent_low firing", "urgent_low resolved"])
        let meter = published.first?["meter"]?.stringValue ?? "?"
        #expect(published.allSatisfy { $0["id"] == published.first?["id"] && $0["person"] == .null && $0["meter"] == .string(meter) })
        #expect(published.first?["reading"]?.stringValue?.hasSuffix("/5") == true && published.first?["value"] == .null)
        #expect(published.last?["reading"]?.stringValue?.hasSuffix("/7") == true && published.last?["value"] == 142)
        #expect(published.allSatisfy { $0["time"]?.stringValue?.hasSuffix("Z") == true && $0["message"]?.stringValue != nil })
        // Every reading id an alert names is a stored reading's.
        let stored = Set(try await rig.storedIDs())
        #expect(published.allSatisfy { stored.contains($0["reading"]?.stringValue ?? "") })

        // The webhook is down: tried again and again, nothing accepted; then the forwarder dies.
        let retried = await eventually(within: 20) { await hook.log.count >= 2 }
        let attempts = await hook.log
        #expect(retried && attempts.allSatisfy { $0["status"] == 503 }, "the webhook was not retried: \(attempts)")
        rig.forwarder?.kill()
        try await hook.control(["down": false, "fail500": 2])
        try rig.startForwarder()

        // After the restart: both events arrive, each once, in order, signed; two 500s retried on the way.
        let delivered = await eventually(within: 30) { await hook.accepted.count >= 2 }
        let log = await hook.log
        try #require(delivered, "the webhook did not get both events: \(log)\n\(readFile(rig.forwarderLog).suffix(3000))")
        try await Task.sleep(for: .milliseconds(1500))
        let accepted = await hook.accepted
        let bodies = accepted.compactMap { $0["body"]?.stringValue }
        let events = bodies.compactMap { try? JSONValue(parsing: $0) }
        #expect(Self.summary(events) == ["urgent_low firing", "urgent_low resolved"], "\(bodies)")
        #expect(events.map { $0["id"] } == published.map { $0["id"] })
        for (request, body) in zip(accepted, bodies) {
            let expected = "sha256=" + SHA256.hex(SHA256.hmac(key: Array("a shared secret".utf8), message: Array(body.utf8)))
            #expect(request["headers"]?["X-Sugard-Signature"]?.stringValue == expected)
        }
        let failures = await hook.log.filter { $0["status"] == 500 }.count
        #expect(failures == 2, "the two 500s were retried")
        // Nothing fired again after the restart.
        #expect(Self.summary(Self.alerts(rig)) == ["urgent_low firing", "urgent_low resolved"])

        // sugarctl: nothing firing, the two events recent, the webhook idle.
        let alerts = try await self.sugarctl(rig, ["alerts", "--json"])
        let reply = try JSONValue(parsing: alerts.stdout)
        #expect(alerts.status == 0 && reply["active"] == [] && reply["recent"]?.arrayValue?.count == 2, "\(alerts.stdout) \(alerts.stderr)")
        let webhook = reply["webhooks"]?.arrayValue?.first
        #expect(webhook?["name"] == "pager" && webhook?["pending"] == 0 && webhook?["state"] == "idle", "\(alerts.stdout)")
        let status = try await self.sugarctl(rig, ["status"])
        #expect(status.stdout.contains("Alerts: none"), "\(status.stdout)")
        failed = false
    }

    @Test func alertsMadeWhileTheBrokerIsDownArriveOnceItIsBack() async throws {
        let rig = try ForwardRig(seconds: 0, replays: [Self.capture])
        var failed = true
        defer { rig.cleanUp(keep: failed || environmentValue("FORWARD_TESTS_KEEP") != nil) }
        try rig.writeForwardConfig("alert_max_age = off\n")
        // The subscriber's persistent session exists before the broker goes down.
        try await rig.startBroker()
        try await rig.startSubscriber()
        rig.killBroker()
        try await rig.startSugard()
        try rig.startForwarder()
        let made = await eventually(within: 30) { readFile(rig.forwarderLog).contains("alert urgent_low resolved") }
        try #require(made, "\(readFile(rig.forwarderLog).suffix(3000))")
        #expect(Self.alerts(rig).isEmpty)
        try await rig.startBroker()
        if rig.subscriber?.isRunning != true { try await rig.startSubscriber() }
        let arrived = await eventually(within: 30) { Self.alerts(rig).count >= 2 }
        #expect(arrived, "\(readFile(rig.forwarderLog).suffix(3000))")
        try await Task.sleep(for: .milliseconds(1000))
        #expect(Self.summary(Self.alerts(rig)) == ["urgent_low firing", "urgent_low resolved"])
        failed = false
    }

    @Test func aWebhookOverTLSIsVerifiedAgainstItsCAFile() async throws {
        let rig = try ForwardRig(seconds: 0, replays: [Self.capture])
        var failed = true
        defer { rig.cleanUp(keep: failed || environmentValue("FORWARD_TESTS_KEEP") != nil) }
        try await rig.makeCertificates()
        let good = try await WebhookReceiver(rig, name: "good", tls: true)
        let wrong = try await WebhookReceiver(rig, name: "wrong", tls: true)
        try rig.writeForwardConfig(
            """
            alert_max_age = off
            [webhook good]
            url = \(good.url)/hook
            ca_file = \(rig.dir)/ca.pem
            [webhook wrong]
            url = \(wrong.url)/hook
            ca_file = \(rig.dir)/other.pem
            """)
        try await rig.startAll()
        let delivered = await eventually(within: 30) { await good.accepted.count >= 2 }
        try #require(delivered, "\(readFile(rig.forwarderLog).suffix(3000))")
        // The receiver whose certificate the CA file does not vouch for never got a request; the
        // webhook shows why it is retrying, and holds both events.
        let refused = try await eventually(within: 20) {
            let reply = try JSONValue(parsing: try await self.sugarctl(rig, ["alerts", "--json"]).stdout)
            let hook = reply["webhooks"]?.arrayValue?.first { $0["name"] == "wrong" }
            return hook?["state"] == "retrying" && hook?["pending"] == 2 && hook?["reason"]?.stringValue?.isEmpty == false
        }
        let shown = try await self.sugarctl(rig, ["alerts", "--json"]).stdout
        #expect(refused, "\(shown)")
        #expect(await wrong.log.isEmpty)
        failed = false
    }

    @Test func sighupMakesAWebhookWaitingToRetryTryAgainNow() async throws {
        let rig = try ForwardRig(seconds: 0, replays: [Self.capture])
        var failed = true
        defer { rig.cleanUp(keep: failed || environmentValue("FORWARD_TESTS_KEEP") != nil) }
        let hook = try await WebhookReceiver(rig)
        try await hook.control(["down": true])
        try rig.writeForwardConfig("alert_max_age = off\n[webhook pager]\nurl = \(hook.url)/hook\nformat = ntfy\n")
        try await rig.startAll()
        // Four failures: the next try is 8 s away (1, 2, 4, 8 s).
        let waiting = await eventually(within: 30) { await hook.log.count >= 4 }
        try #require(waiting, "the webhook was not retried")
        try await hook.control(["down": false])
        let started = ContinuousClock.now
        let pid = try #require(rig.forwarder?.pid)
        kill(pid, SIGHUP)
        let delivered = await eventually(within: 20) { await hook.accepted.count >= 2 }
        let took = ContinuousClock.now - started
        let log = await hook.log
        try #require(delivered, "\(log)")
        #expect(took < .seconds(4), "delivered \(took) after SIGHUP: it waited for its backoff")
        let first = await hook.accepted.first
        #expect(first?["body"]?.stringValue?.hasPrefix("Urgent low glucose: LO") == true)
        #expect(first?["headers"]?["Title"] == "Urgent low glucose" && first?["headers"]?["Priority"] == "5", "\(String(describing: first))")
        failed = false
    }

    @Test func aMeterNotSyncedForItsLimitFiresSyncOverdueFromSugardsHealth() async throws {
        let rig = try ForwardRig(seconds: 0, replays: [Self.capture])
        var failed = true
        defer { rig.cleanUp(keep: failed || environmentValue("FORWARD_TESTS_KEEP") != nil) }
        try rig.writeForwardConfig("alert_sync_overdue = 3s\n")
        try await rig.startAll()
        let overdue = await eventually(within: 30) { Self.alerts(rig).contains { $0["rule"] == "sync_overdue" } }
        try #require(overdue, "alerts: \(Self.summary(Self.alerts(rig))); forwarder log:\n\(readFile(rig.forwarderLog).suffix(3000))")
        let alert = Self.alerts(rig).first { $0["rule"] == "sync_overdue" }
        let meter = try await rig.storedReadings().first?["meter"]?.stringValue
        #expect(alert?["state"] == "firing" && alert?["meter"]?.stringValue == meter && alert?["reading"] == .null, "\(String(describing: alert))")
        // The capture's readings are from 2025: older than alert_max_age (24 h), its LO paged no one.
        #expect(Self.summary(Self.alerts(rig)) == ["sync_overdue firing"])
        failed = false
    }

    @Test func aDamagedAlertStateStopsTheForwarderWithItsPath() async throws {
        let rig = try ForwardRig(seconds: 0, replays: [Self.capture])
        defer { rig.cleanUp(keep: false) }
        mkdir(rig.forwardState, 0o750)
        try "{not json".write(toFile: rig.forwardState + "/alerts.json", atomically: true, encoding: .utf8)
        let result = try await runToEnd(
            try builtProduct("sugard-forward"),
            ["--config", rig.dir + "/forward.conf", "--socket", rig.socket, "--state-dir", rig.forwardState],
            environment: ["PATH": "/usr/bin:/bin"], dir: rig.dir, seconds: 30)
        #expect(result.status == 1, "\(result.status): \(result.stderr)")
        #expect(result.stderr.contains(rig.forwardState + "/alerts.json is damaged"), "\(result.stderr)")
        // Nothing replaced it: what was there is still there for a person to look at.
        #expect(readFile(rig.forwardState + "/alerts.json") == "{not json")
    }

    @Test func aFiringAlertShowsInSugarctlAndSurvivesARestartWithoutFiringAgain() async throws {
        let rig = try ForwardRig(seconds: 0, replays: [Self.capture])
        var failed = true
        defer { rig.cleanUp(keep: failed || environmentValue("FORWARD_TESTS_KEEP") != nil) }
        // A high limit of 90: the 142 ends the urgent low and starts a high the 97 keeps firing.
        try rig.writeForwardConfig("alert_high = 5 mmol/L\nalert_max_age = off\n")
        try await rig.startAll()
        let three = await eventually(within: 30) { Self.alerts(rig).count >= 3 }
        try #require(three, "alerts: \(Self.alerts(rig)); forwarder log:\n\(readFile(rig.forwarderLog).suffix(3000))")
        #expect(Self.summary(Self.alerts(rig)) == ["urgent_low firing", "urgent_low resolved", "high firing"])
        let firing = try await self.sugarctl(rig, ["alerts"])
        #expect(firing.status == 0 && firing.stdout.contains("high") && firing.stdout.contains("Firing"), "\(firing.stdout)")
        let status = try await self.sugarctl(rig, ["status"])
        #expect(status.stdout.contains("Alerts: 1 firing: high for "), "\(status.stdout)")

        // Stopped cleanly and started again: the high is still firing, nothing new is published.
        let stopped = await rig.forwarder?.terminate(graceSeconds: 10)
        #expect(stopped == 0, "sugard-forward did not stop cleanly on SIGTERM")
        try rig.startForwarder()
        let up = try await eventually(within: 20) {
            let again = try await self.sugarctl(rig, ["alerts", "--json"])
            return again.status == 0 && (try? JSONValue(parsing: again.stdout))?["active"]?.arrayValue?.count == 1
        }
        #expect(up)
        try await Task.sleep(for: .milliseconds(1500))
        #expect(Self.alerts(rig).count == 3, "\(Self.summary(Self.alerts(rig)))")
        failed = false
    }
}
