public import HealthDataSync
import Synchronization
import Locking

/// THE INTERFACE'S TEST BACKEND, not the daemon: a ``SugarBackend`` for the interface's tests and
/// `sugar-bench socket`. It holds a real ``ModelStore`` and a real ``ReadingStore`` (the caller
/// passes one, e.g. SQLite in a temp directory) and plays the sync engine's part by writing the
/// meter models the way the engine does: phases, progress, pairing states, last sync, errors.
/// The daemon's own composition (engine, BlueZ transport) implements ``SugarBackend`` elsewhere.
public final class InterfaceTestBackend: SugarBackend {
    public let models: ModelStore
    public let store: any ReadingStore

    /// What a scripted meter does when synced or paired.
    struct Meter {
        /// Readings the next sync "receives".
        var queued: [Reading] = []
        var running = false
        /// A passkey sent while pairing waits for one.
        var submitted: UInt32?
        var passkey: UInt32 = 123_456
        var failSync: String?
    }

    private let meters = Lock<[MeterID: Meter]>([:])
    private let adapterDown = Atomic<Bool>(false)
    /// Pause between sync steps (each phase and each received record), so progress can be watched.
    public let stepDelay: Duration
    /// An unforced sync of a meter that synced less than this ago is skipped.
    public let cooldown: Int64 = 30_000

    public init(store: any ReadingStore, stepDelay: Duration = .milliseconds(1)) {
        self.store = store
        self.stepDelay = stepDelay
        let daemon = DaemonInfo(
            version: "test", startedAt: Instant(epochMillis: APITime.now()), storage: StorageHealth(status: .ok, path: "test"))
        self.models = ModelStore(
            viewModel: ViewModel(ViewState(daemon: daemon, adapter: AdapterState(present: true, powered: true, discovering: false, name: "hci0"))))
    }

    // MARK: Scripting

    /// Adds a meter (a model in the store), with readings its next sync will deliver and the
    /// passkey it shows when paired.
    @discardableResult
    public func addMeter(_ identity: MeterIdentity, queued: [Reading] = [], passkey: UInt32 = 123_456) -> MeterModel {
        self.meters.withLock { $0[identity.id] = Meter(queued: queued, passkey: passkey) }
        let model = self.models.model(for: identity)
        model.activate()
        return model
    }

    /// Readings the next sync of `meter` receives.
    public func queue(_ readings: [Reading], for meter: MeterID) {
        self.meters.withLock { $0[meter, default: Meter()].queued += readings }
    }

    /// Makes the next sync of `meter` fail with this message after connecting.
    public func failNextSync(of meter: MeterID, _ message: String) {
        self.meters.withLock { $0[meter, default: Meter()].failSync = message }
    }

    /// Takes the adapter away (syncs fail with AdapterUnavailable) or brings it back.
    public func setAdapterPresent(_ present: Bool) {
        self.adapterDown.store(!present, ordering: .relaxed)
        self.models.viewModel.update {
            $0.adapter = present ? AdapterState(present: true, powered: true, discovering: false, name: "hci0") : .absent
        }
    }

    /// Commits readings straight into the store (as one successful session) and updates the view
    /// model's `readingCount` and `lastReading`.
    public func seed(_ identity: MeterIdentity, readings: [Reading], at: Instant) async throws(StoreError) {
        let session = SyncSessionRecord(
            meter: identity.id, started: at, ended: at, result: .success, expected: readings.count,
            received: readings.count)
        let batch = SyncBatch(
            meter: identity, features: 0x0400, readings: readings, newHighWater: readings.map(\.sequenceNumber).max(),
            session: session)
        _ = try await self.store.commit(batch)
        try await self.refreshCounts()
    }

    private func refreshCounts() async throws(StoreError) {
        let count = try await self.store.readingCount(meter: nil)
        let newest = try await self.store.readings(ReadingQuery(limit: 1, order: .descending)).first
        self.models.viewModel.update {
            $0.readingCount = count
            $0.lastReading = newest.map { ReadingSummary($0) }
        }
    }

    /// A valid Glucose Measurement record with its facts: `mgdL` in kg/L units, capillary whole
    /// blood from a finger, taken at `instant` (meter clock in UTC+1). Flags: `hi`, `lo`,
    /// `controlSolution`, `ketone` change the record accordingly.
    public static func reading(
        meter: MeterID, sequence: UInt16, mgdL: Int, at instant: Instant, flags: ReadingFlags = []
    ) -> Reading {
        let local = LocalDateTime(secondsSinceEpoch: instant.epochMillis / 1000 + 3600)
        let control = flags.contains(.controlSolution)
        let sampleType: UInt8 = control ? 10 : 1
        var raw = UInt16(0xB000 | (mgdL & 0x0FFF))
        if flags.contains(.hi) { raw = 0x07FE }
        if flags.contains(.lo) { raw = 0x0802 }
        var bytes: [UInt8] = [0x03, UInt8(sequence & 0xff), UInt8(sequence >> 8)]
        bytes += [UInt8(local.year & 0xff), UInt8(local.year >> 8), UInt8(local.month), UInt8(local.day)]
        bytes += [UInt8(local.hour), UInt8(local.minute), UInt8(local.second), 0, 0]
        bytes += [UInt8(raw & 0xff), UInt8(raw >> 8), (1 << 4) | sampleType]
        let valued = !flags.contains(.hi) && !flags.contains(.lo) && !flags.contains(.ketone)
        let time = TimeResolution(
            method: .meterClock, zone: "Europe/Berlin", utcOffsetSeconds: 3600, meterClockSkewSeconds: 0,
            meterLocalTime: local)
        return Reading(
            meter: meter, sequenceNumber: sequence, measurementBytes: bytes, contextBytes: nil, baseTime: local,
            timeOffsetMinutes: 0, concentrationRaw: raw, unit: .kilogramsPerLiter, sampleType: sampleType,
            sampleLocation: 1, sensorStatus: nil, meal: nil, instant: instant, time: time,
            mgdL: valued ? Double(mgdL) : nil, mmolL: valued ? Double(mgdL) / GlucoseUnit.molarMass : nil,
            ketoneMmolL: flags.contains(.ketone) ? Double(mgdL) / 10 : nil, flags: flags)
    }

    // MARK: SugarBackend

    public func sync(meter: MeterID?, force: Bool) async throws(SugarAPIError) -> [SyncSessionRecord] {
        if self.adapterDown.load(ordering: .relaxed) {
            throw SugarAPIError(.adapterUnavailable, "No Bluetooth adapter is available.")
        }
        let ids: [MeterID]
        if let meter {
            guard self.models.model(for: meter) != nil else {
                throw SugarAPIError(.meterNotFound, "No meter \(meter) is known.", subject: meter.rawValue)
            }
            ids = [meter]
        } else {
            ids = self.models.meterIDs
        }
        var sessions: [SyncSessionRecord] = []
        for id in ids {
            if let session = try await self.syncOne(id, force: force) { sessions.append(session) }
        }
        return sessions
    }

    private func step() async {
        try? await Task.sleep(for: self.stepDelay)
    }

    private func syncOne(_ id: MeterID, force: Bool) async throws(SugarAPIError) -> SyncSessionRecord? {
        guard let model = self.models.model(for: id) else {
            throw SugarAPIError(.meterNotFound, "No meter \(id) is known.", subject: id.rawValue)
        }
        let now = Instant(epochMillis: APITime.now())
        if !force, let last = model.state.lastSync, now.epochMillis - last.at.epochMillis < self.cooldown {
            return nil
        }
        let claimed: (queued: [Reading], failure: String?)? = self.meters.withLock { meters in
            guard meters[id]?.running != true else { return nil }
            meters[id, default: Meter()].running = true
            defer {
                meters[id]?.queued = []
                meters[id]?.failSync = nil
            }
            return (meters[id]?.queued ?? [], meters[id]?.failSync)
        }
        guard let claimed else {
            throw SugarAPIError(.syncInProgress, "A sync of \(id) is already running.", subject: id.rawValue)
        }
        defer { self.meters.withLock { $0[id]?.running = false } }
        let started = now
        for phase in [SyncPhase.connecting, .readingDeviceInfo, .readingClock, .subscribing] {
            model.update {
                $0.sync = phase
                $0.link = .connected
            }
            await self.step()
        }
        if let failure = claimed.failure {
            let error = ReportedError(code: "timeout", message: failure, hint: "Bring the meter closer and sync again.", at: now, meter: id)
            model.update {
                $0.sync = .failed(SyncFailure(.timeout, failure))
                $0.lastError = error
                $0.lastSync = LastSync(meter: id, at: now, result: .failed)
            }
            model.update {
                $0.sync = .idle
                $0.link = .disconnected
            }
            throw SugarAPIError(.syncFailed, failure, subject: id.rawValue)
        }
        let readings = claimed.queued
        model.update {
            $0.sync = .counting
            $0.progress = SyncProgress(received: 0, expected: readings.count)
        }
        await self.step()
        model.update { $0.sync = .receiving }
        for index in readings.indices {
            model.update { $0.progress = SyncProgress(received: index + 1, expected: readings.count) }
            await self.step()
        }
        model.update { $0.sync = .committing }
        let identity = model.state.identity
        let session = SyncSessionRecord(
            meter: id, started: started, ended: now, result: readings.isEmpty ? .noNewRecords : .success,
            expected: readings.count, received: readings.count)
        let result: CommitResult
        do throws(StoreError) {
            result = try await self.store.commit(
                SyncBatch(
                    meter: identity, features: 0x0400, readings: readings,
                    newHighWater: readings.map(\.sequenceNumber).max() ?? model.state.highWater, session: session))
            try await self.refreshCounts()
        } catch {
            model.update {
                $0.sync = .idle
                $0.link = .disconnected
            }
            throw SugarAPIError(.storageError, error.message, subject: error.code.rawValue)
        }
        model.update {
            $0.sync = .done(session.result)
            $0.lastSync = LastSync(
                meter: id, at: now, result: session.result, stored: result.inserted.count, duplicates: result.duplicates)
            $0.highWater = result.meter.highWater
            $0.lastError = nil
        }
        model.update {
            $0.sync = .idle
            $0.link = .disconnected
            $0.progress = .none
        }
        return result.session
    }

    public func forget(meter: MeterID) async throws(SugarAPIError) {
        guard self.models.remove(meter) else {
            throw SugarAPIError(.meterNotFound, "No meter \(meter) is known.", subject: meter.rawValue)
        }
        self.meters.withLock { _ = $0.removeValue(forKey: meter) }
        do throws(StoreError) {
            try await self.store.forget(meter)
        } catch {
            throw SugarAPIError(.storageError, error.message, subject: error.code.rawValue)
        }
    }

    public func pair(meter: MeterID) async throws(SugarAPIError) {
        guard let model = self.models.model(for: meter) else {
            throw SugarAPIError(.meterNotFound, "No meter \(meter) is known.", subject: meter.rawValue)
        }
        self.meters.withLock { $0[meter]?.submitted = nil }
        model.update { $0.pairing = .pairing }
        await self.step()
        model.update { $0.pairing = .waitingForPasskey }
        // The engine waits for BlueZ's agent call; here: for SubmitPasskey, at most 30 s.
        let deadline = ContinuousClock.now + .seconds(30)
        var answer: UInt32?
        while answer == nil, ContinuousClock.now < deadline, !Task.isCancelled {
            answer = self.meters.withLock { $0[meter]?.submitted }
            if answer == nil { try? await Task.sleep(for: .milliseconds(5)) }
        }
        let expected = self.meters.withLock { $0[meter]?.passkey }
        guard let answer, answer == expected else {
            let message = answer == nil ? "No passkey was entered in time." : "The meter rejected the passkey."
            let at = Instant(epochMillis: APITime.now())
            model.update {
                $0.pairing = .failed
                $0.lastError = ReportedError(
                    code: "pairingFailed", message: message, hint: "Run `sugarctl pair` again and enter the PIN the meter shows.",
                    at: at, meter: meter)
            }
            throw SugarAPIError(.pairingFailed, message, subject: meter.rawValue)
        }
        model.update {
            $0.pairing = .paired
            $0.lastError = nil
        }
    }

    public func submitPasskey(_ passkey: UInt32, meter: MeterID) async throws(SugarAPIError) {
        guard let model = self.models.model(for: meter) else {
            throw SugarAPIError(.meterNotFound, "No meter \(meter) is known.", subject: meter.rawValue)
        }
        guard model.state.pairing == .waitingForPasskey else {
            throw SugarAPIError(.pairingFailed, "The meter \(meter) is not waiting for a passkey.", subject: meter.rawValue)
        }
        self.meters.withLock { $0[meter]?.submitted = passkey }
    }
}
