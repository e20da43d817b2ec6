import Glibc
import GlucoseProfile
import GlucoseStore
import HealthDataSync
import JSON
import PacketCapture
import ReplayTransport
import Testing
import TestSupport
import Varlink

/// The "sugard: the daemon" contract, checked against the built `sugard` binary: sd_notify (READY,
/// STATUS, WATCHDOG, STOPPING, RELOADING), SIGTERM during a sync, SIGHUP reloads, start-up config
/// errors and exit statuses, journal log prefixes, no reading values above debug, idleness, and
/// `sugarctl` finding the demo without flags.
@Suite struct DaemonProcessTests {
    static let fixtures: String = {
        let root = #filePath.split(separator: "/", omittingEmptySubsequences: false).dropLast(4).joined(separator: "/")
        return root + "/fixtures"
    }()
    static let accuChek = fixtures + "/accu-chek-guide-mgdl-mtu23.btsnoop"
    static let wrap = fixtures + "/wrap-65535.btsnoop"

    static let interface = "io.sugard.HealthDataSync"

    /// A capture of one full download from a simulated meter holding `count` records
    /// (sequence numbers 1…count, 100 + n mg/dL, hourly).
    static func manyRecordCapture(count: Int) -> [UInt8] {
        let personality = MeterPersonality(
            address: BluetoothAddress(rawValue: 0xD4_A0_03_00_00_40), name: "MANY-40", manufacturer: "Test",
            model: "Slowmeter", serialNumber: "M40", firmware: "1.0", hasContext: false,
            clock: .currentTime(DateTime(year: 2025, month: 11, day: 24, hours: 18, minutes: 0, seconds: 0)))
        var records: [SimulatedRecord] = []
        for n in 1...count {
            let time = DateTime(
                year: 2025, month: 11, day: UInt8(20 + n / 24), hours: UInt8(n % 24), minutes: 5, seconds: 0)
            let value = SFloat(rawValue: 0xB000 | UInt16(100 + n))
            let measurement = GlucoseMeasurement(
                sequenceNumber: UInt16(n), baseTime: time, timeOffsetMinutes: nil, concentration: value,
                unit: .kilogramsPerLiter, type: .capillaryPlasma, sampleLocation: .finger, sensorStatus: nil)
            records.append(SimulatedRecord(measurement))
        }
        var meter = MeterSimulator(personality: personality, records: records)
        meter.startRecording(format: CaptureBuilder.Format.h4)
        SimulatedClient.download(&meter)
        return meter.stopRecording()?.image ?? []
    }

    static func readings(_ client: VarlinkClient) async throws -> [JSONValue] {
        let reply = try await client.call(Self.interface + ".ListReadings", ["limit": 10_000])
        return reply["readings"]?.arrayValue ?? []
    }

    // MARK: - sd_notify

    @Test func readyComesOnlyOnceTheSocketAcceptsAndTheStoreIsOpen() async throws {
        let dir = try TempDirectory()
        let run = try SugardRun(in: dir, arguments: ["--replay", Self.accuChek])
        try await run.waitUntilReady()

        // Connect at once: the socket must already accept, and the store must already answer.
        let client = try VarlinkClient(socketPath: run.socketPath)
        let status = try await client.call(Self.interface + ".GetStatus")
        #expect(status["state"]?["daemon"]?["storage"]?["status"]?.stringValue == "ok")
        #expect(access(run.databasePath, F_OK) == 0)

        let ready = try #require(run.notify.messages.first { $0.contains("READY=1") })
        #expect(ready.contains("MAINPID=\(run.process.pid)"))
        let readyStatus = try #require(ready.split(separator: "\n").first { $0.hasPrefix("STATUS=") })
        #expect(readyStatus.count > "STATUS=".count)
        #expect(run.notify.count("READY=1") == 1)

        client.close()
        #expect(await run.stop() == .exited(0), "stderr:\n\(run.stderr)")
        #expect(run.notify.count("STOPPING=1") == 1)
        #expect(run.stderr.contains("SIGTERM: shutting down"))
        #expect(run.stderr.contains("stopped"))
    }

    @Test func watchdogPingsOnlyWhenAskedFor() async throws {
        let dir = try TempDirectory()
        let watched = try SugardRun(
            in: dir, name: "watched", arguments: ["--replay", Self.wrap], environment: ["WATCHDOG_USEC": "1000000"])
        try await watched.waitUntilReady()
        // Half the interval: about two pings a second.
        let pinged = await watched.notify.waitFor("WATCHDOG=1", count: 3, within: 20)
        #expect(pinged, "WATCHDOG=1 sent \(watched.notify.count("WATCHDOG=1")) times")
        #expect(await watched.stop() == .exited(0))

        // WATCHDOG_PID naming another process: not for us.
        let other = try TempDirectory()
        let elsewhere = try SugardRun(
            in: other, name: "other", arguments: ["--replay", Self.wrap],
            environment: ["WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1"])
        try await elsewhere.waitUntilReady()
        try await Task.sleep(for: .milliseconds(1500))
        #expect(elsewhere.notify.count("WATCHDOG=1") == 0)
        #expect(await elsewhere.stop() == .exited(0))
    }

    @Test func aSupervisorThatDoesNotReadCannotWedgeTheDaemon() async throws {
        // The kernel queues 10 unread datagrams; a blocking sendto would then stall the daemon.
        let dir = try TempDirectory()
        try dir.write("many.btsnoop", Self.manyRecordCapture(count: 40))
        try dir.write("sugard.conf", "replay_delay_ms = 2\n")
        let deaf = dir.file("deaf.notify")
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(deaf.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0)

        let run = try SugardRun(
            in: dir, arguments: ["--config", dir.file("sugard.conf"), "--replay", dir.file("many.btsnoop")],
            environment: ["NOTIFY_SOCKET": deaf, "WATCHDOG_USEC": "100000"])
        let synced = await eventually(within: 30) { run.stderr.contains("sync ended") }
        #expect(synced, "stderr:\n\(run.stderr)")
        let client = try VarlinkClient(socketPath: run.socketPath)
        let readings = await withTimeout(seconds: 20) { try? await Self.readings(client) } ?? nil
        #expect(readings?.count == 40, "the daemon did not answer ListReadings")
        client.close()
        let end = await run.stop()
        #expect(end == .exited(0), "\(end.map { "\($0)" } ?? "still running"); stderr:\n\(run.stderr)")
    }

    // MARK: - SIGTERM during a sync

    @Test func sigtermDuringASyncLosesNothing() async throws {
        let dir = try TempDirectory()
        let total = 40
        try dir.write("many.btsnoop", Self.manyRecordCapture(count: total))
        // A slow meter (150 ms per operation and per record: 6 s for the records) while SIGTERM
        // comes, a quick one after the restart.
        try dir.write("sugard.conf", "replay_delay_ms = 150\ncooldown_seconds = 0\n")
        let arguments = ["--config", dir.file("sugard.conf"), "--replay", dir.file("many.btsnoop")]

        let first = try SugardRun(in: dir, name: "first", arguments: arguments)
        try await first.waitUntilReady()
        // The status line follows the download: "syncing Test Slowmeter n/40".
        let receiving = await first.notify.waitForLine(within: 30) { line in
            guard line.hasPrefix("STATUS=syncing Test Slowmeter "), line.hasSuffix("/\(total)"),
                let received = line.split(separator: " ").last?.split(separator: "/").first.flatMap({ Int($0) })
            else { return false }
            return received >= 2
        }
        try #require(receiving != nil, "no progress status; statuses: \(first.notify.statuses); stderr:\n\(first.stderr)")
        first.process.signal(SIGTERM)
        #expect(await first.process.waitForExit(within: 30) == .exited(0), "stderr:\n\(first.stderr)")
        #expect(first.notify.count("STOPPING=1") == 1)
        let syncing = Set(first.notify.statuses.filter { $0.hasPrefix("syncing ") })
        #expect(syncing.count >= 2, "the status line should change during a sync: \(first.notify.statuses)")
        #expect(first.stderr.contains("SIGTERM: shutting down"))
        #expect(!first.stderr.contains("sync success"), "the sync finished before SIGTERM; the test proves nothing")

        // What the interrupted sync committed is sound and consistent.
        do {
            let store = try SQLiteReadingStore(path: first.databasePath)
            #expect(try await store.integrityCheck() == ["ok"])
            let partial = try await store.readings(ReadingQuery(limit: 10_000))
            #expect(partial.count < total)
            #expect(Set(partial.map(\.reading.sequenceNumber)).count == partial.count)
            await store.close()
        }

        // Restart on the same state: the next sync fetches the rest, each record exactly once.
        try dir.write("sugard.conf", "replay_delay_ms = 5\ncooldown_seconds = 0\n")
        let second = try SugardRun(in: dir, name: "second", arguments: arguments)
        try await second.waitUntilReady()
        let client = try VarlinkClient(socketPath: second.socketPath)
        var readings: [JSONValue] = []
        let complete = try await eventually(within: 60) {
            readings = try await Self.readings(client)
            return readings.count >= total
        }
        #expect(complete, "\(readings.count) of \(total) readings after the restart; stderr:\n\(second.stderr)")

        // A forced sync afterwards finds nothing new (retry while the automatic one still runs).
        var forced: JSONObject?
        _ = await eventually(within: 30) {
            forced = try? await client.call(Self.interface + ".Sync", ["force": true])
            return forced != nil
        }
        #expect(forced != nil, "forced Sync never succeeded; stderr:\n\(second.stderr)")
        readings = try await Self.readings(client)
        let sequences = readings.compactMap { $0["sequenceNumber"]?.intValue }
        #expect(sequences.sorted() == (1...Int64(total)).map { $0 })
        client.close()
        let secondEnd = await second.stop()
        #expect(secondEnd == .exited(0), "\(secondEnd.map { "\($0)" } ?? "still running"); stderr:\n\(second.stderr)")

        let store = try SQLiteReadingStore(path: second.databasePath)
        #expect(try await store.integrityCheck() == ["ok"])
        let stored = try await store.readings(ReadingQuery(limit: 10_000))
        #expect(stored.map(\.reading.sequenceNumber).sorted() == (1...UInt16(total)).map { $0 })
        #expect(try await store.readingCount(meter: nil) == total)
        await store.close()
    }

    // MARK: - SIGHUP

    @Test func sighupReloadsTheConfigAndKeepsItWhenBroken() async throws {
        let dir = try TempDirectory()
        let config = dir.file("sugard.conf")
        // The demo takes a reading every second, so there is always something to log.
        try dir.write("sugard.conf", "demo = true\ndemo_interval = 1\ncooldown_seconds = 0\nlog_level = info\n")
        let run = try SugardRun(in: dir, arguments: ["--config", config])
        try await run.waitUntilReady()
        let active = await eventually(within: 30) { run.stderr.contains("demo: the meter took reading") }
        #expect(active, "stderr:\n\(run.stderr)")
        #expect(!run.stderr.contains(" DEBUG "))

        try dir.write("sugard.conf", "demo = true\ndemo_interval = 1\ncooldown_seconds = 0\nlog_level = debug\n")
        run.process.signal(SIGHUP)
        try await run.waitUntilReady(count: 2)
        #expect(run.notify.count("RELOADING=1") == 1)
        #expect(run.notify.lines.contains { $0.hasPrefix("MONOTONIC_USEC=") })
        #expect(await eventually(within: 10) { run.stderr.contains("SIGHUP: reloaded \(config): log_level=debug") })
        #expect(!run.stderr.contains("restart to apply"), "only log_level changed: \(run.stderr)")
        let debugging = await eventually(within: 30) { run.stderr.contains(" DEBUG ") }
        #expect(debugging, "no debug lines after the reload; stderr:\n\(run.stderr)")

        // A broken file: logged with file:line, the running configuration stays.
        try dir.write("sugard.conf", "demo = true\nlog_level = loud\n")
        run.process.signal(SIGHUP)
        try await run.waitUntilReady(count: 3)
        let logged = await eventually(within: 10) { run.stderr.contains("SIGHUP: keeping the running configuration") }
        #expect(logged, "stderr:\n\(run.stderr)")
        let errorLine = run.stderr.split(separator: "\n").first { $0.contains("keeping the running configuration") }
        #expect(errorLine?.contains("\(config):2:") == true)
        #expect(errorLine?.contains("log_level") == true)
        #expect(run.process.isRunning)
        let debugLines = run.stderr.split(separator: "\n").filter { $0.contains(" DEBUG ") }.count
        let stillDebugging = await eventually(within: 30) {
            run.stderr.split(separator: "\n").filter { $0.contains(" DEBUG ") }.count > debugLines
        }
        #expect(stillDebugging, "debug logging stopped after a broken reload")

        let client = try VarlinkClient(socketPath: run.socketPath)
        _ = try await client.call(Self.interface + ".GetStatus")
        client.close()
        #expect(await run.stop() == .exited(0))
    }

    @Test func sighupKeepsFlagsAboveTheFile() async throws {
        // Flags (here --replay) win over the file at start-up and still after a reload, so a
        // reload neither drops them nor asks for a restart because of them.
        let dir = try TempDirectory()
        try dir.write("sugard.conf", "log_level = info\n")
        let run = try SugardRun(in: dir, arguments: ["--config", dir.file("sugard.conf"), "--replay", Self.wrap])
        try await run.waitUntilReady()
        try dir.write("sugard.conf", "log_level = debug\ncooldown_seconds = 5\n")
        run.process.signal(SIGHUP)
        try await run.waitUntilReady(count: 2)
        let reloaded = await eventually(within: 10) { run.stderr.contains("SIGHUP: reloaded") }
        #expect(reloaded, "stderr:\n\(run.stderr)")
        let line = run.stderr.split(separator: "\n").first { $0.contains("SIGHUP: reloaded") } ?? ""
        #expect(line.contains("log_level=debug"))
        #expect(line.contains("restart to apply cooldown_seconds"), "\(line)")
        #expect(!line.contains("replay"), "\(line)")
        #expect(await run.stop() == .exited(0))
    }

    // MARK: - Start-up errors

    @Test(arguments: [
        ("# sugard\nlog_level = info\nfrobnicate = 1\n", 3, "frobnicate"),
        ("log_level = info\ndemo_interval = 0\n", 2, "demo_interval"),
        ("replay_delay_ms = soon\n", 1, "replay_delay_ms"),
        ("\n\nstate_dir\n", 3, "key = value"),
        // #22: invalid zone, duplicate key, bad quoting, unknown groups.
        ("timezone = Europe/Atlantis\n", 1, "not an IANA time zone"),
        ("log_level = info\nlog_level = debug\n", 2, "set twice"),
        ("adapter = \"hci0\n", 1, "unterminated quote"),
        ("socket_group = sugard-no-such-group\n", 1, "no group named"),
        ("\nadmin_group = sugard-no-such-group\n", 2, "no group named"),
    ])
    func badConfigFileStopsStartWithFileAndLine(text: String, line: Int, mentions: String) async throws {
        let dir = try TempDirectory()
        try dir.write("bad.conf", text)
        let run = try SugardRun(in: dir, arguments: ["--config", dir.file("bad.conf")])
        let ended = await run.process.waitForExit(within: 30)
        #expect(ended == .exited(78), "stderr:\n\(run.stderr)")
        let stderr = run.stderr
        #expect(stderr.contains("\(dir.file("bad.conf")):\(line):"), "stderr: \(stderr)")
        #expect(stderr.contains(mentions))
        #expect(stderr.split(separator: "\n").count == 1, "one line: \(stderr)")
        #expect(run.notify.messages.isEmpty)
        #expect(access(run.socketPath, F_OK) != 0)
    }

    @Test func aBadDropInStopsStartWithItsFileAndLine() async throws {
        let dir = try TempDirectory()
        try dir.write("main.conf", "log_level = info\n")
        mkdir(dir.file("main.conf.d"), 0o755)
        try dir.write("main.conf.d/10-ok.conf", "cooldown_seconds = 5\n")
        try dir.write("main.conf.d/20-bad.conf", "# zone\ntimezone = Nowhere/Land\n")
        let run = try SugardRun(in: dir, arguments: ["--config", dir.file("main.conf")])
        #expect(await run.process.waitForExit(within: 30) == .exited(78))
        #expect(run.stderr.contains(dir.file("main.conf.d/20-bad.conf") + ":2:"), "stderr: \(run.stderr)")
    }

    @Test func missingConfigFileIsAConfigError() async throws {
        let dir = try TempDirectory()
        let run = try SugardRun(in: dir, arguments: ["--config", dir.file("absent.conf")])
        #expect(await run.process.waitForExit(within: 30) == .exited(78))
        #expect(run.stderr.contains(dir.file("absent.conf")))
    }

    @Test(arguments: [["--frobnicate"], ["--log-level"], ["--log-level", "loud"], ["--socket"]])
    func badFlagsAreUsageErrors(arguments: [String]) async throws {
        let dir = try TempDirectory()
        let run = try SugardRun(in: dir, arguments: arguments)
        #expect(await run.process.waitForExit(within: 30) == .exited(64), "stderr:\n\(run.stderr)")
        #expect(run.stderr.hasPrefix("sugard: "))
        #expect(run.notify.messages.isEmpty)
    }

    // MARK: - Logging

    @Test func journalPrefixesAndNoReadingValuesAboveDebug() async throws {
        // Run by systemd, at info: every line has a <N> priority, no reading value anywhere.
        let dir = try TempDirectory()
        let journal = try SugardRun(
            in: dir, name: "journal", arguments: ["--replay", Self.accuChek], environment: ["JOURNAL_STREAM": "8:1234"])
        try await journal.waitUntilReady()
        #expect(await eventually(within: 30) { journal.stderr.contains("sync ended") }, "stderr:\n\(journal.stderr)")
        #expect(await journal.stop() == .exited(0))
        let lines = journal.stderr.split(separator: "\n")
        #expect(lines.count >= 4)
        for line in lines {
            let priority = line.prefix(3)
            #expect(
                priority.count == 3 && priority.first == "<" && priority.last == ">"
                    && ("0"..."7").contains(priority.dropFirst().first!), "no <N> prefix: \(line)")
        }
        #expect(journal.stderr.contains("<5>sugard: sugard "))  // notice
        #expect(journal.stderr.contains("<6>sync: sync ended"))  // info
        for value in ["mgdL", "mg/dL", "142", "88.0", "97.0"] {
            #expect(!journal.stderr.contains(value), "a reading value (\(value)) at info level")
        }

        // Plain lines (timestamp, level) at debug: the values appear.
        let plainDirectory = try TempDirectory()
        let plain = try SugardRun(
            in: plainDirectory, name: "plain", arguments: ["--replay", Self.accuChek, "--log-level", "debug"])
        try await plain.waitUntilReady()
        #expect(await eventually(within: 30) { plain.stderr.contains("sync ended") })
        #expect(await plain.stop() == .exited(0))
        for line in plain.stderr.split(separator: "\n") {
            // 2026-11-30T11:38:50.500Z NOTICE sugard: …
            let fields = line.split(separator: " ", maxSplits: 2)
            #expect(fields.count == 3 && fields[0].hasSuffix("Z") && fields[0].contains("T"), "not a plain line: \(line)")
            #expect(["ERROR", "WARNING", "NOTICE", "INFO", "DEBUG"].contains(fields.count > 1 ? String(fields[1]) : ""))
            #expect(!line.hasPrefix("<"))
        }
        #expect(plain.stderr.contains(" DEBUG sync: reading "))
        #expect(plain.stderr.contains("mgdL=142.0"))
        #expect(plain.stderr.contains("mgdL=88.0"))
    }

    // MARK: - Idle

    @Test func idleDaemonStaysAsleep() async throws {
        let dir = try TempDirectory()
        let run = try SugardRun(in: dir, arguments: ["--replay", Self.wrap])
        try await run.waitUntilReady()
        let synced = await run.notify.waitForLine(within: 30) { $0.hasPrefix("STATUS=1 meter, 5 readings, last sync ") }
        try #require(synced != nil, "statuses: \(run.notify.statuses); stderr:\n\(run.stderr)")
        try await Task.sleep(for: .milliseconds(500))
        let messagesBefore = run.notify.messages.count

        let before = try ThreadActivity(pid: run.process.pid)
        try await Task.sleep(for: .seconds(3))
        let after = try ThreadActivity(pid: run.process.pid)
        let switches = after.switches(since: before)
        let cpu = after.cpuTicks - before.cpuTicks
        // libdispatch's worker-pool monitor wakes once a second on Linux (not ours to change); a
        // periodic task of the daemon would add a wake-up per tick and usually a thread.
        // Sanitizer runtimes add their own background threads and wake-ups: looser bounds there.
        let sanitized = !sanitizerEnvironment().isEmpty
        #expect(switches < (sanitized ? 120 : 30), "\(switches) context switches in 3 s while idle: \(before) → \(after)")
        #expect(cpu <= (sanitized ? 40 : 10), "\(cpu) ticks of CPU in 3 s while idle")
        #expect(run.notify.messages.count == messagesBefore, "notifications while idle: \(run.notify.messages.dropFirst(messagesBefore))")
        #expect(run.notify.count("WATCHDOG=1") == 0)
        #expect(await run.stop() == .exited(0))
    }

    // MARK: - sugarctl and the demo

    @Test func sugarctlFindsTheDemoWithoutFlags() async throws {
        let dir = try TempDirectory()
        let home = dir.file("h")
        let run = try SugardRun(in: dir, arguments: ["--demo"], environment: ["HOME": home], placeFiles: false)
        try await run.waitUntilReady()
        #expect(access(home + "/.local/state/sugard-demo/io.sugard.HealthDataSync", F_OK) == 0)
        let sugarctl = try builtProduct("sugarctl")
        var last: (Termination?, String, String) = (nil, "", "")
        let shown = await eventually(within: 30) {
            guard let child = try? ChildProcess(
                sugarctl, ["status"], environment: ["HOME": home, "TZ": "UTC"], outputPrefix: dir.file("ctl"))
            else { return false }
            last = (await child.waitForExit(within: 20), child.stdout, child.stderr)
            return last.0 == .exited(0) && last.1.contains("Accu-Chek Guide")
        }
        #expect(shown, "sugarctl status: \(last.0.map { "\($0)" } ?? "running")\n\(last.1)\(last.2)")
        #expect(await run.stop() == .exited(0))
    }
}
