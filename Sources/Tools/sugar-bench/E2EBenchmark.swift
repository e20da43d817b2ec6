import Locking
import GlucoseProfile
import HealthDataSync
import JSON
import PacketCapture
import ProcessKit
import ReplayTransport
import SugarDaemon
import Synchronization
import Varlink
import ViewModelBenchmarks

#if canImport(Glibc)
import Glibc
#endif
import SystemIO

/// `sugar-bench e2e [--records N] [--watchers W]`: the real daemon (store, models, sync engine,
/// Varlink server, as `sugard` composes them) in this process on the replay transport, with W
/// socket watchers following `readingCount`.
///
/// 1. Bulk: generated meters holding N records in all appear; `recordsPerSecond` is N over the
///    time from the first RACP report write (the packets start flowing) to the view model counting
///    N committed rows. A meter numbers its records with 16 bits and the engine keeps one record
///    per sequence number per download, so one meter can deliver at most 65 536 records in a
///    sync: N is split over ⌈N / 50 000⌉ meters (two for 100 000) that sync at the same time.
/// 2. Latency: a second meter takes `--samples` new readings one at a time (`addReading`, 150 ms
///    apart); for each, from the RACP report write that makes the meter notify it to each
///    watcher's reply showing the new count: `firstReadingLatencyMillis` p50/p99 over all
///    (reading, watcher) pairs.
/// 3. Idle: with the watchers still connected and nothing happening, the context switches
///    (voluntary + involuntary) of every thread of the process over 10 s from 1 s after the last
///    sync: `idleWakeupsPerSecond`; and again from 32 s after it: `idleAfter32sWakeupsPerSecond`.
///    The first window holds the syncs' cancelled timeout timers: a cancelled `Task.sleep` on
///    Linux resumes at once but its Dispatch timer still fires at the original deadline (up to
///    the 30 s connect timeout). The benchmark's own sleeping task is one wake-up per window.
/// `peakRSSBytes` is VmHWM of the whole process (daemon and the watchers' client side).
enum E2EBenchmark {
    static func bulkAddress(_ k: Int) -> BluetoothAddress { BluetoothAddress(rawValue: 0xD4_A0_E2_E0_01_00 | UInt64(k)) }
    static let recordsPerBulkMeter = 50_000
    static let liveAddress = BluetoothAddress(rawValue: 0xD4_A0_E2_E0_00_02)

    static func run(records: Int, watchers: Int, samples: Int, idleSeconds: Int) async -> Int32 {
        guard let directory = makeScratchDirectory("sbench-e2e", for: "e2e") else { return 1 }
        defer {
            removeScratchDirectory(
                directory, files: ["sugard.sqlite", "sugard.sqlite-wal", "sugard.sqlite-shm", "io.sugard.HealthDataSync"])
        }
        var config = DaemonConfig(stateDirectory: directory, socketPath: directory + "/io.sugard.HealthDataSync")
        // SUGAR_BENCH_LOG_LEVEL=info shows the daemon's log on stderr.
        config.logLevel = getenv("SUGAR_BENCH_LOG_LEVEL").flatMap { LogLevel(name: String(cString: $0)) } ?? .warning
        config.cooldownSeconds = 0
        config.timeZone = "UTC"
        config.maxConnectionsPerUID = max(1024, watchers + 16)
        config.maxSocketConnections = max(4096, watchers + 16)

        let replay = ReplayTransport(
            meters: [],
            options: ReplayTransport.Options(adapterName: "bench", clock: { SimulatedFleet.baseTime(unixMillis: unixMillis()) }))
        let timed = TimedTransport(replay)
        do {
            let result = try await HostedDaemon.run(config: config, transport: timed, shutdown: { await replay.shutdown() }) {
                runtime in
                try await self.measure(
                    path: config.socketPath, runtime: runtime, replay: replay, timed: timed, records: records,
                    watchers: watchers, samples: samples, idleSeconds: idleSeconds)
            }
            writeStdout(JSONValue.object(result).serialized() + "\n")
            return 0
        } catch {
            writeStderr("sugar-bench e2e: \(error)\n")
            return 1
        }
    }

    static func measure(
        path: String, runtime: DaemonRuntime, replay: ReplayTransport, timed: TimedTransport, records: Int, watchers: Int,
        samples: Int, idleSeconds: Int
    ) async throws -> JSONObject {
        // Watchers on the real socket, each logging (readingCount, arrival) per reply.
        let arrivals = Arrivals(watchers: watchers)
        var clients: [VarlinkClient] = []
        for _ in 0..<watchers { clients.append(try VarlinkClient(socketPath: path)) }
        defer { for client in clients { client.close() } }
        return try await withThrowingTaskGroup(of: Void.self) { group -> JSONObject in
            for (index, client) in clients.enumerated() {
                group.addTask {
                    do {
                        let stream = client.callMore("io.sugard.HealthDataSync.Watch", ["fields": ["readingCount"]])
                        for try await reply in stream {
                            let at = UInt64(monotonicNanoseconds())
                            if case .object(let fields)? = reply["fields"], case .int(let count)? = fields["readingCount"] {
                                arrivals.record(watcher: index, count: Int(count), at: at)
                            }
                        }
                    } catch {}  // closed at the end
                }
            }
            try await arrivals.waitUntil(timeoutSeconds: 30) { $0 >= 0 }
            defer { for client in clients { client.close() } }

            // 1. Bulk sync.
            let model = runtime.models.viewModel
            let bulkMeters = (records + Self.recordsPerBulkMeter - 1) / Self.recordsPerBulkMeter
            let bulkIDs = (0..<bulkMeters).map { MeterID(Self.bulkAddress($0).description) }
            let simulators = (0..<bulkMeters).map { k in
                Self.bulkMeter(k, records: records / bulkMeters + (k < records % bulkMeters ? 1 : 0))
            }
            for simulator in simulators { replay.addMeter(simulator) }
            // Polled every millisecond: a watcher would add its own turn to the measured path.
            var lastCount = 0
            var lastProgress = UInt64(monotonicNanoseconds())
            while model.state.readingCount < records {
                let count = model.state.readingCount
                if count != lastCount {
                    lastCount = count
                    lastProgress = UInt64(monotonicNanoseconds())
                } else if UInt64(monotonicNanoseconds()) - lastProgress > 60 * 1_000_000_000 {
                    throw DaemonError("the bulk sync stalled at \(count) of \(records) readings")
                }
                try await Task.sleep(for: .milliseconds(1))
            }
            let finishedAt = UInt64(monotonicNanoseconds())
            guard let firstPacket = bulkIDs.compactMap({ timed.reportWrites($0).first }).min() else {
                throw DaemonError("no RACP report was written to the bulk meters")
            }
            let bulkSeconds = Double(finishedAt - firstPacket) / 1e9
            try await arrivals.waitUntil(timeoutSeconds: 60) { $0 >= records }

            // 2. First-reading latency on a second meter.
            let live = MeterID(Self.liveAddress.description)
            replay.addMeter(MeterSimulator(personality: Self.personality(Self.liveAddress, name: "LIVE-1")))
            try await Task.sleep(for: .milliseconds(300))
            var latencies: [Double] = []
            var base = model.state.readingCount
            try await arrivals.waitUntil(timeoutSeconds: 30) { $0 >= base }
            for j in 0..<samples {
                let before = timed.reportWrites(live).count
                guard replay.addReading(mgdL: 90 + j, at: SimulatedFleet.baseTime(unixMillis: unixMillis()), to: live) != nil
                else { throw DaemonError("the live meter is gone") }
                let target = base + 1
                try await arrivals.waitUntil(timeoutSeconds: 30) { $0 >= target }
                let writes = timed.reportWrites(live)
                guard writes.count > before else { throw DaemonError("reading \(j) arrived without a RACP report") }
                let emitted = writes[before]
                for arrival in arrivals.firstArrivals(atLeast: target) {
                    latencies.append(Double(Int64(arrival) - Int64(emitted)) / 1e6)
                }
                base = target
                try await Task.sleep(for: .milliseconds(150))
            }
            latencies.sort()
            func percentile(_ p: Double) -> Double {
                latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int((Double(latencies.count - 1) * p).rounded()))]
            }

            // 3. Idle: nothing happens; count the process's context switches, first from 1 s after
            // the last sync, then again once the syncs' cancelled timeout timers (up to 30 s) ran out.
            let lastSync = ContinuousClock.now
            try await Task.sleep(until: lastSync + .seconds(1))
            let early = try await Self.idleWindow(seconds: idleSeconds)
            try await Task.sleep(until: lastSync + .seconds(32))
            let late = try await Self.idleWindow(seconds: idleSeconds)
            let stored = runtime.models.viewModel.state.readingCount

            for client in clients { client.close() }
            group.cancelAll()
            return [
                "benchmark": "e2e",
                "records": .int(Int64(records)),
                "watchers": .int(Int64(watchers)),
                "bulkMeters": .int(Int64(bulkMeters)),
                "storedRows": .int(Int64(stored)),
                "bulkSeconds": .double((bulkSeconds * 1000).rounded() / 1000),
                "recordsPerSecond": .int(Int64(Double(records) / bulkSeconds)),
                "latencySamples": .int(Int64(latencies.count)),
                "firstReadingLatencyMillis": [
                    "p50": .double((percentile(0.5) * 100).rounded() / 100),
                    "p99": .double((percentile(0.99) * 100).rounded() / 100),
                ],
                "peakRSSBytes": .from(FanoutBenchmark.peakRSSBytes()),
                "idleWindowSeconds": .int(Int64(idleSeconds)),
                "idleContextSwitches": .int(Int64(early.total)),
                "idleWakeupsPerSecond": .double((Double(early.total) / Double(idleSeconds) * 10).rounded() / 10),
                "idleBusiestThreads": .array(early.busiest.map { .string($0) }),
                "idleAfter32sContextSwitches": .int(Int64(late.total)),
                "idleAfter32sWakeupsPerSecond": .double((Double(late.total) / Double(idleSeconds) * 10).rounded() / 10),
                "idleAfter32sBusiestThreads": .array(late.busiest.map { .string($0) }),
                "threads": .int(Int64(late.threads)),
            ]
        }
    }

    /// Context switches of every thread over `seconds` (threads born in the window count whole).
    static func idleWindow(seconds: Int) async throws -> (total: Int, threads: Int, busiest: [String]) {
        let before = threadSwitches()
        try await Task.sleep(for: .seconds(seconds))
        let after = threadSwitches()
        var perThread: [(name: String, count: Int)] = []
        var total = 0
        for (tid, entry) in after {
            let delta = entry.switches - (before[tid]?.switches ?? 0)
            total += delta
            if delta > 0 { perThread.append((entry.name + (before[tid] == nil ? "(new)" : ""), delta)) }
        }
        perThread.sort { $0.count > $1.count }
        return (total, after.count, perThread.prefix(4).map { "\($0.name):\($0.count)" })
    }

    static func personality(_ address: BluetoothAddress, name: String) -> MeterPersonality {
        MeterPersonality(
            address: address, name: name, manufacturer: "sugard simulator", model: "e2e", serialNumber: name,
            firmware: "1.0", hasContext: false,
            clock: .currentTime(DateTime(year: 2026, month: 1, day: 1, hours: 0, minutes: 0, seconds: 0)), mtu: 185)
    }

    /// Bulk meter k: `records` records a minute apart from 2026-01-01, sequence numbers from 1.
    static func bulkMeter(_ k: Int, records: Int) -> MeterSimulator {
        var simulator = MeterSimulator(personality: Self.personality(Self.bulkAddress(k), name: "BULK-\(k)"))
        let start = LocalDateTime(year: 2026, month: 1, day: 1).secondsSinceEpoch * 1000
        for i in 0..<records {
            simulator.addRecord(
                GlucoseMeasurement(
                    sequenceNumber: 0, baseTime: SimulatedFleet.baseTime(unixMillis: start + Int64(i) * 60_000),
                    concentration: SFloat(rawValue: 0xB000 | UInt16(70 + i % 160)), unit: .kilogramsPerLiter,
                    type: .capillaryPlasma, sampleLocation: .finger))
        }
        return simulator
    }
}

/// Per-watcher replies: (readingCount, monotonic arrival) in order.
final class Arrivals: Sendable {
    private let log: Lock<[[(count: Int, at: UInt64)]]>

    init(watchers: Int) { self.log = Lock(Array(repeating: [], count: watchers)) }

    func record(watcher: Int, count: Int, at: UInt64) {
        self.log.withLock { $0[watcher].append((count, at)) }
    }

    /// Waits until every watcher's latest count satisfies `condition`.
    func waitUntil(timeoutSeconds: Int, _ condition: (Int) -> Bool) async throws {
        let deadline = UInt64(monotonicNanoseconds()) + UInt64(timeoutSeconds) * 1_000_000_000
        while true {
            let done = self.log.withLock { log in log.allSatisfy { $0.last.map { condition($0.count) } ?? false } }
            if done { return }
            guard UInt64(monotonicNanoseconds()) < deadline else {
                throw DaemonError("the watchers did not all see the expected reading count within \(timeoutSeconds) s")
            }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Each watcher's first arrival with a count of at least `count`.
    func firstArrivals(atLeast count: Int) -> [UInt64] {
        self.log.withLock { log in log.compactMap { $0.first { $0.count >= count }?.at } }
    }
}

/// The replay transport with a timestamp on every RACP "report stored records" write: the moment
/// the meter starts notifying (with no operation delay the notifications are emitted inside the
/// write).
final class TimedTransport: MeterTransport {
    let inner: ReplayTransport
    private let writes = Lock<[MeterID: [UInt64]]>([:])

    init(_ inner: ReplayTransport) { self.inner = inner }

    func reportWrites(_ meter: MeterID) -> [UInt64] { self.writes.withLock { $0[meter] ?? [] } }

    func events() -> AsyncStream<TransportEvent> { self.inner.events() }
    func setDiscovery(_ enabled: Bool) async throws(TransportError) { try await self.inner.setDiscovery(enabled) }
    func connect(_ meter: MeterID) async throws(TransportError) -> MeterServices { try await self.inner.connect(meter) }
    func pair(_ meter: MeterID) async throws(TransportError) { try await self.inner.pair(meter) }
    func submitPasskey(_ passkey: UInt32?, for meter: MeterID) async throws(TransportError) {
        try await self.inner.submitPasskey(passkey, for: meter)
    }
    func read(_ characteristic: BluetoothUUID, on meter: MeterID) async throws(TransportError) -> [UInt8] {
        try await self.inner.read(characteristic, on: meter)
    }
    func setNotifications(
        _ enabled: Bool, for characteristic: BluetoothUUID, on meter: MeterID
    ) async throws(TransportError) {
        try await self.inner.setNotifications(enabled, for: characteristic, on: meter)
    }
    func write(_ value: [UInt8], to characteristic: BluetoothUUID, on meter: MeterID) async throws(TransportError) {
        if characteristic == BluetoothUUID(0x2A52), value.first == 0x01 {
            let at = UInt64(monotonicNanoseconds())
            self.writes.withLock { $0[meter, default: []].append(at) }
        }
        try await self.inner.write(value, to: characteristic, on: meter)
    }
    func disconnect(_ meter: MeterID) async { await self.inner.disconnect(meter) }
}

func unixMillis() -> Int64 { wallClockMilliseconds() }

/// Context switches (voluntary + involuntary) per thread of this process, with the thread's name.
func threadSwitches(pid: String = "self") -> [Int: (name: String, switches: Int)] {
    var result: [Int: (name: String, switches: Int)] = [:]
    guard let dir = opendir("/proc/\(pid)/task") else { return result }
    defer { closedir(dir) }
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        guard let tid = Int(name) else { continue }
        guard let status = try? readFile("/proc/\(pid)/task/\(tid)/status") else { continue }
        var threadName = ""
        var switches = 0
        for line in String(decoding: status, as: UTF8.self).split(separator: "\n") {
            if line.hasPrefix("Name:") { threadName = line.dropFirst(5).trimmingCharacters() }
            if line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:") {
                switches += Int(line.split(separator: ":").last.map { $0.trimmingCharacters() } ?? "") ?? 0
            }
        }
        result[tid] = ("\(threadName)/\(tid)", switches)
    }
    return result
}

extension StringProtocol {
    func trimmingCharacters() -> String {
        String(self.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
