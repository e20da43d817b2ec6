import Foundation
import JSON
import SugarWire
import Testing
import TestSupport
import SugarForward
import Varlink

/// The built sugard-forward between the built sugard (replaying the fixture meters: a LO, a
/// control-solution test, a ketone record, a value below 70 mg/dL) and a real mosquitto: what Home
/// Assistant's entities receive, read by mosquitto_sub.
@Suite(.serialized) struct HomeAssistantEntityTests {
    static let fixtures: String = {
        let root = #filePath.split(separator: "/", omittingEmptySubsequences: false).dropLast(4).joined(separator: "/")
        return root + "/fixtures"
    }()
    static let replays = ["accu-chek-guide-mgdl-mtu23", "contour-mmol-large-mtu", "isens-month13"].map { Self.fixtures + "/" + $0 + ".btsnoop" }
    static let accuChek = "6077718a0b14"
    static let contour = "c026da112233"
    static let isens = "00091f123456"

    func withRig(_ extra: String = "", _ body: (ForwardRig) async throws -> Void) async throws {
        let rig = try ForwardRig(seconds: 0, replays: Self.replays)
        try rig.writeForwardConfig(extra)
        var failed = true
        defer { rig.cleanUp(keep: failed || environmentValue("FORWARD_TESTS_KEEP") != nil) }
        try await body(rig)
        failed = false
    }

    /// Waits until every stored reading arrived (the three meters hold 14).
    func waitForAll(_ rig: ForwardRig) async throws -> [JSONValue] {
        let stored = await eventually(within: 30) { ((try? await rig.storedReadings()) ?? []).count >= 14 }
        try #require(stored, "sugard did not store the fixtures' 14 readings:\n\(readFile(rig.dir + "/sugard.log").suffix(3000))")
        let arrived = await eventually(within: 30) { rig.receivedReadings().count >= 14 }
        try #require(arrived, "\(rig.receivedReadings().count) of 14 readings arrived; forwarder log:\n\(readFile(rig.forwarderLog).suffix(3000))")
        return rig.receivedReadings().map(\.payload)
    }

    @Test func aLOTurnsGlucoseLowOnAControlTestNeverBecomesTheStateAndEveryReadingFiresOneEvent() async throws {
        try await withRig { rig in
            try await rig.startAll()
            let readings = try await self.waitForAll(rig)
            // Every event arrives: one per reading (none here lacks a value).
            let eventsArrived = await eventually(within: 20) {
                [Self.accuChek, Self.contour, Self.isens].map { rig.received(on: "sugard/gw1/\($0)/event").count }.reduce(0, +) >= 14
            }
            #expect(eventsArrived)
            try await Task.sleep(for: .milliseconds(500))

            // The payload says what each reading is.
            let kinds = Dictionary(grouping: readings, by: { $0["kind"]?.stringValue ?? "?" }).mapValues(\.count)
            #expect(kinds == ["glucose": 11, "lo": 1, "controlSolution": 1, "ketone": 1], "\(kinds)")
            let lo = try #require(readings.first { $0["kind"] == "lo" })
            #expect(lo["mgdL"] == .null && lo["mmolL"] == .null && lo["flags"] == ["lo"])
            #expect(lo["measuredAt"]?.stringValue?.hasPrefix("2025-11-23T10:01") == true, "\(lo.serialized())")

            // The glucose sensor's state only ever takes glucose values: never the 105 mg/dL
            // control test, the LO or the ketone record.
            for meter in [Self.accuChek, Self.contour, Self.isens] {
                let states = rig.received(on: "sugard/gw1/\(meter)/state").compactMap { try? JSONValue(parsing: $0) }
                #expect(!states.isEmpty, "meter \(meter) has a state")
                #expect(states.allSatisfy { $0["kind"] == "glucose" && $0["mgdL"]?.doubleValue != nil }, "\(states.map { $0.serialized() })")
            }
            let accuStates = rig.received(on: "sugard/gw1/\(Self.accuChek)/state").compactMap { try? JSONValue(parsing: $0) }
            #expect(accuStates.last?["sequenceNumber"] == .int(8), "the newest glucose value is the state")

            // "Glucose low" follows every value, LO and HI in order: on for the LO, and for 58 mg/dL
            // (below 70), off again after; "Glucose high" stays off (nothing above 250, no HI).
            #expect(rig.received(on: "sugard/gw1/\(Self.accuChek)/low") == ["OFF", "ON", "OFF", "OFF"])
            #expect(rig.received(on: "sugard/gw1/\(Self.contour)/low") == ["OFF", "OFF", "ON", "OFF", "OFF"])
            #expect(rig.received(on: "sugard/gw1/\(Self.isens)/low") == ["OFF", "OFF", "OFF"], "the ketone record moves nothing")
            #expect(rig.received(on: "sugard/gw1/\(Self.accuChek)/high") == ["OFF", "OFF", "OFF", "OFF"])

            // The event entity fires once per stored reading, with its type, value and measured time.
            var events: [String: JSONValue] = [:]
            for meter in [Self.accuChek, Self.contour, Self.isens] {
                for line in rig.received(on: "sugard/gw1/\(meter)/event") {
                    let event = try JSONValue(parsing: line)
                    let id = try #require(event["id"]?.stringValue)
                    #expect(events[id] == nil, "one event per reading: \(id) twice")
                    events[id] = event
                }
            }
            #expect(Set(events.keys) == Set(readings.compactMap { $0["id"]?.stringValue }))
            let types = Dictionary(grouping: events.values, by: { $0["event_type"]?.stringValue ?? "?" }).mapValues(\.count)
            #expect(types == ["glucose": 11, "lo": 1, "control_solution": 1, "ketone": 1], "\(types)")
            #expect(events.values.allSatisfy { $0["measuredAt"]?.stringValue != nil && $0["mgdL"] != nil })

            // Discovery: the glucose sensor as before, the new entities, the gateway device.
            let discovery = "homeassistant/binary_sensor/gw1_\(Self.accuChek)/glucose_low/config"
            let low = try #require(rig.received(on: discovery).last.flatMap { try? JSONValue(parsing: $0) }, "\(discovery)")
            #expect(low["state_topic"] == .string("sugard/gw1/\(Self.accuChek)/low"))
            #expect(low["device"]?["via_device"] == "sugard_gw1")
            #expect(rig.received(on: "homeassistant/event/gw1_\(Self.accuChek)/reading/config").count >= 1)
            #expect(rig.received(on: "homeassistant/sensor/gw1_\(Self.accuChek)/glucose/config").count >= 1)
            #expect(rig.received(on: "homeassistant/binary_sensor/gw1/adapter/config").count >= 1)

            // Health from sugard: the replay adapter works, each meter synced just now.
            let health = await eventually(within: 10) {
                rig.received(on: "sugard/gw1/adapter").last == "OFF"
                    && [Self.accuChek, Self.contour, Self.isens].allSatisfy { rig.received(on: "sugard/gw1/\($0)/sync_overdue").last == "OFF" }
            }
            #expect(health, "adapter \(rig.received(on: "sugard/gw1/adapter")); forwarder log:\n\(readFile(rig.forwarderLog).suffix(2000))")
            let synced = try #require(rig.received(on: "sugard/gw1/\(Self.accuChek)/last_synced").last)
            let fractional = ISO8601DateFormatter()
            fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            let at = try #require(fractional.date(from: synced) ?? ISO8601DateFormatter().date(from: synced), "\(synced)")
            let age = Date().timeIntervalSince(at)
            #expect(age >= 0 && age < 120, "last synced \(synced)")
        }
    }

    /// Two meters assigned to Mia: her own entities follow the newest of both (a device per person).
    @Test func aPersonsEntitiesFollowAllHerMeters() async throws {
        try await withRig { rig in
            try await rig.startBroker()
            try await rig.startSubscriber()
            try await rig.startSugard()
            let stored = await eventually(within: 30) { ((try? await rig.storedReadings()) ?? []).count >= 14 }
            try #require(stored)
            let client = try VarlinkClient(socketPath: rig.socket)
            for meter in ["60:77:71:8A:0B:14", "C0:26:DA:11:22:33"] {
                // From before the replayed readings: an assignment covers the readings measured in its period.
                _ = try await client.call(
                    "io.sugard.HealthDataSync.AssignMeter", ["meter": .string(meter), "person": "Mia", "from": "2000-01-01T00:00:00Z"])
            }
            client.close()
            try rig.startForwarder()
            _ = try await self.waitForAll(rig)
            let person = "sugard/gw1/person/\(ForwardTopics.personLevel("Mia"))"
            #expect(person.hasPrefix("sugard/gw1/person/mia_"))
            let events = await eventually(within: 20) { rig.received(on: person + "/event").count >= 10 }
            #expect(events, "Mia's readings each fire her event once: \(rig.received(on: person + "/event").count)")
            try await Task.sleep(for: .milliseconds(500))
            #expect(rig.received(on: person + "/event").count == 10, "the isens meter is nobody's")
            // Whichever meter's sync was committed first, a value below 70 or the LO turned her low on.
            #expect(rig.received(on: person + "/low").contains("ON"), "\(rig.received(on: person + "/low"))")
            #expect(rig.received(on: person + "/low").last == "OFF")
            let states = rig.received(on: person + "/state").compactMap { try? JSONValue(parsing: $0) }
            #expect(!states.isEmpty && states.allSatisfy { $0["kind"] == "glucose" && $0["person"] == "Mia" })
            let glucose = try #require(
                rig.received(on: "homeassistant/sensor/gw1_person_\(ForwardTopics.personLevel("Mia"))/glucose/config").last
                    .flatMap { try? JSONValue(parsing: $0) })
            #expect(glucose["state_topic"] == .string(person + "/state"))
            #expect(glucose["device"]?["name"] == "Mia" && glucose["device"]?["via_device"] == "sugard_gw1")
            #expect(glucose["unique_id"] == .string("sugard_gw1_person_\(ForwardTopics.personLevel("Mia"))_glucose"))
            #expect(rig.received(on: "homeassistant/binary_sensor/gw1_person_\(ForwardTopics.personLevel("Mia"))/glucose_low/config").count >= 1)
            #expect(ForwardTopics.personLevel("Mia") != ForwardTopics.personLevel("mia"))
        }
    }

    @Test func aMeterThatHasNotSyncedTurnsSyncOverdueOn() async throws {
        // 0.001 h = 3.6 s.
        try await withRig("sync_overdue_hours = 0.001") { rig in
            try await rig.startAll()
            _ = try await self.waitForAll(rig)
            let overdue = await eventually(within: 20) { rig.received(on: "sugard/gw1/\(Self.accuChek)/sync_overdue").last == "ON" }
            #expect(overdue, "\(rig.received(on: "sugard/gw1/\(Self.accuChek)/sync_overdue")); log:\n\(readFile(rig.forwarderLog).suffix(2000))")
            #expect(rig.received(on: "sugard/gw1/\(Self.accuChek)/sync_overdue").first == "OFF", "not overdue right after the sync")
        }
    }

    @Test func withoutDiscoveryNoEntityTopicsGoOut() async throws {
        try await withRig("homeassistant_discovery = false") { rig in
            try await rig.startAll()
            let readings = try await self.waitForAll(rig)
            #expect(readings.allSatisfy { $0["kind"] != nil })
            try await Task.sleep(for: .seconds(1))
            let log = readFile(rig.subscriberLog)
            #expect(!log.contains("/event ") && !log.contains("/low ") && !log.contains("sugard/gw1/adapter ") && !log.contains("homeassistant/"))
            // The state topic still takes only glucose values.
            let states = rig.received(on: "sugard/gw1/\(Self.accuChek)/state").compactMap { try? JSONValue(parsing: $0) }
            #expect(!states.isEmpty && states.allSatisfy { $0["kind"] == "glucose" })
        }
    }
}
