import GlucoseStoreFixtures
import JSON
import Varlink

#if canImport(Glibc)
import Glibc
#endif
import SystemIO

/// `sugar-bench sync-memory [--records N] [--meters M] [--delay-us D]`: the built `sugard` (next to
/// sugar-bench) as a child process with `simulate_meters` (the simulated fleet, see
/// `SimulatedFleet`), each meter holding its records before sugard starts, so each meter's first
/// sync is one full download. Observed from outside: `GetStatus` on its socket until every record
/// is stored, then the child's peak RSS (VmHWM in /proc/PID/status, which includes the simulated
/// meters themselves: they live in sugard's process).
///
/// Without options it runs the two scenarios of issue 32, one after the other: one meter of
/// 100 000 records (bound: 40 MB) and three meters of 65 535 records syncing at once (bound:
/// 64 MB). Prints one JSON object: per scenario `meters`, `recordsPerMeter`, `peakRSSBytes`,
/// `peakRSSMegabytes`, `seconds` (sugard's start to every record stored), `recordsPerSecond`,
/// `readingCount` (at most 65 536 per meter: sequence numbers are 16 bits) and
/// `boundMegabytes`/`withinBound` when the scenario has a bound.
struct SyncMemoryBenchmark {
    struct Scenario {
        var meters: Int
        var records: Int
        var boundMegabytes: Int?
    }

    var scenarios: [Scenario]
    /// `simulate_delay_us`: the simulated meters' time per report packet.
    var delayMicros: Int

    static let issueScenarios = [Scenario(meters: 1, records: 100_000, boundMegabytes: 40), Scenario(meters: 3, records: 65_535, boundMegabytes: 64)]

    struct BenchFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    func run() async -> Int32 {
        let sugard = siblingProgram("sugard")
        guard access(sugard, X_OK) == 0 else {
            writeStderr("sugar-bench sync-memory: \(sugard) not found; build sugard first\n")
            return 1
        }
        var results: [JSONValue] = []
        for scenario in self.scenarios {
            do {
                results.append(.object(try await self.measure(scenario, sugard: sugard)))
            } catch {
                writeStderr("sugar-bench sync-memory: \(error)\n")
                return 1
            }
        }
        let object: JSONObject = ["benchmark": "sync-memory", "delayMicros": .from(self.delayMicros), "scenarios": .array(results)]
        writeStdout(JSONValue.object(object).serialized() + "\n")
        return 0
    }

    func measure(_ scenario: Scenario, sugard: String) async throws -> JSONObject {
        guard let scratch = makeScratchDirectory("sbench-syncmem", for: "sync-memory") else { throw BenchFailure("no scratch directory") }
        defer {
            removeScratchDirectory(
                scratch, files: ["sugard.conf", "s", "sugard.sqlite", "sugard.sqlite-wal", "sugard.sqlite-shm", "sugard.lock"])
        }
        // Meter k takes reading i at start + i × interval + k × interval / meters: with the
        // interval a multiple of the meter count every meter holds exactly `records` readings by
        // `stop`, and none more afterwards.
        let interval = scenario.meters
        let now = Int64(time(nil))
        let start = now - Int64(scenario.records + 2) * Int64(interval)
        let stop = start + Int64(scenario.records) * Int64(interval) + Int64(interval - 1)
        let socket = scratch + "/s"
        let text = """
            state_dir = \(scratch)
            socket = \(socket)
            simulate_meters = \(scenario.meters)
            simulate_start = \(start)
            simulate_stop = \(stop)
            simulate_delay_us = \(self.delayMicros)
            demo_interval = \(interval)
            cooldown_seconds = 0
            timezone = UTC
            log_level = warning

            """
        try writeFile(scratch + "/sugard.conf", Array(text.utf8))
        let clock = ContinuousClock()
        let started = clock.now
        guard let pid = spawnQuietly([sugard, "--config", scratch + "/sugard.conf"]) else { throw BenchFailure("cannot start sugard") }
        defer {
            kill(pid, SIGTERM)
            var status: Int32 = 0
            _ = retryingInterrupted { waitpid(pid, &status, 0) }
        }
        var client: VarlinkClient?
        for _ in 0..<600 where client == nil {
            if access(socket, F_OK) == 0 { client = try? VarlinkClient(socketPath: socket) }
            if client == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        guard let client else { throw BenchFailure("sugard did not open its socket in 30 s") }
        defer { client.close() }
        // A meter numbers its records with 16 bits: one download keeps one record per number, so a
        // meter of more than 65 536 records delivers 65 536 in its first sync (the rest share
        // numbers with those; see README "How a sync behaves").
        let total = scenario.meters * min(scenario.records, 65_536)
        var count: Int64 = 0
        var lastCount: Int64 = -1
        var lastProgress = clock.now
        while count < Int64(total) {
            try await Task.sleep(for: .milliseconds(100))
            let status = try await client.call("io.sugard.HealthDataSync.GetStatus")
            count = status["state"]?["readingCount"]?.intValue ?? 0
            if count != lastCount {
                lastCount = count
                lastProgress = clock.now
            } else if clock.now - lastProgress > .seconds(120) {
                throw BenchFailure("the sync stalled at \(count) of \(total) readings")
            }
        }
        let elapsed = clock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        guard let peak = peakResidentSetBytes(pid: pid) else { throw BenchFailure("cannot read VmHWM of sugard") }
        var object: JSONObject = [
            "meters": .from(scenario.meters), "recordsPerMeter": .from(scenario.records), "readingCount": .from(Int(count)),
            "peakRSSBytes": .from(peak), "peakRSSMegabytes": .double((Double(peak) / 1_048_576 * 10).rounded() / 10),
            "seconds": .double((seconds * 100).rounded() / 100), "recordsPerSecond": .from(Int(Double(total) / seconds)),
        ]
        if let bound = scenario.boundMegabytes {
            object["boundMegabytes"] = .from(bound)
            object["withinBound"] = .bool(peak < bound * 1_048_576)
        }
        return object
    }
}
