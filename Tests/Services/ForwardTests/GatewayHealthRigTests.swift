import Foundation
import Glibc
import JSON
import Testing
import TestSupport

/// The gateway's health topic from the real sugard-forward following a real sugard (three replayed
/// meters) through a real mosquitto: the meters' counts and last syncs, the database, the sinks;
/// sugard stopping shows as its storage not answering, and its return as `ok` again.
@Suite(.serialized) struct GatewayHealthRigTests {
    @Test func theHealthTopicFollowsSugard() async throws {
        let rig = try ForwardRig(seconds: 0, replays: HomeAssistantEntityTests.replays)
        // Without Home Assistant: the health topic goes out all the same.
        try rig.writeForwardConfig("homeassistant_discovery = false")
        var failed = true
        defer { rig.cleanUp(keep: failed || environmentValue("FORWARD_TESTS_KEEP") != nil) }
        try await rig.startAll()
        _ = try await HomeAssistantEntityTests().waitForAll(rig)
        let stored = try await rig.storedReadings().count
        func health() -> JSONValue? { rig.received(on: "sugard/gw1/health").last.flatMap { try? JSONValue(parsing: $0) } }
        func counted() -> Int64 { (health()?["meters"]?.arrayValue ?? []).compactMap { $0["readingCount"]?.intValue }.reduce(0, +) }
        let complete = await eventually(within: 20) { counted() == Int64(stored) }
        try #require(complete, "\(counted()) of \(stored) readings counted in \(health()?.serialized() ?? "no health message")")
        let h = try #require(health())
        #expect(h["gatewayId"] == "gw1" && h["version"]?.stringValue?.isEmpty == false && h["time"]?.stringValue?.hasSuffix("Z") == true)
        #expect(h["storage"] == "ok" && h["databaseId"]?.stringValue?.count == 36, "\(h.serialized())")
        #expect(h["adapter"]?["present"] != nil && h["adapter"]?["powered"] != nil, "\(h.serialized())")
        let meters = h["meters"]?.arrayValue ?? []
        #expect(meters.count == 3)
        for meter in meters {
            #expect(meter["lastSync"]?["result"] == "success" && meter["overdue"] == false && meter["name"]?.stringValue != nil, "\(meter.serialized())")
        }
        #expect(h["alerts"] == [] && h["sinks"] == [["kind": "mqtt", "name": "mqtt", "state": "connected"]])

        // sugard stops: the health says it does not answer; it comes back: ok again.
        _ = await rig.sugard?.terminate(graceSeconds: 10)
        unlink(rig.socket)
        let gone = await eventually(within: 20) { health()?["storage"]?["code"] == "sugardUnreachable" }
        #expect(gone, "\(health()?.serialized() ?? "")")
        try await rig.startSugard()
        let back = await eventually(within: 20) { health()?["storage"] == "ok" }
        #expect(back, "\(health()?.serialized() ?? "")")
        failed = false
    }
}
