import GlucoseProfile
import ProcessKit

/// Drives ``SyncStateMachine``s on a ``MeterTransport`` and a ``ReadingStore``.
///
/// - One sync per meter at a time; many meters sync in parallel, each in its own task.
/// - ``run()`` consumes the transport's event stream (call it once) and routes values and
///   disconnects to the meter's running sync. A meter appearing starts an automatic sync when
///   `automaticSync` is on.
/// - One policy (``SyncPolicy``) on the monotonic clock (``SyncClock``): after a successful sync
///   (success or no new records) the meter is in its cooldown (default 30 s); an automatic trigger
///   inside it is deferred to its end, never dropped. An attempt that ends for a transient reason
///   (link lost, bluetoothd gone, timeout, ATT busy, transport error) is retried by the engine
///   itself after 2 s, 10 s, 60 s, 5 min, then every 5 min (an attempt that stored new readings
///   starts the series over), connecting to the meter directly
///   whether or not it advertises, while the meter is known; an adapter that becomes available
///   again (bluetoothd restarted) retries at once, the meter advertising does not shorten the
///   pause. A success resets the backoff; a non-transient failure,
///   ``forget(meter:)`` and ``shutdown(deadlineSeconds:)`` stop the retries.
/// - ``sync(meter:force:fullDownload:)`` starts a sync and returns its session when it ends. A
///   forced sync ignores the cooldown; nothing starts a second sync of a running meter.
/// - Connection slots (``ConnectionSlots``): with `maxConnections`, at most that many syncs hold
///   a connection at once; a further one waits in phase `queued` (published as
///   ``SyncProgressEvent/phaseChanged(_:_:)``) and connects when a slot frees, first come first
///   served. Aborting or forgetting a queued meter takes it out of the queue.
/// - ``shutdown(deadlineSeconds:)`` aborts every running sync (RACP `03 00` when a procedure is in
///   flight), commits what arrived (with the contiguous mark, see ``SyncStateMachine``), disconnects and
///   cancels every task.
///
/// Every task the engine starts is stored and cancelled by it; timers are sleeping child tasks of
/// the meter's task, and scheduled retries and deferred syncs are tasks in ``scheduled``.
public actor SyncEngine {
    /// What reaches a meter's task: machine events, and a timer's sleeper waking up (the meter's
    /// task then decides whether the timer fired, moved or was cancelled meanwhile).
    private enum DriverEvent: Sendable {
        case machine(SyncEvent)
        case timerWake(SyncTimer, armed: ContinuousClock.Instant)
    }

    private final class Session: Sendable {
        let meter: MeterID
        let events: AsyncStream<DriverEvent>
        let input: AsyncStream<DriverEvent>.Continuation

        init(meter: MeterID) {
            self.meter = meter
            (self.events, self.input) = AsyncStream.makeStream(of: DriverEvent.self, bufferingPolicy: .unbounded)
        }

        func yield(_ event: SyncEvent) { self.input.yield(.machine(event)) }
    }

    private struct Running {
        var session: Session
        var task: Task<Void, Never>
        var waiters: [CheckedContinuation<Result<SyncSessionRecord, SyncFailure>, Never>]
    }

    /// A retry or a deferred sync waiting for its time.
    private struct Scheduled {
        enum Kind { case retry, deferred }
        var kind: Kind
        var at: Duration
        var token: UInt64
        var task: Task<Void, Never>
    }

    private let transport: any MeterTransport
    private let store: any ReadingStore
    private let zone: TimeZoneRules
    private var meterZones: [MeterID: TimeZoneRules]
    private let quirks: QuirkTable
    private let configuration: SyncConfiguration
    private let automaticSync: Bool
    private let observer: (any SyncObserver)?
    private let logger: Logger
    private let now: WallClock
    private let clock: any SyncClock

    private var policy: SyncPolicy
    private var slots: ConnectionSlots
    /// Syncs waiting for a slot: resumed with true when granted, false when they gave up.
    private var slotWaiters: [MeterID: CheckedContinuation<Bool, Never>] = [:]
    private var running: [MeterID: Running] = [:]
    private var scheduled: [MeterID: Scheduled] = [:]
    private var nextToken: UInt64 = 0
    private var advertisements: [MeterID: MeterAdvertisement] = [:]
    private var lastSessions: [MeterID: SyncSessionRecord] = [:]
    private var adapterAvailable = false
    private var shuttingDown = false
    private var stopRun: AsyncStream<Void>.Continuation?

    /// - Parameters:
    ///   - transport: where meters are reached.
    ///   - store: where batches are committed.
    ///   - zone: the zone meter clocks are read in (the host's, or the configured one).
    ///   - meterZones: per-meter zones that override `zone`.
    ///   - quirks: the vendor table.
    ///   - configuration: timeouts, retry pacing and the retry backoff.
    ///   - cooldownSeconds: automatic syncs within this long of a meter's last successful sync are
    ///     deferred to its end.
    ///   - automaticSync: start a sync when a meter appears.
    ///   - observer: receives progress; the view model plugs in here.
    ///   - logger: never logs reading values above debug.
    ///   - now: the wall clock (session times, and the wall-clock reading of scheduled times).
    ///   - clock: the monotonic clock cooldowns and retries run on.
    ///   - maxConnections: how many meters may be connected at once (the adapter's slots); nil:
    ///     no limit.
    public init(
        transport: any MeterTransport, store: any ReadingStore, zone: TimeZoneRules,
        meterZones: [MeterID: TimeZoneRules] = [:], quirks: QuirkTable = .builtIn,
        configuration: SyncConfiguration = SyncConfiguration(), cooldownSeconds: Double = 30, automaticSync: Bool = true,
        observer: (any SyncObserver)? = nil, logger: Logger = .disabled, now: @escaping WallClock,
        clock: any SyncClock = ContinuousSyncClock(), maxConnections: Int? = nil
    ) {
        self.slots = ConnectionSlots(limit: maxConnections)
        self.transport = transport
        self.store = store
        self.zone = zone
        self.meterZones = meterZones
        self.quirks = quirks
        self.configuration = configuration
        self.policy = SyncPolicy(cooldownSeconds: cooldownSeconds, backoffSeconds: configuration.retryBackoff)
        self.automaticSync = automaticSync
        self.observer = observer
        self.logger = logger.named("sync")
        self.now = now
        self.clock = clock
    }

    // MARK: - Public API

    /// Consumes the transport's events until the stream ends or ``shutdown(deadlineSeconds:)``.
    /// Call once.
    public func run() async {
        let (stop, stopInput) = AsyncStream.makeStream(of: Void.self)
        self.stopRun = stopInput
        if self.shuttingDown { return }
        let events = self.transport.events()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await event in events { await self.route(event) }
            }
            group.addTask {
                for await _ in stop {}
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// Syncs one meter and returns the session when it ends (whatever its result; see
    /// ``SyncSessionRecord/result`` and ``SyncSessionRecord/error``).
    /// - Parameters:
    ///   - force: ignore the cooldown (an explicit request).
    ///   - fullDownload: ask for every record even when a high-water mark is stored.
    /// - Throws: ``SyncFailure`` with code `syncInProgress` when this meter is already syncing (it
    ///   does not join it), `cooldown` for an unforced sync within the cooldown (it is deferred to
    ///   the cooldown's end), `aborted` while shutting down, `storeError` when the stored meter
    ///   cannot be read.
    public func sync(meter: MeterID, force: Bool, fullDownload: Bool = false) async throws(SyncFailure) -> SyncSessionRecord {
        try await self.start(meter, force ? .forced : .automatic, fullDownload: fullDownload)
        let result = await withCheckedContinuation { (c: CheckedContinuation<Result<SyncSessionRecord, SyncFailure>, Never>) in
            if var entry = self.running[meter] {
                entry.waiters.append(c)
                self.running[meter] = entry
            } else if let record = self.lastSessions[meter] {
                c.resume(returning: .success(record))
            } else {
                c.resume(returning: .failure(SyncFailure(.aborted, "The sync of \(meter) ended before it could be awaited.")))
            }
        }
        return try result.get()
    }

    /// Pairs with a meter outside a sync (a sync pairs by itself when the meter demands it).
    public func pair(meter: MeterID) async throws(TransportError) {
        try await self.transport.pair(meter)
    }

    /// Answers a ``SyncProgressEvent/passkeyRequested(_:)`` (nil cancels the pairing).
    public func submitPasskey(_ passkey: UInt32?, for meter: MeterID) async throws(TransportError) {
        try await self.transport.submitPasskey(passkey, for: meter)
    }

    /// Sets or clears the zone one meter's clock is read in.
    public func setZone(_ zone: TimeZoneRules?, for meter: MeterID) {
        self.meterZones[meter] = zone
    }

    /// Whether a sync of the meter is running.
    public func isSyncing(_ meter: MeterID) -> Bool { self.running[meter] != nil }

    /// When the meter's scheduled retry or deferred sync runs (monotonic), if one is scheduled.
    public func scheduledAttempt(_ meter: MeterID) -> Duration? { self.scheduled[meter]?.at }

    /// Stops the running sync of one meter: aborts, commits what arrived, disconnects. A meter
    /// waiting for a connection slot leaves the queue (its sync ends `aborted`).
    public func abort(meter: MeterID, reason: String) {
        if self.slots.isQueued(meter) {
            _ = self.slots.release(meter)
            self.slotWaiters.removeValue(forKey: meter)?.resume(returning: false)
            return
        }
        self.running[meter]?.session.yield(.abort(reason: reason))
    }

    /// The meters holding a connection slot, and those waiting for one (first come first).
    public var connectionSlots: ConnectionSlots { self.slots }

    /// The meter is forgotten: its sync is aborted, its scheduled retry or deferred sync dropped,
    /// and its cooldown and backoff cleared.
    public func forget(meter: MeterID) {
        self.abort(meter: meter, reason: "meter forgotten")
        self.unschedule(meter)
        self.policy.forget(meter)
        self.advertisements[meter] = nil
    }

    /// Aborts every sync, drops every scheduled retry, waits for the syncs to commit and disconnect
    /// (up to the deadline, then cancels them), and ends ``run()``. Safe to call twice.
    public func shutdown(deadlineSeconds: Double = 10) async {
        self.shuttingDown = true
        let timers = self.scheduled.values.map(\.task)
        self.scheduled = [:]
        for task in timers { task.cancel() }
        let tasks = self.running.values.map(\.task)
        for meter in self.running.keys { self.abort(meter: meter, reason: "the daemon is shutting down") }
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for task in tasks { await task.value }
                return true
            }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(Int64(deadlineSeconds * 1000)))
                return false
            }
            let finished = await group.next() ?? false
            if !finished { for task in tasks { task.cancel() } }
            group.cancelAll()
        }
        for task in tasks { await task.value }
        for task in timers { await task.value }
        self.stopRun?.finish()
    }

    // MARK: - Routing

    private func publish(_ event: SyncProgressEvent) {
        self.observer?.syncEvent(event)
    }

    private func route(_ event: TransportEvent) async {
        switch event {
        case .adapter(let state):
            self.publish(.adapterChanged(state))
            let available = state.present && state.powered
            defer { self.adapterAvailable = available }
            if available, !self.adapterAvailable {
                // bluetoothd or the adapter is back (a likely cause of the failures): retry now.
                for (meter, entry) in self.scheduled where entry.kind == .retry { await self.bringForward(meter, entry) }
            }
        case .meterAppeared(let ad):
            self.advertisements[ad.id] = ad
            self.publish(.meterAppeared(ad))
            guard self.automaticSync, !self.shuttingDown, self.running[ad.id] == nil else { return }
            if self.scheduled[ad.id]?.kind == .retry {
                // A failing meter that advertises often is not asked more often than the backoff says.
                self.logger.debug("meter appeared while its retry is scheduled", [("meter", ad.id.rawValue)])
                return
            }
            await self.startAutomatically(ad.id, .automatic)
        case .meterDisappeared(let id):
            self.publish(.meterDisappeared(id))
        case .disconnected(let id, let reason):
            self.running[id]?.session.yield(.disconnected(reason: reason))
        case .value(let id, let uuid, let bytes):
            self.running[id]?.session.yield(.value(uuid, bytes))
        case .passkeyRequested(let id):
            self.publish(.passkeyRequested(id))
        }
    }

    /// Starts a sync nobody waits for (appearance, retry, deferred trigger); logs why not.
    private func startAutomatically(_ meter: MeterID, _ trigger: SyncTrigger) async {
        do throws(SyncFailure) {
            try await self.start(meter, trigger, fullDownload: false)
        } catch {
            self.logger.info(
                "automatic sync not started now", [("meter", meter.rawValue), ("trigger", trigger.rawValue), ("reason", error.code.rawValue)])
        }
    }

    private func start(_ meter: MeterID, _ trigger: SyncTrigger, fullDownload: Bool) async throws(SyncFailure) {
        guard !self.shuttingDown else { throw SyncFailure(.aborted, "The daemon is shutting down; \(meter) was not synced.") }
        let stored: StoredMeter?
        var highWaterRecord: [UInt8]?
        do {
            stored = try await self.store.meter(meter)
            if let mark = stored?.highWater, !fullDownload {
                highWaterRecord = try await self.store.storedMeasurement(meter: meter, sequenceNumber: mark)
            }
        } catch {
            throw SyncFailure(.storeError, "The stored state of \(meter) could not be read: \(error.message)")
        }
        // Checked after the awaits: the engine may be shutting down, or another caller may have
        // started this meter meanwhile.
        guard !self.shuttingDown else { throw SyncFailure(.aborted, "The daemon is shutting down; \(meter) was not synced.") }
        if let stored, let last = stored.lastSync, stored.lastSyncResult == .success || stored.lastSyncResult == .noNewRecords {
            self.policy.noteEarlierSuccess(meter, ago: .milliseconds(self.now().epochMillis - last.epochMillis), at: self.clock.now)
        }
        switch self.policy.request(meter, trigger, at: self.clock.now) {
        case .start: break
        case .alreadyRunning:
            throw SyncFailure(.syncInProgress, "A sync of \(meter) is already running.")
        case .deferred(let until):
            let failure = SyncFailure(
                .cooldown, "\(meter) synced moments ago; the sync is deferred to the end of the cooldown, in \(Self.seconds(until - self.clock.now)) s.")
            self.publish(.skipped(meter, failure))
            if self.scheduled[meter].map({ $0.kind == .deferred && $0.at <= until }) != true {
                self.schedule(meter, .deferred, at: until)
                self.publish(.deferred(meter, until: self.wallClock(at: until)))
            }
            throw failure
        }
        self.unschedule(meter, announce: false)  // this attempt replaces a waiting retry or deferred sync
        let context = SyncStateMachine.Context(
            meter: meter, advertisedName: self.advertisements[meter]?.name ?? stored?.identity.name,
            highWater: stored?.highWater, highWaterRecord: highWaterRecord, fullDownload: fullDownload,
            zone: self.meterZones[meter] ?? self.zone, quirks: self.quirks, configuration: self.configuration,
            clockSetAt: stored?.clockSetAt)
        let session = Session(meter: meter)
        let task = Task { await self.drive(session, SyncStateMachine(context)) }
        self.running[meter] = Running(session: session, task: task, waiters: [])
        session.yield(.start)
        self.logger.info("sync started", [("meter", meter.rawValue), ("trigger", trigger.rawValue)])
    }

    private func ended(_ meter: MeterID, _ record: SyncSessionRecord, failure: SyncFailure?) {
        if let next = self.slots.release(meter) {
            self.slotWaiters.removeValue(forKey: next)?.resume(returning: true)
        }
        let followup = self.policy.finished(
            meter, record.result, failure: failure?.code, progressed: record.stored > 0, at: self.clock.now)
        self.lastSessions[meter] = record
        guard let entry = self.running.removeValue(forKey: meter) else { return }
        entry.session.input.finish()
        for waiter in entry.waiters { waiter.resume(returning: .success(record)) }
        self.logger.info("sync ended", [("meter", meter.rawValue), ("result", record.result.rawValue)])
        if case .retry(let at, let attempt) = followup, !self.shuttingDown {
            self.schedule(meter, .retry, at: at)
            self.publish(.retryScheduled(meter, at: self.wallClock(at: at), attempt: attempt))
            self.logger.info(
                "sync will be retried", [("meter", meter.rawValue), ("attempt", String(attempt)), ("inSeconds", Self.seconds(at - self.clock.now))])
        }
    }

    // MARK: - Scheduling (retries and deferred syncs)

    private func schedule(_ meter: MeterID, _ kind: Scheduled.Kind, at: Duration) {
        self.scheduled[meter]?.task.cancel()
        self.nextToken += 1
        let token = self.nextToken
        let clock = self.clock
        let task = Task {
            do {
                try await clock.sleep(until: at)
            } catch {
                return
            }
            await self.fire(meter, token: token)
        }
        self.scheduled[meter] = Scheduled(kind: kind, at: at, token: token, task: task)
    }

    private func unschedule(_ meter: MeterID, announce: Bool = true) {
        guard let entry = self.scheduled.removeValue(forKey: meter) else { return }
        entry.task.cancel()
        if announce { self.publish(.scheduleCleared(meter)) }
    }

    /// Runs a scheduled attempt now, before its time: its sleeper is cancelled first, so no task
    /// is left waiting for a deadline nobody needs any more.
    private func bringForward(_ meter: MeterID, _ entry: Scheduled) async {
        entry.task.cancel()
        await self.fire(meter, token: entry.token)
    }

    /// A scheduled retry or deferred sync is due (or was brought forward).
    private func fire(_ meter: MeterID, token: UInt64) async {
        guard let entry = self.scheduled[meter], entry.token == token else { return }  // replaced or dropped
        self.scheduled[meter] = nil
        guard !self.shuttingDown, self.running[meter] == nil else { return }
        if entry.kind == .retry {
            // Retries only while the meter is known (stored and not forgotten, or seen).
            let known = (try? await self.store.meter(meter)) != nil || self.advertisements[meter] != nil
            guard known else {
                self.publish(.scheduleCleared(meter))
                return
            }
        }
        await self.startAutomatically(meter, entry.kind == .retry ? .retry : .automatic)
    }

    private func wallClock(at point: Duration) -> Instant {
        Instant(epochMillis: self.now().epochMillis + Self.millis(point - self.clock.now))
    }

    private static func millis(_ d: Duration) -> Int64 {
        d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
    }

    private static func seconds(_ d: Duration) -> String { String((Self.millis(d) + 999) / 1000) }

    // MARK: - Driving one meter

    /// Timer deadlines, and which timers have a sleeper task. Restarting a timer only moves its
    /// deadline: the RACP timer restarts on every record, and a task (and, on Linux, a Dispatch
    /// timer that outlives its cancelled sleep) per restart cost 100 000 sleeping tasks in a
    /// 100 000-record download and as many wake-ups 20 s later. So each timer has at most one
    /// sleeper; when it wakes before a moved deadline, a new one sleeps for the rest. A sleeper
    /// that is no longer the timer's armed one (an earlier deadline replaced it) is ignored.
    private struct TimerState {
        var deadlines: [SyncTimer: ContinuousClock.Instant] = [:]
        var armed: [SyncTimer: ContinuousClock.Instant] = [:]
    }

    /// What one meter's task keeps between events.
    private struct DriveState {
        var machine: SyncStateMachine
        var timers = TimerState()
        /// The failure the machine reported, for the retry decision.
        var failure: SyncFailure?
        var finished = false
    }

    private static func sleeper(
        _ timer: SyncTimer, until deadline: ContinuousClock.Instant, _ input: Session
    ) -> @Sendable () async -> Void {
        {
            do {
                try await Task.sleep(until: deadline, clock: .continuous)
            } catch {
                return
            }
            input.input.yield(.timerWake(timer, armed: deadline))
        }
    }

    /// Waits for a connection slot; false when the meter gave up waiting (aborted, forgotten,
    /// shutdown).
    private func acquireSlot(_ meter: MeterID) async -> Bool {
        guard case .queued(let position) = self.slots.request(meter) else { return true }
        self.publish(.phaseChanged(meter, .queued))
        self.logger.info(
            "sync waits for a connection slot",
            [("meter", meter.rawValue), ("position", String(position)), ("slots", String(self.slots.limit ?? 0))])
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            self.slotWaiters[meter] = continuation
        }
    }

    private func drive(_ session: Session, _ initial: SyncStateMachine) async {
        guard await self.acquireSlot(session.meter) else {
            // Gave up waiting: the machine never started, nothing to disconnect or commit.
            let now = self.now()
            let record = SyncSessionRecord(
                meter: session.meter, started: now, ended: now, result: .aborted, received: 0,
                error: "The sync was stopped while it waited for a connection slot.")
            self.publish(.phaseChanged(session.meter, .idle))
            self.ended(session.meter, record, failure: SyncFailure(.aborted, record.error ?? ""))
            return
        }
        var state = DriveState(machine: initial)
        await withTaskGroup(of: Void.self) { group in
            for await driverEvent in session.events {
                guard let event = Self.machineEvent(driverEvent, &state.timers, &group, session) else { continue }
                for action in state.machine.handle(event, at: self.now()) {
                    self.perform(action, session, &state, &group)
                }
                if state.finished { break }
            }
            group.cancelAll()
        }
        if state.machine.isActive {
            // Cancelled before the machine ended (shutdown deadline): release the meter anyway.
            await self.transport.disconnect(session.meter)
            let record = SyncSessionRecord(
                meter: session.meter, started: self.now(), ended: self.now(), result: .aborted,
                received: state.machine.received, error: "The sync was cancelled before it could finish.")
            self.ended(session.meter, record, failure: SyncFailure(.aborted, record.error ?? ""))
        }
    }

    /// The machine event a driver event stands for; nil for a timer wake that is stale or early
    /// (an early one sleeps again for the rest).
    private static func machineEvent(
        _ driverEvent: DriverEvent, _ timers: inout TimerState, _ group: inout TaskGroup<Void>, _ session: Session
    ) -> SyncEvent? {
        switch driverEvent {
        case .machine(let event):
            return event
        case .timerWake(let timer, let armed):
            guard timers.armed[timer] == armed else { return nil }  // replaced by an earlier one
            timers.armed[timer] = nil
            guard let deadline = timers.deadlines[timer] else { return nil }  // cancelled
            if deadline > ContinuousClock.now {
                // Restarted since this sleeper started: sleep for the rest.
                timers.armed[timer] = deadline
                group.addTask(operation: Self.sleeper(timer, until: deadline, session))
                return nil
            }
            timers.deadlines[timer] = nil
            return .timerFired(timer)
        }
    }

    /// Carries out one action: I/O as a child task that answers with an event; timers, publishing
    /// and the end of the sync here.
    private func perform(_ action: SyncAction, _ session: Session, _ state: inout DriveState, _ group: inout TaskGroup<Void>) {
        let meter = session.meter
        switch action {
        case .startTimer(let timer, let seconds):
            let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
            state.timers.deadlines[timer] = deadline
            if let armed = state.timers.armed[timer], armed <= deadline { return }  // wakes in time
            state.timers.armed[timer] = deadline
            group.addTask(operation: Self.sleeper(timer, until: deadline, session))
        case .cancelTimer(let timer):
            state.timers.deadlines[timer] = nil
        case .publish(let event):
            if case .anomalies(_, let summary) = event {
                // One line with a count per kind, whatever the meter sent (never one entry per packet).
                self.logger.notice(
                    "odd packets during sync",
                    [("meter", meter.rawValue), ("total", String(summary.total)), ("anomalies", summary.description)])
            }
            if case .failed(_, let failure) = event {
                state.failure = failure
                self.logger.warning(failure.message, [("meter", meter.rawValue), ("code", failure.code.rawValue)])
            }
            self.publish(event)
        case .finished(let record):
            state.finished = true
            self.ended(meter, record, failure: state.failure)
        default:
            if let io = Self.io(action, meter, self.transport, self.store, session) { group.addTask(operation: io) }
        }
    }

    /// The transport or store call an action stands for, answering the machine with an event.
    private static func io(
        _ action: SyncAction, _ meter: MeterID, _ transport: any MeterTransport, _ store: any ReadingStore, _ input: Session
    ) -> (@Sendable () async -> Void)? {
        switch action {
        case .connect:
            return {
                do throws(TransportError) {
                    input.yield(.connected(try await transport.connect(meter)))
                } catch {
                    input.yield(.connectFailed(error))
                }
            }
        case .pair:
            return {
                do throws(TransportError) {
                    try await transport.pair(meter)
                    input.yield(.paired)
                } catch {
                    input.yield(.pairingFailed(error))
                }
            }
        case .read(let uuid):
            return {
                do throws(TransportError) {
                    input.yield(.readCompleted(uuid, try await transport.read(uuid, on: meter)))
                } catch {
                    input.yield(.readFailed(uuid, error))
                }
            }
        case .enableNotifications(let uuid):
            return {
                do throws(TransportError) {
                    try await transport.setNotifications(true, for: uuid, on: meter)
                    input.yield(.notificationsEnabled(uuid))
                } catch {
                    input.yield(.notificationsFailed(uuid, error))
                }
            }
        case .writeRACP(let bytes, let purpose):
            return {
                do throws(TransportError) {
                    try await transport.write(bytes, to: .recordAccessControlPoint, on: meter)
                    input.yield(.writeCompleted(purpose))
                } catch {
                    input.yield(.writeFailed(purpose, error))
                }
            }
        case .write(let bytes, let uuid):
            return {
                do throws(TransportError) {
                    try await transport.write(bytes, to: uuid, on: meter)
                    input.yield(.characteristicWritten(uuid))
                } catch {
                    input.yield(.characteristicWriteFailed(uuid, error))
                }
            }
        case .lookUpStored(let contents):
            return {
                do throws(StoreError) {
                    let highest = try await store.highestSequenceNumber(meter: meter)
                    let known = try await store.storedContent(meter: meter, among: contents)
                    input.yield(.storedLookup(highest: highest, known: known))
                } catch {
                    input.yield(.commitFailed(error))
                }
            }
        case .commit(let batch):
            return {
                do throws(StoreError) {
                    input.yield(.committed(try await store.commit(batch)))
                } catch {
                    input.yield(.commitFailed(error))
                }
            }
        case .disconnect:
            return {
                await transport.disconnect(meter)
                input.yield(.disconnectCompleted)
            }
        case .startTimer, .cancelTimer, .publish, .finished:
            return nil
        }
    }
}
