import DBus
import Foundation
import Glibc
import GlucoseProfile
import GlucoseStore
import HealthDataSync
import JSON
import Testing
import TestSupport

/// The soak over the BlueZ stand-in: a private bus, the stand-in (bluetoothd: dbusmock with
/// Tests/Support/bluez-standin/glucose_meter.py) serving several meters, and the built `sugard`
/// talking to it through `DBUS_SYSTEM_BUS_ADDRESS`, for `SUGARD_SOAK_SECONDS` (default 90):
/// - the meters take new readings at random (the stand-in gets them with `AddGlucoseRecords` and
///   the meter advertises, which starts an automatic sync);
/// - bluetoothd is SIGKILLed at random (half the time while a meter is sending records, 100 ms each) and comes
///   back a moment later holding every record its meters took so far, as a restarted bluetoothd
///   finds a meter that kept its memory;
/// - the daemon is SIGKILLed (sometimes SIGTERMed) and restarted at random;
/// - clients connect, watch, list, sync and disconnect at random all along.
/// The last 40% is one daemon run with no kills (bluetoothd restarts and new readings go on) whose
/// RSS and descriptors are read at its start and end. Then every meter gets a forced sync and:
/// every record a meter holds is stored exactly once, byte for byte (measurement and context),
/// nothing else is stored, `PRAGMA integrity_check` says ok, RSS stays flat and descriptors do not
/// grow. `SUGARD_SOAK_SEED` replays the random choices; `SUGARD_SOAK_KEEP=1` keeps the logs.
@Suite(.serialized) struct BlueZSoakTests {
    static let addresses = ["C0:26:DA:50:00:01", "C0:26:DA:50:00:02", "C0:26:DA:50:00:03"]

    @Test func soakWithBluetoothdRestartsKillsAndClientChurn() async throws {
        let seconds = Soak.seconds(default: 90)
        try await Soak.withBudget(seconds: seconds * 3 + 240) { try await Self.soak(seconds: seconds) }
    }

    /// The record a meter takes as its `sequenceNumber`th reading; every third carries a context.
    static func record(meter: Int, _ sequenceNumber: UInt16) -> MeterRecord {
        MeterRecord(
            sequenceNumber: sequenceNumber, mgdL: 60 + (Int(sequenceNumber) * 13 + meter * 29) % 300,
            withContext: sequenceNumber % 3 == 0)
    }

    /// What the meters hold: the stand-in's parameters at each (re)start.
    static func parameters(_ truth: [[MeterRecord]]) -> String {
        standIn(
            truth.enumerated().map { k, records in
                SimulatedMeter(address: Self.addresses[k], name: "Soak Meter \(k + 1)", records: records, options: #""record_interval_ms": 100"#)
            })
    }

    static func soak(seconds: Int) async throws {
        var random = SplitMix(seed: Soak.seed("bluez soak", seconds: seconds))
        let rig = try Rig()
        rig.keepDirectory = Soak.keep
        do {
            try await Self.soak(seconds: seconds, rig: rig, random: &random)
        } catch {
            print("bluez soak: failed: \(error)\n--- sugard log:\n\(rig.daemonLog)\n--- stand-in log:\n\(rig.standInLog)")
            await rig.stop()
            throw error
        }
        if Soak.keep { print("bluez soak: kept \(rig.dir) (sugard.log, standin.log)") }
        await rig.stop()
    }

    /// What CI needs to tell where a reading went: the meter's sessions, oldest first, and the
    /// daemon's lines about the meter (without the per-reading debug lines).
    static func explainMissing(meter: String, sessions: [SyncSessionRecord], logPath: String) {
        print("bluez soak: sessions of \(meter), oldest first:")
        for s in sessions.reversed() {
            print(
                "  #\(s.id ?? -1) \(s.started.epochMillis)-\(s.ended?.epochMillis ?? -1) \(s.result) expected \(s.expected ?? -1) "
                    + "received \(s.received) stored \(s.stored) duplicates \(s.duplicates) resets \(s.sequenceResets) \(s.error ?? "")")
        }
        let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        let lines = log.split(separator: "\n").filter {
            ($0.contains(meter) && !$0.contains("DEBUG sync: reading ")) || $0.contains(" ready ") || $0.contains("BlueZ is")
        }
        let shown = lines.count <= 160 ? lines : lines.prefix(110) + ["  [...]"] + lines.suffix(50)
        print("bluez soak: sugard's lines about \(meter) (\(lines.count)):\n" + shown.joined(separator: "\n"))
    }

    static func soak(seconds: Int, rig: Rig, random: inout SplitMix) async throws {
        let t0 = nowMillis()
        let chaosEnd = t0 + Int64(seconds) * 600
        let end = t0 + Int64(seconds) * 900
        let config = ["cooldown_seconds = 1", "timezone = UTC"]
        var truth: [[MeterRecord]] = Self.addresses.indices.map { k in
            (1...UInt16(4 + 6 * k)).map { Self.record(meter: k, $0) }
        }
        try await rig.startBus()
        try await rig.startStandIn(Self.parameters(truth))
        try await rig.startDaemon(config: config)

        var counts = (readings: 0, bluetoothdRestarts: 0, kills: 0, terms: 0, daemonRuns: 1, midTransfer: 0)
        /// Waits up to 2 s for a meter to be sending records (a sync under way); whether one was.
        func waitForTransfer() async throws -> Bool {
            guard rig.standInRunning else { return false }
            let deadline = nowMillis() + 2_000
            while nowMillis() < deadline {
                for address in Self.addresses {
                    if try await rig.meterState(address)["transfer_in_progress"]?.boolValue == true { return true }
                }
                try await Task.sleep(for: .milliseconds(10))
            }
            return false
        }
        /// A meter takes 1–4 new readings; a running stand-in gets them and the meter advertises.
        func takeReadings() async throws {
            let k = random.below(Self.addresses.count)
            let next = (truth[k].last?.sequenceNumber ?? 0) + 1
            let new = (next...(next + UInt16(random.below(4)))).map { Self.record(meter: k, $0) }
            truth[k] += new
            counts.readings += new.count
            guard rig.standInRunning else { return }  // it will hold them when it comes back
            try await rig.mock("AddGlucoseRecords", [.string(Self.addresses[k]), .string(recordsJSON(new))])
            try await rig.mock("SetGlucoseMeterInRange", [.string(Self.addresses[k]), .bool(true)])
        }
        /// bluetoothd crashes and is back 0.1–2.5 s later with every record its meters hold.
        func restartBluetoothd() async throws {
            if random.below(2) == 0 { counts.midTransfer += try await waitForTransfer() ? 1 : 0 }
            rig.killStandIn()
            counts.bluetoothdRestarts += 1
            try await Task.sleep(for: .milliseconds(100 + random.below(2_400)))
            try await rig.startStandIn(Self.parameters(truth))
        }

        let churn = ClientChurn(socket: rig.socketPath, meters: Self.addresses)
        let clientSeeds = (0..<5).map { _ in random.next() }
        defer { churn.stop() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for seed in clientSeeds { group.addTask { await churn.client(seed: seed) } }

            // Phase 1: everything at random.
            while nowMillis() < chaosEnd {
                switch random.below(10) {
                case 0...3: try await takeReadings()
                case 4, 5: try await restartBluetoothd()
                case 6, 7:
                    if random.below(2) == 0 { counts.midTransfer += try await waitForTransfer() ? 1 : 0 }
                    if random.below(4) == 0 {
                        let status = await rig.stopDaemon(seconds: 20)
                        #expect(status == 0, "sugard did not stop cleanly on SIGTERM: \(String(describing: status))\n\(rig.daemonLog)")
                        counts.terms += 1
                    } else {
                        rig.killDaemon()
                        counts.kills += 1
                    }
                    try await Task.sleep(for: .milliseconds(random.below(1_000)))
                    try await rig.startDaemon(config: config)
                    counts.daemonRuns += 1
                default: break
                }
                try await Task.sleep(for: .milliseconds(200 + random.below(1_300)))
            }

            // Phase 2: the last daemon run, started with bluetoothd up and no client connected.
            #expect(await rig.stopDaemon(seconds: 20) == 0, "sugard did not stop cleanly on SIGTERM\n\(rig.daemonLog)")
            if !rig.standInRunning { try await rig.startStandIn(Self.parameters(truth)) }
            churn.stop()
            while let _ = try await group.next() {}
            try await rig.startDaemon(config: config)
            counts.daemonRuns += 1
            try await Task.sleep(for: .seconds(3))
            let daemon = try #require(rig.daemonProcess)
            let fdStart = daemon.fileDescriptorCount
            let rssStart = daemon.residentBytes
            churn.resume()
            for seed in clientSeeds { group.addTask { await churn.client(seed: seed ^ 0xB10E) } }
            while nowMillis() < end {
                switch random.below(10) {
                case 0...5: try await takeReadings()
                case 6, 7: try await restartBluetoothd()
                default: break
                }
                try await Task.sleep(for: .milliseconds(200 + random.below(1_300)))
            }
            churn.stop()
            while let _ = try await group.next() {}
            if !rig.standInRunning { try await rig.startStandIn(Self.parameters(truth)) }

            // Every meter holds all its readings: a forced sync of each fetches what is missing.
            for address in Self.addresses {
                var results: [String] = []
                for _ in 0..<5 {
                    results = await Soak.finalSync(socket: rig.socketPath, meter: address)
                    if results.contains(where: { ["success", "noNewRecords"].contains($0) }) { break }
                    try await Task.sleep(for: .seconds(1))
                }
                print("bluez soak: final sync of \(address): \(results)")
                #expect(results.contains { ["success", "noNewRecords"].contains($0) }, "the final sync of \(address) did not succeed: \(results)")
            }
            try await Task.sleep(for: .seconds(2))
            let fdEnd = daemon.fileDescriptorCount
            let rssEnd = daemon.residentBytes
            let status = await rig.stopDaemon(seconds: 30)
            let calls = churn.steps
            print(
                """
                bluez soak: \(counts.readings) new readings, \(counts.bluetoothdRestarts) bluetoothd restarts, \
                \(counts.daemonRuns) daemon runs (\(counts.kills) SIGKILLs, \(counts.terms) SIGTERMs), \(counts.midTransfer) of \
                those kills while a meter was sending records; client steps \
                \(calls.steps) (\(calls.failures) failed while the daemon or bluetoothd was down); last run RSS start \
                \(rssStart) B end \(rssEnd) B; fds start \(fdStart) end \(fdEnd)
                """)
            #expect(status == 0, "the last sugard run exited with \(String(describing: status)) on SIGTERM\n\(rig.daemonLog)")
            Soak.expectFlat(fds: (fdStart, fdEnd), rss: (rssStart, rssEnd))
            #expect(calls.successes > 0, "no client step ever succeeded")
            #expect(counts.bluetoothdRestarts > 0 && counts.readings > 0, "the soak was too short to restart bluetoothd")
        }

        // Every record exactly once, byte for byte.
        let store = try SQLiteReadingStore(path: rig.databasePath)
        #expect(try await store.integrityCheck() == ["ok"])
        var total = 0
        for (k, address) in Self.addresses.enumerated() {
            let expected = truth[k].map { hex($0.measurement.encoded()) + "/" + hex($0.context?.encoded() ?? []) }
            let stored = try await store.readings(ReadingQuery(meter: MeterID(address))).map {
                hex($0.reading.measurementBytes) + "/" + hex($0.reading.contextBytes ?? [])
            }
            let sessions = try await store.sessions(meter: MeterID(address), limit: 100_000)
            let results = Dictionary(grouping: sessions, by: { "\($0.result)" }).mapValues(\.count).sorted { $0.key < $1.key }
            print(
                """
                bluez soak: meter \(address): took \(expected.count), stored \(stored.count); sessions \(results), \
                \(sessions.reduce(0) { $0 + $1.duplicates }) duplicates dropped
                """)
            expectExactlyOnce(stored: stored, expected: expected, meter: address)
            if !Set(expected).isSubset(of: Set(stored)) {
                let row = try await store.meter(MeterID(address))
                print("bluez soak: \(address) now: epoch \(row?.epoch ?? -1), high-water mark \(row?.highWater.map(String.init) ?? "none")")
                for event in try await store.events(meter: MeterID(address), limit: 1_000) { print("bluez soak: sequence reset \(event)") }
                Self.explainMissing(meter: address, sessions: sessions, logPath: rig.dir + "/sugard.log")
            }
            total += stored.count
        }
        await store.close()
        print("bluez soak: \(total) readings stored")
    }
}
