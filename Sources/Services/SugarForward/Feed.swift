import JSON
import Locking
import SugarWire
import SystemIO
import Varlink

/// How many readings the forwarder holds (received from sugard, not yet acknowledged by the
/// broker). The feed takes a slot per reading; delivered readings give their slots back. When none
/// is left, the feed connection's reader thread stops reading from sugard (``admit(_:connection:)``
/// blocks it), so sugard stops reading from its database: flow control inside the one
/// `FollowReadings` connection, no reconnect.
final class Window: Sendable {
    /// The window's counts behind its lock.
    private struct State: HasWaiter {
        /// Readings the feed took and the sinks have not released yet.
        var used = 0
        /// Readings the current connection's reader thread has read that the feed has not taken
        /// yet (its replies on their way to the feed task).
        var arriving = 0
        /// Numbers the feed's connections: a reader of one that ended never blocks or counts.
        var connection = 0
        /// The readings of the reply the reader thread holds while it waits in
        /// ``admit(_:connection:)`` (0: it does not wait).
        var held = 0
        /// The feed task waiting in ``waitForRoom()``.
        var waiter: CheckedContinuation<Void, Never>?

        /// The reader may go on: at most half the window is used by what came before the reply
        /// it holds.
        func roomFor(_ count: Int, limit: Int) -> Bool { self.used + self.arriving - count <= limit / 2 }
    }

    /// The most readings held at once (at least 2).
    let limit: Int
    /// The counts.
    private let state = Lock(State())
    /// Where a reader thread blocked in ``admit(_:connection:)`` waits.
    private let room = Condition()

    /// A window of `limit` slots (at least 2).
    init(limit: Int) { self.limit = max(2, limit) }

    /// A new feed connection; its number for ``admit(_:connection:)``.
    func beginConnection() -> Int {
        self.state.withLock { s -> Int in
            s.connection += 1
            s.arriving = 0
            return s.connection
        }
    }

    /// The feed's connection ended: replies read and not taken are gone with it, and its reader
    /// thread, if it waits in ``admit(_:connection:)``, returns.
    func endConnection() {
        self.state.withLock { s in
            s.connection += 1
            s.arriving = 0
        }
        self.room.broadcast()
    }

    /// On connection `connection`'s reader thread, for a reply of `count` readings just read:
    /// counts them as arriving and, when that filled the window, blocks the thread (it reads no
    /// more from sugard) until at most half the window is used by what came before this reply,
    /// or the connection ended.
    func admit(_ count: Int, connection: Int) {
        let full = self.state.withLock { s -> Bool in
            guard s.connection == connection else { return false }
            s.arriving += count
            return s.used + s.arriving >= self.limit
        }
        guard full else { return }
        self.state.wait(for: self.room) { s in
            let go = s.connection != connection || s.roomFor(count, limit: self.limit)
            s.held = go ? 0 : count
            return go
        }
    }

    /// The feed task took a reply of `arrived` readings (admitted on the current connection),
    /// `held` of which it keeps (the rest it had already).
    func take(_ held: Int, of arrived: Int) {
        let wake = self.state.withLock { s -> Bool in
            s.arriving = max(0, s.arriving - arrived)
            s.used += held
            return s.held > 0 && s.roomFor(s.held, limit: self.limit)
        }
        if wake { self.room.broadcast() }
    }

    /// Gives back the slots of `count` delivered readings; wakes a blocked reader when the reply it
    /// holds fits again, and the feed task once at most half the window is used.
    func release(_ count: Int) {
        let (waiter, wake) = self.state.withLock { s -> (CheckedContinuation<Void, Never>?, Bool) in
            s.used = max(0, s.used - count)
            let wake = s.held > 0 && s.roomFor(s.held, limit: self.limit)
            guard s.used <= self.limit / 2 else { return (nil, wake) }
            defer { s.waiter = nil }
            return (s.waiter, wake)
        }
        if wake { self.room.broadcast() }
        waiter?.resume()
    }

    /// Whether every reading taken was released (delivered).
    var isEmpty: Bool { self.state.withLock { $0.used == 0 } }

    /// Returns once at most half the slots are used (or the task is cancelled).
    func waitForRoom() async {
        await self.state.wait { $0.used <= self.limit / 2 }
    }
}

/// What a feed hands on per reading, read from a `FollowReadings(compact: true)` reading object
/// on the connection's reader thread: ``Wire/CompactReading`` (the Nightscout sinks), or
/// ``ForwardedReading`` (the MQTT sink: its payload made there from the text sugard wrote).
protocol FeedReading: Sendable {
    /// The meter's id (its address), as sugard names it.
    var meter: String { get }
    /// The readings of one reply, each with its cursor, and the reply's `databaseId` (the
    /// database the cursors are positions in), from its parameters at the reader.
    static func readings(_ reader: inout JSONReader) throws(WireError) -> FeedReply<Self>
}

/// One `FollowReadings` reply as a feed reads it.
struct FeedReply<Reading: Sendable>: Sendable {
    /// The database the cursors are positions in.
    var databaseId: String?
    /// The readings, each with its cursor, in commit order.
    var readings: [(cursor: Int64, reading: Reading)]
}

extension Wire.CompactReading: FeedReading {
    /// Reads a compact `FollowReadings` reply straight from its bytes.
    static func readings(_ reader: inout JSONReader) throws(WireError) -> FeedReply<Self> {
        let reply = try Wire.CompactFollowReply(reading: &reader)
        return FeedReply(databaseId: reply.databaseId, readings: reply.readings)
    }
}

/// A follower's place in sugard's readings: a position in the commit order of one database
/// (`FollowReadings`' `databaseId`). A cursor from another database means nothing: when sugard's
/// database is another one (recreated, restored), the follower starts over from its beginning
/// (receivers dedup on the reading's id, so a re-send is harmless and nothing is skipped).
struct FeedPosition: Sendable, Equatable {
    /// The database the cursor belongs to; nil for a position saved before identities.
    var databaseId: String?
    /// The last cursor handed on.
    var cursor: Int64

    /// What a reply from `databaseId` does to the position: nothing (the same database), adopt it
    /// (a position saved before identities: its cursor is taken as one in this database), or
    /// start over from the beginning of the new database.
    enum Change: Equatable {
        /// The same database: nothing changes.
        case same
        /// A position without identity takes this database's.
        case adopt(String)
        /// Another database: start over from cursor 0.
        case startOver(from: String, to: String)
    }

    /// The change a reply from `databaseId` makes (nil: a sugard too old to say: the same).
    func change(for databaseId: String?) -> Change {
        guard let databaseId, databaseId != self.databaseId else { return .same }
        guard let current = self.databaseId else { return .adopt(databaseId) }
        return .startOver(from: current, to: databaseId)
    }
}

/// Reads sugard's readings with `FollowReadings` after a cursor and hands them to the forwarder
/// as events, reconnecting (capped backoff) when sugard restarts. Meter identities come from
/// `ListMeters` on each connect and whenever a reading names a meter not seen yet.
struct Feed<Reading: FeedReading>: Sendable {
    /// What the feed tells the forwarder.
    enum Event: Sendable {
        /// The feed is connected and following.
        case connected
        /// The connection to sugard was lost (why, in words); the feed reconnects.
        case disconnected(String)
        /// The readings that follow come from database `id`. `previous` nil: a position saved
        /// before identities adopts it. Otherwise the database changed (recreated, restored): the
        /// readings start over from its beginning; every reading of the previous database held
        /// before was delivered first (the feed waits for that), so cursors never mix.
        case database(id: String, previous: String?)
        /// Each meter's identity (nil: sugard does not know the meter, or not yet its identity).
        case meters([String: Wire.MeterIdentity?])
        /// Readings in commit order (those of one `FollowReadings` reply).
        case readings([(cursor: Int64, reading: Reading)])
    }

    /// `io.sugard.HealthDataSync`.
    static var interface: String { "io.sugard.HealthDataSync" }

    /// sugard's socket.
    let socketPath: String
    /// The window that holds the feed back while the sinks are behind.
    let window: Window
    /// Receives the feed's events, in order, on the feed's task.
    let emit: @Sendable (Event) -> Void

    /// Follows sugard after `start` (in `databaseId`) until cancelled: waits for room in the window,
    /// connects, sends the meters, then each reply's readings; reconnects after 0.1 s, doubling to 5 s.
    func run(after start: Int64, databaseId: String? = nil) async {
        var position = FeedPosition(databaseId: databaseId, cursor: start)
        var failures = 0
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
                failures = 0
                var parameters: JSONObject = ["after": .int(position.cursor), "batch": .int(Int64(Self.batch)), "compact": true]
                if let id = position.databaseId { parameters["databaseId"] = .string(id) }
                // Each reply is read straight from its bytes into typed readings, on the client's
                // thread, which waits there while the window is full (sugard then waits for it).
                let window = self.window
                let connection = window.beginConnection()
                defer { window.endConnection() }
                let replies = client.callMore(Self.interface + ".FollowReadings", parameters) { reader in
                    let reply = try Reading.readings(&reader)
                    window.admit(reply.readings.count, connection: connection)
                    return reply
                }
                for try await reply in replies {
                    let readings = reply.readings
                    switch position.change(for: reply.databaseId) {
                    case .same:
                        break
                    case .adopt(let id):
                        position.databaseId = id
                        self.emit(.database(id: id, previous: nil))
                    case .startOver(let old, let new):
                        // What was taken from the old database goes out (and is acknowledged)
                        // before anything of the new one, so a saved position never mixes them.
                        while !window.isEmpty, !Task.isCancelled { try? await Task.sleep(for: .milliseconds(20)) }
                        if Task.isCancelled { return }
                        position = FeedPosition(databaseId: new, cursor: 0)
                        self.emit(.database(id: new, previous: old))
                    }
                    var pending: [(cursor: Int64, reading: Reading)] = []
                    var arrived = readings.count
                    func flush() {
                        guard !pending.isEmpty || arrived > 0 else { return }
                        window.take(pending.count, of: arrived)
                        arrived = 0
                        if !pending.isEmpty { self.emit(.readings(pending)) }
                        pending.removeAll(keepingCapacity: true)
                    }
                    for (next, reading) in readings where next > position.cursor {
                        // A meter not seen yet, or one whose Device Information sugard had not read at
                        // the last look (at most one look per meter every 10 s). Its identity goes out
                        // before its reading.
                        let meter = reading.meter
                        if known[meter] == nil
                            || (Self.incomplete(known[meter] ?? nil) && monotonicMilliseconds() - (looked[meter] ?? .min / 2) > 10_000)
                        {
                            flush()
                            looked[meter] = monotonicMilliseconds()
                            let other = try VarlinkClient(socketPath: self.socketPath)
                            defer { other.close() }
                            known = try await self.meters(other)
                            if known[meter] == nil { known.updateValue(nil, forKey: meter) }
                            self.emit(.meters(known))
                        }
                        pending.append((next, reading))
                        position.cursor = next
                    }
                    flush()
                }
            } catch {
                if Task.isCancelled { return }
                self.emit(.disconnected("\(error)"))
                failures += 1
                try? await Task.sleep(for: RetryBackoff.delay(failures: failures, initial: .milliseconds(100), max: .seconds(5)))
            }
        }
    }

    /// Readings per `FollowReadings` reply (its `batch`): a backlog comes in a few large replies,
    /// a reading committed alone still comes at once in its own.
    static var batch: Int { 128 }

    /// Whether an identity lacks every Device Information string (sugard has not read them yet).
    static func incomplete(_ identity: Wire.MeterIdentity?) -> Bool {
        guard let identity else { return true }
        return identity.manufacturer == nil && identity.model == nil && identity.serialNumber == nil
    }

    /// `ListMeters` as each meter's identity, by id.
    private func meters(_ client: VarlinkClient) async throws -> [String: Wire.MeterIdentity?] {
        let reply = try Wire.MetersReply(json: .object(try await client.call(Self.interface + ".ListMeters")))
        var out: [String: Wire.MeterIdentity?] = [:]
        for entry in reply.meters { out.updateValue(entry.identity, forKey: entry.id) }
        return out
    }
}
