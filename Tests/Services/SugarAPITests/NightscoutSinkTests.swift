import Foundation
import Glibc
import GlucoseProfile
import HTTPClient
import HealthDataSync
import JSON
import NightscoutSink
import SugarAPI
import SugarWire
import Testing
import TestSupport

/// The Nightscout stand-in (Tests/Support/nightscout-standin/nightscout.py) on loopback: checks the
/// api-secret header or token, deduplicates on date + type, can fail with 500, refuse the secret
/// or reject with 400 on demand.
final class NightscoutStandIn: @unchecked Sendable {
    // @unchecked: every property is set once in init.
    let child: Child
    let port: Int
    let directory: String
    let secret: String
    /// The certificate when the stand-in speaks HTTPS.
    let caFile: String?

    init(secret: String = "family-secret-1", token: String? = nil, tls: (cert: String, key: String)? = nil) async throws {
        self.directory = makeTemporaryDirectory()
        self.secret = secret
        self.caFile = tls?.cert
        let script = packageRoot + "/Tests/Support/nightscout-standin/nightscout.py"
        let out = open(self.directory + "/port", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        defer { close(out) }
        var arguments = ["python3", script, "--secret", secret]
        if let token { arguments += ["--token", token] }
        if let tls { arguments += ["--tls", tls.cert, tls.key] }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        // Process launches take turns (see runProcess): Foundation's is not safe next to another.
        self.child = try processLaunchLock.withLock {
            try Child("/usr/bin/env", arguments, environment: ["PATH": path], stdout: out, stderr: nil)
        }
        var port: Int?
        let deadline = ContinuousClock.now + .seconds(10)
        while port == nil, ContinuousClock.now < deadline {
            let text = (try? String(contentsOfFile: self.directory + "/port", encoding: .utf8)) ?? ""
            port = text.hasSuffix("\n") ? Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) : nil
            if port == nil { try await Task.sleep(for: .milliseconds(20)) }
        }
        guard let port else { throw TestError("the Nightscout stand-in did not start") }
        self.port = port
    }

    deinit {
        self.child.kill()
        try? FileManager.default.removeItem(atPath: self.directory)
    }

    var url: String { "\(self.caFile == nil ? "http" : "https")://127.0.0.1:\(self.port)" }

    func get(_ path: String) async throws -> JSONValue {
        let response = try await HTTPClient.send(HTTPRequest(url: self.url + path, caFile: self.caFile))
        return try JSONValue(parsing: response.text)
    }

    func control(_ settings: JSONObject) async throws {
        let body = Array(JSONValue.object(settings).serialized().utf8)
        let response = try await HTTPClient.send(HTTPRequest(method: "POST", url: self.url + "/control", body: body, caFile: self.caFile))
        guard response.status == 200 else { throw TestError("the stand-in's control answered \(response.status)") }
    }

    var entries: [JSONValue] { get async { (try? await self.get("/api/v1/entries.json").arrayValue) ?? [] } }
    var treatments: [JSONValue] { get async { (try? await self.get("/api/v1/treatments.json").arrayValue) ?? [] } }
    var log: [JSONValue] { get async { (try? await self.get("/log").arrayValue) ?? [] } }
}

/// Readings as the real daemon's ListReadings returns them, in store order (the reading id is the
/// cursor): the source the sink pulls from until sugard-forward's feed drives it.
struct ListReadingsSource: NightscoutReadingSource {
    let fixture: Fixture

    func readings(after cursor: Int64, limit: Int) async throws -> [SinkReading] {
        while !Task.isCancelled {
            let reply = try await self.fixture.call(api + "ListReadings", ["limit": 100_000])
            let all = try Wire.Reading.list(try Wire.ReadingsReply(json: .object(reply)).readings)
                .map { SinkReading(cursor: $0.id, reading: Wire.CompactReading($0)) }
                .sorted { $0.cursor < $1.cursor }
            let after = all.filter { $0.cursor > cursor }
            if !after.isEmpty { return Array(after.prefix(limit)) }
            try await Task.sleep(for: .milliseconds(20))
        }
        return []
    }
}

@Suite struct NightscoutSinkTests {
    static let fast: NightscoutTiming = {
        var t = NightscoutTiming()
        t.retryInitial = .milliseconds(20)
        t.retryMax = .milliseconds(100)
        t.refusedRetry = .milliseconds(300)
        t.pausedRetry = .seconds(60)
        t.requestTimeoutMilliseconds = 2000
        return t
    }()

    static func sink(
        _ site: NightscoutStandIn?, name: String = "nightscout", url: String? = nil, secret: String? = nil, token: String? = nil,
        person: String? = nil, treatments: Bool = false, caFile: String? = nil, directory: String
    ) throws -> NightscoutSink {
        var config = NightscoutSinkConfig(name: name)
        try config.apply(key: "nightscout_url", value: url ?? site?.url ?? "")
        if let secret = secret ?? (token == nil ? site?.secret : nil) {
            let path = directory + "/\(name).secret"
            try (secret + "\n").write(toFile: path, atomically: true, encoding: .utf8)
            try config.apply(key: "nightscout_api_secret_file", value: path)
        }
        if let token { try config.apply(key: "nightscout_token", value: token) }
        if let person { try config.apply(key: "nightscout_person", value: person) }
        if treatments { try config.apply(key: "nightscout_treatments", value: "true") }
        if let caFile { try config.apply(key: "nightscout_ca_file", value: caFile) }
        return try NightscoutSink(config: config, stateDirectory: directory, timing: Self.fast)
    }

    /// Runs the sinks against the daemon's readings while `body` runs; cancels them after.
    static func running<R>(_ sinks: [NightscoutSink], _ f: Fixture, _ body: () async throws -> R) async throws -> R {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for sink in sinks { group.addTask { await sink.run(source: ListReadingsSource(fixture: f)) } }
            defer { group.cancelAll() }
            return try await body()
        }
    }

    /// The highest reading id stored: the commit-order cursor a sink ends on (the newest reading by
    /// measured time may have been committed earlier, by another meter's sync).
    static func lastCursor(_ f: Fixture) async throws -> Int64 {
        let reply = try await f.call(api + "ListReadings", ["limit": 10_000])
        return reply["readings"]?.arrayValue?.compactMap { $0["id"]?.intValue }.max() ?? -1
    }

    @Test func entriesAndTreatmentsArriveWithTheSecretInBatchesOfAtMost100() async throws {
        try await withAPIServer { f in
            // 120 more readings on meter B, so the sink needs more than one batch.
            f.queue(
                (0..<120).map { i in
                    meterRecord(sequence: UInt16(3 + i), mgdL: 100 + i % 50, at: Instant(epochMillis: seedStart.epochMillis + Int64(8 + i) * hour))
                }, for: meterB.id)
            _ = try await f.call(api + "Sync", ["meter": .string(meterB.id.rawValue), "force": true])
            let site = try await NightscoutStandIn()
            let sink = try Self.sink(site, treatments: true, directory: f.directory)
            let last = try await Self.lastCursor(f)
            try await Self.running([sink], f) {
                #expect(await eventually(timeout: .seconds(20)) { sink.status.cursor == last }, "\(sink.status)")
            }
            // 127 readings: the control-solution test and the HI reading are no entries; the HI
            // is a Note treatment (the control test is nothing).
            let entries = await site.entries
            #expect(entries.count == 125)
            let treatments = await site.treatments
            #expect(treatments.count == 126)
            #expect(treatments.filter { $0["eventType"] == "Note" }.count == 1)
            #expect(treatments.allSatisfy { $0["identifier"]?.stringValue != nil })
            #expect(sink.status.delivered == 251)
            #expect(sink.status.state == .idle)
            let log = await site.log
            #expect(log.allSatisfy { $0["status"] == 200 && $0["secret"] == true })
            #expect(log.allSatisfy { ($0["count"]?.intValue ?? 0) <= 100 })
            #expect(log.filter { $0["path"] == "/api/v1/entries" }.count == 2)
            let first = try #require(entries.last)  // the stand-in lists newest first
            #expect(first["type"] == "mbg")
            #expect(first["mbg"] == 90)
            #expect(first["date"] == .int(seedStart.epochMillis))
            #expect(first["dateString"] == "2024-03-31T07:00:00+01:00")
            #expect(first["utcOffset"] == 60)
            #expect(first["sysTime"] == first["dateString"])
            #expect(first["device"] == .string("sugard://" + meterA.id.rawValue))
            // The seeded meters' first syncs commit in either order, so the first treatment posted
            // may be either meter's: take the one of the entry checked above.
            let treatment = try #require(await site.treatments.first { $0["created_at"] == first["dateString"] })
            #expect(treatment["eventType"] == "BG Check")
            #expect(treatment["glucoseType"] == "Finger")
            #expect(treatment["units"] == "mg/dl")
            #expect(treatment["enteredBy"] == "sugard")
            #expect(treatment["created_at"] == "2024-03-31T07:00:00+01:00")

            // The cursor is durable: a new sink on the same state directory starts after it.
            let again = try Self.sink(site, directory: f.directory)
            #expect(again.status.cursor == last)
        }
    }

    @Test func eachPersonsSiteGetsOnlyTheirReadings() async throws {
        try await withAPIServer { f in
            _ = try await f.call(api + "AssignMeter", ["meter": .string(meterA.id.rawValue), "person": "Mia", "from": "2024-01-01"])
            let mia = try await NightscoutStandIn()
            let jonas = try await NightscoutStandIn(secret: "other-secret-2")
            let everyone = try await NightscoutStandIn(token: "family-token")
            let sinks = [
                try Self.sink(mia, name: "mia", person: "Mia", directory: f.directory),
                try Self.sink(jonas, name: "jonas", person: "Jonas", directory: f.directory),
                try Self.sink(everyone, name: "all", token: "family-token", directory: f.directory),
            ]
            let last = try await Self.lastCursor(f)
            try await Self.running(sinks, f) {
                #expect(await eventually(timeout: .seconds(20)) { sinks.allSatisfy { $0.status.cursor == last } })
            }
            // Meter A (Mia's): 90, 100, 130 (its control test and HI are no entries); meter B is nobody's.
            #expect(await mia.entries.map { $0["mbg"] } == [130, 100, 90])
            #expect(await mia.entries.allSatisfy { $0["device"] == .string("sugard://" + meterA.id.rawValue) })
            #expect(await jonas.entries.isEmpty, "no meter is Jonas's")
            #expect(await jonas.log.isEmpty)
            #expect(await everyone.entries.count == 5, "a sink without a person takes every reading")
            #expect(await everyone.log.allSatisfy { $0["token"] == true && $0["secret"] == false })
        }
    }

    @Test func serverErrorsAreRetriedInOrderAndNothingIsSkipped() async throws {
        try await withAPIServer { f in
            let site = try await NightscoutStandIn()
            try await site.control(["fail500": 3])
            let sink = try Self.sink(site, directory: f.directory)
            let last = try await Self.lastCursor(f)
            try await Self.running([sink], f) {
                #expect(await eventually(timeout: .seconds(20)) { sink.status.cursor == last })
            }
            #expect(await site.log.filter { $0["path"] == "/api/v1/entries" }.map { $0["status"]?.intValue ?? 0 } == [500, 500, 500, 200])
            // The HI reading's Note goes after the batch's entries.
            #expect(await site.log.filter { $0["path"] == "/api/v1/treatments" }.map { $0["status"]?.intValue ?? 0 } == [200])
            #expect(await site.entries.count == 5)
        }
    }

    @Test func aRefusedSecretIsShownAndRetriedSlowly() async throws {
        try await withAPIServer { f in
            let site = try await NightscoutStandIn()
            let wrong = try Self.sink(site, secret: "not-the-secret", directory: f.directory)
            try await Self.running([wrong], f) {
                #expect(await eventually(timeout: .seconds(10)) { wrong.status.state == .refused })
                #expect(wrong.status.reason == "Nightscout refused the API secret")
                try await Task.sleep(for: .milliseconds(700))
            }
            // About one attempt per refusedRetry (300 ms), never a tight loop; nothing delivered.
            let attempts = await site.log.count
            #expect(attempts >= 2 && attempts <= 5, "\(attempts) attempts")
            #expect(wrong.status.cursor == 0)
            #expect(await site.entries.isEmpty)

            // The site refuses for a while (secret rotated), then takes it: delivered after a resume.
            try await site.control(["refuse": true])
            let right = try Self.sink(site, name: "right", directory: f.directory)
            let last = try await Self.lastCursor(f)
            try await Self.running([right], f) {
                #expect(await eventually(timeout: .seconds(10)) { right.status.state == .refused })
                try await site.control(["refuse": false])
                right.resume()
                #expect(await eventually(timeout: .seconds(10)) { right.status.cursor == last })
            }
            #expect(await site.entries.count == 5)
        }
    }

    @Test func anotherClientErrorShowsTheServersMessageAndPauses() async throws {
        try await withAPIServer { f in
            let site = try await NightscoutStandIn()
            try await site.control(["reject": "entries are limited on this site"])
            let sink = try Self.sink(site, directory: f.directory)
            let last = try await Self.lastCursor(f)
            try await Self.running([sink], f) {
                #expect(await eventually(timeout: .seconds(10)) { sink.status.state == .paused })
                #expect(sink.status.reason?.contains("entries are limited on this site") == true, "\(sink.status)")
                #expect(sink.status.reason?.contains("400") == true)
                try await Task.sleep(for: .milliseconds(300))
                #expect(await site.log.count == 1, "paused: no retry until resumed or pausedRetry")
                #expect(sink.status.cursor == 0, "nothing skipped")
                try await site.control(["reject": .null])
                sink.resume()
                #expect(await eventually(timeout: .seconds(10)) { sink.status.cursor == last })
            }
            #expect(await site.entries.count == 5)
        }
    }

    @Test func refusedConnectionsAndTimeoutsAreRetried() async throws {
        try await withAPIServer { f in
            // Nothing listens on this port (bound and closed again).
            let port = try freePort()
            let refused = try Self.sink(nil, name: "down", url: "http://127.0.0.1:\(port)", secret: "s", directory: f.directory)
            let slow = try await NightscoutStandIn()
            try await slow.control(["delay": 3])  // longer than the sink's 2 s request timeout
            let timedOut = try Self.sink(slow, name: "slow", directory: f.directory)
            try await Self.running([refused, timedOut], f) {
                #expect(await eventually(timeout: .seconds(10)) { refused.status.state == .retrying })
                #expect(refused.status.reason?.contains("not reachable") == true, "\(refused.status)")
                #expect(await eventually(timeout: .seconds(10)) { timedOut.status.reason?.contains("not reachable") == true })
                try await slow.control(["delay": 0])
                #expect(await eventually(timeout: .seconds(15)) { timedOut.status.cursor > 0 })
            }
            #expect(refused.status.cursor == 0)
            #expect(await slow.entries.count == 5)
        }
    }

    @Test func certificatesAreVerifiedAndAPrivateCAWorks() async throws {
        try await withAPIServer { f in
            let cert = f.directory + "/site.pem", key = f.directory + "/site.key"
            let made = try await runProcess(
                "/usr/bin/openssl",
                ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                 "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert])
            #expect(made.status == 0, "\(made.stderr)")
            let site = try await NightscoutStandIn(tls: (cert, key))
            let url = site.url
            let untrusting = try Self.sink(site, name: "system-ca", url: url, directory: f.directory)
            let trusting = try Self.sink(site, name: "private-ca", url: url, caFile: cert, directory: f.directory)
            let last = try await Self.lastCursor(f)
            try await Self.running([untrusting, trusting], f) {
                #expect(await eventually(timeout: .seconds(20)) { trusting.status.cursor == last })
                #expect(await eventually(timeout: .seconds(5)) { untrusting.status.state == .retrying })
            }
            #expect(untrusting.status.cursor == 0, "a certificate the system does not trust is refused")
            #expect(untrusting.status.reason?.lowercased().contains("certificate") == true, "\(untrusting.status)")
            #expect(await site.entries.count == 5)
        }
    }

    @Test func configurationHasSinksPerPersonAndSaysWhereItIsWrong() throws {
        let text = """
            # the family's sites
            socket = /run/sugard/io.sugard.HealthDataSync
            nightscout_url = https://family.example.net/
            nightscout_token = family-token

            [nightscout mia]
            nightscout_url = https://mia.example.net
            nightscout_api_secret_file = /etc/sugard/mia.secret
            nightscout_person = Mia
            nightscout_treatments = true
            nightscout_units = mmol

            [nightscout jonas]
            nightscout_url = https://jonas.example.net
            nightscout_api_secret_file = /etc/sugard/jonas.secret
            nightscout_person = Jonas
            nightscout_ca_file = /etc/sugard/home-ca.pem
            """
        let sinks = try NightscoutSinkConfig.parse(text, file: "forward.conf")
        #expect(sinks.map(\.name) == ["nightscout", "mia", "jonas"])
        #expect(sinks[0].url == "https://family.example.net")
        #expect(sinks[0].person == nil && sinks[0].token == "family-token" && !sinks[0].treatments)
        #expect(sinks[1].person == "Mia" && sinks[1].treatments && sinks[1].treatmentUnit == .mmol)
        #expect(sinks[2].caFile == "/etc/sugard/home-ca.pem")
        for (bad, expected) in [
            ("[nightscout a]\nnightscout_url = ftp://x", "forward.conf:2: nightscout_url"),
            ("[nightscout a]\nnightscout_treatments = yes", "forward.conf:2: nightscout_treatments"),
            ("[nightscout a]\nnightscout_colour = red", "forward.conf:2: unknown key"),
            ("[nightscout a]\nnightscout_url = https://a.example", "needs nightscout_api_secret_file or nightscout_token"),
            ("[mqtt b]", "forward.conf:1: a section is [nightscout NAME]"),
        ] {
            #expect(throws: NightscoutConfigError.self) { try NightscoutSinkConfig.parse(bad, file: "forward.conf") }
            do {
                _ = try NightscoutSinkConfig.parse(bad, file: "forward.conf")
            } catch {
                #expect(error.message.contains(expected), "\(error.message)")
            }
        }
        // The secret never shows in an error, and the header is the SHA-1 of the file's secret.
        var config = NightscoutSinkConfig()
        try config.apply(key: "nightscout_api_secret_file", value: "/nonexistent/secret")
        #expect(throws: NightscoutConfigError.self) { _ = try config.apiSecretHeader() }
    }
}
