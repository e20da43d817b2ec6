internal import Glibc

/// A pthread condition variable for a ``Lock``: a thread (never a task of the cooperative pool)
/// blocks in ``Lock/wait(for:until:)`` until the locked value says go; whoever changes the value
/// so that it may calls ``broadcast()``.
public final class Condition: @unchecked Sendable {
    // Invariant that makes the @unchecked Sendable sound: pthread_cond_t is made for use from
    // several threads; it is only waited on with a Lock's mutex held.
    let cond: UnsafeMutablePointer<pthread_cond_t>

    public init() {
        self.cond = .allocate(capacity: 1)
        self.cond.initialize(to: pthread_cond_t())
        let rc = pthread_cond_init(self.cond, nil)
        precondition(rc == 0, "pthread_cond_init failed: \(rc)")
    }

    deinit {
        pthread_cond_destroy(self.cond)
        self.cond.deinitialize(count: 1)
        self.cond.deallocate()
    }

    /// Wakes every thread waiting on it (each checks its own condition again).
    public func broadcast() {
        pthread_cond_broadcast(self.cond)
    }
}

extension Lock {
    /// Blocks the calling thread until `ready` holds for the value (checked under the lock, again
    /// after each ``Condition/broadcast()``).
    public func wait(for condition: Condition, until ready: (inout Value) -> Bool) {
        pthread_mutex_lock(self.mutex)
        defer { pthread_mutex_unlock(self.mutex) }
        while !ready(&self.value) {
            pthread_cond_wait(condition.cond, self.mutex)
        }
    }
}
