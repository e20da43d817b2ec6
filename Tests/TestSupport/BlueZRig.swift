import DBus
import Foundation
import Glibc
import JSON
import Varlink

/// The whole daemon against the BlueZ stand-in: a private system-like dbus-daemon, the stand-in
/// (dbusmock + Tests/Support/bluez-standin/glucose_meter.py) and the built `sugard`, all in one short
/// temp dir. `withRig` always kills every process it started, also when the test fails.
package final class Rig: @unchecked Sendable {
    // @unchecked: the mutable process handles are only touched by the one test that owns the rig,
    // one step at a time (start, use, stop).
    package static let varlinkInterface = "io.sugard.HealthDataSync."

    package let dir: String
    private var daemon: Child?
    private var probe: DBusConnection?

    package var socketPath: String { self.dir + "/s.sock" }
    package var stateDir: String { self.dir + "/state" }
    package var databasePath: String { self.stateDir + "/sugard.sqlite" }
    /// Leave the directory (logs, database) in place at `stop()`, for a look after a failure.
    package var keepDirectory = false
    package var daemonPID: pid_t? { self.daemon?.pid }

    package init() throws {
        var template = Array("/tmp/sbz-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw RigError("mkdtemp failed") }
        self.dir = String(cString: made)
        self.bus = PrivateBus(dir: self.dir)
    }

    // MARK: Bus and stand-in

    /// The private bus and the stand-in on it.
    package let bus: PrivateBus
    package var busAddress: String { self.bus.address }
    package var standInParameters: String { self.bus.standInParameters }

    package func startBus() async throws {
        try self.bus.start()
        self.probe = try await self.bus.connect()
    }

    /// Starts the stand-in and waits until it serves org.bluez.
    package func startStandIn(_ parameters: String) async throws { try await self.bus.startStandIn(parameters) }

    /// SIGKILL, like bluetoothd crashing.
    package func killStandIn() { self.bus.killStandIn() }

    package var standInLog: String { self.bus.standInLog }

    private func bluezProbe() throws -> DBusConnection {
        guard let probe = self.probe else { throw RigError("the bus is not running") }
        return probe
    }

    /// Calls a method of the stand-in (org.bluez).
    package func bluez(_ path: String, _ interface: String, _ method: String, _ arguments: [DBusValue] = []) async throws
        -> [DBusValue]
    {
        try await self.bluezProbe().call(
            destination: "org.bluez", path: path, interface: interface, method: method, arguments: arguments,
            timeout: .seconds(20))
    }

    /// Calls a control method of the stand-in (org.bluez.Mock at /).
    @discardableResult
    package func mock(_ method: String, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await self.bluez("/", "org.bluez.Mock", method, arguments)
    }

    /// GetGlucoseMeterState as JSON.
    package func meterState(_ address: String) async throws -> JSONValue {
        guard let text = try await self.mock("GetGlucoseMeterState", [.string(address)]).first?.string else {
            throw RigError("GetGlucoseMeterState(\(address)) returned no text")
        }
        return try JSONValue(parsing: text)
    }

    /// The calls the stand-in logged for a method of one of its objects (dbusmock's GetMethodCalls).
    package func methodCalls(_ path: String, _ method: String) async throws -> [DBusValue] {
        let reply = try await self.bluez(path, "org.freedesktop.DBus.Mock", "GetMethodCalls", [.string(method)])
        return reply.first?.array ?? []
    }

    package func deviceProperty(_ address: String, _ name: String) async throws -> DBusValue? {
        let path = "/org/bluez/hci0/dev_" + address.replacingOccurrences(of: ":", with: "_")
        return try await self.bluez(
            path, "org.freedesktop.DBus.Properties", "Get", [.string("org.bluez.Device1"), .string(name)]
        ).first?.unwrapped
    }

    // MARK: The daemon

    /// Starts the built sugard with the private bus as its system bus and waits until its socket answers.
    /// - Parameter notifySocket: a datagram socket path for sd_notify (READY=1), when the test wants it.
    package func startDaemon(config: [String] = [], notifySocket: String? = nil) async throws {
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

    package var daemonRunning: Bool { self.daemon?.isRunning ?? false }

    /// The running daemon process (for its descriptors and memory), nil when none was started.
    package var daemonProcess: Child? { self.daemon }

    /// SIGKILL, like a crash or the OOM killer; the next `startDaemon` starts a fresh one.
    package func killDaemon() {
        self.daemon?.kill()
        self.daemon = nil
    }

    /// Whether the stand-in (bluetoothd) process is running.
    package var standInRunning: Bool { self.bus.standInRunning }

    /// SIGTERM and wait for the exit status (SIGKILL after `seconds`).
    package func stopDaemon(seconds: Int = 20) async -> Int32? {
        guard let daemon = self.daemon else { return nil }
        self.daemon = nil
        return await daemon.terminate(graceSeconds: seconds)
    }

    package var daemonLog: String { tail(self.dir + "/sugard.log") }

    /// Runs the built sugarctl against the daemon's socket.
    package func sugarctl(_ arguments: [String], seconds: Int = 60) async throws -> ProcessResult {
        try await runToEnd(
            try builtProduct("sugarctl"), arguments + ["--socket", self.socketPath],
            environment: ["PATH": "/usr/bin:/bin", "HOME": self.dir, "TZ": "UTC"], dir: self.dir, seconds: seconds)
    }

    // MARK: Varlink

    package func call(_ method: String, _ parameters: JSONObject = [:], seconds: Int = 60) async throws -> JSONObject {
        let client = try VarlinkClient(socketPath: self.socketPath)
        defer { client.close() }
        return try await within(seconds, method) { try await client.call(Self.varlinkInterface + method, parameters) }
    }

    /// The view model (`GetStatus().state`).
    package func state() async throws -> JSONValue {
        guard let state = try await self.call("GetStatus")["state"] else { throw RigError("GetStatus returned no state") }
        return state
    }

    /// The meter's model from GetStatus, or nil when the daemon does not know it.
    package func meter(_ id: String) async throws -> JSONValue? {
        try await self.state()["meters"]?.arrayValue?.first { $0["id"]?.stringValue == id }
    }

    /// Stored readings of one meter (oldest first).
    package func readings(_ meter: String) async throws -> [JSONValue] {
        try await self.call("ListReadings", ["meter": .string(meter), "limit": 10_000])["readings"]?.arrayValue ?? []
    }

    /// Recorded sync sessions of one meter, newest first.
    package func sessions(_ meter: String) async throws -> [JSONValue] {
        try await self.call("ListSyncSessions", ["meter": .string(meter)])["sessions"]?.arrayValue ?? []
    }

    /// Varlink Sync (no `more`): the sessions when the sync ended.
    package func sync(_ meter: String, force: Bool = true, seconds: Int = 60) async throws -> [JSONValue] {
        try await self.call("Sync", ["meter": .string(meter), "force": .bool(force)], seconds: seconds)["sessions"]?
            .arrayValue ?? []
    }

    /// Polls `condition` until it holds; fails with the logs after `seconds`.
    package func waitUntil(
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

    package func stop() async {
        if let daemon = self.daemon {
            self.daemon = nil
            _ = await daemon.terminate(graceSeconds: 10)
        }
        self.probe?.close()
        self.probe = nil
        self.bus.stop()
        if !self.keepDirectory { try? FileManager.default.removeItem(atPath: self.dir) }
    }
}

/// Runs `body` with a bus, the stand-in (when `standIn` is given) and the daemon (when `daemon`); always
/// tears everything down.
package func withRig(
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

