/// The engine's monotonic clock: time since an arbitrary origin, never stepped by the host's wall
/// clock. Cooldowns, deferrals and retry backoffs run on it.
public protocol SyncClock: Sendable {
    /// Time since the clock's origin.
    var now: Duration { get }
    /// Sleeps until ``now`` reaches `deadline` (throws when the task is cancelled).
    func sleep(until deadline: Duration) async throws
}

/// ``SyncClock`` on `ContinuousClock` (monotonic, counts suspended time).
public struct ContinuousSyncClock: SyncClock {
    private let origin: ContinuousClock.Instant

    public init() { self.origin = ContinuousClock.now }

    public var now: Duration { ContinuousClock.now - self.origin }

    public func sleep(until deadline: Duration) async throws {
        try await Task.sleep(until: self.origin + deadline, clock: .continuous)
    }
}

/// What starts an attempt.
public enum SyncTrigger: String, Hashable, Sendable {
    /// The meter appeared or advertised (or a deferred trigger came due).
    case automatic
    /// An explicit request (`sugarctl sync`): the cooldown does not apply.
    case forced
    /// The engine's own retry after a transient failure.
    case retry
}

/// The one sync policy of the engine, per meter: one attempt at a time, a cooldown after a
/// successful sync, deferral of triggers inside it, and capped backoff for transient failures.
///
/// A plain value on monotonic time (``SyncClock/now``): callers pass the current point; nothing
/// here reads a clock, so a host clock step cannot hold syncs off.
public struct SyncPolicy: Hashable, Sendable {
    /// What to do with a trigger.
    public enum Decision: Hashable, Sendable {
        /// Start now (the meter is marked running).
        case start
        /// A sync of this meter is running.
        case alreadyRunning
        /// Inside the cooldown after a successful sync: run when it ends (at this point).
        case deferred(until: Duration)
    }

    /// What follows an attempt that ended.
    public enum Followup: Hashable, Sendable {
        /// Nothing (success, or a failure a retry cannot fix).
        case none
        /// Retry at this point; `attempt` counts consecutive transient failures (1 = first retry).
        case retry(at: Duration, attempt: Int)
    }

    /// Automatic triggers within this long of a successful sync are deferred to its end.
    public var cooldown: Duration
    /// Pause before retry n (1-based); the last entry repeats.
    public var backoff: [Duration]
    private var running: Set<MeterID> = []
    private var cooldownEnds: [MeterID: Duration] = [:]
    private var failures: [MeterID: Int] = [:]

    /// - Parameters:
    ///   - cooldownSeconds: default 30.
    ///   - backoffSeconds: default 2 s, 10 s, 60 s, 5 min (then 5 min).
    public init(cooldownSeconds: Double = 30, backoffSeconds: [Double] = SyncConfiguration.defaultRetryBackoff) {
        self.cooldown = .milliseconds(Int64(max(0, cooldownSeconds) * 1000))
        let steps = backoffSeconds.isEmpty ? SyncConfiguration.defaultRetryBackoff : backoffSeconds
        self.backoff = steps.map { .milliseconds(Int64(max(0, $0) * 1000)) }
    }

    /// Whether a failure of this kind may go away by itself (link lost, bluetoothd gone, timeout,
    /// ATT busy, transport errors), so the engine tries again.
    public static func isTransient(_ code: SyncFailure.Code) -> Bool {
        switch code {
        case .timeout, .meterDisconnected, .procedureAlreadyInProgress, .transportError: true
        case .pairingRequired, .pairingFailed, .notAGlucoseMeter, .reportNotSupported, .racpError,
            .cccdImproperlyConfigured, .attError, .storeError, .aborted, .syncInProgress, .cooldown:
            false
        }
    }

    /// Asks to start an attempt.
    public mutating func request(_ meter: MeterID, _ trigger: SyncTrigger, at now: Duration) -> Decision {
        if self.running.contains(meter) { return .alreadyRunning }
        if trigger == .automatic, let end = self.cooldownEnds[meter], now < end { return .deferred(until: end) }
        self.running.insert(meter)
        return .start
    }

    /// Marks an attempt as ended and says what follows.
    /// - Parameters:
    ///   - failure: the failure's code, when the attempt failed.
    ///   - progressed: the attempt stored new readings before it ended (its chunks moved the mark):
    ///     the backoff starts over, so a meter whose link keeps dropping part-way is asked again
    ///     soon and delivers everything in a few quick attempts.
    public mutating func finished(
        _ meter: MeterID, _ result: SyncResult, failure: SyncFailure.Code?, progressed: Bool = false, at now: Duration
    ) -> Followup {
        self.running.remove(meter)
        if result == .success || result == .noNewRecords {
            self.failures[meter] = nil
            self.cooldownEnds[meter] = now + self.cooldown
            return .none
        }
        guard let code = failure ?? (result == .interrupted ? .meterDisconnected : nil), Self.isTransient(code) else {
            self.failures[meter] = nil
            return .none
        }
        let attempt = (progressed ? 0 : self.failures[meter] ?? 0) + 1
        self.failures[meter] = attempt
        return .retry(at: now + self.backoff[min(attempt, self.backoff.count) - 1], attempt: attempt)
    }

    /// Seeds the cooldown from a successful sync recorded before this process started.
    /// - Parameter ago: how long before `now` it ended, by the wall clock. A negative value (the
    ///   host clock went back since) or one past the cooldown seeds nothing.
    public mutating func noteEarlierSuccess(_ meter: MeterID, ago: Duration, at now: Duration) {
        guard ago >= .zero, ago < self.cooldown, self.cooldownEnds[meter] == nil else { return }
        self.cooldownEnds[meter] = now + (self.cooldown - ago)
    }

    public func isRunning(_ meter: MeterID) -> Bool { self.running.contains(meter) }

    /// Consecutive transient failures of the meter (0 after a success).
    public func failureCount(_ meter: MeterID) -> Int { self.failures[meter] ?? 0 }

    /// When the cooldown after the meter's last successful sync ends, if it was recorded.
    public func cooldownEnd(_ meter: MeterID) -> Duration? { self.cooldownEnds[meter] }

    /// Forgets a meter's history (forget).
    public mutating func forget(_ meter: MeterID) {
        self.cooldownEnds[meter] = nil
        self.failures[meter] = nil
    }
}
