import HealthDataSync
import ProcessKit

/// Carries what the sync engine reports into the view model. The rules are
/// ``SyncEventReducer``'s; this finds the model an event concerns, applies them in one update per
/// event through the models' owner API, and logs.
public final class ModelBridge: SyncObserver {
    /// Every meter's view model and the daemon's.
    private let models: ModelStore
    /// Where the events are logged (reading values only at debug).
    private let logger: Logger
    /// The time stamped on errors and meter state.
    private let now: WallClock

    /// A bridge into `models`, logging to `logger`, stamping times from `now`.
    public init(models: ModelStore, logger: Logger, now: @escaping WallClock) {
        self.models = models
        self.logger = logger
        self.now = now
    }

    /// Applies one engine event to the daemon's view model and to the meter's (creating the meter's
    /// model when the event introduces it), then logs it.
    public func syncEvent(_ event: SyncProgressEvent) {
        if SyncEventReducer.changesView(event) {
            self.models.viewModel.update { SyncEventReducer.apply(event, to: &$0) }
        }
        if let target = SyncEventReducer.target(of: event) {
            let model = target.creates ? self.meter(target.meter, name: target.name) : self.models.model(for: target.meter)
            let now = self.now()
            model?.update { SyncEventReducer.apply(event, to: &$0, now: now) }
        }
        self.log(event)
    }

    /// Records a daemon-level error (storage, adapter) in the view model's error list.
    public func report(_ code: String, _ message: String, hint: String?) {
        let error = ReportedError(code: code, message: message, hint: hint, at: self.now())
        self.models.viewModel.update { $0.record(error) }
    }

    /// The meter's model, created and activated when there is none yet.
    private func meter(_ id: MeterID, name: String? = nil) -> MeterModel {
        if let model = self.models.model(for: id) { return model }
        let model = self.models.model(for: MeterIdentity(id: id, name: name))
        model.activate()
        return model
    }

    /// Logs what a person running the daemon wants to know of the event; phase, progress, identity
    /// and adapter changes are not logged.
    private func log(_ event: SyncProgressEvent) {
        switch event {
        case .meterAppeared(let advertisement):
            self.logger.info("meter \(advertisement.id) appeared", [("name", advertisement.name ?? "")])
        case .committed(let id, let result):
            let inserted = result.inserted.count
            if result.session.result == .running {
                // A chunk of a transfer still running: the sync's end logs the totals.
                self.logger.debug(
                    "meter \(id): stored a chunk of \(inserted) new readings",
                    [("duplicates", String(result.duplicates)), ("highWater", result.meter.highWater.map { String($0) } ?? "-")])
            } else if inserted > 0 || result.sequenceResets > 0 {
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
            self.logger.warning("meter \(id): sync failed: \(failure.message)", [("code", failure.code.rawValue)])
        case .anomalies(let id, let summary):
            // The engine logs the counts; the first few in full only at debug (a bounded list).
            for anomaly in summary.samples where self.logger.isEnabled(.debug) {
                self.logger.debug("meter \(id): \(anomaly)")
            }
        case .finished(let id, let session):
            self.logger.info(
                "meter \(id): sync \(session.result.rawValue)",
                [("received", String(session.received)), ("stored", String(session.stored)),
                 ("duplicates", String(session.duplicates)), ("reset", String(session.reset))])
        case .skipped(let id, let reason):
            self.logger.debug("meter \(id): sync skipped: \(reason.message)")
        case .deferred(let id, let until):
            self.logger.info("meter \(id): sync deferred to the end of the cooldown", [("at", until.isoString)])
        case .retryScheduled(let id, let at, let attempt):
            self.logger.info("meter \(id): retrying", [("attempt", String(attempt)), ("at", at.isoString)])
        case .passkeyRequested(let id):
            self.logger.notice("meter \(id) asks for the PIN it shows: run `sugarctl pair \(id)`")
        case .adapterChanged, .meterDisappeared, .identified, .phaseChanged, .progress, .scheduleCleared:
            break
        }
    }
}
