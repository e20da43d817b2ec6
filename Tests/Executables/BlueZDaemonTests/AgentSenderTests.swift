import DBus
import Foundation
import JSON
import Testing
import TestSupport

private let meter = "C0:26:DA:01:02:03"
private let devicePath = "/org/bluez/hci0/dev_C0_26_DA_01_02_03"

/// sugard's pairing agent answers only bluetoothd: the built sugard over the BlueZ stand-in on a
/// private bus, and a second peer on that bus that is not the owner of org.bluez.
@Suite("the pairing agent answers only bluetoothd", .serialized)
struct AgentSenderTests {
    /// Calls a method of the bus itself.
    static func bus(_ connection: DBusConnection, _ method: String, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await connection.call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            method: method, arguments: arguments, timeout: .seconds(10))
    }

    @Test("a peer that is not org.bluez's owner calls RequestPasskey during sugarctl pair: Rejected, not the PIN; the stand-in still pairs")
    func impostorIsRejected() async throws {
        let stored = records(1...2)
        let simulated = SimulatedMeter(address: meter, records: stored, options: #""requires_pairing": true, "pin": "123456""#)
        try await withRig(standIn: standIn([simulated])) { rig in
            try await rig.waitUntil("the meter model waits for the passkey") {
                try await rig.meter(meter)?["pairing"]?.stringValue == "waitingForPasskey"
            }
            // sugard's connection: the bus name whose process is the daemon (the stand-in, waiting
            // in its own RequestPasskey call, answers nothing until the pairing ends).
            let impostor = try await DBusConnection.connect(to: .address(rig.busAddress))
            defer { impostor.close() }
            let pid = try #require(rig.daemonPID)
            var sugard: String?
            for name in try await Self.bus(impostor, "ListNames").first?.strings ?? [] where name.hasPrefix(":") {
                let owner = try? await Self.bus(impostor, "GetConnectionUnixProcessID", [.string(name)]).first?.integer
                if owner == Int64(pid) { sugard = name }
            }
            let agentPath = "/io/sugard/agent"
            try #require(sugard != nil, "no bus connection of sugard (pid \(pid))")
            let stolen = Task { [sugard] in
                try await impostor.call(
                    destination: sugard, path: agentPath, interface: "org.bluez.Agent1", method: "RequestPasskey",
                    arguments: [.objectPath(devicePath)], timeout: .seconds(30))
            }
            var rejection: DBusError?
            do {
                let reply = try await stolen.value
                Issue.record("the impostor got an answer: \(reply)")
            } catch let error as DBusError {
                rejection = error
            }
            #expect(rejection?.name == "org.bluez.Error.Rejected", "\(String(describing: rejection))")
            // Cancel, too, is refused: the real request still waits for the passkey.
            await #expect(throws: DBusError.self) {
                _ = try await impostor.call(
                    destination: sugard, path: agentPath, interface: "org.bluez.Agent1", method: "Cancel", timeout: .seconds(30))
            }
            #expect(try await rig.meter(meter)?["pairing"]?.stringValue == "waitingForPasskey")

            let pair = try await rig.sugarctl(["pair", meter, "--pin", "123456"])
            #expect(pair.status == 0, "\(pair.stdout) \(pair.stderr)\n\(rig.daemonLog)")
            let state = try await rig.meterState(meter)
            #expect(state["paired"]?.boolValue == true)
            #expect(state["passkeys"]?.arrayValue?.last?.intValue == 123_456, "\(state)")
            let log = rig.daemonLog
            #expect(log.contains("Refused org.bluez.Agent1.RequestPasskey from \(impostor.uniqueName)"), "\(log)")
            #expect(!log.contains("123456"), "the PIN is in the log")

            _ = try await rig.syncToSuccess(meter)
            expectStored(try await rig.waitForReadings(meter, count: 2), match: stored, meter: meter)
        }
    }
}
