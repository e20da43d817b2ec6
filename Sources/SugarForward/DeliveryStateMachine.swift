import SugarWire

/// The MQTT sink's delivery as a state machine: the outbox of readings held, the window of
/// readings handed to the MQTT client, their PUBACKs, the saved cursor and the reconnects.
///
/// It performs no I/O and reads no clock: each ``Event`` goes in through ``handle(_:at:)`` with the
/// monotonic time in milliseconds, and the ``Action``s that come out are carried out, in order, by
/// a driver (``Forwarder/run()``, or a test). The rules:
///
/// - Readings are published in cursor order, each with QoS 1 on its reading topic and, when it is
///   its meter's newest measured time so far, on the meter's retained state topic. A state update
///   not handed over yet is dropped when a newer one for the same meter arrives (its reading
///   message still goes out).
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
///   by itself, with backoff) everything not delivered is sent again, in order, after `online` and
///   the discovery configs.
/// - ``Event/stop`` ends the machine: ``Action/finish(save:)`` carries the state to save before
///   the process exits when anything acknowledged is not saved yet (or a save is running).
///
/// - The cursor is (database id, position): the machine's cursor is the position, an `Int64`
///   that only grows; the database identity is checked outside it (``Forwarder``'s driver). When
///   the identity changes, the driver records and saves the start-over and goes on with
///   ``startingOver(from:now:)`` from position 0 of the new database.
///
/// Later work fits in as follows:
/// - Alert messages as a second stream through the same outbox: an ``Entry`` gets a kind, the
///   ``Message`` a case, and the token's low bits (today reading `0`, state `1`) name the
///   message; alerts then share the window, the ordering and the reconnect with readings. Their
///   own cursor, when they need one, is saved in ``ForwardState`` beside the readings'.
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
        /// Whether the meters' Home Assistant discovery configs are published.
        var discovery: Bool

        init(maxInFlight: Int, maxUnsaved: Int? = nil, discovery: Bool) {
            self.maxInFlight = max(1, maxInFlight)
            self.maxUnsaved = maxUnsaved ?? 4 * self.maxInFlight
            self.discovery = discovery
        }
    }

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
        /// The timer of ``Action/startTimer(millis:)`` fired.
        case timerFired
        /// The save of ``Action/saveCursor(_:)`` ended.
        case saveCompleted
        case saveFailed
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
        /// `count` more readings are delivered; the cursor is now `cursor`, `pending` readings
        /// are held.
        case delivered(count: Int, cursor: Int64, pending: Int)
        /// Stop: end the feed, save `save` (when not nil) before returning, publish `offline`
        /// and disconnect.
        case finish(save: ForwardState?)
    }

    enum Message: Sendable, Equatable {
        /// The reading's message on its meter's reading topic (not retained).
        case reading(cursor: Int64, meter: String, payload: [UInt8])
        /// The same payload on the meter's state topic (retained).
        case state(cursor: Int64, meter: String, payload: [UInt8])
        /// `online` on the status topic (retained).
        case online
        /// The meter's Home Assistant discovery config (retained).
        case discovery(meter: String, identity: Wire.MeterIdentity?)

        /// What its PUBACK reports (-1: none is waited for).
        var token: Int64 {
            switch self {
            case .reading(let cursor, _, _): cursor << 1
            case .state(let cursor, _, _): cursor << 1 | 1
            case .online, .discovery: -1
            }
        }
    }

    /// A reading held until it is delivered.
    struct Entry: Sendable {
        var cursor: Int64
        var meter: String
        var millis: Int64
        var payload: [UInt8]
        /// Whether it goes to the meter's state topic too.
        var updatesState: Bool
        /// Its messages handed over and not acknowledged.
        var outstanding = 0
        var sent = false
    }

    /// The readings held, in cursor order: delivered ones are dropped from the front in bulk (not
    /// one shift of the whole array per acknowledgement).
    struct Outbox: Sendable {
        private(set) var entries: [Entry] = []
        /// The first one not delivered.
        private(set) var head = 0
        /// The first one not handed over.
        private(set) var next = 0
        /// Handed over with messages outstanding.
        private(set) var handed = 0

        var held: Int { self.entries.count - self.head }

        mutating func append(_ entry: Entry) { self.entries.append(entry) }

        /// Marks the next entry handed over; nil when all are.
        mutating func handOver() -> Entry? {
            guard self.next < self.entries.count else { return nil }
            self.entries[self.next].sent = true
            self.entries[self.next].outstanding = self.entries[self.next].updatesState ? 2 : 1
            self.handed += 1
            self.next += 1
            return self.entries[self.next - 1]
        }

        /// A state update of the reading at `cursor` is no longer sent, unless handed over already.
        mutating func dropStateUpdate(of cursor: Int64) {
            guard let index = self.find(cursor), !self.entries[index].sent else { return }
            self.entries[index].updatesState = false
        }

        /// Counts the PUBACKs of `tokens`, then drops the delivered prefix, moving `state` over it;
        /// returns its length.
        mutating func acknowledge(_ tokens: [Int64], into state: inout ForwardState) -> Int {
            for token in tokens {
                guard let index = self.find(token >> 1), self.entries[index].outstanding > 0 else { continue }
                self.entries[index].outstanding -= 1
                if self.entries[index].outstanding == 0 { self.handed -= 1 }
            }
            var done = 0
            while self.head + done < self.entries.count, self.entries[self.head + done].sent,
                self.entries[self.head + done].outstanding == 0
            {
                let entry = self.entries[self.head + done]
                state.cursor = entry.cursor
                if entry.updatesState { state.newest[entry.meter] = max(state.newest[entry.meter] ?? .min, entry.millis) }
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

    private enum Link: Sendable {
        case down
        case up(session: Int)
    }

    private enum Save: Sendable {
        case idle
        /// A save of this many acknowledged readings runs.
        case running(count: Int)
    }

    let limits: Limits
    /// What a save writes: the highest contiguously acknowledged cursor, and each meter's newest
    /// measured time acknowledged on its state topic.
    private(set) var acknowledged: ForwardState
    private(set) var outbox = Outbox()
    private var link = Link.down
    /// Each meter's newest measured time handed to its state topic or queued for it.
    private var newest: [String: Int64]
    /// Each meter's queued state update.
    private var stateCursor: [String: Int64] = [:]
    private var meters: [String: Wire.MeterIdentity?] = [:]
    /// Acknowledged readings not in a save yet.
    private var unsaved = 0
    private var save = Save.idle
    /// When the last save started.
    private var lastSave: Int64
    private var timerArmed = false
    private var stopped = false

    /// Starts from the state saved last time, at `now` (monotonic milliseconds).
    init(saved: ForwardState, limits: Limits, now: Int64) {
        self.limits = limits
        self.acknowledged = saved
        self.newest = saved.newest
        self.lastSave = now
    }

    /// The saved position is in sugard's database `id`, reported for the first time (a position
    /// saved before identities adopts it; nothing starts over). The driver checks identities.
    mutating func adopt(databaseId id: String) { self.acknowledged.databaseId = id }

    /// The machine for the next database, made by the driver when sugard's database changed
    /// (recreated, restored) after the feed saw everything of the old one delivered: it starts from
    /// `state` (a position in the new database) with nothing held, keeping the connection, the
    /// meters known, the running save and the armed timer (their events still come), so nothing is
    /// published again and one save at a time still holds.
    func startingOver(from state: ForwardState, now: Int64) -> DeliveryStateMachine {
        var next = DeliveryStateMachine(saved: state, limits: self.limits, now: now)
        next.link = self.link
        next.meters = self.meters
        next.save = self.save
        next.lastSave = self.lastSave
        next.timerArmed = self.timerArmed
        next.stopped = self.stopped
        return next
    }

    /// Readings held (received, not delivered).
    var held: Int { self.outbox.held }

    var isConnected: Bool {
        if case .up = self.link { true } else { false }
    }

    /// Acknowledged readings not durably saved (in a running save, or waiting for one).
    var unsavedCount: Int { self.unsaved + self.saving }

    private var saving: Int {
        if case .running(let count) = self.save { count } else { 0 }
    }

    /// Takes `event` at `now` (monotonic milliseconds); returns what to do, in order.
    mutating func handle(_ event: Event, at now: Int64) -> [Action] {
        guard !self.stopped else { return [] }
        var actions: [Action] = []
        switch event {
        case .readings(let list):
            for (cursor, reading) in list { self.queue(cursor, reading) }
            self.handOver(&actions)
        case .meters(let known):
            for (meter, identity) in known where self.meters[meter] != identity {
                let isNew = self.meters[meter] == nil
                self.meters.updateValue(identity, forKey: meter)
                if case .up(let session) = self.link, isNew || identity != nil {
                    self.discovery(meter, session, &actions)
                }
            }
        case .connected(let session):
            self.link = .up(session: session)
            actions.append(.publish(.online, session: session))
            for meter in self.meters.keys.sorted() { self.discovery(meter, session, &actions) }
            self.handOver(&actions)
        case .disconnected:
            self.link = .down
            self.outbox.rewind()
        case .acknowledged(let tokens, let session):
            guard case .up(let current) = self.link, current == session else { break }
            let done = self.outbox.acknowledge(tokens, into: &self.acknowledged)
            if done > 0 {
                self.unsaved += done
                actions.append(.releaseFeed(done))
                actions.append(.delivered(count: done, cursor: self.acknowledged.cursor, pending: self.outbox.held))
                self.startSave(force: false, now, &actions)
            }
            self.handOver(&actions)
        case .homeAssistantOnline:
            guard case .up(let session) = self.link else { break }
            for meter in self.meters.keys.sorted() { self.discovery(meter, session, &actions) }
        case .timerFired:
            self.timerArmed = false
            self.startSave(force: true, now, &actions)
        case .saveCompleted:
            self.save = .idle
            self.startSave(force: false, now, &actions)
            self.handOver(&actions)
        case .saveFailed:
            // Tried again after a pause (the readings wait for it), not at once.
            self.unsaved += self.saving
            self.save = .idle
            self.armTimer(self.limits.saveRetryMillis, &actions)
            self.handOver(&actions)
        case .stop:
            self.stopped = true
            actions.append(.finish(save: self.unsavedCount > 0 ? self.acknowledged : nil))
        }
        return actions
    }

    private mutating func queue(_ cursor: Int64, _ reading: ForwardedReading) {
        let meter = reading.meter
        let millis = reading.epochMillis
        let updatesState = millis > (self.newest[meter] ?? .min)
        if updatesState {
            self.newest[meter] = millis
            // The retained state only needs the newest: an older state update still waiting to
            // be sent is dropped.
            if let previous = self.stateCursor[meter] { self.outbox.dropStateUpdate(of: previous) }
            self.stateCursor[meter] = cursor
        }
        self.outbox.append(Entry(cursor: cursor, meter: meter, millis: millis, payload: reading.payload, updatesState: updatesState))
    }

    /// Hands readings over while connected and within the bound of readings not saved.
    private mutating func handOver(_ actions: inout [Action]) {
        guard case .up(let session) = self.link else { return }
        let bound = self.limits.maxInFlight + self.limits.maxUnsaved
        while self.outbox.handed + self.unsaved + self.saving < bound, let entry = self.outbox.handOver() {
            actions.append(.publish(.reading(cursor: entry.cursor, meter: entry.meter, payload: entry.payload), session: session))
            if entry.updatesState {
                actions.append(.publish(.state(cursor: entry.cursor, meter: entry.meter, payload: entry.payload), session: session))
            }
        }
    }

    private func discovery(_ meter: String, _ session: Int, _ actions: inout [Action]) {
        guard self.limits.discovery else { return }
        actions.append(.publish(.discovery(meter: meter, identity: self.meters[meter] ?? nil), session: session))
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
