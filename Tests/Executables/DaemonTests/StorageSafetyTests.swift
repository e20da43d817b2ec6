import Glibc
import JSON
import Testing
import TestSupport
import Varlink

/// Issue #22 items 5 and 6 against the built `sugard`: the database and its WAL/SHM files are 0600 and
/// the state directory 0750 whatever existed before; storage that failed and recovers is shown again
/// (count, readings) without a restart.
@Suite struct StorageSafetyTests {
    static let interface = "io.sugard.HealthDataSync"

    static func mode(_ path: String) -> mode_t? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return info.st_mode & 0o7777
    }

    static func status(_ run: SugardRun) async throws -> JSONObject {
        let client = try VarlinkClient(socketPath: run.socketPath, timeout: .seconds(10))
        defer { client.close() }
        return try await client.call(Self.interface + ".GetStatus")
    }

    @Test func databaseAndStateDirectoryAreTightenedWhateverExistedBefore() async throws {
        let dir = try TempDirectory()
        let state = dir.file("state")
        try #require(mkdir(state, 0o755) == 0)
        try #require(chmod(state, 0o755) == 0)  // whatever the umask
        let run = try SugardRun(in: dir, arguments: ["--replay", DaemonProcessTests.accuChek])
        try await run.waitUntilReady()
        #expect(await eventually(within: 30) { (try? await Self.status(run))?["state"]?["readingCount"]?.intValue == 5 })
        #expect(Self.mode(state) == 0o750)
        for file in [run.databasePath, run.databasePath + "-wal", run.databasePath + "-shm"] {
            #expect(Self.mode(file) == 0o600, "\(file): \(Self.mode(file).map { String($0, radix: 8) } ?? "missing")")
        }
        #expect(await run.stop() == .exited(0))

        // An older version (or another tool) left them open to everyone: the next start tightens them.
        try #require(chmod(state, 0o755) == 0)
        try #require(chmod(run.databasePath, 0o644) == 0)
        let again = try SugardRun(in: dir, name: "again", arguments: ["--replay", DaemonProcessTests.accuChek])
        try await again.waitUntilReady()
        #expect(Self.mode(state) == 0o750)
        #expect(Self.mode(run.databasePath) == 0o600)
        if let wal = Self.mode(run.databasePath + "-wal") { #expect(wal == 0o600) }
        #expect(again.stderr.contains("was mode 755; now 750"), "\(again.stderr)")
        #expect(try await Self.status(again)["state"]?["readingCount"]?.intValue == 5)
        #expect(await again.stop() == .exited(0))
    }

    /// The state directory is unusable at start (a file stands where it should be, so SQLite cannot
    /// open the database; as root, a read-only mode would not stop us) and becomes usable again.
    @Test func storageThatRecoversIsShownWithoutARestart() async throws {
        let dir = try TempDirectory()
        let first = try SugardRun(in: dir, name: "first", arguments: ["--replay", DaemonProcessTests.accuChek])
        try await first.waitUntilReady()
        #expect(await eventually(within: 30) { (try? await Self.status(first))?["state"]?["readingCount"]?.intValue == 5 })
        #expect(await first.stop() == .exited(0))

        let state = dir.file("state")
        let aside = dir.file("state.aside")
        try #require(rename(state, aside) == 0)
        try dir.write("state", "not a directory\n")
        let run = try SugardRun(in: dir, arguments: ["--replay", DaemonProcessTests.accuChek])
        try await run.waitUntilReady()
        let broken = try await Self.status(run)
        #expect(broken["state"]?["daemon"]?["storage"]?["status"]?.stringValue == "failed", "\(broken)")
        #expect(broken["state"]?["readingCount"]?.intValue == 0)

        try #require(unlink(state) == 0)
        try #require(rename(aside, state) == 0)
        let healed = await eventually(within: 15) {
            let status = try? await Self.status(run)
            return status?["state"]?["daemon"]?["storage"]?["status"]?.stringValue == "ok"
                && status?["state"]?["readingCount"]?.intValue == 5
        }
        let after = try? await Self.status(run)
        #expect(healed, "status after the state directory came back: \(String(describing: after))\n\(run.stderr)")
        let client = try VarlinkClient(socketPath: run.socketPath, timeout: .seconds(10))
        defer { client.close() }
        let readings = try await client.call(Self.interface + ".ListReadings", ["limit": 100])["readings"]?.arrayValue ?? []
        #expect(readings.count == 5)
        #expect(run.stderr.contains("works again"), "\(run.stderr)")
        #expect(await run.stop() == .exited(0))
    }
}
