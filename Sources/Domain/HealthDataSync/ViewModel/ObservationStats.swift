import Synchronization

/// Live-object counters for the observation machinery, so tests and `sugar-bench` can prove that
/// there is one collector per model and that nothing outlives its owner.
///
/// One instance is shared by the models that are created with it (a ``ModelStore`` hands its own
/// to every model it creates); there is no process-wide instance, so independent models and
/// parallel tests never see each other's numbers.
public final class ObservationStats: Sendable {
    /// Hubs alive.
    private let hubs = Atomic<Int>(0)
    /// Collector tasks alive.
    private let collectors = Atomic<Int>(0)
    /// Collector tasks ever created.
    private let collectorsEver = Atomic<Int>(0)
    /// Watchers alive.
    private let watchers = Atomic<Int>(0)
    /// Model tasks alive.
    private let modelTasks = Atomic<Int>(0)
    /// Watchers dropped for their output cap.
    private let dropped = Atomic<Int>(0)

    /// Counters at zero.
    public init() {}

    /// Hubs (one per model with at least one watcher) that still exist.
    public var liveHubs: Int { self.hubs.load(ordering: .acquiring) }
    /// Collector tasks created and not yet finished.
    public var liveCollectorTasks: Int { self.collectors.load(ordering: .acquiring) }
    /// Collector tasks ever created.
    public var collectorsStarted: Int { self.collectorsEver.load(ordering: .acquiring) }
    /// ``Watcher`` objects that still exist (ended or not).
    public var liveWatchers: Int { self.watchers.load(ordering: .acquiring) }
    /// Tasks started through ``ObservableModel/spawn(_:)`` (including activation) not yet finished.
    public var liveModelTasks: Int { self.modelTasks.load(ordering: .acquiring) }
    /// Watchers disconnected for staying over their output cap.
    public var droppedWatchers: Int { self.dropped.load(ordering: .acquiring) }

    /// True when no hub, collector, watcher or model task is alive.
    public var isQuiescent: Bool {
        self.liveHubs == 0 && self.liveCollectorTasks == 0 && self.liveWatchers == 0 && self.liveModelTasks == 0
    }

    /// A model's hub was made (its first watcher registered).
    func hubCreated() { self.hubs.add(1, ordering: .relaxed) }
    /// A model's hub went away.
    func hubDestroyed() { self.hubs.subtract(1, ordering: .releasing) }
    /// A collector task was started.
    func collectorCreated() {
        self.collectors.add(1, ordering: .relaxed)
        self.collectorsEver.add(1, ordering: .relaxed)
    }
    /// A collector task ended.
    func collectorFinished() { self.collectors.subtract(1, ordering: .releasing) }
    /// A watcher was made.
    func watcherCreated() { self.watchers.add(1, ordering: .relaxed) }
    /// A watcher went away.
    func watcherDestroyed() { self.watchers.subtract(1, ordering: .releasing) }
    /// A model task was started.
    func modelTaskStarted() { self.modelTasks.add(1, ordering: .relaxed) }
    /// A model task ended.
    func modelTaskFinished() { self.modelTasks.subtract(1, ordering: .releasing) }
    /// Counts a watcher disconnected for lag; also for a fan-out that serves watchers itself
    /// (SugarAPI's coalesced `Watch` calls).
    public func watcherDropped() { self.dropped.add(1, ordering: .relaxed) }
}
