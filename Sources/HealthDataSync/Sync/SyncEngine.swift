/// Drives ``SyncStateMachine``s on a ``MeterTransport`` and a ``ReadingStore``.
///
/// - One sync per meter at a time; many meters sync in parallel, each in its own task.
/// - ``run()`` consumes the transport's event stream (call it once) and routes values and
///   disconnects to the meter's running sync. A meter appearing starts an automatic sync when
///   `automaticSync` is on, unless the meter synced within the cooldown (default 30 s).
/// - ``sync(meter:force:fullDownload:)`` starts a sync and returns its session when it ends. A
///   forced sync ignores the cooldown; nothing starts a second sync of a running meter.
/// - ``shutdown(deadlineSeconds:)`` aborts every running sync (RACP `03 00` when a procedure is in
///   flight), commits what arrived (without a high-water mark), disconnects and cancels every task.
///
/// Every task the engine starts is stored and cancelled by it; timers are sleeping child tasks of
/// the meter's task.
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

    private let transport: any MeterTransport
    private let store: any ReadingStore
    private let zone: TimeZoneRules
    private var meterZones: [MeterID: TimeZoneRules]
    private let quirks: QuirkTable
    private let configuration: SyncConfiguration
    private let automaticSync: Bool
    private let observer: (any SyncObserver)?
    private let logger: Logger
    private let now: @Sendable () -> Instant

    private var scheduler: SyncScheduler
    private var running: [MeterID: Running] = [:]
    private var advertisements: [MeterID: MeterAdvertisement] = [:]
    private var lastSessions: [MeterID: SyncSessionRecord] = [:]
    private var shuttingDown = false
    private var stopRun: AsyncStream<Void>.Continuation?

    /// - Parameters:
    ///   - transport: where meters are reached.
    ///   - store: where batches are committed.
    ///   - zone: the zone meter clocks are read in (the host's, or the configured one).
    ///   - meterZones: per-meter zones that override `zone`.
    ///   - quirks: the vendor table.
    ///   - configuration: timeouts and retry pacing.
    ///   - cooldownSeconds: automatic syncs within this long of a meter's last sync are skipped.
    ///   - automaticSync: start a sync when a meter appears.
    ///   - observer: receives progress; the view model plugs in here.
    ///   - logger: never logs reading values above debug.
    ///   - now: the wall clock (the pure module has none of its own).
    public init(
        transport: any MeterTransport, store: any ReadingStore, zone: TimeZoneRules,
        meterZones: [MeterID: TimeZoneRules] = [:], quirks: QuirkTable = .builtIn,
        configuration: SyncConfiguration = SyncConfiguration(), cooldownSeconds: Double = 30, automaticSync: Bool = true,
        observer: (any SyncObserver)? = nil, logger: Logger = .disabled, now: @escaping @Sendable () -> Instant
    ) {
        self.transport = transport
        self.store = store
        self.zone = zone
        self.meterZones = meterZones
        self.quirks = quirks
        self.configuration = configuration
        self.scheduler = SyncScheduler(cooldownSeconds: cooldownSeconds)
        self.automaticSync = automaticSync
        self.observer = observer
        self.logger = logger.named("sync")
        self.now = now
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
    ///   does not join it), `cooldown` for an unforced sync within the cooldown, `aborted` while
    ///   shutting down, `storeError` when the stored meter cannot be read.
    public func sync(meter: MeterID, force: Bool, fullDownload: Bool = false) async throws(SyncFailure) -> SyncSessionRecord {
        try await self.start(meter, force: force, fullDownload: fullDownload)
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

    /// Stops the running sync of one meter (forget): aborts, commits what arrived, disconnects.
    public func abort(meter: MeterID, reason: String) {
        self.running[meter]?.session.yield(.abort(reason: reason))
    }

    /// Aborts every sync, waits for them to commit and disconnect (up to the deadline, then cancels
    /// them), and ends ``run()``. Safe to call twice.
    public func shutdown(deadlineSeconds: Double = 10) async {
        self.shuttingDown = true
        let tasks = self.running.values.map(\.task)
        for entry in self.running.values { entry.session.yield(.abort(reason: "the daemon is shutting down")) }
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
        case .meterAppeared(let ad):
            self.advertisements[ad.id] = ad
            self.publish(.meterAppeared(ad))
            guard self.automaticSync, !self.shuttingDown, self.running[ad.id] == nil else { return }
            do throws(SyncFailure) {
                try await self.start(ad.id, force: false, fullDownload: false)
            } catch {
                if error.code == .cooldown { self.publish(.skipped(ad.id, error)) }
                self.logger.info("automatic sync not started", [("meter", ad.id.rawValue), ("reason", error.code.rawValue)])
            }
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

    private func start(_ meter: MeterID, force: Bool, fullDownload: Bool) async throws(SyncFailure) {
        guard !self.shuttingDown else { throw SyncFailure(.aborted, "The daemon is shutting down; \(meter) was not synced.") }
        let stored: StoredMeter?
        do {
            stored = try await self.store.meter(meter)
        } catch {
            throw SyncFailure(.storeError, "The stored state of \(meter) could not be read: \(error.message)")
        }
        // Checked after the await: another caller may have started this meter meanwhile.
        if let last = stored?.lastSync { self.scheduler.noteLastSync(meter, at: last) }
        switch self.scheduler.request(meter, force: force, now: self.now()) {
        case .start: break
        case .alreadyRunning:
            throw SyncFailure(.syncInProgress, "A sync of \(meter) is already running.")
        case .skipCooldown(let remaining):
            throw SyncFailure(.cooldown, "\(meter) synced moments ago; the next automatic sync may start in \((remaining + 999) / 1000) s.")
        }
        let context = SyncStateMachine.Context(
            meter: meter, advertisedName: self.advertisements[meter]?.name ?? stored?.identity.name,
            highWater: stored?.highWater, fullDownload: fullDownload, zone: self.meterZones[meter] ?? self.zone,
            quirks: self.quirks, configuration: self.configuration)
        let session = Session(meter: meter)
        let task = Task { await self.drive(session, SyncStateMachine(context)) }
        self.running[meter] = Running(session: session, task: task, waiters: [])
        session.yield(.start)
        self.logger.info("sync started", [("meter", meter.rawValue), ("force", String(force))])
    }

    private func ended(_ meter: MeterID, _ record: SyncSessionRecord) {
        self.scheduler.finished(meter, at: self.now())
        self.lastSessions[meter] = record
        guard let entry = self.running.removeValue(forKey: meter) else { return }
        entry.session.input.finish()
        for waiter in entry.waiters { waiter.resume(returning: .success(record)) }
        self.logger.info("sync ended", [("meter", meter.rawValue), ("result", record.result.rawValue)])
    }

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

    private func drive(_ session: Session, _ initial: SyncStateMachine) async {
        var machine = initial
        var timers = TimerState()
        let meter = session.meter
        let transport = self.transport
        let store = self.store
        let input = session
        await withTaskGroup(of: Void.self) { group in
            var finished = false
            for await driverEvent in session.events {
                let event: SyncEvent
                switch driverEvent {
                case .machine(let e):
                    event = e
                case .timerWake(let timer, let armed):
                    guard timers.armed[timer] == armed else { continue }  // replaced by an earlier one
                    timers.armed[timer] = nil
                    guard let deadline = timers.deadlines[timer] else { continue }  // cancelled
                    if deadline > ContinuousClock.now {
                        // Restarted since this sleeper started: sleep for the rest.
                        timers.armed[timer] = deadline
                        group.addTask(operation: Self.sleeper(timer, until: deadline, input))
                        continue
                    }
                    timers.deadlines[timer] = nil
                    event = .timerFired(timer)
                }
                for action in machine.handle(event, at: self.now()) {
                    switch action {
                    case .connect:
                        group.addTask {
                            do throws(TransportError) {
                                input.yield(.connected(try await transport.connect(meter)))
                            } catch {
                                input.yield(.connectFailed(error))
                            }
                        }
                    case .pair:
                        group.addTask {
                            do throws(TransportError) {
                                try await transport.pair(meter)
                                input.yield(.paired)
                            } catch {
                                input.yield(.pairingFailed(error))
                            }
                        }
                    case .read(let uuid):
                        group.addTask {
                            do throws(TransportError) {
                                input.yield(.readCompleted(uuid, try await transport.read(uuid, on: meter)))
                            } catch {
                                input.yield(.readFailed(uuid, error))
                            }
                        }
                    case .enableNotifications(let uuid):
                        group.addTask {
                            do throws(TransportError) {
                                try await transport.setNotifications(true, for: uuid, on: meter)
                                input.yield(.notificationsEnabled(uuid))
                            } catch {
                                input.yield(.notificationsFailed(uuid, error))
                            }
                        }
                    case .writeRACP(let bytes, let purpose):
                        group.addTask {
                            do throws(TransportError) {
                                try await transport.write(bytes, to: .recordAccessControlPoint, on: meter)
                                input.yield(.writeCompleted(purpose))
                            } catch {
                                input.yield(.writeFailed(purpose, error))
                            }
                        }
                    case .startTimer(let timer, let seconds):
                        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
                        timers.deadlines[timer] = deadline
                        if let armed = timers.armed[timer], armed <= deadline { break }  // wakes in time
                        timers.armed[timer] = deadline
                        group.addTask(operation: Self.sleeper(timer, until: deadline, input))
                    case .cancelTimer(let timer):
                        timers.deadlines[timer] = nil
                    case .commit(let batch):
                        let reversed = machine.profile.has(.reversedSequence)
                        group.addTask {
                            do throws(StoreError) {
                                let prepared = reversed ? try await Self.renumber(batch, store: store) : batch
                                input.yield(.committed(try await store.commit(prepared)))
                            } catch {
                                input.yield(.commitFailed(error))
                            }
                        }
                    case .disconnect:
                        group.addTask {
                            await transport.disconnect(meter)
                            input.yield(.disconnectCompleted)
                        }
                    case .publish(let event):
                        if case .anomalies(_, let anomalies) = event {
                            // Kinds and sequence numbers only: anomaly messages never carry values.
                            let kinds = anomalies.map(\.kind.rawValue).joined(separator: ",")
                            self.logger.notice("odd packets during sync", [("meter", meter.rawValue), ("anomalies", kinds)])
                        }
                        if case .failed(_, let failure) = event {
                            self.logger.warning(failure.message, [("meter", meter.rawValue), ("code", failure.code.rawValue)])
                        }
                        self.publish(event)
                    case .finished(let record):
                        finished = true
                        self.ended(meter, record)
                    }
                }
                if finished { break }
            }
            group.cancelAll()
        }
        if machine.isActive {
            // Cancelled before the machine ended (shutdown deadline): release the meter anyway.
            await transport.disconnect(meter)
            let record = SyncSessionRecord(
                meter: meter, started: self.now(), ended: self.now(), result: .aborted, received: machine.received,
                error: "The sync was cancelled before it could finish.")
            self.ended(meter, record)
        }
    }

    /// TaiDoc: drop what is already stored by content, number new records after the stored maximum.
    private static func renumber(_ batch: SyncBatch, store: any ReadingStore) async throws(StoreError) -> SyncBatch {
        let stored = try await store.readings(ReadingQuery(meter: batch.meter.id)).map(\.reading)
        let (fresh, already) = ReversedSequenceNormalizer.normalize(received: batch.readings, stored: stored)
        var copy = batch
        copy.readings = fresh
        copy.session.duplicates += already
        if batch.session.result == .success || batch.session.result == .noNewRecords {
            copy.newHighWater = (fresh.map(\.sequenceNumber) + stored.map(\.sequenceNumber)).max()
        }
        return copy
    }
}

