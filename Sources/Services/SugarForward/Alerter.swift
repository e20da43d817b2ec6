import Glibc
import JSON
import Locking
import ProcessKit
import SugarWire
import SystemIO
import Varlink

/// `<state-dir>/alerts.json`: the alert rules' ``AlertState``, replaced atomically and durably
/// (``CursorFile/replace(_:with:)``).
struct AlertFile: Sendable {
    /// `<state-dir>/alerts.json`.
    let path: String

    /// The file in `directory`.
    init(directory: String) { self.path = directory + "/alerts.json" }

    /// The saved state; a fresh one when there is no file. Throws when it cannot be read or is not
    /// an alert state.
    func load() throws(ForwardFileError) -> AlertState {
        let bytes: [UInt8]
        do throws(FileReadError) {
            bytes = try readWholeFile(self.path)
        } catch {
            if error.code == ENOENT { return AlertState() }
            throw ForwardFileError("cannot read \(self.path): \(error)")
        }
        do {
            return try AlertState(json: try JSONValue(parsing: bytes))
        } catch {
            throw ForwardFileError("\(self.path) is damaged (not the alert state); move it away to start over")
        }
    }

    /// Replaces the file with `state` (temporary file, fsync, rename).
    func save(_ state: AlertState) throws(ForwardFileError) {
        try CursorFile.replace(self.path, with: Array((state.json.serialized() + "\n").utf8))
    }
}

/// The alert events one webhook has not had yet, and its worker waiting for more.
private struct WebhookQueue: HasWaiter {
    /// Events the webhook has not had yet, oldest first.
    var events: [LoggedAlert] = []
    /// The webhook's delivery progress as saved last.
    var saved: Int64 = 0
    /// Counts the times its retry pause was ended early (SIGHUP) or ran out.
    var wakes = 0
    /// The worker waiting for more events or for the end of its retry pause.
    var waiter: CheckedContinuation<Void, Never>?
}

/// sugard-forward's alerts: follows sugard's readings (its own feed and cursor, so alerts do not
/// depend on any sink) and health, runs ``AlertStateMachine``, saves its state in
/// `<state-dir>/alerts.json` before handing new alert events on, publishes them on MQTT through
/// the ``Forwarder`` (acknowledged, sent again after a reconnect) and delivers them to each
/// `[webhook NAME]` (``WebhookWorker``). ``run()`` owns every task it starts and cancels them
/// when it ends.
public final class Alerter: Sendable {
    /// What the run task reacts to.
    enum Event: Sendable {
        /// From the alerts' own feed.
        case feed(Feed<Wire.CompactReading>.Event)
        /// sugard's health changed.
        case health(GatewayHealth)
        /// sugard's people and their thresholds, read again.
        case people([String: AlertStateMachine.PersonLimits])
        /// The periodic look at overdue syncs and a failing gateway.
        case tick
        /// A sink has every event up to `seq`.
        case delivered(sink: String, seq: Int64)
        /// ``stop()`` was called.
        case stop
    }

    /// The alerts as `GetStatus` and `GetAlerts` show them.
    private struct View: Sendable {
        /// Active alerts, oldest first.
        var active: [Wire.ForwardAlert] = []
        /// The last 50 alert events.
        var recent: [Wire.ForwardAlert] = []
        /// The state was shown once (the first one goes to the health message even when empty).
        var shown = false
    }

    /// The forwarder's configuration.
    public let config: ForwardConfig
    /// Where it logs.
    let logger: Logger
    /// The alert rules' settings from the configuration.
    let settings: AlertStateMachine.Settings
    /// Each `[webhook NAME]` with its secret, token and status.
    let webhooks: [(config: WebhookConfig, credentials: WebhookCredentials, status: Lock<Wire.ForwardWebhook>)]
    /// Each webhook's queue, in the order of ``webhooks``.
    private let queues: [Lock<WebhookQueue>]
    /// What the status shows.
    private let view = Lock(View())
    /// Hands new events to the MQTT sink; nil without one.
    private let mqtt = Lock<(@Sendable ([LoggedAlert]) -> Void)?>(nil)
    /// Where the active alerts go when they change (the gateway's health message).
    private let activeChanged = Lock<(@Sendable ([Wire.ForwardAlert]) -> Void)?>(nil)
    /// Holds the alerts' feed back while readings wait for the rules.
    private let window = Window(limit: 1024)
    /// The run task's events.
    private let events: AsyncStream<Event>
    /// Where the events are sent.
    private let continuation: AsyncStream<Event>.Continuation
    /// How often `sync_overdue` and `gateway_failed` are looked at, and sugard's people read.
    let tickMillis: Int64

    /// Reads the webhooks' secret and token files (a missing or empty one is a config error).
    public init(config: ForwardConfig, logger: Logger, mqtt: Bool) throws(ConfigError) {
        self.config = config
        self.logger = logger
        var webhooks: [(WebhookConfig, WebhookCredentials, Lock<Wire.ForwardWebhook>)] = []
        for webhook in config.webhooks {
            let status = Wire.ForwardWebhook(
                name: webhook.name, url: webhook.url, format: webhook.format.rawValue, state: .idle, reason: nil, pending: 0,
                lastDeliveryMillis: nil)
            webhooks.append((webhook, try webhook.credentials(), Lock(status)))
        }
        self.webhooks = webhooks
        self.queues = webhooks.map { _ in Lock(WebhookQueue()) }
        self.settings = AlertStateMachine.Settings(
            config: config.alerts, gateway: config.gatewayID, unit: config.unit, defaultLow: config.glucoseLowMgdL,
            defaultHigh: config.glucoseHighMgdL, defaultSyncOverdueMillis: config.syncOverdueHours * 3_600_000,
            sinks: (mqtt ? ["mqtt"] : []) + config.webhooks.map(\.sinkName))
        // A tenth of the shortest time limit, between 250 ms and 30 s.
        let shortest = ([config.alerts.top.syncOverdue ?? .value(config.syncOverdueHours * 3_600_000), config.alerts.top.gatewayFailed]
            + config.alerts.people.values.flatMap { [$0.syncOverdue, $0.gatewayFailed] }
            + config.alerts.meters.values.flatMap { [$0.syncOverdue, $0.gatewayFailed] })
            .compactMap { $0?.number }.min() ?? 600_000
        self.tickMillis = max(250, min(30_000, Int64(shortest / 10)))
        (self.events, self.continuation) = AsyncStream.makeStream(of: Event.self)
    }

    /// Where new alert events go on MQTT (the forwarder's ``Forwarder/publishAlerts(_:)``); set before ``run()``.
    public func attachMQTT(_ forwarder: Forwarder) {
        self.mqtt.withLock { $0 = { [weak forwarder] in forwarder?.publishAlerts($0) } }
        let gateway = self.config.gatewayID
        self.activeChanged.withLock {
            $0 = { [weak forwarder] active in
                forwarder?.activeAlertsChanged(active.compactMap { WebhookConfig.payload($0, gateway: gateway).objectValue })
            }
        }
        forwarder.alertsDelivered.withLock { $0 = { [weak self] seq in self?.delivered(sink: "mqtt", seq: seq) } }
    }

    /// The MQTT sink has every alert event up to `seq` (the broker acknowledged them).
    func delivered(sink: String, seq: Int64) { self.continuation.yield(.delivered(sink: sink, seq: seq)) }

    /// Ends ``run()``.
    public func stop() { self.continuation.yield(.stop) }

    /// Webhooks waiting to retry try again now (SIGHUP).
    public func retryNow() {
        for queue in self.queues { Self.wake(queue) }
    }

    /// Ends a webhook worker's wait now.
    private static func wake(_ queue: Lock<WebhookQueue>) {
        let waiter = queue.withLock { q -> CheckedContinuation<Void, Never>? in
            q.wakes += 1
            defer { q.waiter = nil }
            return q.waiter
        }
        waiter?.resume()
    }

    /// `GetStatus`' `alerts`.
    public var summary: Wire.ForwardAlertsSummary {
        Wire.ForwardAlertsSummary(enabled: self.config.alerts.enabled, active: self.view.withLock { $0.active })
    }

    /// `GetAlerts`' reply.
    public var reply: Wire.ForwardAlertsReply {
        let view = self.view.withLock { $0 }
        return Wire.ForwardAlertsReply(
            enabled: self.config.alerts.enabled, active: view.active, recent: view.recent,
            webhooks: self.webhooks.map { $0.status.withLock { $0 } })
    }

    /// Runs until ``stop()`` or cancellation. Throws only when the state file is unusable.
    public func run() async throws(ForwardFileError) {
        let file = AlertFile(directory: self.config.stateDirectory)
        var machine = AlertStateMachine(saved: try file.load(), settings: self.settings)
        try file.save(machine.state)
        self.show(machine.state)
        let continuation = self.continuation
        let feed = Feed<Wire.CompactReading>(socketPath: self.config.socketPath, window: self.window) { continuation.yield(.feed($0)) }
        let follower = HealthFollower(socketPath: self.config.socketPath) { continuation.yield(.health($0)) }
        let start = machine.state.cursor
        let database = machine.state.databaseId
        let socket = self.config.socketPath
        let tick = self.tickMillis
        var tasks: [Task<Void, Never>] = [
            Task { await feed.run(after: start, databaseId: database) },
            Task { await follower.run() },
            Task {
                var sinceRead = Int64.max / 2
                while !Task.isCancelled {
                    if sinceRead >= 60_000, let people = await Self.people(socket) {
                        continuation.yield(.people(people))
                        sinceRead = 0
                    }
                    continuation.yield(.tick)
                    try? await Task.sleep(for: .milliseconds(tick))
                    sinceRead += tick
                }
            },
        ]
        for (index, webhook) in self.webhooks.enumerated() {
            let queue = self.queues[index]
            let pending = machine.state.pending(for: webhook.config.sinkName)
            let done = machine.state.delivered[webhook.config.sinkName] ?? 0
            queue.withLock {
                $0.events = pending
                $0.saved = done
            }
            let worker = WebhookWorker(
                config: webhook.config, credentials: webhook.credentials, gateway: self.config.gatewayID, logger: self.logger,
                status: webhook.status,
                next: { after in
                    await queue.wait { !$0.events.isEmpty && $0.events.last!.seq > after }
                    return queue.withLock { q in
                        q.events.removeAll { $0.seq <= after }
                        return q.events
                    }
                },
                pause: { wait in
                    let before = queue.withLock { $0.wakes }
                    let timer = Task {
                        try? await Task.sleep(for: wait)
                        if !Task.isCancelled { Self.wake(queue) }
                    }
                    defer { timer.cancel() }
                    while !Task.isCancelled, queue.withLock({ $0.wakes == before }) { await queue.wait { $0.wakes != before } }
                },
                delivered: { seq in
                    continuation.yield(.delivered(sink: webhook.config.sinkName, seq: seq))
                    // The waiter is also woken by new events: wait again until the progress is saved.
                    while !Task.isCancelled, queue.withLock({ $0.saved < seq }) { await queue.wait { $0.saved >= seq } }
                })
            tasks.append(Task { await worker.run(after: done) })
        }
        defer { for task in tasks { task.cancel() } }
        if let send = self.mqtt.withLock({ $0 }) {
            let pending = machine.state.pending(for: "mqtt")
            if !pending.isEmpty { send(pending) }
        }
        self.logger.notice(
            self.config.alerts.enabled
                ? "alerts: \(machine.state.active.count) firing, webhooks: \(self.webhooks.isEmpty ? "none" : self.webhooks.map(\.config.name).joined(separator: ", "))"
                : "alerts = off: no alert rule fires")

        var warnedPeople = Set<String>()
        for await event in self.events {
            let machineEvent: AlertStateMachine.Event
            switch event {
            case .stop:
                await self.perform(machine.handle(.stop, now: wallClockMilliseconds()), file: file)
                return
            case .feed(.readings(let list)):
                machineEvent = .readings(list.map { (cursor, r) in (cursor, Self.reading(r)) })
            case .feed(.database(let id, let previous)):
                machineEvent = .database(id: id, previous: previous)
            case .feed(.disconnected), .feed(.connected), .feed(.meters):
                continue
            case .health(let health):
                machineEvent = .health(health)
            case .people(let people):
                let unknown = self.config.alerts.people.keys.filter { people[$0] == nil && !warnedPeople.contains($0) }.sorted()
                if !unknown.isEmpty {
                    warnedPeople.formUnion(unknown)
                    self.logger.warning(
                        "alerts: sugard has no person \(unknown.joined(separator: ", ")) (a [person NAME] section names a person as sugarctl people lists them)")
                }
                machineEvent = .people(people)
            case .tick:
                machineEvent = .tick
            case .delivered(let sink, let seq):
                machineEvent = .delivered(sink: sink, seq: seq)
            }
            await self.perform(machine.handle(machineEvent, now: wallClockMilliseconds()), file: file)
            if case .readings(let list) = machineEvent { self.window.release(list.count) }
        }
    }

    /// Saves, then hands new events to MQTT and the webhooks. A failed save (a full disk) is logged
    /// and the events still go out: an alert matters more than its durability; the state is saved
    /// with the next save that works.
    private func perform(_ actions: [AlertStateMachine.Action], file: AlertFile) async {
        for action in actions {
            switch action {
            case .save(let state):
                if let error = await Self.save(state, to: file) {
                    self.logger.error("cannot save the alert state (alerts still go out): \(error)")
                }
                self.show(state)
                for (index, webhook) in self.webhooks.enumerated() {
                    let done = state.delivered[webhook.config.sinkName] ?? 0
                    let waiter = self.queues[index].withLock { q -> CheckedContinuation<Void, Never>? in
                        guard done > q.saved else { return nil }
                        q.saved = done
                        defer { q.waiter = nil }
                        return q.waiter
                    }
                    waiter?.resume()
                }
            case .emit(let events):
                for event in events {
                    self.logger.notice("alert \(event.alert.rule.rawValue) \(event.alert.state.rawValue) (\(event.alert.subject))")
                    self.logger.debug("alert \(event.alert.id): \(event.alert.message)")
                }
                for queue in self.queues {
                    let waiter = queue.withLock { q -> CheckedContinuation<Void, Never>? in
                        q.events.append(contentsOf: events)
                        defer { q.waiter = nil }
                        return q.waiter
                    }
                    waiter?.resume()
                }
                if let send = self.mqtt.withLock({ $0 }) { send(events) }
            }
        }
    }

    /// Writes `state` on a thread of its own (the fsyncs take milliseconds; the cooperative pool
    /// is not blocked meanwhile) and returns once it is on disk, or why not.
    private static func save(_ state: AlertState, to file: AlertFile) async -> ForwardFileError? {
        await withCheckedContinuation { (done: CheckedContinuation<ForwardFileError?, Never>) in
            let save: @Sendable () -> Void = {
                do throws(ForwardFileError) {
                    try file.save(state)
                    done.resume(returning: nil)
                } catch {
                    done.resume(returning: error)
                }
            }
            if startDetachedThread(save) != 0 { save() }
        }
    }

    /// Updates what the status shows and hands the active alerts on when they changed (the first
    /// state always).
    private func show(_ state: AlertState) {
        let active = state.active.values.sorted { ($0.timeMillis, $0.id) < ($1.timeMillis, $1.id) }
        let recent = state.log.suffix(50).map(\.alert)
        let changed = self.view.withLock { view -> Bool in
            defer {
                view.active = active
                view.recent = recent
                view.shown = true
            }
            return !view.shown || view.active != active
        }
        if changed, let handOn = self.activeChanged.withLock({ $0 }) { handOn(active) }
    }

    /// A reading as the alert rules see it: id, meter, person, kind, mg/dL and measured time.
    static func reading(_ r: Wire.CompactReading) -> AlertReading {
        AlertReading(
            id: ReadingExport.identifier(r), meter: r.meter, person: r.person,
            kind: Wire.ReadingKind(flags: r.flags, hasValue: r.mgdL != nil), mgdL: r.mgdL, measuredMillis: r.time.epochMillis)
    }

    /// sugard's people and their thresholds (nil when sugard does not answer or has no people).
    static func people(_ socket: String) async -> [String: AlertStateMachine.PersonLimits]? {
        guard let client = try? VarlinkClient(socketPath: socket) else { return nil }
        defer { client.close() }
        guard let reply = try? await client.call(HealthFollower.interface + ".ListPeople"),
            let people = try? Wire.PeopleReply(json: .object(reply))
        else { return nil }
        var out: [String: AlertStateMachine.PersonLimits] = [:]
        for person in people.people { out[person.name] = AlertStateMachine.PersonLimits(low: person.low?.mgdL, high: person.high?.mgdL) }
        return out
    }
}
