import Locking

/// The fan-out point of one model: an inbox of owner turns and the collector task that delivers
/// them. Exists only while the model has watchers; the collector holds the hub, so the hub cannot
/// outlive its task.
final class Hub<State: ObservableState>: Sendable {
    /// Owner turns posted and not yet collected, oldest first.
    let inbox = Lock<[Emission<State>]>([])
    /// Rung on every post; closed when the hub is torn down.
    let bell = Doorbell()
    /// Counts the hub's life.
    private let stats: ObservationStats

    /// A hub, counted in `stats`.
    init(stats: ObservationStats) {
        self.stats = stats
        stats.hubCreated()
    }

    /// Counts the hub gone.
    deinit { self.stats.hubDestroyed() }

    /// Never blocks on watchers: an append under a short lock and a ring.
    func post(_ emission: Emission<State>) {
        self.inbox.withLock { $0.append(emission) }
        self.bell.ring()
    }

    /// Every posted turn, emptying the inbox.
    func takeAll() -> [Emission<State>] {
        self.inbox.withLock { inbox in
            let batch = inbox
            inbox = []
            return batch
        }
    }
}

/// A watcher's lease on a model's hub.
struct Registration<State: ObservableState>: Sendable {
    /// The watcher (weak: a watcher dropped without cancel releases its lease in its deinit).
    weak var watcher: Watcher<State>?
    /// The watcher's binding generation at registration; older deliveries are rejected.
    let generation: UInt64
}

/// One source of truth with named fields, revisions and watchers.
///
/// - Writers call ``update(_:)``: one call is one owner turn. Fields are compared old against new;
///   only fields that differ bump their revision and the global revision. Writing never waits for
///   a watcher: it appends to the hub's inbox and rings the collector.
/// - Watchers (``watch(fields:policy:outputCap:)``) lease the model's single hub; the first lease
///   starts the collector task, the last release cancels it.
/// - Construction does no I/O and starts no task; ``activate()`` is explicit and idempotent;
///   ``close()`` ends every watcher, the collector and every task started with ``spawn(_:)``.
///
/// `update`'s body runs under the model's lock: it must not call back into the same model.
public final class ObservableModel<State: ObservableState>: Sendable {
    /// Lifecycle of a model.
    public enum Lifecycle: String, Hashable, Sendable {
        /// Made, not yet activated: no task runs.
        case inactive
        /// Activated: may start tasks.
        case active
        /// Closed for good: no watcher, no task.
        case closed
    }

    /// Everything behind the model's lock.
    struct Core {
        /// The current state.
        var state: State
        /// Each field's last-changed revision.
        var revisions: [State.Field: UInt64] = [:]
        /// The global revision.
        var revision: UInt64 = 0
        /// Where the model is in its life.
        var lifecycle: Lifecycle = .inactive
        /// The leases, by token.
        var registrations: [UInt64: Registration<State>] = [:]
        /// ``registrations`` as an array, cached for the collector; nil after a change until it rebuilds it.
        var registrationList: [Registration<State>]?
        /// The token of the next lease.
        var nextToken: UInt64 = 1
        /// The hub, while there is a watcher.
        var hub: Hub<State>?
        /// The collector task, while there is a hub.
        var collector: Task<Void, Never>?
        /// Tasks started with ``spawn(_:)`` and not finished, by id.
        var tasks: [UInt64: Task<Void, Never>] = [:]
        /// The id of the next task.
        var nextTaskID: UInt64 = 0
    }

    /// The model's state, revisions, leases and tasks.
    let core: Lock<Core>
    /// Counters shared with the models created with the same instance.
    public let stats: ObservationStats
    /// Work started by the first ``activate()``.
    private let onActivate: (@Sendable (ObservableModel<State>) async -> Void)?
    /// Called under the model's lock after every turn that changed something (store bookkeeping).
    private let onChange: (@Sendable (State, Set<State.Field>) -> Void)?

    /// Creates a model holding `state`. Does no I/O and starts no task.
    /// - Parameters:
    ///   - stats: where live hubs, collectors, watchers and tasks are counted.
    ///   - onActivate: work to run (as a model task) on the first ``activate()``, e.g. loading
    ///     stored facts; cancelled by ``close()``.
    public convenience init(
        _ state: State, stats: ObservationStats = ObservationStats(),
        onActivate: (@Sendable (ObservableModel<State>) async -> Void)? = nil
    ) {
        self.init(state, stats: stats, onActivate: onActivate, onChange: nil)
    }

    /// A model with a change callback (the ``ModelStore`` keeps the view model in step with it).
    init(
        _ state: State, stats: ObservationStats,
        onActivate: (@Sendable (ObservableModel<State>) async -> Void)?,
        onChange: (@Sendable (State, Set<State.Field>) -> Void)?
    ) {
        self.core = Lock(Core(state: state))
        self.stats = stats
        self.onActivate = onActivate
        self.onChange = onChange
    }

    // MARK: Reading

    /// The current state (a value).
    public var state: State { self.core.withLock { $0.state } }
    /// The global revision: bumped once per turn that changed at least one field.
    public var revision: UInt64 { self.core.withLock { $0.revision } }
    /// Whether the model is inactive, active or closed.
    public var lifecycle: Lifecycle { self.core.withLock { $0.lifecycle } }
    /// Watchers currently holding a lease.
    public var watcherCount: Int { self.core.withLock { $0.registrations.count } }
    /// Tasks started with ``spawn(_:)`` that have not finished.
    public var taskCount: Int { self.core.withLock { $0.tasks.count } }

    /// The revision at which `field` last changed (0: never since creation).
    public func revision(of field: State.Field) -> UInt64 {
        self.core.withLock { $0.revisions[field] ?? 0 }
    }

    /// The whole state with the global revision and each field's revision (0: never changed), read
    /// under one lock (what `GetStatus` sends).
    public func stateWithRevisions() -> (state: State, revision: UInt64, revisions: [State.Field: UInt64]) {
        self.core.withLock { ($0.state, $0.revision, $0.revisions) }
    }

    /// A consistent snapshot of some fields (nil: all) as a message with generation 0, for
    /// one-shot reads such as Varlink `GetState`.
    public func snapshot(fields: Set<State.Field>? = nil) -> WatchMessage<State> {
        let wanted = fields.flatMap { $0.isEmpty ? nil : $0 } ?? Set(State.Field.allCases)
        let (revision, values) = self.read(wanted)
        return WatchMessage(generation: 0, globalRevision: revision, isSnapshot: true, fields: values)
    }

    /// The values of `fields` with their revisions, and the global revision, under one lock.
    func read(_ fields: Set<State.Field>) -> (UInt64, [State.Field: FieldUpdate<State.Value>]) {
        self.core.withLock { core in
            var values: [State.Field: FieldUpdate<State.Value>] = [:]
            values.reserveCapacity(fields.count)
            for field in fields {
                values[field] = FieldUpdate(revision: core.revisions[field] ?? 0, value: core.state.value(of: field))
            }
            return (core.revision, values)
        }
    }

    // MARK: Writing

    /// Changes the state in one owner turn and returns the fields that changed.
    ///
    /// Fields whose new value equals the old one are not changed: writing an equal value bumps no
    /// revision and reaches no watcher.
    @discardableResult
    public func update<E: Error>(_ body: (inout State) throws(E) -> Void) throws(E) -> Set<State.Field> {
        try self.core.withLock { (core: inout Core) throws(E) -> Set<State.Field> in
            var next = core.state
            try body(&next)
            var changed: Set<State.Field> = []
            for field in State.Field.allCases where next.differs(from: core.state, in: field) {
                changed.insert(field)
            }
            if changed.isEmpty { return [] }
            core.revision &+= 1
            for field in changed { core.revisions[field] = core.revision }
            core.state = next
            if let hub = core.hub {
                var fields: [State.Field: FieldUpdate<State.Value>] = [:]
                fields.reserveCapacity(changed.count)
                for field in changed { fields[field] = FieldUpdate(revision: core.revision, value: next.value(of: field)) }
                hub.post(Emission(revision: core.revision, fields: fields, at: .now))
            }
            if core.lifecycle != .closed, let onChange = self.onChange { onChange(next, changed) }
            return changed
        }
    }

    // MARK: Watching

    /// Starts watching.
    /// - Parameters:
    ///   - fields: the fields this watcher depends on; nil or empty means every field.
    ///   - policy: ``WatchPolicy/coalesced`` (default) or ``WatchPolicy/immediate``.
    ///   - outputCap: queued messages (immediate) or unread owner turns (coalesced) beyond which
    ///     the watcher is dropped as a slow consumer.
    /// - Returns: a watcher whose first message is a snapshot of the watched fields. On a closed
    ///   model the watcher has already ended (``WatchEnd/modelClosed``).
    public func watch(
        fields: Set<State.Field>? = nil, policy: WatchPolicy = .coalesced,
        outputCap: Int = WatchPolicy.defaultOutputCap
    ) -> Watcher<State> {
        let watcher = Watcher<State>(fields: fields, policy: policy, outputCap: outputCap, stats: self.stats)
        watcher.attach(to: self, advanceGeneration: false)
        return watcher
    }

    /// What a registration hands the watcher.
    struct Lease {
        /// The lease's token, to release it.
        var token: UInt64
        /// The global revision at registration.
        var revision: UInt64
        /// The watched fields' values at registration (immediate watchers only).
        var values: [State.Field: FieldUpdate<State.Value>]
    }

    /// Registers a watcher (called under the watcher's lock) and captures a consistent snapshot.
    func register(
        _ watcher: Watcher<State>, generation: UInt64, fields: Set<State.Field>, captureValues: Bool
    ) -> Lease? {
        self.core.withLock { core -> Lease? in
            guard core.lifecycle != .closed else { return nil }
            let token = core.nextToken
            core.nextToken &+= 1
            core.registrations[token] = Registration(watcher: watcher, generation: generation)
            core.registrationList = nil
            if core.hub == nil {
                let hub = Hub<State>(stats: self.stats)
                core.hub = hub
                self.stats.collectorCreated()
                core.collector = Task { [self] in
                    defer { self.stats.collectorFinished() }
                    await self.collect(hub)
                }
            }
            var values: [State.Field: FieldUpdate<State.Value>] = [:]
            if captureValues {
                for field in fields {
                    values[field] = FieldUpdate(revision: core.revisions[field] ?? 0, value: core.state.value(of: field))
                }
            }
            return Lease(token: token, revision: core.revision, values: values)
        }
    }

    /// Releases a lease; the last one tears the hub down. Harmless for an unknown token.
    func unregister(_ token: UInt64) {
        let teardown: (Hub<State>, Task<Void, Never>?)? = self.core.withLock { core in
            guard core.registrations.removeValue(forKey: token) != nil else { return nil }
            core.registrationList = nil
            guard core.registrations.isEmpty, let hub = core.hub else { return nil }
            let collector = core.collector
            core.hub = nil
            core.collector = nil
            return (hub, collector)
        }
        if let (hub, collector) = teardown {
            hub.bell.close()
            collector?.cancel()
        }
    }

    /// The collector: drains owner turns and fans them out, until its hub is torn down.
    private func collect(_ hub: Hub<State>) async {
        while await hub.bell.wait() {
            let emissions = hub.takeAll()
            if emissions.isEmpty { continue }
            let batch = Batch(emissions)
            let targets: [Registration<State>]? = self.core.withLock { core in
                guard core.hub === hub else { return nil }
                if let list = core.registrationList { return list }
                let list = Array(core.registrations.values)
                core.registrationList = list
                return list
            }
            guard let targets else { return }
            for registration in targets {
                registration.watcher?.deliver(batch, generation: registration.generation)
            }
        }
    }

    // MARK: Lifecycle

    /// Marks the model active and, the first time, starts its activation work. Idempotent:
    /// returns true only for the call that activated it (false when already active or closed).
    @discardableResult
    public func activate() -> Bool {
        let first = self.core.withLock { core -> Bool in
            guard core.lifecycle == .inactive else { return false }
            core.lifecycle = .active
            return true
        }
        if first, let onActivate = self.onActivate {
            self.spawn { [self] in await onActivate(self) }
        }
        return first
    }

    /// Starts a task owned by this model: ``close()`` cancels it. Only an active model starts
    /// tasks; returns false (and starts nothing) otherwise.
    @discardableResult
    public func spawn(_ operation: @escaping @Sendable () async -> Void) -> Bool {
        self.core.withLock { core -> Bool in
            guard core.lifecycle == .active else { return false }
            let id = core.nextTaskID
            core.nextTaskID &+= 1
            let stats = self.stats
            stats.modelTaskStarted()
            // The task removes itself when done; inserting under the same lock comes first.
            core.tasks[id] = Task { [weak self] in
                defer {
                    _ = self?.core.withLock { $0.tasks.removeValue(forKey: id) }
                    stats.modelTaskFinished()
                }
                await operation()
            }
            return true
        }
    }

    /// Ends the model: every watcher finishes with ``WatchEnd/modelClosed``, the collector and
    /// every spawned task are cancelled. Model removal and shutdown both land here; safe twice.
    public func close() {
        let taken: ([Registration<State>], [Task<Void, Never>], Hub<State>?, Task<Void, Never>?)? =
            self.core.withLock { core in
                guard core.lifecycle != .closed else { return nil }
                core.lifecycle = .closed
                let registrations = Array(core.registrations.values)
                let tasks = Array(core.tasks.values)
                let taken = (registrations, tasks, core.hub, core.collector)
                core.registrations = [:]
                core.registrationList = nil
                core.hub = nil
                core.collector = nil
                return taken
            }
        guard let (registrations, tasks, hub, collector) = taken else { return }
        hub?.bell.close()
        collector?.cancel()
        for task in tasks { task.cancel() }
        for registration in registrations { registration.watcher?.finish(.modelClosed) }
    }
}

/// The view model: the daemon's single source of truth.
public typealias ViewModel = ObservableModel<ViewState>
/// A per-meter model, kept in a ``ModelStore``.
public typealias MeterModel = ObservableModel<MeterState>
