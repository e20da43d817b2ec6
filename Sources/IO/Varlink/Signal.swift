import Locking

/// A one-shot event that any number of tasks can wait for, fired from any thread.
final class OneShotSignal: Sendable {
    /// Guarded by ``state``: whether it fired, and the continuations of the tasks waiting.
    private struct State {
        var fired = false
        /// The id the next waiter gets; ids let a cancelled waiter remove its own continuation.
        var nextID: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Lock(State())

    /// True once ``fire()`` ran; never false again.
    var hasFired: Bool { self.state.withLock { $0.fired } }

    /// Fires the signal and resumes every waiter; firing again does nothing.
    func fire() {
        let waiters = self.state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard !state.fired else { return [] }
            state.fired = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the signal fired, or (when `cancellable`) once the calling task is cancelled.
    func wait(cancellable: Bool = true) async {
        let id = self.state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        if cancellable {
            await withTaskCancellationHandler {
                await self.suspend(id: id, checkCancellation: true)
            } onCancel: {
                self.resume(id: id)
            }
        } else {
            await self.suspend(id: id, checkCancellation: false)
        }
    }

    /// Parks the task under `id` unless the signal already fired (or, with `checkCancellation`, the
    /// task is already cancelled): the check and the parking happen under one lock, so no fire is missed.
    private func suspend(id: UInt64, checkCancellation: Bool) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = self.state.withLock { state -> Bool in
                if state.fired || (checkCancellation && Task.isCancelled) { return true }
                state.waiters[id] = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    /// Resumes the waiter `id` early (its task was cancelled); a no-op when it already resumed.
    private func resume(id: UInt64) {
        let waiter = self.state.withLock { $0.waiters.removeValue(forKey: id) }
        waiter?.resume()
    }
}
