import GlucoseStore
import GlucoseStoreFixtures
import HealthDataSync
import JSON
import Locking
import Varlink

#if canImport(Glibc)
import Glibc
#endif
import SystemIO

/// `sugar-bench scale startup|watch`: the figures of issue 39 that grow with a user's data or
/// clients, measured on the built `sugard` (next to sugar-bench) as a child process.
///
/// - `startup [--sizes 10000,100000,1000000]`: for each size a store made by the raw ingest, then
///   sugard started on it (BlueZ mode on a private bus with no bluetoothd) until its first
///   `GetStatus` answer (`readyMillis`, best of 3: spawn to the answer, exec included); beside it the
///   store's own open with and without the whole-file `quick_check` the daemon no longer runs on
///   the way to ready (`openMillis`, `openWithQuickCheckMillis`), and how long the background
///   `quick_check` and an `integrity_check` (`sugarctl check`) take at that size.
/// - `watch [--watchers 1000] [--meters 50] [--records 600]`: sugard with `--meters` simulated
///   meters (all connected at once, `max_connections` = meters) holding `--records` records each,
///   which they download as soon as sugard starts; `--watchers` whole-state `Watch` clients and one
///   `GetStatus` caller connect meanwhile. From the moment every watcher has its snapshot to the end
///   of the syncs (`measuredSeconds`): sugard's CPU (`daemonCores`: user+system time / wall
///   time), how far the last watcher is behind the first for each revision (`lastWatcherBehindMillis`
///   p50/p99: when every watcher has that revision or a later one, minus when the first had it),
///   `GetStatus` round trips p50/p99, and sugard's peak RSS.
enum ScaleBenchmark {
    struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    static func run(_ what: String, options: [String: String]) async -> Int32 {
        let sugard = siblingProgram("sugard")
        guard access(sugard, X_OK) == 0 else {
            writeStderr("sugar-bench scale: \(sugard) not found; build sugard first\n")
            return 1
        }
        do {
            let object: JSONObject
            switch what {
            case "startup":
                let sizes = (options["--sizes"] ?? "10000,100000,1000000").split(separator: ",").compactMap { Int($0) }
                guard !sizes.isEmpty, sizes.allSatisfy({ $0 > 0 }) else { throw Failure("--sizes takes positive counts, comma-separated") }
                object = try await Self.startup(sugard: sugard, sizes: sizes)
            case "watch":
                let watchers = Int(options["--watchers"] ?? "1000") ?? 0
                let meters = Int(options["--meters"] ?? "50") ?? 0
                let records = Int(options["--records"] ?? "600") ?? 0
                guard watchers > 0, (1...64).contains(meters), records > 0 else {
                    throw Failure("--watchers and --records must be positive, --meters 1 to 64")
                }
                object = try await Self.watch(sugard: sugard, watchers: watchers, meters: meters, records: records)
            default:
                throw Failure("scale takes startup or watch")
            }
            writeStdout(JSONValue.object(object).serialized() + "\n")
            return 0
        } catch {
            writeStderr("sugar-bench scale \(what): \(error)\n")
            return 1
        }
    }

    static func millis(_ d: Duration) -> Double {
        Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
    }

    // MARK: Start-up

    static func startup(sugard: String, sizes: [Int]) async throws -> JSONObject {
        guard let scratch = makeScratchDirectory("sugar-bench-scale", for: "scale") else { throw Failure("no scratch directory") }
        let database = scratch + "/sugard.sqlite"
        defer {
            removeScratchDirectory(
                scratch, files: ["s", "sugard.sqlite", "sugard.sqlite-wal", "sugard.sqlite-shm", "sugard.sqlite.running", "ingest-raw.sqlite"])
        }
        guard let bus = PrivateBus() else { throw Failure("cannot start dbus-daemon --session") }
        defer { bus.stop() }
        var rows: [JSONValue] = []
        let clock = ContinuousClock()
        for size in sizes {
            for suffix in ["", "-wal", "-shm"] { unlink(database + suffix) }
            let made = try await IngestBenchmark.run(count: size, raw: true, directory: scratch)
            guard rename(scratch + "/ingest-raw.sqlite", database) == 0 else { throw Failure("cannot move the store into place") }
            // Warm the page cache the same way for every measurement below.
            _ = try? readFile(database)
            var row: JSONObject = ["readings": .int(Int64(made.stored)), "databaseBytes": .int(Int64(made.databaseBytes))]

            var open: [Double] = []
            var openChecked: [Double] = []
            for _ in 0..<3 {
                var start = clock.now
                let plain = try SQLiteReadingStore(path: database, options: StoreOptions(quickCheckOnOpen: false))
                _ = try await plain.readingCount(meter: nil)
                open.append(Self.millis(clock.now - start))
                await plain.close()
                start = clock.now
                let checked = try SQLiteReadingStore(path: database)
                _ = try await checked.readingCount(meter: nil)
                openChecked.append(Self.millis(clock.now - start))
                await checked.close()
            }
            row["openMillis"] = .double(open.min() ?? 0)
            row["openWithQuickCheckMillis"] = .double(openChecked.min() ?? 0)

            var ready: [Double] = []
            for _ in 0..<3 {
                unlink(database + ".running")
                let start = clock.now
                let daemon = try await Child.start(sugard, scratch: scratch, config: nil, environment: ["DBUS_SYSTEM_BUS_ADDRESS=" + bus.address])
                ready.append(Self.millis(clock.now - start))
                if ready.count == 3 {
                    // The checks at this size, through the running daemon (its own connection and thread).
                    let client = try daemon.client()
                    let full = try await client.call("io.sugard.HealthDataSync.CheckStorage")
                    client.close()
                    if let check = full["check"], let begun = check["startedAt"]?["epochMillis"]?.intValue,
                        let ended = check["finishedAt"]?["epochMillis"]?.intValue
                    {
                        row["integrityCheckMillis"] = .int(ended - begun)
                        row["integrityCheckResult"] = check["result"] ?? .null
                    }
                }
                daemon.stop()
            }
            row["readyMillis"] = .double(ready.min() ?? 0)
            row["readyMillisAll"] = .array(ready.map { .double($0) })

            let store = try SQLiteReadingStore(path: database, options: StoreOptions(quickCheckOnOpen: false))
            let quick = await store.check(.quick, reason: .requested)
            await store.close()
            row["quickCheckMillis"] = .int((quick.finished?.epochMillis ?? 0) - quick.started.epochMillis)
            rows.append(.object(row))
        }
        return ["benchmark": "scale startup", "rows": .array(rows)]
    }

    // MARK: Watchers during a sync

    static func watch(sugard: String, watchers: Int, meters: Int, records: Int) async throws -> JSONObject {
        guard let scratch = makeScratchDirectory("sugar-bench-scale", for: "scale") else { throw Failure("no scratch directory") }
        defer {
            removeScratchDirectory(
                scratch, files: ["s", "sugard.conf", "sugard.sqlite", "sugard.sqlite-wal", "sugard.sqlite-shm", "sugard.sqlite.running"])
        }
        // One record a second per meter, all taken before sugard starts: every meter syncs them as
        // soon as it appears, all at once (max_connections = meters). The watchers connect meanwhile;
        // the measurement runs from the moment all of them have their snapshot to the end of the syncs.
        let now = Int64(time(nil))
        let config = """
            simulate_meters = \(meters)
            simulate_start = \(now - Int64(records))
            simulate_stop = \(now - 1)
            simulate_delay_us = 20000
            demo_interval = 1
            cooldown_seconds = 3600
            max_connections = \(meters)
            max_socket_connections = \(watchers + 64)
            max_connections_per_uid = \(watchers + 64)
            timezone = UTC
            log_level = warning

            """
        try writeFile(scratch + "/sugard.conf", Array(config.utf8))
        // A socket and a reader thread per watcher: well past the default soft limit of 1024 files.
        _ = raiseOpenFilesLimit()
        let daemon = try await Child.start(sugard, scratch: scratch, config: scratch + "/sugard.conf", environment: [])
        defer { daemon.stop() }

        // Watchers: whole state, coalesced (the default), on plain sockets read by one poll thread
        // that only looks for each reply's revision: a Varlink client per watcher parsing every
        // state it gets would make this process, not sugard, the bottleneck (and sugard drops a
        // watcher that does not read). Each watcher logs (revision, arrival).
        let log = ArrivalLog(watchers: watchers)
        let raw = try RawWatchers(socket: daemon.socket, count: watchers)
        let caller = try VarlinkClient(socketPath: daemon.socket)
        defer {
            raw.stop()
            caller.close()
        }
        raw.start(log)
        let measured: (cpuSeconds: Double, wall: Double, statusMicros: [Int64]) = try await {
            // Every watcher has its snapshot before the measurement starts.
            for _ in 0..<18_000 where !log.everyWatcherHasOne { try await Task.sleep(for: .milliseconds(10)) }
            guard log.everyWatcherHasOne else {
                throw Failure("only \(log.watchersWithAReply) of \(watchers) watchers got their first reply within 180 s")
            }
            let cpuBefore = daemon.cpuSeconds()
            let clock = ContinuousClock()
            let start = clock.now
            // GetStatus in a loop (5 ms apart) until no meter syncs any more.
            var samples: [Int64] = []
            var sawSyncing = false
            while true {
                let began = clock.now
                let status = try await caller.call("io.sugard.HealthDataSync.GetStatus")
                let (s, atto) = (clock.now - began).components
                samples.append(s * 1_000_000 + atto / 1_000_000_000_000)
                let list = status["state"]?["meters"]?.arrayValue ?? []
                let syncing = list.contains { !["idle", "done", "failed", "waitingToRetry"].contains($0["sync"]?.stringValue ?? "idle") }
                sawSyncing = sawSyncing || syncing
                if list.count == meters && !syncing { break }
                if clock.now - start > .seconds(900) { throw Failure("the syncs did not end within 15 minutes") }
                try await Task.sleep(for: .milliseconds(5))
            }
            guard sawSyncing else { throw Failure("the syncs ended before every watcher was connected; raise --records") }
            let wall = Self.millis(clock.now - start) / 1000
            let cpu = daemon.cpuSeconds() - cpuBefore
            // Let the last replies land.
            try await Task.sleep(for: .seconds(1))
            return (cpu, wall, samples)
        }()
        let dropped = raw.stop()
        if let error = raw.firstError { writeStderr("sugar-bench scale watch: a watcher ended with \(error)\n") }
        var lags = log.lastBehindFirstMillis()
        lags.sort()
        var status = measured.statusMicros
        status.sort()
        func percentile<T: Numeric & Comparable>(_ values: [T], _ p: Double) -> T {
            values.isEmpty ? 0 : values[min(values.count - 1, Int(Double(values.count - 1) * p))]
        }
        return [
            "benchmark": "scale watch", "watchers": .int(Int64(watchers)), "meters": .int(Int64(meters)),
            "recordsPerMeter": .int(Int64(records)), "measuredSeconds": .double(measured.wall),
            "daemonCores": .double(measured.wall > 0 ? measured.cpuSeconds / measured.wall : 0),
            "revisions": .int(Int64(lags.count)),
            "lastWatcherBehindMillisP50": .double(percentile(lags, 0.5)),
            "lastWatcherBehindMillisP99": .double(percentile(lags, 0.99)),
            "getStatusCalls": .int(Int64(status.count)),
            "getStatusP50Micros": .int(percentile(status, 0.5)), "getStatusP99Micros": .int(percentile(status, 0.99)),
            "daemonPeakRSSBytes": .from(peakResidentSetBytes(pid: daemon.pid)),
            "watchersDropped": .int(Int64(dropped)),
        ]
    }

    /// sugard as a child process on a scratch state directory and socket.
    final class Child {
        let pid: pid_t
        let socket: String
        private var running = true

        private init(pid: pid_t, socket: String) {
            self.pid = pid
            self.socket = socket
        }

        /// Starts sugard and returns when its first `GetStatus` is answered (polled every 2 ms).
        static func start(_ sugard: String, scratch: String, config: String?, environment: [String]) async throws -> Child {
            let socket = scratch + "/s"
            unlink(socket)
            let arguments = [sugard, "--state-dir", scratch, "--socket", socket] + (config.map { ["--config", $0] } ?? [])
            guard let pid = spawnQuietly(arguments, environment: environment) else { throw Failure("cannot start sugard") }
            let child = Child(pid: pid, socket: socket)
            for _ in 0..<30_000 {
                if access(socket, F_OK) == 0, let client = try? child.client() {
                    defer { client.close() }
                    if (try? await client.call("io.sugard.HealthDataSync.GetStatus")) != nil { return child }
                }
                try await Task.sleep(for: .milliseconds(2))
            }
            child.stop()
            throw Failure("sugard did not answer GetStatus in 60 s")
        }

        func client() throws -> VarlinkClient { try VarlinkClient(socketPath: self.socket) }

        /// User + system CPU time so far, in seconds.
        func cpuSeconds() -> Double { Double(ForwardBenchmark.cpuMicros(self.pid)) / 1_000_000 }

        func stop() {
            guard self.running else { return }
            self.running = false
            kill(self.pid, SIGTERM)
            var status: Int32 = 0
            _ = retryingInterrupted { waitpid(self.pid, &status, 0) }
        }
    }
}

/// Per watcher: the revisions it got and when (monotonic nanoseconds).
final class ArrivalLog: Sendable {
    private let log: Lock<[[(revision: Int64, at: UInt64)]]>

    init(watchers: Int) { self.log = Lock(Array(repeating: [], count: watchers)) }

    func record(_ watcher: Int, revision: Int64, at: UInt64) { self.log.withLock { $0[watcher].append((revision, at)) } }

    var everyWatcherHasOne: Bool { self.log.withLock { $0.allSatisfy { !$0.isEmpty } } }
    var watchersWithAReply: Int { self.log.withLock { $0.filter { !$0.isEmpty }.count } }
    var maxRevision: Int64 { self.log.withLock { $0.compactMap { $0.last?.revision }.max() ?? 0 } }

    /// For each revision some watcher got after its snapshot: when every watcher had it (or a
    /// later one) minus when the first did, in milliseconds.
    func lastBehindFirstMillis() -> [Double] {
        let log = self.log.withLock { $0 }
        var first: [Int64: UInt64] = [:]
        for watcher in log {
            for entry in watcher.dropFirst() where first[entry.revision].map({ entry.at < $0 }) ?? true { first[entry.revision] = entry.at }
        }
        var lags: [Double] = []
        for (revision, at) in first {
            var last: UInt64 = at
            var everyone = true
            for watcher in log {
                guard let reached = watcher.first(where: { $0.revision >= revision }) else {
                    everyone = false
                    break
                }
                last = max(last, reached.at)
            }
            if everyone { lags.append(Double(last - at) / 1e6) }
        }
        return lags
    }
}

/// Whole-state watchers on plain Unix sockets, all read by one thread with poll(2): each sends a
/// `Watch` call with `more` and then only looks for `"revision":` in every NUL-terminated reply.
final class RawWatchers: @unchecked Sendable {
    // Invariant for @unchecked Sendable: `fds` never changes after init; the buffers are only
    // touched by the poll thread; `state` is behind its lock.
    private let fds: [Int32]
    private let state = Lock((running: true, finished: false, ended: 0, firstError: String?.none))

    /// The first error reply a watcher got (why sugard ended it), if any.
    var firstError: String? { self.state.withLock { $0.firstError } }

    init(socket: String, count: Int) throws {
        var fds: [Int32] = []
        let request = Array(#"{"method":"io.sugard.HealthDataSync.Watch","parameters":{},"more":true}"#.utf8) + [0]
        for _ in 0..<count {
            let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else {
                for open in fds { close(open) }
                throw ScaleBenchmark.Failure("socket: \(String(cString: strerror(errno)))")
            }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let path = Array(socket.utf8)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                for (i, byte) in path.prefix(raw.count - 1).enumerated() { raw[i] = byte }
            }
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard connected == 0, request.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == request.count else {
                close(fd)
                for open in fds { close(open) }
                throw ScaleBenchmark.Failure("connect \(socket): \(String(cString: strerror(errno)))")
            }
            fds.append(fd)
        }
        self.fds = fds
    }

    /// Starts the poll thread.
    func start(_ log: ArrivalLog) {
        let marker = Array(#""revision":"#.utf8)
        _ = startDetachedThread { [self] in
            var polls = self.fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            var pending = Array(repeating: [UInt8](), count: self.fds.count)
            var open = Array(repeating: true, count: self.fds.count)
            var chunk = [UInt8](repeating: 0, count: 256 * 1024)
            while self.state.withLock({ $0.running }) {
                let ready = poll(&polls, nfds_t(polls.count), 100)
                if ready <= 0 { continue }
                let now = UInt64(monotonicNanoseconds())
                for index in polls.indices where polls[index].revents != 0 && open[index] {
                    let n = chunk.withUnsafeMutableBytes { read(self.fds[index], $0.baseAddress, $0.count) }
                    if n <= 0 {
                        open[index] = false
                        polls[index].fd = -1
                        self.state.withLock { $0.ended += 1 }
                        continue
                    }
                    pending[index].append(contentsOf: chunk[0..<n])
                    var from = pending[index].startIndex
                    while let end = pending[index][from...].firstIndex(of: 0) {
                        let message = pending[index][from..<end]
                        from = end + 1
                        if let revision = Self.revision(in: message, marker: marker) {
                            log.record(index, revision: revision, at: now)
                        } else if message.starts(with: Array(#"{"error""#.utf8)) {
                            self.state.withLock { state in
                                if state.firstError == nil { state.firstError = String(decoding: message.prefix(300), as: UTF8.self) }
                            }
                        }
                    }
                    pending[index].removeSubrange(..<from)
                }
            }
            self.state.withLock { $0.finished = true }
        }
    }

    /// The number after the first `"revision":`.
    static func revision(in message: ArraySlice<UInt8>, marker: [UInt8]) -> Int64? {
        guard let range = message.firstRange(of: marker) else { return nil }
        var value: Int64 = 0
        var index = range.upperBound
        var digits = 0
        while index < message.endIndex, message[index] >= 0x30, message[index] <= 0x39 {
            value = value * 10 + Int64(message[index] - 0x30)
            index += 1
            digits += 1
        }
        return digits > 0 ? value : nil
    }

    /// Stops the thread, closes the sockets; returns how many watchers sugard had ended (dropped).
    @discardableResult
    func stop() -> Int {
        let (wasRunning, ended) = self.state.withLock { state -> (Bool, Int) in
            let was = state.running
            state.running = false
            return (was, state.ended)
        }
        guard wasRunning else { return ended }
        while !self.state.withLock({ $0.finished }) { usleep(10_000) }
        for fd in self.fds { close(fd) }
        return ended
    }
}
