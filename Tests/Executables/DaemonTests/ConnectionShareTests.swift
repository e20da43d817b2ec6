import Glibc
import JSON
import Testing
import TestSupport
import Varlink

/// The built sugard's connection caps with real peers of other uids (setpriv, root only): one user
/// holds at most a quarter of the ordinary connections, so another user, the forwarder's user and
/// root still get in; the refusal carries a hint; the soft open-files limit is raised to the hard one.
@Suite(.serialized) struct ConnectionShareTests {
    /// Opens N connections as the calling uid; prints {"accepted", "refused", "hint"} and holds the
    /// accepted ones until SECONDS pass.
    static let holder = """
        import json, socket, sys, time
        path, n, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
        held, refused, hint = [], 0, None
        for _ in range(n):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            s.settimeout(0.3)
            try:
                data = s.recv(65536)
            except socket.timeout:
                held.append(s)  # nothing said, still open: accepted
                continue
            refused += 1
            if hint is None and data:
                hint = json.loads(data.rstrip(b"\\0")).get("parameters", {}).get("hint")
            s.close()
        print(json.dumps({"accepted": len(held), "refused": refused, "hint": hint}), flush=True)
        time.sleep(seconds)
        """

    static func start(_ dir: TempDirectory, wrapper: [String]) async throws -> SugardRun {
        chmod(dir.path, 0o755)  // the other users must reach the socket
        try dir.write("sugard.conf", "socket_mode = 0666\nmax_socket_connections = 40\nforwarder_user = 65533\n")
        try dir.write("hold.py", Self.holder)
        let run = try SugardRun(
            in: dir, arguments: ["--config", dir.file("sugard.conf"), "--replay", DaemonProcessTests.accuChek], wrapper: wrapper)
        try await run.waitUntilReady()
        return run
    }

    /// Runs the holder as `uid` in the background; its report once it holds its connections.
    static func hold(_ dir: TempDirectory, _ run: SugardRun, uid: Int, count: Int, name: String) async throws -> (ChildProcess, JSONValue) {
        let child = try ChildProcess(
            "/usr/bin/setpriv",
            ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/python3", dir.file("hold.py"), run.socketPath, "\(count)", "30"],
            environment: ["PATH": "/usr/bin:/bin"], outputPrefix: dir.file(name))
        try #require(await eventually(within: 30) { child.stdout.contains("}") }, "\(name): \(child.stderr)")
        return (child, try JSONValue(parsing: child.stdout.split(separator: "\n").first.map(String.init) ?? ""))
    }

    @Test(.enabled(if: getuid() == 0, "needs root to run clients as other uids"))
    func oneUserCannotLockOutAnotherUserTheForwarderOrRoot() async throws {
        let dir = try TempDirectory()
        let run = try await Self.start(dir, wrapper: ["/usr/bin/prlimit", "--nofile=256:256"])
        // 40 connections, 16 kept for root, sugard and the forwarder's user: a quarter of 24 each.
        #expect(run.stderr.contains("connections: at most 40, 6 per user; uid 0, uid 65533 not held to the per-user cap"), "\(run.stderr)")

        let (hog, greedy) = try await Self.hold(dir, run, uid: 65534, count: 60, name: "hog")
        defer { hog.signal(SIGKILL) }
        #expect(greedy["accepted"]?.intValue == 6, "\(greedy)")
        #expect(greedy["refused"]?.intValue == 54, "\(greedy)")
        let hint = greedy["hint"]?.stringValue ?? ""
        #expect(hint.contains("uid 65534 holds 6"), "\(hint)")
        #expect(hint.contains("max_connections_per_uid"), "\(hint)")
        #expect(run.stderr.contains("refused a connection from uid 65534"), "\(run.stderr)")

        // Another user still gets its own share.
        let (other, second) = try await Self.hold(dir, run, uid: 65532, count: 3, name: "other")
        defer { other.signal(SIGKILL) }
        #expect(second["accepted"]?.intValue == 3, "\(second)")
        // The forwarder's user is not held to the per-user cap.
        let (forwarder, third) = try await Self.hold(dir, run, uid: 65533, count: 10, name: "forwarder")
        defer { forwarder.signal(SIGKILL) }
        #expect(third["accepted"]?.intValue == 10, "\(third)")
        // Nor is root, who gets an answer.
        let client = try VarlinkClient(socketPath: run.socketPath, timeout: .seconds(10))
        defer { client.close() }
        let status = try await client.call("io.sugard.HealthDataSync.GetStatus")
        #expect(status["state"] != nil)
        #expect(await run.stop() == .exited(0))
    }

    @Test func theSoftOpenFilesLimitIsRaisedToTheHardOneAndLogged() async throws {
        var limit = rlimit()
        try #require(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0)
        let hard = min(UInt64(limit.rlim_max), 8192)
        try #require(hard > 512, "the hard open-files limit here is \(limit.rlim_max)")
        let dir = try TempDirectory()
        let run = try await Self.start(dir, wrapper: ["/usr/bin/prlimit", "--nofile=512:\(hard)"])
        #expect(run.stderr.contains("open files: soft limit raised from 512 to \(hard) (hard limit \(hard))"), "\(run.stderr)")
        let limits = readText("/proc/\(run.process.pid)/limits")
        let line = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") } ?? ""
        #expect(line.split(separator: " ").filter { !$0.isEmpty }.dropFirst(3).first == "\(hard)"[...], "\(line)")
        #expect(await run.stop() == .exited(0))
    }
}
