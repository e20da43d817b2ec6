import GlucoseStore
import HealthDataSync
import ProcessKit
import SugarAPI

/// The daemon's side of the `io.sugard.HealthDataSync` interface: sync, forget and pair through
/// the engine, state from the model store, history from the store.
public struct DaemonBackend: SugarBackend {
    /// Every meter's live view model.
    public let models: ModelStore
    /// The readings, meters and sync sessions on disk.
    public let store: any ReadingStore
    /// The sync engine that talks to the meters.
    let engine: SyncEngine
    /// The SQLite store behind ``store`` when there is one: backups and restores need it.
    let database: SQLiteReadingStore?
    /// Restores uploaded in parts, until they are applied or dropped.
    let uploads = RestoreUploads()
    /// Where backups and restores log; nil logs nothing.
    let logger: Logger?

    /// A backend over these parts; backups and restores are offered when `store` is the SQLite store.
    public init(models: ModelStore, store: any ReadingStore, engine: SyncEngine, logger: Logger? = nil) {
        self.models = models
        self.store = store
        self.engine = engine
        self.database = store as? SQLiteReadingStore
        self.logger = logger
    }

    /// Syncs one meter, or every known one concurrently when `meter` is nil (meters in their cooldown
    /// are left out of the result); sessions sorted by meter. Throws `meterNotFound` for an unknown
    /// meter or when none is known, `adapterUnavailable` without a powered adapter, `syncInProgress`,
    /// `storageError` or `syncFailed`.
    public func sync(meter: MeterID?, force: Bool) async throws(SugarAPIError) -> [SyncSessionRecord] {
        let targets: [MeterID]
        if let meter {
            guard try await self.isKnown(meter) else {
                throw SugarAPIError(.meterNotFound, "no meter \(meter) is known", subject: meter.rawValue)
            }
            targets = [meter]
        } else {
            targets = self.models.meterIDs
            guard !targets.isEmpty else {
                throw SugarAPIError(.meterNotFound, "no meter is known yet: wake a meter near the adapter", subject: nil)
            }
        }
        let adapter = self.models.viewModel.state.adapter
        guard adapter.present, adapter.powered else {
            throw SugarAPIError(.adapterUnavailable, "no powered Bluetooth adapter is available")
        }
        do {
            return try await self.syncAll(targets, force: force)
        } catch let error as SugarAPIError {
            throw error
        } catch {
            throw SugarAPIError(.syncFailed, "sync failed: \(error)")
        }
    }

    /// Runs the syncs concurrently and maps each failure to its API error; the first failure ends the call.
    private func syncAll(_ targets: [MeterID], force: Bool) async throws -> [SyncSessionRecord] {
        try await withThrowingTaskGroup(of: SyncSessionRecord?.self) { group in
            for id in targets {
                group.addTask {
                    do throws(SyncFailure) {
                        return try await self.engine.sync(meter: id, force: force)
                    } catch {
                        switch error.code {
                        case .cooldown: return nil
                        case .syncInProgress:
                            throw SugarAPIError(.syncInProgress, "a sync of \(id) is already running", subject: id.rawValue)
                        case .storeError: throw SugarAPIError(.storageError, error.message, subject: id.rawValue)
                        default: throw SugarAPIError(.syncFailed, error.message, subject: id.rawValue)
                        }
                    }
                }
            }
            var sessions: [SyncSessionRecord] = []
            for try await session in group { if let session { sessions.append(session) } }
            return sessions.sorted { $0.meter < $1.meter }
        }
    }

    /// Ends the meter's syncs, forgets it in the store (its readings and sessions stay) and removes
    /// its view model. Throws `meterNotFound` or `storageError`.
    public func forget(meter: MeterID) async throws(SugarAPIError) {
        guard try await self.isKnown(meter) else {
            throw SugarAPIError(.meterNotFound, "no meter \(meter) is known", subject: meter.rawValue)
        }
        await self.engine.forget(meter: meter)
        do {
            try await self.store.forget(meter)
        } catch {
            throw SugarAPIError(.storageError, error.message)
        }
        self.models.remove(meter)
    }

    /// Pairs with the meter (joining a pairing in flight), showing the progress on its view model.
    /// Throws `adapterUnavailable`, `meterNotFound` or `pairingFailed`.
    public func pair(meter: MeterID) async throws(SugarAPIError) {
        guard try await self.isKnown(meter) else {
            throw SugarAPIError(.meterNotFound, "no meter \(meter) is known", subject: meter.rawValue)
        }
        // A sync may already be pairing and waiting for the passkey: keep that state visible, the
        // transport joins the pairing in flight.
        self.models.model(for: meter)?.update { SyncEventReducer.apply(.started, to: &$0) }
        // When a sync is pairing, its failure reports the error (once); this call only follows it.
        let duringSync = await self.engine.isSyncing(meter)
        do {
            try await self.engine.pair(meter: meter)
            self.models.model(for: meter)?.update { SyncEventReducer.apply(.succeeded, to: &$0) }
        } catch {
            let code: SyncFailure.Code = error.code == .authenticationFailed ? .pairingFailed : .pairingRequired
            let reported = SyncEventReducer.reportedError(SyncFailure(code, error.message), meter: meter, at: systemNow())
            self.models.model(for: meter)?.update { SyncEventReducer.apply(.failed(reported, duringSync: duringSync), to: &$0) }
            switch error.code {
            case .adapterUnavailable: throw SugarAPIError(.adapterUnavailable, error.message)
            case .meterNotFound: throw SugarAPIError(.meterNotFound, error.message, subject: meter.rawValue)
            default: throw SugarAPIError(.pairingFailed, error.message, subject: meter.rawValue)
            }
        }
    }

    /// Hands the passkey the meter shows to the pairing that waits for it. Throws `meterNotFound` for
    /// a meter without a view model, `pairingFailed` when no pairing takes it.
    public func submitPasskey(_ passkey: UInt32, meter: MeterID) async throws(SugarAPIError) {
        guard self.models.model(for: meter) != nil else {
            throw SugarAPIError(.meterNotFound, "no meter \(meter) is known", subject: meter.rawValue)
        }
        do {
            try await self.engine.submitPasskey(passkey, for: meter)
            self.models.model(for: meter)?.update { SyncEventReducer.apply(.passkeySubmitted, to: &$0) }
        } catch {
            throw SugarAPIError(.pairingFailed, error.message, subject: meter.rawValue)
        }
    }

    /// Assigns the meter to a person (or to nobody) from `from` on, storing a live meter first if no
    /// sync has stored it yet. Throws `storageError` when the store keeps no assignments,
    /// `meterNotFound`, or `invalidParameter` (subject `from`) when the store refuses the change.
    public func setAssignment(meter: MeterID, holder: MeterHolder?, from: Instant) async throws(SugarAPIError) -> AttributionResult {
        guard let people = self.people else {
            throw SugarAPIError(.storageError, "This daemon's store keeps no assignments.")
        }
        do {
            guard try await self.store.meter(meter) != nil || self.models.model(for: meter) != nil else {
                throw SugarAPIError(.meterNotFound, "no meter \(meter) is known", subject: meter.rawValue)
            }
            if try await self.store.meter(meter) == nil {
                // Live but never stored (it appeared, no sync committed yet): store it now.
                let identity = self.models.model(for: meter)?.state.identity ?? MeterIdentity(id: meter)
                try await self.store.noteMeterSeen(identity, at: systemNow())
            }
            return try await people.setAssignment(meter, holder: holder, from: from)
        } catch let error as SugarAPIError {
            throw error
        } catch let error as StoreError {
            throw SugarAPIError(error.code == .constraint ? .invalidParameter : .storageError, error.message,
                subject: error.code == .constraint ? "from" : error.code.rawValue)
        } catch {
            throw SugarAPIError(.storageError, "\(error)")
        }
    }

    /// Whether the meter has a view model or a row in the store.
    private func isKnown(_ meter: MeterID) async throws(SugarAPIError) -> Bool {
        if self.models.model(for: meter) != nil { return true }
        do {
            return try await self.store.meter(meter) != nil
        } catch {
            throw SugarAPIError(.storageError, error.message)
        }
    }
}
