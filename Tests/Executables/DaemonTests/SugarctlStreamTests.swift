import Glibc
import Testing
import TestSupport

/// `sugarctl` streams against a real sugard process that goes away under them.
@Suite struct SugarctlStreamTests {
    /// The README's promise: a daemon that cannot be reached exits 69, also when it dies while
    /// `sugarctl sync` follows a sync.
    @Test func syncStreamWhoseDaemonIsKilledExits69() async throws {
        let dir = try TempDirectory()
        try dir.write("slow.btsnoop", DaemonProcessTests.manyRecordCapture(count: 3))
        // 300 ms per meter operation: the forced sync below takes seconds, time enough to kill sugard in it.
        try dir.write("sugard.conf", "replay_delay_ms = 300\ncooldown_seconds = 0\n")
        let run = try SugardRun(in: dir, arguments: ["--config", dir.file("sugard.conf"), "--replay", dir.file("slow.btsnoop")])
        try await run.waitUntilReady()
        let sugarctl = try builtProduct("sugarctl")
        let env = ["PATH": "/usr/bin:/bin", "HOME": dir.path, "TZ": "UTC", "SUGARD_SOCKET": run.socketPath]
        // The automatic first sync of the meter ends first (a second sync would be refused as running).
        let firstSyncDone = try await eventually(within: 60) {
            let sessions = try await runToEnd(sugarctl, ["sessions", "--json"], environment: env, dir: dir.path, seconds: 20)
            return sessions.stdout.contains("\"success\"")
        }
        try #require(firstSyncDone, "the first sync did not end; stderr:\n\(run.stderr)")

        let sync = try ChildProcess(sugarctl, ["sync", "--force"], environment: env, outputPrefix: dir.file("sync"))
        let following = await eventually(within: 30) { sync.stdout.contains(": ") }
        try #require(following, "sugarctl sync showed no progress: \(sync.stdout) \(sync.stderr)")
        #expect(sync.isRunning, "the sync ended before sugard was killed; the test proves nothing: \(sync.stdout)")
        run.process.signal(SIGKILL)
        #expect(await run.process.waitForExit(within: 10) == .signalled(SIGKILL))
        let end = await sync.waitForExit(within: 30)
        #expect(end == .exited(69), "\(end.map { "\($0)" } ?? "still running"); stdout:\n\(sync.stdout)\nstderr:\n\(sync.stderr)")
        #expect(sync.stderr.contains("sugard closed the connection"), "\(sync.stderr)")
        #expect(sync.stderr.contains("systemctl status sugard"), "\(sync.stderr)")
    }
}
