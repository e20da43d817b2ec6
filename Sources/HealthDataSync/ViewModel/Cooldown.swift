/// Whether a sync should run now: an automatic sync (the meter appeared) is skipped while the
/// meter synced less than ``interval`` ago; a forced sync always runs. Pure: no clock, no state.
public struct Cooldown: Hashable, Sendable {
    public enum Trigger: String, Hashable, Sendable {
        /// The meter appeared or reconnected.
        case automatic
        /// The user asked (`sugarctl sync --force`).
        case forced
    }

    public enum Decision: Hashable, Sendable {
        case run
        /// Skip; the cooldown ends after `remainingMillis`.
        case skip(remainingMillis: Int64)

        public var shouldRun: Bool { self == .run }
    }

    /// Default 30 s.
    public var intervalMillis: Int64

    public init(intervalMillis: Int64 = 30_000) {
        self.intervalMillis = max(0, intervalMillis)
    }

    /// Decides for a meter whose last sync ended at `lastSync` (nil: never synced).
    ///
    /// A last sync in the future (the host clock went back) does not hold syncs off.
    public func decide(_ trigger: Trigger, lastSync: Instant?, now: Instant) -> Decision {
        guard trigger == .automatic, let lastSync else { return .run }
        let elapsed = now.epochMillis - lastSync.epochMillis
        guard elapsed >= 0, elapsed < self.intervalMillis else { return .run }
        return .skip(remainingMillis: self.intervalMillis - elapsed)
    }

    /// Decides from a meter's state: only a sync that reached the meter's records (success or no
    /// new records) starts the cooldown; a failed or interrupted attempt may be retried at once.
    public func decide(_ trigger: Trigger, meter: MeterState, now: Instant) -> Decision {
        guard let last = meter.lastSync, last.result == .success || last.result == .noNewRecords else {
            return .run
        }
        return self.decide(trigger, lastSync: last.at, now: now)
    }
}
