import Glibc
import HealthDataSync
import JSON
import Locking
import MQTT
import SugarWire
import SystemIO

/// What `sugarctl status` shows about the MQTT sink.
public struct SinkStatus: Sendable, Equatable {
    /// The interface's sink states.
    public typealias State = Wire.ForwardSink.State

    public var name = "mqtt"
    public var broker: String
    public var state: State = .retrying
    /// Why it is not connected (nil when connected).
    public var reason: String? = "connecting"
    /// Readings the forwarder holds that the broker has not acknowledged yet.
    public var pending = 0
    /// When the last PUBACK moved the cursor (epoch ms), and that cursor.
    public var lastDeliveryMillis: Int64?
    public var cursor: Int64 = 0
    public var delivered = 0
    /// Readings received from sugard since start (not in the JSON; sugar-bench reads it).
    public var received = 0
    /// Whether the reading feed from sugard is up, and why not.
    public var feedConnected = false
    public var feedReason: String? = "connecting"
    /// The sugard database the cursor belongs to, and the last start-over.
    public var databaseId: String?
    public var databaseReset: ForwardState.DatabaseReset?

    /// `io.sugard.Forward`'s `Sink` for it.
    public var wire: Wire.ForwardSink {
        Wire.ForwardSink(
            name: self.name, kind: .mqtt, broker: self.broker, person: nil, state: self.state,
            reason: self.reason, pending: Int64(self.pending), lastDeliveryMillis: self.lastDeliveryMillis, cursor: self.cursor,
            delivered: Int64(self.delivered), feedConnected: self.feedConnected, feedReason: self.feedReason,
            databaseId: self.databaseId, databaseReset: self.databaseReset?.wire)
    }
}

/// A reading as the MQTT sink sends it: its payload (``ForwardTopics/payload(_:from:)``) made on
/// the feed's reader thread from the text sugard wrote, without making the reading's values.
struct ForwardedReading: FeedReading {
    var meter: String
    var epochMillis: Int64
    var payload: [UInt8]

    static func readings(_ reader: inout JSONReader) throws(WireError) -> FeedReply<Self> {
        let reply = try Wire.CompactFollowReply.textReply(&reader)
        return FeedReply(
            databaseId: reply.databaseId,
            readings: reply.readings.map { cursor, text in
                (cursor, ForwardedReading(meter: text.meter, epochMillis: text.epochMillis, payload: ForwardTopics.payload(text, from: reader)))
            })
    }
}

/// sugard-forward's core: readings from the feed go out in commit order, at most `maxInFlight`
/// unacknowledged by the broker at a time (the MQTT client's window, refilled on its own thread
/// as PUBACKs arrive); the highest contiguously acknowledged cursor is saved; a lost connection
/// re-sends everything unacknowledged, in order, on the next one.
///
/// All state below belongs to the one task running ``run()``; the feed and the MQTT thread only
/// send it events.
public final class Forwarder: Sendable {
    enum Event: Sendable {
        case mqtt(MQTTEvent)
        case feed(Feed<ForwardedReading>.Event)
        case flush
        /// A save on the saver's thread ended; `count` acknowledged readings were in it.
        case saved(count: Int, error: String?)
        case stop
    }

    public let config: ForwardConfig
    let topics: ForwardTopics
    let password: String?
    let logger: Logger
    public let status: Lock<SinkStatus>
    let maxInFlight: Int
    /// Readings handed to the MQTT client and not saved durably yet (unacknowledged, or
    /// acknowledged and waiting for a save or in the running one) beyond ``maxInFlight``: with it,
    /// the most that can arrive twice after a crash. At that many the forwarder hands over nothing
    /// more until PUBACKs and a save make room.
    let maxUnsaved: Int
    let window: Window
    private let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation

    /// The defaults: 2048 publishes unacknowledged at the broker, 16 384 readings held. A backlog
    /// (after an outage, or a first start on a full database) then goes out with the MQTT thread
    /// and the broker each busy on a core of their own, and the feed filling the window in bursts
    /// between them, rather than all of them taking turns on one core. The cost: more memory with
    /// the window full, and more readings (in flight plus ``maxUnsaved``) that can arrive twice
    /// after a crash. Figures: BENCHMARKS.md, "Windows sized for a backlog".
    public static let defaultMaxInFlight = 2048
    public static let defaultMaxHeld = 16_384

    public init(
        config: ForwardConfig, password: String?, logger: Logger, maxInFlight: Int = Forwarder.defaultMaxInFlight,
        maxHeld: Int = Forwarder.defaultMaxHeld
    ) {
        self.config = config
        self.topics = ForwardTopics(config: config)
        self.password = password
        self.logger = logger
        self.status = Lock(SinkStatus(broker: config.mqttURL))
        self.maxInFlight = max(1, maxInFlight)
        self.maxUnsaved = 4 * max(1, maxInFlight)
        self.window = Window(limit: max(maxHeld, maxInFlight * 2))
        (self.events, self.continuation) = AsyncStream.makeStream(of: Event.self)
    }

    /// Ends ``run()``: publishes `offline`, saves the cursor, disconnects.
    public func stop() { self.continuation.yield(.stop) }

    private struct Entry {
        var cursor: Int64
        var meter: String
        var millis: Int64
        var payload: [UInt8]
        var updatesState: Bool
        var outstanding = 0
        var sent = false
    }

    /// Runs until ``stop()`` (or cancellation). Throws only when the state file is unusable.
    public func run() async throws(ForwardFileError) {
        let file = CursorFile(directory: self.config.stateDirectory)
        var saved = try file.load()
        var newest = saved.newest
        self.status.withLock {
            $0.cursor = saved.cursor
            $0.databaseId = saved.databaseId
            $0.databaseReset = saved.databaseReset
        }
        self.logger.notice(
            "forwarding to \(self.config.mqttURL) as \(self.config.mqttClientID), resuming after cursor \(saved.cursor)")

        var options = MQTTOptions(host: self.config.mqttHost, port: self.config.mqttPort, clientID: self.config.mqttClientID)
        options.username = self.config.mqttUsername
        options.password = self.password
        options.caFile = self.config.mqttTLS ? self.config.mqttCAFile : nil
        options.will = MQTTMessage(topic: self.topics.status, payload: Array("offline".utf8), qos: 1, retain: true)
        if self.config.homeAssistantDiscovery { options.subscriptions = [self.topics.homeAssistantStatus] }
        options.maxInFlight = self.maxInFlight
        let continuation = self.continuation
        let client = MQTTClient(options: options) { continuation.yield(.mqtt($0)) }
        do {
            try client.start()
        } catch {
            throw ForwardFileError("\(error)")
        }
        let feed = Feed<ForwardedReading>(socketPath: self.config.socketPath, window: self.window) { continuation.yield(.feed($0)) }
        let start = saved.cursor
        let startDatabase = saved.databaseId
        let feedTask = Task { await feed.run(after: start, databaseId: startDatabase) }
        var flushTask: Task<Void, Never>?
        defer {
            feedTask.cancel()
            flushTask?.cancel()
        }

        // Readings held, oldest first from `head` (delivered ones before it are dropped in bulk,
        // not one shift of the whole array per acknowledgement).
        var entries: [Entry] = []
        var head = 0
        var nextToSend = 0
        // Handed to the MQTT client and not acknowledged yet.
        var handed = 0
        var session: Int?
        var meters: [String: Wire.MeterIdentity?] = [:]
        var stateCursor: [String: Int64] = [:]
        var unsaved = 0
        // Acknowledged readings in the save running on the saver's thread (0: none running).
        var saving = 0
        var lastSave = monotonicMillis()
        let saver = CursorSaver(file: file)

        func publishDiscovery(_ meter: String, _ session: Int) {
            guard self.config.homeAssistantDiscovery else { return }
            let config = self.topics.discoveryConfig(meter: meter, identity: meters[meter] ?? nil)
            client.publish(
                MQTTMessage(topic: self.topics.discovery(meter), payload: Array(config.serialized().utf8), qos: 1, retain: true),
                session: session)
        }
        // Each meter's reading and state topics, made once (not per message).
        var meterTopics: [String: (reading: String, state: String)] = [:]
        func topics(_ meter: String) -> (reading: String, state: String) {
            if let known = meterTopics[meter] { return known }
            let made = (self.topics.reading(meter), self.topics.state(meter))
            meterTopics[meter] = made
            return made
        }
        func send() {
            guard let session else { return }
            while handed + unsaved + saving < self.maxInFlight + self.maxUnsaved, nextToSend < entries.count {
                let updatesState = entries[nextToSend].updatesState
                let cursor = entries[nextToSend].cursor
                let topic = topics(entries[nextToSend].meter)
                client.publish(
                    MQTTMessage(topic: topic.reading, payload: entries[nextToSend].payload, qos: 1, retain: false),
                    token: cursor << 1, session: session)
                if updatesState {
                    client.publish(
                        MQTTMessage(topic: topic.state, payload: entries[nextToSend].payload, qos: 1, retain: true),
                        token: cursor << 1 | 1, session: session)
                }
                entries[nextToSend].sent = true
                entries[nextToSend].outstanding = updatesState ? 2 : 1
                handed += 1
                nextToSend += 1
            }
        }
        /// Hands the cursor to the saver's thread (the temporary file, fsync, rename and the
        /// directory's fsync take milliseconds, the event loop goes on meanwhile); one save at a
        /// time, the next one starts when it ends.
        func save(force: Bool) {
            guard unsaved > 0, saving == 0 else { return }
            let now = monotonicMillis()
            if !force, now - lastSave < 25, unsaved < self.maxUnsaved / 2 {
                if flushTask == nil {
                    let continuation = self.continuation
                    flushTask = Task {
                        try? await Task.sleep(for: .milliseconds(25))
                        continuation.yield(.flush)
                    }
                }
                return
            }
            let state = saved
            let count = unsaved
            saving = count
            unsaved = 0
            lastSave = now
            let continuation = self.continuation
            let started = startDetachedThread {
                var failure: String?
                do { try saver.save(state) } catch { failure = "\(error)" }
                continuation.yield(.saved(count: count, error: failure))
            }
            if started != 0 {
                var failure: String?
                do { try saver.save(state) } catch { failure = "\(error)" }
                continuation.yield(.saved(count: count, error: failure))
            }
        }
        /// The index of the entry with `cursor` (entries are sorted by cursor).
        func find(_ cursor: Int64) -> Int? {
            var low = head
            var high = entries.count
            while low < high {
                let mid = (low + high) / 2
                if entries[mid].cursor < cursor { low = mid + 1 } else { high = mid }
            }
            return low < entries.count && entries[low].cursor == cursor ? low : nil
        }
        func acknowledge(_ tokens: [Int64]) {
            for token in tokens {
                guard let index = find(token >> 1), entries[index].outstanding > 0 else { continue }
                entries[index].outstanding -= 1
                if entries[index].outstanding == 0 { handed -= 1 }
            }
            var done = 0
            while head + done < entries.count, entries[head + done].sent, entries[head + done].outstanding == 0 {
                let index = head + done
                saved.cursor = entries[index].cursor
                if entries[index].updatesState {
                    let meter = entries[index].meter
                    saved.newest[meter] = max(saved.newest[meter] ?? .min, entries[index].millis)
                }
                done += 1
            }
            guard done > 0 else { return }
            head += done
            if head == entries.count {
                entries.removeAll(keepingCapacity: true)
                nextToSend = 0
                head = 0
            } else if head >= 1024, head * 2 >= entries.count {
                entries.removeFirst(head)
                nextToSend -= head
                head = 0
            }
            unsaved += done
            self.window.release(done)
            let now = wallClockMilliseconds()
            self.status.withLock {
                $0.cursor = saved.cursor
                $0.delivered += done
                $0.lastDeliveryMillis = now
                $0.pending = entries.count - head
            }
            save(force: false)
        }

        eventLoop: for await event in self.events {
            switch event {
            case .stop:
                break eventLoop
            case .flush:
                flushTask = nil
                save(force: true)
            case .saved(let count, let error):
                saving = 0
                if let error {
                    // Tried again in a second (the readings wait for it), not at once.
                    self.logger.error("cannot save the delivery cursor: \(error)")
                    unsaved += count
                    if flushTask == nil {
                        let continuation = self.continuation
                        flushTask = Task {
                            try? await Task.sleep(for: .seconds(1))
                            continuation.yield(.flush)
                        }
                    }
                } else {
                    save(force: false)
                }
                send()
            case .feed(.connected):
                self.status.withLock {
                    $0.feedConnected = true
                    $0.feedReason = nil
                }
                self.logger.info("following sugard's readings at \(self.config.socketPath)")
            case .feed(.disconnected(let reason)):
                let changed = self.status.withLock { s -> Bool in
                    defer {
                        s.feedConnected = false
                        s.feedReason = reason
                    }
                    return s.feedConnected || s.feedReason != reason
                }
                if changed { self.logger.warning("sugard's readings are not reachable (retrying): \(reason)") }
            case .feed(.database(let id, let previous)):
                saved.databaseId = id
                if let previous {
                    saved.cursor = 0
                    saved.databaseReset = ForwardState.DatabaseReset(
                        atMillis: wallClockMilliseconds(), previousDatabaseId: previous, databaseId: id)
                    self.logger.warning(
                        "sugard's database changed from \(previous) to \(id) (recreated or restored): delivering its readings "
                            + "from the beginning (receivers drop those they have by reading id)")
                } else {
                    self.logger.info("sugard's database is \(id)")
                }
                self.status.withLock {
                    $0.cursor = saved.cursor
                    $0.databaseId = saved.databaseId
                    $0.databaseReset = saved.databaseReset
                }
                do { try saver.save(saved) } catch { self.logger.error("cannot save the delivery cursor: \(error)") }
            case .feed(.meters(let known)):
                for (meter, identity) in known where meters[meter] != identity {
                    let isNew = meters[meter] == nil
                    meters.updateValue(identity, forKey: meter)
                    if let session, isNew || identity != nil { publishDiscovery(meter, session) }
                }
            case .feed(.readings(let list)):
                var received = 0
                for (cursor, reading) in list {
                    received += 1
                    let meter = reading.meter
                    let millis = reading.epochMillis
                    let updatesState = millis > (newest[meter] ?? .min)
                    if updatesState {
                        newest[meter] = millis
                        // The retained state only needs the newest: an older state update still
                        // waiting to be sent is dropped (its reading message still goes out).
                        if let previous = stateCursor[meter], let index = find(previous), !entries[index].sent {
                            entries[index].updatesState = false
                        }
                        stateCursor[meter] = cursor
                    }
                    if self.logger.isEnabled(.debug) {
                        self.logger.debug("reading \(cursor) queued", [("meter", meter), ("payload", String(decoding: reading.payload, as: UTF8.self))])
                    }
                    entries.append(Entry(cursor: cursor, meter: meter, millis: millis, payload: reading.payload, updatesState: updatesState))
                }
                self.status.withLock {
                    $0.pending = entries.count - head
                    $0.received += received
                }
                send()
            case .mqtt(.connected(let s)):
                session = s
                self.logger.notice("connected to \(self.config.mqttURL)")
                self.status.withLock {
                    $0.state = .connected
                    $0.reason = nil
                }
                client.publish(MQTTMessage(topic: self.topics.status, payload: Array("online".utf8), qos: 1, retain: true), session: s)
                for meter in meters.keys.sorted() { publishDiscovery(meter, s) }
                send()
            case .mqtt(.disconnected(let reason, let permanent, let retryIn)):
                let wasConnected = session != nil
                session = nil
                for index in head..<entries.count {
                    entries[index].sent = false
                    entries[index].outstanding = 0
                }
                nextToSend = head
                handed = 0
                let previous = self.status.withLock { s -> SinkStatus in
                    defer {
                        s.state = permanent ? .failing : .retrying
                        s.reason = reason
                    }
                    return s
                }
                let text = "\(reason); retrying in \(retryIn < 1 ? "\(Int(retryIn * 1000)) ms" : "\(Int(retryIn)) s")"
                if permanent {
                    self.logger.error("MQTT broker \(self.config.mqttURL): \(text)")
                } else if wasConnected || previous.reason != reason {
                    self.logger.warning("MQTT broker \(self.config.mqttURL): \(text)")
                }
            case .mqtt(.acknowledged(let tokens, let s)):
                guard s == session else { continue }
                acknowledge(tokens)
                send()
            case .mqtt(.message(let topic, let payload)):
                if topic == self.topics.homeAssistantStatus, String(decoding: payload, as: UTF8.self) == "online",
                    let session
                {
                    self.logger.info("Home Assistant came online: publishing discovery again")
                    for meter in meters.keys.sorted() { publishDiscovery(meter, session) }
                }
            }
        }
        feedTask.cancel()
        if unsaved > 0 || saving > 0 {
            do {
                try saver.save(saved)
            } catch {
                self.logger.error("cannot save the delivery cursor: \(error)")
            }
        }
        client.stop(last: MQTTMessage(topic: self.topics.status, payload: Array("offline".utf8), qos: 1, retain: true))
        self.logger.notice("stopped after cursor \(saved.cursor)")
    }
}

func monotonicMillis() -> Int64 {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
}
