import HealthDataSync

/// Carries what the sync engine reports into the view model: the one place engine events become
/// state. Writes go through the models' owner API, one turn per event.
public final class ModelBridge: SyncObserver {
    private let models: ModelStore
    private let logger: Logger
    private let now: @Sendable () -> Instant

    public init(models: ModelStore, logger: Logger, now: @escaping @Sendable () -> Instant) {
        self.models = models
        self.logger = logger
        self.now = now
    }

    public func syncEvent(_ event: SyncProgressEvent) {
        switch event {
        case .adapterChanged(let adapter):
            self.models.viewModel.update { $0.adapter = adapter }
        case .meterAppeared(let advertisement):
            let model = self.meter(advertisement.id, name: advertisement.name)
            model.update { state in
                if state.identity.name == nil, let name = advertisement.name { state.identity.name = name }
                if advertisement.paired, state.pairing == .unknown || state.pairing == .notPaired {
                    state.pairing = .paired
                }
            }
            self.logger.info("meter \(advertisement.id) appeared", [("name", advertisement.name ?? "")])
        case .meterDisappeared(let id):
            self.models.model(for: id)?.update { $0.link = .disconnected }
        case .identified(let identity):
            self.meter(identity.id, name: identity.name).update { state in
                var merged = identity
                if merged.name == nil { merged.name = state.identity.name }
                state.identity = merged
            }
        case .phaseChanged(let id, let phase):
            self.meter(id).update { state in
                state.sync = phase
                state.link = Self.link(for: phase)
                if phase == .pairing { state.pairing = .pairing }
                if phase == .connecting { state.progress = .none }
            }
        case .progress(let id, let received, let expected):
            self.meter(id).update { $0.progress = SyncProgress(received: received, expected: expected) }
        case .committed(let id, let result):
            self.meter(id).update { $0.highWater = result.meter.highWater }
            let latest = result.inserted.filter { !$0.reading.flags.contains(.controlSolution) }
                .max(by: { $0.reading.instant < $1.reading.instant })
            let inserted = result.inserted.count
            self.models.viewModel.update { state in
                state.readingCount += inserted
                if let latest, state.lastReading.map({ $0.instant <= latest.reading.instant }) ?? true {
                    state.lastReading = ReadingSummary(latest)
                }
            }
            if inserted > 0 || result.sequenceResets > 0 {
                self.logger.info(
                    "meter \(id): stored \(inserted) new readings",
                    [("duplicates", String(result.duplicates)), ("resets", String(result.sequenceResets))])
            }
            for stored in result.inserted where self.logger.isEnabled(.debug) {
                // Reading values only ever at debug level.
                self.logger.debug(
                    "reading \(id)#\(stored.reading.sequenceNumber)",
                    [("at", stored.reading.instant.isoString), ("mgdL", stored.reading.mgdL.map { String($0) } ?? "-"),
                     ("flags", stored.reading.flags.names.joined(separator: ","))])
            }
        case .failed(let id, let failure):
            let error = ReportedError(
                code: failure.code.rawValue, message: failure.message, hint: Self.hint(for: failure, meter: id),
                at: self.now(), meter: id, specCode: (failure.attError ?? failure.racpResponseCode).map { Int($0) })
            self.meter(id).update { state in
                state.lastError = error
                if failure.code == .pairingFailed { state.pairing = .failed }
                if failure.code == .pairingRequired { state.pairing = .notPaired }
            }
            self.logger.warning("meter \(id): sync failed: \(failure.message)", [("code", failure.code.rawValue)])
        case .anomalies(let id, let anomalies):
            for anomaly in anomalies {
                self.logger.notice("meter \(id): \(anomaly)")
            }
        case .finished(let id, let session):
            self.meter(id).update { state in
                state.lastSync = LastSync(
                    meter: id, at: session.ended ?? self.now(), result: session.result, stored: session.stored,
                    duplicates: session.duplicates)
                if session.result == .success || session.result == .noNewRecords {
                    state.lastError = nil
                    if state.pairing == .pairing || state.pairing == .waitingForPasskey { state.pairing = .paired }
                }
            }
            self.logger.info(
                "meter \(id): sync \(session.result.rawValue)",
                [("received", String(session.received)), ("stored", String(session.stored)),
                 ("duplicates", String(session.duplicates))])
        case .skipped(let id, let reason):
            self.logger.debug("meter \(id): sync skipped: \(reason.message)")
        case .passkeyRequested(let id):
            self.meter(id).update { $0.pairing = .waitingForPasskey }
            self.logger.notice("meter \(id) asks for the PIN it shows: run `sugarctl pair \(id)`")
        }
    }

    /// Records a daemon-level error (storage, adapter) in the view model's error list.
    public func report(_ code: String, _ message: String, hint: String?) {
        let error = ReportedError(code: code, message: message, hint: hint, at: self.now())
        self.models.viewModel.update { $0.record(error) }
    }

    private func meter(_ id: MeterID, name: String? = nil) -> MeterModel {
        if let model = self.models.model(for: id) { return model }
        let model = self.models.model(for: MeterIdentity(id: id, name: name))
        model.activate()
        return model
    }

    static func link(for phase: SyncPhase) -> LinkPhase {
        switch phase {
        case .idle, .done, .failed: .disconnected
        case .connecting: .connecting
        case .disconnecting: .disconnecting
        default: .connected
        }
    }

    /// What a person can do about a failed sync.
    public static func hint(for failure: SyncFailure, meter: MeterID) -> String? {
        switch failure.code {
        case .timeout:
            "Bring the meter closer and wake it (its Bluetooth button), then run `sugarctl sync \(meter) --force`."
        case .meterDisconnected:
            "The meter went out of range or switched off; readings received so far are stored. Sync again for the rest."
        case .pairingRequired:
            "Put the meter in pairing mode and run `sugarctl pair \(meter)`."
        case .pairingFailed:
            "Check the PIN the meter shows and run `sugarctl pair \(meter)` again."
        case .notAGlucoseMeter:
            "This device does not offer the Bluetooth Glucose Profile (OneTouch Verio meters use a proprietary protocol)."
        case .reportNotSupported:
            "The meter refused the download request; please report the meter model."
        case .storeError:
            "Check free disk space and the permissions of the state directory; see `sugarctl status`."
        case .racpError, .attError, .cccdImproperlyConfigured, .procedureAlreadyInProgress, .transportError:
            "Sync again; if it keeps failing, take a Bluetooth capture and run `sugarctl capture inspect` on it."
        case .aborted, .syncInProgress, .cooldown:
            nil
        }
    }
}
