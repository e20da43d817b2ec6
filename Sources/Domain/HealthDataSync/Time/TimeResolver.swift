/// Whether a meter's Time Offset field is added to its Base Time.
///
/// GLS intends user-facing time = Base Time + Time Offset, and that is the default (``apply``).
/// Tidepool's `ble-glucose` stopped applying the offset for its i-SENS meters in 2025 ("time offset
/// not used in device time"), so the quirk table can choose ``ignore`` per vendor.
public enum TimeOffsetPolicy: String, Hashable, Sendable {
    /// User-facing time = Base Time + Time Offset (GLS).
    case apply
    /// User-facing time = Base Time; the offset is kept as a raw fact only.
    case ignore
}

/// The meter's clock as read during a sync, with the host time of the read.
public struct MeterClockSample: Hashable, Sendable {
    /// What the meter clock showed (Current Time 0x2A2B or Date Time 0x2A08): its user-facing time.
    public var meterTime: LocalDateTime
    /// The host's clock when the value arrived.
    public var hostTime: Instant

    /// A sample of `meterTime` read when the host clock showed `hostTime`.
    public init(meterTime: LocalDateTime, hostTime: Instant) {
        self.meterTime = meterTime
        self.hostTime = hostTime
    }
}

/// A reading's instant and how it was worked out.
public struct ResolvedTime: Hashable, Sendable {
    /// The reading's instant (UTC).
    public var instant: Instant
    /// How the instant was worked out: method, zone, offset, skew, the meter's own time and notes.
    public var resolution: TimeResolution
    /// `.timeFault` and/or `.clockUnverified` as they apply.
    public var flags: ReadingFlags
    /// Whether the corrected local time was unique, in a DST gap, or in a DST fold.
    public var localTimeKind: LocalTimeKind

    /// A resolved time.
    public init(instant: Instant, resolution: TimeResolution, flags: ReadingFlags, localTimeKind: LocalTimeKind) {
        self.instant = instant
        self.resolution = resolution
        self.flags = flags
        self.localTimeKind = localTimeKind
    }
}

/// Turns a meter's zone-less record time into a UTC instant.
///
/// Steps: user-facing time = Base Time (+ Time Offset unless the vendor policy says ``TimeOffsetPolicy/ignore``)
/// → minus the meter clock skew (meter clock − host clock, measured in wall-clock terms at sync)
/// → local wall time in the meter's zone (the host's zone or a per-meter configured one)
/// → UTC instant, with DST gaps shifted forward and folds taking the earlier instant
/// (see ``TimeZoneRules``). The same skew is applied to every record of a sync, as xDrip does:
/// the meter's clock is assumed to have been as far off when the record was made as it is now.
///
/// Notes recorded in ``TimeResolution/quirks`` besides vendor quirks:
/// `time.offsetIgnored`, `time.offsetUnknown` (0x7FFF/0x8000), `time.nonexistentLocalTime`,
/// `time.ambiguousLocalTime`, `time.invalidBaseTime`.
public struct TimeResolver: Hashable, Sendable {
    /// The zone the meter's wall clock is read in.
    public var zone: TimeZoneRules
    /// meter clock − host clock in seconds; nil when the meter's clock could not be read.
    public var skewSeconds: Int64?

    /// - Parameters:
    ///   - zone: the host's zone, or the zone configured for this meter.
    ///   - clock: the meter clock read at sync; nil for a meter with no readable clock.
    public init(zone: TimeZoneRules, clock: MeterClockSample?) {
        self.zone = zone
        self.skewSeconds = clock.map { Self.skew(of: $0, in: zone) }
    }

    /// A resolver with a known skew.
    public init(zone: TimeZoneRules, skewSeconds: Int64?) {
        self.zone = zone
        self.skewSeconds = skewSeconds
    }

    /// meter clock − host clock, both as wall-clock times in `zone`, in seconds.
    public static func skew(of sample: MeterClockSample, in zone: TimeZoneRules) -> Int64 {
        sample.meterTime.secondsSinceEpoch - zone.localTime(at: sample.hostTime).secondsSinceEpoch
    }

    /// Resolves one record's time.
    /// - Parameters:
    ///   - baseTime: Base Time after vendor fixes (e.g. i-SENS month 13 already carried).
    ///   - timeOffsetMinutes: the Time Offset field; nil when absent.
    ///   - policy: whether to apply the offset.
    ///   - timeFault: the record's sensor status bit 11 is set.
    ///   - quirks: vendor quirks already applied to this record, kept in order.
    public func resolve(
        baseTime: LocalDateTime, timeOffsetMinutes: Int?, policy: TimeOffsetPolicy = .apply, timeFault: Bool = false,
        quirks: [String] = []
    ) -> ResolvedTime {
        var notes = quirks
        var flags: ReadingFlags = []
        var userFacing = baseTime
        if let offset = timeOffsetMinutes {
            if offset == 0x7FFF || offset == -0x8000 {
                notes.append("time.offsetUnknown")
            } else if policy == .ignore {
                if offset != 0 { notes.append("time.offsetIgnored") }
            } else {
                userFacing = baseTime.adding(seconds: Int64(offset) * 60)
            }
        }
        var untrusted = timeFault
        if !baseTime.isValid {
            notes.append("time.invalidBaseTime")
            untrusted = true
        }
        let corrected = userFacing.adding(seconds: -(self.skewSeconds ?? 0))
        let local = self.zone.resolve(corrected)
        switch local.kind {
        case .unique: break
        case .nonexistent: notes.append("time.nonexistentLocalTime")
        case .ambiguous: notes.append("time.ambiguousLocalTime")
        }
        let method: TimeResolution.Method
        if untrusted {
            method = .untrusted
            flags.insert(.timeFault)
        } else if self.skewSeconds == nil {
            method = .assumedClock
        } else {
            method = .meterClock
        }
        if self.skewSeconds == nil { flags.insert(.clockUnverified) }
        let resolution = TimeResolution(
            method: method, zone: self.zone.identifier, utcOffsetSeconds: local.offset.utcOffsetSeconds,
            meterClockSkewSeconds: self.skewSeconds, meterLocalTime: userFacing, quirks: notes)
        return ResolvedTime(
            instant: Instant(epochSeconds: local.epochSeconds), resolution: resolution, flags: flags,
            localTimeKind: local.kind)
    }
}
