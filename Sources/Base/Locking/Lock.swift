internal import Glibc

/// A value protected by a pthread mutex: `Synchronization.Mutex`'s shape and semantics.
///
/// Why not `Synchronization.Mutex`: in Swift 6.3 on Linux it locks with atomics and futex calls
/// inside the prebuilt, uninstrumented libswiftSynchronization, so ThreadSanitizer never sees the
/// lock and reports every access to the state it protects as a race. A pthread mutex is
/// intercepted by TSan, so `scripts/sanitize thread` checks the real locking instead of needing
/// a suppression per type. Uncontended, a pthread mutex costs about the same.
///
/// Like `Mutex`, the value is handed in and out with `sending`, so a non-`Sendable` value can be
/// protected; the lock itself is `Sendable` for that reason.
///
/// Do not protect an empty value (`Lock(())`, a struct without stored properties): an empty value
/// has no meaningful address, and under `-sanitize=thread` the inout access in `withLock` hands
/// that address to TSan, which then reports races between unrelated accesses. The compiler skips
/// the instrumentation only for types it knows to be empty (swiftlang/swift#35579), not for a
/// generic `Value` that turns out empty at run time. Protect the state itself instead.
public final class Lock<Value: ~Copyable>: @unchecked Sendable {
    // Invariant that makes the @unchecked Sendable sound: `value` is only touched between
    // pthread_mutex_lock and pthread_mutex_unlock (in withLock, and wait(for:until:) in Condition.swift).
    let mutex: UnsafeMutablePointer<pthread_mutex_t>
    var value: Value

    public init(_ initialValue: consuming sending Value) {
        self.value = initialValue
        self.mutex = .allocate(capacity: 1)
        self.mutex.initialize(to: pthread_mutex_t())
        let rc = pthread_mutex_init(self.mutex, nil)
        precondition(rc == 0, "pthread_mutex_init failed: \(rc)")
    }

    deinit {
        pthread_mutex_destroy(self.mutex)
        self.mutex.deinitialize(count: 1)
        self.mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    public func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(self.mutex)
        defer { pthread_mutex_unlock(self.mutex) }
        return try body(&self.value)
    }

    /// Runs `body` only if the lock is free right now; nil when it is held elsewhere.
    public func withLockIfAvailable<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result? {
        guard pthread_mutex_trylock(self.mutex) == 0 else { return nil }
        defer { pthread_mutex_unlock(self.mutex) }
        return try body(&self.value)
    }
}
