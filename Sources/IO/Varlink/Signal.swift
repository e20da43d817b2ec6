import Locking

/// A one-shot event that any number of tasks can wait for, fired from any thread.
final class OneShotSignal: Sendable {
    private struct State {
        var fired = false
        var nextID: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Lock(State())

    var hasFired: Bool { self.state.withLock { $0.fired } }

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

    private func resume(id: UInt64) {
        let waiter = self.state.withLock { $0.waiters.removeValue(forKey: id) }
        waiter?.resume()
    }
}
