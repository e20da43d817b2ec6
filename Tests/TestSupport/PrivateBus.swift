import DBus
import Foundation
import Glibc

/// A private system-like dbus-daemon in `dir` (socket `dir/bus.sock`), and the BlueZ stand-in on it
/// (python-dbusmock with Tests/Support/bluez-standin/glucose_meter.py, log in `dir/standin.log`).
/// The owner (one test) starts and kills them one step at a time; `stop()` kills both.
package final class PrivateBus: @unchecked Sendable {
    // @unchecked: the process handles are only touched by the test that owns the bus, one step at a time.
    package static let standInDir: String = {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        return here.deletingLastPathComponent().appendingPathComponent("Support/bluez-standin").path
    }()

    package let dir: String
    /// The bus address (`unix:path=…,guid=…`), set by `start()`.
    package private(set) var address = ""
    /// The parameters the stand-in was last started with.
    package private(set) var standInParameters = "{}"
    private var bus: Child?
    private var standIn: Child?

    package init(dir: String) { self.dir = dir }

    /// Starts (or restarts, on the same socket path) the bus daemon and waits for its address.
    package func start() throws {
        let config = try String(contentsOfFile: Self.standInDir + "/bus.conf.in", encoding: .utf8)
            .replacingOccurrences(of: "@SOCKET@", with: self.dir + "/bus.sock")
        try config.write(toFile: self.dir + "/bus.conf", atomically: true, encoding: .utf8)
        try? FileManager.default.removeItem(atPath: self.dir + "/bus.sock")
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
        self.address = String(decoding: line.dropLast(), as: UTF8.self)
    }

    /// SIGKILL: the bus vanishes the way a crashed bus would.
    package func kill() {
        self.bus?.kill()
        self.bus = nil
    }

    /// A new connection to the bus.
    package func connect() async throws -> DBusConnection {
        try await DBusConnection.connect(to: .address(self.address))
    }

    /// Starts the stand-in and waits (up to 30 s) until it serves org.bluez.
    package func startStandIn(_ parameters: String) async throws {
        self.standInParameters = parameters
        let log = open(self.dir + "/standin.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard log >= 0 else { throw RigError("cannot open the stand-in log") }
        defer { close(log) }
        let process = try Child(
            "/usr/bin/python3",
            ["-m", "dbusmock", "--system", "--template", Self.standInDir + "/glucose_meter.py", "-p", parameters],
            environment: ["PATH": "/usr/bin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": self.address], stdout: log, stderr: log)
        self.standIn = process
        let probe = try await self.connect()
        defer { probe.close() }
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
    package func killStandIn() {
        self.standIn?.kill()
        self.standIn = nil
    }

    package var standInRunning: Bool { self.standIn?.isRunning ?? false }

    /// The end of the stand-in's log.
    package var standInLog: String { tail(self.dir + "/standin.log") }

    package func stop() {
        self.killStandIn()
        self.kill()
    }
}

/// The last `bytes` of a text file, or "(no log)".
package func tail(_ path: String, bytes: Int = 12_000) -> String {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return "(no log)" }
    let end = String(text.suffix(bytes))
    // A program run under a sanitizer writes its reports where they happen, often long before the
    // tail (a race at start-up, reported only as "reported N warnings" at exit): show them first.
    let tailStart = text.index(text.endIndex, offsetBy: -min(bytes, text.count))
    guard let first = text.range(of: "WARNING: ThreadSanitizer") ?? text.range(of: "ERROR: AddressSanitizer"),
        first.lowerBound < tailStart
    else { return end }
    return "--- sanitizer reports (from the first):\n\(text[first.lowerBound...].prefix(40_000))\n--- log tail:\n\(end)"
}
