import Synchronization

/// A doorbell for the follow feed: a generation that `ring()` advances and `wait(after:)` waits
/// for. `FollowReadings` waits on one of its own, rung by the view model's `readingCount` (a commit)
/// and by the service's attribution bell (an attribution or an assignment changed in the past: a
/// reading's person changed, the feed got entries without a commit).
final class FeedSignal: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var closed = false
        var nextWaiter: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Mutex(State())

    init() {}

    /// The current generation: take it before reading, then wait after it.
    var generation: UInt64 { self.state.withLock { $0.generation } }

    /// Advances the generation and wakes every waiter.
    func ring() { self.wake { $0.generation &+= 1 } }

    /// Ends the signal: waiters (now and later) return false.
    func close() { self.wake { $0.closed = true } }

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
