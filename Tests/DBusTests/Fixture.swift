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
    private var bus: Child?
    private var standIn: Child?
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
        var fds: [Int32] = [-1, -1]
        guard pipe2(&fds, O_CLOEXEC) == 0 else { throw FixtureError("pipe2 failed") }
        defer { close(fds[0]) }
        let child: Child
        do {
            child = try Child(
                "/usr/bin/dbus-daemon", ["--config-file=\(self.dir)/bus.conf", "--nofork", "--print-address=1"],
                environment: ["PATH": "/usr/bin:/bin"], stdout: fds[1], stderr: nil)
        } catch {
            close(fds[1])
            throw error
        }
        close(fds[1])
        self.bus = child
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while byte != UInt8(ascii: "\n") {
            guard read(fds[0], &byte, 1) == 1 else { throw FixtureError("dbus-daemon exited before printing its address") }
            line.append(byte)
        }
        self.address = String(decoding: line.dropLast(), as: UTF8.self)
    }

    /// Kills the bus daemon (SIGKILL: it vanishes the way a crashed bus would).
    func killBus() {
        self.bus?.kill()
        self.bus = nil
    }

    /// Starts the stand-in and waits until it owns org.bluez.
    func startStandIn(parameters: String) async throws {
        self.standInParameters = parameters
        let log = open(self.dir + "/standin.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard log >= 0 else { throw FixtureError("cannot open the stand-in log") }
        defer { close(log) }
        let process = try Child(
            "/usr/bin/python3",
            ["-m", "dbusmock", "--system", "--template", Self.supportDir + "/glucose_meter.py", "-p", parameters],
            environment: ["PATH": "/usr/bin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": self.address], stdout: log, stderr: log)
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


    /// Kills the stand-in with SIGKILL, like bluetoothd crashing.
    func killStandIn() {
        self.standIn?.kill()
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

// glibc declares these only under _GNU_SOURCE, which Swift's Glibc module does not define.
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
private func spawnActionsAddCloseFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) -> Int32
@_silgen_name("pipe2")
private func pipe2(_ fds: UnsafeMutablePointer<Int32>, _ flags: Int32) -> Int32

/// A child process started with posix_spawn. (Not Foundation's Process: its exit monitor treats the
/// inherited socket being closed as the child's exit and then blocks in waitpid on the still-running
/// dbus-daemon, which closes inherited descriptors, hanging every later waitUntilExit.) The child gets only
/// stdin, stdout and stderr: every other descriptor is closed in it.
final class Child: @unchecked Sendable {
    // @unchecked: owned by one fixture, used by one test at a time.
    let pid: pid_t
    private var reaped = false

    init(_ path: String, _ arguments: [String], environment: [String: String], stdout: Int32?, stderr: Int32?) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let stdout { posix_spawn_file_actions_adddup2(&actions, stdout, 1) }
        if let stderr { posix_spawn_file_actions_adddup2(&actions, stderr, 2) }
        _ = spawnActionsAddCloseFrom(&actions, 3)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, nil, argv, envp)
        guard result == 0 else { throw FixtureError("posix_spawn \(path) failed: \(result)") }
        self.pid = pid
    }

    var isRunning: Bool {
        guard !self.reaped else { return false }
        var status: Int32 = 0
        if waitpid(self.pid, &status, WNOHANG) == self.pid { self.reaped = true }
        return !self.reaped
    }

    /// SIGKILL and reap.
    func kill() {
        guard !self.reaped else { return }
        Glibc.kill(self.pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(self.pid, &status, 0) < 0 && errno == EINTR {}
        self.reaped = true
    }

    deinit { self.kill() }
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
