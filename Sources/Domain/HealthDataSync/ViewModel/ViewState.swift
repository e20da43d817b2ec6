import GlucoseProfile
/// The names of the view model's fields. Stable: they are the Varlink field names.
public enum StateField: String, Hashable, CaseIterable, Sendable {
    /// ``ViewState/daemon``.
    case daemon
    /// ``ViewState/adapter``.
    case adapter
    /// ``ViewState/meters``.
    case meters
    /// ``ViewState/lastReading``.
    case lastReading
    /// ``ViewState/readingCount``.
    case readingCount
    /// ``ViewState/sync``.
    case sync
    /// ``ViewState/errors``.
    case errors
}

/// What the daemon says about itself. Uptime is `now − startedAt`, computed by readers, so the
/// field does not change every second.
public struct DaemonInfo: Hashable, Sendable {
    /// sugard's version.
    public var version: String
    /// When the daemon started.
    public var startedAt: Instant
    /// Whether storage works, and the last integrity check.
    public var storage: StorageHealth

    /// The daemon's facts.
    public init(version: String, startedAt: Instant, storage: StorageHealth) {
        self.version = version
        self.startedAt = startedAt
        self.storage = storage
    }
}

/// A value summary of the newest reading: enough for `sugarctl status`, nothing live. Age is
/// `now − instant`, computed by readers.
public struct ReadingSummary: Hashable, Sendable {
    /// The meter that took it.
    public var meter: MeterID
    /// Its sequence number on the meter.
    public var sequenceNumber: UInt16
    /// When it was measured (UTC).
    public var instant: Instant
    /// Value in mg/dL; nil without a glucose value.
    public var mgdL: Double?
    /// Value in mmol/L; nil without a glucose value.
    public var mmolL: Double?
    /// Blood ketone in mmol/L for ketone records.
    public var ketoneMmolL: Double?
    /// What the daemon concluded about it.
    public var flags: ReadingFlags
    /// Glucose Measurement sample type (spec code), when sent.
    public var sampleType: UInt8?
    /// Glucose Measurement sample location (spec code), when sent.
    public var sampleLocation: UInt8?
    /// The meter's own wall-clock time for the reading (after quirks).
    public var meterLocalTime: LocalDateTime
    /// The zone's UTC offset at the reading's time, in seconds.
    public var utcOffsetSeconds: Int
    /// How its instant was worked out.
    public var timeMethod: TimeResolution.Method
    /// Store row id and storage time, when it came from the store.
    public var storeID: Int64?
    public var storedAt: Instant?

    /// A summary of a reading; the missing unit is converted (mmol/L = mg/dL ÷ 18.0156).
    public init(_ reading: Reading, storeID: Int64? = nil, storedAt: Instant? = nil) {
        self.meter = reading.meter
        self.sequenceNumber = reading.sequenceNumber
        self.instant = reading.instant
        switch (reading.mgdL, reading.mmolL) {
        case (let mg?, nil):
            self.mgdL = mg
            self.mmolL = mg / GlucoseUnit.molarMass
        case (nil, let mmol?):
            self.mgdL = mmol * GlucoseUnit.molarMass
            self.mmolL = mmol
        case (let mg, let mmol):
            self.mgdL = mg
            self.mmolL = mmol
        }
        self.ketoneMmolL = reading.ketoneMmolL
        self.flags = reading.flags
        self.sampleType = reading.sampleType
        self.sampleLocation = reading.sampleLocation
        self.meterLocalTime = reading.time.meterLocalTime
        self.utcOffsetSeconds = reading.time.utcOffsetSeconds
        self.timeMethod = reading.time.method
        self.storeID = storeID
        self.storedAt = storedAt
    }

    /// A summary of a stored reading, with its row id and storage time.
    public init(_ stored: StoredReading) {
        self.init(stored.reading, storeID: stored.id, storedAt: stored.storedAt)
    }
}

/// The daemon-wide sync picture, derived from the meter models by the ``ModelStore``.
public struct SyncOverview: Hashable, Sendable {
    /// Whether any meter is syncing.
    public enum Phase: String, Hashable, Sendable {
        /// No attempt is running.
        case idle
        /// At least one meter's attempt is running.
        case syncing
    }

    /// Meters with an attempt running (sync phase not idle), sorted.
    public var activeMeters: [MeterID]
    /// The most recent finished attempt of any known meter.
    public var lastResult: LastSync?

    /// ``Phase/syncing`` while any meter is active.
    public var phase: Phase { self.activeMeters.isEmpty ? .idle : .syncing }

    /// An overview; idle with no last result by default.
    public init(activeMeters: [MeterID] = [], lastResult: LastSync? = nil) {
        self.activeMeters = activeMeters
        self.lastResult = lastResult
    }
}

/// The daemon's business state: the single source of truth that clients observe.
///
/// Writers change it through ``ObservableModel/update(_:)``. `meters` and `sync` are derived from
/// the per-meter models by the ``ModelStore`` and cannot be set from outside the module; `errors`
/// grows only through ``record(_:)``, which keeps it bounded.
public struct ViewState: Hashable, Sendable {
    /// How many recent errors ``errors`` keeps.
    public static let errorLimit = 32

    /// sugard's version, start time and storage health.
    public var daemon: DaemonInfo
    /// The Bluetooth adapter.
    public var adapter: AdapterState
    /// Every known meter's state, by id (set through the meter models).
    public internal(set) var meters: [MeterID: MeterState]
    /// The newest reading by measured time; nil when none is known.
    public var lastReading: ReadingSummary?
    /// How many readings are stored.
    public var readingCount: Int
    /// Derived from the meters: which are syncing and the last finished attempt.
    public internal(set) var sync: SyncOverview
    /// Recent errors, oldest first, at most ``errorLimit``.
    public internal(set) var errors: [ReportedError]

    /// A state with no meters, no errors and an idle sync overview.
    public init(daemon: DaemonInfo, adapter: AdapterState = .absent, lastReading: ReadingSummary? = nil, readingCount: Int = 0) {
        self.daemon = daemon
        self.adapter = adapter
        self.meters = [:]
        self.lastReading = lastReading
        self.readingCount = readingCount
        self.sync = SyncOverview()
        self.errors = []
    }

    /// Appends an error, dropping the oldest beyond ``errorLimit``.
    public mutating func record(_ error: ReportedError) {
        self.errors.append(error)
        if self.errors.count > ViewState.errorLimit {
            self.errors.removeFirst(self.errors.count - ViewState.errorLimit)
        }
    }

    /// Meters sorted by id.
    public var meterList: [MeterState] { self.meters.values.sorted { $0.id < $1.id } }

    /// Puts a meter's state in and rederives ``sync``.
    mutating func setMeter(_ meter: MeterState) {
        self.meters[meter.id] = meter
        self.rederiveSync()
    }

    /// Takes a meter out and rederives ``sync``.
    mutating func removeMeter(_ id: MeterID) {
        self.meters[id] = nil
        self.rederiveSync()
    }

    /// ``sync`` from the meters: the active ones sorted, the latest finished attempt (ties by meter id).
    private mutating func rederiveSync() {
        let active = self.meters.values.filter { $0.sync != .idle && !$0.sync.isFinal }.map(\.id).sorted()
        let last = self.meters.values.compactMap(\.lastSync).max { a, b in
            a.at != b.at ? a.at < b.at : a.meter < b.meter
        }
        self.sync = SyncOverview(activeMeters: active, lastResult: last)
    }

    /// A typed field value of the view model.
    public enum Value: Hashable, Sendable {
        /// ``ViewState/daemon``.
        case daemon(DaemonInfo)
        /// ``ViewState/adapter``.
        case adapter(AdapterState)
        /// Sorted by meter id.
        case meters([MeterState])
        /// ``ViewState/lastReading``.
        case lastReading(ReadingSummary?)
        /// ``ViewState/readingCount``.
        case readingCount(Int)
        /// ``ViewState/sync``.
        case sync(SyncOverview)
        /// ``ViewState/errors``, oldest first.
        case errors([ReportedError])
    }
}

extension ViewState: ObservableState {
    /// The view model's fields are ``StateField``s.
    public typealias Field = StateField

    /// The field's current value.
    public func value(of field: StateField) -> Value {
        switch field {
        case .daemon: return .daemon(self.daemon)
        case .adapter: return .adapter(self.adapter)
        case .meters: return .meters(self.meterList)
        case .lastReading: return .lastReading(self.lastReading)
        case .readingCount: return .readingCount(self.readingCount)
        case .sync: return .sync(self.sync)
        case .errors: return .errors(self.errors)
        }
    }

    /// Whether the field's value differs between the two states.
    public func differs(from other: ViewState, in field: StateField) -> Bool {
        switch field {
        case .daemon: return self.daemon != other.daemon
        case .adapter: return self.adapter != other.adapter
        case .meters: return self.meters != other.meters
        case .lastReading: return self.lastReading != other.lastReading
        case .readingCount: return self.readingCount != other.readingCount
        case .sync: return self.sync != other.sync
        case .errors: return self.errors != other.errors
        }
    }
}
