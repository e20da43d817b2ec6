import Locking

/// A one-slot wake-up signal between one producer side (any thread) and one waiting task.
///
/// `ring()` never blocks and never allocates a queue: rings that land while nobody waits collapse
/// into one, which is exactly what a coalescing consumer wants. `close()` is permanent.
final class Doorbell: Sendable {
    /// Where the bell is.
    private enum State {
        /// Nobody waits and no ring is pending.
        case idle
        /// A ring is pending for the next wait.
        case rung
        /// A task waits; its continuation is resumed by a ring (true), close or cancel (false).
        case waiting(CheckedContinuation<Bool, Never>)
        /// Closed for good.
        case closed
    }

    /// The bell's state.
    private let state = Lock<State>(.idle)

    /// A bell that is idle.
    init() {}

    /// Wakes the waiter, or leaves a ring for the next ``wait()``.
    func ring() {
        let waiter: CheckedContinuation<Bool, Never>? = self.state.withLock { state in
            switch state {
            case .idle:
                state = .rung
                return nil
            case .rung, .closed:
                return nil
            case .waiting(let continuation):
                state = .idle
                return continuation
            }
        }
        waiter?.resume(returning: true)
    }

    /// Wakes the waiter for good: every later ``wait()`` returns false at once.
    func close() {
        let waiter: CheckedContinuation<Bool, Never>? = self.state.withLock { state in
            defer { state = .closed }
            if case .waiting(let continuation) = state { return continuation }
            return nil
        }
        waiter?.resume(returning: false)
    }

    /// Suspends until a ring (true), or until the bell is closed or the calling task is cancelled
    /// (false). A pending ring is consumed without suspending.
    func wait() async -> Bool {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let immediate: (Bool, CheckedContinuation<Bool, Never>?)? = self.state.withLock { state in
                    switch state {
                    case .rung:
                        state = .idle
                        return (true, nil)
                    case .closed:
                        return (false, nil)
                    case .idle:
                        // Checked under the lock: a cancellation handler that ran before we got
                        // here found no continuation, so we must see the flag now.
                        if Task.isCancelled { return (false, nil) }
                        state = .waiting(continuation)
                        return nil
                    case .waiting(let previous):
                        // A second concurrent waiter is a caller bug; wake the first spuriously
                        // rather than leaking its continuation.
                        state = .waiting(continuation)
                        return (true, previous)
                    }
                }
                if let (value, previous) = immediate {
                    if let previous {
                        previous.resume(returning: value)
                    } else {
                        continuation.resume(returning: value)
                    }
                }
            }
        } onCancel: {
            let waiter: CheckedContinuation<Bool, Never>? = self.state.withLock { state in
                if case .waiting(let continuation) = state {
                    state = .idle
                    return continuation
                }
                return nil
            }
            waiter?.resume(returning: false)
        }
    }
}
