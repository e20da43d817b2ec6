import HealthDataSync

/// A detected sequence reset: the meter's sequence numbers started over (or it was replaced), so
/// the store opened a new epoch for it. Readings before and after stay apart; none is lost.
public struct SequenceResetEvent: Hashable, Sendable {
    /// Why the store concluded the meter's sequence numbers restarted.
    public enum Reason: String, Hashable, Sendable {
        /// A record arrived with a sequence number already stored in the current epoch but with a
        /// different base time or value.
        case sequenceConflict
        /// A batch with records not yet stored ended below the stored high-water mark.
        case highWaterBackwards
        /// The meter reported a different Device Information serial number under the same address.
        case serialNumberChanged
        /// The sync found the meter's record at the high-water mark gone or different (its memory was
        /// cleared or its counter restarted) and downloaded everything into the new epoch.
        case meterReset
    }

    /// The event's row id.
    public var id: Int64
    /// The meter that was reset.
    public var meter: MeterID
    /// The epoch the stored readings before the reset belong to.
    public var oldEpoch: Int
    /// The epoch opened for the readings after it.
    public var newEpoch: Int
    /// When the store detected it (commit time).
    public var at: Instant
    /// Why the store concluded it.
    public var reason: Reason
    /// The sequence number of the record that revealed the reset, when one did.
    public var sequenceNumber: UInt16?
    /// The high-water mark of the old epoch.
    public var oldHighWater: UInt16?
    /// The sync session whose commit detected it.
    public var sessionID: Int64?

    /// An event with every field given.
    public init(
        id: Int64, meter: MeterID, oldEpoch: Int, newEpoch: Int, at: Instant, reason: Reason,
        sequenceNumber: UInt16?, oldHighWater: UInt16?, sessionID: Int64?
    ) {
        self.id = id
        self.meter = meter
        self.oldEpoch = oldEpoch
        self.newEpoch = newEpoch
        self.at = at
        self.reason = reason
        self.sequenceNumber = sequenceNumber
        self.oldHighWater = oldHighWater
        self.sessionID = sessionID
    }
}

/// Per-meter figures for `sugarctl` and support: what is stored and how syncing went.
public struct MeterSummary: Hashable, Sendable {
    /// The meter as stored (also for forgotten meters).
    public var meter: StoredMeter
    /// Whether the meter was forgotten (it left the meter list; its readings stay).
    public var forgotten: Bool
    /// Readings that count in glucose statistics (not control solution, not ketone, with a value).
    public var glucoseReadings: Int
    /// Control-solution tests stored.
    public var controlSolutionReadings: Int
    /// Ketone readings stored.
    public var ketoneReadings: Int
    /// Instants of the oldest and newest stored reading.
    public var firstReading: Instant?
    public var lastReading: Instant?
    /// Sequence resets detected for the meter (each opened a new epoch).
    public var sequenceResets: Int
    /// Recorded sync sessions.
    public var sessions: Int
    /// Those that ended `failed`, `interrupted` or `aborted`.
    public var failedSessions: Int

    /// A summary with every field given.
    public init(
        meter: StoredMeter, forgotten: Bool, glucoseReadings: Int, controlSolutionReadings: Int, ketoneReadings: Int,
        firstReading: Instant?, lastReading: Instant?, sequenceResets: Int, sessions: Int, failedSessions: Int
    ) {
        self.meter = meter
        self.forgotten = forgotten
        self.glucoseReadings = glucoseReadings
        self.controlSolutionReadings = controlSolutionReadings
        self.ketoneReadings = ketoneReadings
        self.firstReading = firstReading
        self.lastReading = lastReading
        self.sequenceResets = sequenceResets
        self.sessions = sessions
        self.failedSessions = failedSessions
    }
}

/// How the store opens and runs its connection.
public struct StoreOptions: Sendable {
    /// How long a write waits for another process's lock before failing with ``StoreError/Code/busy``.
    public var busyTimeoutMilliseconds: Int
    /// Run `PRAGMA quick_check` when opening; a damaged file then fails to open with `.corrupt`.
    /// It reads the whole file (85-90 % of opening a store of a million readings), so the daemon
    /// turns it off and checks in the background instead (``SQLiteReadingStore/check(_:reason:)``).
    public var quickCheckOnOpen: Bool
    /// The clock for `storedAt`, session commit times and reset events.
    public var now: WallClock
    /// How long health keeps saying the database file was replaced (status `degraded`, error
    /// `replaced`) after sugard recreated it, however many writes succeed meanwhile: long enough
    /// for a person or a monitor to see it. The first successful write after that clears it.
    public var replacedNotice: Duration

    /// Options with a 5 s busy timeout, a quick check on open, the system clock and a 60 s replaced notice.
    public init(
        busyTimeoutMilliseconds: Int = 5000, quickCheckOnOpen: Bool = true,
        now: @escaping WallClock = systemNow, replacedNotice: Duration = .seconds(60)
    ) {
        self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
        self.quickCheckOnOpen = quickCheckOnOpen
        self.now = now
        self.replacedNotice = replacedNotice
    }
}
