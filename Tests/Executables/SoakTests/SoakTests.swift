import Foundation
import Glibc
import GlucoseStore
import HealthDataSync
import JSON
import SugarDaemon
import Testing
import TestSupport

/// The soak on simulated meters: the built `sugard` with `simulate_meters` (several simulated meters
/// taking a reading every second, on a timetable that survives restarts) runs for
/// `SUGARD_SOAK_SECONDS` (default 150) while clients connect, watch, list, sync and disconnect at
/// random (two hostile clients among them for the first fifth: worst-case JSON, unread GetStatus
/// floods, idle connections), and the daemon is SIGKILLed (sometimes SIGTERMed) and restarted at random. Then a last
/// daemon run serves clients with no kills; the meters stop taking readings; a forced sync of every
/// meter runs; and:
/// - every reading the simulated meters ever took is stored exactly once (same sequence number,
///   base time and value; nothing else stored), and `PRAGMA integrity_check` says ok;
/// - the last run's RSS at its start and end is reported and may grow by at most 25% + 8 MiB;
/// - the last run's open file descriptors (with no client connected) do not grow.
/// `SUGARD_SOAK_SEED` replays a run's random choices (the seed is printed; timing still varies);
/// `SUGARD_SOAK_KEEP=1` keeps the state directory and the daemons' log.
/// The soak over the BlueZ stand-in (bluetoothd restarts) is `BlueZSoakTests`.
@Suite(.serialized) struct SoakTests {
    static let meters = 4

    @Test func soakWithKillsAndClientChurn() async throws {
        let seconds = Soak.seconds(default: 150)
        try await Soak.withBudget(seconds: seconds * 3 + 240) { try await Self.soak(seconds: seconds) }
    }

    static func soak(seconds: Int) async throws {
        var random = SplitMix(seed: Soak.seed("soak", seconds: seconds))
        let sugard = try builtProduct("sugard")
        let dir = try Soak.makeTemporaryDirectory()
        defer {
            if Soak.keep { print("soak: kept \(dir) (log: sugard.log)") } else { try? FileManager.default.removeItem(atPath: dir) }
        }

        let t0 = nowMillis() / 1000
        let chaosEnd = t0 + Int64(Double(seconds) * 0.55)
        let stop = t0 + Int64(Double(seconds) * 0.8)
        let end = t0 + Int64(seconds)
        let socket = dir + "/io.sugard.HealthDataSync"
        let configFile = dir + "/sugard.conf"
        try """
        state_dir = \(dir)/state
        socket = \(socket)
        simulate_meters = \(Self.meters)
        simulate_start = \(t0)
        simulate_stop = \(stop)
        demo_interval = 1
        cooldown_seconds = 2
        timezone = UTC
        log_level = notice

        """.write(toFile: configFile, atomically: true, encoding: .utf8)
        let log = open(dir + "/sugard.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard log >= 0 else { throw RigError("cannot open \(dir)/sugard.log") }
        defer { close(log) }
        func startDaemon() throws -> Child {
            try Child(sugard, ["--config", configFile], environment: ["PATH": "/usr/bin:/bin", "TZ": "UTC"], stdout: log, stderr: log)
        }
        let churn = ClientChurn(socket: socket, meters: (0..<Self.meters).map { SimulatedFleet.meterID($0).rawValue })

        // Phase 1: kills and restarts while clients come and go.
        var runs = 0
        var kills = 0
        let clientSeeds = (0..<6).map { _ in random.next() }
        // Whatever ends this block (a thrown error included) stops the clients.
        defer { churn.stop() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for clientSeed in clientSeeds {
                group.addTask { await churn.client(seed: clientSeed) }
            }
            // Two hostile clients (worst-case JSON, unread floods, idle connections) for the first
            // fifth of the run, among the kills.
            let hostileSeconds = max(5, seconds / 5)
            for hostileSeed in clientSeeds.prefix(2) {
                group.addTask { await churn.hostile(seed: hostileSeed ^ 0xBAD, seconds: hostileSeconds) }
            }
            while nowMillis() / 1000 < chaosEnd {
                let daemon = try startDaemon()
                runs += 1
                let ready = await Soak.waitForSocket(socket, seconds: 15)
                #expect(ready, "sugard run \(runs) did not serve its socket within 15 s (see \(dir)/sugard.log)")
                try await Task.sleep(for: .milliseconds(500 + random.below(9_500)))
                if random.below(5) == 0 {
                    let status = await daemon.terminate(graceSeconds: 20)
                    #expect(status == 0, "sugard run \(runs) did not stop cleanly on SIGTERM: status \(String(describing: status))")
                } else {
                    daemon.kill()
                    kills += 1
                }
            }

            // Phase 2: the last run. No kills; clients keep coming until just before the end.
            let daemon = try startDaemon()
            runs += 1
            #expect(await Soak.waitForSocket(socket, seconds: 15), "the last sugard run did not serve its socket")
            churn.stop()
            try await Task.sleep(for: .seconds(3))
            let fdStart = daemon.fileDescriptorCount
            let rssStart = daemon.residentBytes
            churn.resume()
            for clientSeed in clientSeeds {
                group.addTask { await churn.client(seed: clientSeed ^ 0xFACE) }
            }
            while nowMillis() / 1000 < max(end - 4, stop + 2) { try await Task.sleep(for: .milliseconds(250)) }
            churn.stop()
            // Waits for the client tasks (each finishes its current step).
            while let _ = try await group.next() {}

            // Every meter's readings are in its simulator; a forced sync of each fetches the rest.
            let results = await Soak.finalSync(socket: socket)
            print("soak: final forced sync results \(results)")
            #expect(results.count == Self.meters, "the final sync covered \(results.count) of \(Self.meters) meters")
            try await Task.sleep(for: .seconds(2))
            let fdEnd = daemon.fileDescriptorCount
            let rssEnd = daemon.residentBytes
            let status = await daemon.terminate(graceSeconds: 30)
            let calls = churn.steps
            print(
                """
                soak: \(runs) daemon runs, \(kills) SIGKILLs; client steps \(calls.steps) (\(calls.failures) failed while \
                the daemon was down or dying); last run RSS start \(rssStart) B end \(rssEnd) B; fds start \(fdStart) end \(fdEnd)
                """)
            #expect(status == 0, "the last sugard run exited with status \(String(describing: status)) on SIGTERM (see \(dir)/sugard.log)")
            Soak.expectFlat(fds: (fdStart, fdEnd), rss: (rssStart, rssEnd))
            #expect(calls.successes > 0, "no client step ever succeeded")
        }

        // Every reading exactly once.
        let store = try SQLiteReadingStore(path: dir + "/state/sugard.sqlite")
        #expect(try await store.integrityCheck() == ["ok"])
        var total = 0
        for k in 0..<Self.meters {
            let id = SimulatedFleet.meterID(k)
            let expectedCount = SimulatedFleet.readingCount(
                meter: k, at: (stop + 10) * 1000, start: t0, stop: stop, intervalSeconds: 1, meters: Self.meters)
            var expected: [String] = []
            for i in stride(from: 1, through: expectedCount, by: 1) {
                let at = SimulatedFleet.readingTime(meter: k, index: i, start: t0, intervalSeconds: 1, meters: Self.meters)
                expected.append("\(i) \(LocalDateTime(secondsSinceEpoch: at / 1000).isoString) \(0xB000 | SimulatedFleet.value(meter: k, index: i))")
            }
            let stored = try await store.readings(ReadingQuery(meter: id)).map { row in
                let r = row.reading
                return "\(r.sequenceNumber) \(r.baseTime.isoString) \(r.concentrationRaw.map(Int.init) ?? -1)"
            }
            print("soak: meter \(id): expected \(expectedCount), stored \(stored.count)")
            #expect(expectedCount > 0)
            expectExactlyOnce(stored: stored, expected: expected, meter: id.rawValue)
            total += stored.count
        }
        await store.close()
        print("soak: \(total) readings stored")
    }
}

/// Compares a meter's stored readings (as keys) with what it took: none missing, none twice, none
/// it never took.
func expectExactlyOnce(stored: [String], expected: [String], meter: String) {
    var counts: [String: Int] = Dictionary(uniqueKeysWithValues: expected.map { ($0, 0) })
    var unexpected: [String] = []
    for key in stored {
        if counts[key] != nil { counts[key]! += 1 } else { unexpected.append(key) }
    }
    let missing = counts.filter { $0.value == 0 }.map(\.key).sorted()
    let doubled = counts.filter { $0.value > 1 }.map(\.key).sorted()
    #expect(missing.isEmpty, "meter \(meter) lacks \(missing.count) readings: \(missing.prefix(5))")
    #expect(doubled.isEmpty, "meter \(meter) stored \(doubled.count) readings twice: \(doubled.prefix(5))")
    #expect(unexpected.isEmpty, "meter \(meter) stored readings it never took: \(unexpected.prefix(5))")
}
