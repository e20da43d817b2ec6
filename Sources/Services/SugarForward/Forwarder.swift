import Glibc
import JSON
import Locking
import MQTT
import ProcessKit
import SugarWire
import SystemIO

/// What `sugarctl status` shows about the MQTT sink.
public struct SinkStatus: Sendable, Equatable {
    /// The interface's sink states.
    public typealias State = Wire.ForwardSink.State

    /// The sink's name in the status (`mqtt`).
    public var name = "mqtt"
    /// The broker's URL as configured.
    public var broker: String
    /// Connected, retrying (a transient failure) or failing (one retrying soon cannot fix: credentials,
    /// TLS, an unknown host).
    public var state: State = .retrying
    /// Why it is not connected (nil when connected).
    public var reason: String? = "connecting"
    /// Readings the forwarder holds that the broker has not acknowledged yet.
    public var pending = 0
    /// When the last PUBACK moved the cursor (epoch ms), and that cursor.
    public var lastDeliveryMillis: Int64?
    /// The last cursor the broker acknowledged.
    public var cursor: Int64 = 0
    /// Readings the broker acknowledged since start.
    public var delivered = 0
    /// Readings received from sugard since start (not in the JSON; sugar-bench reads it).
    public var received = 0
    /// Whether the reading feed from sugard is up, and why not.
    public var feedConnected = false
    /// Why the feed is not connected (nil when it is).
    public var feedReason: String? = "connecting"
    /// The sugard database the cursor belongs to, and the last start-over.
    public var databaseId: String?
    /// The last start-over from another sugard database, when there was one.
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
    /// The meter's id.
    var meter: String
    /// When it was measured (epoch ms).
    var epochMillis: Int64
    /// The payload for its reading topic.
    var payload: [UInt8]
    /// What it means and its mg/dL: what Home Assistant's entities follow.
    var kind: Wire.ReadingKind
    /// Its value in mg/dL; nil without a glucose value.
    var mgdL: Double?
    /// The person the meter is assigned to (their Home Assistant entities).
    var person: String?

    /// Reads a compact `FollowReadings` reply, making each reading's payload from sugard's text.
    static func readings(_ reader: inout JSONReader) throws(WireError) -> FeedReply<Self> {
        let reply = try Wire.CompactFollowReply.textReply(&reader)
        return FeedReply(
            databaseId: reply.databaseId,
            readings: reply.readings.map { cursor, text in
                (cursor, ForwardedReading(
                    meter: text.meter, epochMillis: text.epochMillis, payload: ForwardTopics.payload(text, from: reader), kind: text.kind,
                    mgdL: ForwardTopics.values(text, from: reader).mgdL,
                    person: text.person.flatMap { (range: Range<Int>) -> String? in
                        var at = reader.reading(range)
                        return try? at.readString()
                    }))
            })
    }
}

/// sugard-forward's core: readings from the feed go out in commit order, at most `maxInFlight`
/// unacknowledged by the broker at a time (the MQTT client's window, refilled on its own thread
/// as PUBACKs arrive); the highest contiguously acknowledged cursor is saved; a lost connection
/// re-sends everything unacknowledged, in order, on the next one. What to do when is decided by
/// ``DeliveryStateMachine``; ``run()`` only turns the feed's and the MQTT client's events into its
/// events and its actions into publishes, saves and timers.
///
/// All state below belongs to the one task running ``run()``; the feed and the MQTT thread only
/// send it events.
public final class Forwarder: Sendable {
    /// What the run task reacts to.
    enum Event: Sendable {
        /// From the MQTT client's thread.
        case mqtt(MQTTEvent)
        /// From the feed.
        case feed(Feed<ForwardedReading>.Event)
        /// The batching timer fired.
        case flush
        /// sugard's health changed (``HealthFollower``).
        case health(GatewayHealth)
        /// The wait after a first discovery config ended.
        case released
        /// Every ``healthTickMillis`` (sooner for a short `sync_overdue_hours`): "Sync overdue"
        /// and the gateway's health message are looked at again.
        case tick
        /// The sinks' states, sampled with each tick (for the gateway's health message).
        case sinks([HealthSink])
        /// The active alerts changed (``activeAlertsChanged(_:)``).
        case activeAlerts([JSONObject])
        /// A save on the saver's thread ended (`error`: it failed).
        case saved(error: String?)
        /// Alert events from the ``Alerter`` (saved there) to publish on the alert topic.
        case alerts([(seq: Int64, message: MQTTMessage)])
        /// ``stop()`` was called.
        case stop
    }

    /// The forwarder's configuration.
    public let config: ForwardConfig
    /// Its topics and payloads.
    let topics: ForwardTopics
    /// The broker password (`mqtt_password_file`'s first line); nil without one.
    let password: String?
    /// Where it logs (reading values only at debug).
    let logger: Logger
    /// The MQTT sink's state for `sugarctl status`, kept in step by the run task.
    public let status: Lock<SinkStatus>
    /// The most publishes unacknowledged by the broker at a time (at least 1).
    let maxInFlight: Int
    /// Readings handed to the MQTT client and not saved durably yet (unacknowledged, or
    /// acknowledged and waiting for a save or in the running one) beyond ``maxInFlight``: with it,
    /// the most that can arrive twice after a crash. At that many the forwarder hands over nothing
    /// more until PUBACKs and a save make room.
    let maxUnsaved: Int
    /// Holds the feed back while the held readings fill it (`maxHeld`, at least twice ``maxInFlight``).
    let window: Window
    /// The other sinks' states (the Nightscout sinks'), for the gateway's health message.
    let otherSinks: @Sendable () -> [Wire.ForwardSink]
    /// The run task's events.
    private let events: AsyncStream<Event>
    /// Where the events are sent.
    private let continuation: AsyncStream<Event>.Continuation
    /// Told when the broker acknowledged alert events (the ``Alerter`` saves the MQTT sink's progress).
    let alertsDelivered = Lock<(@Sendable (Int64) -> Void)?>(nil)

    /// The defaults: 2048 publishes unacknowledged at the broker, 16 384 readings held. A backlog
    /// (after an outage, or a first start on a full database) then goes out with the MQTT thread
    /// and the broker each busy on a core of their own, and the feed filling the window in bursts
    /// between them, rather than all of them taking turns on one core. The cost: more memory with
    /// the window full, and more readings (in flight plus ``maxUnsaved``) that can arrive twice
    /// after a crash. Figures: BENCHMARKS.md, "Windows sized for a backlog".
    public static let defaultMaxInFlight = 2048
    /// How many readings the forwarder holds at most by default.
    public static let defaultMaxHeld = 16_384

    /// The longest time between two looks at the health (30 s): the gateway's health message goes
    /// out at least every ``GatewayHealthTopic/refreshMillis`` plus this, within 5 minutes.
    public static let healthTickMillis: Int64 = 30_000

    /// `otherSinks`: the states of the forwarder's other sinks (Nightscout), for the gateway's
    /// health message.
    public init(
        config: ForwardConfig, password: String?, logger: Logger, maxInFlight: Int = Forwarder.defaultMaxInFlight,
        maxHeld: Int = Forwarder.defaultMaxHeld, otherSinks: @escaping @Sendable () -> [Wire.ForwardSink] = { [] }
    ) {
        self.otherSinks = otherSinks
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

    /// Publishes alert events on `<topic_prefix>/<gateway_id>/alert` (QoS 1), held until acknowledged.
    func publishAlerts(_ events: [LoggedAlert]) {
        let topic = self.topics.alert
        let gateway = self.config.gatewayID
        self.continuation.yield(
            .alerts(
                events.map {
                    ($0.seq, MQTTMessage(topic: topic, payload: Array(WebhookConfig.payload($0.alert, gateway: gateway).serialized().utf8), qos: 1, retain: false))
                }))
    }

    /// The active alerts are now `alerts` (each as its alert message's object: `id`, `kind`,
    /// `meter`, `person`, `message`, ...): they go into the gateway's health message (`alerts`).
    /// The one place the alert rules hand their active alerts to the health topic.
    public func activeAlertsChanged(_ alerts: [JSONObject]) { self.continuation.yield(.activeAlerts(alerts)) }

    /// Every sink's state now: this MQTT sink's, then the others'.
    func healthSinks() -> [HealthSink] {
        ([self.status.withLock { $0.wire }] + self.otherSinks()).map(HealthSink.init)
    }

    /// Runs until ``stop()`` (or cancellation). Throws only when the state file is unusable.
    public func run() async throws(ForwardFileError) {
        let file = CursorFile(directory: self.config.stateDirectory)
        let saved = try file.load()
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
        options.will = self.offline
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
        // The gateway's health message and Home Assistant's health entities: sugard's adapter,
        // storage and meters, the sinks' states, and now and then a look at which meters are
        // overdue and whether the health message is due again.
        let follower = HealthFollower(socketPath: self.config.socketPath) { continuation.yield(.health($0)) }
        // A tenth of the overdue time, at most healthTickMillis: a meter turns overdue at most that late.
        let tick = Duration.milliseconds(max(250, min(Self.healthTickMillis, Int64(self.config.syncOverdueHours * 360_000))))
        let healthTasks = [
            Task { await follower.run() },
            Task { [self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: tick)
                    continuation.yield(.sinks(self.healthSinks()))
                    continuation.yield(.tick)
                }
            },
        ]
        var driver = Driver(
            forwarder: self, client: client, saver: CursorSaver(file: file), tasks: [feedTask] + healthTasks)
        defer { driver.cancelTasks() }

        var machine = DeliveryStateMachine(
            saved: saved, limits: DeliveryStateMachine.Limits(maxInFlight: self.maxInFlight, maxUnsaved: self.maxUnsaved),
            topics: self.topics, now: monotonicMilliseconds())
        for await event in self.events {
            if case .feed(.database(let id, let previous)) = event {
                machine = self.changeDatabase(to: id, from: previous, machine: machine, saver: driver.saver)
                continue
            }
            guard let event = self.translate(event, connected: machine.isConnected, driver: &driver) else { continue }
            if case .connected = event {
                // The health message on the new connection names this sink connected.
                driver.perform(machine.handle(.sinks(self.healthSinks()), at: monotonicMilliseconds(), wallClock: wallClockMilliseconds()))
            }
            driver.perform(machine.handle(event, at: monotonicMilliseconds(), wallClock: wallClockMilliseconds()))
            if case .readings(let list) = event {
                self.status.withLock {
                    $0.pending = machine.held
                    $0.received += list.count
                }
            }
            if driver.finished { break }
        }
        if !driver.finished { driver.perform(machine.handle(.stop, at: monotonicMilliseconds(), wallClock: wallClockMilliseconds())) }
        self.logger.notice("stopped after cursor \(machine.acknowledged.cursor)")
    }

    /// The feed's readings come from sugard's database `id` (the identity is checked here, outside
    /// the machine, whose cursor is a position only). `previous` nil: the saved position adopts it.
    /// Otherwise the database changed (recreated, restored) and the feed delivered everything of the
    /// old one first: a fresh machine from position 0 of the new one, the start-over recorded
    /// (`databaseReset`) and saved at once.
    private func changeDatabase(
        to id: String, from previous: String?, machine: DeliveryStateMachine, saver: CursorSaver
    ) -> DeliveryStateMachine {
        var next = machine
        if let previous {
            var state = machine.acknowledged
            state.databaseId = id
            state.cursor = 0
            state.databaseReset = ForwardState.DatabaseReset(
                atMillis: wallClockMilliseconds(), previousDatabaseId: previous, databaseId: id)
            next = machine.startingOver(from: state, now: monotonicMilliseconds())
            self.logger.warning(
                "sugard's database changed from \(previous) to \(id) (recreated or restored): delivering its readings "
                    + "from the beginning (receivers drop those they have by reading id)")
        } else {
            next.adopt(databaseId: id)
            self.logger.info("sugard's database is \(id)")
        }
        let state = next.acknowledged
        self.status.withLock {
            $0.cursor = state.cursor
            $0.databaseId = state.databaseId
            $0.databaseReset = state.databaseReset
            $0.pending = next.held
        }
        do { try saver.save(state) } catch { self.logger.error("cannot save the delivery cursor: \(error)") }
        return next
    }

    /// The retained `offline` status message (also the MQTT will).
    private var offline: MQTTMessage { MQTTMessage(topic: self.topics.status, payload: Array("offline".utf8), qos: 1, retain: true) }

    /// The machine's event for `event` (nil: none, the status and the log are all it changes).
    private func translate(_ event: Event, connected: Bool, driver: inout Driver) -> DeliveryStateMachine.Event? {
        switch event {
        case .stop:
            return .stop
        case .flush:
            driver.timer = nil
            return .timerFired
        case .released:
            driver.settleTimer = nil
            return .settled
        case .health(let health):
            return .health(health)
        case .tick:
            return .tick
        case .alerts(let list):
            return .alerts(list)
        case .sinks(let sinks):
            return .sinks(sinks)
        case .activeAlerts(let alerts):
            return .activeAlerts(alerts)
        case .saved(let error):
            guard let error else { return .saveCompleted }
            self.logger.error("cannot save the delivery cursor: \(error)")
            return .saveFailed
        case .feed(.connected):
            self.status.withLock {
                $0.feedConnected = true
                $0.feedReason = nil
            }
            self.logger.info("following sugard's readings at \(self.config.socketPath)")
            return nil
        case .feed(.disconnected(let reason)):
            let changed = self.status.withLock { s -> Bool in
                defer {
                    s.feedConnected = false
                    s.feedReason = reason
                }
                return s.feedConnected || s.feedReason != reason
            }
            if changed { self.logger.warning("sugard's readings are not reachable (retrying): \(reason)") }
            return nil
        case .feed(.database):
            return nil  // run() hands it to changeDatabase (a new machine on a start-over)
        case .feed(.meters(let known)):
            return .meters(known)
        case .feed(.readings(let list)):
            if self.logger.isEnabled(.debug) {
                for (cursor, reading) in list {
                    self.logger.debug(
                        "reading \(cursor) queued", [("meter", reading.meter), ("payload", String(decoding: reading.payload, as: UTF8.self))])
                }
            }
            return .readings(list)
        case .mqtt(.connected(let session)):
            self.logger.notice("connected to \(self.config.mqttURL)")
            self.status.withLock {
                $0.state = .connected
                $0.reason = nil
            }
            return .connected(session: session)
        case .mqtt(.disconnected(let reason, let permanent, let retryIn)):
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
            } else if connected || previous.reason != reason {
                self.logger.warning("MQTT broker \(self.config.mqttURL): \(text)")
            }
            return .disconnected
        case .mqtt(.acknowledged(let tokens, let session)):
            return .acknowledged(tokens: tokens, session: session)
        case .mqtt(.message(let topic, let payload)):
            guard topic == self.topics.homeAssistantStatus, String(decoding: payload, as: UTF8.self) == "online", connected else {
                return nil
            }
            self.logger.info("Home Assistant came online: publishing discovery again")
            return .homeAssistantOnline
        }
    }

    /// Carries out ``DeliveryStateMachine``'s actions: the run task's only I/O.
    private struct Driver {
        /// The forwarder it drives.
        let forwarder: Forwarder
        /// The MQTT client.
        let client: MQTTClient
        /// Saves the cursor file.
        let saver: CursorSaver
        /// The feed's and the health follower's tasks.
        let tasks: [Task<Void, Never>]
        /// The machine's timers, while armed.
        var timer: Task<Void, Never>?
        /// The settle timer (readings wait after a first discovery config).
        var settleTimer: Task<Void, Never>?
        /// The machine stopped and its last actions are done.
        var finished = false

        /// Cancels the feed, health and timer tasks.
        mutating func cancelTasks() {
            for task in self.tasks { task.cancel() }
            self.timer?.cancel()
            self.settleTimer?.cancel()
        }

        /// Does each action in order: publishes, releases window slots, updates the status, saves,
        /// arms timers and, at the end, saves last, publishes `offline` and stops the client.
        mutating func perform(_ actions: [DeliveryStateMachine.Action]) {
            for action in actions {
                switch action {
                case .publish(let message, let session):
                    for mqttMessage in self.mqttMessages(message) {
                        self.client.publish(mqttMessage, token: message.token, session: session)
                    }
                case .releaseFeed(let count):
                    self.forwarder.window.release(count)
                case .delivered(let count, let cursor, let pending):
                    let now = wallClockMilliseconds()
                    self.forwarder.status.withLock {
                        $0.cursor = cursor
                        $0.delivered += count
                        $0.lastDeliveryMillis = now
                        $0.pending = pending
                    }
                case .saveCursor(let state):
                    self.startSave(state)
                case .startTimer(let millis):
                    let continuation = self.forwarder.continuation
                    self.timer = Task {
                        try? await Task.sleep(for: .milliseconds(millis))
                        continuation.yield(.flush)
                    }
                case .startSettleTimer(let millis):
                    let continuation = self.forwarder.continuation
                    self.settleTimer?.cancel()
                    self.settleTimer = Task {
                        try? await Task.sleep(for: .milliseconds(millis))
                        if !Task.isCancelled { continuation.yield(.released) }
                    }
                case .alertsDelivered(let seq):
                    self.forwarder.alertsDelivered.withLock { $0 }?(seq)
                case .finish(let state):
                    self.cancelTasks()
                    if let state {
                        do {
                            try self.saver.save(state)
                        } catch {
                            self.forwarder.logger.error("cannot save the delivery cursor: \(error)")
                        }
                    }
                    self.client.stop(last: self.forwarder.offline)
                    self.finished = true
                }
            }
        }

        /// Hands the cursor to the saver's thread (the temporary file, fsync, rename and the
        /// directory's fsync take milliseconds, the event loop goes on meanwhile).
        private func startSave(_ state: ForwardState) {
            let saver = self.saver
            let continuation = self.forwarder.continuation
            let save: @Sendable () -> Void = {
                var failure: String?
                do { try saver.save(state) } catch { failure = "\(error)" }
                continuation.yield(.saved(error: failure))
            }
            if startDetachedThread(save) != 0 { save() }
        }

        /// The MQTT messages of `message` (a discovery is a config per entity).
        private func mqttMessages(_ message: DeliveryStateMachine.Message) -> [MQTTMessage] {
            let topics = self.forwarder.topics
            func retained(_ configs: [(topic: String, config: JSONValue)]) -> [MQTTMessage] {
                configs.map { MQTTMessage(topic: $0.topic, payload: Array($0.config.serialized().utf8), qos: 1, retain: true) }
            }
            switch message {
            case .reading(_, _, let message), .health(let message), .alert(_, let message), .gatewayHealth(let message):
                return [message]
            case .online:
                return [MQTTMessage(topic: topics.status, payload: Array("online".utf8), qos: 1, retain: true)]
            case .gatewayDiscovery:
                return retained(topics.gatewayDiscovery())
            case .discovery(let meter, let identity):
                return retained(topics.meterDiscovery(meter: meter, identity: identity))
            case .personDiscovery(let person):
                return retained(topics.personDiscovery(person: person))
            }
        }
    }
}
