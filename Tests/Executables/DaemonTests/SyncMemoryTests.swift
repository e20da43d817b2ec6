import Glibc
import JSON
import Testing
import TestSupport
import Varlink

/// Issue 32: one sync has a memory bound. The built sugard syncs a simulated meter holding
/// 100 000 records (`simulate_meters`, the meter lives in sugard's own process, so its records
/// count too); its peak RSS (VmHWM) stays under 40 MB. Before chunked commits the same sync took
/// sugard to 67 MB. Figures for the release build: `sugar-bench sync-memory` (BENCHMARKS.md).
@Suite(.serialized) struct SyncMemoryTests {
    static let interface = "io.sugard.HealthDataSync"
    static let records = 100_000
    static let boundBytes = 40 * 1_048_576

    /// VmHWM of a process, in bytes.
    static func peakResident(_ pid: pid_t) -> Int? {
        let status = readText("/proc/\(pid)/status")
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            return Int(line.filter(\.isNumber)).map { $0 * 1024 }
        }
        return nil
    }

    @Test func aHundredThousandRecordMeterSyncsUnderFortyMegabytes() async throws {
        let dir = try TempDirectory()
        // One reading a second, all taken before sugard starts; none after.
        let now = Int64(time(nil))
        let start = now - Int64(Self.records) - 5
        try dir.write("sugard.conf", """
            simulate_meters = 1
            simulate_start = \(start)
            simulate_stop = \(start + Int64(Self.records))
            simulate_delay_us = 100
            demo_interval = 1
            cooldown_seconds = 0
            timezone = UTC
            log_level = notice

            """)
        let run = try SugardRun(in: dir, arguments: ["--config", dir.file("sugard.conf")])
        try await run.waitUntilReady()
        let client = try VarlinkClient(socketPath: run.socketPath, timeout: .seconds(10))
        defer { client.close() }
        // Sequence numbers are 16 bits: one download of the meter keeps 65 536 records, one per number.
        let expected: Int64 = 65_536
        var count: Int64 = 0
        let stored = await eventually(within: 300) {
            count = (try? await client.call(Self.interface + ".GetStatus"))?["state"]?["readingCount"]?.intValue ?? count
            return count >= expected
        }
        try #require(stored, "\(count) of \(expected) readings stored; stderr:\n\(String(run.stderr.suffix(4000)))")
        let peak = try #require(Self.peakResident(run.process.pid))
        print("sugard peak RSS after syncing \(Self.records) simulated records: \(peak / 1024) KiB")
        #expect(peak < Self.boundBytes, "VmHWM \(peak / 1024) KiB")
        // The sync logged a summary, not one line per record or anomaly.
        let longest = run.stderr.split(separator: "\n").map(\.utf8.count).max() ?? 0
        #expect(longest < 2048, "the longest log line has \(longest) bytes")
        #expect(await run.stop() == .exited(0))
    }
}
