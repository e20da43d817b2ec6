import GlucoseStoreFixtures
import JSON
import Varlink

#if canImport(Glibc)
import Glibc
#endif
import SystemIO

/// `sugar-bench scale [--sizes 10000,100000,1000000]`: the export and report rows of issue 39. For
/// each size a store of that many readings is made by the ingest benchmark's builder (raw mode:
/// `sugar-bench ingest N --raw`'s synthetic meters, 4 or more, a reading every 3 hours per meter
/// from 2020-01-01), the built sugard (next to sugar-bench) serves it, and the built sugarctl
/// runs, each as a child process with its output to /dev/null:
///
/// - `readings --format csv`, `--format json` and `--format ndjson` (every reading): wall and CPU
///   seconds of sugarctl and of sugard (its /proc/PID/stat times before and after), sugarctl's peak
///   RSS (its VmHWM, polled) and sugard's (VmHWM reset before each run through /proc/PID/clear_refs,
///   read after it);
/// - the yardstick `sqlite3 -csv` over the same rows (the reading table with its meter's address,
///   in the export's order): wall seconds, and `csvRatioToSqlite3` = the export's wall time over it;
/// - `report` over the store's first year (2020) as HTML: seconds, both peak RSS, the page's bytes.
///
/// Each measurement is the best (fastest; its RSS the largest seen) of `--rounds` runs (default 2).
/// Prints one JSON object: `{"benchmark": "scale", "rows": [...]}`, a row per size.
enum ScaleExportBenchmark {
    struct BenchFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    struct Run {
        var seconds = Double.infinity
        var cpuSeconds = Double.infinity
        var clientPeak = 0
        var daemonPeak = 0
        /// sugard's CPU time (user and system) during the run.
        var daemonCPUSeconds = Double.infinity

        mutating func take(_ other: Run) {
            self.seconds = min(self.seconds, other.seconds)
            self.cpuSeconds = min(self.cpuSeconds, other.cpuSeconds)
            self.daemonCPUSeconds = min(self.daemonCPUSeconds, other.daemonCPUSeconds)
            self.clientPeak = max(self.clientPeak, other.clientPeak)
            self.daemonPeak = max(self.daemonPeak, other.daemonPeak)
        }

        var json: JSONObject {
            [
                "seconds": .double(self.seconds), "sugarctlCPUSeconds": .double(self.cpuSeconds),
                "sugardCPUSeconds": .double(self.daemonCPUSeconds),
                "sugarctlPeakRSSBytes": .from(self.clientPeak), "sugardPeakRSSBytes": .from(self.daemonPeak),
                "sugarctlPeakRSSMegabytes": .double(Double(self.clientPeak) / 1_048_576),
                "sugardPeakRSSMegabytes": .double(Double(self.daemonPeak) / 1_048_576),
            ]
        }
    }

    static func run(_ arguments: [String]) async -> Int32 {
        var sizes = [10_000, 100_000, 1_000_000]
        var rounds = 2
        var index = 0
        while index < arguments.count {
            let option = arguments[index]
            guard index + 1 < arguments.count else { usageError("scale: missing value for '\(option)'") }
            let value = arguments[index + 1]
            index += 2
            switch option {
            case "--sizes":
                let parsed = value.split(separator: ",").map { Int($0) }
                guard !parsed.isEmpty, parsed.allSatisfy({ ($0 ?? 0) > 0 }) else {
                    usageError("--sizes takes positive reading counts separated by commas (10000,100000)")
                }
                sizes = parsed.compactMap { $0 }
            case "--rounds":
                guard let n = Int(value), n > 0 else { usageError("--rounds must be positive") }
                rounds = n
            default: usageError("scale takes only --sizes and --rounds, not '\(option)'")
            }
        }
        let sugard = siblingProgram("sugard")
        let sugarctl = siblingProgram("sugarctl")
        for program in [sugard, sugarctl] where access(program, X_OK) != 0 {
            writeStderr("sugar-bench scale: \(program) not found; build sugard and sugarctl first\n")
            return 1
        }
        var rows: [JSONValue] = []
        for size in sizes {
            do {
                rows.append(.object(try await self.measure(size, rounds: rounds, sugard: sugard, sugarctl: sugarctl)))
            } catch {
                writeStderr("sugar-bench scale: \(error)\n")
                return 1
            }
        }
        let object: JSONObject = ["benchmark": "scale", "rounds": .from(rounds), "rows": .array(rows)]
        writeStdout(JSONValue.object(object).serialized() + "\n")
        return 0
    }

    static func measure(_ size: Int, rounds: Int, sugard: String, sugarctl: String) async throws -> JSONObject {
        guard let scratch = makeScratchDirectory("sbench-scale", for: "scale") else { throw BenchFailure("no scratch directory") }
        defer {
            removeScratchDirectory(
                scratch + "/state", files: ["sugard.sqlite", "sugard.sqlite-wal", "sugard.sqlite-shm", "sugard.lock"])
            removeScratchDirectory(scratch, files: ["sugard.conf", "s", "report.html", "ingest-raw.sqlite"])
        }
        // The store: the ingest builder's readings (10 % of what it is handed are re-sends it drops).
        let made = try await IngestBenchmark.run(count: size * 10 / 9 + 1, raw: true, directory: scratch)
        guard mkdir(scratch + "/state", 0o700) == 0, rename(scratch + "/ingest-raw.sqlite", scratch + "/state/sugard.sqlite") == 0 else {
            throw BenchFailure("cannot move the store into place")
        }
        let socket = scratch + "/s"
        try writeFile(scratch + "/sugard.conf", Array("timezone = UTC\nlog_level = warning\n".utf8))
        guard
            let pid = spawnQuietly(
                [sugard, "--config", scratch + "/sugard.conf", "--state-dir", scratch + "/state", "--socket", socket],
                environment: ["DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent", "TZ=UTC"])
        else { throw BenchFailure("cannot start sugard") }
        defer {
            kill(pid, SIGTERM)
            var status: Int32 = 0
            _ = retryingInterrupted { waitpid(pid, &status, 0) }
        }
        var ready = false
        for _ in 0..<600 where !ready {
            if access(socket, F_OK) == 0, let client = try? VarlinkClient(socketPath: socket) {
                ready = (try? await client.call("io.sugard.HealthDataSync.GetStatus")) != nil
                client.close()
            }
            if !ready { try await Task.sleep(for: .milliseconds(50)) }
        }
        guard ready else { throw BenchFailure("sugard did not answer on its socket in 30 s") }
        let environment = ["SUGARD_SOCKET=" + socket, "TZ=UTC", "SUGARCTL_TIMEOUT=600"]

        /// One child run, sugard's high-water mark reset before it and read after it.
        func measured(_ command: [String]) throws -> Run {
            self.resetPeak(pid)
            let cpuBefore = ForwardBenchmark.cpuMicros(pid)
            guard let run = runChild(command, environment: environment) else { throw BenchFailure("\(command.joined(separator: " ")) failed") }
            return Run(
                seconds: run.seconds, cpuSeconds: run.cpuSeconds, clientPeak: run.peakRSS, daemonPeak: peakResidentSetBytes(pid: pid) ?? 0,
                daemonCPUSeconds: Double(ForwardBenchmark.cpuMicros(pid) - cpuBefore) / 1e6)
        }
        var csv = Run()
        var json = Run()
        var ndjson = Run()
        var report = Run()
        var sqlite = Double.infinity
        let yardstick = [
            "/usr/bin/sqlite3", "-csv", scratch + "/state/sugard.sqlite",
            "SELECT r.*, m.address FROM reading r JOIN meter m ON m.id = r.meter_id ORDER BY r.instant_ms, r.id",
        ]
        let hasSqlite3 = access(yardstick[0], X_OK) == 0
        for _ in 0..<rounds {
            csv.take(try measured([sugarctl, "readings", "--format", "csv"]))
            json.take(try measured([sugarctl, "readings", "--format", "json"]))
            ndjson.take(try measured([sugarctl, "readings", "--format", "ndjson"]))
            if hasSqlite3, let run = runChild(yardstick) { sqlite = min(sqlite, run.seconds) }
            report.take(
                try measured([sugarctl, "report", "--since", "2020-01-01", "--until", "2021-01-01", "--output", scratch + "/report.html"]))
        }
        var row: JSONObject = ["readings": .from(made.stored)]
        row["csv"] = .object(csv.json)
        row["json"] = .object(json.json)
        row["ndjson"] = .object(ndjson.json)
        if sqlite.isFinite {
            row["sqlite3CsvSeconds"] = .double(sqlite)
            row["csvRatioToSqlite3"] = .double(csv.seconds / sqlite)
        }
        var reportObject = report.json
        reportObject["pageBytes"] = .from(fileSize(scratch + "/report.html"))
        row["reportOneYear"] = .object(reportObject)
        return row
    }

    /// Resets a process's VmHWM to its current RSS (`5` to /proc/PID/clear_refs, Linux 4.0+).
    static func resetPeak(_ pid: pid_t) {
        let fd = open("/proc/\(pid)/clear_refs", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = write(fd, "5", 1)
        close(fd)
    }
}
