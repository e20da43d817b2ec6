import Synchronization

/// A doorbell for the follow feed: a generation that `ring()` advances and `wait(after:)` waits
/// for. `FollowReadings` waits on one of its own, rung by the view model's `readingCount` (a commit)
/// and by the service's attribution bell (an attribution or an assignment changed in the past: a
/// reading's person changed, the feed got entries without a commit).
final class FeedSignal: Sendable {
    /// Everything behind the lock.
    private struct State {
        /// Advanced by every ring.
        var generation: UInt64 = 0
        /// Set by ``close()``, for good.
        var closed = false
        /// The id of the last waiter registered.
        var nextWaiter: UInt64 = 0
        /// The suspended waiters, by id.
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    }

    /// The signal's state.
    private let state = Mutex(State())

    /// A signal at generation 0, open.
    init() {}

    /// The current generation: take it before reading, then wait after it.
    var generation: UInt64 { self.state.withLock { $0.generation } }

    /// Advances the generation and wakes every waiter.
    func ring() { self.wake { $0.generation &+= 1 } }

    /// Ends the signal: waiters (now and later) return false.
    func close() { self.wake { $0.closed = true } }

    /// Applies `change` and resumes every waiter.
    private func wake(_ change: (inout State) -> Void) {
        let waiters = self.state.withLock { state in
            change(&state)
            let waiters = state.waiters
            state.waiters = [:]
            return waiters
        }
        for waiter in waiters.values { waiter.resume() }
    }

    /// Returns true once the generation passed `seen`, false when the signal closed or the task
    /// was cancelled.
    func wait(after seen: UInt64) async -> Bool {
        let id = self.state.withLock { state in
            state.nextWaiter &+= 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = self.state.withLock { state in
                    if state.generation != seen || state.closed || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            self.state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
        return self.state.withLock { $0.generation != seen && !$0.closed } && !Task.isCancelled
    }
}
