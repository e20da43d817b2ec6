import Locking

/// Locked state one task at a time can wait on: whoever changes the state so that the waiter's
/// condition may hold takes `waiter` and resumes it.
protocol HasWaiter: Sendable {
    /// The task waiting for the condition; nil when none is.
    var waiter: CheckedContinuation<Void, Never>? { get set }
}

/// Waiting on the locked state for a condition.
extension Lock where Value: HasWaiter {
    /// Returns once `ready` holds for the locked value, or the task is cancelled.
    func wait(until ready: (Value) -> Bool) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = self.withLock { s -> Bool in
                    if ready(s) || Task.isCancelled { return true }
                    s.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = self.withLock { s -> CheckedContinuation<Void, Never>? in
                defer { s.waiter = nil }
                return s.waiter
            }
            waiter?.resume()
        }
    }
}
