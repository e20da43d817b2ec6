import Glibc
import GlucoseStoreFixtures
import JSON
import Locking
import Synchronization
import Varlink

/// A small deterministic generator (the project's one SplitMix64) so a seed replays a test's random choices.
package struct SplitMix: RandomNumberGenerator {
    private var generator: SplitMix64
    package init(seed: UInt64) { self.generator = SplitMix64(seed: seed) }
    package mutating func next() -> UInt64 { self.generator.next() }
    /// A value in `0..<bound`.
    package mutating func below(_ bound: Int) -> Int { Int(self.next() % UInt64(bound)) }
}

/// Random Varlink clients for the soaks: each connects, then watches for a while, calls GetStatus,
/// ListReadings, ListMeters or a forced Sync of one of `meters`, then disconnects (or stays for
/// another step), until told to stop or cancelled. Calls fail while the daemon is down; that is
/// counted, not an error.
package final class ClientChurn: Sendable {
    /// Whether the clients keep going.
    private let running = Atomic<Bool>(true)
    private let counts = Lock<(steps: Int, successes: Int, failures: Int)>((0, 0, 0))
    private let socket: String
    private let meters: [String]

    package init(socket: String, meters: [String]) {
        self.socket = socket
        self.meters = meters
    }

    /// The clients end after their current step.
    package func stop() { self.running.store(false, ordering: .relaxed) }
    /// New clients may run again.
    package func resume() { self.running.store(true, ordering: .relaxed) }

    package var steps: (steps: Int, successes: Int, failures: Int) { self.counts.withLock { $0 } }

    private func add(success: Bool) {
        self.counts.withLock {
            $0.steps += 1
            if success { $0.successes += 1 } else { $0.failures += 1 }
        }
    }

    /// One client's life, with its own seed.
    package func client(seed: UInt64) async {
        var random = SplitMix(seed: seed)
        // Also stop when cancelled (the test failed and its task group is unwinding): a cancelled
        // Task.sleep returns at once, so a loop that only watched `running` would spin forever.
        while self.running.load(ordering: .relaxed), !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(random.below(300)))
            guard let client = try? VarlinkClient(socketPath: self.socket) else {
                self.add(success: false)
                try? await Task.sleep(for: .milliseconds(100))
                continue
            }
            for _ in 0..<(1 + random.below(3)) {
                let ok: Bool
                switch random.below(6) {
                case 0, 1:
                    ok = await Self.watch(client, milliseconds: 100 + random.below(2_000), allFields: random.below(2) == 0)
                case 2:
                    ok = (try? await client.call("io.sugard.HealthDataSync.GetStatus")) != nil
                case 3:
                    ok = (try? await client.call("io.sugard.HealthDataSync.ListReadings", ["limit": 50, "order": "desc"])) != nil
                case 4:
                    ok = (try? await client.call("io.sugard.HealthDataSync.ListMeters")) != nil
                default:
                    let meter = self.meters[random.below(self.meters.count)]
                    ok = (try? await client.call("io.sugard.HealthDataSync.Sync", ["meter": .string(meter), "force": true])) != nil
                }
                self.add(success: ok)
                if !ok { break }
            }
            client.close()
        }
    }

    /// A hostile client (issue #22), for `seconds` or until told to stop: at random, sends the
    /// worst-case JSON request (1 MiB, 130 000 keys), floods GetStatus calls without reading the
    /// replies, or holds a few dozen idle connections for a moment. None of it may cost the
    /// well-behaved clients or the stored readings anything; its steps are not counted.
    package func hostile(seed: UInt64, seconds: Int) async {
        var random = SplitMix(seed: seed)
        let until = ContinuousClock.now + .seconds(seconds)
        let worstCase = JSONWorstCase.request() + [0]
        var flood: [UInt8] = []
        for _ in 0..<1000 { flood += Array(#"{"method":"io.sugard.HealthDataSync.GetStatus"}"#.utf8) + [0] }
        while self.running.load(ordering: .relaxed), !Task.isCancelled, ContinuousClock.now < until {
            try? await Task.sleep(for: .milliseconds(100 + random.below(400)))
            switch random.below(3) {
            case 0:
                guard let connection = try? RawConnection(path: self.socket) else { continue }
                await connection.send(worstCase, deadline: .now + .seconds(1))
                _ = try? await connection.readMessage(timeout: .seconds(2))
            case 1:
                guard let connection = try? RawConnection(path: self.socket) else { continue }
                await connection.send(flood, deadline: .now + .milliseconds(200))
                try? await Task.sleep(for: .milliseconds(random.below(500)))
            default:
                var idle: [RawConnection] = []
                for _ in 0..<(10 + random.below(40)) {
                    if let connection = try? RawConnection(path: self.socket) { idle.append(connection) }
                }
                try? await Task.sleep(for: .milliseconds(200 + random.below(800)))
                for connection in idle { connection.close() }
            }
        }
    }

    /// Watches for a while (all fields or a few), then hangs up mid-stream.
    static func watch(_ client: VarlinkClient, milliseconds: Int, allFields: Bool) async -> Bool {
        let parameters: JSONObject = allFields ? [:] : ["fields": ["readingCount", "lastReading", "sync"]]
        let stream = client.callMore("io.sugard.HealthDataSync.Watch", parameters)
        return await withTaskGroup(of: Bool?.self) { group in
            group.addTask {
                var got = false
                do {
                    for try await _ in stream { got = true }
                } catch {}
                return got
            }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(milliseconds))
                client.close()
                return nil
            }
            var result = false
            for await value in group { if let value { result = value } }
            return result
        }
    }
}

/// Wall-clock milliseconds since the epoch.
package func nowMillis() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
}
