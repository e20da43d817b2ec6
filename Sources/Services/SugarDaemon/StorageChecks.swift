import Glibc
import GlucoseStore
import HealthDataSync
import ProcessKit
import SugarAPI

/// Integrity checks of the database, off the start-up path. Opening the store no longer reads the
/// whole file (`quick_check` was 85-90 % of start-up at a million readings); instead:
/// - after an unclean shutdown (the marker `<database>.running` was left behind, or a non-empty
///   write-ahead log), a `quick_check` starts in the background right after ready;
/// - while the daemon runs, a `quick_check` once a week;
/// - `CheckStorage` (`sugarctl check`) runs `integrity_check` on demand.
/// Each check reads on its own connection and thread; the result lands in the view model
/// (`daemon.storage.check`), damage also as storage `degraded` with code `corrupt`.
enum StorageChecks {
    /// The marker file that says the daemon is running on `databasePath`.
    static func markerPath(databasePath: String) -> String { databasePath + ".running" }

    /// Whether the last daemon on this database did not stop cleanly: its marker is still there,
    /// or SQLite's write-ahead log is (a clean close checkpoints and removes it). Call before the
    /// store opens the database.
    static func lastStopWasUnclean(databasePath: String) -> Bool {
        var info = stat()
        if stat(Self.markerPath(databasePath: databasePath), &info) == 0 { return true }
        return stat(databasePath + "-wal", &info) == 0 && info.st_size > 0
    }

    /// Writes the marker (this process's id); removed by ``removeMarker(databasePath:)`` on a
    /// clean stop. A marker that cannot be written only costs the next start its check.
    static func writeMarker(databasePath: String, logger: Logger) {
        let path = Self.markerPath(databasePath: databasePath)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            logger.warning("cannot write \(path): \(String(cString: strerror(errno))); an unclean stop will not be noticed")
            return
        }
        let text = Array("\(getpid())\n".utf8)
        _ = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }

    /// Removes the marker: the daemon stops cleanly.
    static func removeMarker(databasePath: String) {
        unlink(Self.markerPath(databasePath: databasePath))
    }

    /// Runs one check and keeps the view model's storage health in step (running, then the result).
    @discardableResult
    static func run(
        _ kind: StorageCheck.Kind, reason: StorageCheck.Reason, store: SQLiteReadingStore, models: ModelStore, logger: Logger
    ) async -> StorageCheck {
        let viewModel = models.viewModel
        logger.info("storage check started", [("kind", kind.rawValue), ("reason", reason.rawValue)])
        let check = await store.check(kind, reason: reason) { health in
            viewModel.update { $0.daemon.storage = health }
        }
        let health = await store.health()
        viewModel.update { $0.daemon.storage = health }
        let millis = String(check.finished.map { $0.epochMillis - check.started.epochMillis } ?? 0)
        switch check.result {
        case .ok:
            logger.notice("storage check: \(store.path) is sound", [("kind", kind.rawValue), ("millis", millis)])
        case .damaged:
            logger.error(
                "storage check: \(store.path) is damaged: \(check.problemCount) problem(s), first: \(check.problems.first ?? "?")",
                [("kind", kind.rawValue)])
        case .failed:
            logger.warning("storage check could not run: \(check.message ?? "unknown reason")", [("kind", kind.rawValue)])
        case .running:
            break
        }
        return check
    }

    /// The daemon's background checks: one right away after an unclean stop, then weekly. Ends when
    /// its task is cancelled (the check in flight is interrupted).
    static func background(
        uncleanStop: Bool, store: SQLiteReadingStore, models: ModelStore, logger: Logger, interval: Duration = .seconds(7 * 86_400)
    ) async {
        if uncleanStop {
            logger.notice("the last stop was not clean: checking \(store.path) in the background")
            await Self.run(.quick, reason: .uncleanShutdown, store: store, models: models, logger: logger)
        }
        while !Task.isCancelled {
            try? await Task.sleep(for: interval)
            if Task.isCancelled { return }
            await Self.run(.quick, reason: .scheduled, store: store, models: models, logger: logger)
        }
    }
}

/// `CheckStorage` on the SQLite store.
extension DaemonBackend {
    /// `CheckStorage`: a full `integrity_check`, waited for. Throws `storageError` when the daemon's
    /// store is not the SQLite one.
    public func checkStorage() async throws(SugarAPIError) -> StorageCheck {
        guard let database = self.database else {
            throw SugarAPIError(.storageError, "this daemon's storage cannot be checked")
        }
        return await StorageChecks.run(.full, reason: .requested, store: database, models: self.models, logger: self.logger ?? .disabled)
    }
}
