import Locking
import DBus
import Foundation
import Testing
import TestSupport

private let busName = "org.freedesktop.DBus"
private let busPath = "/org/freedesktop/DBus"

/// Serves `/echo` on `connection` until the object is unexported: `Echo` returns its arguments, `Fail`
/// answers with an org.bluez error, `Slow` never answers until `Release` is called.
private func serveEcho(_ object: DBusExportedObject) async {
    var held: [DBusIncomingCall] = []
    for await call in object.calls {
        switch call.member {
        case "Echo":
            try? call.reply(call.arguments)
        case "Signature":
            try? call.reply([.signature(DBusValue.signature(of: call.arguments)), .string(call.sender ?? "")])
        case "Fail":
            call.reply(error: .remote("org.bluez.Error.NotPermitted", "Not paired"))
        case "Slow":
            held.append(call)
        case "Release":
            for slow in held { try? slow.reply([.string("late")]) }
            held = []
            try? call.reply()
        default:
            call.reply(error: .remote(DBusError.Names.unknownMethod, "no \(call.member)"))
        }
    }
}

private let sampleValues: [DBusValue] = [
    .byte(0), .byte(255), .bool(true), .bool(false),
    .int16(-32768), .uint16(65535), .int32(-2_147_483_648), .uint32(4_294_967_295),
    .int64(Int64.min), .uint64(UInt64.max), .double(-1.5e300),
    .string(""), .string("grüße ✓"), .objectPath("/org/bluez/hci0/dev_C0_26_DA_01_02_03"), .signature("a{sv}"),
    .bytes([]), .bytes([0x06, 0x00, 0x01, 0x01]),
    .stringArray(["read", "write", "indicate"]), .stringArray([]),
    .array(elementSignature: "ay", [.bytes([1, 2]), .bytes([])]),
    .vardict(["Value": .bytes([5, 0, 2, 0]), "Notifying": .bool(true), "MTU": .uint16(247)]),
    .dict(keySignature: "q", valueSignature: "v", [DBusDictEntry(.uint16(0x0171), .variant(.bytes([1])))]),
    .variant(.variant(.int32(7))),
    .structure([.string("a"), .uint32(1), .array(elementSignature: "(si)", [.structure([.string("b"), .int32(2)])])]),
    // The GetManagedObjects shape: a{oa{sa{sv}}}
    .dict(
        keySignature: "o", valueSignature: "a{sa{sv}}",
        [
            DBusDictEntry(
                .objectPath("/org/bluez/hci0"),
                .dict(
                    keySignature: "s", valueSignature: "a{sv}",
                    [DBusDictEntry(.string("org.bluez.Adapter1"), .vardict(["Powered": .bool(true)]))]))
        ]),
]

/// Every suite that starts buses and stand-ins runs one test at a time (the CPU is shared and the idle
/// check below looks at the event-loop threads of this process).
@Suite(.serialized) enum DBusIntegration {}

extension DBusIntegration {
    @Suite("D-Bus connection against a private dbus-daemon")
    struct BusTests {
        @Test("calls the bus daemon's own methods")
        func busDaemonMethods() async throws {
            try await withBus { fixture in
                let connection = try await fixture.connect()
                defer { connection.close() }
                #expect(connection.uniqueName.hasPrefix(":"))
                #expect(connection.isConnected)
                let names = try await connection.call(
                    destination: busName, path: busPath, interface: busName, method: "ListNames")
                #expect(names.count == 1)
                #expect(names.first?.strings?.contains(connection.uniqueName) == true)
                let owner = try await connection.call(
                    destination: busName, path: busPath, interface: busName, method: "GetNameOwner",
                    arguments: [.string(busName)])
                #expect(owner == [.string(busName)])
                let id = try await connection.call(destination: busName, path: busPath, interface: busName, method: "GetId")
                #expect(id.first?.string?.count == 32)
            }
        }

        @Test("values round-trip through an object exported by a second connection")
        func echoRoundTrip() async throws {
            try await withBus { fixture in
                let client = try await fixture.connect()
                let server = try await fixture.connect()
                defer {
                    client.close()
                    server.close()
                }
                let object = try await server.exportObject(at: "/echo")
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { await serveEcho(object) }
                    for value in sampleValues {
                        let reply = try await client.call(
                            destination: server.uniqueName, path: "/echo", interface: "io.sugard.Test", method: "Echo",
                            arguments: [value])
                        #expect(reply == [value], "round trip of \(value.signature)")
                    }
                    let all = try await client.call(
                        destination: server.uniqueName, path: "/echo", interface: "io.sugard.Test", method: "Echo",
                        arguments: sampleValues)
                    #expect(all == sampleValues)
                    let signature = try await client.call(
                        destination: server.uniqueName, path: "/echo", interface: "io.sugard.Test", method: "Signature",
                        arguments: sampleValues)
                    #expect(signature == [.signature(DBusValue.signature(of: sampleValues)), .string(client.uniqueName)])
                    object.unexport()
                    group.cancelAll()
                }
            }
        }

        @Test("an array of bytes built element-wise reads back as bytes")
        func byteArrayForms() async throws {
            try await withBus { fixture in
                let client = try await fixture.connect()
                let server = try await fixture.connect()
                defer {
                    client.close()
                    server.close()
                }
                let object = try await server.exportObject(at: "/echo")
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { await serveEcho(object) }
                    let reply = try await client.call(
                        destination: server.uniqueName, path: "/echo", interface: nil, method: "Echo",
                        arguments: [.array(elementSignature: "y", [.byte(1), .byte(2)])])
                    #expect(reply == [.bytes([1, 2])])
                    #expect(reply.first?.bytes == [1, 2])
                    object.unexport()
                }
            }
        }

        @Test("error replies carry the D-Bus error name and message")
        func errorNames() async throws {
            try await withBus { fixture in
                let client = try await fixture.connect()
                let server = try await fixture.connect()
                defer {
                    client.close()
                    server.close()
                }
                let object = try await server.exportObject(at: "/echo")
                await withTaskGroup(of: Void.self) { group in
                    group.addTask { await serveEcho(object) }
                    let error = await #expect(throws: DBusError.self) {
                        try await client.call(
                            destination: server.uniqueName, path: "/echo", interface: "io.sugard.Test", method: "Fail")
                    }
                    #expect(error?.kind == .remote)
                    #expect(error?.name == "org.bluez.Error.NotPermitted")
                    #expect(error?.message == "Not paired")

                    // Nothing is exported at this path: libdbus answers for us.
                    let unknown = await #expect(throws: DBusError.self) {
                        try await client.call(
                            destination: server.uniqueName, path: "/nothing", interface: "io.sugard.Test", method: "X")
                    }
                    #expect(unknown?.kind == .remote)
                    #expect(unknown?.name.hasPrefix("org.freedesktop.DBus.Error.Unknown") == true)

                    let service = await #expect(throws: DBusError.self) {
                        try await client.call(destination: "org.bluez", path: "/", interface: nil, method: "X")
                    }
                    #expect(service?.name == DBusError.Names.serviceUnknown)
                    object.unexport()
                }
            }
        }

        @Test("malformed names and values are refused before they reach libdbus")
        func invalidArguments() async throws {
            try await withBus { fixture in
                let connection = try await fixture.connect()
                defer { connection.close() }
                let bad: [(String, String, String, [DBusValue])] = [
                    ("org.freedesktop.DBus", "no-slash", "Ping", []),
                    ("org.freedesktop.DBus", "/ok", "bad-member", []),
                    ("org.freedesktop.DBus", "/ok", "Ping", [.string("nul\u{0}inside")]),
                    ("org.freedesktop.DBus", "/ok", "Ping", [.objectPath("relative/path")]),
                    ("org.freedesktop.DBus", "/ok", "Ping", [.array(elementSignature: "s", [.int32(1)])]),
                    ("org.freedesktop.DBus", "/ok", "Ping", [.dict(keySignature: "v", valueSignature: "s", [])]),
                    ("org.freedesktop.DBus", "/ok", "Ping", [.structure([])]),
                    ("org.freedesktop.DBus", "/ok", "Ping", [.signature("a{")]),
                    ("bad..name", "/ok", "Ping", []),
                ]
                for (destination, path, method, arguments) in bad {
                    let error = await #expect(throws: DBusError.self) {
                        try await connection.call(
                            destination: destination, path: path, interface: "org.freedesktop.DBus.Peer", method: method,
                            arguments: arguments)
                    }
                    #expect(error?.kind == .invalidArgument)
                }
                // The connection is still fine afterwards.
                _ = try await connection.call(
                    destination: busName, path: busPath, interface: "org.freedesktop.DBus.Peer", method: "Ping")
            }
        }

        @Test("a call without a reply times out, and the late reply is ignored")
        func callTimeout() async throws {
            try await withBus { fixture in
                let client = try await fixture.connect()
                let server = try await fixture.connect()
                defer {
                    client.close()
                    server.close()
                }
                let object = try await server.exportObject(at: "/echo")
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { await serveEcho(object) }
                    let clock = ContinuousClock()
                    let start = clock.now
                    let error = await #expect(throws: DBusError.self) {
                        try await client.call(
                            destination: server.uniqueName, path: "/echo", interface: nil, method: "Slow",
                            timeout: .milliseconds(200))
                    }
                    #expect(error?.kind == .timeout)
                    #expect(error?.name == DBusError.Names.noReply)
                    #expect(clock.now - start >= .milliseconds(150))
                    // Answer the held call now; the client must ignore the stale reply and keep working.
                    _ = try await client.call(destination: server.uniqueName, path: "/echo", interface: nil, method: "Release")
                    let echo = try await client.call(
                        destination: server.uniqueName, path: "/echo", interface: nil, method: "Echo",
                        arguments: [.uint32(9)])
                    #expect(echo == [.uint32(9)])
                    object.unexport()
                }
            }
        }

        @Test("cancelling the calling task ends the call with .cancelled")
        func callCancellation() async throws {
            try await withBus { fixture in
                let client = try await fixture.connect()
                let server = try await fixture.connect()
                defer {
                    client.close()
                    server.close()
                }
                let object = try await server.exportObject(at: "/echo")
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { await serveEcho(object) }
                    let call = Task {
                        try await client.call(destination: server.uniqueName, path: "/echo", interface: nil, method: "Slow")
                    }
                    try await Task.sleep(for: .milliseconds(100))
                    call.cancel()
                    let result = await call.result
                    #expect(throws: DBusError.self) { try result.get() }
                    if case .failure(let error as DBusError) = result { #expect(error.kind == .cancelled) }
                    let echo = try await client.call(
                        destination: server.uniqueName, path: "/echo", interface: nil, method: "Echo",
                        arguments: [.bool(true)])
                    #expect(echo == [.bool(true)])
                    object.unexport()
                }
            }
        }

        @Test("signal subscriptions filter by sender, path namespace, interface and member")
        func signalSubscriptions() async throws {
            try await withBus { fixture in
                let listener = try await fixture.connect()
                let emitter = try await fixture.connect()
                let impostor = try await fixture.connect()
                defer {
                    listener.close()
                    emitter.close()
                    impostor.close()
                }
                #expect(try await emitter.requestName("io.sugard.Emitter"))
                let stream = try await listener.signals(
                    matching: DBusMatchRule(
                        sender: "io.sugard.Emitter", pathNamespace: "/org/bluez/hci0",
                        interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged"))
                var signals = stream.makeAsyncIterator()
                let props = "org.freedesktop.DBus.Properties"
                // Not delivered: wrong sender (impostor), outside the namespace, other member.
                try await impostor.emitSignal(
                    path: "/org/bluez/hci0/dev_1", interface: props, member: "PropertiesChanged", arguments: [.string("x")])
                try await emitter.emitSignal(
                    path: "/org/bluez/hci1", interface: props, member: "PropertiesChanged", arguments: [.string("x")])
                try await emitter.emitSignal(
                    path: "/org/bluez/hci0", interface: props, member: "Other", arguments: [.string("x")])
                for index in 0..<3 {
                    try await emitter.emitSignal(
                        path: "/org/bluez/hci0/dev_1/char\(index)", interface: props, member: "PropertiesChanged",
                        arguments: [.string("org.bluez.GattCharacteristic1"), .vardict(["Value": .bytes([UInt8(index)])]),
                                    .stringArray([])])
                }
                for index in 0..<3 {
                    let signal = try await next(&signals, "signal \(index)")
                    #expect(signal?.path == "/org/bluez/hci0/dev_1/char\(index)")
                    #expect(signal?.sender == emitter.uniqueName)
                    #expect(signal?.arguments.count == 3)
                    #expect(signal?.arguments[1].dictionary?["Value"]?.bytes == [UInt8(index)])
                }
            }
        }

        @Test("name owner changes: current owner first, then each change")
        func nameOwnerWatching() async throws {
            try await withBus { fixture in
                let watcher = try await fixture.connect()
                defer { watcher.close() }
                var owners = try await watcher.nameOwnerChanges(of: "io.sugard.Watched").makeAsyncIterator()
                let first = try await next(&owners, "initial owner")
                #expect(first == .some(nil))
                let owner = try await fixture.connect()
                #expect(try await owner.requestName("io.sugard.Watched"))
                #expect(try await next(&owners, "new owner") == .some(owner.uniqueName))
                owner.close()
                #expect(try await next(&owners, "owner gone") == .some(nil))
            }
        }

        @Test("the bus going away ends the connection without exiting the process; reconnecting works")
        func busDisappears() async throws {
            try await withBus { fixture in
                let client = try await fixture.connect()
                let server = try await fixture.connect()
                let object = try await server.exportObject(at: "/echo")
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { await serveEcho(object) }
                    let signals = try await client.signals(matching: DBusMatchRule(interface: "io.sugard.Test"))
                    let pending = Task {
                        try await client.call(destination: server.uniqueName, path: "/echo", interface: nil, method: "Slow")
                    }
                    try await Task.sleep(for: .milliseconds(100))
                    fixture.killBus()
                    try await within(10, "disconnect notification") { await client.waitUntilDisconnected() }
                    #expect(!client.isConnected)
                    let result = await pending.result
                    if case .failure(let error as DBusError) = result {
                        #expect(error.kind == .disconnected)
                    } else {
                        Issue.record("the call in flight did not fail: \(result)")
                    }
                    // The signal stream finishes.
                    var iterator = signals.makeAsyncIterator()
                    #expect(try await next(&iterator, "stream end") == nil)
                    // New work fails cleanly.
                    let error = await #expect(throws: DBusError.self) {
                        try await client.call(destination: busName, path: busPath, interface: busName, method: "GetId")
                    }
                    #expect(error?.kind == .disconnected)
                    await #expect(throws: DBusError.self) {
                        try await client.emitSignal(path: "/x", interface: "io.sugard.Test", member: "Gone")
                    }
                    await #expect(throws: DBusError.self) { try await client.exportObject(at: "/y") }
                    try await within(10, "server stream end") { await server.waitUntilDisconnected() }
                    group.cancelAll()
                }
                // A new bus on the same socket: connect again.
                try fixture.startBus()
                let again = try await fixture.connect()
                defer { again.close() }
                let names = try await again.call(destination: busName, path: busPath, interface: busName, method: "ListNames")
                #expect(names.first?.strings?.contains(again.uniqueName) == true)
            }
        }

        @Test("close() ends the connection and fails later calls")
        func closeConnection() async throws {
            try await withBus { fixture in
                let connection = try await fixture.connect()
                connection.close()
                try await within(10, "close") { await connection.waitUntilDisconnected() }
                let error = await #expect(throws: DBusError.self) {
                    try await connection.call(destination: busName, path: busPath, interface: busName, method: "GetId")
                }
                #expect(error?.kind == .disconnected)
            }
        }

        @Test("exporting the same path twice is refused")
        func doubleExport() async throws {
            try await withBus { fixture in
                let connection = try await fixture.connect()
                defer { connection.close() }
                let object = try await connection.exportObject(at: "/agent")
                let error = await #expect(throws: DBusError.self) { try await connection.exportObject(at: "/agent") }
                #expect(error?.kind == .invalidState)
                object.unexport()
                // After unexport (processed on the loop), the path can be exported again.
                var again: DBusExportedObject?
                for _ in 0..<50 where again == nil {
                    again = try? await connection.exportObject(at: "/agent")
                    if again == nil { try await Task.sleep(for: .milliseconds(10)) }
                }
                #expect(again != nil)
            }
        }

        @Test("connecting to a bus that does not exist fails with .connectionFailed")
        func connectFailure() async throws {
            let error = await #expect(throws: DBusError.self) {
                try await DBusConnection.connect(to: .address("unix:path=/tmp/sgd-no-such-bus/socket"))
            }
            #expect(error?.kind == .connectionFailed)
            #expect(error?.message.contains("sgd-no-such-bus") == true)
        }

        @Test("connecting to .system honours DBUS_SYSTEM_BUS_ADDRESS")
        func systemBusFromEnvironment() async throws {
            try await withBus { fixture in
                // The suite is serialized and the fixtures pass explicit environments to their processes.
                setenv("DBUS_SYSTEM_BUS_ADDRESS", fixture.address, 1)
                defer { unsetenv("DBUS_SYSTEM_BUS_ADDRESS") }
                let connection = try await DBusConnection.connect(to: .system)
                defer { connection.close() }
                let names = try await connection.call(
                    destination: busName, path: busPath, interface: busName, method: "ListNames")
                #expect(names.first?.strings?.contains(connection.uniqueName) == true)
            }
        }

        @Test("an idle connection's event-loop thread sleeps in poll (no periodic wake-ups)")
        func idleLoopSleeps() async throws {
            try await withBus { fixture in
                let before = loopThreads()
                let connection = try await fixture.connect()
                defer { connection.close() }
                // A subscription and an exported object must not make the loop spin either.
                let signals = try await connection.signals(matching: DBusMatchRule(interface: "io.sugard.Idle"))
                let object = try await connection.exportObject(at: "/idle")
                let mine = loopThreads().subtracting(before)
                #expect(!mine.isEmpty)
                // Let the loop finish the iteration that answered the last request and block in poll.
                try await Task.sleep(for: .milliseconds(200))
                let start = mine.map { switches(of: $0) }
                try await Task.sleep(for: .milliseconds(500))
                let end = mine.map { switches(of: $0) }
                #expect(start == end, "context switches of the idle loop thread: \(start) -> \(end)")
                // And it still wakes up for work.
                let id = try await connection.call(destination: busName, path: busPath, interface: busName, method: "GetId")
                #expect(id.count == 1)
                _ = signals
                object.unexport()
            }
        }
    }
}

/// Thread ids of this process's event-loop threads (named by the DBus module).
private func loopThreads() -> Set<String> {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return Set(tasks.filter { tid in
        let comm = (try? String(contentsOfFile: "/proc/self/task/\(tid)/comm", encoding: .utf8)) ?? ""
        return comm.trimmingCharacters(in: .whitespacesAndNewlines) == "sugard-dbus"
    })
}

/// Voluntary context switches of one thread so far (each time it blocks, e.g. returns to poll).
private func switches(of tid: String) -> Int {
    let status = (try? String(contentsOfFile: "/proc/self/task/\(tid)/status", encoding: .utf8)) ?? ""
    return status.split(separator: "\n").filter { $0.hasPrefix("voluntary_ctxt_switches") }
        .compactMap { Int($0.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "") }
        .reduce(0, +)
}
