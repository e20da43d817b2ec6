/// The state of the radio link to a meter.
public enum LinkPhase: String, Hashable, Sendable, CaseIterable {
    /// No link.
    case disconnected
    /// Connecting and resolving the services.
    case connecting
    /// Connected.
    case connected
    /// The link is being closed.
    case disconnecting
}

/// Whether the daemon holds a bond with a meter, and where pairing is.
public enum PairingState: String, Hashable, Sendable, CaseIterable {
    /// Not known yet: no advertisement, sync or pairing has told since the daemon started.
    case unknown
    /// No bond.
    case notPaired
    /// Pairing is under way.
    case pairing
    /// The meter shows a passkey; the user must enter it (`sugarctl pair --passkey`).
    case waitingForPasskey
    /// The bond is held.
    case paired
    /// The last pairing failed (wrong passkey, rejected); ``MeterState/lastError`` says why.
    case failed
}

/// Records received in the current attempt, and how many the meter announced.
public struct SyncProgress: Hashable, Sendable {
    /// Records received so far.
    public var received: Int
    /// The RACP count, when the meter answered it.
    public var expected: Int?

    /// Progress; none received and no count by default.
    public init(received: Int = 0, expected: Int? = nil) {
        self.received = received
        self.expected = expected
    }

    /// Nothing received, no count.
    public static let none = SyncProgress()
}

/// How the last finished sync attempt of a meter ended.
public struct LastSync: Hashable, Sendable {
    /// The meter.
    public var meter: MeterID
    /// When the attempt ended.
    public var at: Instant
    /// How it ended.
    public var result: SyncResult
    /// New readings stored.
    public var stored: Int
    /// Received records that were already stored.
    public var duplicates: Int
    /// The attempt found the meter reset (memory cleared or counter restarted): a new epoch.
    public var reset: Bool
    /// The meter clock the attempt set after its download, if it did.
    public var clockSet: ClockSetting?

    /// A last attempt; counts 0 and no reset or clock setting by default.
    public init(
        meter: MeterID, at: Instant, result: SyncResult, stored: Int = 0, duplicates: Int = 0, reset: Bool = false,
        clockSet: ClockSetting? = nil
    ) {
        self.clockSet = clockSet
        self.reset = reset
        self.meter = meter
        self.at = at
        self.result = result
        self.stored = stored
        self.duplicates = duplicates
    }
}

/// An error as people and clients see it: a stable code, one sentence, and what to do.
public struct ReportedError: Hashable, Sendable {
    /// Stable machine name, e.g. `timeout`, `attError`, `authenticationRequired`, `storage.diskFull`.
    public var code: String
    /// One sentence; never contains reading values.
    public var message: String
    /// What the user can do about it, when there is something.
    public var hint: String?
    /// When it happened.
    public var at: Instant
    /// The meter it concerns, if any.
    public var meter: MeterID?
    /// The spec code where one exists (ATT / RACP error code).
    public var specCode: Int?

    /// An error for people.
    public init(
        code: String, message: String, hint: String? = nil, at: Instant, meter: MeterID? = nil, specCode: Int? = nil
    ) {
        self.code = code
        self.message = message
        self.hint = hint
        self.at = at
        self.meter = meter
        self.specCode = specCode
    }
}

/// The names of a meter model's fields (also the JSON keys of a meter object).
public enum MeterField: String, Hashable, CaseIterable, Sendable {
    /// ``MeterState/identity``.
    case identity
    /// ``MeterState/link``.
    case link
    /// ``MeterState/sync``.
    case sync
    /// ``MeterState/progress``.
    case progress
    /// ``MeterState/lastSync``.
    case lastSync
    /// ``MeterState/highWater``.
    case highWater
    /// ``MeterState/pairing``.
    case pairing
    /// ``MeterState/lastError``.
    case lastError
    /// When the engine's next attempt runs (a retry after a transient failure, or a sync deferred
    /// to the end of the cooldown); null when none is scheduled.
    case nextAttempt
}

/// One meter as the daemon sees it right now. A value: copying it never shares anything live.
public struct MeterState: Hashable, Sendable {
    /// Who the meter is.
    public var identity: MeterIdentity
    /// The radio link's state.
    public var link: LinkPhase
    /// Where the current sync attempt is (``SyncPhase/idle`` without one).
    public var sync: SyncPhase
    /// Records received in the current attempt.
    public var progress: SyncProgress
    /// How the last finished attempt ended; nil before the first.
    public var lastSync: LastSync?
    /// Highest committed sequence number in the current epoch.
    public var highWater: UInt16?
    /// Whether a bond is held, and where pairing is.
    public var pairing: PairingState
    /// The last error concerning the meter; nil after a success.
    public var lastError: ReportedError?
    /// When the engine's next attempt runs (retry or deferred sync), if one is scheduled.
    public var nextAttempt: Instant?

    /// The meter's address.
    public var id: MeterID { self.identity.id }

    /// A state: disconnected, idle, pairing unknown unless given.
    public init(
        identity: MeterIdentity, link: LinkPhase = .disconnected, sync: SyncPhase = .idle,
        progress: SyncProgress = .none, lastSync: LastSync? = nil, highWater: UInt16? = nil,
        pairing: PairingState = .unknown, lastError: ReportedError? = nil, nextAttempt: Instant? = nil
    ) {
        self.nextAttempt = nextAttempt
        self.identity = identity
        self.link = link
        self.sync = sync
        self.progress = progress
        self.lastSync = lastSync
        self.highWater = highWater
        self.pairing = pairing
        self.lastError = lastError
    }

    /// A typed field value of a meter model.
    public enum Value: Hashable, Sendable {
        /// ``MeterState/identity``.
        case identity(MeterIdentity)
        /// ``MeterState/link``.
        case link(LinkPhase)
        /// ``MeterState/sync``.
        case sync(SyncPhase)
        /// ``MeterState/progress``.
        case progress(SyncProgress)
        /// ``MeterState/lastSync``.
        case lastSync(LastSync?)
        /// ``MeterState/highWater``.
        case highWater(UInt16?)
        /// ``MeterState/pairing``.
        case pairing(PairingState)
        /// ``MeterState/lastError``.
        case lastError(ReportedError?)
        /// ``MeterState/nextAttempt``.
        case nextAttempt(Instant?)
    }
}

extension MeterState: ObservableState {
    /// A meter model's fields are ``MeterField``s.
    public typealias Field = MeterField

    /// The field's current value.
    public func value(of field: MeterField) -> Value {
        switch field {
        case .identity: return .identity(self.identity)
        case .link: return .link(self.link)
        case .sync: return .sync(self.sync)
        case .progress: return .progress(self.progress)
        case .lastSync: return .lastSync(self.lastSync)
        case .highWater: return .highWater(self.highWater)
        case .pairing: return .pairing(self.pairing)
        case .lastError: return .lastError(self.lastError)
        case .nextAttempt: return .nextAttempt(self.nextAttempt)
        }
    }
}
