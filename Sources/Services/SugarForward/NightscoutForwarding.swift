import JSON
import Locking
import NightscoutSink
import ProcessKit
import SugarWire
import SystemIO

/// One Nightscout sink's readings: its own ``Feed`` (its own `FollowReadings` call, from the sink's
/// saved cursor) fills a buffer of at most `window.limit` readings; the sink takes them in batches,
/// and the readings up to the cursor it asks after (delivered, or not its person's) give their
/// window slots back. So a slow or failing site stalls only its own feed, and sugard reads that
/// feed's readings from its database only as the site takes them. A lost feed (sugard restarted)
/// reconnects by itself; it shows as the sink's `feedConnected`/`feedReason`, as for the MQTT sink,
/// not as a state of the site.
final class FeedReadingSource: NightscoutReadingSource {
    /// The source's state behind its lock.
    private struct State: HasWaiter {
        /// In cursor order, each above the sink's cursor when it was last asked.
        var buffer: [SinkReading] = []
        /// The sink's task waiting for a reading.
        var waiter: CheckedContinuation<Void, Never>?
        /// Whether the feed is up.
        var feedConnected = false
        /// Why the feed is not up (nil when it is).
        var feedReason: String? = "connecting"
        /// sugard's database changed and the readings start over from its beginning: the sink's
        /// next (or waiting) ask counts from 0, not from its old database's cursor.
        var startedOver = false
        /// The sugard database the sink's cursor is a position in.
        var databaseId: String?
        /// The last start-over, when there was one.
        var databaseReset: Wire.DatabaseReset?
    }

    /// Holds the feed back while the sink is behind.
    let window: Window
    /// The sink's name (its section's).
    let name: String
    /// Where it logs.
    let logger: Logger
    /// Where the database identity is saved.
    let databaseFile: DatabaseIdFile
    /// Moves the sink's cursor back to 0 (its database changed).
    let restart: @Sendable () -> Void
    /// The source's state.
    private let state = Lock(State())

    /// A source with the saved database identity.
    init(window: Window, name: String, logger: Logger, databaseFile: DatabaseIdFile, restart: @escaping @Sendable () -> Void) {
        self.window = window
        self.name = name
        self.logger = logger
        self.databaseFile = databaseFile
        self.restart = restart
        let id = databaseFile.load()
        self.state.withLock { $0.databaseId = id }
    }

    /// The sugard database the sink's cursor is a position in.
    var databaseId: String? { self.state.withLock { $0.databaseId } }

    /// Takes the feed's events (called from the feed's task).
    func handle(_ event: Feed<Wire.CompactReading>.Event) {
        if case .disconnected(let reason) = event {
            let changed = self.state.withLock { s -> Bool in s.feedConnected || s.feedReason != reason }
            if changed { self.logger.warning("Nightscout sink \(self.name): sugard's readings are not reachable (retrying): \(reason)") }
        }
        if case .database(let id, let previous) = event {
            // Every reading of the previous database was delivered (the feed waited for that).
            if let previous {
                self.logger.warning(
                    "Nightscout sink \(self.name): sugard's database changed from \(previous) to \(id) (recreated or restored): "
                        + "delivering its readings from the beginning")
                self.restart()
            }
            do {
                try self.databaseFile.save(id)
            } catch {
                self.logger.error("Nightscout sink \(self.name): \(error)")
            }
            self.state.withLock { s in
                s.databaseId = id
                if let previous {
                    s.startedOver = true
                    s.databaseReset = Wire.DatabaseReset(atMillis: wallClockMilliseconds(), previousDatabaseId: previous, databaseId: id)
                }
            }
        }
        let waiter = self.state.withLock { s -> CheckedContinuation<Void, Never>? in
            switch event {
            case .readings(let list):
                for (cursor, reading) in list { s.buffer.append(SinkReading(cursor: cursor, reading: reading)) }
            case .connected:
                s.feedConnected = true
                s.feedReason = nil
                return nil
            case .disconnected(let reason):
                s.feedConnected = false
                s.feedReason = reason
                return nil
            case .meters, .database:
                return nil
            }
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume()
    }

    /// Up to `limit` readings after `cursor` (from 0 after a start-over), waiting for one when none is
    /// held; the readings up to `cursor` give their window slots back. Throws when cancelled.
    func readings(after cursor: Int64, limit: Int) async throws -> [SinkReading] {
        var cursor = cursor
        while true {
            try Task.checkCancellation()
            let (batch, done) = self.state.withLock { s -> ([SinkReading], Int) in
                if s.startedOver {
                    s.startedOver = false
                    cursor = 0
                }
                let done = s.buffer.prefix { $0.cursor <= cursor }.count
                s.buffer.removeFirst(done)
                return (Array(s.buffer.prefix(max(1, limit))), done)
            }
            if done > 0 { self.window.release(done) }
            if !batch.isEmpty { return batch }
            await self.waitForReading()
        }
    }

    /// Returns once the buffer holds a reading (or the task is cancelled).
    private func waitForReading() async {
        await self.state.wait { !$0.buffer.isEmpty }
    }

    /// Readings held above `cursor` that `accepts` takes, and the feed's state.
    func held(
        after cursor: Int64, accepts: (Wire.CompactReading) -> Bool
    ) -> (pending: Int, connected: Bool, reason: String?, databaseId: String?, databaseReset: Wire.DatabaseReset?) {
        self.state.withLock { s in
            (
                s.buffer.filter { $0.cursor > cursor && accepts($0.reading) }.count, s.feedConnected, s.feedReason, s.databaseId,
                s.databaseReset
            )
        }
    }
}

/// sugard-forward's Nightscout sinks, each with its own feed, cursor file
/// (`nightscout-<name>.cursor` in the state directory) and task; none waits for another or for the
/// MQTT sink.
public final class NightscoutForwarding: Sendable {
    /// One sink with its reading source.
    struct Running: Sendable {
        /// The sink.
        let sink: NightscoutSink
        /// Its feed's buffer.
        let source: FeedReadingSource
    }

    /// Every sink, in the order of the config file.
    let sinks: [Running]
    /// sugard's socket.
    let socketPath: String
    /// Where the sinks log.
    let logger: Logger

    /// Reads each sink's secret and saved cursor.
    /// - Throws: ``NightscoutConfigError`` naming the sink (an unreadable secret or cursor file).
    public init(config: ForwardConfig, logger: Logger, timing: NightscoutTiming = NightscoutTiming(), held: Int = 1000)
        throws(NightscoutConfigError)
    {
        var sinks: [Running] = []
        for sink in config.nightscout {
            do {
                let running = try NightscoutSink(config: sink, stateDirectory: config.stateDirectory, timing: timing)
                let window = Window(limit: max(held, 2 * NightscoutSink.batchLimit))
                let source = FeedReadingSource(
                    window: window, name: sink.name, logger: logger,
                    databaseFile: DatabaseIdFile(directory: config.stateDirectory, sink: sink.name),
                    restart: { running.restartFromBeginning() })
                sinks.append(Running(sink: running, source: source))
            } catch {
                throw NightscoutConfigError("Nightscout sink \(sink.name): \(error.message)")
            }
        }
        self.sinks = sinks
        self.socketPath = config.socketPath
        self.logger = logger
    }

    /// Whether no Nightscout sink is configured.
    public var isEmpty: Bool { self.sinks.isEmpty }

    /// Runs every sink (its feed and its deliveries) until the task is cancelled.
    public func run() async {
        guard !self.sinks.isEmpty else { return }
        await withTaskGroup(of: Void.self) { group in
            for running in self.sinks {
                let source = running.source
                let feed = Feed<Wire.CompactReading>(socketPath: self.socketPath, window: source.window) { source.handle($0) }
                let start = running.sink.status.cursor
                let database = source.databaseId
                let config = running.sink.config
                self.logger.notice(
                    "Nightscout sink \(config.name): \(config.url)\(config.person.map { " for \($0)" } ?? ""), resuming after cursor \(start)")
                group.addTask { await feed.run(after: start, databaseId: database) }
                group.addTask { await running.sink.run(source: source) }
            }
            group.addTask { await self.logChanges() }
            await group.waitForAll()
        }
    }

    /// Ends the pause of a paused or refused sink now (SIGHUP).
    public func resume() {
        for running in self.sinks { running.sink.resume() }
    }

    /// The `Sink` objects of `io.sugard.Forward.GetStatus`.
    public func statusWire() -> [Wire.ForwardSink] { self.sinks.map(Self.wire) }

    /// One sink's `Sink` object.
    static func wire(_ running: Running) -> Wire.ForwardSink {
        let status = running.sink.status
        let held = running.source.held(after: status.cursor, accepts: running.sink.accepts)
        return Wire.ForwardSink(
            name: status.name, kind: .nightscout, url: status.url, person: status.person, state: Self.state(status.state),
            nightscoutState: status.state, reason: status.reason,
            pending: Int64(max(held.pending, status.pending)), lastDeliveryMillis: status.lastDeliveryMillis,
            cursor: status.cursor, delivered: Int64(status.delivered), feedConnected: held.connected, feedReason: held.reason,
            databaseId: held.databaseId, databaseReset: held.databaseReset)
    }

    /// The forwarder's common states: a refused secret and a paused sink are failing (they wait
    /// for someone to act), a transient failure is retrying.
    static func state(_ state: NightscoutStatus.State) -> Wire.ForwardSink.State {
        switch state {
        case .idle, .delivering: .connected
        case .retrying: .retrying
        case .refused, .paused: .failing
        }
    }

    /// Logs each sink's changes of state (looked at once a second; the feed logs its own).
    private func logChanges() async {
        var last: [String: (NightscoutStatus.State, String?)] = [:]
        while !Task.isCancelled {
            for running in self.sinks {
                let status = running.sink.status
                let name = status.name
                let now = (status.state == .delivering ? .idle : status.state, status.reason)
                defer { last[name] = now }
                guard let before = last[name], before.0 != now.0 || before.1 != now.1 else { continue }
                let text = "Nightscout sink \(name) (\(status.url)): \(now.0.rawValue)\(now.1.map { ": \($0)" } ?? "")"
                switch now.0 {
                case .idle, .delivering: self.logger.notice(text)
                case .retrying: self.logger.warning(text)
                case .refused, .paused: self.logger.error(text)
                }
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }
}
