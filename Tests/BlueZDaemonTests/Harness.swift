import DBus
import Foundation
import Glibc
import JSON
import Locking
import Testing
import Varlink

/// The whole daemon against the BlueZ stand-in: a private system-like dbus-daemon, the stand-in
/// (dbusmock + Tests/Support/bluez-standin/glucose_meter.py) and the built `sugard`, all in one short
/// temp dir. `withRig` always kills every process it started, also when the test fails.
final class Rig: @unchecked Sendable {
    // @unchecked: the mutable process handles are only touched by the one test that owns the rig,
    // one step at a time (start, use, stop).
    static let supportDir: String = {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        return here.deletingLastPathComponent().appendingPathComponent("Support/bluez-standin").path
    }()

    static let varlinkInterface = "io.sugard.HealthDataSync."

    let dir: String
    private(set) var busAddress = ""
    private var bus: Child?
    private var standIn: Child?
    private var daemon: Child?
    private(set) var standInParameters = "{}"
    private var probe: DBusConnection?

    var socketPath: String { self.dir + "/s.sock" }
    var stateDir: String { self.dir + "/state" }
    var databasePath: String { self.stateDir + "/sugard.sqlite" }
    var daemonPID: pid_t? { self.daemon?.pid }

    init() throws {
        var template = Array("/tmp/sbz-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw RigError("mkdtemp failed") }
        self.dir = String(cString: made)
    }

    // MARK: Bus and stand-in

    func startBus() async throws {
        let config = try String(contentsOfFile: Self.supportDir + "/bus.conf.in", encoding: .utf8)
            .replacingOccurrences(of: "@SOCKET@", with: self.dir + "/bus.sock")
        try config.write(toFile: self.dir + "/bus.conf", atomically: true, encoding: .utf8)
        var fds: [Int32] = [-1, -1]
        guard pipe2(&fds, O_CLOEXEC) == 0 else { throw RigError("pipe2 failed") }
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
            guard read(fds[0], &byte, 1) == 1 else { throw RigError("dbus-daemon exited before printing its address") }
            line.append(byte)
        }
        self.busAddress = String(decoding: line.dropLast(), as: UTF8.self)
        self.probe = try await DBusConnection.connect(to: .address(self.busAddress))
    }

    /// Starts the stand-in and waits until it serves org.bluez.
    func startStandIn(_ parameters: String) async throws {
        self.standInParameters = parameters
        let log = open(self.dir + "/standin.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard log >= 0 else { throw RigError("cannot open the stand-in log") }
        defer { close(log) }
        let process = try Child(
            "/usr/bin/python3",
            ["-m", "dbusmock", "--system", "--template", Self.supportDir + "/glucose_meter.py", "-p", parameters],
            environment: ["PATH": "/usr/bin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": self.busAddress], stdout: log, stderr: log)
        self.standIn = process
        let probe = try self.bluezProbe()
        for _ in 0..<1500 {
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
        throw RigError("the stand-in did not take org.bluez; log:\n\(self.standInLog)")
    }

    /// SIGKILL, like bluetoothd crashing.
    func killStandIn() {
        self.standIn?.kill()
        self.standIn = nil
    }

    var standInLog: String { Self.tail(self.dir + "/standin.log") }

    private func bluezProbe() throws -> DBusConnection {
        guard let probe = self.probe else { throw RigError("the bus is not running") }
        return probe
    }

    /// Calls a method of the stand-in (org.bluez).
    func bluez(_ path: String, _ interface: String, _ method: String, _ arguments: [DBusValue] = []) async throws
        -> [DBusValue]
    {
        try await self.bluezProbe().call(
            destination: "org.bluez", path: path, interface: interface, method: method, arguments: arguments,
            timeout: .seconds(20))
    }

    /// Calls a control method of the stand-in (org.bluez.Mock at /).
    @discardableResult
    func mock(_ method: String, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await self.bluez("/", "org.bluez.Mock", method, arguments)
    }

    /// GetGlucoseMeterState as JSON.
    func meterState(_ address: String) async throws -> JSONValue {
        let text = try #require(try await self.mock("GetGlucoseMeterState", [.string(address)]).first?.string)
        return try JSONValue(parsing: text)
    }

    /// The calls the stand-in logged for a method of one of its objects (dbusmock's GetMethodCalls).
    func methodCalls(_ path: String, _ method: String) async throws -> [DBusValue] {
        let reply = try await self.bluez(path, "org.freedesktop.DBus.Mock", "GetMethodCalls", [.string(method)])
        return reply.first?.array ?? []
    }

    func deviceProperty(_ address: String, _ name: String) async throws -> DBusValue? {
        let path = "/org/bluez/hci0/dev_" + address.replacingOccurrences(of: ":", with: "_")
        return try await self.bluez(
            path, "org.freedesktop.DBus.Properties", "Get", [.string("org.bluez.Device1"), .string(name)]
        ).first?.unwrapped
    }

    // MARK: The daemon

    /// Starts the built sugard with the private bus as its system bus and waits until its socket answers.
    /// - Parameter notifySocket: a datagram socket path for sd_notify (READY=1), when the test wants it.
    func startDaemon(config: [String] = [], notifySocket: String? = nil) async throws {
        var lines = ["log_level = debug"]
        lines += config
        try (lines.joined(separator: "\n") + "\n").write(toFile: self.dir + "/sugard.conf", atomically: true, encoding: .utf8)
        let log = open(self.dir + "/sugard.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard log >= 0 else { throw RigError("cannot open the daemon log") }
        defer { close(log) }
        var environment = [
            "PATH": "/usr/bin:/bin", "HOME": self.dir, "TZ": "UTC", "DBUS_SYSTEM_BUS_ADDRESS": self.busAddress,
        ]
        if let notifySocket { environment["NOTIFY_SOCKET"] = notifySocket }
        let child = try Child(
            try builtProduct("sugard"),
            ["--config", self.dir + "/sugard.conf", "--state-dir", self.stateDir, "--socket", self.socketPath],
            environment: environment, stdout: log, stderr: log)
        self.daemon = child
        for _ in 0..<1500 {
            if let client = try? VarlinkClient(socketPath: self.socketPath) {
                defer { client.close() }
                if (try? await client.call(Self.varlinkInterface + "GetStatus")) != nil { return }
            }
            guard child.isRunning else { throw RigError("sugard exited at start; log:\n\(self.daemonLog)") }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw RigError("sugard did not answer on \(self.socketPath) within 30 s; log:\n\(self.daemonLog)")
    }

    var daemonRunning: Bool { self.daemon?.isRunning ?? false }

    /// SIGTERM and wait for the exit status (SIGKILL after `seconds`).
    func stopDaemon(seconds: Int = 20) async -> Int32? {
        guard let daemon = self.daemon else { return nil }
        self.daemon = nil
        return await daemon.terminate(graceSeconds: seconds)
    }

    var daemonLog: String { Self.tail(self.dir + "/sugard.log") }

    /// Runs the built sugarctl against the daemon's socket.
    func sugarctl(_ arguments: [String], seconds: Int = 60) async throws -> ProcessResult {
        try await runToEnd(
            try builtProduct("sugarctl"), arguments + ["--socket", self.socketPath],
            environment: ["PATH": "/usr/bin:/bin", "HOME": self.dir, "TZ": "UTC"], dir: self.dir, seconds: seconds)
    }

    // MARK: Varlink

    func call(_ method: String, _ parameters: JSONObject = [:], seconds: Int = 60) async throws -> JSONObject {
        let client = try VarlinkClient(socketPath: self.socketPath)
        defer { client.close() }
        return try await within(seconds, method) { try await client.call(Self.varlinkInterface + method, parameters) }
    }

    /// The view model (`GetStatus().state`).
    func state() async throws -> JSONValue {
        try #require(try await self.call("GetStatus")["state"])
    }

    /// The meter's model from GetStatus, or nil when the daemon does not know it.
    func meter(_ id: String) async throws -> JSONValue? {
        try await self.state()["meters"]?.arrayValue?.first { $0["id"]?.stringValue == id }
    }

    /// Stored readings of one meter (oldest first).
    func readings(_ meter: String) async throws -> [JSONValue] {
        try await self.call("ListReadings", ["meter": .string(meter), "limit": 10_000])["readings"]?.arrayValue ?? []
    }

    /// Recorded sync sessions of one meter, newest first.
    func sessions(_ meter: String) async throws -> [JSONValue] {
        try await self.call("ListSyncSessions", ["meter": .string(meter)])["sessions"]?.arrayValue ?? []
    }

    /// Varlink Sync (no `more`): the sessions when the sync ended.
    func sync(_ meter: String, force: Bool = true, seconds: Int = 60) async throws -> [JSONValue] {
        try await self.call("Sync", ["meter": .string(meter), "force": .bool(force)], seconds: seconds)["sessions"]?
            .arrayValue ?? []
    }

    /// Polls `condition` until it holds; fails with the logs after `seconds`.
    func waitUntil(
        _ what: String, seconds: Int = 30, _ condition: () async throws -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + .seconds(seconds)
        var lastError: (any Error)?
        while ContinuousClock.now < deadline {
            do {
                if try await condition() { return }
            } catch {
                lastError = error
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw RigError(
            "waited \(seconds) s for \(what)\(lastError.map { " (last error: \($0))" } ?? "")\n"
                + "--- sugard log:\n\(self.daemonLog)\n--- stand-in log:\n\(self.standInLog)")
    }

    // MARK: Teardown

    func stop() async {
        if let daemon = self.daemon {
            self.daemon = nil
            _ = await daemon.terminate(graceSeconds: 10)
        }
        self.killStandIn()
        self.probe?.close()
        self.probe = nil
        self.bus?.kill()
        self.bus = nil
        try? FileManager.default.removeItem(atPath: self.dir)
    }

    static func tail(_ path: String, bytes: Int = 12_000) -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return "(no log)" }
        return String(text.suffix(bytes))
    }
}

/// Runs `body` with a bus, the stand-in (when `standIn` is given) and the daemon (when `daemon`); always
/// tears everything down.
func withRig(
    standIn parameters: String?, daemon: Bool = true, config: [String] = [],
    _ body: (Rig) async throws -> Void
) async throws {
    let rig = try Rig()
    do {
        try await rig.startBus()
        if let parameters { try await rig.startStandIn(parameters) }
        if daemon { try await rig.startDaemon(config: config) }
        try await body(rig)
    } catch {
        await rig.stop()
        throw error
    }
    await rig.stop()
}

/// `.build/debug/<name>`, next to the test bundle.
func builtProduct(_ name: String) throws -> String {
    var candidates: [String] = []
    let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    candidates.append(testBinary.deletingLastPathComponent().appendingPathComponent(name).path)
    let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    candidates.append(packageRoot.appendingPathComponent(".build/debug/" + name).path)
    guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
        throw RigError("\(name) is not built; run `swift build` first (looked in \(candidates))")
    }
    return found
}

struct ProcessResult: Sendable {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs a program to its end (stdout and stderr through files in `dir`), polling for its exit.
func runToEnd(
    _ path: String, _ arguments: [String], environment: [String: String], dir: String, seconds: Int
) async throws -> ProcessResult {
    let stamp = UInt64.random(in: 0...UInt64.max)
    let outPath = dir + "/out-\(stamp)"
    let errPath = dir + "/err-\(stamp)"
    let out = open(outPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    let err = open(errPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    defer {
        close(out)
        close(err)
        unlink(outPath)
        unlink(errPath)
    }
    let child = try Child(path, arguments, environment: environment, stdout: out, stderr: err)
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if let status = child.exitStatus {
            return ProcessResult(
                status: status, stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
                stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
        }
        try await Task.sleep(for: .milliseconds(20))
    }
    child.kill()
    throw RigError("\(path) \(arguments.joined(separator: " ")) did not end within \(seconds) s")
}

// glibc declares these only under _GNU_SOURCE, which Swift's Glibc module does not define.
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
private func spawnActionsAddCloseFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) -> Int32
@_silgen_name("pipe2")
private func pipe2(_ fds: UnsafeMutablePointer<Int32>, _ flags: Int32) -> Int32

/// A child process started with posix_spawn (not Foundation's Process, which hangs here: its exit monitor
/// mistakes dbus-daemon closing inherited descriptors for an exit). The child gets stdin, stdout and
/// stderr only; stdin is /dev/null.
final class Child: @unchecked Sendable {
    // @unchecked: the reaped flag sits behind a mutex; the pid never changes.
    let pid: pid_t
    private let status = Lock<Int32?>(nil)

    init(_ path: String, _ arguments: [String], environment: [String: String], stdout: Int32?, stderr: Int32?) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if let stdout { posix_spawn_file_actions_adddup2(&actions, stdout, 1) }
        if let stderr { posix_spawn_file_actions_adddup2(&actions, stderr, 2) }
        _ = spawnActionsAddCloseFrom(&actions, 3)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.merging(sanitizerEnvironment()) { own, _ in own }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, nil, argv, envp)
        guard result == 0 else { throw RigError("posix_spawn \(path) failed: \(result)") }
        self.pid = pid
    }

    /// The exit status (128 + signal when killed) once the child ended; nil while it runs.
    var exitStatus: Int32? {
        self.status.withLock { status in
            if let status { return status }
            var raw: Int32 = 0
            guard waitpid(self.pid, &raw, WNOHANG) == self.pid else { return nil }
            let signal = raw & 0x7f
            status = signal == 0 ? (raw >> 8) & 0xff : 128 + signal
            return status
        }
    }

    var isRunning: Bool { self.exitStatus == nil }

    /// SIGKILL and reap.
    func kill() {
        guard self.isRunning else { return }
        Glibc.kill(self.pid, SIGKILL)
        self.status.withLock { status in
            guard status == nil else { return }
            var raw: Int32 = 0
            while waitpid(self.pid, &raw, 0) < 0 && errno == EINTR {}
            status = 128 + SIGKILL
        }
    }

    /// SIGTERM, then SIGKILL after `graceSeconds`; the exit status.
    func terminate(graceSeconds: Int) async -> Int32? {
        guard self.isRunning else { return self.exitStatus }
        Glibc.kill(self.pid, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(graceSeconds)
        while ContinuousClock.now < deadline {
            if let status = self.exitStatus { return status }
            try? await Task.sleep(for: .milliseconds(20))
        }
        self.kill()
        return nil
    }

    deinit { self.kill() }
}

struct RigError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Fails instead of hanging when `operation` takes longer than `seconds`.
func within<T: Sendable>(
    _ seconds: Int, _ what: String, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw RigError("\(what) did not finish within \(seconds) s")
        }
        return value
    }
}

/// The sanitizer settings of this test process (`scripts/sanitize` exports them), handed to child
/// processes so a sanitized child uses the same suppressions and exit codes.
func sanitizerEnvironment() -> [String: String] {
    var found: [String: String] = [:]
    for name in ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS", "UBSAN_OPTIONS", "SWIFT_BACKTRACE"] {
        if let value = getenv(name) { found[name] = String(cString: value) }
    }
    return found
}
