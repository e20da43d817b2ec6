import DBus
import Foundation
import Testing
import Locking
import TestSupport

private let meterAddress = "C0:26:DA:01:02:03"
private let devicePath = "/org/bluez/hci0/dev_C0_26_DA_01_02_03"
private let measurementChar = devicePath + "/service000c/char000d"
private let contextChar = devicePath + "/service000c/char0010"
private let featureChar = devicePath + "/service000c/char0013"
private let racpChar = devicePath + "/service000c/char0015"
private let serialChar = devicePath + "/service001a/char001f"
private let charInterface = "org.bluez.GattCharacteristic1"
private let propsInterface = "org.freedesktop.DBus.Properties"

private func uuid(_ short: UInt16) -> String {
    let hex = String(short, radix: 16)
    return String(repeating: "0", count: 8 - hex.count) + hex + "-0000-1000-8000-00805f9b34fb"
}

private func hex(_ bytes: [UInt8]) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}

// Three stored records (sequence numbers 1-3); 1 and 3 carry a context.
private let records: [(String, String?)] = [
    ("020100e807010f081e005fb011", "0201000142"),
    ("020200e807010f091e0064b011", nil),
    ("020300e807010f0a1e006eb011", "0203000143"),
]

private func parameters(_ options: String = "{}", address: String = meterAddress) -> String {
    let recordJSON = records.map { "[\"\($0.0)\", \($0.1.map { "\"\($0)\"" } ?? "null")]" }.joined(separator: ",")
    let merged = options.dropLast().trimmingCharacters(in: .whitespaces)
    let comma = merged == "{" ? "" : ","
    return """
        {"adapter": "hci0", "meters": [{"address": "\(address)", "name": "Test Meter", \
        "options": \(merged)\(comma) "records": [\(recordJSON)], "serial": "SN-42"}}]}
        """
}

/// A client of the stand-in, speaking only through the DBus module.
private struct BlueZ {
    let connection: DBusConnection

    func call(_ path: String, _ interface: String, _ method: String, _ arguments: [DBusValue] = []) async throws
        -> [DBusValue]
    {
        try await self.connection.call(
            destination: "org.bluez", path: path, interface: interface, method: method, arguments: arguments,
            timeout: .seconds(10))
    }

    func mock(_ method: String, _ arguments: [DBusValue]) async throws -> [DBusValue] {
        try await self.call("/", "org.bluez.Mock", method, arguments)
    }

    func managedObjects() async throws -> [String: DBusValue] {
        let reply = try await self.call("/", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects")
        return try #require(reply.first?.dictionary)
    }

    func meterState(_ address: String = meterAddress) async throws -> String {
        try #require(try await self.mock("GetGlucoseMeterState", [.string(address)]).first?.string)
    }

    func write(_ path: String, _ bytes: [UInt8]) async throws {
        _ = try await self.call(path, charInterface, "WriteValue", [.bytes(bytes), .vardict(["type": .string("request")])])
    }

    func read(_ path: String) async throws -> [UInt8]? {
        try await self.call(path, charInterface, "ReadValue", [.vardict([:])]).first?.bytes
    }

    /// Value notifications (PropertiesChanged with a Value) below the device, as (path, hex).
    func valueChanges() async throws -> HandOffStream<DBusSignal> {
        try await self.connection.signals(
            matching: DBusMatchRule(
                sender: "org.bluez", pathNamespace: devicePath, interface: propsInterface, member: "PropertiesChanged"))
    }
}

private func nextValue(_ iterator: inout HandOffStream<DBusSignal>.AsyncIterator, _ what: String) async throws
    -> (String, String)?
{
    while let signal = try await next(&iterator, what) {
        if let value = signal.arguments.dropFirst().first?.dictionary?["Value"]?.bytes {
            return (signal.path, hex(value))
        }
    }
    return nil
}

/// Answers org.bluez.Agent1 calls at `object`: RequestPasskey with `passkeys[device]`, or holds the call
/// unanswered when the device has no passkey.
private func serveAgent(_ object: DBusExportedObject, passkeys: [String: UInt32], seen: AgentLog) async {
    var held: [DBusIncomingCall] = []
    for await call in object.calls {
        seen.append("\(call.member) \(call.arguments.first?.string ?? "")")
        switch call.member {
        case "RequestPasskey":
            if let device = call.arguments.first?.string, let passkey = passkeys[device] {
                try? call.reply([.uint32(passkey)])
            } else {
                held.append(call)
            }
        default:
            try? call.reply()
        }
    }
}

private final class AgentLog: @unchecked Sendable {
    // @unchecked: every access goes through the lock.
    private let lock = NSLock()
    private var entries: [String] = []
    func append(_ entry: String) { self.lock.withLock { self.entries.append(entry) } }
    var all: [String] { self.lock.withLock { self.entries } }
}

extension DBusIntegration {
    @Suite("BlueZ stand-in driven through the DBus module")
    struct StandInTests {
        @Test("GetManagedObjects and InterfacesAdded show the meter and, once connected, its GATT tree")
        func objectTree() async throws {
            try await withBus(standIn: parameters()) { fixture in
                let bluez = BlueZ(connection: try await fixture.connect())
                defer { bluez.connection.close() }
                let before = try await bluez.managedObjects()
                #expect(before["/org/bluez/hci0"]?.dictionary?["org.bluez.Adapter1"] != nil)
                let device = try #require(before[devicePath]?.dictionary?["org.bluez.Device1"]?.dictionary)
                #expect(device["UUIDs"]?.strings?.contains(uuid(0x1808)) == true)
                #expect(device["Address"]?.string == meterAddress)
                #expect(device["Connected"]?.bool == false)
                #expect(before[racpChar] == nil)

                let added = try await bluez.connection.signals(
                    matching: DBusMatchRule(
                        sender: "org.bluez", interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded"))
                var addedIterator = added.makeAsyncIterator()
                var deviceChanges = try await bluez.connection.signals(
                    matching: DBusMatchRule(sender: "org.bluez", path: devicePath, member: "PropertiesChanged")
                ).makeAsyncIterator()
                _ = try await bluez.call(devicePath, "org.bluez.Device1", "Connect")

                var addedPaths: [String] = []
                while addedPaths.count < 10, let signal = try await next(&addedIterator, "InterfacesAdded") {
                    addedPaths.append(signal.arguments.first?.string ?? "")
                    if signal.arguments.first?.string == racpChar {
                        let props = signal.arguments[1].dictionary?[charInterface]?.dictionary
                        #expect(props?["UUID"]?.string == uuid(0x2A52))
                        #expect(props?["Flags"]?.strings == ["write", "indicate"])
                        #expect(props?["Service"]?.string == devicePath + "/service000c")
                    }
                }
                #expect(addedPaths.first == devicePath + "/service000c")
                #expect(addedPaths.contains(racpChar) && addedPaths.contains(serialChar))

                var changed: [String: Bool] = [:]
                while changed["ServicesResolved"] == nil, let signal = try await next(&deviceChanges, "device props") {
                    for (key, value) in signal.arguments[1].dictionary ?? [:] { changed[key] = value.bool }
                }
                #expect(changed == ["Connected": true, "ServicesResolved": true])

                let after = try await bluez.managedObjects()
                let service = after[devicePath + "/service000c"]?.dictionary?["org.bluez.GattService1"]?.dictionary
                #expect(service?["UUID"]?.string == uuid(0x1808))
                #expect(service?["Device"]?.string == devicePath)
                for (path, short) in [(measurementChar, 0x2A18), (contextChar, 0x2A34), (featureChar, 0x2A51),
                                      (racpChar, 0x2A52), (serialChar, 0x2A25)] {
                    let props = after[path]?.dictionary?[charInterface]?.dictionary
                    #expect(props?["UUID"]?.string == uuid(UInt16(short)), "\(path)")
                }
                #expect(try await bluez.read(serialChar) == Array("SN-42".utf8))
                #expect(try await bluez.read(featureChar) == [0x02, 0x04])
            }
        }

        @Test("a full RACP exchange: count, report all, report newer, abort")
        func racpExchange() async throws {
            try await withBus(standIn: parameters()) { fixture in
                let bluez = BlueZ(connection: try await fixture.connect())
                defer { bluez.connection.close() }
                var values = try await bluez.valueChanges().makeAsyncIterator()
                _ = try await bluez.call(devicePath, "org.bluez.Device1", "Connect")
                for path in [measurementChar, contextChar, racpChar] {
                    _ = try await bluez.call(path, charInterface, "StartNotify")
                }

                try await bluez.write(racpChar, [0x04, 0x01])
                #expect(try await nextValue(&values, "count")! == (racpChar, "05000300"))

                try await bluez.write(racpChar, [0x01, 0x01])
                var received: [(String, String)] = []
                while received.last?.0 != racpChar, let value = try await nextValue(&values, "records") {
                    received.append(value)
                }
                let expected: [(String, String)] = [
                    (measurementChar, records[0].0), (contextChar, records[0].1!),
                    (measurementChar, records[1].0),
                    (measurementChar, records[2].0), (contextChar, records[2].1!),
                    (racpChar, "06000101"),
                ]
                #expect(received.map(\.0) == expected.map(\.0))
                #expect(received.map(\.1) == expected.map(\.1))

                try await bluez.write(racpChar, [0x04, 0x03, 0x01, 0x03, 0x00])
                #expect(try await nextValue(&values, "count newer")! == (racpChar, "05000100"))
                try await bluez.write(racpChar, [0x01, 0x03, 0x01, 0x04, 0x00])
                #expect(try await nextValue(&values, "nothing newer")! == (racpChar, "06000106"))
                try await bluez.write(racpChar, [0x03, 0x00])
                #expect(try await nextValue(&values, "abort")! == (racpChar, "06000301"))
            }
        }

        @Test("records notified after the reply can be aborted; a second procedure is refused with ATT 0x80")
        func asynchronousReport() async throws {
            try await withBus(standIn: parameters(#"{"record_interval_ms": 150}"#)) { fixture in
                let bluez = BlueZ(connection: try await fixture.connect())
                defer { bluez.connection.close() }
                var values = try await bluez.valueChanges().makeAsyncIterator()
                _ = try await bluez.call(devicePath, "org.bluez.Device1", "Connect")
                for path in [measurementChar, contextChar, racpChar] {
                    _ = try await bluez.call(path, charInterface, "StartNotify")
                }
                try await bluez.write(racpChar, [0x01, 0x01])
                #expect(try await nextValue(&values, "first record")! == (measurementChar, records[0].0))
                let busy = await #expect(throws: DBusError.self) { try await bluez.write(racpChar, [0x01, 0x01]) }
                #expect(busy?.name == "org.bluez.Error.Failed")
                #expect(busy?.message == "Operation failed with ATT error: 0x80")
                try await bluez.write(racpChar, [0x03, 0x00])
                var rest: [(String, String)] = []
                while rest.last?.0 != racpChar, let value = try await nextValue(&values, "abort") { rest.append(value) }
                #expect(rest.last! == (racpChar, "06000301"))
                #expect(rest.filter { $0.0 == measurementChar }.count < 2)
            }
        }

        @Test("pairing calls the exported agent's RequestPasskey; right PIN pairs, wrong PIN fails")
        func pairingAgent() async throws {
            let second = "C0:26:DA:0A:0B:0C"
            let secondPath = "/org/bluez/hci0/dev_C0_26_DA_0A_0B_0C"
            try await withBus(standIn: parameters(#"{"requires_pairing": true, "pin": "123456"}"#)) { fixture in
                let bluez = BlueZ(connection: try await fixture.connect())
                defer { bluez.connection.close() }
                _ = try await bluez.mock(
                    "AddGlucoseMeter",
                    [.string("hci0"), .string(second), .string("Other"),
                     .string(#"{"requires_pairing": true, "pin": "654321"}"#)])
                _ = try await bluez.call(devicePath, "org.bluez.Device1", "Connect")
                let denied = await #expect(throws: DBusError.self) { try await bluez.read(featureChar) }
                #expect(denied?.name == "org.bluez.Error.NotPermitted")
                #expect(denied?.message == "Not paired")
                let racpDenied = await #expect(throws: DBusError.self) {
                    try await bluez.call(racpChar, charInterface, "StartNotify")
                }
                #expect(racpDenied?.name == "org.bluez.Error.NotPermitted")

                let agentPath = "/io/sugard/agent"
                let agent = try await bluez.connection.exportObject(at: agentPath)
                let log = AgentLog()
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        await serveAgent(agent, passkeys: [devicePath: 123456, secondPath: 111111], seen: log)
                    }
                    _ = try await bluez.call(
                        "/org/bluez", "org.bluez.AgentManager1", "RegisterAgent",
                        [.objectPath(agentPath), .string("KeyboardDisplay")])
                    _ = try await bluez.call(
                        "/org/bluez", "org.bluez.AgentManager1", "RequestDefaultAgent", [.objectPath(agentPath)])

                    _ = try await bluez.call(devicePath, "org.bluez.Device1", "Pair")
                    #expect(try await bluez.read(featureChar) == [0x02, 0x04])
                    let paired = try await bluez.managedObjects()[devicePath]?.dictionary?["org.bluez.Device1"]
                    #expect(paired?.dictionary?["Paired"]?.bool == true)

                    let failed = await #expect(throws: DBusError.self) {
                        try await bluez.call(secondPath, "org.bluez.Device1", "Pair")
                    }
                    #expect(failed?.kind == .remote)
                    #expect(failed?.name == "org.bluez.Error.AuthenticationFailed")
                    let state = try await bluez.meterState(second)
                    #expect(state.contains(#""paired": false"#))
                    #expect(state.contains(#""passkeys": [111111]"#))
                    agent.unexport()
                }
                #expect(log.all == ["RequestPasskey \(devicePath)", "RequestPasskey \(secondPath)"])
            }
        }

        @Test("RACP faults surface BlueZ's error names: ATT 0x81 without indications, forced ATT errors")
        func racpFaults() async throws {
            try await withBus(standIn: parameters(#"{"busy_writes": 1, "context": false}"#)) { fixture in
                let bluez = BlueZ(connection: try await fixture.connect())
                defer { bluez.connection.close() }
                _ = try await bluez.call(devicePath, "org.bluez.Device1", "Connect")
                #expect(try await bluez.managedObjects()[contextChar] == nil)
                _ = try await bluez.call(measurementChar, charInterface, "StartNotify")
                // busy_writes: the first write meets a procedure already in progress.
                let busy = await #expect(throws: DBusError.self) { try await bluez.write(racpChar, [0x04, 0x01]) }
                #expect(busy?.message == "Operation failed with ATT error: 0x80")
                // RACP indications not enabled yet: CCCD improperly configured.
                let cccd = await #expect(throws: DBusError.self) { try await bluez.write(racpChar, [0x04, 0x01]) }
                #expect(cccd?.name == "org.bluez.Error.Failed")
                #expect(cccd?.message == "Operation failed with ATT error: 0x81")
                var values = try await bluez.valueChanges().makeAsyncIterator()
                _ = try await bluez.call(racpChar, charInterface, "StartNotify")
                try await bluez.write(racpChar, [0x01, 0x01])
                var received: [String] = []
                while received.last != "06000101", let value = try await nextValue(&values, "records") {
                    received.append(value.1)
                }
                // No context characteristic: measurements only.
                #expect(received == records.map(\.0) + ["06000101"])

                _ = try await bluez.mock(
                    "SetGlucoseMeterOptions", [.string(meterAddress), .string(#"{"racp_att_error": 129}"#)])
                let forced = await #expect(throws: DBusError.self) { try await bluez.write(racpChar, [0x01, 0x01]) }
                #expect(forced?.message == "Operation failed with ATT error: 0x81")
            }
        }

        @Test("the meter drops the link mid-transfer: Connected false and the GATT objects go away")
        func disconnectMidTransfer() async throws {
            try await withBus(standIn: parameters(#"{"disconnect_after_records": 1}"#)) { fixture in
                let bluez = BlueZ(connection: try await fixture.connect())
                defer { bluez.connection.close() }
                var removed = try await bluez.connection.signals(
                    matching: DBusMatchRule(sender: "org.bluez", member: "InterfacesRemoved")
                ).makeAsyncIterator()
                var changes = try await bluez.valueChanges().makeAsyncIterator()
                _ = try await bluez.call(devicePath, "org.bluez.Device1", "Connect")
                for path in [measurementChar, contextChar, racpChar] {
                    _ = try await bluez.call(path, charInterface, "StartNotify")
                }
                try await bluez.write(racpChar, [0x01, 0x01])
                var values: [String] = []
                var connected: Bool?
                while connected != false, let signal = try await next(&changes, "link drop") {
                    let props = signal.arguments[1].dictionary ?? [:]
                    if let value = props["Value"]?.bytes { values.append(hex(value)) }
                    if signal.path == devicePath, let flag = props["Connected"]?.bool { connected = flag }
                }
                #expect(values == [records[0].0, records[0].1!])
                #expect(connected == false)
                let gone = try await next(&removed, "InterfacesRemoved")
                #expect(gone?.arguments.first?.string?.hasPrefix(devicePath + "/service") == true)
                #expect(try await bluez.managedObjects()[racpChar] == nil)
                let error = await #expect(throws: DBusError.self) { try await bluez.read(featureChar) }
                #expect(error?.kind == .remote)
            }
        }

        @Test("the stand-in dies and comes back: owner changes observed, calls fail cleanly, subscriptions follow")
        func standInRestart() async throws {
            try await withBus(standIn: parameters(#"{"requires_pairing": true}"#)) { fixture in
                let bluez = BlueZ(connection: try await fixture.connect())
                defer { bluez.connection.close() }
                var owners = try await bluez.connection.nameOwnerChanges(of: "org.bluez").makeAsyncIterator()
                let firstOwner = try #require(try await next(&owners, "initial owner") ?? nil)
                var deviceChanges = try await bluez.connection.signals(
                    matching: DBusMatchRule(sender: "org.bluez", path: devicePath, member: "PropertiesChanged")
                ).makeAsyncIterator()

                // A call in flight when bluetoothd dies: Pair waits for an agent that never answers.
                let agent = try await bluez.connection.exportObject(at: "/io/sugard/agent")
                let log = AgentLog()
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { await serveAgent(agent, passkeys: [:], seen: log) }
                    _ = try await bluez.call(
                        "/org/bluez", "org.bluez.AgentManager1", "RegisterAgent",
                        [.objectPath("/io/sugard/agent"), .string("KeyboardDisplay")])
                    let connection = bluez.connection
                    let pairing = Task {
                        try await connection.call(
                            destination: "org.bluez", path: devicePath, interface: "org.bluez.Device1", method: "Pair",
                            timeout: .seconds(20))
                    }
                    for _ in 0..<200 where log.all.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
                    #expect(log.all == ["RequestPasskey \(devicePath)"])
                    fixture.killStandIn()

                    let result = await pairing.result
                    if case .failure(let error as DBusError) = result {
                        #expect(error.kind == .remote)
                        #expect(error.name == DBusError.Names.noReply)
                    } else {
                        Issue.record("Pair did not fail when the stand-in died: \(result)")
                    }
                    #expect(try await next(&owners, "owner gone") == .some(nil))
                    let unknown = await #expect(throws: DBusError.self) { try await bluez.managedObjects() }
                    #expect(unknown?.name == DBusError.Names.serviceUnknown)
                    #expect(bluez.connection.isConnected)

                    try await fixture.startStandIn(parameters: fixture.standInParameters)
                    let secondOwner = try #require(try await next(&owners, "owner back") ?? nil)
                    #expect(secondOwner != firstOwner)
                    #expect(try await bluez.managedObjects()[devicePath] != nil)
                    // The subscription made against the first owner now follows the new one.
                    _ = try await bluez.call(devicePath, "org.bluez.Device1", "Connect")
                    // (The restarted stand-in's own start-up changes arrive first; all come from the new owner.)
                    var connected: DBusSignal?
                    while connected == nil, let change = try await next(&deviceChanges, "change from the new owner") {
                        if change.arguments[1].dictionary?["Connected"] != nil { connected = change }
                    }
                    #expect(connected?.sender == secondOwner)
                    #expect(connected?.arguments[1].dictionary?["Connected"]?.bool == true)
                    agent.unexport()
                }
            }
        }
    }
}
