import GlucoseProfile
public import HealthDataSync
public import SugarWire

extension ReadingExport.CSVRow {
    /// The CSV row of a stored reading, with the values ``Wire/Reading``'s init from the same
    /// reading carries (so `ListReadings` with `csv` writes the rows a client writes from the full
    /// objects, byte for byte): the sequence number, sample type and location of the stored packet
    /// when it decodes as a Glucose Measurement (the stored number otherwise), the meal of the
    /// stored context when it decodes. Made without a ``JSONValue`` per reading.
    public init(_ stored: StoredReading) {
        let r = stored.reading
        var sequenceNumber = Int64(r.sequenceNumber)
        var sampleType: String?
        var sampleLocation: String?
        if let measurement = try? GlucoseMeasurement(bytes: r.measurementBytes, options: .lenientDateTime) {
            sequenceNumber = Int64(measurement.sequenceNumber)
            sampleType = measurement.type?.name
            sampleLocation = measurement.sampleLocation?.name
        }
        let meal = r.contextBytes.flatMap { try? MeasurementContext(bytes: $0) }?.meal?.name
        self.init(
            meter: r.meter.rawValue, epoch: Int64(stored.epoch), sequenceNumber: sequenceNumber, iso: r.instant.isoString,
            epochMillis: r.instant.epochMillis, meterLocalTime: r.time.meterLocalTime.isoString,
            utcOffsetMinutes: Int64(r.time.utcOffsetSeconds / 60), mgdL: r.mgdL, mmolL: r.mmolL, ketoneMmolL: r.ketoneMmolL,
            sampleType: sampleType, sampleLocation: sampleLocation, meal: meal, flags: r.flags.names, person: stored.person)
    }
}
