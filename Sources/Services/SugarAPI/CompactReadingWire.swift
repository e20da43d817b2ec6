import GlucoseProfile
public import HealthDataSync
public import SugarWire

extension Wire.CompactReading {
    /// The compact form of a stored reading (what `FollowReadings(compact: true)` sends), made
    /// from the stored row without decoding the packets again: the values of ``ReadingJSON/object(_:)``
    /// for the keys it carries.
    public init(_ stored: StoredReading) {
        let r = stored.reading
        /// A coded value (`{name, code}`) from a stored code and its name.
        func coded(_ code: UInt8, _ name: String) -> Wire.Coded { Wire.Coded(name: name, code: Int64(code)) }
        self.init(
            id: stored.id, meter: r.meter.rawValue, epoch: Int64(stored.epoch), sequenceNumber: Int64(r.sequenceNumber),
            time: Wire.CompactReading.Time(
                iso: r.instant.isoString, epochMillis: r.instant.epochMillis,
                local: r.instant.isoString(utcOffsetSeconds: r.time.utcOffsetSeconds),
                utcOffsetMinutes: Int64(r.time.utcOffsetSeconds / 60)),
            mgdL: r.mgdL, mmolL: r.mmolL, flags: r.flags.names,
            type: r.sampleType.map { SampleType(code: $0) }.map { coded($0.code, $0.name) },
            sampleLocation: r.sampleLocation.map { SampleLocation(code: $0) }.map { coded($0.code, $0.name) },
            meal: r.meal.map { Meal(code: $0) }.map { coded($0.code, $0.name) },
            person: stored.person)
    }
}
