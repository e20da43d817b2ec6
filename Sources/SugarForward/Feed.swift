import JSON
import Locking
import SugarWire
import Varlink

/// How many readings the forwarder holds (received from sugard, not yet acknowledged by the
/// broker). The feed takes a slot per reading and stops reading from sugard when none is left;
/// delivered readings give their slots back.
final class Window: Sendable {
    private struct State: HasWaiter {
        var used = 0
        var waiter: CheckedContinuation<Void, Never>?
    }

    let limit: Int
    private let state = Lock(State())

    init(limit: Int) { self.limit = max(2, limit) }

    var used: Int { self.state.withLock { $0.used } }

    /// Takes `count` slots; false when that reached the limit (the feed then pauses).
    func take(_ count: Int = 1) -> Bool {
        self.state.withLock { s -> Bool in
            s.used += count
            return s.used < self.limit
        }
    }

    func release(_ count: Int) {
        let waiter = self.state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.used = max(0, s.used - count)
            guard s.used <= self.limit / 2 else { return nil }
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume()
    }

    /// Returns once at most half the slots are used (or the task is cancelled).
    func waitForRoom() async {
        await self.state.wait { $0.used <= self.limit / 2 }
    }
}

/// Reads sugard's readings with `FollowReadings` after a cursor and hands them to the forwarder
/// as events, reconnecting (capped backoff) when sugard restarts. Meter identities come from
/// `ListMeters` on each connect and whenever a reading names a meter not seen yet.
struct Feed: Sendable {
    enum Event: Sendable {
        case connected
        case disconnected(String)
        /// Each meter's identity (nil: sugard does not know the meter, or not yet its identity).
        case meters([String: Wire.MeterIdentity?])
        /// Readings in commit order (those of one `FollowReadings` reply).
        case readings([(cursor: Int64, reading: Wire.CompactReading)])
    }

    static let interface = "io.sugard.HealthDataSync"

    let socketPath: String
    let window: Window
    let emit: @Sendable (Event) -> Void

    func run(after start: Int64) async {
        var cursor = start
        var delay = 0.1
        while !Task.isCancelled {
            await self.window.waitForRoom()
            if Task.isCancelled { return }
            do {
                let client = try VarlinkClient(socketPath: self.socketPath)
                defer { client.close() }
                var known = try await self.meters(client)
                var looked: [String: Int64] = [:]
                self.emit(.meters(known))
                self.emit(.connected)
                delay = 0.1
                let parameters: JSONObject = ["after": .int(cursor), "batch": .int(Int64(Self.batch)), "compact": true]
                // Each reply is read straight from its bytes into typed readings, on the client's thread.
                let replies = client.callMore(Self.interface + ".FollowReadings", parameters) { reader in
                    try Wire.CompactFollowReply(reading: &reader)
                }
                for try await reply in replies {
                    var pending: [(cursor: Int64, reading: Wire.CompactReading)] = []
                    var full = false
                    func flush() {
                        guard !pending.isEmpty else { return }
                        self.emit(.readings(pending))
                        if !self.window.take(pending.count) { full = true }
                        pending.removeAll(keepingCapacity: true)
                    }
                    for (next, reading) in reply.readings where next > cursor {
                        // A meter not seen yet, or one whose Device Information sugard had not read at
                        // the last look (at most one look per meter every 10 s). Its identity goes out
                        // before its reading.
                        let meter = reading.meter
                        if known[meter] == nil
                            || (Self.incomplete(known[meter] ?? nil) && monotonicMillis() - (looked[meter] ?? .min / 2) > 10_000)
                        {
                            flush()
                            looked[meter] = monotonicMillis()
                            let other = try VarlinkClient(socketPath: self.socketPath)
                            defer { other.close() }
                            known = try await self.meters(other)
                            if known[meter] == nil { known.updateValue(nil, forKey: meter) }
                            self.emit(.meters(known))
                        }
                        pending.append((next, reading))
                        cursor = next
                    }
                    flush()
                    if full { break }  // close, come back once half is delivered
                }
            } catch {
                if Task.isCancelled { return }
                self.emit(.disconnected("\(error)"))
                try? await Task.sleep(for: .milliseconds(Int(delay * 1000)))
                delay = min(delay * 2, 5)
            }
        }
    }

    /// Readings per `FollowReadings` reply (its `batch`): a backlog comes in a few large replies,
    /// a reading committed alone still comes at once in its own.
    static let batch = 128

    static func incomplete(_ identity: Wire.MeterIdentity?) -> Bool {
        guard let identity else { return true }
        return identity.manufacturer == nil && identity.model == nil && identity.serialNumber == nil
    }

    private func meters(_ client: VarlinkClient) async throws -> [String: Wire.MeterIdentity?] {
        let reply = try Wire.MetersReply(json: .object(try await client.call(Self.interface + ".ListMeters")))
        var out: [String: Wire.MeterIdentity?] = [:]
        for entry in reply.meters { out.updateValue(entry.identity, forKey: entry.id) }
        return out
    }
}
