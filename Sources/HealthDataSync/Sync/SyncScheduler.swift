/// Decides whether a sync may start: one at a time per meter, cooldown for automatic syncs.
///
/// A plain value with no clock of its own: callers pass `now`. Many meters are independent.
public struct SyncScheduler: Hashable, Sendable {
    /// What to do with a sync request.
    public enum Decision: Hashable, Sendable {
        /// Start now (the meter is marked running).
        case start
        /// An automatic sync came within the cooldown of the meter's last sync.
        case skipCooldown(remainingMillis: Int64)
        /// A sync of this meter is running.
        case alreadyRunning
    }

    /// Automatic syncs within this many milliseconds of the meter's last sync are skipped.
    public var cooldownMillis: Int64
    private var lastSync: [MeterID: Instant] = [:]
    private var running: Set<MeterID> = []

    /// - Parameter cooldownSeconds: default 30 (architecture "Cooldown").
    public init(cooldownSeconds: Double = 30) {
        self.cooldownMillis = Int64(cooldownSeconds * 1000)
    }

    /// Asks to start a sync.
    /// - Parameters:
    ///   - force: an explicit request (`sugarctl sync --force`): the cooldown does not apply.
    ///   - now: the current time.
    public mutating func request(_ meter: MeterID, force: Bool, now: Instant) -> Decision {
        if self.running.contains(meter) { return .alreadyRunning }
        if !force, let last = self.lastSync[meter] {
            let elapsed = now.epochMillis - last.epochMillis
            if elapsed < self.cooldownMillis { return .skipCooldown(remainingMillis: self.cooldownMillis - max(elapsed, 0)) }
        }
        self.running.insert(meter)
        return .start
    }

    /// Marks a sync as ended (any result); the cooldown counts from here.
    public mutating func finished(_ meter: MeterID, at: Instant) {
        self.running.remove(meter)
        self.lastSync[meter] = at
    }

    /// Seeds the last sync time (from the store at start-up); keeps a later one already known.
    public mutating func noteLastSync(_ meter: MeterID, at: Instant) {
        if let known = self.lastSync[meter], known >= at { return }
        self.lastSync[meter] = at
    }

    public func isRunning(_ meter: MeterID) -> Bool { self.running.contains(meter) }

    public func lastSync(of meter: MeterID) -> Instant? { self.lastSync[meter] }

    /// Forgets a meter's history (forget/remove).
    public mutating func forget(_ meter: MeterID) {
        self.lastSync[meter] = nil
    }
}
