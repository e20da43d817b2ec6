import DBus
import Foundation
import Testing

/// A private system-like dbus-daemon (and optionally the BlueZ stand-in) in a short temp dir. Every
/// process it starts is killed by `stop()`, which `withBus` always calls, also when the test fails.
final class BusFixture: @unchecked Sendable {
    // @unchecked: the mutable process handles are only touched by the test that owns the fixture, one
    // step at a time (start, use, stop); no two tasks use a fixture concurrently.
    static let supportDir: String = {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        return here.deletingLastPathComponent().appendingPathComponent("Support/bluez-standin").path
    }()

    let dir: String
    private(set) var address = ""
    private var bus: Process?
    private var standIn: Process?
    private(set) var standInParameters = "{}"

    init() throws {
        var template = Array("/tmp/sgd-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw FixtureError("mkdtemp failed") }
        self.dir = String(cString: made)
        try self.startBus()
    }

    /// Starts (or restarts, on the same socket path) the bus daemon.
    func startBus() throws {
        let config = try String(contentsOfFile: Self.supportDir + "/bus.conf.in", encoding: .utf8)
            .replacingOccurrences(of: "@SOCKET@", with: self.dir + "/bus.sock")
        try config.write(toFile: self.dir + "/bus.conf", atomically: true, encoding: .utf8)
        try? FileManager.default.removeItem(atPath: self.dir + "/bus.sock")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = ["--config-file=\(self.dir)/bus.conf", "--nofork", "--print-address=1"]
        process.environment = ["PATH": "/usr/bin:/bin"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.bus = process
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = pipe.fileHandleForReading.availableData
            if chunk.isEmpty { throw FixtureError("dbus-daemon exited before printing its address") }
            line.append(chunk)
        }
        self.address = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Kills the bus daemon (SIGKILL: it vanishes the way a crashed bus would).
    func killBus() {
        guard let bus = self.bus else { return }
        kill(bus.processIdentifier, SIGKILL)
        bus.waitUntilExit()
        self.bus = nil
    }

    /// Starts the stand-in and waits until it owns org.bluez.
    func startStandIn(parameters: String) async throws {
        self.standInParameters = parameters
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [
            "-m", "dbusmock", "--system", "--template", Self.supportDir + "/glucose_meter.py", "-p", parameters,
        ]
        process.environment = ["PATH": "/usr/bin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": self.address]
        let log = self.dir + "/standin.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        handle.seekToEndOfFile()
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        self.standIn = process
        let probe = try await DBusConnection.connect(to: .address(self.address))
        defer { probe.close() }
        for _ in 0..<500 {
            let owned = try await probe.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                method: "NameHasOwner", arguments: [.string("org.bluez")])
            // The name is taken before the template has loaded; an answered call means it is serving.
            if owned.first?.bool == true,
                (try? await probe.call(
                    destination: "org.bluez", path: "/", interface: "org.freedesktop.DBus.ObjectManager",
                    method: "GetManagedObjects", timeout: .seconds(5))) != nil
            {
                return
            }
            if !process.isRunning { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw FixtureError("the stand-in did not take org.bluez; log: \(self.standInLog)")
    }

    var standInLog: String { (try? String(contentsOfFile: self.dir + "/standin.log", encoding: .utf8)) ?? "" }

    var standInPID: Int32? { self.standIn?.processIdentifier }

    /// Kills the stand-in with SIGKILL, like bluetoothd crashing.
    func killStandIn() {
        guard let standIn = self.standIn else { return }
        kill(standIn.processIdentifier, SIGKILL)
        standIn.waitUntilExit()
        self.standIn = nil
    }

    func stop() {
        self.killStandIn()
        self.killBus()
        try? FileManager.default.removeItem(atPath: self.dir)
    }

    func connect() async throws -> DBusConnection {
        try await DBusConnection.connect(to: .address(self.address))
    }
}

struct FixtureError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Runs `body` with a fresh bus (and the stand-in when `standIn` parameters are given); always tears down.
func withBus<T>(
    standIn parameters: String? = nil, _ body: (BusFixture) async throws -> T
) async throws -> T {
    let fixture = try BusFixture()
    defer { fixture.stop() }
    if let parameters { try await fixture.startStandIn(parameters: parameters) }
    return try await body(fixture)
}

/// Fails the test instead of hanging when `operation` takes longer than `seconds`.
func within<T: Sendable>(
    _ seconds: Int = 10, _ what: String, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw FixtureError("\(what) did not finish within \(seconds) s")
        }
        return value
    }
}

/// Pulls the next element of an async iterator, failing after `seconds` instead of hanging.
func next<Element: Sendable>(
    _ iterator: inout AsyncStream<Element>.Iterator, _ what: String, seconds: Int = 10
) async throws -> Element? {
    // AsyncStream.Iterator is not Sendable; poll it through a task that owns a moved copy.
    let box = IteratorBox(iterator)
    defer { iterator = box.iterator }
    return try await within(seconds, what) { await box.next() }
}

final class IteratorBox<Element: Sendable>: @unchecked Sendable {
    // @unchecked: used by one task at a time (the caller awaits `within`, which awaits this).
    var iterator: AsyncStream<Element>.Iterator
    init(_ iterator: AsyncStream<Element>.Iterator) { self.iterator = iterator }
    func next() async -> Element? { await self.iterator.next() }
}
