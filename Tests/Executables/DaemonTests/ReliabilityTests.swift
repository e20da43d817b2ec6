import Glibc
import JSON
import Locking
import Synchronization
import Testing
import TestSupport
import Varlink

/// Issue #22's attacks, repeated against the built `sugard` (a child process on a loopback Unix
/// socket; every attack a bounded loop of a few seconds): quadratic JSON, a memory flood, descriptor
/// exhaustion, and a stopped daemon. Throughout each one a second client's `GetStatus` must be
/// answered within 100 ms, the watchdog pings (`WATCHDOG_USEC` = 1 s) must never be more than half
/// the interval apart, RSS must stay under 64 MB during the flood and come back near its baseline,
/// and nothing stored may be lost. Each test prints its figures (recorded in BENCHMARKS.md).
///
/// Under a sanitizer RSS says nothing about the daemon (the soaks skip it the same way) and every
/// call is several times slower, so the RSS bounds are skipped and the latency bound is 1 s.
@Suite(.serialized) struct ReliabilityTests {
    static let interface = "io.sugard.HealthDataSync"
    static let sanitized = !sanitizerEnvironment().isEmpty
    static let latencyBound: Duration = sanitized ? .seconds(1) : .milliseconds(100)
    static let watchdogUSec = 1_000_000

    /// What the observer saw during one attack.
    struct Figures: CustomStringConvertible {
        var attack: String
        var duration: Duration
        var calls: Int
        var worstLatency: Duration
        var peakRSS: Int
        var worstWatchdogGap: Duration

        var description: String {
            func ms(_ d: Duration) -> String {
                let tenths = d.components.seconds * 10_000 + d.components.attoseconds / 100_000_000_000_000
                return "\(tenths / 10).\(tenths % 10) ms"
            }
            return "reliability: \(self.attack): \(ms(self.duration)) long, \(self.calls) GetStatus probes, worst latency \(ms(self.worstLatency)), peak RSS \(self.peakRSS >> 20) MiB, worst watchdog gap \(ms(self.worstWatchdogGap))"
        }
    }

    /// The probing client's findings, shared with its task.
    final class Probe: Sendable {
        let worst = Lock<Duration>(.zero)
        let calls = Atomic<Int>(0)
        let peakRSS = Atomic<Int>(0)
        let failures = Lock<[String]>([])
        /// (milliseconds since the start, latency in ms) of the slowest probes.
        let slowest = Lock<[(Int, Int)]>([])
    }

    /// Resident set size of `pid` in bytes (`VmRSS`), 0 when unreadable.
    static func rss(_ pid: pid_t) -> Int {
        for line in readText("/proc/\(pid)/status").split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return (Int(line.filter(\.isNumber)) ?? 0) * 1024
        }
        return 0
    }

    /// Starts sugard on the Accu-Chek capture with the watchdog on, and waits until its 5 readings are stored.
    static func start(in dir: TempDirectory, config: String = "", wrapper: [String] = []) async throws -> SugardRun {
        try dir.write("sugard.conf", config)
        let run = try SugardRun(
            in: dir, arguments: ["--config", dir.file("sugard.conf"), "--replay", DaemonProcessTests.accuChek],
            environment: ["WATCHDOG_USEC": String(Self.watchdogUSec)], wrapper: wrapper)
        try await run.waitUntilReady()
        let client = try VarlinkClient(socketPath: run.socketPath, timeout: .seconds(10))
        defer { client.close() }
        let stored = await eventually(within: 30) {
            (try? await client.call(Self.interface + ".GetStatus"))?["state"]?["readingCount"]?.intValue == 5
        }
        try #require(stored, "the replayed meter's 5 readings were not stored; stderr:\n\(run.stderr)")
        return run
    }

    /// Runs `attack` while a second, already connected client calls `GetStatus` every 20 ms.
    static func observe(
        _ run: SugardRun, _ name: String, _ attack: @Sendable () async throws -> Void
    ) async throws -> Figures {
        let probe = Probe()
        let client = try VarlinkClient(socketPath: run.socketPath, timeout: .seconds(10))
        defer { client.close() }
        _ = try await client.call(Self.interface + ".GetStatus")
        let pid = run.process.pid
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                while !Task.isCancelled {
                    let before = ContinuousClock.now
                    do {
                        let reply = try await client.call(Self.interface + ".GetStatus")
                        if reply["state"] == nil { probe.failures.withLock { $0.append("GetStatus without a state") } }
                    } catch {
                        if !Task.isCancelled { probe.failures.withLock { $0.append("\(error)") } }
                        return
                    }
                    let latency = ContinuousClock.now - before
                    probe.worst.withLock { $0 = max($0, latency) }
                    let at = Int((before - started).components.seconds * 1000 + (before - started).components.attoseconds / 1_000_000_000_000_000)
                    let ms = Int(latency.components.attoseconds / 1_000_000_000_000_000 + latency.components.seconds * 1000)
                    probe.slowest.withLock { list in
                        list.append((at, ms))
                        list.sort { $0.1 > $1.1 }
                        if list.count > 3 { list.removeLast() }
                    }
                    probe.calls.add(1, ordering: .relaxed)
                    let rss = Self.rss(pid)
                    if rss > probe.peakRSS.load(ordering: .relaxed) { probe.peakRSS.store(rss, ordering: .relaxed) }
                    try? await Task.sleep(for: .milliseconds(20))
                }
            }
            try await attack()
            group.cancelAll()
        }
        let ended = ContinuousClock.now
        let failures = probe.failures.withLock { $0 }
        #expect(failures.isEmpty, "\(name): the probing client failed: \(failures)")
        print("reliability: \(name): slowest probes (at ms, latency ms): \(probe.slowest.withLock { $0 })")
        return Figures(
            attack: name, duration: ended - started, calls: probe.calls.load(ordering: .relaxed),
            worstLatency: probe.worst.withLock { $0 }, peakRSS: probe.peakRSS.load(ordering: .relaxed),
            worstWatchdogGap: Self.worstGap(run.notify, from: started, to: ended))
    }

    /// The longest time without a `WATCHDOG=1` between `start` and `end`.
    static func worstGap(_ notify: NotifyListener, from start: ContinuousClock.Instant, to end: ContinuousClock.Instant) -> Duration {
        let pings = zip(notify.messages, notify.arrivals).filter { $0.0.contains("WATCHDOG=1") }.map(\.1)
        var last = pings.last { $0 <= start } ?? start
        var worst: Duration = .zero
        for ping in pings where ping > start && ping <= end {
            worst = max(worst, ping - last)
            last = ping
        }
        return max(worst, end - last)
    }

    static func check(_ figures: Figures, _ run: SugardRun) async throws {
        print(figures)
        #expect(figures.calls > 0, "\(figures)")
        #expect(figures.worstLatency <= Self.latencyBound, "\(figures)")
        #expect(figures.worstWatchdogGap <= .microseconds(Self.watchdogUSec / 2), "\(figures)")
        // Nothing stored lost.
        let client = try VarlinkClient(socketPath: run.socketPath, timeout: .seconds(10))
        defer { client.close() }
        let readings = try await client.call(Self.interface + ".ListReadings", ["limit": 100])["readings"]?.arrayValue ?? []
        #expect(readings.count == 5, "\(figures.attack): \(readings.count) readings after the attack")
        #expect(run.process.isRunning)
    }

    static func getStatus() -> [UInt8] { Array(#"{"method":"io.sugard.HealthDataSync.GetStatus"}"#.utf8) + [0] }

    // MARK: - The attacks

    @Test func quadraticJSON() async throws {
        let dir = try TempDirectory()
        let run = try await Self.start(in: dir)
        let path = run.socketPath
        let hostile = JSONWorstCase.request() + [0]
        let sent = Lock<Int>(0)
        let figures = try await Self.observe(run, "quadratic JSON (1 MiB, 130 000 keys) from 3 clients for 3 s") {
            let until = ContinuousClock.now + .seconds(3)
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<3 {
                    group.addTask {
                        while ContinuousClock.now < until {
                            guard let connection = try? RawConnection(path: path) else { continue }
                            await connection.send(hostile, deadline: until + .seconds(2))
                            let reply = try? await connection.readMessage(timeout: .seconds(5))
                            // sugard caps messages at 64 KiB: the 1 MiB request is refused unparsed.
                            if reply?["error"]?.stringValue == VarlinkError.ProtocolError.messageTooLarge { sent.withLock { $0 += 1 } }
                        }
                    }
                }
            }
        }
        #expect(sent.withLock { $0 } >= 3, "only \(sent.withLock { $0 }) hostile messages were refused")
        print("reliability: \(sent.withLock { $0 }) worst-case messages refused in 3 s")
        try await Self.check(figures, run)
        #expect(await run.stop() == .exited(0))
    }

    @Test func memoryFlood() async throws {
        let dir = try TempDirectory()
        let run = try await Self.start(in: dir)
        let path = run.socketPath
        try await Task.sleep(for: .milliseconds(300))
        let baseline = Self.rss(run.process.pid)
        var chunk: [UInt8] = []
        for _ in 0..<(64 << 10) / 48 { chunk += Self.getStatus() }
        let burst = chunk
        let figures = try await Self.observe(run, "memory flood: 100 connections sending GetStatus without reading, 3 s") {
            var flooders: [RawConnection] = []
            for _ in 0..<100 { if let connection = try? RawConnection(path: path) { flooders.append(connection) } }
            let until = ContinuousClock.now + .seconds(3)
            while ContinuousClock.now < until {
                for flooder in flooders where flooder.fd >= 0 {
                    // As much as the socket takes right now (a send that would block stops at once).
                    await flooder.send(burst, deadline: .now)
                }
                try? await Task.sleep(for: .milliseconds(10))
            }
            for flooder in flooders { flooder.close() }
        }
        try await Self.check(figures, run)
        if !Self.sanitized {
            #expect(figures.peakRSS < 64 << 20, "\(figures)")
            let settled = await eventually(within: 5) { Self.rss(run.process.pid) <= baseline + baseline / 4 + (8 << 20) }
            print("reliability: memory flood: RSS baseline \(baseline >> 20) MiB, after \(Self.rss(run.process.pid) >> 20) MiB")
            #expect(settled, "RSS \(Self.rss(run.process.pid) >> 20) MiB after the flood; baseline \(baseline >> 20) MiB")
        }
        #expect(await run.stop() == .exited(0))
    }

    /// Another user (nobody, through setpriv) holds idle connections up to the cap of a daemon with an
    /// open-files limit of 256; root still gets a new connection and its answer, and the watchdog pings.
    @Test(.enabled(if: getuid() == 0, "needs root to run a client as another uid"))
    func descriptorExhaustion() async throws {
        let dir = try TempDirectory()
        chmod(dir.path, 0o755)  // nobody must reach the socket
        let run = try await Self.start(
            in: dir, config: "socket_mode = 0666\n", wrapper: ["/usr/bin/prlimit", "--nofile=256:256"])
        let path = run.socketPath
        // Opens N connections, keeps them SECONDS, prints "accepted refused".
        let script = """
            import socket, sys, time
            path, n, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
            held, refused = [], 0
            for _ in range(n):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(path)
                except OSError:
                    refused += 1
                    continue
                held.append(s)
            time.sleep(0.3)
            accepted = 0
            for s in held:
                s.setblocking(False)
                try:
                    data = s.recv(4096)
                    refused += 1  # an error message or the end: turned away
                except BlockingIOError:
                    accepted += 1
            print(accepted, refused, flush=True)
            time.sleep(seconds)
            """
        try dir.write("hold.py", script)
        let holderOutput = Lock<String>("")
        let figures = try await Self.observe(run, "descriptor exhaustion: nobody holds 400 idle connections, open-files limit 256") {
            let result = try? await runToEnd(
                "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", dir.file("hold.py"), path, "400", "3"],
                environment: ["PATH": "/usr/bin:/bin"], dir: dir.path, seconds: 30)
            holderOutput.withLock { $0 = (result?.stdout ?? "") + (result?.stderr ?? "") + " status \(result?.status ?? -1)" }
        }
        let counts = holderOutput.withLock { $0 }.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Int($0) }
        print("reliability: descriptor exhaustion: nobody's connections accepted/refused \(counts)")
        try #require(counts.count >= 2, "holder output: \(holderOutput.withLock { $0 })")
        // 256 − 64 descriptors kept = 192 connections, 16 of them kept for root and sugard's own user;
        // one user may hold a quarter of the other 176.
        #expect(counts[0] == 44, "accepted \(counts[0])")
        #expect(counts[1] == 400 - 44, "refused \(counts[1])")
        #expect(run.stderr.contains("serving at most 192 connections"), "stderr:\n\(run.stderr)")
        #expect(run.stderr.contains("refused a connection from uid 65534"), "stderr:\n\(run.stderr)")
        try await Self.check(figures, run)
        #expect(await run.stop() == .exited(0))
    }

    /// While nobody holds its share, a new connection from root is still accepted and answered.
    @Test(.enabled(if: getuid() == 0, "needs root to run a client as another uid"))
    func rootGetsInWhileAnotherUserHoldsEveryOrdinarySlot() async throws {
        let dir = try TempDirectory()
        chmod(dir.path, 0o755)
        let run = try await Self.start(
            in: dir, config: "socket_mode = 0666\nmax_socket_connections = 40\n", wrapper: ["/usr/bin/prlimit", "--nofile=256:256"])
        let script = """
            import socket, sys, time
            held = []
            for _ in range(60):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(sys.argv[1]); held.append(s)
                except OSError:
                    pass
            print("holding", flush=True)
            time.sleep(4)
            """
        try dir.write("hold.py", script)
        let holder = try ChildProcess(
            "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", dir.file("hold.py"), run.socketPath],
            environment: ["PATH": "/usr/bin:/bin"], outputPrefix: dir.file("holder"))
        try #require(await eventually(within: 10) { holder.stdout.contains("holding") }, "holder: \(holder.stderr)")
        try await Task.sleep(for: .milliseconds(200))
        for _ in 0..<5 {
            let before = ContinuousClock.now
            let fresh = try VarlinkClient(socketPath: run.socketPath, timeout: .seconds(5))
            let status = try await fresh.call(Self.interface + ".GetStatus")
            fresh.close()
            #expect(status["state"]?["readingCount"]?.intValue == 5)
            #expect(ContinuousClock.now - before <= Self.latencyBound)
        }
        // One user holds at most a quarter of the 24 ordinary slots (the reserve of 16 aside).
        #expect(run.stderr.contains("the limit of 6 connections for uid 65534"), "stderr:\n\(run.stderr)")
        _ = await holder.waitForExit(within: 10)
        #expect(await run.stop() == .exited(0))
    }

    /// A uid refused every method (nobody, not in the socket group) gets its PermissionDenied for a
    /// small call, but a bigger message is refused unparsed and the connection closed.
    @Test(.enabled(if: getuid() == 0, "needs root to run a client as another uid"))
    func aPeerRefusedEveryMethodCannotMakeSugardParseBigMessages() async throws {
        let dir = try TempDirectory()
        chmod(dir.path, 0o755)
        let run = try await Self.start(in: dir, config: "socket_mode = 0666\n")
        let script = """
            import socket, sys
            def call(message):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(sys.argv[1])
                s.sendall(message.encode() + b"\\0")
                reply = b""
                while not reply.endswith(b"\\0"):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    reply += chunk
                print(reply.rstrip(b"\\0").decode(), flush=True)
            call('{"method":"io.sugard.HealthDataSync.GetStatus"}')
            call('{"method":"io.sugard.HealthDataSync.GetStatus","parameters":{"x":"' + "y" * 20000 + '"}}')
            """
        try dir.write("refused.py", script)
        let result = try await runToEnd(
            "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", dir.file("refused.py"), run.socketPath],
            environment: ["PATH": "/usr/bin:/bin"], dir: dir.path, seconds: 20)
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.count == 2, "\(result)")
        #expect(lines.first?.contains(#""error":"io.sugard.HealthDataSync.PermissionDenied""#) == true, "\(result)")
        #expect(lines.last?.contains(#""error":"org.varlink.service.PermissionDenied""#) == true, "\(result)")
        #expect(run.stderr.contains("a message over 4096 bytes from a peer allowed no method"), "stderr:\n\(run.stderr)")
        #expect(await run.stop() == .exited(0))
    }

    @Test func stoppedDaemonAndSugarctlTimeouts() async throws {
        let dir = try TempDirectory()
        let run = try await Self.start(in: dir)
        let sugarctl = try builtProduct("sugarctl")
        let env = ["PATH": "/usr/bin:/bin", "TZ": "UTC", "HOME": dir.path]
        let watch = try ChildProcess(
            sugarctl, ["watch", "--socket", run.socketPath, "--timeout", "1", "--json"], environment: env,
            outputPrefix: dir.file("watch"))
        try #require(await eventually(within: 10) { watch.stdout.contains("snapshot") }, "watch: \(watch.stderr)")

        run.process.signal(SIGSTOP)
        let stoppedAt = ContinuousClock.now
        let status = try await runToEnd(
            sugarctl, ["status", "--socket", run.socketPath, "--timeout", "1"], environment: env, dir: dir.path, seconds: 20)
        let statusTook = ContinuousClock.now - stoppedAt
        #expect(status.status == 69, "\(status)")
        #expect(status.stderr.contains("sugard did not answer within 1 s"), "\(status.stderr)")
        #expect(statusTook < .seconds(5), "status took \(statusTook)")

        let watchEnded = await watch.waitForExit(within: 10)
        let watchTook = ContinuousClock.now - stoppedAt
        #expect(watchEnded == .exited(69), "watch: \(watchEnded.map(\.description) ?? "still running"); \(watch.stderr)")
        #expect(watch.stderr.contains("sugard did not answer within 1 s"), "\(watch.stderr)")
        print("reliability: stopped daemon: sugarctl status gave up after \(statusTook), watch after \(watchTook)")

        run.process.signal(SIGCONT)
        let again = try await runToEnd(
            sugarctl, ["status", "--socket", run.socketPath, "--timeout", "5"], environment: env, dir: dir.path, seconds: 20)
        #expect(again.status == 0, "\(again)")
        #expect(again.stdout.contains("5 stored"), "\(again.stdout)")
        #expect(await run.stop() == .exited(0))
    }
}
