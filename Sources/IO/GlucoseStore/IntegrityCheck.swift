internal import CSQLite
import HealthDataSync
import Locking

/// Runs `PRAGMA quick_check` or `PRAGMA integrity_check` on a read-only connection of its own, on
/// a thread of its own: the check reads every page of the file (seconds on a large store, longer
/// on an SD card), so it must hold neither the store's connection (writes go on meanwhile: WAL)
/// nor a thread of Swift's cooperative pool. Cancelling the calling task interrupts the check
/// (`sqlite3_interrupt`), which then ends as `failed`.
enum IntegrityCheck {
    /// The handle the check runs on, for the cancellation handler (`sqlite3_interrupt` is safe from
    /// any thread while the connection is open). The `Connection` stays confined to the check's
    /// thread, which clears the handle here (under the lock) before it closes the connection, so an
    /// interrupt never meets a closed handle.
    private final class Running: Sendable {
        /// The open handle (as a bit pattern, so the state stays `Sendable`) and whether the task was cancelled.
        struct State {
            var handle: UInt?
            var cancelled = false
        }
        /// The handle and the cancellation, guarded.
        let state = Lock(State())

        /// Marks the check cancelled and interrupts it if it is running.
        func interrupt() {
            self.state.withLock { state in
                state.cancelled = true
                if let handle = state.handle.flatMap({ OpaquePointer(bitPattern: $0) }) { sqlite3_interrupt(handle) }
            }
        }
    }

    /// The lines SQLite reported (`["ok"]` when the file is sound), or why the check could not run.
    /// A file so damaged that SQLite refuses the pragma itself (`SQLITE_CORRUPT`) comes back as
    /// one problem line.
    static func run(path: String, kind: StorageCheck.Kind, busyTimeoutMilliseconds: Int) async -> Result<[String], StoreError> {
        let running = Running()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<[String], StoreError>, Never>) in
                let rc = startDetachedThread {
                    continuation.resume(returning: Self.check(path: path, kind: kind, busy: busyTimeoutMilliseconds, running))
                }
                if rc != 0 {
                    continuation.resume(
                        returning: .failure(StoreError(.other, "Checking \(path) failed: no thread for the check (error \(rc)).")))
                }
            }
        } onCancel: {
            running.interrupt()
        }
    }

    /// The check's thread body: opens the file read-only (never creating it), runs the pragma and
    /// closes; a cancellation before or during the pragma ends as a failure.
    private static func check(path: String, kind: StorageCheck.Kind, busy: Int, _ running: Running) -> Result<[String], StoreError> {
        let pragma = kind == .quick ? "PRAGMA quick_check" : "PRAGMA integrity_check"
        let db: Connection
        do throws(StoreError) {
            db = try Connection(path: path, readOnly: true, create: false, busyTimeoutMilliseconds: busy)
        } catch {
            return .failure(error)
        }
        let handle = db.handle.map { UInt(bitPattern: $0) }
        let go: Bool = running.state.withLock { state in
            if state.cancelled { return false }
            state.handle = handle
            return true
        }
        defer {
            running.state.withLock { $0.handle = nil }
            db.close()
        }
        guard go else { return .failure(StoreError(.other, "The check of \(path) was cancelled.")) }
        do throws(StoreError) {
            return .success(try db.textColumn(pragma, "Checking the integrity of \(path)"))
        } catch {
            if running.state.withLock({ $0.cancelled }) {
                return .failure(StoreError(.other, "The check of \(path) was cancelled."))
            }
            if error.code == .corrupt { return .success([error.message]) }
            return .failure(error)
        }
    }
}

extension SQLiteReadingStore {
    /// Checks the database file without holding up the store: on a read-only connection and a
    /// thread of its own (reads and writes go on meanwhile). While it runs, ``health()`` shows it
    /// as `running`; afterwards its result. A check that finds damage turns health `degraded` with
    /// code `corrupt` (readings are still read and stored; nothing is deleted or rewritten) until a
    /// later check of the same database finds it sound, or another database takes its place
    /// (restore, replaced file). Cancelling the calling task stops the check (`failed`).
    /// - Parameter started: called with the health showing the check `running`, before it reads.
    /// - Returns: the finished check.
    public func check(
        _ kind: StorageCheck.Kind, reason: StorageCheck.Reason, started: @Sendable (StorageHealth) -> Void = { _ in }
    ) async -> StorageCheck {
        self.checkSerial += 1
        let serial = self.checkSerial
        var check = StorageCheck(kind: kind, reason: reason, result: .running, started: self.options.now(), databaseId: self.databaseId)
        self.currentCheck = check
        started(self.healthWithChecks())
        let outcome = await IntegrityCheck.run(path: self.path, kind: kind, busyTimeoutMilliseconds: self.options.busyTimeoutMilliseconds)
        check.finished = self.options.now()
        switch outcome {
        case .success(let lines) where lines == ["ok"]:
            check.result = .ok
        case .success(let lines):
            check.result = .damaged
            check.problemCount = lines.count
            check.problems = Array(lines.prefix(StorageCheck.keptProblems))
        case .failure(let error):
            check.result = .failed
            check.message = error.message
        }
        if serial == self.checkSerial { self.currentCheck = check }
        if check.result == .ok || check.result == .damaged, check.databaseId == self.databaseId {
            self.verdict = check
        }
        return check
    }

    /// ``healthState`` with the checks laid over it: the current check, and damage found by the
    /// last finished one (while the same database is open).
    func healthWithChecks() -> StorageHealth {
        var health = self.healthState
        health.check = self.currentCheck
        if let verdict = self.verdict, verdict.result == .damaged, verdict.databaseId == self.databaseId, health.status == .ok {
            let first = verdict.problems.first.map { ", first: \($0)" } ?? ""
            let at = verdict.finished?.isoString ?? verdict.started.isoString
            health.status = .degraded
            health.error = StoreError(
                .corrupt,
                "The integrity check of \(self.path) at \(at) found \(verdict.problemCount) problem(s)\(first). Readings are still "
                    + "read and stored; copy the file away (`sugarctl backup`) and see `sugarctl check`.")
        }
        return health
    }
}
