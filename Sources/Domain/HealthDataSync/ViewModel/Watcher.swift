import Locking

/// A subscription to some fields of one model: an `AsyncSequence` of ``WatchMessage``s.
///
/// The first message is a snapshot of the watched fields, then changes only. The sequence ends
/// (``next()`` returns nil, ``endReason`` says why) on ``cancel()``, when the consuming task is
/// cancelled, when the model closes, or when the watcher stays over its output cap. One task
/// consumes a watcher; any task may cancel or rebind it.
public final class Watcher<State: ObservableState>: AsyncSequence, Sendable {
    /// Each element is one message.
    public typealias Element = WatchMessage<State>
    /// The sequence never throws: it ends.
    public typealias Failure = Never

    /// The watched fields (every field when the watch named none).
    public let fields: Set<State.Field>
    /// How changes are delivered.
    public let policy: WatchPolicy
    /// The buffer bound beyond which the watcher is dropped (at least 1).
    public let outputCap: Int
    /// Whether every field is watched (no filtering needed).
    private let watchesAll: Bool
    /// Where the watcher is counted.
    private let stats: ObservationStats
    /// Rung when a delivery or a rebind leaves something to read; closed at the end.
    private let bell = Doorbell()

    /// The watcher's state behind its lock.
    struct Inner {
        /// The bound model; nil after the end.
        var model: ObservableModel<State>?
        /// The lease's token on ``model``.
        var token: UInt64 = 0
        /// The binding generation.
        var generation: UInt64 = 1
        /// Why the watcher ended; nil while it runs.
        var end: WatchEnd?
        // Coalesced: which fields changed since the last delivery (bounded by the field count).
        var needsSnapshot = true
        var delivered: [State.Field: UInt64] = [:]
        var pending: Set<State.Field> = []
        var pendingSince: ContinuousClock.Instant?
        var unreadTurns = 0
        // Immediate: the snapshot taken at attach, then every accepted emission.
        var snapshot: WatchMessage<State>?
        var baseline: UInt64 = 0
        var queue = MessageQueue<WatchMessage<State>>()

        /// Drops every buffered message and pending field (on rebind and end).
        mutating func clearBuffers() {
            self.delivered = [:]
            self.pending = []
            self.pendingSince = nil
            self.unreadTurns = 0
            self.snapshot = nil
            self.queue.removeAll()
        }
    }

    /// The watcher's state.
    private let inner = Lock(Inner())
    /// Test seam: runs between a coalesced delivery's read of the model and its bookkeeping,
    /// i.e. while a delivery is in flight.
    let afterRead = Lock<(@Sendable () -> Void)?>(nil)

    /// What a bind did, decided under the lock and acted on after it.
    private enum AttachOutcome {
        case attached(old: (ObservableModel<State>, UInt64)?)
        case modelClosed(old: (ObservableModel<State>, UInt64)?)
        case alreadyEnded
    }

    /// What a delivery asks for after the lock.
    private enum DeliveryOutcome {
        case nothing
        case ring
        case drop
    }

    /// What `next()` does after looking under the lock.
    private enum Step {
        case message(WatchMessage<State>)
        case read(ObservableModel<State>, Set<State.Field>, UInt64, Bool, ContinuousClock.Instant?)
        case finished
        case wait
    }

    /// A watcher of `fields` (nil or empty: every field), counted in `stats`; not bound until attached.
    init(fields: Set<State.Field>?, policy: WatchPolicy, outputCap: Int, stats: ObservationStats) {
        let all = Set(State.Field.allCases)
        let named = fields ?? []
        self.fields = named.isEmpty ? all : named
        self.watchesAll = self.fields == all
        self.policy = policy
        self.outputCap = Swift.max(1, outputCap)
        self.stats = stats
        stats.watcherCreated()
    }

    deinit {
        // A watcher dropped without cancel() releases its lease here.
        let lease = self.inner.withLock { inner in inner.model.map { ($0, inner.token) } }
        if let (model, token) = lease { model.unregister(token) }
        self.stats.watcherDestroyed()
    }

    /// Why the sequence ended; nil while it runs.
    public var endReason: WatchEnd? { self.inner.withLock { $0.end } }
    /// The current binding generation (starts at 1; +1 per rebind).
    public var generation: UInt64 { self.inner.withLock { $0.generation } }
    /// What is buffered: queued messages (immediate) or pending changed fields (coalesced).
    public var bufferedCount: Int {
        self.inner.withLock { inner in
            self.policy == .immediate ? inner.queue.count + (inner.snapshot == nil ? 0 : 1) : inner.pending.count
        }
    }

    /// Ends the sequence. Client cancel, client close and release all land here; safe twice.
    public func cancel() { self.finish(.cancelled) }

    /// Moves this watcher to another model (another meter) on the same connection: pending work
    /// is discarded, the old lease released, the generation advances, and the next message is a
    /// snapshot of the watched fields of `model`. Emissions of the old model that are still in
    /// flight are rejected. Returns false when the watcher has already ended.
    @discardableResult
    public func rebind(to model: ObservableModel<State>) -> Bool {
        self.attach(to: model, advanceGeneration: true)
    }

    /// Binds to `model` (first watch or rebind). The model is registered under the watcher's lock
    /// so no emission of the new binding can arrive before its baseline is set.
    @discardableResult
    func attach(to model: ObservableModel<State>, advanceGeneration: Bool) -> Bool {
        let outcome: AttachOutcome = self.inner.withLock { inner in
            guard inner.end == nil else { return .alreadyEnded }
            let old = inner.model.map { ($0, inner.token) }
            if advanceGeneration { inner.generation &+= 1 }
            inner.clearBuffers()
            inner.needsSnapshot = true
            guard
                let lease = model.register(
                    self, generation: inner.generation, fields: self.fields, captureValues: self.policy == .immediate)
            else {
                inner.model = nil
                inner.end = .modelClosed
                return .modelClosed(old: old)
            }
            inner.model = model
            inner.token = lease.token
            if self.policy == .immediate {
                inner.baseline = lease.revision
                inner.snapshot = WatchMessage(
                    generation: inner.generation, globalRevision: lease.revision, isSnapshot: true, fields: lease.values)
            }
            return .attached(old: old)
        }
        switch outcome {
        case .alreadyEnded:
            return false
        case .modelClosed(let old):
            if let (oldModel, token) = old { oldModel.unregister(token) }
            self.bell.close()
            return false
        case .attached(let old):
            if let (oldModel, token) = old { oldModel.unregister(token) }
            self.bell.ring()
            return true
        }
    }

    /// Ends the watcher with `reason` unless it already ended (the first reason stays).
    func finish(_ reason: WatchEnd) {
        let lease: (ObservableModel<State>, UInt64)?? = self.inner.withLock { inner in
            guard inner.end == nil else { return .none }
            inner.end = reason
            inner.clearBuffers()
            let lease = inner.model.map { ($0, inner.token) }
            inner.model = nil
            return .some(lease)
        }
        guard case .some(let held) = lease else { return }
        if let (model, token) = held { model.unregister(token) }
        if reason == .droppedSlowConsumer { self.stats.watcherDropped() }
        self.bell.close()
    }

    /// Called by the model's collector with one batch of owner turns.
    func deliver(_ batch: Batch<State>, generation: UInt64) {
        let outcome: DeliveryOutcome = self.inner.withLock { inner in
            // A late emission from a previous binding (or after the end) is rejected here.
            guard inner.end == nil, inner.generation == generation else { return .nothing }
            var accepted = false
            switch self.policy {
            case .coalesced:
                for group in batch.groups {
                    var touched = false
                    for field in group.fields where self.watchesAll || self.fields.contains(field) {
                        if batch.latest[field, default: 0] > inner.delivered[field, default: 0] {
                            inner.pending.insert(field)
                            touched = true
                        }
                    }
                    if touched {
                        accepted = true
                        inner.unreadTurns += group.turns
                        if inner.pendingSince.map({ group.firstAt < $0 }) ?? true { inner.pendingSince = group.firstAt }
                    }
                }
                if inner.unreadTurns > self.outputCap { return .drop }
            case .immediate:
                for emission in batch.emissions where emission.revision > inner.baseline {
                    let fields =
                        self.watchesAll
                        ? emission.fields : emission.fields.filter { self.fields.contains($0.key) }
                    if fields.isEmpty { continue }
                    if inner.queue.count >= self.outputCap { return .drop }
                    inner.queue.append(
                        WatchMessage(
                            generation: generation, globalRevision: emission.revision, isSnapshot: false,
                            fields: fields, changedAt: emission.at))
                    accepted = true
                }
            }
            return accepted ? .ring : .nothing
        }
        switch outcome {
        case .nothing: break
        case .ring: self.bell.ring()
        case .drop: self.finish(.droppedSlowConsumer)
        }
    }

    /// The next message, or nil when the watch has ended.
    public func next() async -> WatchMessage<State>? {
        while true {
            let step: Step = self.inner.withLock { inner in
                if inner.end != nil { return .finished }
                switch self.policy {
                case .immediate:
                    if let snapshot = inner.snapshot {
                        inner.snapshot = nil
                        return .message(snapshot)
                    }
                    if let message = inner.queue.popFirst() { return .message(message) }
                    return .wait
                case .coalesced:
                    guard let model = inner.model else { return .finished }
                    if inner.needsSnapshot || !inner.pending.isEmpty {
                        let snapshot = inner.needsSnapshot
                        let wanted = snapshot ? self.fields : inner.pending
                        let since = snapshot ? nil : inner.pendingSince
                        inner.needsSnapshot = false
                        inner.pending = []
                        inner.pendingSince = nil
                        inner.unreadTurns = 0
                        return .read(model, wanted, inner.generation, snapshot, since)
                    }
                    return .wait
                }
            }
            switch step {
            case .message(let message):
                return message
            case .finished:
                return nil
            case .read(let model, let wanted, let generation, let snapshot, let since):
                // Latest values, read outside the watcher's lock; a write that lands meanwhile
                // marks the field pending again, so the last write is never lost.
                let (revision, values) = model.read(wanted)
                if let hook = self.afterRead.withLock({ $0 }) { hook() }
                let message: WatchMessage<State>? = self.inner.withLock { inner in
                    guard inner.end == nil, inner.generation == generation else { return nil }
                    var fresh: [State.Field: FieldUpdate<State.Value>] = [:]
                    for (field, update) in values where snapshot || update.revision > inner.delivered[field, default: 0] {
                        fresh[field] = update
                        inner.delivered[field] = update.revision
                    }
                    if fresh.isEmpty && !snapshot { return nil }
                    return WatchMessage(
                        generation: generation, globalRevision: revision, isSnapshot: snapshot, fields: fresh,
                        changedAt: since)
                }
                if let message { return message }
            case .wait:
                if await self.bell.wait() == false, Task.isCancelled {
                    self.finish(.cancelled)
                    return nil
                }
            }
        }
    }

    /// Iterates the watcher's messages.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let watcher: Watcher<State>
        public mutating func next() async -> WatchMessage<State>? { await self.watcher.next() }
    }

    /// An iterator over this watcher.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(watcher: self) }
}
