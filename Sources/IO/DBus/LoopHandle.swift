internal import CDBus
import Glibc
import Locking

/// Work for the event-loop thread. It receives the loop's state, or nil when the connection is
/// already closed (then it must fail whatever it was going to do, on the calling thread).
typealias LoopJob = @Sendable (LoopCore?) -> Void

/// The thread-safe side of the event loop: a job queue plus an eventfd that wakes the loop's `poll`.
final class LoopHandle: Sendable {
    /// Jobs waiting for the loop, and whether the loop still takes them.
    private struct Queue {
        /// Jobs in the order they were queued.
        var jobs: [LoopJob] = []
        /// The loop ended: new jobs run at once with nil.
        var closed = false
    }

    private let queue = Lock(Queue())
    /// Written (under the queue lock) only while the queue is open; the loop closes it after closing the queue.
    let wakeFD: Int32

    /// Creates the eventfd; throws ``DBusError/Kind/connectionFailed`` when it cannot.
    init() throws(DBusError) {
        let fd = cdbus_eventfd()
        guard fd >= 0 else {
            throw DBusError(
                kind: .connectionFailed, name: DBusError.Names.failed,
                message: "Creating the D-Bus event loop's eventfd failed (errno \(errno)).")
        }
        self.wakeFD = fd
    }

    /// Runs `job` on the loop thread, or right here with nil when the loop has ended.
    func enqueue(_ job: @escaping LoopJob) {
        let accepted = self.queue.withLock { queue -> Bool in
            guard !queue.closed else { return false }
            queue.jobs.append(job)
            if queue.jobs.count == 1 {
                var one: UInt64 = 1
                _ = write(self.wakeFD, &one, MemoryLayout<UInt64>.size)
            }
            return true
        }
        if !accepted { job(nil) }
    }

    /// On the loop thread: removes and returns the queued jobs, in order.
    func takeJobs() -> [LoopJob] {
        self.queue.withLock { queue in
            let jobs = queue.jobs
            queue.jobs = []
            return jobs
        }
    }

    /// Refuses further jobs and returns those still queued; after this nobody writes to `wakeFD`.
    func closeQueue() -> [LoopJob] {
        self.queue.withLock { queue in
            queue.closed = true
            let jobs = queue.jobs
            queue.jobs = []
            return jobs
        }
    }

    /// Runs `body` on the loop thread and returns its result.
    func onLoop<T: Sendable>(_ body: @escaping @Sendable (LoopCore?) -> T) async -> T {
        await withCheckedContinuation { continuation in
            self.enqueue { core in continuation.resume(returning: body(core)) }
        }
    }
}

/// Connection-wide state readable from any thread.
final class ConnectionState: Sendable {
    /// Whether the connection is up, its unique name, and the tasks waiting for it to end.
    private struct State {
        var connected = false
        var uniqueName = ""
        var nextWaiter: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    }

    /// The connection's shared state.
    private let state = Lock(State())

    /// True from a successful connect until the bus connection is lost or closed.
    var isConnected: Bool { self.state.withLock { $0.connected } }
    /// The bus's name for this connection (`:1.42`); empty before connecting.
    var uniqueName: String { self.state.withLock { $0.uniqueName } }

    /// Records a successful connection and its unique name.
    func markConnected(uniqueName: String) {
        self.state.withLock {
            $0.connected = true
            $0.uniqueName = uniqueName
        }
    }

    /// Records the end of the connection and resumes everyone in ``waitUntilDisconnected()``.
    func markDisconnected() {
        let waiters = self.state.withLock { state in
            state.connected = false
            let waiters = state.waiters
            state.waiters = [:]
            return waiters
        }
        for waiter in waiters.values { waiter.resume() }
    }

    /// Returns once the connection is down (at once when it already is), or when the task is cancelled.
    func waitUntilDisconnected() async {
        let id = self.state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = self.state.withLock { state -> Bool in
                    guard state.connected, !Task.isCancelled else { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = self.state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }
}

/// One outstanding method call: resumes its continuation exactly once, whichever of reply, timeout,
/// disconnect or cancellation comes first.
///
/// `@unchecked Sendable` invariant: `pending` and `core` are only touched on the loop thread; the
/// continuation and outcome are guarded by `slot`; `loopHook` is immutable.
final class CallState: @unchecked Sendable {
    /// The reply's arguments, or why there is none.
    typealias Outcome = Result<[DBusValue], DBusError>

    /// The waiting caller (once installed) and the outcome (once known); whichever comes second resumes.
    private struct Slot {
        var continuation: CheckedContinuation<Outcome, Never>?
        var outcome: Outcome?
    }

    /// The continuation and outcome, guarded.
    private let slot = Lock(Slot())
    /// The libdbus pending call (one reference, owned here) while the call is in flight.
    var pending: OpaquePointer?
    /// The loop the call was sent on, while it is alive.
    weak var core: LoopCore?
    /// Runs on the loop thread when the reply is dispatched, before the caller resumes.
    let loopHook: (@Sendable (LoopCore, Outcome) -> Void)?
    /// The call in words ("Calling Connect on /org/bluez/hci0/dev_…"), for error messages.
    let what: String

    /// A call described by `what`, with an optional hook run on the loop thread at its outcome.
    init(what: String, loopHook: (@Sendable (LoopCore, Outcome) -> Void)? = nil) {
        self.what = what
        self.loopHook = loopHook
    }

    /// True once an outcome was recorded.
    var isFinished: Bool {
        self.slot.withLock { slot in
            if case .some = slot.outcome { return true }
            return false
        }
    }

    /// Attaches the caller's continuation; resumes it at once when the outcome came first.
    func install(_ continuation: CheckedContinuation<Outcome, Never>) {
        let early = self.slot.withLock { slot -> Outcome? in
            if let outcome = slot.outcome { return outcome }
            slot.continuation = continuation
            return nil
        }
        if let early { continuation.resume(returning: early) }
    }

    /// Records the outcome and resumes the caller; only the first outcome counts.
    func finish(_ outcome: Outcome) {
        let continuation = self.slot.withLock { slot -> CheckedContinuation<Outcome, Never>? in
            if case .some = slot.outcome { return nil }
            slot.outcome = outcome
            let continuation = slot.continuation
            slot.continuation = nil
            return continuation
        }
        continuation?.resume(returning: outcome)
    }
}
