import JSON
import MQTT
import SugarWire

/// The MQTT sink's delivery as a state machine: the outbox of readings held, the window of
/// readings handed to the MQTT client, their PUBACKs, the saved cursor and the reconnects.
///
/// It performs no I/O and reads no clock: each ``Event`` goes in through ``handle(_:at:)`` with the
/// monotonic time in milliseconds, and the ``Action``s that come out are carried out, in order, by
/// a driver (``Forwarder/run()``, or a test). The rules:
///
/// - Readings are published in cursor order, each as the messages of
///   ``ForwardTopics/messages(_:person:payload:kind:mgdL:updates:)`` with QoS 1: its reading
///   topic; with Home Assistant discovery its event; when it is its meter's newest glucose value,
///   LO or HI so far, "Glucose low"/"Glucose high" (and for a glucose value the retained state
///   topic); the same on its person's topics. What a reading updates (``ReadingUpdates``) is
///   decided when it arrives; only a state update not handed over yet is dropped when a newer
///   one for the same meter (or person) arrives (its other messages still go out).
/// - After a meter's or person's first discovery config from this machine, readings wait
///   ``Limits/settleMillis`` (``Action/startSettleTimer(millis:)``, ``Event/settled``) so Home
///   Assistant has subscribed to the new entities' topics before their first values.
/// - sugard's health (``Event/health(_:)``, ``Event/tick``) goes to Home Assistant's health
///   entities when a value changes, and all of it on each connection. With the sinks' states
///   (``Event/sinks(_:)``) and the active alerts (``Event/alerts(_:)``) it makes the gateway's
///   health message (``GatewayHealthTopic``): on each connection, on a change, and at least every
///   ``GatewayHealthTopic/refreshMillis`` (looked at on each tick).
/// - At most `maxInFlight + maxUnsaved` readings are handed to the client and not saved durably
///   (unacknowledged, acknowledged and unsaved, or in the running save): the most that can arrive
///   twice after a crash. At that bound nothing more is handed over until PUBACKs and a save make
///   room. (The MQTT client itself keeps at most `maxInFlight` unacknowledged at the broker.)
/// - A reading is delivered when all its messages are acknowledged; the cursor moves over the
///   contiguous prefix of delivered readings only, never past one still unacknowledged. Delivered
///   readings give their slots back to the feed (``Action/releaseFeed(_:)``): the feed's reader
///   thread pauses itself when its ``Window`` is full, before it reads the next reply, and goes
///   on once at most half of it is used.
/// - One cursor save at a time, of everything acknowledged so far: it starts at a PUBACK when the
///   previous one started `saveDelayMillis` ago or more, or half of `maxUnsaved` is acknowledged
///   and unsaved; else when a timer of `saveDelayMillis` fires. A failed save leaves its readings
///   unsaved (still counted in the bound): they go with the next save, at the latest when a timer
///   of `saveRetryMillis` fires.
/// - A lost connection forgets what was handed over: on the next one (the MQTT client reconnects
///   by itself, with backoff) everything not delivered is sent again, in order, after `online`,
///   the discovery configs (gateway, meters, people) and the health messages. When Home Assistant
///   announces `online`, the discovery configs and health messages go out again.
/// - ``Event/stop`` ends the machine: ``Action/finish(save:)`` carries the state to save before
///   the process exits when anything acknowledged is not saved yet (or a save is running).
///
/// - The cursor is (database id, position): the machine's cursor is the position, an `Int64`
///   that only grows; the database identity is checked outside it (``Forwarder``'s driver). When
///   the identity changes, the driver records and saves the start-over and goes on with
///   ``startingOver(from:now:)`` from position 0 of the new database.
///
/// - Alert events (``Event/alerts(_:)``, from the ``Alerter``, which saves them first) are a second
///   stream: held until the broker acknowledged them (their tokens have ``alertTokenBit`` set and
///   carry the event's `seq`), published as they come while connected and all again, before any
///   reading, after a reconnect; ``Action/alertsDelivered(upTo:)`` reports the contiguous prefix
///   acknowledged, which the alerter saves as the MQTT sink's progress.
///
/// Later work fits in as follows:
/// - A reading that comes again at a later cursor (its person changed): a new entry like any
///   other; its updates are decided against the newest as it stands then.
/// - Per-sink cursors: one machine per sink, each with its own saved state and saver; a machine
///   knows only its own outbox.
struct DeliveryStateMachine: Sendable {
    /// The bounds and delays.
    struct Limits: Sendable, Equatable {
        /// Readings handed to the MQTT client and not acknowledged (the client's window).
        var maxInFlight: Int
        /// Readings handed over and not saved durably beyond ``maxInFlight``.
        var maxUnsaved: Int
        /// The least time between the starts of two cursor saves.
        var saveDelayMillis: Int64 = 25
        /// The pause before a failed save is tried again.
        var saveRetryMillis: Int64 = 1000
        /// How long readings wait after a meter's or person's first discovery config: Home
        /// Assistant subscribes to an entity's topics only once it has processed its config, and
        /// the entity's events and "Glucose low"/"Glucose high" changes should reach it, not only
        /// the last retained value.
        var settleMillis: Int64 = 1500

        /// Limits for `maxInFlight` publishes (at least 1); `maxUnsaved` defaults to four times that.
        init(maxInFlight: Int, maxUnsaved: Int? = nil) {
            self.maxInFlight = max(1, maxInFlight)
            self.maxUnsaved = maxUnsaved ?? 4 * self.maxInFlight
        }
    }

    /// A reading's messages are numbered within it (at most `1 << tokenShift`); a publish's token
    /// is the reading's cursor and that index.
    static let tokenShift: Int64 = 4

    /// The token of message `index` of the reading at `cursor`: what its PUBACK reports.
    static func token(cursor: Int64, index: Int) -> Int64 { cursor << Self.tokenShift | Int64(index) }

    /// The cursor of the reading a token belongs to.
    static func cursor(ofToken token: Int64) -> Int64 { token >> Self.tokenShift }

    /// Set in an alert event's token (its `seq` in the low bits); a reading's cursor stays far below.
    static let alertTokenBit: Int64 = 1 << 62

    /// What the machine reacts to.
    enum Event: Sendable {
        /// Readings from the feed, in commit order (one `FollowReadings` reply).
        case readings([(cursor: Int64, reading: ForwardedReading)])
        /// The meters' identities as the feed knows them.
        case meters([String: Wire.MeterIdentity?])
        /// The MQTT client connected; its publishes go with `session`.
        case connected(session: Int)
        /// The MQTT client lost its connection (it reconnects by itself).
        case disconnected
        /// PUBACKs for these tokens arrived on connection `session`.
        case acknowledged(tokens: [Int64], session: Int)
        /// Home Assistant's birth message arrived.
        case homeAssistantOnline
        /// Alert events to publish (each saved by the alerter), by `seq`; ones held already are ignored.
        case alerts([(seq: Int64, message: MQTTMessage)])
        /// sugard's health changed.
        case health(GatewayHealth)
        /// The forwarder's sinks and their states now (for the gateway's health message).
        case sinks([HealthSink])
        /// The active alerts now, each as its alert message's object (for the gateway's health message).
        case activeAlerts([JSONObject])
        /// Time passed (at most ``Forwarder/healthTickMillis``, less for a short
        /// `sync_overdue_hours`): "Sync overdue" and the gateway's health message are looked at again.
        case tick
        /// The timer of ``Action/startTimer(millis:)`` fired.
        case timerFired
        /// The timer of ``Action/startSettleTimer(millis:)`` fired.
        case settled
        /// The save of ``Action/saveCursor(_:)`` ended.
        case saveCompleted
        /// The save of ``Action/saveCursor(_:)`` failed (it is tried again after ``Limits/saveRetryMillis``).
        case saveFailed
        /// The forwarder stops: the last save and `offline`.
        case stop
    }

    /// What the driver must do, in order.
    enum Action: Sendable, Equatable {
        /// Hand `message` to the MQTT client for connection `session` (QoS 1; with its
        /// ``Message/token`` when it has one).
        case publish(Message, session: Int)
        /// Give the feed's window `count` slots back (readings delivered).
        case releaseFeed(Int)
        /// Save `state` durably, off the event loop; answer with ``Event/saveCompleted`` or
        /// ``Event/saveFailed``.
        case saveCursor(ForwardState)
        /// Arm the timer; answer with ``Event/timerFired`` after `millis`.
        case startTimer(millis: Int64)
        /// Arm the settle timer, replacing one armed before; answer with ``Event/settled`` after
        /// `millis`.
        case startSettleTimer(millis: Int64)
        /// `count` more readings are delivered; the cursor is now `cursor`, `pending` readings
        /// are held.
        case delivered(count: Int, cursor: Int64, pending: Int)
        /// Stop: end the feed, save `save` (when not nil) before returning, publish `offline`
        /// and disconnect.
        case finish(save: ForwardState?)
        /// The broker acknowledged every alert event up to `seq`.
        case alertsDelivered(upTo: Int64)
    }

    /// One thing to publish; the driver makes its MQTT messages (a discovery is several).
    enum Message: Sendable, Equatable {
        /// Message `index` of the reading at `cursor` (its reading message is `0`).
        case reading(cursor: Int64, index: Int, MQTTMessage)
        /// `online` on the status topic (retained).
        case online
        /// The gateway's Home Assistant discovery configs (retained).
        case gatewayDiscovery
        /// The meter's Home Assistant discovery configs (retained).
        case discovery(meter: String, identity: Wire.MeterIdentity?)
        /// The person's Home Assistant discovery configs (retained).
        case personDiscovery(person: String)
        /// A health entity's value (retained).
        case health(MQTTMessage)
        /// The alert event `seq` (QoS 1, not retained).
        case alert(seq: Int64, MQTTMessage)
        /// The gateway's health message (retained; sent again on each connection).
        case gatewayHealth(MQTTMessage)

        /// What its PUBACK reports (-1: none is waited for).
        var token: Int64 {
            switch self {
            case .reading(let cursor, let index, _): DeliveryStateMachine.token(cursor: cursor, index: index)
            case .alert(let seq, _): DeliveryStateMachine.alertTokenBit | seq
            case .online, .gatewayDiscovery, .discovery, .personDiscovery, .health, .gatewayHealth: -1
            }
        }
    }

    /// A reading held until it is delivered.
    struct Entry: Sendable {
        /// Its position in sugard's commit order.
        var cursor: Int64
        /// The meter's id.
        var meter: String
        /// When it was measured (epoch ms).
        var millis: Int64
        /// The reading topic's payload.
        var payload: [UInt8]
        /// What it is (glucose, LO, HI, control, ketone, no value).
        var kind: Wire.ReadingKind
        /// Its value in mg/dL; nil without a glucose value.
        var mgdL: Double?
        /// The person the meter is assigned to.
        var person: String?
        /// What it updates besides its reading message.
        var updates: ReadingUpdates
        /// Its messages handed over and not acknowledged.
        var outstanding = 0
        /// Its messages were handed over on the current connection.
        var sent = false
    }

    /// The readings held, in cursor order: delivered ones are dropped from the front in bulk (not
    /// one shift of the whole array per acknowledgement).
    struct Outbox: Sendable {
        /// The readings, those before ``head`` delivered and waiting to be dropped.
        private(set) var entries: [Entry] = []
        /// The first one not delivered.
        private(set) var head = 0
        /// The first one not handed over.
        private(set) var next = 0
        /// Handed over with messages outstanding.
        private(set) var handed = 0

        /// Readings held (not delivered).
        var held: Int { self.entries.count - self.head }

        /// Queues a reading at the end.
        mutating func append(_ entry: Entry) { self.entries.append(entry) }

        /// The next entry to hand over; nil when all are.
        var nextEntry: Entry? { self.next < self.entries.count ? self.entries[self.next] : nil }

        /// Marks the next entry handed over with `messages` messages.
        mutating func handOver(messages: Int) {
            self.entries[self.next].sent = true
            self.entries[self.next].outstanding = messages
            self.handed += 1
            self.next += 1
        }

        /// The meter's (`person` false) or person's state update of the reading at `cursor` is no
        /// longer sent, unless handed over already.
        mutating func dropStateUpdate(of cursor: Int64, person: Bool) {
            guard let index = self.find(cursor), !self.entries[index].sent else { return }
            if person { self.entries[index].updates.personState = false } else { self.entries[index].updates.state = false }
        }

        /// Counts the PUBACKs of `tokens`, then drops the delivered prefix, moving `state` over it;
        /// returns its length.
        mutating func acknowledge(_ tokens: [Int64], into state: inout ForwardState) -> Int {
            for token in tokens {
                guard let index = self.find(DeliveryStateMachine.cursor(ofToken: token)), self.entries[index].outstanding > 0 else {
                    continue
                }
                self.entries[index].outstanding -= 1
                if self.entries[index].outstanding == 0 { self.handed -= 1 }
            }
            var done = 0
            while self.head + done < self.entries.count, self.entries[self.head + done].sent,
                self.entries[self.head + done].outstanding == 0
            {
                let entry = self.entries[self.head + done]
                state.cursor = entry.cursor
                if entry.updates.level { state.newest[entry.meter] = max(state.newest[entry.meter] ?? .min, entry.millis) }
                if entry.updates.personLevel, let person = entry.person {
                    let key = DeliveryStateMachine.personKey(person)
                    state.newest[key] = max(state.newest[key] ?? .min, entry.millis)
                }
                done += 1
            }
            guard done > 0 else { return 0 }
            self.head += done
            if self.head == self.entries.count {
                self.entries.removeAll(keepingCapacity: true)
                self.next = 0
                self.head = 0
            } else if self.head >= 1024, self.head * 2 >= self.entries.count {
                self.entries.removeFirst(self.head)
                self.next -= self.head
                self.head = 0
            }
            return done
        }

        /// Nothing is handed over any more (the connection is gone).
        mutating func rewind() {
            for index in self.head..<self.entries.count {
                self.entries[index].sent = false
                self.entries[index].outstanding = 0
            }
            self.next = self.head
            self.handed = 0
        }

        /// The index of the held entry with `cursor`.
        private func find(_ cursor: Int64) -> Int? {
            var low = self.head
            var high = self.entries.count
            while low < high {
                let mid = (low + high) / 2
                if self.entries[mid].cursor < cursor { low = mid + 1 } else { high = mid }
            }
            return low < self.entries.count && self.entries[low].cursor == cursor ? low : nil
        }
    }

    /// The MQTT connection as the machine knows it.
    private enum Link: Sendable {
        /// Not connected: nothing is handed over.
        case down
        /// Connected; publishes go with `session`.
        case up(session: Int)
    }

    /// Whether a cursor save runs.
    private enum Save: Sendable {
        /// No save runs.
        case idle
        /// A save of this many acknowledged readings runs.
        case running(count: Int)
    }

    /// The window, save and settle limits.
    let limits: Limits
    /// The topics and payloads (and the configuration they follow: discovery, thresholds).
    let topics: ForwardTopics
    /// What a save writes: the highest contiguously acknowledged cursor, and each meter's (and
    /// person's, ``personKey(_:)``) newest glucose level acknowledged.
    private(set) var acknowledged: ForwardState
    /// The readings held, in cursor order.
    private(set) var outbox = Outbox()
    /// Whether the broker is connected.
    private var link = Link.down
    /// Each meter's (and person's) newest measured glucose level handed over or queued.
    private var newest: [String: Int64]
    /// Each meter's (and person's) queued state update.
    private var stateCursor: [String: Int64] = [:]
    /// The meters' identities (for their discovery configs).
    private var meters: [String: Wire.MeterIdentity?] = [:]
    /// People seen in readings (their discovery goes out on each connection).
    private var people: Set<String> = []
    /// Meters and people (``personKey(_:)``) whose first discovery config went out.
    private var announced: Set<String> = []
    /// Readings wait until then (monotonic milliseconds) after a first discovery config.
    private var holdUntil: Int64 = .min
    /// The retained health values for Home Assistant.
    private var health: HealthPublisher
    /// The gateway's health message.
    private var gatewayHealth: GatewayHealthTopic
    /// Each meter's and person's topics, made once (not per message).
    private var meterTopics: [String: MeterTopics] = [:]
    /// Each person's topics, made once.
    private var personTopics: [String: PersonTopics] = [:]
    /// Acknowledged readings not in a save yet.
    private var unsaved = 0
    /// Whether a save runs, and of how many readings.
    private var save = Save.idle
    /// When the last save started.
    private var lastSave: Int64
    /// The timer of ``Action/startTimer(millis:)`` is armed.
    private var timerArmed = false
    /// ``Event/stop`` was handled: nothing more is done.
    private var stopped = false
    /// Alert events not acknowledged yet, by `seq` (the value: handed over on this connection).
    private var alerts: [(seq: Int64, message: MQTTMessage, sent: Bool)] = []
    /// The highest alert `seq` taken, and the highest acknowledged with every one before it.
    private var alertsTaken: Int64 = 0
    /// The highest alert `seq` acknowledged with every one before it.
    private var alertsAcknowledged: Int64 = 0

    /// Starts from the state saved last time, at `now` (monotonic milliseconds).
    /// `version`: the forwarder's, for the gateway's health message.
    init(saved: ForwardState, limits: Limits, topics: ForwardTopics, now: Int64, version: String = sugardForwardVersion) {
        self.limits = limits
        self.topics = topics
        self.acknowledged = saved
        self.newest = saved.newest
        self.lastSave = now
        self.health = HealthPublisher(topics: topics, overdueHours: topics.config.syncOverdueHours)
        self.gatewayHealth = GatewayHealthTopic(topics: topics, version: version)
    }

    /// A person's key in ``ForwardState/newest`` (beside the meters' addresses).
    static func personKey(_ person: String) -> String { "person/" + person }

    /// The saved position is in sugard's database `id`, reported for the first time (a position
    /// saved before identities adopts it; nothing starts over). The driver checks identities.
    mutating func adopt(databaseId id: String) { self.acknowledged.databaseId = id }

    /// The machine for the next database, made by the driver when sugard's database changed
    /// (recreated, restored) after the feed saw everything of the old one delivered: it starts from
    /// `state` (a position in the new database) with nothing held, keeping the connection, the
    /// meters and people known and announced (with their topics and the
    /// health entities), the running save and the armed timer (their events still come), so nothing is
    /// published again and one save at a time still holds.
    func startingOver(from state: ForwardState, now: Int64) -> DeliveryStateMachine {
        var next = DeliveryStateMachine(saved: state, limits: self.limits, topics: self.topics, now: now)
        next.link = self.link
        next.meters = self.meters
        next.people = self.people
        next.announced = self.announced
        next.holdUntil = self.holdUntil
        next.health = self.health
        next.gatewayHealth = self.gatewayHealth
        next.meterTopics = self.meterTopics
        next.personTopics = self.personTopics
        next.save = self.save
        next.lastSave = self.lastSave
        next.timerArmed = self.timerArmed
        next.stopped = self.stopped
        next.alerts = self.alerts
        next.alertsTaken = self.alertsTaken
        next.alertsAcknowledged = self.alertsAcknowledged
        return next
    }

    /// Readings held (received, not delivered).
    var held: Int { self.outbox.held }

    /// Whether the broker is connected.
    var isConnected: Bool {
        if case .up = self.link { true } else { false }
    }

    /// Acknowledged readings not durably saved (in a running save, or waiting for one).
    var unsavedCount: Int { self.unsaved + self.saving }

    /// Readings in the running save.
    private var saving: Int {
        if case .running(let count) = self.save { count } else { 0 }
    }

    /// Whether Home Assistant discovery is on.
    private var discoveryEnabled: Bool { self.topics.config.homeAssistantDiscovery }

    /// Takes `event` at `now` (monotonic milliseconds; `wallClock`: epoch milliseconds, for the
    /// health entities' times); returns what to do, in order.
    mutating func handle(_ event: Event, at now: Int64, wallClock: Int64) -> [Action] {
        guard !self.stopped else { return [] }
        var actions: [Action] = []
        switch event {
        case .readings(let list):
            for (cursor, reading) in list { self.queue(cursor, reading, now, &actions) }
            self.handOver(now, &actions)
        case .meters(let known):
            for (meter, identity) in known where self.meters[meter] != identity {
                let isNew = self.meters[meter] == nil
                self.meters.updateValue(identity, forKey: meter)
                if case .up(let session) = self.link, isNew || identity != nil {
                    self.discovery(meter, session, now, &actions)
                }
            }
        case .connected(let session):
            self.link = .up(session: session)
            actions.append(.publish(.online, session: session))
            self.gatewayHealth.reconnected()
            self.publishGatewayHealth(now, wallClock, &actions)
            self.announce(session, now, wallClock, &actions)
            self.publishAlerts(&actions)
            self.handOver(now, &actions)
        case .disconnected:
            self.link = .down
            self.outbox.rewind()
            for index in self.alerts.indices { self.alerts[index].sent = false }
        case .alerts(let list):
            for (seq, message) in list where seq > self.alertsTaken {
                self.alerts.append((seq, message, false))
                self.alertsTaken = seq
            }
            if self.alertsAcknowledged == 0, let first = self.alerts.first { self.alertsAcknowledged = first.seq - 1 }
            self.publishAlerts(&actions)
        case .acknowledged(let allTokens, let session):
            guard case .up(let current) = self.link, current == session else { break }
            let tokens = self.acknowledgeAlerts(allTokens, &actions)
            let done = self.outbox.acknowledge(tokens, into: &self.acknowledged)
            if done > 0 {
                self.unsaved += done
                actions.append(.releaseFeed(done))
                actions.append(.delivered(count: done, cursor: self.acknowledged.cursor, pending: self.outbox.held))
                self.startSave(force: false, now, &actions)
            }
            self.handOver(now, &actions)
        case .homeAssistantOnline:
            guard case .up(let session) = self.link else { break }
            self.announce(session, now, wallClock, &actions)
        case .health(let health):
            self.gatewayHealth.health = health
            self.publishGatewayHealth(now, wallClock, &actions)
            self.publishHealth(self.health.update(health, now: wallClock), &actions)
        case .sinks(let sinks):
            self.gatewayHealth.sinks = sinks
            self.publishGatewayHealth(now, wallClock, &actions)
        case .activeAlerts(let alerts):
            self.gatewayHealth.alerts = alerts
            self.publishGatewayHealth(now, wallClock, &actions)
        case .tick:
            self.publishGatewayHealth(now, wallClock, &actions)
            self.publishHealth(self.health.tick(now: wallClock), &actions)
        case .timerFired:
            self.timerArmed = false
            self.startSave(force: true, now, &actions)
        case .settled:
            if now < self.holdUntil {
                actions.append(.startSettleTimer(millis: self.holdUntil - now))
            } else {
                self.handOver(now, &actions)
            }
        case .saveCompleted:
            self.save = .idle
            self.startSave(force: false, now, &actions)
            self.handOver(now, &actions)
        case .saveFailed:
            // Tried again after a pause (the readings wait for it), not at once.
            self.unsaved += self.saving
            self.save = .idle
            self.armTimer(self.limits.saveRetryMillis, &actions)
            self.handOver(now, &actions)
        case .stop:
            self.stopped = true
            actions.append(.finish(save: self.unsavedCount > 0 ? self.acknowledged : nil))
        }
        return actions
    }

    /// Decides what the reading updates (once: only the state updates may later be dropped for a
    /// newer one) and queues it.
    private mutating func queue(_ cursor: Int64, _ reading: ForwardedReading, _ now: Int64, _ actions: inout [Action]) {
        let meter = reading.meter
        let millis = reading.epochMillis
        // Only what says where the person's glucose is (a value, LO, HI) moves the newest; only a
        // glucose value becomes the glucose sensor's state, so a control test or a ketone record
        // never does.
        let level = reading.kind.isGlucoseLevel && millis > (self.newest[meter] ?? .min)
        var updates = ReadingUpdates(state: level && reading.kind == .glucose, level: level)
        if level { self.newest[meter] = millis }
        if updates.state {
            // The retained state only needs the newest: an older state update still waiting to
            // be sent is dropped ("Glucose low"/"Glucose high" still follow every reading in order).
            if let previous = self.stateCursor[meter] { self.outbox.dropStateUpdate(of: previous, person: false) }
            self.stateCursor[meter] = cursor
        }
        // The person's entities follow the newest of all their meters the same way.
        if let person = reading.person, self.discoveryEnabled {
            let key = Self.personKey(person)
            if self.people.insert(person).inserted, case .up(let session) = self.link {
                self.personDiscovery(person, session, now, &actions)
            }
            updates.personLevel = reading.kind.isGlucoseLevel && millis > (self.newest[key] ?? .min)
            updates.personState = updates.personLevel && reading.kind == .glucose
            if updates.personLevel { self.newest[key] = millis }
            if updates.personState {
                if let previous = self.stateCursor[key] { self.outbox.dropStateUpdate(of: previous, person: true) }
                self.stateCursor[key] = cursor
            }
        }
        self.outbox.append(
            Entry(
                cursor: cursor, meter: meter, millis: millis, payload: reading.payload, kind: reading.kind, mgdL: reading.mgdL,
                person: reading.person, updates: updates))
    }

    /// Hands readings over while connected, not settling, and within the bound of readings not
    /// saved.
    private mutating func handOver(_ now: Int64, _ actions: inout [Action]) {
        guard case .up(let session) = self.link, now >= self.holdUntil else { return }
        let bound = self.limits.maxInFlight + self.limits.maxUnsaved
        while self.outbox.handed + self.unsaved + self.saving < bound, let entry = self.outbox.nextEntry {
            let messages = self.topics.messages(
                self.topics(meter: entry.meter), person: self.topics(person: entry.person), payload: entry.payload, kind: entry.kind,
                mgdL: entry.mgdL, updates: entry.updates)
            assert(messages.count <= 1 << Self.tokenShift, "a reading's messages outgrow its tokens")
            for (index, message) in messages.enumerated() {
                actions.append(.publish(.reading(cursor: entry.cursor, index: index, message), session: session))
            }
            self.outbox.handOver(messages: messages.count)
        }
    }

    /// The meter's topics, made on first use.
    private mutating func topics(meter: String) -> MeterTopics {
        if let known = self.meterTopics[meter] { return known }
        let made = self.topics.meterTopics(meter)
        self.meterTopics[meter] = made
        return made
    }

    /// The person's topics, made on first use; nil without a person or without discovery.
    private mutating func topics(person: String?) -> PersonTopics? {
        guard let person, self.discoveryEnabled else { return nil }
        if let known = self.personTopics[person] { return known }
        let made = self.topics.personTopics(person)
        self.personTopics[person] = made
        return made
    }

    /// Everything Home Assistant needs on a new connection or when it comes online: the
    /// discovery configs of the gateway, the meters and the people, and every health value.
    private mutating func announce(_ session: Int, _ now: Int64, _ wallClock: Int64, _ actions: inout [Action]) {
        guard self.discoveryEnabled else { return }
        actions.append(.publish(.gatewayDiscovery, session: session))
        for meter in self.meters.keys.sorted() { self.discovery(meter, session, now, &actions) }
        for person in self.people.sorted() { self.personDiscovery(person, session, now, &actions) }
        self.publishHealth(self.health.all(now: wallClock), &actions)
    }

    /// Publishes the meter's discovery config; its first one holds the readings back.
    private mutating func discovery(_ meter: String, _ session: Int, _ now: Int64, _ actions: inout [Action]) {
        guard self.discoveryEnabled else { return }
        actions.append(.publish(.discovery(meter: meter, identity: self.meters[meter] ?? nil), session: session))
        if self.announced.insert(meter).inserted { self.hold(now, &actions) }
    }

    /// Publishes the person's discovery configs; their first one holds the readings back.
    private mutating func personDiscovery(_ person: String, _ session: Int, _ now: Int64, _ actions: inout [Action]) {
        actions.append(.publish(.personDiscovery(person: person), session: session))
        if self.announced.insert(Self.personKey(person)).inserted { self.hold(now, &actions) }
    }

    /// Readings wait ``Limits/settleMillis`` from now.
    private mutating func hold(_ now: Int64, _ actions: inout [Action]) {
        guard self.limits.settleMillis > 0 else { return }
        self.holdUntil = now + self.limits.settleMillis
        actions.append(.startSettleTimer(millis: self.limits.settleMillis))
    }

    /// Alert events not handed over on this connection go out (while connected).
    private mutating func publishAlerts(_ actions: inout [Action]) {
        guard case .up(let session) = self.link else { return }
        for index in self.alerts.indices where !self.alerts[index].sent {
            self.alerts[index].sent = true
            actions.append(.publish(.alert(seq: self.alerts[index].seq, self.alerts[index].message), session: session))
        }
    }

    /// Takes the alert events' PUBACKs out of `tokens` (returns the readings'); reports the
    /// acknowledged prefix when it grew.
    private mutating func acknowledgeAlerts(_ tokens: [Int64], _ actions: inout [Action]) -> [Int64] {
        guard tokens.contains(where: { $0 & Self.alertTokenBit != 0 }) else { return tokens }
        var readings: [Int64] = []
        for token in tokens {
            guard token & Self.alertTokenBit != 0 else {
                readings.append(token)
                continue
            }
            let seq = token & ~Self.alertTokenBit
            self.alerts.removeAll { $0.seq == seq }
        }
        let upTo = (self.alerts.first?.seq).map { $0 - 1 } ?? self.alertsTaken
        if upTo > self.alertsAcknowledged {
            self.alertsAcknowledged = upTo
            actions.append(.alertsDelivered(upTo: upTo))
        }
        return readings
    }

    /// The gateway's health message goes out while connected, when due.
    private mutating func publishGatewayHealth(_ now: Int64, _ wallClock: Int64, _ actions: inout [Action]) {
        guard case .up(let session) = self.link,
            let message = self.gatewayHealth.next(now: now, wallClock: wallClock, databaseId: self.acknowledged.databaseId)
        else { return }
        actions.append(.publish(.gatewayHealth(message), session: session))
    }

    /// Health values go out while connected (all of them again on the next connection).
    private func publishHealth(_ messages: [MQTTMessage], _ actions: inout [Action]) {
        guard case .up(let session) = self.link else { return }
        for message in messages { actions.append(.publish(.health(message), session: session)) }
    }

    /// Starts a save of what is acknowledged when one is due (`force`: the delay is over); else
    /// arms the timer for it.
    private mutating func startSave(force: Bool, _ now: Int64, _ actions: inout [Action]) {
        guard self.unsaved > 0, case .idle = self.save else { return }
        if !force, now - self.lastSave < self.limits.saveDelayMillis, self.unsaved < self.limits.maxUnsaved / 2 {
            self.armTimer(self.limits.saveDelayMillis, &actions)
            return
        }
        self.save = .running(count: self.unsaved)
        self.unsaved = 0
        self.lastSave = now
        actions.append(.saveCursor(self.acknowledged))
    }

    /// One timer at a time: an armed one is not replaced.
    private mutating func armTimer(_ millis: Int64, _ actions: inout [Action]) {
        guard !self.timerArmed else { return }
        self.timerArmed = true
        actions.append(.startTimer(millis: millis))
    }
}
