import Locking
import Glibc
import GlucoseStore
import HealthDataSync
import JSON
import SugarDaemon
import Synchronization
import Testing
import Varlink

/// The soak: the built `sugard` with `simulate_meters` (several simulated meters taking a reading
/// every second, on a timetable that survives restarts) runs for `SUGARD_SOAK_SECONDS` (default
/// 150) while clients connect, watch, list, sync and disconnect at random, and the daemon is
/// SIGKILLed (sometimes SIGTERMed) and restarted at random. Then a last daemon run serves clients
/// with no kills; the meters stop taking readings; a forced sync of every meter runs; and:
/// - every reading the simulated meters ever took is stored exactly once (same sequence number,
///   base time and value; nothing else stored), and `PRAGMA integrity_check` says ok;
/// - the last run's RSS at its start and end is reported and may grow by at most 25% + 8 MiB;
/// - the last run's open file descriptors (with no client connected) do not grow.
/// `SUGARD_SOAK_SEED` replays a run's random choices (the seed is printed; timing still varies);
/// `SUGARD_SOAK_KEEP=1` keeps the state directory and the daemons' log.
@Suite(.serialized) struct SoakTests {
    static let meters = 4

    @Test func soakWithKillsAndClientChurn() async throws {
        let seconds = Int(Soak.environment()["SUGARD_SOAK_SECONDS"] ?? "") ?? 150
        // A soak that wedges must fail, not hold CI: race it against a generous budget; whichever
        // ends first cancels the other (the clients and the restart loop stop on cancellation).
        let budget = seconds * 3 + 240
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.soak(seconds: seconds) }
            group.addTask {
                try await Task.sleep(for: .seconds(budget))
                throw SoakError("the soak did not finish within \(budget) s")
            }
            defer { group.cancelAll() }
            try await group.next()
        }
    }

    func soak(seconds: Int) async throws {
        let environment = Soak.environment()
        let seed = UInt64(environment["SUGARD_SOAK_SEED"] ?? "") ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("soak: \(seconds) s, seed \(seed) (SUGARD_SOAK_SEED=\(seed) replays the random choices)")
        let sugard = try Soak.sugardPath()
        let dir = try Soak.makeTemporaryDirectory()
        defer {
            if environment["SUGARD_SOAK_KEEP"] == nil { Soak.removeTree(dir) } else { print("soak: kept \(dir) (log: sugard.log)") }
        }

        let t0 = Soak.nowMillis() / 1000
        let chaosEnd = t0 + Int64(Double(seconds) * 0.55)
        let stop = t0 + Int64(Double(seconds) * 0.8)
        let end = t0 + Int64(seconds)
        let socket = dir + "/io.sugard.HealthDataSync"
        let configFile = dir + "/sugard.conf"
        try Soak.writeFile(
            configFile,
            """
            state_dir = \(dir)/state
            socket = \(socket)
            simulate_meters = \(Self.meters)
            simulate_start = \(t0)
            simulate_stop = \(stop)
            demo_interval = 1
            cooldown_seconds = 2
            timezone = UTC
            log_level = notice

            """)
        var random = SplitMix(seed: seed)
        let log = dir + "/sugard.log"
        let stats = ClientStats()

        // Phase 1: kills and restarts while clients come and go.
        var runs = 0
        var kills = 0
        let clientSeeds = (0..<6).map { _ in random.next() }
        // Whatever ends this block (a thrown error included) stops the clients.
        defer { stats.running.store(false, ordering: .relaxed) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for clientSeed in clientSeeds {
                group.addTask { await Soak.client(socket: socket, seed: clientSeed, stats: stats) }
            }
            while Soak.nowMillis() / 1000 < chaosEnd {
                let pid = try Soak.spawn(sugard, ["--config", configFile], log: log)
                runs += 1
                let ready = await Soak.waitForSocket(socket, seconds: 15)
                #expect(ready, "sugard run \(runs) did not serve its socket within 15 s (see \(log))")
                let life = 500 + Int(random.next() % 9_500)
                try await Task.sleep(for: .milliseconds(life))
                if random.next() % 5 == 0 {
                    kill(pid, SIGTERM)
                    let status = Soak.wait(pid, seconds: 20)
                    #expect(status == 0, "sugard run \(runs) did not stop cleanly on SIGTERM: status \(status)")
                } else {
                    kill(pid, SIGKILL)
                    _ = Soak.wait(pid, seconds: 20)
                    kills += 1
                }
            }

            // Phase 2: the last run. No kills; clients keep coming until just before the end.
            let pid = try Soak.spawn(sugard, ["--config", configFile], log: log)
            runs += 1
            #expect(await Soak.waitForSocket(socket, seconds: 15), "the last sugard run did not serve its socket")
            stats.running.store(false, ordering: .relaxed)
            try await Task.sleep(for: .seconds(3))
            let fdStart = Soak.fileDescriptors(pid)
            let rssStart = Soak.rssBytes(pid)
            stats.running.store(true, ordering: .relaxed)
            for clientSeed in clientSeeds {
                group.addTask { await Soak.client(socket: socket, seed: clientSeed ^ 0xFACE, stats: stats) }
            }
            while Soak.nowMillis() / 1000 < max(end - 4, stop + 2) { try await Task.sleep(for: .milliseconds(250)) }
            stats.running.store(false, ordering: .relaxed)
            // Waits for the client tasks (each finishes its current step).
            while let _ = try await group.next() {}

            // Every meter's readings are in its simulator; a forced sync of each fetches the rest.
            // An automatic sync may still be running: then Sync fails with SyncInProgress; ask again.
            var reply: JSONObject = [:]
            for attempt in 1...5 {
                let admin = try VarlinkClient(socketPath: socket)
                defer { admin.close() }
                do {
                    reply = try await admin.call("io.sugard.HealthDataSync.Sync", ["force": true])
                    break
                } catch {
                    print("soak: final sync attempt \(attempt) failed: \(error)")
                    #expect(attempt < 5, "the final forced sync kept failing: \(error)")
                    try await Task.sleep(for: .seconds(1))
                }
            }
            var results: [String] = []
            if case .array(let sessions)? = reply["sessions"] {
                for session in sessions {
                    if case .object(let s) = session, case .string(let result)? = s["result"] { results.append(result) }
                }
            }
            print("soak: final forced sync results \(results)")
            #expect(results.count == Self.meters, "the final sync covered \(results.count) of \(Self.meters) meters")
            try await Task.sleep(for: .seconds(2))
            let fdEnd = Soak.fileDescriptors(pid)
            let rssEnd = Soak.rssBytes(pid)
            kill(pid, SIGTERM)
            let status = Soak.wait(pid, seconds: 30)
            let calls = stats.snapshot()
            print(
                """
                soak: \(runs) daemon runs, \(kills) SIGKILLs; client steps \(calls.steps) (\(calls.failures) failed while \
                the daemon was down or dying); last run RSS start \(rssStart) B end \(rssEnd) B; fds start \(fdStart) end \(fdEnd)
                """)
            #expect(status == 0, "the last sugard run exited with status \(status) on SIGTERM (see \(log))")
            #expect(fdStart > 0 && fdEnd <= fdStart, "file descriptors grew from \(fdStart) to \(fdEnd)")
            // Under a sanitizer RSS says nothing about the daemon (ASan keeps freed memory in
            // quarantine, TSan keeps shadow state): the figures are printed, not bounded, there.
            if sanitizerEnvironment().isEmpty {
                #expect(rssStart > 0 && rssEnd <= rssStart + rssStart / 4 + 8 << 20, "RSS grew from \(rssStart) to \(rssEnd) bytes")
            }
            #expect(calls.successes > 0, "no client step ever succeeded")
        }

        // Every reading exactly once.
        let store = try SQLiteReadingStore(path: dir + "/state/sugard.sqlite")
        #expect(try await store.integrityCheck() == ["ok"])
        var total = 0
        for k in 0..<Self.meters {
            let id = SimulatedFleet.meterID(k)
            let expectedCount = SimulatedFleet.readingCount(
                meter: k, at: (stop + 10) * 1000, start: t0, stop: stop, intervalSeconds: 1, meters: Self.meters)
            var expected: [String: Int] = [:]
            for i in stride(from: 1, through: expectedCount, by: 1) {
                let at = SimulatedFleet.readingTime(meter: k, index: i, start: t0, intervalSeconds: 1, meters: Self.meters)
                let key = "\(i) \(LocalDateTime(secondsSinceEpoch: at / 1000).isoString) \(0xB000 | SimulatedFleet.value(meter: k, index: i))"
                expected[key] = 0
            }
            let stored = try await store.readings(ReadingQuery(meter: id))
            var unexpected: [String] = []
            for row in stored {
                let r = row.reading
                let key = "\(r.sequenceNumber) \(r.baseTime.isoString) \(r.concentrationRaw.map(Int.init) ?? -1)"
                if expected[key] != nil { expected[key]! += 1 } else { unexpected.append(key) }
            }
            let missing = expected.filter { $0.value == 0 }.map(\.key).sorted()
            let doubled = expected.filter { $0.value > 1 }.map(\.key).sorted()
            print("soak: meter \(id): expected \(expectedCount), stored \(stored.count)")
            #expect(expectedCount > 0)
            #expect(missing.isEmpty, "meter \(id) lacks \(missing.count) readings: \(missing.prefix(5))")
            #expect(doubled.isEmpty, "meter \(id) stored \(doubled.count) readings twice: \(doubled.prefix(5))")
            #expect(unexpected.isEmpty, "meter \(id) stored readings it never took: \(unexpected.prefix(5))")
            total += stored.count
        }
        await store.close()
        print("soak: \(total) readings stored, each exactly once")
    }
}

/// Counts of the random clients' steps.
final class ClientStats: Sendable {
    /// Whether the clients keep going.
    let running = Atomic<Bool>(true)
    private let counts = Lock<(steps: Int, successes: Int, failures: Int)>((0, 0, 0))
    func add(success: Bool) {
        self.counts.withLock {
            $0.steps += 1
            if success { $0.successes += 1 } else { $0.failures += 1 }
        }
    }
    func snapshot() -> (steps: Int, successes: Int, failures: Int) { self.counts.withLock { $0 } }
}

/// A small deterministic generator (SplitMix64) so a seed replays the choices.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { self.state = seed }
    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

enum Soak {
    /// One random client: connect, then Watch for a while, GetStatus, ListReadings, ListMeters or
    /// a Sync, then disconnect (or stay for another step); repeat until told to stop.
    static func client(socket: String, seed: UInt64, stats: ClientStats) async {
        var random = SplitMix(seed: seed)
        // Also stop when cancelled (the test failed and its task group is unwinding): a cancelled
        // Task.sleep returns at once, so a loop that only watched `running` would spin forever.
        while stats.running.load(ordering: .relaxed), !Task.isCancelled {
            let pause = Int(random.next() % 300)
            try? await Task.sleep(for: .milliseconds(pause))
            guard let client = try? VarlinkClient(socketPath: socket) else {
                stats.add(success: false)
                try? await Task.sleep(for: .milliseconds(100))
                continue
            }
            let steps = 1 + Int(random.next() % 3)
            for _ in 0..<steps {
                let ok: Bool
                switch random.next() % 6 {
                case 0, 1:
                    ok = await Self.watch(client, milliseconds: 100 + Int(random.next() % 2_000), random: random.next())
                case 2:
                    ok = (try? await client.call("io.sugard.HealthDataSync.GetStatus")) != nil
                case 3:
                    ok = (try? await client.call("io.sugard.HealthDataSync.ListReadings", ["limit": 50, "order": "desc"])) != nil
                case 4:
                    ok = (try? await client.call("io.sugard.HealthDataSync.ListMeters")) != nil
                default:
                    let meter = SimulatedFleet.meterID(Int(random.next() % UInt64(SoakTests.meters))).rawValue
                    ok = (try? await client.call("io.sugard.HealthDataSync.Sync", ["meter": .string(meter), "force": true])) != nil
                }
                stats.add(success: ok)
                if !ok { break }
            }
            client.close()
        }
    }

    /// Watches for a while (all fields or a few), then hangs up mid-stream.
    static func watch(_ client: VarlinkClient, milliseconds: Int, random: UInt64) async -> Bool {
        let parameters: JSONObject = random % 2 == 0 ? [:] : ["fields": ["readingCount", "lastReading", "sync"]]
        let stream = client.callMore("io.sugard.HealthDataSync.Watch", parameters)
        return await withTaskGroup(of: Bool?.self) { group in
            group.addTask {
                var got = false
                do {
                    for try await _ in stream { got = true }
                } catch {}
                return got
            }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(milliseconds))
                client.close()
                return nil
            }
            var result = false
            for await value in group { if let value { result = value } }
            return result
        }
    }

    static func environment() -> [String: String] {
        var result: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let eq = text.firstIndex(of: "=") { result[String(text[..<eq])] = String(text[text.index(after: eq)...]) }
            entry += 1
        }
        return result
    }

    static func nowMillis() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    /// The built daemon: next to the test bundle, or `.build/debug/sugard` in the package.
    static func sugardPath() throws -> String {
        let bundle = CommandLine.arguments[0]
        var candidates: [String] = []
        var parts = bundle.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        while parts.count > 1 {
            parts.removeLast()
            candidates.append(parts.joined(separator: "/") + "/sugard")
        }
        let root = String(#filePath.split(separator: "/", omittingEmptySubsequences: false).dropLast(3).joined(separator: "/"))
        candidates.append(root + "/.build/debug/sugard")
        for candidate in candidates where access(candidate, X_OK) == 0 {
            var info = stat()
            if stat(candidate, &info) == 0, info.st_mode & S_IFMT == S_IFREG { return candidate }
        }
        throw SoakError("sugard not found in \(candidates); run `swift build` first")
    }

    static func makeTemporaryDirectory() throws -> String {
        var template = Array("/tmp/sugard-soak.XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw SoakError("cannot create a directory in /tmp")
        }
        return String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func removeTree(_ path: String) {
        guard let dir = opendir(path) else {
            unlink(path)
            return
        }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name == "." || name == ".." { continue }
            if entry.pointee.d_type == UInt8(DT_DIR) { removeTree(path + "/" + name) } else { unlink(path + "/" + name) }
        }
        closedir(dir)
        rmdir(path)
    }

    static func writeFile(_ path: String, _ text: String) throws {
        guard let fp = fopen(path, "w") else { throw SoakError("cannot write \(path)") }
        defer { fclose(fp) }
        _ = text.withCString { fputs($0, fp) }
    }

    /// Starts `path` with `arguments`, stdout and stderr appended to `log`, stdin from /dev/null.
    static func spawn(_ path: String, _ arguments: [String], log: String) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let variables: [String] = ["PATH=/usr/bin:/bin", "TZ=UTC"] + sanitizerEnvironment().map { "\($0.key)=\($0.value)" }
        var env: [UnsafeMutablePointer<CChar>?] = variables.map { strdup($0) } + [nil]
        defer { for pointer in env { free(pointer) } }
        var pid = pid_t()
        let rc = posix_spawn(&pid, path, &actions, nil, argv, &env)
        guard rc == 0 else { throw SoakError("posix_spawn \(path): \(String(cString: strerror(rc)))") }
        return pid
    }

    /// Waits for the child; its exit status, 128 + signal when killed, -1 when it had to be killed
    /// after `seconds`.
    static func wait(_ pid: pid_t, seconds: Int) -> Int32 {
        let deadline = Self.nowMillis() + Int64(seconds) * 1000
        var status: Int32 = 0
        while true {
            let rc = waitpid(pid, &status, WNOHANG)
            if rc == pid {
                if status & 0x7F == 0 { return (status >> 8) & 0xFF }
                return 128 + (status & 0x7F)
            }
            if rc < 0 { return -2 }
            if Self.nowMillis() > deadline {
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
                return -1
            }
            usleep(20_000)
        }
    }

    static func waitForSocket(_ path: String, seconds: Int) async -> Bool {
        let deadline = Self.nowMillis() + Int64(seconds) * 1000
        while Self.nowMillis() < deadline {
            if let client = try? VarlinkClient(socketPath: path) {
                let ok = (try? await client.call("io.sugard.HealthDataSync.GetStatus")) != nil
                client.close()
                if ok { return true }
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    static func fileDescriptors(_ pid: pid_t) -> Int {
        guard let dir = opendir("/proc/\(pid)/fd") else { return -1 }
        defer { closedir(dir) }
        var count = 0
        while let entry = readdir(dir) {
            if entry.pointee.d_name.0 != UInt8(ascii: ".") { count += 1 }
        }
        return count
    }

    static func rssBytes(_ pid: pid_t) -> Int {
        guard let fp = fopen("/proc/\(pid)/status", "r") else { return -1 }
        defer { fclose(fp) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, Int32(line.count), fp) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if text.hasPrefix("VmRSS:") { return (Int(text.dropFirst(6).filter(\.isNumber)) ?? -1) * 1024 }
        }
        return -1
    }
}

struct SoakError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
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
