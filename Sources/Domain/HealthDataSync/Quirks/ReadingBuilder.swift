import GlucoseProfile

/// Turns one decoded record (measurement plus optional context) into a ``Reading``, applying the
/// general GLS rules and the meter's vendor quirks, then resolving its time.
///
/// Rules (each is a test in `QuirkBehaviourTests`):
/// - Control solution (type 10 or location 4): flagged `controlSolution`, value kept, excluded from
///   statistics by ``Reading/countsAsGlucose``.
/// - HI/LO: +INF or status bit 5 is `hi`, −INF or status bit 6 is `lo`. A HI/LO reading never carries
///   a number (`mgdL`/`mmolL` nil; the raw SFLOAT is kept) and is never dropped.
/// - NaN, NRes, reserved or no concentration: `noValue`.
/// - Status bits other than 5, 6 and 11: `deviceFault`. Bit 11: `timeFault` (time untrusted).
/// - i-SENS month 13: January of the next year, flagged `quirkApplied`.
/// - i-SENS ketone (context meal 6): `ketone`, `ketoneMmolL` = mg/dL value ÷ 10, no glucose value;
///   above 8.0 mmol/L (or +INF) it is `hi`.
/// - Fora bogus 2037 record when the meter holds 450+ records: `suspect`, no value, no HI/LO.
public struct ReadingBuilder: Sendable {
    public var meter: MeterID
    public var profile: MeterProfile
    public var resolver: TimeResolver
    /// The meter's RACP count for this sync (used by the Fora rule).
    public var recordCount: Int?

    public init(meter: MeterID, profile: MeterProfile, resolver: TimeResolver, recordCount: Int?) {
        self.meter = meter
        self.profile = profile
        self.resolver = resolver
        self.recordCount = recordCount
    }

    /// Builds the reading for one record.
    public func reading(
        measurementBytes: [UInt8], measurement m: GlucoseMeasurement, contextBytes: [UInt8]?,
        context: MeasurementContext?
    ) -> Reading {
        var flags: ReadingFlags = []
        var quirks: [String] = []
        var base = LocalDateTime(
            year: Int(m.baseTime.year), month: Int(m.baseTime.month), day: Int(m.baseTime.day),
            hour: Int(m.baseTime.hours), minute: Int(m.baseTime.minutes), second: Int(m.baseTime.seconds))
        let rawBase = base
        if base.month == 13 && self.profile.monthThirteenIsNextJanuary {
            base.year += 1
            base.month = 1
            quirks.append(QuirkID.monthThirteen.rawValue)
            flags.insert(.quirkApplied)
        }
        let status = m.sensorStatus ?? []
        if self.profile.timeOffsetPolicy == .ignore, let offset = m.timeOffsetMinutes, offset != 0 {
            quirks.append(QuirkID.timeOffsetIgnored.rawValue)
            flags.insert(.quirkApplied)
        }
        let time = self.resolver.resolve(
            baseTime: base, timeOffsetMinutes: m.timeOffsetMinutes.map { Int($0) }, policy: self.profile.timeOffsetPolicy,
            timeFault: status.contains(.timeFault), quirks: quirks)
        flags.formUnion(time.flags)

        var mgdL = m.mgdL
        var mmolL = m.mmolL
        var ketone: Double?
        if m.isControlSolution { flags.insert(.controlSolution) }
        let special = m.concentration?.special
        if special == .positiveInfinity || status.contains(.resultTooHigh) { flags.insert(.hi) }
        if special == .negativeInfinity || status.contains(.resultTooLow) { flags.insert(.lo) }
        if m.concentration == nil || special == .nan || special == .nres || special == .reserved {
            flags.insert(.noValue)
        }
        let faultBits = status.rawValue & ~(SensorStatus.resultTooHigh.rawValue | SensorStatus.resultTooLow.rawValue
            | SensorStatus.timeFault.rawValue)
        if faultBits != 0 { flags.insert(.deviceFault) }
        if !flags.isDisjoint(with: [.hi, .lo, .noValue]) {
            mgdL = nil
            mmolL = nil
        }
        if let meal = context?.meal?.code, meal == 6, self.profile.ketoneInMeal6 {
            flags.insert(.ketone)
            flags.insert(.quirkApplied)
            var notes = time.resolution.quirks
            notes.append(QuirkID.ketoneMeal6.rawValue)
            ketone = mgdL.map { $0 / 10 }
            if let value = mgdL, value > 80 { flags.insert(.hi) }
            if flags.contains(.hi) { ketone = nil }
            mgdL = nil
            mmolL = nil
            var resolution = time.resolution
            resolution.quirks = notes
            return self.make(
                m, measurementBytes, contextBytes, rawBase, context, time.instant, resolution, mgdL, mmolL, ketone, flags)
        }
        var resolution = time.resolution
        if self.profile.bogus2037WhenFull, base.year >= 2037, (self.recordCount ?? 0) >= 450 {
            flags.insert(.suspect)
            flags.insert(.quirkApplied)
            flags.subtract([.hi, .lo])
            resolution.quirks.append(QuirkID.bogus2037.rawValue)
            mgdL = nil
            mmolL = nil
        }
        return self.make(m, measurementBytes, contextBytes, rawBase, context, time.instant, resolution, mgdL, mmolL, ketone, flags)
    }

    private func make(
        _ m: GlucoseMeasurement, _ bytes: [UInt8], _ contextBytes: [UInt8]?, _ rawBase: LocalDateTime,
        _ context: MeasurementContext?, _ instant: Instant, _ resolution: TimeResolution, _ mgdL: Double?,
        _ mmolL: Double?, _ ketone: Double?, _ flags: ReadingFlags
    ) -> Reading {
        let unit = m.unit
        return Reading(
            meter: self.meter, sequenceNumber: m.sequenceNumber, measurementBytes: bytes, contextBytes: contextBytes,
            baseTime: rawBase, timeOffsetMinutes: m.timeOffsetMinutes.map { Int($0) },
            concentrationRaw: m.concentration?.rawValue, unit: unit, sampleType: m.type?.code,
            sampleLocation: m.sampleLocation?.code, sensorStatus: m.sensorStatus?.rawValue, meal: context?.meal?.code,
            instant: instant, time: resolution, mgdL: mgdL, mmolL: mmolL, ketoneMmolL: ketone, flags: flags)
    }
}

/// Handling for meters that number records newest-first (TaiDoc): their sequence numbers change
/// with every new measurement, so they cannot identify a record.
public enum ReversedSequenceNormalizer {
    /// Drops received readings already stored (same ``ReadingContent``) and numbers the new ones
    /// after the highest stored sequence number, oldest first. The meter's own number stays in
    /// ``Reading/measurementBytes``.
    /// - Parameters:
    ///   - storedContent: which of the received readings' contents the store holds.
    ///   - highestStored: the highest stored sequence number of the meter (nil: none stored).
    /// - Returns: the new readings and how many were already stored.
    public static func normalize(
        received: [Reading], storedContent: Set<ReadingContent>, highestStored: UInt16?
    ) -> (readings: [Reading], alreadyStored: Int) {
        var known = storedContent
        var next = highestStored.map { Int($0) + 1 } ?? 0
        var fresh: [Reading] = []
        var already = 0
        for r in received.sorted(by: { ($0.baseTime, $1.sequenceNumber) < ($1.baseTime, $0.sequenceNumber) }) {
            let k = ReadingContent(r)
            if known.contains(k) {
                already += 1
                continue
            }
            known.insert(k)
            var copy = r
            copy.sequenceNumber = UInt16(truncatingIfNeeded: next)
            next += 1
            copy.flags.insert(.quirkApplied)
            copy.time.quirks.append(QuirkID.reversedSequence.rawValue)
            fresh.append(copy)
        }
        return (fresh, already)
    }

    /// The same, against stored readings (tests and small stores).
    public static func normalize(received: [Reading], stored: [Reading]) -> (readings: [Reading], alreadyStored: Int) {
        Self.normalize(
            received: received, storedContent: Set(stored.map(ReadingContent.init)),
            highestStored: stored.map(\.sequenceNumber).max())
    }
}
