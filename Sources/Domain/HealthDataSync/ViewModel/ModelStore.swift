import Locking

/// Holds the per-meter models and keeps the view model's `meters`, `sync` and `errors` fields in
/// step with them.
///
/// Per-meter state is written through the meter's model (``model(for:)``); each such turn also
/// updates the view model in the same call, so a watcher of the view model and a watcher of the
/// meter model see the same facts. Removing a model (forgetting a meter) or ``shutdown()`` closes
/// it: its watchers end and every task it started is cancelled.
public final class ModelStore: Sendable {
    /// The daemon's view model (every meter's state appears in its `meters` field).
    public let viewModel: ViewModel
    /// The meter models, by meter.
    private let models = Lock<[MeterID: MeterModel]>([:])
    /// Activation work handed to each new meter model.
    private let onActivate: (@Sendable (MeterModel) async -> Void)?

    /// - Parameters:
    ///   - viewModel: the daemon's view model; its ``ObservableModel/stats`` are shared with every
    ///     meter model this store creates.
    ///   - onActivate: activation work for each new meter model (run on its ``ObservableModel/activate()``).
    public init(viewModel: ViewModel, onActivate: (@Sendable (MeterModel) async -> Void)? = nil) {
        self.viewModel = viewModel
        self.onActivate = onActivate
    }

    /// The observation counters shared by the view model and every meter model.
    public var stats: ObservationStats { self.viewModel.stats }

    /// The model of a known meter.
    public func model(for id: MeterID) -> MeterModel? {
        self.models.withLock { $0[id] }
    }

    /// Known meters, sorted.
    public var meterIDs: [MeterID] { self.models.withLock { $0.keys.sorted() } }

    /// The meter's model, created (inactive, no I/O, no task) with `initial` when new. The new
    /// meter appears in the view model's `meters` field at once.
    @discardableResult
    public func model(for identity: MeterIdentity, initial: MeterState? = nil) -> MeterModel {
        let id = identity.id
        // Under the store's lock (order: store, meter model, view model) so a concurrent remove
        // cannot interleave with the meter's first appearance in the view model.
        return self.models.withLock { models in
            if let existing = models[id] { return existing }
            let viewModel = self.viewModel
            let model = MeterModel(
                initial ?? MeterState(identity: identity), stats: self.viewModel.stats, onActivate: self.onActivate,
                onChange: { state, changed in
                    // Runs under the meter model's lock, so meter turns reach the view model in
                    // order, and never after the meter model closed.
                    viewModel.update { view in
                        let previousError = view.meters[state.id]?.lastError
                        view.setMeter(state)
                        if changed.contains(.lastError), let error = state.lastError, error != previousError {
                            var error = error
                            if error.meter == nil { error.meter = state.id }
                            view.record(error)
                        }
                    }
                })
            models[id] = model
            let state = model.state
            self.viewModel.update { $0.setMeter(state) }
            return model
        }
    }

    /// Forgets a meter's model: closes it (watchers end with ``WatchEnd/modelClosed``, its tasks are
    /// cancelled) and removes it from the view model. Returns false for an unknown meter; safe twice.
    @discardableResult
    public func remove(_ id: MeterID) -> Bool {
        self.models.withLock { models in
            guard let model = models.removeValue(forKey: id) else { return false }
            model.close()
            self.viewModel.update { $0.removeMeter(id) }
            return true
        }
    }

    /// Removes every meter model.
    public func removeAll() {
        self.models.withLock { models in
            for (id, model) in models {
                model.close()
                self.viewModel.update { $0.removeMeter(id) }
            }
            models = [:]
        }
    }

    /// Daemon shutdown: removes every meter model and closes the view model. Safe twice.
    public func shutdown() {
        self.removeAll()
        self.viewModel.close()
    }
}
