import GlucoseProfile
import HealthDataSync
import JSON
import ProcessKit
import ReplayTransport
import SugarAPI
import SugarDaemon
import Synchronization
import Varlink
import ViewModelBenchmarks

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `sugar-bench socket C [--seconds S]`: the daemon hosted in this process (store in a scratch
/// directory, one simulated meter with 100 records on the replay transport, synced by itself) with C
/// clients calling GetStatus in a loop and C watchers following the view model while it changes
/// every 10 ms. Prints callsPerSecond, p50Micros, p99Micros (GetStatus round trips), watcherMessages
/// and peakRSSBytes (VmHWM).
enum SocketBenchmark {
    static func run(clients: Int, seconds: Int) async -> Int32 {
        guard let directory = makeScratchDirectory("sbench", for: "socket") else { return 1 }
        defer {
            removeScratchDirectory(
                directory, files: ["sugard.sqlite", "sugard.sqlite-wal", "sugard.sqlite-shm", "io.sugard.HealthDataSync"])
        }
        var config = DaemonConfig(stateDirectory: directory, socketPath: directory + "/io.sugard.HealthDataSync")
        config.logLevel = .warning
        config.timeZone = "UTC"
        config.maxConnectionsPerUID = max(1024, 2 * clients + 16)
        config.maxSocketConnections = max(4096, 2 * clients + 16)
        var simulator = MeterSimulator(personality: SimulatedFleet.personality(meter: 0))
        let start: Int64 = 1_711_864_800_000
        for i in 0..<100 {
            simulator.addRecord(
                GlucoseMeasurement(
                    sequenceNumber: 0, baseTime: SimulatedFleet.baseTime(unixMillis: start + Int64(i) * 600_000),
                    concentration: SFloat(rawValue: 0xB000 | UInt16(80 + i)), unit: .kilogramsPerLiter,
                    type: .capillaryPlasma, sampleLocation: .finger))
        }
        let replay = ReplayTransport(meters: [simulator], options: ReplayTransport.Options(adapterName: "bench"))
        do {
            let result = try await HostedDaemon.run(
                config: config, transport: replay, shutdown: { await replay.shutdown() },
                ready: { $0.models.viewModel.state.readingCount == 100 }
            ) { runtime in
                try await self.load(path: config.socketPath, clients: clients, seconds: seconds, models: runtime.models)
            }
            var object: JSONObject = ["benchmark": "socket", "clients": .int(Int64(clients)), "watchers": .int(Int64(clients))]
            for entry in result.entries { object[entry.key] = entry.value }
            object["peakRSSBytes"] = .from(FanoutBenchmark.peakRSSBytes())
            writeStdout(JSONValue.object(object).serialized() + "\n")
            return 0
        } catch {
            writeStderr("sugar-bench socket: \(error)\n")
            return 1
        }
    }

    private static func load(path: String, clients: Int, seconds: Int, models: ModelStore) async throws -> JSONObject {
        let messages = MessageCounter()
        let callers = try (0..<clients).map { _ in try VarlinkClient(socketPath: path) }
        let watchers = try (0..<clients).map { _ in try VarlinkClient(socketPath: path) }
        defer {
            for client in callers + watchers { client.close() }
        }
        let deadline = ContinuousClock.now + .seconds(seconds)
        let latencies: [[Int64]] = try await withThrowingTaskGroup(of: [Int64]?.self) { group in
            for watcher in watchers {
                group.addTask {
                    // Ends with an error when the benchmark closes the connection: that is the way out.
                    do {
                        for try await _ in watcher.callMore("io.sugard.HealthDataSync.Watch") {
                            messages.value.add(1, ordering: .relaxed)
                            if ContinuousClock.now >= deadline { break }
                        }
                    } catch {}
                    return nil
                }
            }
            group.addTask {
                var n = 0
                while ContinuousClock.now < deadline {
                    n += 1
                    let value = n
                    models.viewModel.update { $0.readingCount = value }
                    try await Task.sleep(for: .milliseconds(10))
                }
                return nil
            }
            for caller in callers {
                group.addTask {
                    var samples: [Int64] = []
                    samples.reserveCapacity(100_000)
                    let clock = ContinuousClock()
                    while clock.now < deadline {
                        let began = clock.now
                        _ = try await caller.call("io.sugard.HealthDataSync.GetStatus")
                        let (s, atto) = (clock.now - began).components
                        samples.append(s * 1_000_000 + atto / 1_000_000_000_000)
                    }
                    return samples
                }
            }
            var all: [[Int64]] = []
            while let next = try await group.next() {
                if let samples = next { all.append(samples) }
                if all.count == clients {
                    // Callers are done; end the watchers' streams too.
                    for watcher in watchers { watcher.close() }
                }
            }
            return all
        }
        var micros = latencies.flatMap { $0 }
        micros.sort()
        func percentile(_ p: Double) -> Int64 {
            micros.isEmpty ? 0 : micros[min(micros.count - 1, Int(Double(micros.count - 1) * p))]
        }
        return [
            "seconds": .int(Int64(seconds)),
            "calls": .int(Int64(micros.count)),
            "callsPerSecond": .int(Int64(Double(micros.count) / Double(seconds))),
            "p50Micros": .int(percentile(0.50)),
            "p99Micros": .int(percentile(0.99)),
            "watcherMessages": .int(Int64(messages.value.load(ordering: .relaxed))),
        ]
    }
}

/// Watch replies received, across watcher tasks.
final class MessageCounter: Sendable {
    let value = Atomic<Int>(0)
}
