import Foundation
import Glibc
import HTTPClient
import JSON
import SugarForward
import Testing
import TestSupport
import Varlink

/// The Nightscout-compatible stand-in (Tests/Support/nightscout-standin/nightscout.py) on a
/// loopback port: checks the api-secret header or token, deduplicates entries on date + type, and
/// fails with 500, refuses the secret or rejects with 400 when told to (`control`).
final class NightscoutSite: Sendable {
    let port: Int
    let secret: String
    let secretFile: String

    init(_ rig: ForwardRig, name: String, secret: String? = nil, token: String? = nil) async throws {
        self.secret = secret ?? "secret-of-\(name)"
        self.secretFile = rig.dir + "/\(name).secret"
        try (self.secret + "\n").write(toFile: self.secretFile, atomically: true, encoding: .utf8)
        chmod(self.secretFile, 0o600)
        let portFile = rig.dir + "/\(name).port"
        let out = open(portFile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        defer { close(out) }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Support/nightscout-standin/nightscout.py").path
        var arguments = [script, "--secret", self.secret]
        if let token { arguments += ["--token", token] }
        rig.others.append(try Child(try which("python3"), arguments, environment: ["PATH": "/usr/bin:/bin"], stdout: out, stderr: try rig.log("\(name).log")))
        var port: Int?
        _ = await eventually(within: 10) {
            let text = readFile(portFile)
            port = text.hasSuffix("\n") ? Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) : nil
            return port != nil
        }
        guard let port else { throw RigError("the Nightscout stand-in \(name) did not start:\n\(readFile(rig.dir + "/\(name).log"))") }
        self.port = port
    }

    var url: String { "http://127.0.0.1:\(self.port)" }

    func get(_ path: String) async throws -> JSONValue {
        try JSONValue(parsing: try await HTTPClient.send(HTTPRequest(url: self.url + path)).text)
    }

    func control(_ settings: JSONObject) async throws {
        let response = try await HTTPClient.send(
            HTTPRequest(method: "POST", url: self.url + "/control", body: Array(JSONValue.object(settings).serialized().utf8)))
        try #require(response.status == 200)
    }

    var entries: [JSONValue] { get async { (try? await self.get("/api/v1/entries.json").arrayValue) ?? [] } }
    var treatments: [JSONValue] { get async { (try? await self.get("/api/v1/treatments.json").arrayValue) ?? [] } }
    var log: [JSONValue] { get async { (try? await self.get("/log").arrayValue) ?? [] } }

    /// The entry dates the site accepted (2xx), in the order they came, each once.
    var deliveredDates: [Int64] {
        get async {
            var seen = Set<Int64>()
            return await self.log.filter { $0["path"] == "/api/v1/entries" && $0["status"] == 200 }
                .flatMap { $0["dates"]?.arrayValue ?? [] }.compactMap(\.intValue).filter { seen.insert($0).inserted }
        }
    }

    /// What the site accepted (2xx) as entries, as "date device", whether or not it deduplicated it
    /// (two meters' readings in the same second have the same date).
    var posted: Set<String> {
        get async {
            var out = Set<String>()
            for write in await self.log where write["path"] == "/api/v1/entries" && write["status"] == 200 {
                let dates = write["dates"]?.arrayValue ?? [], devices = write["devices"]?.arrayValue ?? []
                for (date, device) in zip(dates, devices) { out.insert("\(date.intValue ?? -1) \(device.stringValue ?? "?")") }
            }
            return out
        }
    }

    /// forward.conf lines of a sink for this site.
    func section(_ name: String, person: String? = nil, extra: String = "") -> String {
        """

        [nightscout \(name)]
        nightscout_url = \(self.url)
        nightscout_api_secret_file = \(self.secretFile)
        \(person.map { "nightscout_person = \($0)" } ?? "")
        \(extra)

        """
    }
}

/// sugard-forward's Nightscout sinks, end to end: the built sugard (simulated meters), the built
/// sugard-forward with Nightscout sections in forward.conf, Nightscout stand-ins on loopback, and
/// (where the MQTT sink runs next to them) a real mosquitto with mosquitto_sub.
@Suite(.serialized) struct NightscoutForwardTests {
    static let meters = ["D4:A0:5E:00:00:00", "D4:A0:5E:00:00:01", "D4:A0:5E:00:00:02"]

    func withRig(
        meters: Int = 2, backlog: Int = 20, seconds: Int = 4, timezone: String = "UTC", _ body: (ForwardRig) async throws -> Void
    ) async throws {
        let rig = try ForwardRig(meters: meters, backlog: backlog, seconds: seconds, timezone: timezone)
        var failed = true
        defer { rig.cleanUp(keep: failed || environmentValue("FORWARD_TESTS_KEEP") != nil) }
        try await body(rig)
        failed = false
    }

    /// Readings that are Nightscout entries: a glucose value, no control solution, no ketone.
    static func entryReadings(_ readings: [JSONValue], meters: Set<String>? = nil) -> [JSONValue] {
        readings.filter { r in
            let flags = r["flags"]?.arrayValue?.compactMap(\.stringValue) ?? []
            return r["mgdL"]?.doubleValue != nil && !flags.contains("controlSolution") && !flags.contains("ketone")
                && meters.map { $0.contains(r["meter"]?.stringValue ?? "") } != false
        }
    }

    /// The readings in commit order, the first of each measured time only: what a Nightscout site
    /// keeps (it deduplicates entries on date + type; the simulated meter can take two readings in
    /// one second).
    static func firstPerDate(_ readings: [JSONValue]) -> [JSONValue] {
        var seen = Set<Int64>()
        return readings.sorted { ($0["id"]?.intValue ?? 0) < ($1["id"]?.intValue ?? 0) }
            .filter { seen.insert($0["time"]?["epochMillis"]?.intValue ?? -1).inserted }
    }

    /// "date device" of each reading, as ``NightscoutSite/posted`` lists them.
    static func keys(_ readings: [JSONValue]) -> Set<String> {
        Set(readings.map { "\($0["time"]?["epochMillis"]?.intValue ?? -1) sugard://\($0["meter"]?.stringValue ?? "?")" })
    }

    /// Waits until `site` accepted exactly the entries of `readings`.
    func waitForPosted(_ site: NightscoutSite, _ readings: [JSONValue], _ rig: ForwardRig, sourceLocation: SourceLocation = #_sourceLocation) async {
        let expected = Self.keys(readings)
        var got = Set<String>()
        let done = await eventually(within: 20) {
            got = await site.posted
            return got == expected
        }
        #expect(done, "the site took \(got.count) entries, \(got.subtracting(expected).count) of them unexpected, for \(expected.count); forwarder log:\n\(readFile(rig.forwarderLog).suffix(3000))",
                sourceLocation: sourceLocation)
    }

    /// Waits until `site` holds `count` entries.
    func waitForEntries(_ site: NightscoutSite, _ count: Int, _ rig: ForwardRig, seconds: Double = 20,
                        sourceLocation: SourceLocation = #_sourceLocation) async {
        var got = 0
        let done = await eventually(within: seconds) {
            got = await site.entries.count
            return got >= count
        }
        #expect(done, "the site has \(got) of \(count) entries; forwarder log:\n\(readFile(rig.forwarderLog).suffix(3000))",
                sourceLocation: sourceLocation)
    }

    func status(_ rig: ForwardRig) async throws -> [JSONValue] {
        let json = try JSONValue(parsing: try await ForwardTests().sugarctlStatus(rig, json: true))
        return json["sinks"]?.arrayValue ?? []
    }

    /// One sink straight from the forwarder's io.sugard.Forward socket (sugard may be down).
    func forwarderSink(_ name: String, _ rig: ForwardRig) async throws -> JSONValue? {
        let client = try VarlinkClient(socketPath: rig.statusSocket)
        defer { client.close() }
        return try await client.call("io.sugard.Forward.GetStatus")["sinks"]?.arrayValue?.first { $0["name"]?.stringValue == name }
    }

    func sink(_ name: String, _ rig: ForwardRig) async throws -> JSONValue? {
        try await self.status(rig).first { $0["name"]?.stringValue == name }
    }

    /// The fixture meters (a LO, a 105 mg/dL control test, a ketone record): LO reaches Nightscout
    /// as a Note saying so, never as a number; control and ketone readings stay out; every
    /// treatment has its reading's identifier, and re-posting changes nothing.
    @Test func loIsANoteControlAndKetoneStayOutAndEveryTreatmentHasAnIdentifier() async throws {
        let fixtures = HomeAssistantEntityTests.fixtures + "/"
        let rig = try ForwardRig(
            seconds: 0, replays: ["accu-chek-guide-mgdl-mtu23", "contour-mmol-large-mtu", "isens-month13"].map { fixtures + $0 + ".btsnoop" })
        var failed = true
        defer { rig.cleanUp(keep: failed || environmentValue("FORWARD_TESTS_KEEP") != nil) }
        let site = try await NightscoutSite(rig, name: "care")
        try rig.writeForwardConfig(site.section("care", extra: "nightscout_treatments = true\nnightscout_units = mmol"), mqtt: false)
        try await rig.startSugard()
        let stored = await eventually(within: 30) { ((try? await rig.storedReadings()) ?? []).count >= 14 }
        try #require(stored)
        try rig.startForwarder()
        // 11 glucose values are entries and BG Checks; the LO is a Note.
        let arrived = await eventually(within: 30) {
            let entries = await site.entries.count
            let treatments = await site.treatments.count
            return entries >= 11 && treatments >= 12
        }
        let (entryCount, treatmentCount) = (await site.entries.count, await site.treatments.count)
        #expect(arrived, "entries \(entryCount), treatments \(treatmentCount):\n\(readFile(rig.forwarderLog).suffix(2000))")
        let entries = await site.entries
        #expect(entries.count == 11)
        #expect(!entries.contains { $0["mbg"] == 105 }, "the control test is not an entry")
        let treatments = await site.treatments
        #expect(treatments.count == 12)
        let notes = treatments.filter { $0["eventType"] == "Note" }
        #expect(notes.count == 1)
        let note = try #require(notes.first)
        #expect(note["notes"]?.stringValue?.hasPrefix("LO") == true && note["glucose"] == nil, "\(note.serialized())")
        #expect(note["created_at"]?.stringValue?.hasPrefix("2025-11-23T10:01") == true)
        let checks = treatments.filter { $0["eventType"] == "BG Check" }
        #expect(checks.count == 11)
        // mmol treatments: one decimal.
        #expect(checks.allSatisfy { ($0["glucose"]?.doubleValue).map { ($0 * 10).rounded() / 10 == $0 } == true })
        let identifiers = treatments.compactMap { $0["identifier"]?.stringValue }
        #expect(identifiers.count == 12 && Set(identifiers).count == 12, "every treatment its own identifier")
        // The same readings again (a new cursor): the site still holds each treatment once.
        _ = await rig.forwarder?.terminate(graceSeconds: 5)
        unlink(rig.forwardState + "/nightscout-care.cursor")
        try rig.startForwarder()
        let reposted = await eventually(within: 30) {
            await site.log.filter { $0["path"] == "/api/v1/treatments" && $0["status"] == 200 }.map { $0["count"]?.intValue ?? 0 }.reduce(0, +) >= 24
        }
        #expect(reposted)
        let afterRepost = await site.treatments.count
        #expect(afterRepost == 12, "identifiers make the re-post an update")
        failed = false
    }

    @Test func entriesAndTreatmentsArriveWithTheReadingsOwnOffsetAndOnlyNightscoutRuns() async throws {
        // 70 readings per meter before the forwarder starts: more than one batch of 100.
        try await withRig(meters: 1, backlog: 130, seconds: 2, timezone: "Europe/Berlin") { rig in
            let site = try await NightscoutSite(rig, name: "family")
            // A slow site: the feed fills the sink's buffer meanwhile, so batches are full.
            try await site.control(["delay": 0.3])
            try rig.writeForwardConfig(site.section("family", extra: "nightscout_treatments = true"), mqtt: false)
            try await rig.startSugard()
            let stored = try await rig.waitForAllStored()
            try #require(stored.count > 120)
            try rig.startForwarder()
            let sent = Self.entryReadings(try await rig.storedReadings())
            let expected = Self.firstPerDate(sent)
            await self.waitForEntries(site, expected.count, rig)
            let entries = await site.entries
            #expect(entries.count == expected.count)
            let byDate = Dictionary(entries.compactMap { e in e["date"]?.intValue.map { ($0, e) } }, uniquingKeysWith: { a, _ in a })
            for reading in expected {
                let millis = try #require(reading["time"]?["epochMillis"]?.intValue)
                let entry = try #require(byDate[millis], "no entry for \(millis)")
                #expect(Set(entry.objectValue?.keys ?? []) == ["type", "mbg", "date", "dateString", "utcOffset", "sysTime", "device"])
                #expect(entry["type"] == "mbg")
                #expect(entry["mbg"]?.intValue == Int64((reading["mgdL"]?.doubleValue ?? -1).rounded()))
                // December in Berlin: CET, the reading's own offset, not UTC.
                #expect(entry["utcOffset"] == 60)
                let dateString = try #require(entry["dateString"]?.stringValue)
                #expect(dateString.hasSuffix("+01:00"), "\(dateString)")
                #expect(ISO8601DateFormatter().date(from: dateString).map { Int64($0.timeIntervalSince1970 * 1000) } == millis / 1000 * 1000)
                #expect(entry["sysTime"]?.stringValue == dateString)
                #expect(entry["device"] == .string("sugard://" + (reading["meter"]?.stringValue ?? "")))
            }
            // The treatments of a batch go after its entries.
            let allTreatments = await eventually(within: 10) { await site.treatments.count >= expected.count }
            #expect(allTreatments)
            let treatments = await site.treatments
            #expect(treatments.count == expected.count)
            let treatment = try #require(treatments.first)
            #expect(treatment["eventType"] == "BG Check")
            #expect(treatment["glucoseType"] == "Finger")
            #expect(treatment["units"] == "mg/dl")
            #expect(treatment["enteredBy"] == "sugard")
            #expect(treatment["created_at"]?.stringValue?.hasSuffix("+01:00") == true)
            #expect(treatment["glucose"]?.intValue != nil)
            // Batches of at most 100, every one with the SHA-1 of the secret (the stand-in checks it).
            let log = await site.log
            #expect(log.allSatisfy { $0["status"] == 200 && $0["secret"] == true && $0["token"] == false }, "\(log)")
            #expect(log.allSatisfy { ($0["count"]?.intValue ?? 101) <= 100 })
            #expect(log.contains { $0["path"] == "/api/v1/entries" && $0["count"] == 100 }, "no full batch: \(log.map { $0["count"] ?? .null })")

            // Only the Nightscout sink runs (no mqtt_url), and status shows it.
            let sinks = try await self.status(rig)
            #expect(sinks.count == 1)
            let sink = try #require(sinks.first)
            #expect(sink["kind"] == "nightscout" && sink["name"] == "family" && sink["url"] == .string(site.url))
            #expect(sink["state"] == "connected" && sink["person"] == .null && sink["lastDeliveryMillis"]?.intValue != nil)
            #expect(sink["delivered"]?.intValue == Int64(2 * sent.count))
            let definition = try VarlinkInterfaceDefinition(description: ForwardStatusService.interfaceDescription)
            #expect(throws: Never.self) { try definition.validateReply(method: "GetStatus", parameters: ["sinks": .array(sinks)]) }
            let text = try await ForwardTests().sugarctlStatus(rig)
            #expect(text.contains("\nSinks\n  family \(site.url): connected, 0 pending, last delivery "), "\(text)")
            #expect(!readFile(rig.forwarderLog).contains("mqtt://"), "an MQTT sink ran without mqtt_url")
            #expect(Int64(readFile(rig.forwardState + "/nightscout-family.cursor").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 > 0)
        }
    }

    @Test func serverErrorsAreRetriedAndNothingIsSkippedOrReordered() async throws {
        try await withRig(meters: 1, backlog: 10, seconds: 3) { rig in
            let site = try await NightscoutSite(rig, name: "flaky")
            try await site.control(["fail500": 2])
            try rig.writeForwardConfig(site.section("flaky"), mqtt: false)
            try await rig.startSugard()
            try rig.startForwarder()
            var sink: JSONValue?
            let retrying = try await eventually(within: 10) {
                sink = try await self.sink("flaky", rig)
                return sink?["state"] == "retrying"
            }
            #expect(retrying, "\(String(describing: sink))")
            #expect(sink?["reason"]?.stringValue?.contains("Nightscout answered 500") == true, "\(String(describing: sink))")
            _ = try await rig.waitForAllStored()
            // Commit order is the readings' id order.
            let expected = Self.firstPerDate(Self.entryReadings(try await rig.storedReadings()))
            await self.waitForEntries(site, expected.count, rig)
            let statuses = await site.log.map { $0["status"]?.intValue ?? 0 }
            #expect(Array(statuses.prefix(3)) == [500, 500, 200], "\(statuses)")
            #expect(await site.deliveredDates == expected.compactMap { $0["time"]?["epochMillis"]?.intValue })
            #expect(readFile(rig.forwarderLog).contains("Nightscout sink flaky (\(site.url)): retrying: Nightscout answered 500"))
            let recovered = try await eventually(within: 5) { try await self.sink("flaky", rig)?["state"] == "connected" }
            #expect(recovered)
        }
    }

    /// A refused secret and a rejected batch: each sink shows why and waits (no tight loop), the MQTT
    /// sink and a third site next to them deliver everything meanwhile, and SIGHUP makes both try again.
    @Test func refusedAndRejectedSinksShowWhyPauseAndHoldBackNothingElse() async throws {
        try await withRig(meters: 1, backlog: 10, seconds: 3) { rig in
            let refused = try await NightscoutSite(rig, name: "refused")
            let rejected = try await NightscoutSite(rig, name: "rejected")
            try await refused.control(["refuse": true])
            try await rejected.control(["reject": "entries are limited on this site"])
            let healthy = try await NightscoutSite(rig, name: "healthy")
            try rig.writeForwardConfig(refused.section("refused") + rejected.section("rejected") + healthy.section("healthy"))
            try await rig.startAll()
            var sinks: [JSONValue] = []
            let shown = try await eventually(within: 10) {
                sinks = try await self.status(rig)
                return sinks.count == 4 && sinks[1]["nightscoutState"] == "refused" && sinks[2]["nightscoutState"] == "paused"
            }
            #expect(shown, "\(sinks)")
            #expect(sinks.map { $0["kind"] } == ["mqtt", "nightscout", "nightscout", "nightscout"])
            #expect(sinks[1]["state"] == "failing" && sinks[1]["reason"] == "Nightscout refused the API secret")
            #expect(sinks[2]["state"] == "failing")
            let message = sinks[2]["reason"]?.stringValue ?? ""
            #expect(message.contains("entries are limited on this site") && message.contains("400"), "\(message)")
            let text = try await ForwardTests().sugarctlStatus(rig)
            #expect(text.contains("  refused \(refused.url): failing (Nightscout refused the API secret), "), "\(text)")
            #expect(text.contains("  rejected \(rejected.url): failing (Nightscout did not take the readings (400): entries are limited"), "\(text)")

            // Neither MQTT nor the other site is held back: every stored reading reaches both.
            let stored = try await rig.waitForAllStored()
            await rig.expectDelivered(stored)
            await self.waitForEntries(healthy, Self.firstPerDate(Self.entryReadings(try await rig.storedReadings())).count, rig)
            // Meanwhile neither site was asked again (slow retry and pause), and nothing was skipped.
            let refusedLog = await refused.log, rejectedLog = await rejected.log
            #expect(refusedLog.count == 1, "\(refusedLog)")
            #expect(rejectedLog.count == 1, "\(rejectedLog)")
            #expect(try await self.sink("refused", rig)?["cursor"] == 0)
            #expect(try await self.sink("rejected", rig)?["cursor"] == 0)
            #expect((try await self.sink("refused", rig)?["pending"]?.intValue ?? 0) > 0)

            // Fixed on the sites; SIGHUP: both deliver everything.
            try await refused.control(["refuse": false])
            try await rejected.control(["reject": .null])
            kill(try #require(rig.forwarder).pid, SIGHUP)
            let expected = Self.firstPerDate(Self.entryReadings(try await rig.storedReadings())).count
            await self.waitForEntries(refused, expected, rig)
            await self.waitForEntries(rejected, expected, rig)
            #expect(rig.forwarder?.isRunning == true)
        }
    }

    /// A family of two people and three meters: Mia's, Jonas's and one nobody's. Each person's site
    /// gets only their readings; the unassigned meter's go only to the family site without a person.
    @Test func eachPersonsSiteGetsOnlyTheirReadings() async throws {
        try await withRig(meters: 3, backlog: 8, seconds: 2) { rig in
            let mia = try await NightscoutSite(rig, name: "mia")
            let jonas = try await NightscoutSite(rig, name: "jonas")
            let family = try await NightscoutSite(rig, name: "family", token: "family-token")
            try rig.writeForwardConfig(
                "nightscout_url = \(family.url)\nnightscout_token = family-token\n" + mia.section("mia", person: "Mia")
                    + jonas.section("jonas", person: "Jonas"))
            try await rig.startBroker()
            try await rig.startSubscriber()
            try await rig.startSugard()
            let known = try await eventually(within: 20) { Set(try await rig.storedReadings().compactMap { $0["meter"]?.stringValue }).count == 3 }
            try #require(known, "sugard did not store readings of three meters")
            for (meter, person) in [(Self.meters[0], "Mia"), (Self.meters[1], "Jonas")] {
                let assigned = try await runToEnd(
                    try builtProduct("sugarctl"), ["meters", "assign", meter, person, "--from", "2000-01-01", "--socket", rig.socket],
                    environment: ["TZ": "UTC"],
                    dir: rig.dir, seconds: 20)
                try #require(assigned.status == 0, "sugarctl meters assign: \(assigned.stderr)")
            }
            try rig.startForwarder()
            let stored = try await rig.waitForAllStored()
            let readings = try await rig.storedReadings()
            let all = Self.entryReadings(readings)
            let mias = Self.entryReadings(readings, meters: [Self.meters[0]])
            let jonass = Self.entryReadings(readings, meters: [Self.meters[1]])
            #expect(!mias.isEmpty && !jonass.isEmpty && all.count > mias.count + jonass.count)
            await self.waitForPosted(mia, mias, rig)
            await self.waitForPosted(jonas, jonass, rig)
            await self.waitForPosted(family, all, rig)
            try await Task.sleep(for: .milliseconds(300))
            #expect(await mia.posted == Self.keys(mias))
            #expect(await jonas.posted == Self.keys(jonass))
            #expect(await family.log.allSatisfy { $0["token"] == true && $0["secret"] == false })

            let sinks = try await self.status(rig)
            #expect(sinks.map { $0["name"] } == ["mqtt", "nightscout", "mia", "jonas"])
            #expect(sinks.map { $0["person"] } == [.null, .null, "Mia", "Jonas"])
            let text = try await ForwardTests().sugarctlStatus(rig)
            #expect(text.contains("  mia \(mia.url) for Mia: connected, 0 pending, last delivery "), "\(text)")
            #expect(text.contains("  nightscout \(family.url): connected, "), "\(text)")

            // The MQTT payload names the person (null for the unassigned meter). Readings stored before
            // the assignment came once without a person, then again with it: the last copy counts.
            await rig.expectDelivered(stored)
            let payloads = rig.receivedReadings().map(\.payload)
            #expect(Self.latest(payloads).values.filter { $0["meter"] == .string(Self.meters[0]) }.allSatisfy { $0["person"] == "Mia" })
            #expect(payloads.filter { $0["meter"] == .string(Self.meters[2]) }.allSatisfy { $0["person"] == .null })
            #expect(payloads.allSatisfy { $0.objectValue?["person"] != nil })
        }
    }

    /// The last MQTT payload of each reading id.
    static func latest(_ payloads: [JSONValue]) -> [String: JSONValue] {
        var out: [String: JSONValue] = [:]
        for payload in payloads { if let id = payload["id"]?.stringValue { out[id] = payload } }
        return out
    }

    /// How many times the site accepted each "date device" entry.
    static func acceptedCounts(_ site: NightscoutSite) async -> [String: Int] {
        var out: [String: Int] = [:]
        for write in await site.log where write["path"] == "/api/v1/entries" && write["status"] == 200 {
            let dates = write["dates"]?.arrayValue ?? [], devices = write["devices"]?.arrayValue ?? []
            for (date, device) in zip(dates, devices) { out["\(date.intValue ?? -1) \(device.stringValue ?? "?")", default: 0] += 1 }
        }
        return out
    }

    /// A meter handed from Mia to Jonas in the middle of its history, and a shared meter whose
    /// readings wait until some are given to Mia: each person's site gets exactly the readings that
    /// are theirs by time or attribution, each once, and MQTT carries the new person.
    @Test func handedOverAndSharedMetersReachTheRightPersonOnce() async throws {
        try await withRig(meters: 3, backlog: 8, seconds: 2) { rig in
            let mia = try await NightscoutSite(rig, name: "mia")
            let jonas = try await NightscoutSite(rig, name: "jonas")
            try rig.writeForwardConfig(mia.section("mia", person: "Mia") + jonas.section("jonas", person: "Jonas"))
            try await rig.startBroker()
            try await rig.startSubscriber()
            try await rig.startSugard()
            let known = try await eventually(within: 20) { Set(try await rig.storedReadings().compactMap { $0["meter"]?.stringValue }).count == 3 }
            try #require(known, "sugard did not store readings of three meters")
            func sugarctl(_ arguments: [String]) async throws -> String {
                let out = try await runToEnd(
                    try builtProduct("sugarctl"), arguments + ["--socket", rig.socket], environment: ["TZ": "UTC"], dir: rig.dir, seconds: 20)
                try #require(out.status == 0, "sugarctl \(arguments): \(out.stderr)")
                return out.stdout
            }
            // Meter 0: Mia's, then Jonas's from the time of its 4th stored reading on.
            let first = try await rig.storedReadings().filter { $0["meter"] == .string(Self.meters[0]) }
                .sorted { ($0["time"]?["epochMillis"]?.intValue ?? 0) < ($1["time"]?["epochMillis"]?.intValue ?? 0) }
            try #require(first.count >= 4)
            let handover = try #require(first[3]["time"]?["iso"]?.stringValue)
            _ = try await sugarctl(["meters", "assign", Self.meters[0], "Mia", "--from", "2000-01-01"])
            _ = try await sugarctl(["meters", "assign", Self.meters[0], "Jonas", "--from", handover])
            // Meter 1: shared; its readings wait.
            _ = try await sugarctl(["meters", "share", Self.meters[1], "--from", "2000-01-01"])
            try rig.startForwarder()
            _ = try await rig.waitForAllStored()
            let waiting = try await rig.storedReadings().filter { $0["awaitingAttribution"] == true }
            try #require(waiting.count >= 2, "the shared meter's readings wait")
            // Half of the shared meter's readings are Mia's.
            let given = Array(waiting.prefix(waiting.count / 2))
            let ids = given.compactMap { $0["id"]?.intValue }.map(String.init)
            #expect(try await sugarctl(["readings", "attribute", "--person", "Mia"] + ids).contains("Gave \(ids.count) reading(s) to Mia"))

            let readings = try await rig.storedReadings()
            let mias = Self.entryReadings(readings.filter { $0["person"] == "Mia" })
            let jonass = Self.entryReadings(readings.filter { $0["person"] == "Jonas" })
            #expect(mias.contains { $0["meter"] == .string(Self.meters[0]) } && mias.contains { $0["meter"] == .string(Self.meters[1]) })
            #expect(jonass.allSatisfy { $0["meter"] == .string(Self.meters[0]) } && !jonass.isEmpty)
            await self.waitForPosted(mia, mias, rig)
            await self.waitForPosted(jonas, jonass, rig)
            try await Task.sleep(for: .milliseconds(500))
            #expect(await mia.posted == Self.keys(mias), "nothing of Jonas's or still waiting")
            #expect(await jonas.posted == Self.keys(jonass))
            // Each reading once: as many accepted entries as readings (two readings of a meter in one
            // second share a date, so count entries, not dates).
            let miaCount = await Self.acceptedCounts(mia).values.reduce(0, +)
            let jonasCount = await Self.acceptedCounts(jonas).values.reduce(0, +)
            #expect(miaCount == mias.count, "each reading once")
            #expect(jonasCount == jonass.count, "each reading once")

            // MQTT: the last copy of each reading carries its person now.
            let byPerson = Dictionary(grouping: readings, by: { $0["person"]?.stringValue ?? "-" })
            let expected = Set((byPerson["Mia"] ?? []).compactMap { $0["meter"]?.stringValue })
            #expect(expected == [Self.meters[0], Self.meters[1]])
            // MQTT ids are "<meter>/<epoch>/<sequence>".
            let attributed = Set(given.compactMap { r -> String? in
                guard let meter = r["meter"]?.stringValue, let epoch = r["epoch"]?.intValue, let seq = r["sequenceNumber"]?.intValue
                else { return nil }
                return "\(meter)/\(epoch)/\(seq)"
            })
            var last: [JSONValue] = []
            let delivered = await eventually(within: 20) {
                last = Self.latest(rig.receivedReadings().map(\.payload)).filter { attributed.contains($0.key) }.map(\.value)
                return last.count == attributed.count && last.allSatisfy { $0["person"] == "Mia" }
            }
            #expect(delivered, "MQTT carries Mia on the attributed readings: \(last.map { $0["person"] ?? .null }) for \(attributed.count)")
        }
    }

    /// sugard and a forwarder with one Nightscout sink "home" (no MQTT); returns once the site has
    /// `entries` entries.
    func startMidStream(_ rig: ForwardRig, entries: Int) async throws -> NightscoutSite {
        let site = try await NightscoutSite(rig, name: "home")
        try rig.writeForwardConfig(site.section("home"), mqtt: false)
        try await rig.startSugard()
        try rig.startForwarder()
        let some = await eventually(within: 20) { await site.entries.count >= entries }
        try #require(some, "nothing delivered:\n\(readFile(rig.forwarderLog))")
        return site
    }

    @Test func aKilledForwarderResumesEachSinkFromItsCursor() async throws {
        try await withRig(meters: 1, backlog: 10, seconds: 5) { rig in
            let site = try await self.startMidStream(rig, entries: 12)
            rig.forwarder?.kill()
            try await Task.sleep(for: .milliseconds(1500))  // readings keep being stored meanwhile
            try rig.startForwarder()
            _ = try await rig.waitForAllStored()
            let all = Self.entryReadings(try await rig.storedReadings())
            let expected = Self.firstPerDate(all)
            await self.waitForEntries(site, expected.count, rig)
            let resumed = readFile(rig.forwarderLog).split(separator: "\n").filter { $0.contains("Nightscout sink home:") && $0.contains("resuming after cursor") }
            #expect(resumed.count == 2)
            #expect(resumed.last?.hasSuffix("cursor 0") == false, "the second run started from scratch: \(resumed)")
            // Nothing lost; at most the batch in flight at the kill was posted twice.
            #expect(Set(await site.deliveredDates) == Set(expected.compactMap { $0["time"]?["epochMillis"]?.intValue }))
            let posted = await site.log.filter { $0["path"] == "/api/v1/entries" }.compactMap { $0["count"]?.intValue }.reduce(0, +)
            #expect(posted <= Int64(all.count) + 100, "\(posted) entries posted for \(all.count)")
        }
    }

    @Test func sugardRestartedMidStreamLosesNothing() async throws {
        try await withRig(meters: 1, backlog: 10, seconds: 5) { rig in
            let site = try await self.startMidStream(rig, entries: 10)
            #expect(await rig.sugard?.terminate(graceSeconds: 10) == 0)
            unlink(rig.socket)
            let lost = try await eventually(within: 10) { try await self.forwarderSink("home", rig)?["feedConnected"] == false }
            #expect(lost)
            #expect(try await self.forwarderSink("home", rig)?["state"] == "connected", "the site itself is fine")
            try await rig.startSugard()
            _ = try await rig.waitForAllStored()
            let expected = Self.firstPerDate(Self.entryReadings(try await rig.storedReadings()))
            await self.waitForEntries(site, expected.count, rig)
            #expect(await site.deliveredDates == expected.compactMap { $0["time"]?["epochMillis"]?.intValue })
            #expect(readFile(rig.forwarderLog).contains("Nightscout sink home: sugard's readings are not reachable (retrying)"))
            #expect(try await self.sink("home", rig)?["feedConnected"] == true)
        }
    }

    @Test func configErrorsNameTheFileAndLine() async throws {
        try await withRig(seconds: 1) { rig in
            for (text, expected) in [
                ("gateway_id = gw1\n[nightscout mia]\nnightscout_url = https://mia.example\nmqtt_url = mqtt://x\n", "bad.conf:4: unknown key \"mqtt_url\""),
                ("[nightscout mia]\nnightscout_url = https://mia.example\n", "bad.conf:1: sink mia needs nightscout_api_secret_file or nightscout_token"),
                ("[nightscout mqtt]\nnightscout_url = https://a.example\nnightscout_token = t\n", "a Nightscout sink cannot be named mqtt"),
                ("nightscout_url = https://a.example\nnightscout_token = t\nmqtt_username = u\n", "mqtt_* keys are set but mqtt_url is not"),
                ("[nightscout a]\nnightscout_url = https://a.example\nnightscout_api_secret_file = /nonexistent/secret\n", "Nightscout sink a: cannot read"),
            ] {
                try text.write(toFile: rig.dir + "/bad.conf", atomically: true, encoding: .utf8)
                let result = try await runToEnd(
                    try builtProduct("sugard-forward"), ["--config", rig.dir + "/bad.conf", "--state-dir", rig.forwardState, "--socket", rig.socket],
                    environment: [:], dir: rig.dir, seconds: 10)
                #expect(result.status == 78, "\(text): \(result.status) \(result.stderr)")
                #expect(result.stderr.contains(expected), "\(result.stderr)")
            }
        }
    }
}
