import Locking
import MQTT
import SugarWire
import Testing

@testable import SugarForward

extension DeliveryStateMachine {
    /// An event at `now`, the wall clock at `now` too (the tests of health pass their own).
    mutating func handle(_ event: Event, at now: Int64) -> [Action] { self.handle(event, at: now, wallClock: now) }
}

/// ``DeliveryStateMachine`` per transition, with no I/O: events in, actions out.
@Suite struct DeliveryStateMachineTests {
    typealias Machine = DeliveryStateMachine
    typealias Action = DeliveryStateMachine.Action

    static let meterA = "60:77:71:8A:0B:01"
    static let meterB = "60:77:71:8A:0B:02"

    /// Readings `cursors`, each of `meter` measured at `1000 * cursor` ms (each its meter's newest).
    static func readings(_ cursors: ClosedRange<Int64>, meter: String = Self.meterA) -> Machine.Event {
        .readings(cursors.map { ($0, Self.reading($0, meter: meter)) })
    }

    static func reading(
        _ cursor: Int64, meter: String = Self.meterA, millis: Int64? = nil, kind: Wire.ReadingKind = .glucose, mgdL: Double? = 100,
        person: String? = nil
    ) -> ForwardedReading {
        ForwardedReading(
            meter: meter, epochMillis: millis ?? 1000 * cursor, payload: Array("{\"id\":\(cursor)}".utf8), kind: kind, mgdL: mgdL,
            person: person)
    }

    static func topics(discovery: Bool) -> ForwardTopics {
        var config = ForwardConfig(gatewayID: "gw", socketPath: "/tmp/s", stateDirectory: "/tmp")
        config.homeAssistantDiscovery = discovery
        return ForwardTopics(config: config)
    }

    static func machine(
        inFlight: Int = 4, unsaved: Int? = nil, discovery: Bool = false, settleMillis: Int64 = 1500, saved: ForwardState = ForwardState()
    ) -> Machine {
        var limits = Machine.Limits(maxInFlight: inFlight, maxUnsaved: unsaved)
        limits.settleMillis = settleMillis
        return Machine(saved: saved, limits: limits, topics: Self.topics(discovery: discovery), now: 0)
    }

    /// The tokens of reading `cursor`'s reading message (its first) and of its second message
    /// (without discovery: its state message).
    static func r(_ cursor: Int64) -> Int64 { Machine.token(cursor: cursor, index: 0) }
    static func s(_ cursor: Int64) -> Int64 { Machine.token(cursor: cursor, index: 1) }

    /// The actions but the gateway's health message (GatewayHealthTopicTests has those).
    static func noGatewayHealth(_ actions: [Action]) -> [Action] {
        actions.filter { if case .publish(.gatewayHealth, _) = $0 { false } else { true } }
    }

    /// The cursors of the reading messages published, in order.
    static func published(_ actions: [Action]) -> [Int64] {
        actions.compactMap {
            if case .publish(.reading(let cursor, 0, _), _) = $0 { cursor } else { nil }
        }
    }

    /// The MQTT messages of readings published, in order.
    static func messages(_ actions: [Action]) -> [MQTTMessage] {
        actions.compactMap {
            if case .publish(.reading(_, _, let message), _) = $0 { message } else { nil }
        }
    }

    /// Whether `message` goes to a meter's state topic.
    static func isMeterState(_ message: MQTTMessage) -> Bool { message.topic.hasSuffix("/state") && !message.topic.contains("/person/") }

    /// The cursors of the meters' state messages published, in order.
    static func stateUpdates(_ actions: [Action]) -> [Int64] {
        actions.compactMap {
            if case .publish(.reading(let cursor, _, let message), _) = $0, Self.isMeterState(message) { cursor } else { nil }
        }
    }

    static func saves(_ actions: [Action]) -> [ForwardState] {
        actions.compactMap {
            if case .saveCursor(let state) = $0 { state } else { nil }
        }
    }

    /// Every token the actions wait for (reading and state messages), in order.
    static func tokens(_ actions: [Action]) -> [Int64] {
        actions.compactMap {
            if case .publish(let message, _) = $0, message.token >= 0 { message.token } else { nil }
        }
    }

    @Test func readingsWaitForTheBrokerThenGoOutInOrderWithTheirTokens() {
        var machine = Self.machine(inFlight: 8)
        #expect(machine.handle(Self.readings(1...3), at: 1).isEmpty, "nothing is published before a connection")
        #expect(machine.held == 3)
        let actions = machine.handle(.connected(session: 7), at: 2)
        let payload = Array("{\"id\":3}".utf8)
        #expect(actions.first == .publish(.online, session: 7))
        #expect(Self.published(actions) == [1, 2, 3])
        // Readings 1 and 2's state updates were dropped for reading 3's, which goes right after
        // its reading message, on the same session.
        let state = MQTTMessage(topic: Self.topics(discovery: false).state(Self.meterA), payload: payload, qos: 1, retain: true)
        #expect(actions.last == .publish(.reading(cursor: 3, index: 1, state), session: 7))
        #expect(Self.tokens(actions) == [Self.r(1), Self.r(2), Self.r(3), Self.s(3)])
        // Later readings go out at once.
        let more = machine.handle(Self.readings(4...4), at: 3)
        #expect(Self.published(more) == [4] && Self.stateUpdates(more) == [4])
    }

    @Test func aStateUpdateHandedOverIsNotDropped() {
        var machine = Self.machine(inFlight: 8)
        _ = machine.handle(.connected(session: 1), at: 0)
        let first = machine.handle(Self.readings(1...1), at: 1)
        #expect(Self.stateUpdates(first) == [1])
        // An older measured time does not update the retained state; a newer one does.
        let older = machine.handle(.readings([(Int64(2), Self.reading(2, millis: 500))]), at: 2)
        #expect(Self.published(older) == [2] && Self.stateUpdates(older).isEmpty)
        let other = machine.handle(Self.readings(3...3, meter: Self.meterB), at: 3)
        #expect(Self.stateUpdates(other) == [3], "each meter has its own newest")
        // A newer reading does not take back reading 1's state message, handed over already:
        // reading 1 is delivered only with both PUBACKs.
        #expect(Self.stateUpdates(machine.handle(Self.readings(4...4), at: 4)) == [4])
        #expect(machine.handle(.acknowledged(tokens: [Self.r(1)], session: 1), at: 5).isEmpty)
        #expect(machine.handle(.acknowledged(tokens: [Self.s(1)], session: 1), at: 6).contains(.delivered(count: 1, cursor: 1, pending: 3)))
        // A restart knows each meter's newest from the saved state.
        var restarted = Self.machine(saved: ForwardState(cursor: 3, newest: [Self.meterA: 1000]))
        _ = restarted.handle(.connected(session: 1), at: 0)
        let again = restarted.handle(.readings([(Int64(4), Self.reading(4, millis: 1000)), (Int64(5), Self.reading(5, millis: 1001))]), at: 1)
        #expect(Self.published(again) == [4, 5] && Self.stateUpdates(again) == [5])
    }

    @Test func aFullWindowStopsHandingOverUntilAcknowledgedReadingsAreSaved() {
        // 2 in flight + 4 unsaved: at most 6 readings handed over and not saved.
        var machine = Self.machine(inFlight: 2, unsaved: 4)
        _ = machine.handle(.connected(session: 1), at: 0)
        let first = machine.handle(Self.readings(1...10), at: 0)
        #expect(Self.published(first) == [1, 2, 3, 4, 5, 6])
        // A PUBACK delivers reading 1 but frees no room while it is unsaved; the feed gets its
        // slot back at once.
        let acked = machine.handle(.acknowledged(tokens: [Self.r(1)], session: 1), at: 1)
        #expect(acked.contains(.releaseFeed(1)))
        #expect(acked.contains(.delivered(count: 1, cursor: 1, pending: 9)))
        #expect(Self.published(acked).isEmpty)
        #expect(acked.contains(.startTimer(millis: 25)))
        // The save starts when the timer fires; while it runs its readings still count.
        let timer = machine.handle(.timerFired, at: 25)
        // The saved newest: of each reading that moved its meter's level when it arrived (its
        // state update may have given way to a newer one's).
        #expect(Self.saves(timer) == [ForwardState(cursor: 1, newest: [Self.meterA: 1000])])
        #expect(Self.published(timer).isEmpty)
        let during = machine.handle(.acknowledged(tokens: [Self.r(2)], session: 1), at: 26)
        #expect(during.contains(.delivered(count: 1, cursor: 2, pending: 8)) && Self.published(during).isEmpty)
        // Saved: room for one more (reading 2 waits for the next save).
        let saved = machine.handle(.saveCompleted, at: 30)
        #expect(Self.published(saved) == [7])
        #expect(saved.contains(.startTimer(millis: 25)))
    }

    @Test func acknowledgementsMoveTheCursorOnlyOverAContiguousPrefix() {
        var machine = Self.machine(inFlight: 8)
        _ = machine.handle(.connected(session: 1), at: 0)
        // One reply each, so reading 1's state message goes out before reading 3 arrives.
        _ = machine.handle(Self.readings(1...1), at: 0)
        _ = machine.handle(Self.readings(2...2, meter: Self.meterB), at: 0)
        _ = machine.handle(Self.readings(3...3), at: 0)
        // Readings 2 and 3 (reading and state messages) are acknowledged, 1 only in part.
        let gap = machine.handle(.acknowledged(tokens: [Self.r(2), Self.s(2), Self.r(3), Self.s(3), Self.r(1)], session: 1), at: 100)
        #expect(gap.isEmpty, "nothing is delivered past reading 1's unacknowledged state message: \(gap)")
        #expect(machine.acknowledged.cursor == 0)
        let rest = machine.handle(.acknowledged(tokens: [Self.s(1)], session: 1), at: 101)
        #expect(rest.contains(.releaseFeed(3)))
        #expect(rest.contains(.delivered(count: 3, cursor: 3, pending: 0)))
        // 100 ms after the start: the save goes at once, with each meter's newest state.
        #expect(Self.saves(rest) == [ForwardState(cursor: 3, newest: [Self.meterA: 3000, Self.meterB: 2000])])
        // Acknowledgements of unknown or already counted tokens change nothing.
        #expect(machine.handle(.acknowledged(tokens: [Self.r(1), Self.s(1), Self.r(20)], session: 1), at: 102).isEmpty)
    }

    @Test func aSaveStartsAfterTheDelayOrAtHalfTheUnsavedBound() {
        var machine = Self.machine(inFlight: 4, unsaved: 16)
        _ = machine.handle(.connected(session: 1), at: 0)
        _ = machine.handle(Self.readings(1...20, meter: Self.meterB), at: 0)
        // Within 25 ms of the last save's start: a timer, armed once.
        let first = machine.handle(.acknowledged(tokens: [Self.r(1)], session: 1), at: 5)
        #expect(first.contains(.startTimer(millis: 25)) && Self.saves(first).isEmpty)
        let second = machine.handle(.acknowledged(tokens: [Self.r(2)], session: 1), at: 10)
        #expect(!second.contains(.startTimer(millis: 25)) && Self.saves(second).isEmpty)
        // Half the unsaved bound (8) acknowledged and unsaved: at once, before the timer.
        let half = machine.handle(.acknowledged(tokens: [Self.r(3), Self.r(4), Self.r(5), Self.r(6), Self.r(7), Self.r(8)], session: 1), at: 12)
        #expect(Self.saves(half).map(\.cursor) == [8])
        // The timer fires while that save runs: no second save at the same time.
        _ = machine.handle(.acknowledged(tokens: [Self.r(9)], session: 1), at: 20)
        #expect(Self.saves(machine.handle(.timerFired, at: 25)).isEmpty)
        // When it ends, the next one waits for the delay again (the last started at 12).
        let done = machine.handle(.saveCompleted, at: 30)
        #expect(Self.saves(done).isEmpty && done.contains(.startTimer(millis: 25)))
        #expect(Self.saves(machine.handle(.timerFired, at: 55)).map(\.cursor) == [9])
        #expect(machine.handle(.saveCompleted, at: 60).filter { if case .publish = $0 { false } else { true } }.isEmpty)
        // Later than the delay after the last save: at once.
        let late = machine.handle(.acknowledged(tokens: [Self.r(10)], session: 1), at: 200)
        #expect(Self.saves(late).map(\.cursor) == [10])
    }

    /// The identity is the driver's: adopting one only names the saved position's database; a
    /// start-over is a machine from position 0 of the new database that keeps the connection
    /// (nothing published again, no reconnect), the meters and the running save.
    @Test func aStartOverGoesOnFromPositionZeroOnTheSameConnection() {
        var machine = Self.machine(inFlight: 8, discovery: true, settleMillis: 0, saved: ForwardState(cursor: 0, newest: [:]))
        _ = machine.handle(.meters([Self.meterA: nil]), at: 0)
        _ = machine.handle(.connected(session: 3), at: 0)
        machine.adopt(databaseId: "old")
        let sent = machine.handle(Self.readings(41...42), at: 1)
        #expect(Self.published(sent) == [41, 42])
        let acknowledged = machine.handle(.acknowledged(tokens: Self.tokens(sent), session: 3), at: 100)
        #expect(Self.saves(acknowledged).map(\.cursor) == [42])
        #expect(Self.saves(acknowledged).first?.databaseId == "old")
        #expect(machine.held == 0)

        var state = machine.acknowledged
        state.databaseId = "new"
        state.cursor = 0
        var next = machine.startingOver(from: state, now: 101)
        #expect(next.isConnected && next.held == 0 && next.acknowledged.cursor == 0)
        // The new database's readings go out at once on session 3; no online or discovery again.
        let actions = next.handle(Self.readings(1...2), at: 102)
        #expect(actions.allSatisfy { if case .publish(.reading, 3) = $0 { true } else { false } })
        #expect(Self.published(actions) == [1, 2])
        #expect(Self.stateUpdates(actions).isEmpty, "older than the newest already on the state topic")
        // The old machine's save still runs: the new one waits for it before saving.
        let ack = next.handle(.acknowledged(tokens: Self.tokens(actions), session: 3), at: 300)
        #expect(Self.saves(ack).isEmpty)
        let saved = Self.saves(next.handle(.saveCompleted, at: 301))
        #expect(saved.map(\.cursor) == [2] && saved.first?.databaseId == "new")
        #expect(saved.first?.newest == [Self.meterA: 42_000])
    }

    @Test func aFailedSaveIsTriedAgainAfterAPauseWithTheNewerState() {
        var machine = Self.machine(inFlight: 2, unsaved: 8)
        _ = machine.handle(.connected(session: 1), at: 0)
        _ = machine.handle(Self.readings(1...6), at: 0)
        #expect(Self.saves(machine.handle(.acknowledged(tokens: [Self.r(1)], session: 1), at: 100)).map(\.cursor) == [1])
        let failed = machine.handle(.saveFailed, at: 110)
        #expect(failed.contains(.startTimer(millis: 1000)) && Self.saves(failed).isEmpty)
        #expect(machine.unsavedCount == 1)
        // A reading acknowledged within the delay waits for the retry, which saves both.
        let within = machine.handle(.acknowledged(tokens: [Self.r(2)], session: 1), at: 120)
        #expect(within.filter { if case .delivered = $0 { false } else { true } } == [.releaseFeed(1)])
        let retry = machine.handle(.timerFired, at: 1110)
        #expect(Self.saves(retry).map(\.cursor) == [2])
        #expect(machine.unsavedCount == 2)
        _ = machine.handle(.saveCompleted, at: 1120)
        #expect(machine.unsavedCount == 0)
    }

    @Test func aLostConnectionSendsEverythingUndeliveredAgainInOrder() {
        var machine = Self.machine(inFlight: 8, discovery: true, settleMillis: 0)
        _ = machine.handle(.meters([Self.meterA: nil]), at: 0)
        _ = machine.handle(.connected(session: 1), at: 0)
        let first = machine.handle(Self.readings(1...5), at: 0)
        // Each reading's messages (reading, event, low, high; reading 5 also the state).
        func tokens(_ actions: [Action], _ cursors: Int64...) -> [Int64] {
            Self.tokens(actions).filter { cursors.contains(Machine.cursor(ofToken: $0)) }
        }
        #expect(tokens(first, 1).count == 4 && tokens(first, 5).count == 5)
        // Reading 1 delivered; 3 acknowledged out of order, behind 2.
        _ = machine.handle(.acknowledged(tokens: tokens(first, 1, 3), session: 1), at: 100)
        #expect(machine.handle(.disconnected, at: 101).isEmpty)
        #expect(!machine.isConnected)
        // PUBACKs of the old connection and readings while down: nothing goes out.
        #expect(machine.handle(.acknowledged(tokens: tokens(first, 2), session: 1), at: 102).isEmpty)
        #expect(machine.handle(Self.readings(6...6), at: 103).isEmpty)
        let again = machine.handle(.connected(session: 2), at: 104)
        #expect(
            Array(Self.noGatewayHealth(again).prefix(3)) == [
                .publish(.online, session: 2), .publish(.gatewayDiscovery, session: 2),
                .publish(.discovery(meter: Self.meterA, identity: nil), session: 2),
            ])
        #expect(Self.published(again) == [2, 3, 4, 5, 6])
        #expect(again.allSatisfy { if case .publish(_, let session) = $0 { session == 2 } else { true } })
        // Only the new connection's PUBACKs count.
        #expect(machine.handle(.acknowledged(tokens: tokens(again, 2), session: 1), at: 105).isEmpty)
        let current = machine.handle(.acknowledged(tokens: tokens(again, 2, 3), session: 2), at: 106)
        #expect(current.contains(.delivered(count: 2, cursor: 3, pending: 3)))
    }

    @Test func discoveryGoesOutForNewMetersAndWhenHomeAssistantComesOnline() {
        let identity = Wire.MeterIdentity(
            id: Self.meterB, name: nil, manufacturer: "Roche", model: "Guide", serialNumber: "42", firmware: nil, displayName: "Guide")
        var machine = Self.machine(discovery: true)
        #expect(machine.handle(.meters([Self.meterB: nil]), at: 0).isEmpty, "not connected")
        let connected = Self.noGatewayHealth(machine.handle(.connected(session: 1), at: 0))
        #expect(
            connected == [
                .publish(.online, session: 1), .publish(.gatewayDiscovery, session: 1),
                .publish(.discovery(meter: Self.meterB, identity: nil), session: 1), .startSettleTimer(millis: 1500),
            ])
        let known = machine.handle(.meters([Self.meterA: nil, Self.meterB: identity]), at: 1)
        #expect(known.count == 3)
        #expect(known.contains(.startSettleTimer(millis: 1500)), "meter A's first config")
        #expect(known.contains(.publish(.discovery(meter: Self.meterB, identity: identity), session: 1)))
        #expect(known.contains(.publish(.discovery(meter: Self.meterA, identity: nil), session: 1)))
        #expect(machine.handle(.meters([Self.meterA: nil, Self.meterB: identity]), at: 2).isEmpty, "nothing changed")
        #expect(
            machine.handle(.homeAssistantOnline, at: 3) == [
                .publish(.gatewayDiscovery, session: 1),
                .publish(.discovery(meter: Self.meterA, identity: nil), session: 1),
                .publish(.discovery(meter: Self.meterB, identity: identity), session: 1),
            ])
        var without = Self.machine(discovery: false)
        _ = without.handle(.meters([Self.meterA: identity]), at: 0)
        #expect(Self.noGatewayHealth(without.handle(.connected(session: 1), at: 0)) == [.publish(.online, session: 1)])
        #expect(without.handle(.homeAssistantOnline, at: 1).isEmpty)
    }

    @Test func stopSavesWhatIsAcknowledgedAndUnsaved() {
        var idle = Self.machine()
        #expect(idle.handle(.stop, at: 0) == [.finish(save: nil)])
        #expect(idle.handle(Self.readings(1...1), at: 1).isEmpty, "a stopped machine does nothing")

        var waiting = Self.machine()
        _ = waiting.handle(.connected(session: 1), at: 0)
        _ = waiting.handle(Self.readings(1...3), at: 0)
        _ = waiting.handle(.acknowledged(tokens: [Self.r(1), Self.r(2)], session: 1), at: 1)
        #expect(waiting.handle(.stop, at: 2) == [.finish(save: ForwardState(cursor: 2, newest: [Self.meterA: 2000]))])

        // A save running at the stop may not have reached the disk: saved again.
        var running = Self.machine()
        _ = running.handle(.connected(session: 1), at: 0)
        _ = running.handle(Self.readings(1...1), at: 0)
        #expect(Self.saves(running.handle(.acknowledged(tokens: [Self.r(1), Self.s(1)], session: 1), at: 100)).count == 1)
        #expect(running.handle(.stop, at: 101) == [.finish(save: ForwardState(cursor: 1, newest: [Self.meterA: 1000]))])
        #expect(running.handle(.saveCompleted, at: 102).isEmpty)
    }

    /// A long run against a modelled broker and disk (seeded): PUBACKs come in batches in publish
    /// order (as MQTT requires for QoS 1), connections drop, saves take a while and some fail.
    /// Every reading is delivered in order; the saved cursor never passes an unacknowledged
    /// reading; and readings published and not durably saved (those that could arrive twice
    /// after a crash) never exceed `maxInFlight + maxUnsaved`.
    @Test(arguments: [UInt64(1), 2, 3, 0x5EED])
    func duplicatesStayWithinTheBoundAndNothingIsLost(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        let total: Int64 = 3000
        let limits = Machine.Limits(maxInFlight: 16, maxUnsaved: 64)
        var machine = Machine(saved: ForwardState(), limits: limits, topics: Self.topics(discovery: false), now: 0)
        var now: Int64 = 0
        var session = 0
        var fed: Int64 = 0
        var unacknowledged: [Int64] = []  // tokens at the broker, in publish order
        var acknowledgedTokens: Set<Int64> = []
        var published: Int64 = 0  // the highest reading cursor published (they go out in order)
        var durable: Int64 = 0
        var pendingSave: ForwardState?
        var saveDone: Int64 = 0
        var timerAt: Int64?
        var lastSaved: Int64 = 0
        var delivered: Int64 = 0
        var stateOrder: [Int64] = []

        func run(_ event: Machine.Event) {
            for action in machine.handle(event, at: now) {
                switch action {
                case .publish(let message, let s):
                    #expect(s == session)
                    if message.token >= 0 { unacknowledged.append(message.token) }
                    if case .reading(let cursor, let index, let message) = message {
                        if index == 0 {
                            #expect(cursor <= published + 1, "in order")
                            published = max(published, cursor)
                        }
                        if Self.isMeterState(message) { stateOrder.append(cursor) }
                    }
                case .saveCursor(let state):
                    #expect(pendingSave == nil, "one save at a time")
                    #expect(state.cursor >= lastSaved)
                    lastSaved = state.cursor
                    pendingSave = state
                    saveDone = now + Int64(random.next(upTo: 40))
                case .startTimer(let millis):
                    #expect(timerAt == nil, "one timer at a time")
                    timerAt = now + millis
                case .delivered(let count, let cursor, _):
                    #expect(cursor == delivered + Int64(count), "delivered in order, contiguously")
                    delivered = cursor
                    // Nothing at or below the cursor is still waiting for a PUBACK.
                    for cursor in (cursor - Int64(count) + 1)...cursor {
                        #expect(acknowledgedTokens.contains(Self.r(cursor)))
                    }
                case .releaseFeed, .finish, .startSettleTimer, .alertsDelivered:
                    break
                }
            }
            let exposed = published - durable
            #expect(exposed <= Int64(limits.maxInFlight + limits.maxUnsaved), "\(exposed) readings could arrive twice")
        }

        while delivered < total, now < 1_000_000 {
            now += 1
            switch random.next(upTo: 100) {
            case 0..<20 where fed < total:
                let count = Int64(random.next(upTo: 128)) + 1
                let upTo = min(total, fed + count)
                run(.readings(((fed + 1)...upTo).map { ($0, Self.reading($0, meter: $0 % 3 == 0 ? Self.meterB : Self.meterA)) }))
                fed = upTo
            case 20..<22 where session > 0:
                unacknowledged.removeAll()
                run(.disconnected)
                session = -session
            case 22..<30 where session <= 0:
                session = -session + 1
                run(.connected(session: session))
            case 30..<70 where session > 0 && !unacknowledged.isEmpty:
                let count = min(unacknowledged.count, random.next(upTo: 24) + 1)
                let tokens = Array(unacknowledged.prefix(count))
                unacknowledged.removeFirst(count)
                acknowledgedTokens.formUnion(tokens)
                run(.acknowledged(tokens: tokens, session: session))
            default:
                break
            }
            if let state = pendingSave, now >= saveDone {
                pendingSave = nil
                if random.next(upTo: 10) == 0 {
                    run(.saveFailed)
                } else {
                    durable = state.cursor
                    run(.saveCompleted)
                }
            }
            if let at = timerAt, now >= at {
                timerAt = nil
                run(.timerFired)
            }
        }
        #expect(delivered == total, "delivered \(delivered) of \(total) by \(now) ms")
        #expect(machine.held == 0)
        let stop = machine.handle(.stop, at: now)
        if case .finish(let state?) = stop.first {
            #expect(state.cursor == total)
        } else {
            #expect(durable == total, "nothing left to save at the stop: \(stop)")
        }
        // The retained state topics saw each meter's newest last.
        #expect(stateOrder.last == total || stateOrder.last == total - 1)
    }
}

/// splitmix64: a repeatable sequence for the seeded runs.
struct SeededRandom {
    var state: UInt64

    init(seed: UInt64) { self.state = seed }

    mutating func next(upTo bound: Int) -> Int {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Int(z % UInt64(bound))
    }
}

/// The feed's ``Window``, the other half of the flow control: the machine gives slots back
/// (``DeliveryStateMachine/Action/releaseFeed(_:)``), the feed's reader thread pauses itself when
/// a reply fills the window and goes on once at most half of it is used by what came before.
@Suite struct FeedWindowTests {
    /// Admits a reply of `count` on a thread of its own; the flag turns true when it returns.
    static func admit(_ window: Window, _ count: Int, connection: Int) -> Lock<Bool> {
        let returned = Lock(false)
        let started = startDetachedThread {
            window.admit(count, connection: connection)
            returned.withLock { $0 = true }
        }
        precondition(started == 0, "no thread")
        return returned
    }

    @Test func aFullWindowPausesTheReaderUntilHalfIsFree() async {
        let window = Window(limit: 8)
        let connection = window.beginConnection()
        // A reply of 6 fits; the feed takes it.
        let first = Self.admit(window, 6, connection: connection)
        #expect(await eventually(within: 5) { first.withLock { $0 } })
        window.take(6, of: 6)
        // The next reply of 4 fills the window: its reader waits.
        let second = Self.admit(window, 4, connection: connection)
        try? await Task.sleep(for: .milliseconds(200))
        #expect(!second.withLock { $0 }, "the reader went on with the window full")
        // One slot back: 5 of the 6 before it still used, more than half of 8.
        window.release(1)
        try? await Task.sleep(for: .milliseconds(200))
        #expect(!second.withLock { $0 }, "the reader went on with more than half the window used")
        // Half: it goes on.
        window.release(1)
        #expect(await eventually(within: 5) { second.withLock { $0 } })
    }

    @Test func aReaderOfAnEndedConnectionNeverWaits() async {
        let window = Window(limit: 4)
        let connection = window.beginConnection()
        let first = Self.admit(window, 3, connection: connection)
        #expect(await eventually(within: 5) { first.withLock { $0 } })
        window.take(3, of: 3)
        let blocked = Self.admit(window, 2, connection: connection)
        try? await Task.sleep(for: .milliseconds(200))
        #expect(!blocked.withLock { $0 })
        window.endConnection()
        #expect(await eventually(within: 5) { blocked.withLock { $0 } })
        // A late reader of the old connection neither waits nor counts.
        let late = Self.admit(window, 100, connection: connection)
        #expect(await eventually(within: 5) { late.withLock { $0 } })
    }
}

/// h4's meaning on the wire, in the machine: a reading's several messages, the settle after a
/// first discovery config, the health entities and the people's newest.
extension DeliveryStateMachineTests {
    static let mia = "Mia"

    /// Each publish's topic and payload (as text), in order.
    static func sent(_ actions: [Action]) -> [String] {
        Self.messages(actions).map { "\($0.topic) \(String(decoding: $0.payload, as: UTF8.self))" }
    }

    @Test func aReadingPublishesEachOfItsMessagesAndIsDeliveredWithTheirLastPuback() {
        var machine = Self.machine(inFlight: 8, discovery: true, settleMillis: 0)
        let topics = Self.topics(discovery: true)
        let meter = topics.meterTopics(Self.meterA)
        let person = topics.personTopics(Self.mia)
        _ = machine.handle(.connected(session: 1), at: 0)
        // A low glucose value of a meter assigned to Mia: her discovery goes out first.
        let actions = machine.handle(.readings([(Int64(1), Self.reading(1, mgdL: 60, person: Self.mia))]), at: 1)
        #expect(actions.first == .publish(.personDiscovery(person: Self.mia), session: 1))
        let expected = [
            MQTTMessage(topic: meter.reading, payload: Array(#"{"id":1}"#.utf8), qos: 1, retain: false),
            MQTTMessage(topic: meter.state, payload: Array(#"{"id":1}"#.utf8), qos: 1, retain: true),
            MQTTMessage(topic: meter.event, payload: Array(#"{"event_type":"glucose","id":1}"#.utf8), qos: 1, retain: false),
            MQTTMessage(topic: meter.low, payload: Array("ON".utf8), qos: 1, retain: true),
            MQTTMessage(topic: meter.high, payload: Array("OFF".utf8), qos: 1, retain: true),
            MQTTMessage(topic: person.state, payload: Array(#"{"id":1}"#.utf8), qos: 1, retain: true),
            MQTTMessage(topic: person.event, payload: Array(#"{"event_type":"glucose","id":1}"#.utf8), qos: 1, retain: false),
            MQTTMessage(topic: person.low, payload: Array("ON".utf8), qos: 1, retain: true),
            MQTTMessage(topic: person.high, payload: Array("OFF".utf8), qos: 1, retain: true),
        ]
        #expect(Self.messages(actions) == expected)
        // One token per message: the cursor and the message's index, defined once in the machine.
        let tokens = (0..<expected.count).map { Machine.token(cursor: 1, index: $0) }
        #expect(Self.tokens(actions) == tokens)
        #expect(tokens.allSatisfy { Machine.cursor(ofToken: $0) == 1 })
        // All but one acknowledged: not delivered.
        #expect(machine.handle(.acknowledged(tokens: Array(tokens.dropLast()), session: 1), at: 100).isEmpty)
        let last = machine.handle(.acknowledged(tokens: [tokens.last!], session: 1), at: 101)
        #expect(last.contains(.delivered(count: 1, cursor: 1, pending: 0)))
        // The saved newest: the meter's and the person's ("person/<name>").
        #expect(Self.saves(last) == [ForwardState(cursor: 1, newest: [Self.meterA: 1000, "person/Mia": 1000])])

        // A LO moves the level (low/high) but is no glucose state; a control test moves nothing
        // and fires its event; without discovery a reading is its reading message and state.
        let lo = machine.handle(.readings([(Int64(2), Self.reading(2, kind: .lo, mgdL: nil))]), at: 200)
        #expect(
            Self.sent(lo) == [
                "\(meter.reading) {\"id\":2}", "\(meter.event) {\"event_type\":\"lo\",\"id\":2}", "\(meter.low) ON", "\(meter.high) OFF",
            ])
        let control = machine.handle(.readings([(Int64(3), Self.reading(3, kind: .controlSolution, mgdL: 300))]), at: 201)
        #expect(Self.sent(control) == ["\(meter.reading) {\"id\":3}", "\(meter.event) {\"event_type\":\"control_solution\",\"id\":3}"])
        #expect(Self.tokens(control) == [Machine.token(cursor: 3, index: 0), Machine.token(cursor: 3, index: 1)])
        var plain = Self.machine(inFlight: 8, discovery: false)
        _ = plain.handle(.connected(session: 1), at: 0)
        let high = plain.handle(.readings([(Int64(1), Self.reading(1, mgdL: 300, person: Self.mia))]), at: 1)
        #expect(Self.sent(high) == ["\(meter.reading) {\"id\":1}", "\(meter.state) {\"id\":1}"], "no entities, no person")
    }

    @Test func onlyTheStateUpdatesGiveWayToANewerReading() {
        var machine = Self.machine(inFlight: 8, discovery: true, settleMillis: 0)
        let topics = Self.topics(discovery: true)
        let meter = topics.meterTopics(Self.meterA)
        let person = topics.personTopics(Self.mia)
        // Three readings while disconnected: a high value, a LO, and an older value (measured
        // before the first).
        _ = machine.handle(
            .readings([
                (Int64(1), Self.reading(1, millis: 5000, mgdL: 300, person: Self.mia)),
                (Int64(2), Self.reading(2, millis: 6000, mgdL: 90, person: Self.mia)),
                (Int64(3), Self.reading(3, millis: 4000, mgdL: 50, person: Self.mia)),
            ]), at: 0)
        let actions = machine.handle(.connected(session: 1), at: 1)
        let sent = Self.sent(actions)
        // Reading 1 lost its state updates to reading 2 but keeps "Glucose low"/"Glucose high"
        // (decided when it arrived), the meter's and the person's.
        #expect(sent.filter { $0.hasPrefix(meter.state + " ") || $0.hasPrefix(person.state + " ") } == [
            "\(meter.state) {\"id\":2}", "\(person.state) {\"id\":2}",
        ])
        #expect(sent.filter { $0.hasPrefix(meter.high + " ") } == ["\(meter.high) ON", "\(meter.high) OFF"])
        #expect(sent.filter { $0.hasPrefix(person.high + " ") } == ["\(person.high) ON", "\(person.high) OFF"])
        // Reading 3 is older than the newest: its event only, no level.
        #expect(sent.filter { $0.contains("\"id\":3") } == ["\(meter.reading) {\"id\":3}", "\(meter.event) {\"event_type\":\"glucose\",\"id\":3}",
            "\(person.event) {\"event_type\":\"glucose\",\"id\":3}"])
        #expect(!sent.contains { $0.hasPrefix(meter.low + " ON") })
    }

    @Test func aPersonsNewestIsSavedAndSurvivesARestart() {
        // Mia's newest (from another meter) is later than meter B's newest.
        var machine = Self.machine(
            inFlight: 8, discovery: true, settleMillis: 0, saved: ForwardState(cursor: 9, newest: ["person/Mia": 8000, Self.meterA: 8000]))
        let topics = Self.topics(discovery: true)
        _ = machine.handle(.connected(session: 1), at: 0)
        let actions = machine.handle(.readings([(Int64(10), Self.reading(10, meter: Self.meterB, millis: 7000, person: Self.mia))]), at: 1)
        let sent = Self.messages(actions).map(\.topic)
        // Meter B's own entities move; Mia's do not (an older reading than her newest).
        #expect(sent.contains(topics.state(Self.meterB)) && sent.contains(topics.meterTopics(Self.meterB).low))
        #expect(!sent.contains(topics.personTopics(Self.mia).state) && !sent.contains(topics.personTopics(Self.mia).low))
        #expect(sent.contains(topics.personTopics(Self.mia).event), "every reading is an event of her person")
        let tokens = Self.tokens(actions)
        let done = machine.handle(.acknowledged(tokens: tokens, session: 1), at: 100)
        #expect(Self.saves(done) == [ForwardState(cursor: 10, newest: ["person/Mia": 8000, Self.meterA: 8000, Self.meterB: 7000])])
    }

    @Test func readingsWaitForHomeAssistantAfterAFirstDiscoveryConfig() {
        var machine = Self.machine(inFlight: 8, discovery: true)
        _ = machine.handle(.meters([Self.meterA: nil]), at: 0)
        _ = machine.handle(Self.readings(1...2), at: 0)
        let connected = machine.handle(.connected(session: 1), at: 10)
        #expect(connected.contains(.startSettleTimer(millis: 1500)))
        #expect(Self.published(connected).isEmpty, "readings wait for Home Assistant to subscribe")
        #expect(Self.published(machine.handle(Self.readings(3...3), at: 20)).isEmpty)
        // The time is in the events: a settle timer that fires early is armed again for the rest.
        #expect(machine.handle(.settled, at: 1000) == [.startSettleTimer(millis: 510)])
        #expect(Self.published(machine.handle(.settled, at: 1510)) == [1, 2, 3])
        // A new person's first config holds the readings again, theirs included.
        let mia = machine.handle(.readings([(Int64(4), Self.reading(4, person: Self.mia))]), at: 2000)
        #expect(mia == [.publish(.personDiscovery(person: Self.mia), session: 1), .startSettleTimer(millis: 1500)])
        // A known meter's config again (a reconnection, Home Assistant online) holds nothing.
        _ = machine.handle(.disconnected, at: 3600)
        let again = machine.handle(.connected(session: 2), at: 3601)
        #expect(!again.contains(.startSettleTimer(millis: 1500)))
        #expect(Self.published(again) == [1, 2, 3, 4])
        #expect(machine.handle(.homeAssistantOnline, at: 3602).allSatisfy { if case .publish = $0 { true } else { false } })
        // Without discovery nothing waits.
        var plain = Self.machine(inFlight: 8, discovery: false)
        _ = plain.handle(.meters([Self.meterA: nil]), at: 0)
        _ = plain.handle(.connected(session: 1), at: 0)
        #expect(Self.published(plain.handle(Self.readings(1...1), at: 1)) == [1])
    }

    @Test func healthGoesOutOnChangeAndAllOfItOnEachConnection() {
        var machine = Self.machine(discovery: true, settleMillis: 0)
        let topics = Self.topics(discovery: true)
        let hour: Int64 = 3_600_000
        let synced: Int64 = 1_700_000_000_000
        func health(_ actions: [Action]) -> [String] {
            actions.compactMap {
                if case .publish(.health(let m), _) = $0, m.retain { "\(m.topic) \(String(decoding: m.payload, as: UTF8.self))" } else { nil }
            }
        }
        // Not connected: nothing goes out, the value is kept.
        #expect(machine.handle(.health(GatewayHealth.with(adapterWorking: true, lastSync: [Self.meterA: synced])), at: 0, wallClock: synced).isEmpty)
        let meter = topics.meterTopics(Self.meterA)
        let connected = machine.handle(.connected(session: 1), at: 1, wallClock: synced + hour)
        let lastSynced = "\(meter.lastSynced) \(Wire.Instant(epochMillis: synced).iso)"
        #expect(health(connected) == ["\(topics.adapter) OFF", lastSynced, "\(meter.syncOverdue) OFF"])
        // The adapter goes off: only that changes.
        let off = machine.handle(.health(GatewayHealth.with(adapterWorking: false, lastSync: [Self.meterA: synced])), at: 2, wallClock: synced + hour)
        #expect(health(off) == ["\(topics.adapter) ON"])
        // Time passes: after sync_overdue_hours (24) the meter is overdue, once.
        #expect(machine.handle(.tick, at: 3, wallClock: synced + 23 * hour).isEmpty)
        #expect(health(machine.handle(.tick, at: 4, wallClock: synced + 25 * hour)) == ["\(meter.syncOverdue) ON"])
        #expect(machine.handle(.tick, at: 5, wallClock: synced + 26 * hour).isEmpty)
        // Home Assistant restarted: all of it again, after the discovery configs.
        let online = machine.handle(.homeAssistantOnline, at: 6, wallClock: synced + 26 * hour)
        #expect(online.first == .publish(.gatewayDiscovery, session: 1))
        #expect(health(online) == ["\(topics.adapter) ON", lastSynced, "\(meter.syncOverdue) ON"])
        // Without discovery there are no health entities.
        var plain = Self.machine(discovery: false)
        _ = plain.handle(.connected(session: 1), at: 0)
        // (The gateway's health message goes out all the same: GatewayHealthTopicTests.)
        #expect(health(plain.handle(.health(GatewayHealth.with(adapterWorking: false)), at: 1)).isEmpty)
        #expect(health(plain.handle(.tick, at: 2)).isEmpty)
    }
}
