import GlucoseStore
import GlucoseStoreFixtures
import HealthDataSync
import JSON
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
/// - `watch [--watchers 1000] [--meters 50] [--records 600] [--rounds 3]`: what whole-state
///   `Watch` clients cost sugard during a sync of `--meters` simulated meters; see
///   ``watch(sugard:watchers:meters:records:rounds:)``.
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
                let rounds = Int(options["--rounds"] ?? "3") ?? 0
                guard watchers > 0, (1...64).contains(meters), records > 0, rounds > 0 else {
                    throw Failure("--watchers, --records and --rounds must be positive, --meters 1 to 64")
                }
                object = try await Self.watch(sugard: sugard, watchers: watchers, meters: meters, records: records, rounds: rounds)
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
