import Foundation
import Glibc
import HubStore
import MQTT
import TestSupport

// The parts the hub tests run for real: a throwaway PostgreSQL cluster (initdb/pg_ctl from
// Debian's postgresql, as `nobody` when the tests run as root: postgres refuses root), a mosquitto
// broker with persistence, and the built sugard-hub instances, each in this test's own folder on
// free ports.

/// Polls `condition` every 50 ms until it holds or `seconds` passed.
func eventually(within seconds: Double, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
    while true {
        if try await condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(50))
    }
}

func readFile(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }

enum Tools {
    static func find(_ name: String) -> String? {
        for dir in ["/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/sbin", "/usr/local/bin"] where access(dir + "/" + name, X_OK) == 0 {
            return dir + "/" + name
        }
        return nil
    }

    /// The newest Debian PostgreSQL's bin folder.
    static let postgresBin: String? = {
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        return versions.compactMap { Int($0) }.sorted().reversed().map { "/usr/lib/postgresql/\($0)/bin" }
            .first { access($0 + "/initdb", X_OK) == 0 && access($0 + "/pg_ctl", X_OK) == 0 }
    }()

    /// Why the hub tests cannot run here (empty: they can). Printed by the tests that skip.
    static let missing: [String] = {
        var m: [String] = []
        if postgresBin == nil { m.append("initdb/pg_ctl (Debian postgresql)") }
        if find("mosquitto") == nil { m.append("mosquitto") }
        if getuid() == 0, find("setpriv") == nil { m.append("setpriv (util-linux, to run postgres as nobody)") }
        if !m.isEmpty { print("HubTests SKIP: missing \(m.joined(separator: ", ")); scripts/install-deps installs them") }
        return m
    }()
}

final class HubRig: @unchecked Sendable {
    let dir: String
    let brokerPort: Int
    let postgresPort: Int
    var broker: Child?
    var hubs: [String: Child] = [:]
    var others: [Child] = []
    var postgresStarted = false

    init() throws {
        var template = Array("/tmp/shub.XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard made != nil else { throw RigError("mkdtemp failed") }
        self.dir = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        chmod(self.dir, 0o755)
        self.brokerPort = try freePort()
        self.postgresPort = try freePort()
    }

    var databaseURL: String { "postgresql://postgres@127.0.0.1:\(self.postgresPort)/postgres?connect_timeout=5" }

    /// Runs a PostgreSQL tool, as nobody when we are root.
    private func pg(_ tool: String, _ arguments: [String], seconds: Int = 120) async throws -> ProcessResult {
        guard let bin = Tools.postgresBin else { throw RigError("no PostgreSQL") }
        if getuid() == 0 {
            return try await runToEnd(
                Tools.find("setpriv")!, ["--reuid=65534", "--regid=65534", "--clear-groups", "--", bin + "/" + tool] + arguments,
                environment: ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": self.dir], dir: self.dir, seconds: seconds)
        }
        return try await runToEnd(bin + "/" + tool, arguments, environment: ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"], dir: self.dir, seconds: seconds)
    }

    /// initdb and pg_ctl start: a cluster on 127.0.0.1:`postgresPort` with its socket in the folder.
    func startPostgres() async throws {
        let data = self.dir + "/pg"
        mkdir(data, 0o700)
        if getuid() == 0 { chown(data, 65534, 65534) }
        let initdb = try await self.pg("initdb", ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
        guard initdb.status == 0 else { throw RigError("initdb failed: \(initdb.stdout)\n\(initdb.stderr)") }
        let started = try await self.pg(
            "pg_ctl",
            [
                "-D", data, "-l", data + "/server.log", "-w", "-t", "60", "-o",
                "-p \(self.postgresPort) -k \(data) -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50",
                "start",
            ])
        guard started.status == 0 else { throw RigError("pg_ctl start failed: \(started.stderr)\n\(readFile(data + "/server.log"))") }
        self.postgresStarted = true
    }

    /// Starts the stopped cluster again (same data, same port).
    func restartPostgres() async throws {
        let data = self.dir + "/pg"
        let started = try await self.pg(
            "pg_ctl",
            [
                "-D", data, "-l", data + "/server.log", "-w", "-t", "60", "-o",
                "-p \(self.postgresPort) -k \(data) -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50",
                "start",
            ])
        guard started.status == 0 else { throw RigError("pg_ctl start failed: \(started.stderr)") }
        self.postgresStarted = true
    }

    func stopPostgres() async {
        guard self.postgresStarted else { return }
        _ = try? await self.pg("pg_ctl", ["-D", self.dir + "/pg", "-m", "immediate", "-w", "stop"], seconds: 30)
        self.postgresStarted = false
    }

    func log(_ name: String) throws -> Int32 {
        let fd = open(self.dir + "/" + name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw RigError("cannot open \(name)") }
        return fd
    }

    /// mosquitto with persistence on every change (a restart keeps sessions and queued messages).
    func startBroker() async throws {
        var config = """
            listener \(self.brokerPort) 127.0.0.1
            persistence true
            persistence_location \(self.dir)/mosquitto/
            autosave_on_changes true
            autosave_interval 1
            log_dest stderr
            log_type error
            log_type warning
            log_type notice
            log_type information
            max_queued_messages 1000000
            max_inflight_messages 100
            allow_anonymous true

            """
        if getuid() == 0 { config += "user root\n" }
        mkdir(self.dir + "/mosquitto", 0o700)
        try config.write(toFile: self.dir + "/mosquitto.conf", atomically: true, encoding: .utf8)
        let fd = try self.log("mosquitto.log")
        defer { close(fd) }
        self.broker = try Child(Tools.find("mosquitto")!, ["-c", self.dir + "/mosquitto.conf"], environment: [:], stdout: fd, stderr: fd)
        let up = await eventually(within: 10) { Self.canConnect(self.brokerPort) }
        guard up else { throw RigError("mosquitto did not listen on \(self.brokerPort):\n\(readFile(self.dir + "/mosquitto.log"))") }
    }

    /// SIGTERM (mosquitto saves its persistence file) and wait.
    func stopBroker() async {
        _ = await self.broker?.terminate(graceSeconds: 10)
        self.broker = nil
    }

    static func canConnect(_ port: Int) -> Bool {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    /// Writes `<name>.conf` for a hub instance and returns its path.
    func writeHubConfig(_ name: String, httpPort: Int, extra: String = "") throws -> String {
        let path = self.dir + "/\(name).conf"
        try """
        mqtt_url = mqtt://127.0.0.1:\(self.brokerPort)
        mqtt_client_id = \(name)
        database_url = \(self.databaseURL)
        listen = 127.0.0.1:\(httpPort)
        \(extra)
        """.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        return path
    }

    /// Starts the built sugard-hub with `<name>.conf` (written first by ``writeHubConfig``).
    func startHub(_ name: String) throws {
        let fd = try self.log("\(name).log")
        defer { close(fd) }
        self.hubs[name] = try Child(
            try builtProduct("sugard-hub"), ["--config", self.dir + "/\(name).conf", "--log-level", "info"], environment: [:], stdout: fd,
            stderr: fd)
    }

    func hubLog(_ name: String) -> String { readFile(self.dir + "/\(name).log") }

    /// A store of our own, to check what the hubs committed.
    func store() throws -> HubStore { try HubStore(url: self.databaseURL) }

    func cleanUp(keep: Bool) async {
        for hub in self.hubs.values { hub.kill() }
        for child in self.others { child.kill() }
        self.broker?.kill()
        await self.stopPostgres()
        if keep {
            print("HubTests: kept \(self.dir)")
        } else {
            _ = try? FileManager.default.removeItem(atPath: self.dir)
        }
    }
}

/// A plain HTTP/1.0 GET on loopback: status and body.
func httpGet(port: Int, path: String, token: String? = nil) -> (status: Int, body: String)? {
    let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let ok = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard ok == 0 else { return nil }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var request = "GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n"
    if let token { request += "Authorization: Bearer \(token)\r\n" }
    request += "\r\n"
    _ = request.withCString { Glibc.write(fd, $0, strlen($0)) }
    var data: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = Glibc.read(fd, &buffer, buffer.count)
        if n <= 0 { break }
        data += buffer[0..<n]
    }
    let text = String(decoding: data, as: UTF8.self)
    guard let statusLine = text.split(separator: "\r\n").first, statusLine.split(separator: " ").count >= 2,
        let status = Int(statusLine.split(separator: " ")[1])
    else { return nil }
    let body = text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
    return (status, body)
}
