import GlucoseStoreFixtures
import JSON
import Locking
import Varlink

#if canImport(Glibc)
import Glibc
#endif
import SystemIO

extension ScaleBenchmark {
    /// `scale watch`: what `watchers` whole-state `Watch` clients cost sugard during a sync of
    /// `meters` simulated meters of `records` records each.
    ///
    /// Each round runs the same sync twice on a fresh store, once with the watchers and once with
    /// none (the order alternates between rounds, so a drift in the machine's load favours
    /// neither); both runs have the same `GetStatus` caller (one call every 5 ms, which also tells
    /// when the syncs end). The simulated meters run inside sugard, so their work is in its CPU
    /// time: the watchers' cost is the difference (`watcherCores`: the CPU seconds with the
    /// watchers minus those without, each measured from ready to the end of the syncs, divided by
    /// the run with watchers' length; the watchers connect at ready, so their snapshots are part
    /// of their cost; `watcherCPUMicrosPerReply`: the same difference per reply a watcher got).
    ///
    /// Lag, with the watchers: `commitToLastWatcherMillis` is, for each new `lastReading` a watcher
    /// got, when the last watcher had it (or a later state) minus when the store stored it (its
    /// `storedAt`, the wall clock at the commit), so it includes waiting for the next reply;
    /// `lastWatcherBehindFirstMillis` is, for each revision, when the last watcher had it minus
    /// when the first did (the spread of one fan-out). `commitToStatusMillisP50` is, in both runs,
    /// how long a new lastReading took from its `storedAt` to the `GetStatus` caller seeing it (the
    /// part of the lag before any watcher, polled every 5 ms). `GetStatus` round trips are given
    /// for both runs. Every figure is the median of the rounds; `runs` has each run.
    static func watch(sugard: String, watchers: Int, meters: Int, records: Int, rounds: Int) async throws -> JSONObject {
        let loadBefore = Self.loadAverage()
        var pairs: [(with: WatchRun, without: WatchRun)] = []
        for round in 0..<rounds {
            var with: WatchRun
            var without: WatchRun
            if round % 2 == 0 {
                with = try await Self.watchRun(sugard: sugard, watchers: watchers, meters: meters, records: records)
                without = try await Self.watchRun(sugard: sugard, watchers: 0, meters: meters, records: records)
            } else {
                without = try await Self.watchRun(sugard: sugard, watchers: 0, meters: meters, records: records)
                with = try await Self.watchRun(sugard: sugard, watchers: watchers, meters: meters, records: records)
            }
            pairs.append((with, without))
        }
        func median(_ values: [Double]) -> Double {
            let sorted = values.sorted()
            guard !sorted.isEmpty else { return 0 }
            return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        }
        func rounded(_ x: Double, _ digits: Double = 1000) -> JSONValue { .double((x * digits).rounded() / digits) }
        // The same sync's CPU time with and without the watchers, the difference spread over the
        // run with them: on a machine too busy to give sugard what it asks for, the run with
        // watchers takes longer and a difference of cores would hide their cost.
        let costs = pairs.map { ($0.with.cpuSeconds - $0.without.cpuSeconds) / max(0.001, $0.with.measuredSeconds) }
        let perReply = pairs.map { pair -> Double in
            let replies = pair.with.repliesPerWatcherPerSecond * Double(watchers) * pair.with.measuredSeconds
            return replies > 0 ? (pair.with.cpuSeconds - pair.without.cpuSeconds) * 1e6 / replies : 0
        }
        return [
            "benchmark": "scale watch", "watchers": .int(Int64(watchers)), "meters": .int(Int64(meters)),
            "recordsPerMeter": .int(Int64(records)), "rounds": .int(Int64(rounds)),
            "watcherCores": rounded(median(costs)), "watcherCoresAll": .array(costs.map { rounded($0) }),
            "watcherCPUMicrosPerReply": rounded(median(perReply), 100),
            "daemonCoresWithWatchers": rounded(median(pairs.map(\.with.cores))),
            "daemonCoresWithoutWatchers": rounded(median(pairs.map(\.without.cores))),
            "commitToLastWatcherMillisP50": rounded(median(pairs.map { Self.percentile($0.with.commitToLast, 0.5) })),
            "commitToLastWatcherMillisP99": rounded(median(pairs.map { Self.percentile($0.with.commitToLast, 0.99) })),
            "lastWatcherBehindFirstMillisP50": rounded(median(pairs.map { Self.percentile($0.with.lastBehindFirst, 0.5) })),
            "lastWatcherBehindFirstMillisP99": rounded(median(pairs.map { Self.percentile($0.with.lastBehindFirst, 0.99) })),
            "getStatusP50Micros": rounded(median(pairs.map { Double(Self.percentile($0.with.statusMicros, 0.5)) }), 1),
            "getStatusP99Micros": rounded(median(pairs.map { Double(Self.percentile($0.with.statusMicros, 0.99)) }), 1),
            "getStatusWithoutWatchersP50Micros": rounded(median(pairs.map { Double(Self.percentile($0.without.statusMicros, 0.5)) }), 1),
            "commitToStatusMillisP50": rounded(median(pairs.map { Self.percentile($0.with.commitToStatus, 0.5) })),
            "commitToStatusWithoutWatchersMillisP50": rounded(median(pairs.map { Self.percentile($0.without.commitToStatus, 0.5) })),
            "getStatusWithoutWatchersP99Micros": rounded(median(pairs.map { Double(Self.percentile($0.without.statusMicros, 0.99)) }), 1),
            "repliesPerWatcherPerSecond": rounded(median(pairs.map(\.with.repliesPerWatcherPerSecond)), 10),
            "bytesPerReply": rounded(median(pairs.map(\.with.bytesPerReply)), 1),
            "daemonPeakRSSBytes": .int(Int64(pairs.compactMap(\.with.peakRSS).max() ?? 0)),
            "watchersDropped": .int(Int64(pairs.map(\.with.dropped).reduce(0, +))),
            "loadAverage": .array([.string(loadBefore), .string(Self.loadAverage())]),
            "runs": .array(pairs.flatMap { [$0.with.json, $0.without.json] }),
        ]
    }

    /// One run of ``watch(sugard:watchers:meters:records:rounds:)``.
    struct WatchRun {
        var watchers: Int
        /// From ready to the end of the syncs.
        var measuredSeconds: Double
        /// From ready to the moment every watcher had its snapshot.
        var snapshotsSeconds: Double
        var cpuSeconds: Double
        var statusMicros: [Int64]
        var commitToStatus: [Double]
        var commitToLast: [Double]
        var lastBehindFirst: [Double]
        var repliesPerWatcherPerSecond: Double
        var bytesPerReply: Double
        var peakRSS: Int?
        var dropped: Int

        var cores: Double { self.measuredSeconds > 0 ? self.cpuSeconds / self.measuredSeconds : 0 }

        var json: JSONValue {
            func rounded(_ x: Double) -> JSONValue { .double((x * 1000).rounded() / 1000) }
            var object: JSONObject = [
                "watchers": .int(Int64(self.watchers)), "snapshotsSeconds": rounded(self.snapshotsSeconds),
                "measuredSeconds": rounded(self.measuredSeconds), "cpuSeconds": rounded(self.cpuSeconds),
                "daemonCores": rounded(self.cores), "getStatusCalls": .int(Int64(self.statusMicros.count)),
                "getStatusP50Micros": .int(ScaleBenchmark.percentile(self.statusMicros, 0.5)),
                "getStatusP99Micros": .int(ScaleBenchmark.percentile(self.statusMicros, 0.99)),
                "daemonPeakRSSBytes": .from(self.peakRSS),
                "commitToStatusMillisP50": rounded(ScaleBenchmark.percentile(self.commitToStatus, 0.5)),
            ]
            if self.watchers > 0 {
                object["commitSamples"] = .int(Int64(self.commitToLast.count))
                object["commitToLastWatcherMillisP50"] = rounded(ScaleBenchmark.percentile(self.commitToLast, 0.5))
                object["commitToLastWatcherMillisP99"] = rounded(ScaleBenchmark.percentile(self.commitToLast, 0.99))
                object["revisions"] = .int(Int64(self.lastBehindFirst.count))
                object["lastWatcherBehindFirstMillisP50"] = rounded(ScaleBenchmark.percentile(self.lastBehindFirst, 0.5))
                object["lastWatcherBehindFirstMillisP99"] = rounded(ScaleBenchmark.percentile(self.lastBehindFirst, 0.99))
                object["repliesPerWatcherPerSecond"] = rounded(self.repliesPerWatcherPerSecond)
                object["bytesPerReply"] = .int(Int64(self.bytesPerReply))
                object["watchersDropped"] = .int(Int64(self.dropped))
            }
            return .object(object)
        }
    }

    static func percentile<T: Numeric & Comparable>(_ values: [T], _ p: Double) -> T {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p))]
    }

    /// The first three fields of /proc/loadavg.
    static func loadAverage() -> String {
        guard let bytes = try? readFile("/proc/loadavg") else { return "" }
        return String(decoding: bytes, as: UTF8.self).split(separator: " ").prefix(3).joined(separator: " ")
    }

    /// sugard on a fresh store with `meters` simulated meters that sync as soon as it starts;
    /// `watchers` whole-state watchers connect at once (their snapshots are part of what they
    /// cost); measured from ready to the end of the syncs.
    static func watchRun(sugard: String, watchers: Int, meters: Int, records: Int) async throws -> WatchRun {
        guard let scratch = makeScratchDirectory("sugar-bench-scale", for: "scale") else { throw Failure("no scratch directory") }
        defer {
            removeScratchDirectory(
                scratch, files: ["s", "sugard.conf", "sugard.sqlite", "sugard.sqlite-wal", "sugard.sqlite-shm", "sugard.sqlite.running"])
        }
        // One record a second per meter, all taken before sugard starts: every meter syncs them as
        // soon as it appears, all at once (max_connections = meters).
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
        // A socket per watcher: well past the default soft limit of 1024 files.
        _ = raiseOpenFilesLimit()
        let daemon = try await Child.start(sugard, scratch: scratch, config: scratch + "/sugard.conf", environment: [])
        defer { daemon.stop() }
        let clock = ContinuousClock()
        let cpuBefore = daemon.cpuSeconds()
        let start = clock.now
        let startWallMillis = wallClockMilliseconds()
        let startMono = UInt64(monotonicNanoseconds())

        // Watchers: whole state, coalesced (the default), on plain sockets read by one poll thread
        // that only looks for each reply's revision and its lastReading's storedAt: a Varlink
        // client per watcher parsing every state it gets would make this process, not sugard,
        // the bottleneck (and sugard drops a watcher that does not read).
        let log = ArrivalLog(watchers: watchers)
        let raw = try RawWatchers(socket: daemon.socket, count: watchers)
        let caller = try VarlinkClient(socketPath: daemon.socket)
        defer {
            raw.stop()
            caller.close()
        }
        raw.start(log)
        // GetStatus in a loop (5 ms apart) until no meter syncs any more.
        var samples: [Int64] = []
        var sawSyncing = false
        var snapshots: ContinuousClock.Instant?
        // How long a new lastReading takes from its storedAt to GetStatus (the part of the lag
        // before any watcher: the commit, the sync engine's event, the view model), in both runs.
        var lastStored: Int64 = 0
        var toStatus: [Double] = []
        while true {
            if snapshots == nil, log.everyWatcherHasOne { snapshots = clock.now }
            let began = clock.now
            let status = try await caller.call("io.sugard.HealthDataSync.GetStatus")
            let (s, atto) = (clock.now - began).components
            samples.append(s * 1_000_000 + atto / 1_000_000_000_000)
            if let stored = status["state"]?["lastReading"]?["storedAt"]?["epochMillis"]?.intValue, stored != lastStored {
                if lastStored != 0, stored >= startWallMillis { toStatus.append(Double(wallClockMicroseconds() - stored * 1000) / 1000) }
                lastStored = stored
            }
            let list = status["state"]?["meters"]?.arrayValue ?? []
            let syncing = list.contains { !["idle", "done", "failed", "waitingToRetry"].contains($0["sync"]?.stringValue ?? "idle") }
            sawSyncing = sawSyncing || syncing
            if list.count == meters && !syncing { break }
            if clock.now - start > .seconds(900) { throw Failure("the syncs did not end within 15 minutes") }
            try await Task.sleep(for: .milliseconds(5))
        }
        guard sawSyncing else { throw Failure("no meter was syncing; raise --records") }
        guard let snapshots else {
            throw Failure("only \(log.watchersWithAReply) of \(watchers) watchers got their first reply before the syncs ended; raise --records")
        }
        let wall = Self.millis(clock.now - start) / 1000
        let cpu = daemon.cpuSeconds() - cpuBefore
        let endMono = UInt64(monotonicNanoseconds())
        // Let the last replies land.
        if watchers > 0 { try await Task.sleep(for: .seconds(1)) }
        let dropped = raw.stop()
        if let error = raw.firstError { writeStderr("sugar-bench scale watch: a watcher ended with \(error)\n") }
        let counted = log.replies(from: startMono, to: endMono)
        return WatchRun(
            watchers: watchers, measuredSeconds: wall, snapshotsSeconds: Self.millis(snapshots - start) / 1000, cpuSeconds: cpu,
            statusMicros: samples, commitToStatus: toStatus, commitToLast: log.commitToLastMillis(storedFrom: startWallMillis),
            lastBehindFirst: log.lastBehindFirstMillis(from: startMono),
            repliesPerWatcherPerSecond: watchers > 0 ? Double(counted.replies) / Double(watchers) / wall : 0,
            bytesPerReply: counted.replies > 0 ? Double(counted.bytes) / Double(counted.replies) : 0,
            peakRSS: peakResidentSetBytes(pid: daemon.pid), dropped: dropped)
    }
}

/// Per watcher: the replies it got after its snapshot's, each with its revision, its size, when it
/// arrived (monotonic nanoseconds and wall-clock microseconds) and its lastReading's `storedAt`
/// (epoch milliseconds) when it carries one.
final class ArrivalLog: Sendable {
    struct Arrival {
        var revision: Int64
        var bytes: Int
        var at: UInt64
        var wallMicros: Int64
        var storedAtMillis: Int64?
    }

    private let log: Lock<[[Arrival]]>

    init(watchers: Int) { self.log = Lock(Array(repeating: [], count: watchers)) }

    func record(_ watcher: Int, _ arrival: Arrival) { self.log.withLock { $0[watcher].append(arrival) } }

    var everyWatcherHasOne: Bool { self.log.withLock { $0.allSatisfy { !$0.isEmpty } } }
    var watchersWithAReply: Int { self.log.withLock { $0.filter { !$0.isEmpty }.count } }

    /// Replies (after the snapshots) that arrived between two monotonic instants, and their bytes.
    func replies(from start: UInt64, to end: UInt64) -> (replies: Int, bytes: Int) {
        self.log.withLock { log in
            var count = 0
            var bytes = 0
            for watcher in log {
                for arrival in watcher.dropFirst() where arrival.at >= start && arrival.at <= end {
                    count += 1
                    bytes += arrival.bytes
                }
            }
            return (count, bytes)
        }
    }

    /// For each revision some watcher got after `start` (monotonic): when every watcher had it (or
    /// a later one) minus when the first did, in milliseconds.
    func lastBehindFirstMillis(from start: UInt64) -> [Double] {
        let log = self.log.withLock { $0 }
        var first: [Int64: UInt64] = [:]
        for watcher in log {
            for entry in watcher.dropFirst() where entry.at >= start && first[entry.revision].map({ entry.at < $0 }) ?? true {
                first[entry.revision] = entry.at
            }
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

    /// For each lastReading stored at or after `storedFrom` (epoch milliseconds) that reached a
    /// watcher: when the last watcher had a state that includes it (the first reply whose revision
    /// is at least that of the first reply carrying it) minus its `storedAt`, in milliseconds.
    func commitToLastMillis(storedFrom: Int64) -> [Double] {
        let log = self.log.withLock { $0 }
        var revisionOf: [Int64: Int64] = [:]
        for watcher in log {
            for entry in watcher.dropFirst() {
                guard let stored = entry.storedAtMillis, stored >= storedFrom else { continue }
                revisionOf[stored] = min(revisionOf[stored] ?? .max, entry.revision)
            }
        }
        var lags: [Double] = []
        for (stored, revision) in revisionOf {
            var last: Int64 = .min
            var everyone = true
            for watcher in log {
                guard let reached = watcher.first(where: { $0.revision >= revision }) else {
                    everyone = false
                    break
                }
                last = max(last, reached.wallMicros)
            }
            if everyone { lags.append(Double(last - stored * 1000) / 1000) }
        }
        return lags
    }
}

/// Whole-state watchers on plain Unix sockets, all read by one thread with poll(2): each sends a
/// `Watch` call with `more` and then only looks for `"revision":` and the `"storedAt"` of
/// `"lastReading"` in every NUL-terminated reply.
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
        // Each with a byte of it that is rare in a state (memchr finds it fast): a generic search
        // through every ~20 KB reply made this thread, not sugard, the bottleneck.
        let marker = Pattern(#""revision":"#, anchor: "v")
        let storedAt = Pattern(#""storedAt":"#, anchor: "A")
        let epochMillis = Pattern(#""epochMillis":"#, anchor: "M")
        let lastReading = Pattern(#""lastReading":{"#, anchor: "R")
        _ = startDetachedThread { [self] in
            var polls = self.fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            var pending = Array(repeating: [UInt8](), count: self.fds.count)
            var open = Array(repeating: true, count: self.fds.count)
            var chunk = [UInt8](repeating: 0, count: 256 * 1024)
            while self.state.withLock({ $0.running }) {
                let ready = poll(&polls, nfds_t(polls.count), 100)
                if ready <= 0 { continue }
                let now = UInt64(monotonicNanoseconds())
                let wall = wallClockMicroseconds()
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
                        let found = message.withUnsafeBytes { bytes -> (revision: Int64, stored: Int64?)? in
                            guard let revision = marker.end(in: bytes, from: 0).flatMap({ Self.number(at: $0, in: bytes) }) else { return nil }
                            // The storedAt of the lastReading (the only storedAt a state carries).
                            var stored: Int64?
                            if let reading = lastReading.end(in: bytes, from: 0), let at = storedAt.end(in: bytes, from: reading),
                                let millis = epochMillis.end(in: bytes, from: at), millis - at < 96
                            {
                                stored = Self.number(at: millis, in: bytes)
                            }
                            return (revision, stored)
                        }
                        if let found {
                            log.record(
                                index,
                                ArrivalLog.Arrival(revision: found.revision, bytes: message.count + 1, at: now, wallMicros: wall, storedAtMillis: found.stored))
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

    /// The decimal number at `index`.
    static func number(at index: Int, in bytes: UnsafeRawBufferPointer) -> Int64? {
        var value: Int64 = 0
        var index = index
        var digits = 0
        while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
            value = value * 10 + Int64(bytes[index] - 0x30)
            index += 1
            digits += 1
        }
        return digits > 0 ? value : nil
    }

    /// A byte string to find, by memchr on one of its bytes and a comparison around it.
    struct Pattern {
        let bytes: [UInt8]
        let anchor: Int

        init(_ text: String, anchor: Character) {
            self.bytes = Array(text.utf8)
            self.anchor = self.bytes.firstIndex(of: anchor.asciiValue ?? 0) ?? 0
        }

        /// The index just past the first occurrence at or after `start`.
        func end(in buffer: UnsafeRawBufferPointer, from start: Int) -> Int? {
            guard let base = buffer.baseAddress else { return nil }
            var from = start + self.anchor
            while from < buffer.count {
                guard let hit = memchr(base + from, Int32(self.bytes[self.anchor]), buffer.count - from) else { return nil }
                let at = base.distance(to: UnsafeRawPointer(hit))
                let begin = at - self.anchor
                if begin >= start, begin + self.bytes.count <= buffer.count,
                    self.bytes.withUnsafeBytes({ memcmp(base + begin, $0.baseAddress!, $0.count) }) == 0
                {
                    return begin + self.bytes.count
                }
                from = at + 1
            }
            return nil
        }
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
