import Synchronization

/// Live-object counters for the observation machinery, so tests and `sugar-bench` can prove that
/// there is one collector per model and that nothing outlives its owner.
///
/// One instance is shared by the models that are created with it (a ``ModelStore`` hands its own
/// to every model it creates); there is no process-wide instance, so independent models and
/// parallel tests never see each other's numbers.
public final class ObservationStats: Sendable {
    private let hubs = Atomic<Int>(0)
    private let collectors = Atomic<Int>(0)
    private let collectorsEver = Atomic<Int>(0)
    private let watchers = Atomic<Int>(0)
    private let modelTasks = Atomic<Int>(0)
    private let dropped = Atomic<Int>(0)

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

    func hubCreated() { self.hubs.add(1, ordering: .relaxed) }
    func hubDestroyed() { self.hubs.subtract(1, ordering: .releasing) }
    func collectorCreated() {
        self.collectors.add(1, ordering: .relaxed)
        self.collectorsEver.add(1, ordering: .relaxed)
    }
    func collectorFinished() { self.collectors.subtract(1, ordering: .releasing) }
    func watcherCreated() { self.watchers.add(1, ordering: .relaxed) }
    func watcherDestroyed() { self.watchers.subtract(1, ordering: .releasing) }
    func modelTaskStarted() { self.modelTasks.add(1, ordering: .relaxed) }
    func modelTaskFinished() { self.modelTasks.subtract(1, ordering: .releasing) }
    /// Counts a watcher disconnected for lag; also for a fan-out that serves watchers itself
    /// (SugarAPI's coalesced `Watch` calls).
    public func watcherDropped() { self.dropped.add(1, ordering: .relaxed) }
}
