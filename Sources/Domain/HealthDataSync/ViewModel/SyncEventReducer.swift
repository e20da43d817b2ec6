/// The one set of rules that turns sync events into view-model state: pure functions from an
/// event and the current state to the next state. The daemon's bridge only finds the model an
/// event concerns, applies these inside the model's update, and logs.
public enum SyncEventReducer {
    /// The meter model an event changes.
    public struct Target: Hashable, Sendable {
        /// The meter.
        public var meter: MeterID
        /// The name to give a model made for it.
        public var name: String?
        /// Whether a missing model is made (false: the event only changes a model that exists).
        public var creates: Bool
    }

    /// Which meter model `event` changes, if any.
    public static func target(of event: SyncProgressEvent) -> Target? {
        switch event {
        case .adapterChanged, .anomalies, .skipped: nil
        case .meterAppeared(let ad): Target(meter: ad.id, name: ad.name, creates: true)
        case .meterDisappeared(let id): Target(meter: id, creates: false)
        case .identified(let identity): Target(meter: identity.id, name: identity.name, creates: true)
        case .phaseChanged(let id, _), .progress(let id, _, _), .committed(let id, _), .failed(let id, _),
            .finished(let id, _), .deferred(let id, _), .retryScheduled(let id, _, _), .passkeyRequested(let id):
            Target(meter: id, creates: true)
        case .scheduleCleared(let id): Target(meter: id, creates: false)
        }
    }

    /// Whether `event` changes the daemon-wide view state.
    public static func changesView(_ event: SyncProgressEvent) -> Bool {
        switch event {
        case .adapterChanged, .committed: true
        default: false
        }
    }

    /// The meter model after `event`.
    /// - Parameter now: when the event is handled (the time of a reported error).
    public static func apply(_ event: SyncProgressEvent, to state: inout MeterState, now: Instant) {
        switch event {
        case .adapterChanged, .anomalies, .skipped:
            break
        case .meterAppeared(let ad):
            if state.identity.name == nil, let name = ad.name { state.identity.name = name }
            if ad.paired, state.pairing == .unknown || state.pairing == .notPaired { state.pairing = .paired }
        case .meterDisappeared:
            state.link = .disconnected
        case .identified(let identity):
            var merged = identity
            if merged.name == nil { merged.name = state.identity.name }
            state.identity = merged
        case .phaseChanged(_, let phase):
            state.sync = phase
            state.link = Self.link(for: phase)
            if phase == .pairing { state.pairing = .pairing }
            if phase == .connecting || phase == .queued {
                // An attempt runs (or waits for a connection slot): nothing is scheduled any more.
                state.progress = .none
                state.nextAttempt = nil
            }
        case .progress(_, let received, let expected):
            state.progress = SyncProgress(received: received, expected: expected)
        case .committed(_, let result):
            state.highWater = result.meter.highWater
        case .failed(let id, let failure):
            state.lastError = Self.reportedError(failure, meter: id, at: now)
            if failure.code == .pairingFailed { state.pairing = .failed }
            if failure.code == .pairingRequired { state.pairing = .notPaired }
        case .finished(let id, let session):
            state.lastSync = LastSync(
                meter: id, at: session.ended ?? now, result: session.result, stored: session.stored,
                duplicates: session.duplicates, reset: session.reset, clockSet: session.clockSet)
            if session.result == .success || session.result == .noNewRecords {
                state.lastError = nil
                if state.pairing == .pairing || state.pairing == .waitingForPasskey { state.pairing = .paired }
            }
        case .deferred(_, let until):
            state.nextAttempt = until
        case .retryScheduled(_, let at, _):
            state.sync = .waitingToRetry
            state.link = .disconnected
            state.nextAttempt = at
        case .scheduleCleared:
            state.nextAttempt = nil
            if state.sync == .waitingToRetry { state.sync = .idle }
        case .passkeyRequested:
            state.pairing = .waitingForPasskey
        }
    }

    /// The daemon-wide view state after `event`.
    public static func apply(_ event: SyncProgressEvent, to state: inout ViewState) {
        switch event {
        case .adapterChanged(let adapter):
            state.adapter = adapter
        case .committed(_, let result):
            state.readingCount += result.inserted.count
            let latest = result.inserted.filter { !$0.reading.flags.contains(.controlSolution) }
                .max(by: { $0.reading.instant < $1.reading.instant })
            if let latest, state.lastReading.map({ $0.instant <= latest.reading.instant }) ?? true {
                state.lastReading = ReadingSummary(latest)
            }
        default:
            break
        }
    }

    /// What happened to a pairing the user asked for (`sugarctl pair`), outside the sync events.
    public enum PairingEvent: Hashable, Sendable {
        /// The pair call started (a pairing already waiting for the passkey stays so).
        case started
        /// The passkey was handed to the transport (waiting for it becomes pairing).
        case passkeySubmitted
        /// The pairing ended with a bond (the meter's last error is cleared when it was a pairing error).
        case succeeded
        /// It failed; `duringSync` when a running sync reports the error itself.
        case failed(ReportedError, duringSync: Bool)
    }

    /// The meter model after a pairing event.
    public static func apply(_ event: PairingEvent, to state: inout MeterState) {
        switch event {
        case .started:
            if state.pairing != .waitingForPasskey { state.pairing = .pairing }
        case .passkeySubmitted:
            // The pairing may have ended meanwhile (the passkey's answer can come first).
            if state.pairing == .waitingForPasskey { state.pairing = .pairing }
        case .succeeded:
            state.pairing = .paired
            if let code = state.lastError?.code, Self.pairingErrorCodes.contains(code) { state.lastError = nil }
        case .failed(let error, let duringSync):
            state.pairing = .failed
            if !duringSync { state.lastError = error }
        }
    }

    /// The failure codes a successful pairing clears from the meter's last error.
    private static let pairingErrorCodes: Set<String> = [
        SyncFailure.Code.pairingFailed.rawValue, SyncFailure.Code.pairingRequired.rawValue,
    ]

    /// A failure as the view model shows it, with what to do about it.
    public static func reportedError(_ failure: SyncFailure, meter: MeterID, at: Instant) -> ReportedError {
        ReportedError(
            code: failure.code.rawValue, message: failure.message, hint: Self.hint(for: failure, meter: meter), at: at,
            meter: meter, specCode: (failure.attError ?? failure.racpResponseCode).map { Int($0) })
    }

    /// The link phase a sync phase implies.
    public static func link(for phase: SyncPhase) -> LinkPhase {
        switch phase {
        case .idle, .queued, .done, .failed: .disconnected
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
            "This device offers neither the Bluetooth Glucose Profile nor the OneTouch Verio service; see docs/meters.md for the meters sugard reads."
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
