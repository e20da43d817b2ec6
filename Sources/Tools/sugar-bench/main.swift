// sugar-bench: parser benchmarks. Build with `swift build -c release --product sugar-bench`.
//   sugar-bench parse FILE [--with-json]        decode every record of FILE as a Glucose Measurement
//   sugar-bench make-corpus N FILE [--seed S]   write N valid measurements of mixed shapes
//   sugar-bench capture FILE                    stream GATT events out of a btsnoop capture
//   sugar-bench capture --inspect [--records N] sugarctl capture inspect --json beside tshark
//   sugar-bench capture --inspect --huge        the same, plus a ~200 MB one-session capture (flat RSS)
//   sugar-bench make-capture MEGABYTES FILE [--large|--dense]   write a synthetic btsnoop capture
//   sugar-bench make-fixtures DIR               regenerate fixtures/ (captures, expected decodes, README)
//   sugar-bench ingest N [--raw] [--dir DIR]    store N readings through the SQLite store
//   sugar-bench fanout W E [--policy P]         W watchers over E view-model emissions
//   sugar-bench socket C [--seconds S]          C GetStatus callers and C watchers on a live Varlink server
//   sugar-bench rest [--records N]            the built sugard at rest: RSS, wake-ups, after a sync and churn
//   sugar-bench sync-memory [--records N] [--meters M]  sugard's peak RSS while simulated meters sync
//   sugar-bench e2e [--records N] [--watchers W] the real daemon in-process: bulk sync, latency, idle
//   sugar-bench json [--keys N] [--rounds R]    the worst-case 1 MiB Varlink request through the JSON parser
//   sugar-bench forward N [--samples S] [--rounds R]  sugard-forward vs a plain C libmosquitto publisher
//   sugar-bench hub [--gateways G] [--records N] [--rate R]  sugard-hub: MQTT to PostgreSQL, one and two instances
//   sugar-bench scale [--sizes N,N] [--rounds R]   exports and reports of stores of N readings (ScaleExportBenchmark)
import HealthDataSync
import JSON
import ViewModelBenchmarks

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let usage = """
    OVERVIEW: Benchmarks for the Glucose Profile parser.

    USAGE: sugar-bench parse <file> [--with-json]
           sugar-bench make-corpus <count> <file> [--seed <seed>]
           sugar-bench capture <file>
           sugar-bench capture --inspect [--records <n>] [--huge]
           sugar-bench make-capture <megabytes> <file> [--large|--dense]
           sugar-bench make-fixtures <directory>
           sugar-bench ingest <count> [--raw] [--dir <directory>] [--batch <readings>]
           sugar-bench fanout <watchers> <emissions> [--policy coalesced|immediate]
           sugar-bench socket <clients> [--seconds <seconds>]
           sugar-bench rest [--records <n>] [--idle-seconds <s>]
           sugar-bench sync-memory [--records <n>] [--meters <m>] [--delay-us <d>]
           sugar-bench e2e [--records <n>] [--watchers <w>] [--samples <s>] [--idle-seconds <s>]
           sugar-bench json [--keys <n>] [--rounds <r>]
           sugar-bench forward <n> [--samples <s>] [--rounds <r>]
           sugar-bench hub [--gateways <g>] [--records <n>] [--rate <r>]
           sugar-bench scale [--sizes <n,n,...>] [--rounds <r>]
           sugar-bench scale startup [--sizes <n,n,...>]
           sugar-bench scale watch [--watchers <w>] [--meters <m>] [--records <n>] [--rounds <r>]

    SUBCOMMANDS:
      parse          Decode every record of <file> as a Glucose Measurement; print one JSON object with
                     packets, seconds, nsPerPacket, bytesPerSecond and allocationsPerPacket.
      make-corpus    Write <count> valid measurements (all flag combinations, both units, SFLOAT specials)
                     to <file>; the same seed gives the same file. Default seed 20190227.
      capture        Read <file> (btsnoop) through the PacketCapture reader and the capture inspector; print
                     one JSON object with frames, records (glucose measurements decoded), seconds,
                     megabytesPerSecond (10^6 bytes), events, bytesPerSecond, nsPerFrame,
                     allocationsPerFrame and the bare record reader's speed. With --inspect (no <file>): time
                     the whole `sugarctl capture inspect FILE --json` process (the sugarctl next to sugar-bench)
                     on a CaptureBuilder capture of --records glucose records (default 20000, ~1 MB) beside
                     tshark with a glucose field filter (when installed), and on one 10x larger: seconds
                     (best of 3), peak RSS, speedupVsTshark. --huge adds one run on a ~200 MB capture of
                     one session (huge*: seconds, peak RSS, hugeRSSGrowth = its peak RSS / the 1 MB one's).
      make-capture   Write a synthetic H4 btsnoop capture of about <megabytes> MiB: glucose downloads
                     amid classic ACL, vendor and flow-control noise (small frames), or with --large
                     500-byte notifications at MTU 512 over 251-byte ACL buffers, or with --dense one
                     measurement and one small noise frame per record (~1M records per 100 MB).
      make-fixtures  Write the fixture captures, their expected decodes and README.md into <directory>
                     (deterministic; the committed fixtures/ is its output).
      ingest         Store <count> readings (several meters, 10% duplicates, one sequence reset) through
                     the store's public API in a fresh database under <directory> (default /tmp); print
                     readings, seconds, readingsPerSecond, duplicatesDropped, peakRSSBytes. --raw does the
                     same inserts with plain prepared statements in one transaction (the ceiling).
      fanout         Run <watchers> view-model watchers (half on one field, half on all) over <emissions>
                     writes shaped like a sync; print messagesDelivered, messagesNaive, reductionPercent,
                     p99DeliveryMicros, peakRSSBytes.
      socket         Host the daemon (replayed meter, SQLite) on a scratch socket; run <clients>
                     connections calling GetStatus in a loop and <clients> watchers while the view model changes
                     every 10 ms; print callsPerSecond, p50Micros, p99Micros, watcherMessages, peakRSSBytes.
      e2e            Run the daemon in this process (SQLite store, models, sync engine, Varlink server) on
                     the replay transport with <w> socket watchers (default 100): a generated meter of <n>
                     records (default 100000) syncs (recordsPerSecond: first RACP report to N committed
                     rows); a second meter takes <s> new readings one by one (default 50)
                     (firstReadingLatencyMillis p50/p99: report write to each watcher's reply); then
                     nothing happens for --idle-seconds (default 10): idleWakeupsPerSecond counts the
                     context switches of every thread of the process. Also peakRSSBytes.
      hub            The built sugard-hub (next to sugar-bench) with a local mosquitto and a throwaway
                     PostgreSQL cluster; a load generator publishes <n> readings (default 20000) in the
                     forwarder's contract for <g> gateways (default 40): oneInstanceReadingsPerSecond,
                     twoInstancesReadingsPerSecond, twoOverOne; then at <r> a second (default 1000) into two
                     instances: p50/p99/maxPublishToCommittedMicros; each hub's peak RSS.
      json           Build the worst-case request of at most 1 MiB (<n> distinct keys in one object,
                     default 130000, a 60-deep nest, 1000 small arrays, a long escaped string) and parse it
                     <r> times (default 5) with no element bound; print bytes, parseMillisMedian/Max,
                     megabytesPerSecond, and how fast and where the Varlink server's default limits refuse it.
      scale          For stores of --sizes readings (default 10000,100000,1000000, made as `ingest --raw`
                     makes them) served by the built sugard: `sugarctl readings --format csv`, `json` and
                     `ndjson` (every reading) and a one-year `report`: seconds, sugarctl and sugard CPU
                     seconds, both peak RSS; `sqlite3 -csv` on the same rows as the yardstick
                     (csvRatioToSqlite3). Best of
                     --rounds (default 2).

      rest           Run the built sugard (next to sugar-bench) as a child: with no meter, RSS after start
                     and wake-ups per second over --idle-seconds (default 10; context switches of all its
                     threads from /proc/PID/task); then with a replayed meter of --records records (default
                     10000): RSS after the sync, and after 1000 watchers connected and disconnected.
      sync-memory    Run the built sugard as a child with simulated meters (simulate_meters) that hold
                     their records before it starts: <m> meters of <n> records each sync at once; print
                     per scenario peakRSSBytes (VmHWM of sugard, the simulated meters included), seconds
                     and recordsPerSecond until every record is stored. Without --records/--meters: the
                     two scenarios of issue 32, 1 x 100000 (bound 40 MB) and 3 x 65535 (bound 64 MB),
                     with withinBound. --delay-us: the meters' time per report packet (default 100).

      forward        N readings in a fresh database served by the built sugard; sugard-forward (in this
                     process) sends them to a local mosquitto (forwarderReadingsPerSecond: start to the
                     N-th PUBACK), then a C libmosquitto publisher built with cc sends the same payloads
                     (cPublisherReadingsPerSecond, ratio); commitToSubscriberP50Millis/P99Millis over the
                     next <s> (default 20) readings of a simulated meter, commit to an MQTT subscriber.
                     --rounds <r> (default 3): forwarder and C publisher run r times each, in turn;
                     the rates are the medians, ratio their quotient (roundRatios: each round's).

      scale startup  For each size (default 10000,100000,1000000) a store made by the raw ingest: the built
                     sugard's start to its first GetStatus answer (readyMillis, best of 3), the store's open with
                     and without the whole-file quick_check (openMillis, openWithQuickCheckMillis), and how long
                     the background quick_check and CheckStorage's integrity_check take (quickCheckMillis,
                     integrityCheckMillis).
      scale watch    The built sugard with <m> simulated meters (default 50, all connected at once) of <n> records
                     (default 600) syncing and a GetStatus caller, <r> rounds (default 3) of two runs: with <w>
                     whole-state watchers (default 1000) and with none. watcherCores (sugard's CPU seconds with
                     them minus without, over the run with them), watcherCPUMicrosPerReply, commitToLastWatcherMillisP50/P99 (a new lastReading's storedAt to the
                     last watcher having it; commitToStatusMillisP50: to GetStatus showing it, in both runs),
                     lastWatcherBehindFirstMillisP50/P99, getStatusP50Micros/P99Micros (with and without
                     watchers), repliesPerWatcherPerSecond, bytesPerReply; medians of the rounds.

    OPTIONS:
      --with-json    (parse) Also build each record's JSON value. It allocates, which shows the counter works.
      --seed <seed>  (make-corpus) Seed for the generator (decimal or 0x hex).
      --large        (make-capture) Large-notification workload.
      --dense        (make-capture) Dense-record workload.
      --raw          (ingest) Plain prepared statements in one transaction.
      --dir <dir>    (ingest) Where the scratch database goes (default /tmp).
      --batch <n>    (ingest) Readings per commit (default 500; a real sync commits all its records at once).
                     In store mode the C yardstick then loads the same rows into the same schema in one
                     transaction (INSERT OR IGNORE, WAL, synchronous=FULL): cReadingsPerSecond, ratioToC.
      --policy <p>   (fanout) coalesced (default) or immediate.
      --seconds <s>  (socket) How long the load runs (default 5).
      -h, --help     Show help information.

    FILE is a sequence of records, each a uint16 little-endian length followed by that many bytes.

    """

func usageError(_ message: String) -> Never {
    writeStderr("Error: \(message)\n\n" + usage)
    exit(64)
}

/// The process status of a benchmark run.
func runMain(_ arguments: [String]) async -> Int32 {
    if arguments.contains("-h") || arguments.contains("--help") {
        writeStdout(usage)
        return 0
    }
    guard let command = arguments.first else { usageError("Missing subcommand") }
    // `scale` alone measures exports and reports; `scale startup` and `scale watch` are below.
    if command == "scale", !["startup", "watch"].contains(arguments.dropFirst().first ?? "") {
        return await ScaleExportBenchmark.run(Array(arguments.dropFirst()))
    }
    var positionals: [String] = []
    var options: [String: String] = [:]
    var flags: Set<String> = []
    var index = 1
    while index < arguments.count {
        let argument = arguments[index]
        index += 1
        switch argument {
        case "--huge": flags.insert(argument)
        case "--with-json", "--large", "--raw", "--dense", "--inspect": flags.insert(argument)
        case "--seed", "--dir", "--batch", "--policy", "--seconds", "--records", "--watchers", "--samples", "--idle-seconds",
            "--keys", "--rounds", "--meters", "--delay-us", "--gateways", "--rate", "--sizes":
            guard index < arguments.count else { usageError("Missing value for '--seed'") }
            options[argument] = arguments[index]
            index += 1
        default:
            if argument.hasPrefix("-") && argument.count > 1 { usageError("Unknown option '\(argument)'") }
            positionals.append(argument)
        }
    }
    switch command {
    case "parse":
        guard positionals.count == 1, options.isEmpty else { usageError("parse takes exactly one FILE") }
        return ParseBenchmark(path: positionals[0], buildJSON: flags.contains("--with-json")).run()
    case "make-corpus":
        guard positionals.count == 2, flags.isEmpty else { usageError("make-corpus takes N and FILE") }
        guard let count = Int(positionals[0]), count >= 0 else { usageError("N must be a non-negative integer") }
        var seed: UInt64 = 20_190_227
        if let text = options["--seed"] {
            let parsed = text.hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : UInt64(text)
            guard let parsed else { usageError("Invalid seed '\(text)'") }
            seed = parsed
        }
        return CorpusBenchmark(count: count, path: positionals[1], seed: seed).run()
    case "capture" where flags.contains("--inspect"):
        guard positionals.isEmpty, flags.subtracting(["--huge"]) == ["--inspect"], Set(options.keys).isSubset(of: ["--records"])
        else {
            usageError("capture --inspect takes no FILE, and only --records and --huge")
        }
        guard let records = Int(options["--records"] ?? "20000"), records > 0 else { usageError("--records must be positive") }
        return InspectBenchmark(records: records, huge: flags.contains("--huge")).run()
    case "capture":
        guard positionals.count == 1, options.isEmpty, flags.isEmpty else { usageError("capture takes exactly one FILE") }
        return CaptureBenchmark(path: positionals[0]).run()
    case "make-capture":
        guard positionals.count == 2, options.isEmpty, flags.subtracting(["--large", "--dense"]).isEmpty,
            !(flags.contains("--large") && flags.contains("--dense"))
        else {
            usageError("make-capture takes MEGABYTES and FILE, and at most one of --large and --dense")
        }
        guard let megabytes = Int(positionals[0]), megabytes > 0 else { usageError("MEGABYTES must be a positive integer") }
        return MakeCaptureBenchmark(
            megabytes: megabytes, path: positionals[1], large: flags.contains("--large"), dense: flags.contains("--dense")
        ).run()
    case "make-fixtures":
        guard positionals.count == 1, options.isEmpty, flags.isEmpty else { usageError("make-fixtures takes a DIRECTORY") }
        return MakeFixturesCommand.run(directory: positionals[0])
    case "scale" where positionals.first == "startup" || positionals.first == "watch":
        guard positionals.count == 1, flags.isEmpty else { usageError("scale takes startup or watch") }
        return await ScaleBenchmark.run(positionals[0], options: options)
    case "ingest":
        guard positionals.count == 1, let count = Int(positionals[0]), count > 0 else {
            usageError("ingest takes a positive reading count")
        }
        guard let batch = Int(options["--batch"] ?? "500"), batch > 0 else { usageError("--batch must be positive") }
        return await IngestCommand.run(
            count: count, raw: flags.contains("--raw"), directory: options["--dir"] ?? "/tmp", batchSize: batch)
    case "sync-memory":
        guard positionals.isEmpty, Set(options.keys).isSubset(of: ["--records", "--meters", "--delay-us"]) else {
            usageError("sync-memory takes only --records, --meters and --delay-us")
        }
        guard let delay = Int(options["--delay-us"] ?? "100"), (1...1_000_000).contains(delay) else {
            usageError("--delay-us must be 1…1000000")
        }
        if options["--records"] == nil && options["--meters"] == nil {
            return await SyncMemoryBenchmark(scenarios: SyncMemoryBenchmark.issueScenarios, delayMicros: delay).run()
        }
        guard let records = Int(options["--records"] ?? "100000"), (1...200_000).contains(records),
            let meters = Int(options["--meters"] ?? "1"), (1...64).contains(meters)
        else { usageError("--records must be 1…200000 and --meters 1…64") }
        return await SyncMemoryBenchmark(
            scenarios: [SyncMemoryBenchmark.Scenario(meters: meters, records: records, boundMegabytes: nil)], delayMicros: delay
        ).run()
    case "rest":
        guard positionals.isEmpty, Set(options.keys).isSubset(of: ["--records", "--idle-seconds"]) else {
            usageError("rest takes only --records and --idle-seconds")
        }
        guard let records = Int(options["--records"] ?? "10000"), records > 0, records <= 65_000,
            let idle = Int(options["--idle-seconds"] ?? "10"), idle > 0
        else { usageError("--records must be 1…65000 and --idle-seconds positive") }
        return await RestBenchmark(records: records, idleSeconds: idle).run()
    case "fanout":
        guard positionals.count == 2, let watchers = Int(positionals[0]), let emissions = Int(positionals[1]),
            watchers > 0, emissions > 0
        else { usageError("fanout takes WATCHERS and EMISSIONS (positive integers)") }
        guard let policy = WatchPolicy(rawValue: options["--policy"] ?? "coalesced") else {
            usageError("--policy must be coalesced or immediate")
        }
        writeStdout(await FanoutBenchmark.run(watchers: watchers, emissions: emissions, policy: policy).serialized() + "\n")
        return 0
    case "socket":
        guard positionals.count == 1, let clients = Int(positionals[0]), clients > 0 else {
            usageError("socket takes CLIENTS (a positive integer)")
        }
        guard let seconds = Int(options["--seconds"] ?? "5"), seconds > 0 else { usageError("--seconds must be positive") }
        return await SocketBenchmark.run(clients: clients, seconds: seconds)
    case "forward":
        guard positionals.count == 1, let count = Int(positionals[0]), count > 0, flags.isEmpty else {
            usageError("forward takes N (a positive integer)")
        }
        guard let samples = Int(options["--samples"] ?? "20"), samples > 0 else { usageError("--samples must be positive") }
        guard let rounds = Int(options["--rounds"] ?? "3"), rounds > 0 else { usageError("--rounds must be positive") }
        return await ForwardBenchmark.run(count: count, samples: samples, rounds: rounds)
    case "e2e":
        guard positionals.isEmpty, flags.isEmpty else { usageError("e2e takes only options") }
        func positive(_ name: String, _ fallback: Int) -> Int {
            guard let text = options[name] else { return fallback }
            guard let value = Int(text), value > 0 else { usageError("\(name) must be a positive integer") }
            return value
        }
        return await E2EBenchmark.run(
            records: positive("--records", 100_000), watchers: positive("--watchers", 100),
            samples: positive("--samples", 50), idleSeconds: positive("--idle-seconds", 10))
    case "hub":
        guard positionals.isEmpty, flags.isEmpty else { usageError("hub takes only options") }
        guard let gateways = Int(options["--gateways"] ?? "40"), gateways > 0, let records = Int(options["--records"] ?? "20000"),
            records > 0, let rate = Int(options["--rate"] ?? "1000"), rate > 0
        else { usageError("--gateways, --records and --rate must be positive integers") }
        return await HubBenchmark.run(gateways: gateways, records: records, rate: rate)
    case "json":
        guard positionals.isEmpty, flags.isEmpty else { usageError("json takes only options") }
        guard let keys = Int(options["--keys"] ?? "130000"), keys > 0, let rounds = Int(options["--rounds"] ?? "5"), rounds > 0
        else { usageError("--keys and --rounds must be positive integers") }
        return JSONBenchmark.run(keys: keys, rounds: rounds)
    default:
        usageError("Unknown subcommand '\(command)'")
    }
}

exit(await runMain(Array(CommandLine.arguments.dropFirst())))
