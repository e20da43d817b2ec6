import Foundation
import Glibc
import JSON
import Testing
import TestSupport
import Varlink

// The parts the forwarder tests run for real: a mosquitto broker on a free loopback port with its
// own config and persistence folder, the built sugard on simulated meters, the built
// sugard-forward, and mosquitto_sub as the independent subscriber.

/// Polls `condition` every 50 ms until it holds or `seconds` passed.
func eventually(within seconds: Double, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
    while true {
        if try await condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(50))
    }
}

func which(_ name: String) throws -> String {
    for dir in ["/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/sbin", "/usr/local/bin"] {
        let path = dir + "/" + name
        if access(path, X_OK) == 0 { return path }
    }
    throw RigError("\(name) is not installed (scripts/install-deps installs mosquitto and mosquitto-clients)")
}

func readFile(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }

/// One test's folder with everything in it; removed at the end unless the test failed.
final class ForwardRig: @unchecked Sendable {
    let dir: String
    let port: Int
    var broker: Child?
    var sugard: Child?
    var forwarder: Child?
    var subscriber: Child?
    /// Nightscout stand-ins and other helpers, killed at the end.
    var others: [Child] = []
    var logs: [Int32] = []
    let start: Int64
    let stop: Int64

    /// `backlog` readings per meter are on the simulated meters at start; they take one a second
    /// until `seconds` from now.
    /// With `replays` (capture files), sugard plays those meters instead of simulated ones.
    init(meters: Int = 2, backlog: Int = 20, seconds: Int = 6, timezone: String = "UTC", replays: [String] = []) throws {
        var template = Array("/tmp/sfw.XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard made != nil else { throw RigError("mkdtemp failed") }
        self.dir = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        self.port = try freePort()
        let now = Int64(Date().timeIntervalSince1970)
        self.start = now - Int64(backlog)
        self.stop = now + Int64(seconds)
        let meterLines =
            replays.isEmpty
            ? "simulate_meters = \(meters)\nsimulate_start = \(self.start)\nsimulate_stop = \(self.stop)\ndemo_interval = 1"
            : replays.map { "replay = \($0)" }.joined(separator: "\n")
        try """
        state_dir = \(self.dir)/state
        socket = \(self.socket)
        \(meterLines)
        cooldown_seconds = 1
        timezone = \(timezone)

        """.write(toFile: self.dir + "/sugard.conf", atomically: true, encoding: .utf8)
        try self.writeForwardConfig()
        mkdir(self.dir + "/mosquitto", 0o700)
    }

    var socket: String { self.dir + "/s" }
    var forwardState: String { self.dir + "/fwd" }
    var statusSocket: String { self.forwardState + "/io.sugard.Forward" }
    var subscriberLog: String { self.dir + "/sub.log" }
    var forwarderLog: String { self.dir + "/forward.log" }
    var brokerLog: String { self.dir + "/mosquitto.log" }

    /// forward.conf for this rig's broker; `extra` lines come after the defaults, and a key they set
    /// replaces its default (a key may appear only once in a file).
    /// Without `mqtt`, no `mqtt_url` (for Nightscout sinks only).
    func writeForwardConfig(_ extra: String = "", mqtt: Bool = true) throws {
        let overridden = Set(extra.split(separator: "\n").compactMap { $0.split(separator: "=").first?.trimmingCharacters(in: .whitespaces) })
        var lines = ["# written by ForwardTests"]
        if mqtt, !overridden.contains("mqtt_url") { lines.append("mqtt_url = mqtt://127.0.0.1:\(self.port)") }
        if !overridden.contains("gateway_id") { lines.append("gateway_id = gw1") }
        lines.append(extra)
        try (lines.joined(separator: "\n") + "\n").write(toFile: self.dir + "/forward.conf", atomically: true, encoding: .utf8)
        // As installed: it may hold a token, and sugard-forward refuses one others may read.
        chmod(self.dir + "/forward.conf", 0o640)
    }

    func log(_ name: String) throws -> Int32 {
        let fd = open(self.dir + "/" + name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw RigError("cannot open \(name)") }
        self.logs.append(fd)
        return fd
    }

    /// Starts mosquitto with persistence saved on every change (so a SIGKILL loses nothing the
    /// subscriber's persistent session holds). `password` makes it refuse anonymous clients.
    func startBroker(password: (user: String, password: String)? = nil, tls: Bool = false) async throws {
        var config = """
            listener \(self.port) 127.0.0.1
            \(tls ? "cafile \(self.dir)/ca.pem\ncertfile \(self.dir)/server.pem\nkeyfile \(self.dir)/server.key" : "")
            persistence true
            persistence_location \(self.dir)/mosquitto/
            autosave_on_changes true
            autosave_interval 1
            log_dest stderr
            log_type all
            max_queued_messages 100000

            """
        // As root, mosquitto would switch to the mosquitto user, which cannot read this folder.
        if getuid() == 0 { config += "user root\n" }
        if let password {
            let file = self.dir + "/passwd"
            let made = try await runToEnd(
                try which("mosquitto_passwd"), ["-b", "-c", file, password.user, password.password], environment: [:],
                dir: self.dir, seconds: 10)
            #expect(made.status == 0, "mosquitto_passwd: \(made.stderr)")
            config += "allow_anonymous false\npassword_file \(file)\n"
        } else {
            config += "allow_anonymous true\n"
        }
        try config.write(toFile: self.dir + "/mosquitto.conf", atomically: true, encoding: .utf8)
        let fd = try self.log("mosquitto.log")
        self.broker = try Child(try which("mosquitto"), ["-c", self.dir + "/mosquitto.conf"], environment: [:], stdout: fd, stderr: fd)
        let up = await eventually(within: 10) { self.canConnect(self.port) }
        try #require(up, "mosquitto did not listen on \(self.port):\n\(readFile(self.brokerLog))")
    }

    /// A CA and a server certificate for localhost (openssl), and a second CA that signed nothing.
    func makeCertificates() async throws {
        let openssl = try which("openssl")
        let steps: [[String]] = [
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test CA", "-keyout", "ca.key", "-out", "ca.pem"],
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=other CA", "-keyout", "other.key", "-out", "other.pem"],
            ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.csr"],
            ["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
             "-extfile", "san.cnf", "-out", "server.pem"],
        ]
        try "subjectAltName = DNS:localhost, IP:127.0.0.1\n".write(toFile: self.dir + "/san.cnf", atomically: true, encoding: .utf8)
        for step in steps {
            let result = try await runToEnd(
                openssl, step.map { $0.hasSuffix(".pem") || $0.hasSuffix(".key") || $0.hasSuffix(".csr") || $0.hasSuffix(".cnf") ? self.dir + "/" + $0 : $0 },
                environment: [:], dir: self.dir, seconds: 30)
            try #require(result.status == 0, "openssl \(step.joined(separator: " ")): \(result.stderr)")
        }
    }

    func killBroker() {
        self.broker?.kill()
        self.broker = nil
    }

    private func canConnect(_ port: Int) -> Bool {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    /// mosquitto_sub with a persistent session (QoS 1, clean session off), so it gets everything
    /// published while it reconnects after a broker restart.
    func startSubscriber(topic: String = "#") async throws {
        let fd = try self.log("sub.log")
        let err = try self.log("sub.err")
        self.subscriber = try Child(
            try which("mosquitto_sub"),
            ["-h", "127.0.0.1", "-p", String(self.port), "-t", topic, "-q", "1", "-v", "-c", "-i", "test-subscriber-\(self.port)",
             "-V", "mqttv5", "-x", "3600"],
            environment: [:], stdout: fd, stderr: err)
        // Its session exists once the broker logged the subscription.
        let subscribed = await eventually(within: 10) { readFile(self.brokerLog).contains("test-subscriber-\(self.port) 1 \(topic)") }
        try #require(subscribed, "mosquitto_sub did not subscribe:\n\(readFile(self.brokerLog))")
    }

    func startSugard() async throws {
        let fd = try self.log("sugard.log")
        self.sugard = try Child(
            try builtProduct("sugard"), ["--config", self.dir + "/sugard.conf"], environment: ["TZ": "UTC", "PATH": "/usr/bin:/bin"],
            stdout: fd, stderr: fd)
        let up = await eventually(within: 30) { access(self.socket, F_OK) == 0 }
        try #require(up, "sugard did not serve its socket:\n\(readFile(self.dir + "/sugard.log"))")
    }

    func startForwarder(arguments: [String] = []) throws {
        let fd = try self.log("forward.log")
        self.forwarder = try Child(
            try builtProduct("sugard-forward"),
            ["--config", self.dir + "/forward.conf", "--socket", self.socket, "--state-dir", self.forwardState] + arguments,
            environment: ["PATH": "/usr/bin:/bin"], stdout: fd, stderr: fd)
    }

    /// Broker, subscriber, sugard and forwarder, in that order (the normal start).
    func startAll() async throws {
        try await self.startBroker()
        try await self.startSubscriber()
        try await self.startSugard()
        try self.startForwarder()
    }

    /// Reading messages the subscriber got: (topic, payload) per `…/reading` line, in order.
    func receivedReadings() -> [(topic: String, payload: JSONValue)] {
        let lines: [Substring] = readFile(self.subscriberLog).split(separator: "\n")
        return lines.compactMap { (line: Substring) -> (topic: String, payload: JSONValue)? in
            guard let space = line.firstIndex(of: " ") else { return nil }
            let topic = String(line[..<space])
            guard topic.hasSuffix("/reading"), let payload = try? JSONValue(parsing: String(line[line.index(after: space)...])) else {
                return nil
            }
            return (topic, payload)
        }
    }

    /// Lines of the subscriber log on `topic`.
    func received(on topic: String) -> [String] {
        let lines: [Substring] = readFile(self.subscriberLog).split(separator: "\n")
        return lines.filter { $0.hasPrefix(topic + " ") }
            .map { String($0.dropFirst(topic.count + 1)) }
    }

    /// Waits until the subscriber has every reading sugard stored so far: the moment a broker
    /// SIGKILL cannot lose anything (see `brokerKilledAndRestartedMidStream`).
    func waitUntilSubscriberCaughtUp(within seconds: Double = 20) async throws {
        let caughtUp = try await eventually(within: seconds) {
            let got = Set(self.receivedReadings().compactMap { $0.payload["id"]?.stringValue })
            return try await self.storedIDs().allSatisfy(got.contains)
        }
        try #require(caughtUp, "the subscriber did not catch up with sugard's store")
    }

    /// Every reading sugard stored, as the export ids (`meter/epoch/sequence`), in commit order.
    func storedIDs() async throws -> [String] {
        try await self.storedReadings().map {
            "\($0["meter"]?.stringValue ?? "?")/\($0["epoch"]?.intValue ?? 0)/\($0["sequenceNumber"]?.intValue ?? -1)"
        }
    }

    /// Every reading sugard stored (the `ListReadings` objects), by measured time.
    func storedReadings() async throws -> [JSONValue] {
        let client = try VarlinkClient(socketPath: self.socket)
        defer { client.close() }
        let reply = try await client.call("io.sugard.HealthDataSync.ListReadings", ["limit": 100_000, "order": "asc"])
        return reply["readings"]?.arrayValue ?? []
    }

    /// Waits until the simulated meters stopped (at `stop`) and sugard's store stopped growing
    /// (the meters stop advertising then, so a reading taken during a cooldown may stay unsynced).
    func waitForAllStored() async throws -> [String] {
        let wait = Double(self.stop - Int64(Date().timeIntervalSince1970)) + 1
        if wait > 0 { try await Task.sleep(for: .milliseconds(Int(wait * 1000))) }
        var ids = try await self.storedIDs()
        let settled = try await eventually(within: 20) {
            try await Task.sleep(for: .milliseconds(1500))
            let again = try await self.storedIDs()
            defer { ids = again }
            return again.count == ids.count
        }
        try #require(settled && !ids.isEmpty, "sugard's store did not settle (\(ids.count) readings)")
        return ids
    }

    /// Checks the subscriber got every id in `stored`, and per meter in sequence order (duplicates
    /// of a reading, possible around a crash, are ignored after their first copy).
    func expectDelivered(_ stored: [String], within seconds: Double = 20, sourceLocation: SourceLocation = #_sourceLocation) async {
        var missing: [String] = []
        _ = await eventually(within: seconds) {
            let got = Set(self.receivedReadings().compactMap { $0.payload["id"]?.stringValue })
            missing = stored.filter { !got.contains($0) }
            return missing.isEmpty
        }
        #expect(missing.isEmpty, "\(missing.count) of \(stored.count) stored readings never arrived, e.g. \(missing.prefix(3)); forwarder log:\n\(readFile(self.forwarderLog).suffix(3000))", sourceLocation: sourceLocation)
        var seen = Set<String>()
        // Per meter, (epoch, sequence number) grows in commit order: a meter reset starts a new
        // epoch at sequence 1 (the id is "<meter>/<epoch>/<sequence>").
        var last: [String: (Int64, Int64)] = [:]
        var outOfOrder: [String] = []
        for (topic, payload) in self.receivedReadings() {
            guard let id = payload["id"]?.stringValue, seen.insert(id).inserted else { continue }
            let meter = payload["meter"]?.stringValue ?? "?"
            #expect(topic == "sugard/gw1/\(meter.lowercased().filter { $0 != ":" })/reading", sourceLocation: sourceLocation)
            let epoch = id.split(separator: "/").dropLast().last.flatMap { Int64($0) } ?? -1
            let position = (epoch, payload["sequenceNumber"]?.intValue ?? -1)
            if let previous = last[meter], position <= previous { outOfOrder.append(id) }
            last[meter] = position
        }
        #expect(outOfOrder.isEmpty, "out of order per meter: \(outOfOrder.prefix(5))", sourceLocation: sourceLocation)
    }

    func cleanUp(keep: Bool) {
        for child in [self.forwarder, self.sugard, self.subscriber, self.broker] + self.others { child?.kill() }
        for fd in self.logs { close(fd) }
        if keep {
            print("ForwardTests: kept \(self.dir)")
        } else {
            try? FileManager.default.removeItem(atPath: self.dir)
        }
    }
}
