import Foundation
import Glibc
import HubStore
import HealthDataSync
import ProcessKit
import SugarAPI
import SugarHub
import TestSupport
import Testing

@Suite("sugard-hub config and messages")
struct HubConfigTests {
    func withFile(_ text: String, mode: mode_t = 0o600, _ body: (String) throws -> Void) throws {
        let path = NSTemporaryDirectory() + "hub-\(UInt64.random(in: 0...UInt64.max)).conf"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, mode)
        defer { unlink(path) }
        try body(path)
    }

    @Test func defaultsAndTopics() throws {
        try self.withFile("database_url = postgresql://hub@db.example/hub\n") { path in
            guard case .run(let c) = try HubCommandLine.parse(["--config", path], environment: [:]) else { Issue.record("not run"); return }
            #expect(c.topicPrefix == "sugard" && c.shareGroup == "sugard-hub" && c.listen == "127.0.0.1:8480" && c.listensOnLoopback)
            #expect(c.mqttHost == "localhost" && c.mqttPort == 1883)
            #expect(
                c.subscriptions == [
                    "$share/sugard-hub/sugard/+/+/reading", "$share/sugard-hub/sugard/+/+/alert", "sugard/+/status", "sugard/+/health",
                ])
        }
        try self.withFile("database_url = postgresql://hub@db/hub\ntopic_prefix = clinic/north\nshare_group = g2\nmqtt_url = mqtt://broker:1884\n") { path in
            guard case .run(let c) = try HubCommandLine.parse(["--config", path, "--log-level", "debug"], environment: [:]) else { return }
            #expect(c.subscriptions.first == "$share/g2/clinic/north/+/+/reading")
            #expect(c.mqttHost == "broker" && c.mqttPort == 1884 && c.logLevel == .debug)
        }
    }

    @Test func errorsNameFileAndLine() throws {
        try self.withFile("database_url = postgresql://hub@db/hub\nshare_group = a/b\n") { path in
            #expect(throws: (any Error).self) { try HubCommandLine.parse(["--config", path], environment: [:]) }
            do {
                _ = try HubCommandLine.parse(["--config", path], environment: [:])
            } catch let error as ConfigError {
                #expect(error.description.hasPrefix("\(path):2: share_group"))
            }
        }
        try self.withFile("listen = 10.0.0.5:8480\ndatabase_url = postgresql://hub@db/hub\n") { path in
            do {
                _ = try HubCommandLine.parse(["--config", path], environment: [:])
                Issue.record("a non-loopback listen without a token was accepted")
            } catch let error as ConfigError {
                #expect(error.message.contains("auth_token_file is required"))
            }
        }
        try self.withFile("mqtt_url = mqtt://b\n") { path in
            do {
                _ = try HubCommandLine.parse(["--config", path], environment: [:])
                Issue.record("no database_url was accepted")
            } catch let error as ConfigError {
                #expect(error.message.contains("database_url is required"))
            }
        }
        #expect(throws: (any Error).self) { try HubCommandLine.parse(["--bogus"], environment: [:]) }
    }

    @Test func secretsOthersMayReadAreRefused() throws {
        try self.withFile("database_url = postgresql://hub:pw@db/hub\n", mode: 0o644) { path in
            do {
                _ = try HubCommandLine.parse(["--config", path], environment: [:])
                Issue.record("a world-readable password was accepted")
            } catch let error as ConfigError {
                #expect(error.message.contains("readable by every user") && !error.message.contains("pw@"))
            }
        }
    }

    @Test func messagesParseTolerantly() {
        let reading = Array(#"{"id":"C0:26:DA:01:3A:7F/1/7","meter":"C0:26:DA:01:3A:7F","sequenceNumber":7,"epochMillis":1700000000000,"mgdL":104,"newKey":[1,2]}"#.utf8)
        guard case .reading(let r) = HubMessage.parse(topic: "sugard/ward-1/c026da013a7f/reading", payload: reading, prefix: "sugard") else {
            Issue.record("not a reading")
            return
        }
        #expect(r.gateway == "ward-1" && r.id == "C0:26:DA:01:3A:7F/1/7" && r.mgdl == 104 && r.kind == nil && r.person == nil)
        #expect(HubMessage.parse(topic: "sugard/ward-1/status", payload: Array("offline".utf8), prefix: "sugard") == .status(gateway: "ward-1", online: false))
        if case .ignored = HubMessage.parse(topic: "sugard/ward-1/x/reading", payload: Array("{nope".utf8), prefix: "sugard") {} else {
            Issue.record("malformed JSON was not ignored")
        }
        if case .ignored = HubMessage.parse(topic: "sugard/ward-1/x/reading", payload: Array(#"{"mgdL":5}"#.utf8), prefix: "sugard") {} else {
            Issue.record("a reading without id was not ignored")
        }
        guard case .health(_, let h) = HubMessage.parse(
            topic: "sugard/w/health",
            payload: Array(#"{"adapter":{"present":false},"storage":{"error":"disk full"},"meters":[{"id":"m","overdue":true,"lastSync":{"time":"2026-01-01T00:00:00Z","result":"failed"}}],"alerts":[{"kind":"x"}]}"#.utf8),
            prefix: "sugard")
        else {
            Issue.record("not health")
            return
        }
        #expect(h.meters.first?.overdue == true && h.meters.first?.lastSyncResult == "failed" && h.alerts.count == 1 && h.storage?.contains("disk full") == true)
        // sugard-forward's alert topic, <prefix>/<gateway>/alert: `rule`, `state` firing/resolved.
        for (state, active) in [("firing", true), ("resolved", false)] {
            let alert = Array(
                #"{"id":"ward-1/urgent_low/person/Anna/1700000000000","rule":"urgent_low","state":"\#(state)","person":"Anna","meter":"C0:26:DA:01:3A:7F","reading":"C0:26:DA:01:3A:7F/1/7","time":"2023-11-14T22:13:20.000Z","value":null,"message":"Urgent low glucose: LO"}"#.utf8)
            guard case .alert(let a) = HubMessage.parse(topic: "sugard/ward-1/alert", payload: alert, prefix: "sugard") else {
                Issue.record("the forwarder's alert topic was not parsed as an alert")
                return
            }
            #expect(a.gateway == "ward-1" && a.id == "ward-1/urgent_low/person/Anna/1700000000000" && a.kind == "urgent_low")
            #expect(a.meter == "C0:26:DA:01:3A:7F" && a.person == "Anna" && a.active == active && a.message == "Urgent low glucose: LO")
        }
    }
}

/// config/hub.conf.example (the package's example hub.conf) is what `sugard-hub
/// --print-example-config` writes from `HubConfig.keys`, and the hub starts from it as it is.
@Suite("hub.conf example")
struct HubConfigExampleTests {
    /// The directory holding Package.swift, above this file.
    static func repositoryRoot() -> String {
        var url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path), url.path != "/" {
            url = url.deletingLastPathComponent()
        }
        return url.path
    }

    @Test func theCommittedExampleIsTheGeneratedOneAndParses() throws {
        let path = Self.repositoryRoot() + "/config/hub.conf.example"
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text == HubConfig.reference.exampleFile)
        guard case .run(let config) = try HubCommandLine.parse(["--config", path], environment: [:]) else {
            Issue.record("the example did not parse to a run")
            return
        }
        #expect(config.databaseURL == "postgresql://sugard_hub@localhost/sugard_hub" && config.mqttURL == "mqtt://localhost")
        // Each commented-out key's shown value is one the hub takes.
        for key in HubConfig.reference.keys {
            var shown = HubConfig()
            #expect(throws: Never.self, "\(key.key) = \(key.example)") { try shown.apply(key: key.key, value: key.example) }
            #expect(HubCommandLine.usage.contains("  \(key.key) "), "--help lacks \(key.key)")
        }
    }
}

@Suite("sugard-hub program")
struct HubProgramTests {
    @Test func helpVersionAndManPage() throws {
        let help = try runBuilt("sugard-hub", ["--help"])
        #expect(help.status == 0)
        for key in ["mqtt_url", "mqtt_username", "mqtt_password_file", "mqtt_ca_file", "topic_prefix", "share_group", "database_url", "listen", "auth_token_file"] {
            #expect(help.stdout.contains("  \(key) "), "--help lacks \(key)")
        }
        #expect(try runBuilt("sugard-hub", ["--version"]).stdout.hasPrefix("sugard-hub "))
        let man = try runBuilt("sugard-hub", ["--generate-man"])
        #expect(man.status == 0 && man.stdout.hasPrefix(".TH SUGARD-HUB 8") && man.stdout.contains("auth"))
        let bad = try runBuilt("sugard-hub", ["--frobnicate"])
        #expect(bad.status == 64 && bad.stderr.contains("unknown option"))
        let missing = try runBuilt("sugard-hub", ["--config", "/nonexistent/hub.conf"])
        #expect(missing.status == 78 && missing.stderr.contains("/nonexistent/hub.conf: no such file"))
    }

    /// PostgreSQL unreachable at start: a clear message and exit 69 (systemd restarts it).
    @Test func unreachableDatabase() throws {
        let path = NSTemporaryDirectory() + "hub-\(UInt64.random(in: 0...UInt64.max)).conf"
        try "database_url = postgresql://nobody@127.0.0.1:1/none?connect_timeout=2\n".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        defer { unlink(path) }
        let out = try runBuilt("sugard-hub", ["--config", path])
        #expect(out.status == 69 && out.stderr.contains("cannot connect to PostgreSQL"), "\(out.status): \(out.stderr)")
    }
}
