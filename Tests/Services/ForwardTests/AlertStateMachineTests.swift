import Foundation
import HTTPClient
import JSON
import MQTT
import ProcessKit
import SugarAPI
import SugarWire
import Testing

@testable import SugarForward

/// ``AlertStateMachine`` per transition, with no I/O: readings, health and time in; the state to
/// save and the alert events out.
@Suite struct AlertStateMachineTests {
    typealias Machine = AlertStateMachine
    static let meter = "60:77:71:8A:0B:01"
    static let other = "60:77:71:8A:0B:02"
    static let minute: Int64 = 60_000

    static func machine(_ config: AlertConfig = AlertConfig(), saved: AlertState = AlertState(), sinks: [String] = ["mqtt"]) -> Machine {
        Machine(saved: saved, settings: Machine.Settings(config: config, gateway: "gw", sinks: sinks))
    }

    static func reading(
        _ n: Int64, _ mgdL: Double?, kind: Wire.ReadingKind = .glucose, meter: String = Self.meter, person: String? = nil
    ) -> (cursor: Int64, reading: AlertReading) {
        (n, AlertReading(id: "\(meter)/1/\(n)", meter: meter, person: person, kind: kind, mgdL: mgdL, measuredMillis: 1_000_000 * n))
    }

    /// The events of `actions`, checking that a save comes first whenever there are any.
    static func events(_ actions: [Machine.Action], sourceLocation: SourceLocation = #_sourceLocation) -> [Wire.ForwardAlert] {
        var saved = false
        var out: [Wire.ForwardAlert] = []
        for action in actions {
            switch action {
            case .save: saved = true
            case .emit(let list):
                #expect(saved, "alert events are handed on only after the state holding them is saved", sourceLocation: sourceLocation)
                out += list.map(\.alert)
            }
        }
        return out
    }

    static func summary(_ alerts: [Wire.ForwardAlert]) -> [String] { alerts.map { "\($0.rule.rawValue) \($0.state.rawValue)" } }

    @Test func aLOFiresUrgentLowOnceAndAReadingInRangeResolvesIt() {
        var m = Self.machine()
        let fired = Self.events(m.handle(.readings([Self.reading(1, nil, kind: .lo, person: "anna")]), now: 0))
        #expect(Self.summary(fired) == ["urgent_low firing"])
        #expect(fired.first?.person == "anna" && fired.first?.meter == Self.meter && fired.first?.reading == "\(Self.meter)/1/1")
        #expect(fired.first?.value == nil && fired.first?.message.contains("LO") == true && fired.first?.time == Wire.Instant(epochMillis: 1_000_000).iso)
        // Still low: nothing more (one event per episode), also not for a value between 54 and 70.
        #expect(Self.events(m.handle(.readings([Self.reading(2, nil, kind: .lo, person: "anna")]), now: 0)).isEmpty)
        #expect(Self.events(m.handle(.readings([Self.reading(3, 60, person: "anna")]), now: 0)).isEmpty)
        let resolved = Self.events(m.handle(.readings([Self.reading(4, 110, person: "anna")]), now: 0))
        #expect(Self.summary(resolved) == ["urgent_low resolved"])
        #expect(resolved.first?.id == fired.first?.id && resolved.first?.reading == "\(Self.meter)/1/4" && resolved.first?.value == 110)
        #expect(m.state.active.isEmpty)
        // The next episode is a new alert.
        let again = Self.events(m.handle(.readings([Self.reading(5, 40, person: "anna")]), now: 0))
        #expect(Self.summary(again) == ["urgent_low firing"] && again.first?.id != fired.first?.id)
    }

    @Test func lowEscalatesToUrgentLowAndBothResolveTogether() {
        var m = Self.machine()
        #expect(Self.summary(Self.events(m.handle(.readings([Self.reading(1, 65)]), now: 0))) == ["low firing"])
        #expect(Self.summary(Self.events(m.handle(.readings([Self.reading(2, 50)]), now: 0))) == ["urgent_low firing"])
        #expect(Self.events(m.handle(.readings([Self.reading(3, 66)]), now: 0)).isEmpty)
        #expect(Self.summary(Self.events(m.handle(.readings([Self.reading(4, 70)]), now: 0))) == ["urgent_low resolved", "low resolved"])
    }

    @Test func highFiresForHIAndAboveTheLimitAndSwingsResolveTheOtherSide() {
        var m = Self.machine()
        #expect(Self.summary(Self.events(m.handle(.readings([Self.reading(1, nil, kind: .hi)]), now: 0))) == ["high firing"])
        #expect(Self.events(m.handle(.readings([Self.reading(2, 251)]), now: 0)).isEmpty)
        #expect(Self.events(m.handle(.readings([Self.reading(3, 250)]), now: 0)).map(\.state) == [.resolved])
        #expect(Self.summary(Self.events(m.handle(.readings([Self.reading(4, 60)]), now: 0))) == ["low firing"])
        #expect(Self.summary(Self.events(m.handle(.readings([Self.reading(5, 300)]), now: 0))) == ["low resolved", "high firing"])
        #expect(Self.summary(Self.events(m.handle(.readings([Self.reading(6, nil, kind: .lo)]), now: 0))) == ["high resolved", "urgent_low firing"])
    }

    @Test func withTheLowRuleOffAnUrgentLowEndsAtItsOwnLimit() throws {
        var config = AlertConfig()
        try config.top.apply(key: "alert_low", value: "off")
        var m = Self.machine(config)
        #expect(Self.summary(Self.events(m.handle(.readings([Self.reading(1, 50)]), now: 0))) == ["urgent_low firing"])
        #expect(Self.events(m.handle(.readings([Self.reading(2, 53)]), now: 0)).isEmpty)
        #expect(Self.summary(Self.events(m.handle(.readings([Self.reading(3, 54)]), now: 0))) == ["urgent_low resolved"])
        #expect(Self.events(m.handle(.readings([Self.reading(4, 60)]), now: 0)).isEmpty, "no low rule")
    }

    @Test func controlTestsKetonesAndOlderReadingsFireNothing() {
        var m = Self.machine()
        let list = [
            Self.reading(1, 30, kind: .controlSolution), Self.reading(2, nil, kind: .ketone), Self.reading(3, nil, kind: .noValue),
        ]
        #expect(Self.events(m.handle(.readings(list), now: 0)).isEmpty)
        #expect(Self.events(m.handle(.readings([Self.reading(10, 100)]), now: 0)).isEmpty)
        // Measured before the newest looked at (a backlog synced late): its old episode is not replayed.
        var old = Self.reading(11, 40)
        old.reading.measuredMillis = 5
        #expect(Self.events(m.handle(.readings([old]), now: 0)).isEmpty)
        #expect(m.state.cursor == 11)
    }

    @Test func readingsOlderThanTheMaxAgeFireNothingButStillResolve() {
        var m = Self.machine()
        let day: Int64 = 86_400_000
        // The history at a first start, or a meter synced after a week away: a LO of three days ago fires nothing.
        #expect(Self.events(m.handle(.readings([Self.reading(1, nil, kind: .lo)]), now: 1_000_000 + 3 * day)).isEmpty)
        // A fresh one does.
        let now: Int64 = 100 * day
        var fresh = Self.reading(2, 60)
        fresh.reading.measuredMillis = now - 60_000
        #expect(Self.summary(Self.events(m.handle(.readings([fresh]), now: now))) == ["low firing"])
        // A newer reading that is still older than the limit (the clock jumped) ends the episode, fires no high.
        var late = Self.reading(3, 300)
        late.reading.measuredMillis = now
        #expect(Self.summary(Self.events(m.handle(.readings([late]), now: now + 2 * day))) == ["low resolved"])
        // With alert_max_age = off any age fires.
        var config = AlertConfig()
        try? config.top.apply(key: "alert_max_age", value: "off")
        var ageless = Self.machine(config)
        #expect(Self.summary(Self.events(ageless.handle(.readings([Self.reading(1, nil, kind: .lo)]), now: 1_000_000 + 300 * day))) == ["urgent_low firing"])
    }

    @Test func subjectsAreThePersonElseTheMeter() {
        var m = Self.machine()
        let a = Self.events(m.handle(.readings([Self.reading(1, 60, meter: Self.meter, person: "anna"), Self.reading(2, 60, meter: Self.other)]), now: 0))
        #expect(a.map(\.subject) == ["anna", Self.other])
        // Anna's second meter is the same person: no second low.
        #expect(Self.events(m.handle(.readings([Self.reading(3, 62, meter: Self.other, person: "anna")]), now: 0)).isEmpty)
    }

    @Test func aRestartFromTheSavedStateFiresNothingTwiceAndLosesNoResolve() throws {
        var m = Self.machine()
        var saved = AlertState()
        for action in m.handle(.readings([Self.reading(1, nil, kind: .lo)]), now: 0) {
            if case .save(let state) = action { saved = state }
        }
        // Saved, written and read back as the file holds it.
        let reloaded = try AlertState(json: try JSONValue(parsing: saved.json.serialized()))
        #expect(reloaded == saved)
        var restarted = Self.machine(saved: reloaded)
        // The same reading again (a crash before the cursor moved): nothing new.
        #expect(Self.events(restarted.handle(.readings([Self.reading(1, nil, kind: .lo)]), now: 0)).isEmpty)
        // The resolve still comes, with the episode's id.
        let resolved = Self.events(restarted.handle(.readings([Self.reading(2, 120)]), now: 0))
        #expect(Self.summary(resolved) == ["urgent_low resolved"] && resolved.first?.id == saved.active.values.first?.id)
        // Events a sink has not had survive the restart in the log.
        #expect(reloaded.pending(for: "mqtt").map(\.alert.rule) == [.urgentLow])
    }

    @Test func deliveryProgressIsSavedAndTheLogKeepsWhatASinkStillNeeds() {
        var m = Self.machine(sinks: ["mqtt", "webhook pager"])
        _ = m.handle(.readings([Self.reading(1, nil, kind: .lo), Self.reading(2, 100)]), now: 0)
        #expect(m.state.pending(for: "mqtt").count == 2 && m.state.pending(for: "webhook pager").count == 2)
        let actions = m.handle(.delivered(sink: "mqtt", seq: 2), now: 0)
        #expect(actions.count == 1 && m.state.delivered["mqtt"] == 2, "progress is saved at once")
        #expect(m.state.pending(for: "mqtt").isEmpty && m.state.pending(for: "webhook pager").count == 2)
        // An old acknowledgement moves nothing back.
        #expect(m.handle(.delivered(sink: "mqtt", seq: 1), now: 0).isEmpty && m.state.delivered["mqtt"] == 2)
        // A sink added later starts with what comes from then on; one removed holds nothing back.
        let next = Self.machine(saved: m.state, sinks: ["mqtt", "webhook new"])
        #expect(next.state.delivered["webhook new"] == 2 && next.state.delivered["webhook pager"] == nil)
    }

    @Test func aSinkThatNeverTakesAnythingHoldsAtMostMaxLogEvents() {
        var settings = Machine.Settings(config: AlertConfig(), gateway: "gw", sinks: ["mqtt", "webhook dead"])
        settings.maxLog = 4
        var m = Machine(saved: AlertState(), settings: settings)
        for n in Int64(1)...5 { _ = m.handle(.readings([Self.reading(2 * n, nil, kind: .lo), Self.reading(2 * n + 1, 100)]), now: 0) }
        #expect(m.state.log.map(\.seq) == [7, 8, 9, 10] && m.state.delivered["webhook dead"] == 6)
        #expect(m.state.pending(for: "webhook dead").count == 4)
    }

    @Test func cursorOnlyMovesAreSavedAtMostOnceASecondAndOnStop() {
        var m = Self.machine()
        #expect(m.handle(.readings([Self.reading(1, 100)]), now: 10_000).count == 1)
        #expect(m.handle(.readings([Self.reading(2, 100)]), now: 10_500).isEmpty)
        #expect(m.handle(.tick, now: 11_000).count == 1)
        _ = m.handle(.readings([Self.reading(3, 100)]), now: 11_100)
        guard case .save(let state)? = m.handle(.stop, now: 11_200).first else {
            Issue.record("stop did not save the cursor")
            return
        }
        #expect(state.cursor == 3)
    }

    @Test func syncOverdueFiresOnTheTickAndASyncResolvesIt() {
        var m = Self.machine()
        let last: Int64 = 1_000_000_000
        var health = GatewayHealth(adapterWorking: true)
        health.lastGoodSyncs = [Self.meter: last]
        #expect(Self.events(m.handle(.health(health), now: last + 23 * 60 * Self.minute)).isEmpty)
        let fired = Self.events(m.handle(.tick, now: last + 24 * 60 * Self.minute + 1))
        #expect(Self.summary(fired) == ["sync_overdue firing"] && fired.first?.meter == Self.meter && fired.first?.reading == nil)
        #expect(fired.first?.message.contains("has not synced for 24 h") == true, "\(fired.first?.message ?? "")")
        #expect(Self.events(m.handle(.tick, now: last + 30 * 60 * Self.minute)).isEmpty)
        health.lastGoodSyncs[Self.meter] = last + 30 * 60 * Self.minute
        let resolved = Self.events(m.handle(.health(health), now: last + 30 * 60 * Self.minute + 5))
        #expect(Self.summary(resolved) == ["sync_overdue resolved"] && resolved.first?.id == fired.first?.id)
    }

    @Test func syncOverdueHoursIsTheDefaultLimit() {
        var settings = Machine.Settings(config: AlertConfig(), gateway: "gw", sinks: [])
        settings.defaultSyncOverdueMillis = 2 * 3_600_000
        var m = Machine(saved: AlertState(), settings: settings)
        var health = GatewayHealth(adapterWorking: true)
        health.lastGoodSyncs = [Self.meter: 0]
        #expect(Self.events(m.handle(.health(health), now: 2 * 3_600_000)).isEmpty)
        #expect(Self.summary(Self.events(m.handle(.tick, now: 2 * 3_600_000 + 1))) == ["sync_overdue firing"])
    }

    @Test func gatewayFailedWaitsItsTimeAndTheAdapterBackResolvesIt() {
        var m = Self.machine()
        let t0: Int64 = 5_000_000
        #expect(Self.events(m.handle(.health(GatewayHealth(adapterWorking: false)), now: t0)).isEmpty)
        #expect(Self.events(m.handle(.tick, now: t0 + 9 * Self.minute)).isEmpty)
        let fired = Self.events(m.handle(.tick, now: t0 + 10 * Self.minute))
        #expect(Self.summary(fired) == ["gateway_failed firing"] && fired.first?.message.contains("adapter") == true)
        #expect(Self.events(m.handle(.tick, now: t0 + 20 * Self.minute)).isEmpty)
        let resolved = Self.events(m.handle(.health(GatewayHealth(adapterWorking: true)), now: t0 + 21 * Self.minute))
        #expect(Self.summary(resolved) == ["gateway_failed resolved"])
        // A failure shorter than the limit never fires.
        _ = m.handle(.health(GatewayHealth(adapterWorking: false)), now: t0 + 30 * Self.minute)
        _ = m.handle(.health(GatewayHealth(adapterWorking: true)), now: t0 + 35 * Self.minute)
        #expect(Self.events(m.handle(.tick, now: t0 + 50 * Self.minute)).isEmpty)
        // Storage failed counts as the gateway failing.
        var storage = GatewayHealth(adapterWorking: true)
        storage.storageFailedNow = true
        _ = m.handle(.health(storage), now: t0 + 60 * Self.minute)
        #expect(Self.summary(Self.events(m.handle(.tick, now: t0 + 71 * Self.minute))) == ["gateway_failed firing"])
    }

    @Test func personAndMeterSectionsAndSugardsThresholdsOverrideTheTop() throws {
        var config = ForwardConfig(gatewayID: "gw", socketPath: "/tmp/s", stateDirectory: "/tmp")
        try config.apply(
            fileText: """
                alert_low = 4.4 mmol/L
                [person anna]
                alert_low = 90
                alert_high = off
                [meter \(Self.other.lowercased())]
                alerts = off
                """, file: "forward.conf")
        try config.validate(file: "forward.conf")
        var m = Self.machine(config.alerts)
        // The top: 4.4 mmol/L is 79 mg/dL.
        #expect(Self.summary(Self.events(m.handle(.readings([Self.reading(1, 78, meter: "M1")]), now: 0))) == ["low firing"])
        // Anna: low below 90, no high.
        #expect(Self.summary(Self.events(m.handle(.readings([Self.reading(2, 85, person: "anna")]), now: 0))) == ["low firing"])
        #expect(Self.summary(Self.events(m.handle(.readings([Self.reading(3, 400, person: "anna")]), now: 0))) == ["low resolved"])
        // The other meter: off.
        #expect(Self.events(m.handle(.readings([Self.reading(4, nil, kind: .lo, meter: Self.other)]), now: 0)).isEmpty)
        // Bea's own thresholds in sugard (sugarctl people edit bea --low 100) apply without a section.
        _ = m.handle(.people(["bea": .init(low: 100, high: 180)]), now: 0)
        #expect(Self.summary(Self.events(m.handle(.readings([Self.reading(5, 95, person: "bea")]), now: 0))) == ["low firing"])
        #expect(Self.summary(Self.events(m.handle(.readings([Self.reading(6, 190, person: "bea")]), now: 0))) == ["low resolved", "high firing"])
    }

    @Test func alertsOffFiresNothing() throws {
        var config = AlertConfig()
        try config.top.apply(key: "alerts", value: "off")
        var m = Self.machine(config)
        #expect(Self.events(m.handle(.readings([Self.reading(1, nil, kind: .lo)]), now: 0)).isEmpty)
        _ = m.handle(.health(GatewayHealth(adapterWorking: false)), now: 0)
        #expect(Self.events(m.handle(.tick, now: 3_600_000)).isEmpty)
    }
}

/// The alert keys as forward.conf takes them, the webhook requests, the signature.
@Suite struct AlertConfigTests {
    static func config(_ text: String) throws(ConfigError) -> ForwardConfig {
        var config = ForwardConfig(gatewayID: "gw", socketPath: "/tmp/s", stateDirectory: "/tmp")
        try config.apply(fileText: text, file: "forward.conf")
        try config.validate(file: "forward.conf")
        return config
    }

    @Test func valuesTakeUnitsAndTimesAndRefuseNonsense() throws {
        let config = try Self.config(
            """
            alert_low = 3.9 mmol/L
            alert_urgent_low = 50 mg/dL
            alert_high = 270
            alert_sync_overdue = 36h
            alert_gateway_failed = 5m
            """)
        let limits = config.alerts.limits(meter: nil, person: nil)
        #expect(abs((limits.low ?? 0) - 70.26) < 0.01 && limits.urgentLow == 50 && limits.high == 270)
        #expect(limits.syncOverdueMillis == 36 * 3_600_000 && limits.gatewayFailedMillis == 300_000)
        // The defaults, and glucose_low_mgdl/glucose_high_mgdl as the default low and high.
        let defaults = try Self.config("glucose_low_mgdl = 75").alerts.limits(meter: nil, person: nil, defaultLow: 75)
        #expect(
            defaults
                == AlertLimits(low: 75, urgentLow: 54, high: 250, syncOverdueMillis: 86_400_000, gatewayFailedMillis: 600_000, maxAgeMillis: 86_400_000))
        for (line, message) in [
            ("alert_low = 3.9", "mmol/L with its unit"), ("alert_low = lots", "must be a glucose value"),
            ("alert_sync_overdue = 24", "a time with its unit"), ("alerts = maybe", "on or off"),
            ("alert_urgent_low = 80", "must not be above alert_low"), ("url = https://x.example", "[webhook NAME]"),
            ("[webhook]\nurl = https://x.example", "needs a name"), ("[webhook p]\nformat = json", "needs url"),
            ("[webhook p]\nurl = ftp://x", "http:// or https://"), ("[webhook p]\nurl = https://x.example\nformat = xml", "json, ntfy or gotify"),
            ("[person anna]\nnightscout_url = https://x", "alert keys only"), ("[frobnicate x]", "[nightscout NAME]"),
        ] {
            #expect(throws: ConfigError.self, "\(line)") { try Self.config(line) }
            do {
                _ = try Self.config(line)
            } catch {
                #expect(error.message.contains(message), "\(line): \(error.message)")
            }
        }
    }

    /// The forward.conf examples of docs/alerts.md (its ```ini blocks) are what the forwarder takes.
    @Test func theGuidesExamplesParse() throws {
        let path = #filePath.split(separator: "/", omittingEmptySubsequences: false).dropLast(4).joined(separator: "/") + "/docs/alerts.md"
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let blocks = text.components(separatedBy: "```ini\n").dropFirst().map { $0.components(separatedBy: "```").first ?? "" }
        #expect(blocks.count == 2)
        for block in blocks {
            #expect(throws: Never.self, "\(block)") { try Self.config(block) }
        }
        let webhooks = try Self.config(blocks.last ?? "").webhooks
        #expect(webhooks.map(\.format) == [.ntfy, .gotify, .json] && webhooks.last?.secretFile != nil)
    }

    @Test func webhooksAndNightscoutSinksShareTheFile() throws {
        let config = try Self.config(
            """
            mqtt_url = mqtt://localhost
            [nightscout home]
            nightscout_url = https://ns.example
            nightscout_token = abc
            [webhook pager]
            url = https://ntfy.example/ward-3
            format = ntfy
            [webhook hook2]
            url = http://127.0.0.1:9/x
            """)
        #expect(config.nightscout.count == 1)
        #expect(config.webhooks.map(\.name) == ["pager", "hook2"] && config.webhooks[0].format == .ntfy && config.webhooks[1].format == .json)
    }

    static let alert = Wire.ForwardAlert(
        id: "gw/urgent_low/person/anna/1", rule: .urgentLow, state: .firing, person: "anna", meter: "M", reading: "M/1/1",
        timeMillis: 0, value: nil, message: "Urgent low glucose: LO (below the meter's range) for anna (meter M)")

    @Test func webhookFormatsAndTheSignature() throws {
        // RFC 4231 test case 2.
        #expect(SHA256.hex(SHA256.hmac(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8)))
            == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        #expect(SHA256.hex(SHA256.digest(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hex(SHA256.digest(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        var hook = WebhookConfig(name: "p")
        hook.url = "https://x.example/t"
        let json = hook.request(for: Self.alert, gateway: "gw", credentials: WebhookCredentials(secret: "s3cret", token: nil))
        let body = try JSONValue(parsing: json.body)
        #expect(body["rule"] == "urgent_low" && body["state"] == "firing" && body["person"] == "anna" && body["reading"] == "M/1/1")
        #expect(body["time"] == .string(Wire.Instant(epochMillis: 0).iso) && body["value"] == .null && body["id"] == "gw/urgent_low/person/anna/1")
        let signature = json.headers.first { $0.name == "X-Sugard-Signature" }?.value
        #expect(signature == "sha256=" + SHA256.hex(SHA256.hmac(key: Array("s3cret".utf8), message: json.body)))
        hook.format = .ntfy
        let ntfy = hook.request(for: Self.alert, gateway: "gw", credentials: WebhookCredentials(secret: nil, token: "tk_1"))
        let headers = Dictionary(ntfy.headers.map { ($0.name, $0.value) }, uniquingKeysWith: { a, _ in a })
        #expect(String(decoding: ntfy.body, as: UTF8.self) == Self.alert.message)
        #expect(headers["Title"] == "Urgent low glucose" && headers["Priority"] == "5" && headers["Tags"]?.contains("urgent_low") == true)
        #expect(headers["Authorization"] == "Bearer tk_1" && headers["X-Sugard-Signature"] == nil)
        hook.format = .gotify
        let gotify = hook.request(for: Self.alert, gateway: "gw", credentials: WebhookCredentials(secret: nil, token: "AbC"))
        #expect(try JSONValue(parsing: gotify.body) == ["title": "Urgent low glucose", "message": .string(Self.alert.message), "priority": 10])
        #expect(gotify.headers.contains { $0.name == "X-Gotify-Key" && $0.value == "AbC" })
    }
}

/// Alert events through ``DeliveryStateMachine``: held until the broker acknowledged them, sent
/// again (first) after a reconnect, the acknowledged prefix reported for the alerter to save.
@Suite struct AlertDeliveryTests {
    typealias Machine = DeliveryStateMachine

    static func alert(_ seq: Int64) -> (seq: Int64, message: MQTTMessage) {
        (seq, MQTTMessage(topic: "sugard/gw/alert", payload: Array("{\"seq\":\(seq)}".utf8), qos: 1, retain: false))
    }

    static func alertTokens(_ actions: [Machine.Action]) -> [Int64] {
        actions.compactMap {
            if case .publish(.alert(let seq, _), _) = $0 { seq } else { nil }
        }
    }

    @Test func alertsWaitForTheBrokerAreResentAfterAReconnectAndTheirPrefixIsReported() {
        var config = ForwardConfig(gatewayID: "gw", socketPath: "/tmp/s", stateDirectory: "/tmp")
        config.homeAssistantDiscovery = false
        var machine = Machine(saved: ForwardState(), limits: Machine.Limits(maxInFlight: 4), topics: ForwardTopics(config: config), now: 0)
        #expect(machine.handle(.alerts([Self.alert(3), Self.alert(4)]), at: 1, wallClock: 1).isEmpty, "nothing before a connection")
        let connected = machine.handle(.connected(session: 1), at: 2, wallClock: 2)
        #expect(Self.alertTokens(connected) == [3, 4])
        #expect(connected.contains { if case .publish(.alert(3, let m), 1) = $0 { m.topic == "sugard/gw/alert" && m.qos == 1 && !m.retain } else { false } })
        // One already held is not taken twice; a new one goes out at once.
        #expect(Self.alertTokens(machine.handle(.alerts([Self.alert(4), Self.alert(5)]), at: 3, wallClock: 3)) == [5])
        // 4 acknowledged before 3: nothing is delivered until 3 is.
        let token = { (seq: Int64) in Machine.alertTokenBit | seq }
        #expect(machine.handle(.acknowledged(tokens: [token(4)], session: 1), at: 4, wallClock: 4).isEmpty)
        #expect(machine.handle(.acknowledged(tokens: [token(3)], session: 1), at: 5, wallClock: 5) == [.alertsDelivered(upTo: 4)])
        // The connection drops before 5 is acknowledged: it goes out again on the next one.
        _ = machine.handle(.disconnected, at: 6, wallClock: 6)
        #expect(Self.alertTokens(machine.handle(.connected(session: 2), at: 7, wallClock: 7)) == [5])
        // An acknowledgement from the old connection counts for nothing.
        #expect(machine.handle(.acknowledged(tokens: [token(5)], session: 1), at: 8, wallClock: 8).isEmpty)
        #expect(machine.handle(.acknowledged(tokens: [token(5)], session: 2), at: 9, wallClock: 9) == [.alertsDelivered(upTo: 5)])
    }
}

/// The alert rules' view of sugard's health, set the way the follower sets it (from sugard's own values).
extension GatewayHealth {
    init(adapterWorking: Bool) {
        self.init()
        self.adapter = Wire.Adapter(present: true, powered: adapterWorking, discovering: false, name: "hci0", address: nil)
    }

    /// The meters' last good syncs, as sugard's meter list sets them.
    var lastGoodSyncs: [String: Int64] {
        get { self.lastSync }
        set { for (meter, millis) in newValue { self.meters[meter, default: Meter()].lastGood = millis } }
    }

    /// sugard's storage failed (true) or ok.
    var storageFailedNow: Bool {
        get { self.storageFailed == true }
        set { self.storage = Wire.Storage(status: newValue ? .failed : .ok, path: "/var/lib/sugard/readings.db", error: nil) }
    }
}
