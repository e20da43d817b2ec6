import Glibc
import JSON
import Testing
import TestSupport
import Varlink

@testable import GlucoseStore

/// Issue 39 against the built sugard: start-up does not read the whole database (no quick_check on
/// the way to ready); after an unclean stop the check runs in the background and a damaged page is
/// reported in the status (storage degraded, code corrupt, check damaged) while the daemon serves;
/// `sugarctl check` runs integrity_check on demand (exit 65 when damaged).
@Suite struct StartupCheckTests {
    static let interface = "io.sugard.HealthDataSync"

    static func status(_ run: SugardRun) async throws -> JSONObject {
        let client = try VarlinkClient(socketPath: run.socketPath, timeout: .seconds(10))
        defer { client.close() }
        return try await client.call(Self.interface + ".GetStatus")
    }

    static func storage(_ status: JSONObject?) -> JSONValue? { status?["state"]?["daemon"]?["storage"] }

    /// Overwrites the root page of an index nothing reads at start-up or during a sync (people's
    /// identifiers) with garbage, in the closed database.
    static func damageAnUntouchedPage(_ path: String) async throws {
        let store = try SQLiteReadingStore(path: path)
        let root = try #require(try await store.textForTesting("SELECT rootpage FROM sqlite_schema WHERE name = 'person_identifier_by_person'").first.flatMap { Int($0) })
        let pageSize = try #require(try await store.textForTesting("PRAGMA page_size").first.flatMap { Int($0) })
        await store.close()
        try #require(access(path + "-wal", F_OK) != 0, "the WAL is gone after a clean close")
        let fd = open(path, O_WRONLY)
        try #require(fd >= 0)
        let garbage = [UInt8](repeating: 0xA5, count: pageSize)
        let written = garbage.withUnsafeBytes { pwrite(fd, $0.baseAddress, pageSize, off_t((root - 1) * pageSize)) }
        close(fd)
        try #require(written == pageSize)
    }

    @Test func aDamagedPageIsReportedAfterReadyAndTheDaemonKeepsServing() async throws {
        let dir = try TempDirectory()
        // A first, clean run stores the capture's readings; no check runs after a clean stop.
        let first = try SugardRun(in: dir, name: "first", arguments: ["--replay", DaemonProcessTests.accuChek])
        try await first.waitUntilReady()
        #expect(await eventually(within: 30) { (try? await Self.status(first))?["state"]?["readingCount"]?.intValue == 5 })
        #expect(Self.storage(try await Self.status(first))?["check"] == .null)
        #expect(access(first.databasePath + ".running", F_OK) == 0, "the running marker exists while sugard runs")
        #expect(await first.stop() == .exited(0))
        #expect(access(first.databasePath + ".running", F_OK) != 0, "a clean stop removes the marker")

        // The file gets a damaged page, and the marker an unclean stop leaves behind.
        try await Self.damageAnUntouchedPage(first.databasePath)
        try dir.write("state/sugard.sqlite.running", "12345\n")

        let run = try SugardRun(in: dir, arguments: ["--replay", DaemonProcessTests.accuChek])
        try await run.waitUntilReady(within: 30)
        // Ready first; the readings are there and the daemon answers.
        #expect(try await Self.status(run)["state"]?["readingCount"]?.intValue == 5)
        var last: JSONObject?
        let reported = await eventually(within: 30) {
            last = try? await Self.status(run)
            return Self.storage(last)?["check"]?["result"]?.stringValue == "damaged"
        }
        #expect(reported, "\(String(describing: Self.storage(last)))\n\(run.stderr)")
        let storage = Self.storage(last)
        #expect(storage?["status"]?.stringValue == "degraded")
        #expect(storage?["error"]?["code"]?.stringValue == "corrupt")
        #expect(storage?["check"]?["kind"]?.stringValue == "quick")
        #expect(storage?["check"]?["reason"]?.stringValue == "uncleanShutdown")
        #expect((storage?["check"]?["problemCount"]?.intValue ?? 0) >= 1)
        #expect(run.stderr.contains("the last stop was not clean"), "\(run.stderr)")

        // sugarctl check runs integrity_check now: exit 65, the problems on stdout.
        let sugarctl = try ChildProcess(
            try builtProduct("sugarctl"), ["--socket", run.socketPath, "check"], environment: ["PATH": "/usr/bin:/bin"],
            outputPrefix: dir.file("check"))
        #expect(await sugarctl.waitForExit(within: 60) == .exited(65), "\(sugarctl.stdout)\(sugarctl.stderr)")
        #expect(sugarctl.stdout.contains("DAMAGED"), "\(sugarctl.stdout)")
        let json = try ChildProcess(
            try builtProduct("sugarctl"), ["--socket", run.socketPath, "check", "--json"], environment: ["PATH": "/usr/bin:/bin"],
            outputPrefix: dir.file("check-json"))
        #expect(await json.waitForExit(within: 60) == .exited(65))
        let parsed = try JSONValue(parsing: json.stdout)
        #expect(parsed["check"]?["result"] == "damaged" && parsed["check"]?["kind"] == "full" && parsed["check"]?["reason"] == "requested")
        #expect(Self.storage(try await Self.status(run))?["check"]?["kind"]?.stringValue == "full")
        // Nothing was lost, and the daemon still stores.
        #expect(try await Self.status(run)["state"]?["readingCount"]?.intValue == 5)
        #expect(await run.stop() == .exited(0))
    }

    @Test func aSoundStoreChecksOkOnDemand() async throws {
        let dir = try TempDirectory()
        let run = try SugardRun(in: dir, arguments: ["--replay", DaemonProcessTests.accuChek])
        try await run.waitUntilReady()
        #expect(await eventually(within: 30) { (try? await Self.status(run))?["state"]?["readingCount"]?.intValue == 5 })
        let sugarctl = try ChildProcess(
            try builtProduct("sugarctl"), ["--socket", run.socketPath, "check"], environment: ["PATH": "/usr/bin:/bin"],
            outputPrefix: dir.file("check"))
        #expect(await sugarctl.waitForExit(within: 60) == .exited(0), "\(sugarctl.stdout)\(sugarctl.stderr)")
        #expect(sugarctl.stdout.contains("Database check (integrity_check): ok"), "\(sugarctl.stdout)")
        let storage = Self.storage(try await Self.status(run))
        #expect(storage?["status"]?.stringValue == "ok")
        #expect(storage?["check"]?["result"]?.stringValue == "ok")
        #expect(await run.stop() == .exited(0))
    }
}

/// Issue 39: `max_connections` meters at once. Six simulated meters with three slots all sync;
/// never more than three are past `queued` at one time (from the daemon's own sessions), and the
/// status showed meters `queued` meanwhile.
@Suite struct ConnectionSlotDaemonTests {
    static let interface = "io.sugard.HealthDataSync"

    @Test func sixMetersWithThreeSlotsAllSyncNeverMoreThanThreeAtOnce() async throws {
        let dir = try TempDirectory()
        let now = Int64(time(nil))
        try dir.write("sugard.conf", """
            simulate_meters = 6
            simulate_start = \(now - 60)
            simulate_stop = \(now - 1)
            simulate_delay_us = 100000
            demo_interval = 10
            cooldown_seconds = 3600
            max_connections = 3
            timezone = UTC
            log_level = info

            """)
        let run = try SugardRun(in: dir, arguments: ["--config", dir.file("sugard.conf")])
        try await run.waitUntilReady()
        let client = try VarlinkClient(socketPath: run.socketPath, timeout: .seconds(10))
        defer { client.close() }
        var most = 0
        var sawQueued = false
        var sessions: [JSONValue] = []
        let done = await eventually(within: 120) {
            guard let status = try? await client.call(Self.interface + ".GetStatus") else { return false }
            let meters = status["state"]?["meters"]?.arrayValue ?? []
            let phases = meters.compactMap { $0["sync"]?.stringValue }
            sawQueued = sawQueued || phases.contains("queued")
            let connected = phases.filter { !["idle", "queued", "done", "failed", "waitingToRetry"].contains($0) }.count
            most = max(most, connected)
            sessions = (try? await client.call(Self.interface + ".ListSyncSessions"))?["sessions"]?.arrayValue ?? []
            let succeeded = Set(sessions.filter { $0["result"]?.stringValue == "success" }.compactMap { $0["meter"]?.stringValue })
            return meters.count == 6 && succeeded.count == 6
        }
        #expect(done, "sessions: \(sessions)\n\(String(run.stderr.suffix(4000)))")
        #expect(most <= 3, "the status showed \(most) meters connected at once")
        #expect(sawQueued || run.stderr.contains("sync waits for a connection slot"), "no meter was ever queued")
        // From the sessions the daemon recorded: at no instant did more than three overlap.
        let spans = sessions.compactMap { session -> (Int64, Int64)? in
            guard let start = session["started"]?["epochMillis"]?.intValue, let end = session["ended"]?["epochMillis"]?.intValue else { return nil }
            return (start, end)
        }
        #expect(spans.count >= 6)
        for (start, _) in spans {
            let overlapping = spans.filter { $0.0 <= start && start < $0.1 }.count
            #expect(overlapping <= 3, "\(overlapping) sessions ran at \(start): \(spans)")
        }
        #expect(run.stderr.contains("sync waits for a connection slot"), "\(String(run.stderr.suffix(4000)))")
        #expect(await run.stop() == .exited(0))
    }
}
