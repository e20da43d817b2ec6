import GlucoseProfile

/// Facts the daemon concluded about a reading, as names that appear in every export.
public struct ReadingFlags: OptionSet, Hashable, Sendable {
    /// The flag bits as stored (bit 0 = ``controlSolution`` … bit 9 = ``suspect``).
    public var rawValue: UInt32
    /// Flags from their stored bits.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// A control-solution test (type 10 or sample location 4): stored, excluded from statistics.
    public static let controlSolution = ReadingFlags(rawValue: 1 << 0)
    /// Above what the meter can measure (+INF with status bit 5).
    public static let hi = ReadingFlags(rawValue: 1 << 1)
    /// Below what the meter can measure (−INF with status bit 6). A critical event: never dropped.
    public static let lo = ReadingFlags(rawValue: 1 << 2)
    /// The meter flagged its time as unreliable (status bit 11), or the time could not be trusted.
    public static let timeFault = ReadingFlags(rawValue: 1 << 3)
    /// A blood-ketone record (i-SENS context meal 6); never counted as glucose.
    public static let ketone = ReadingFlags(rawValue: 1 << 4)
    /// The meter reported a device problem for this record (status bits other than time fault).
    public static let deviceFault = ReadingFlags(rawValue: 1 << 5)
    /// The concentration is NaN, NRes or reserved: no value.
    public static let noValue = ReadingFlags(rawValue: 1 << 6)
    /// The meter's clock could not be read; the time assumes it was right.
    public static let clockUnverified = ReadingFlags(rawValue: 1 << 7)
    /// A vendor quirk changed how this record was read (see ``TimeResolution/quirks``).
    public static let quirkApplied = ReadingFlags(rawValue: 1 << 8)
    /// The meter marked this record as suspect (e.g. Fora's bogus record when its memory is full).
    public static let suspect = ReadingFlags(rawValue: 1 << 9)

    /// Stable names, in a fixed order, for JSON and CSV.
    public static let allNamed: [(ReadingFlags, String)] = [
        (.controlSolution, "controlSolution"), (.hi, "hi"), (.lo, "lo"), (.timeFault, "timeFault"),
        (.ketone, "ketone"), (.deviceFault, "deviceFault"), (.noValue, "noValue"),
        (.clockUnverified, "clockUnverified"), (.quirkApplied, "quirkApplied"), (.suspect, "suspect"),
    ]

    /// The names of the flags set, in ``allNamed``'s order; empty when none is.
    public var names: [String] {
        guard !self.isEmpty else { return [] }
        var out: [String] = []
        for (flag, name) in ReadingFlags.allNamed where self.contains(flag) { out.append(name) }
        return out
    }

    /// The flags named; unknown names are ignored.
    public init(names: [String]) {
        self = []
        for (flag, name) in ReadingFlags.allNamed where names.contains(name) { self.insert(flag) }
    }
}

/// How a reading's instant was worked out from the meter's zone-less time.
public struct TimeResolution: Hashable, Sendable {
    /// How sure the instant is.
    public enum Method: String, Hashable, Sendable {
        /// Meter clock read at sync; skew applied; host or configured zone.
        case meterClock
        /// No readable meter clock; the meter's time is assumed correct in the zone.
        case assumedClock
        /// Time fault or unusable fields: the instant is a best guess.
        case untrusted
    }

    /// How the instant was worked out.
    public var method: Method
    /// The zone the meter's wall-clock time was read in (IANA name, e.g. "Europe/Berlin").
    public var zone: String
    /// UTC offset of that zone at the reading's time, in seconds.
    public var utcOffsetSeconds: Int
    /// meter clock − host clock at sync time, in seconds; nil when the clock was not read.
    public var meterClockSkewSeconds: Int64?
    /// The meter's user-facing local time after quirks (base time + offset).
    public var meterLocalTime: LocalDateTime
    /// Vendor quirks applied (names from the quirk table), in order.
    public var quirks: [String]

    /// A resolution.
    public init(
        method: Method, zone: String, utcOffsetSeconds: Int, meterClockSkewSeconds: Int64?,
        meterLocalTime: LocalDateTime, quirks: [String] = []
    ) {
        self.method = method
        self.zone = zone
        self.utcOffsetSeconds = utcOffsetSeconds
        self.meterClockSkewSeconds = meterClockSkewSeconds
        self.meterLocalTime = meterLocalTime
        self.quirks = quirks
    }
}

/// One record from a meter: what the meter said (raw facts, never changed) and what the daemon
/// concluded (recomputable).
public struct Reading: Hashable, Sendable {
    // Raw facts.
    /// The meter that sent the record.
    public var meter: MeterID
    /// The record's sequence number on the meter (a reset meter numbers its records afresh).
    public var sequenceNumber: UInt16
    /// The Glucose Measurement (0x2A18) packet exactly as received.
    public var measurementBytes: [UInt8]
    /// The Measurement Context (0x2A34) packet with the same sequence number, if one came.
    public var contextBytes: [UInt8]?
    /// Base Time as sent (year/month/day may be out of range for buggy firmware).
    public var baseTime: LocalDateTime
    /// The Time Offset field in minutes; nil when the record has none.
    public var timeOffsetMinutes: Int?
    /// The concentration's raw SFLOAT bits; nil when the record has no concentration.
    public var concentrationRaw: UInt16?
    /// The concentration unit the meter sent (kg/L or mol/L); nil without a concentration.
    public var unit: ConcentrationUnit?
    /// The Type field's code (e.g. 1 capillary whole blood, 10 control solution); nil when absent.
    public var sampleType: UInt8?
    /// The Sample Location field's code (e.g. 1 finger, 4 control solution); nil when absent.
    public var sampleLocation: UInt8?
    /// The Sensor Status Annunciation bits; nil when absent.
    public var sensorStatus: UInt16?
    /// Context meal code (i-SENS uses 6 for ketone records).
    public var meal: UInt8?

    // Conclusions.
    /// The UTC instant of the test.
    public var instant: Instant
    /// How ``instant`` was worked out.
    public var time: TimeResolution
    /// Value in mg/dL (for ketone records: nil; see ``ketoneMmolL``).
    public var mgdL: Double?
    /// Value in mmol/L (nil when ``mgdL`` is).
    public var mmolL: Double?
    /// Blood ketone in mmol/L for ketone records.
    public var ketoneMmolL: Double?
    /// What the daemon concluded about the record.
    public var flags: ReadingFlags

    /// A reading from its raw facts and conclusions (the sync's reading builder makes them).
    public init(
        meter: MeterID, sequenceNumber: UInt16, measurementBytes: [UInt8], contextBytes: [UInt8]?,
        baseTime: LocalDateTime, timeOffsetMinutes: Int?, concentrationRaw: UInt16?, unit: ConcentrationUnit?,
        sampleType: UInt8?, sampleLocation: UInt8?, sensorStatus: UInt16?, meal: UInt8?,
        instant: Instant, time: TimeResolution, mgdL: Double?, mmolL: Double?, ketoneMmolL: Double? = nil,
        flags: ReadingFlags
    ) {
        self.meter = meter
        self.sequenceNumber = sequenceNumber
        self.measurementBytes = measurementBytes
        self.contextBytes = contextBytes
        self.baseTime = baseTime
        self.timeOffsetMinutes = timeOffsetMinutes
        self.concentrationRaw = concentrationRaw
        self.unit = unit
        self.sampleType = sampleType
        self.sampleLocation = sampleLocation
        self.sensorStatus = sensorStatus
        self.meal = meal
        self.instant = instant
        self.time = time
        self.mgdL = mgdL
        self.mmolL = mmolL
        self.ketoneMmolL = ketoneMmolL
        self.flags = flags
    }

    /// Whether the reading counts in glucose statistics (not control solution, not ketone, has a value).
    public var countsAsGlucose: Bool {
        !self.flags.contains(.controlSolution) && !self.flags.contains(.ketone) && self.mgdL != nil
    }
}
