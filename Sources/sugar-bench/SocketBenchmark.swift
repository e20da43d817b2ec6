import GlucoseStore
import HealthDataSync
import JSON
import SugarAPI
import Synchronization
import Varlink
import ViewModelBenchmarks

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `sugar-bench socket C [--seconds S]`: a live io.sugard.HealthDataSync server (the interface's test
/// backend over SQLite in a scratch directory) with C clients calling GetStatus in a loop and C
/// watchers following the view model while it changes every 10 ms. Prints callsPerSecond,
/// p50Micros, p99Micros (GetStatus round trips), watcherMessages and peakRSSBytes (VmHWM).
enum SocketBenchmark {
    static func run(clients: Int, seconds: Int) async -> Int32 {
        guard let directory = makeScratchDirectory("sbench", for: "socket") else { return 1 }
        defer { removeScratchDirectory(directory, files: ["readings.db", "readings.db-wal", "readings.db-shm", "io.sugard.HealthDataSync"]) }
        do {
            let store = try SQLiteReadingStore(path: directory + "/readings.db")
            let backend = InterfaceTestBackend(store: store)
            let meter = MeterIdentity(id: MeterID("C0:26:DA:01:02:03"), manufacturer: "Roche", model: "Accu-Chek Guide")
            backend.addMeter(meter)
            let start = Instant(epochMillis: 1_711_864_800_000)
            let readings = (0..<100).map {
                InterfaceTestBackend.reading(
                    meter: meter.id, sequence: UInt16($0 + 1), mgdL: 80 + $0,
                    at: Instant(epochMillis: start.epochMillis + Int64($0) * 600_000))
            }
            try await backend.seed(meter, readings: readings, at: start)
            let service = HealthDataSyncService(backend: backend, access: .currentProcess(socketGroup: nil, adminGroup: nil))
            let path = directory + "/io.sugard.HealthDataSync"
            let server = try service.makeServer(listen: .path(path), version: "bench")
            let result = try await withThrowingTaskGroup(of: Void.self) { group -> JSONObject in
                group.addTask { try await server.run() }
                let result = try await self.load(path: path, clients: clients, seconds: seconds, models: backend.models)
                group.cancelAll()
                try await group.waitForAll()
                return result
            }
            backend.models.shutdown()
            await store.close()
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
