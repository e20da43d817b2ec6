public import HealthDataSync
import Locking

/// The people `GetStatus` names (the person each meter is assigned to now), read from the store
/// once and kept until a call that may change them: `GetStatus` then never waits behind the
/// store's commits (50 meters finishing their syncs at once queue a commit each, with an fsync).
///
/// Only the interface's admin methods change assignments and people (and `Restore` swaps the
/// whole database), so the service calls ``invalidate()`` before and after each of them; a read
/// that raced with a change is not kept (the generation moved meanwhile).
public final class StatusPeople: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var people: [MeterID: String]?
    }

    private let state = Lock(State())

    /// Nothing cached yet: the first `GetStatus` reads the store.
    public init() {}

    /// The cached people, or `load()`'s answer (kept when no change happened meanwhile); nil when
    /// the store could not say.
    public func people(_ load: () async -> [MeterID: String]?) async -> [MeterID: String]? {
        let (generation, cached) = self.state.withLock { ($0.generation, $0.people) }
        if let cached { return cached }
        let loaded = await load()
        if let loaded {
            self.state.withLock { state in
                if state.generation == generation { state.people = loaded }
            }
        }
        return loaded
    }

    /// Forgets the cached people: the next `GetStatus` reads them again.
    public func invalidate() {
        self.state.withLock { state in
            state.generation &+= 1
            state.people = nil
        }
    }
}
