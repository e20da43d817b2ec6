import GlucoseProfile
public import JSON

/// Export formats for readings, from the typed readings `ListReadings` returns (``Wire/Reading``)
/// or `FollowReadings` sends (``Wire/CompactReading``).
///
/// Every format carries a stable per-reading identifier (meter, reset epoch and sequence
/// number), so importing the same export twice does not duplicate anything downstream.
public enum ReadingExport {
    /// Column names of the CSV export, in order.
    public static let csvColumns = [
        "reading_id", "meter", "sequence", "measured_at_utc", "epoch_millis", "meter_local_time",
        "utc_offset_minutes", "value_mg_dl", "value_mmol_l", "ketone_mmol_l", "sample_type",
        "sample_location", "meal", "control_solution", "flags", "person",
    ]

    /// RFC 4180 CSV with a header row. Both units are always written (mg/dL = mmol/L × 18.0156),
    /// mmol/L exact (the stored value, as JSON writes it), mg/dL as a whole number.
    public static func csv(_ readings: [Wire.Reading]) -> String {
        self.csvHeader + self.csvRows(readings)
    }

    /// The CSV header row (``csvColumns``), which a streamed export writes once.
    public static let csvHeader = ReadingExport.csvColumns.joined(separator: ",") + "\r\n"

    /// The CSV rows of `readings` without the header: a streamed export writes page after page.
    public static func csvRows(_ readings: [Wire.Reading]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(160 * readings.count)
        for r in readings { self.writeCSVRow(CSVRow(r), into: &out) }
        return String(decoding: out, as: UTF8.self)
    }

    /// Nightscout `entries`, ready for `POST /api/v1/entries` (what the Nightscout sink posts):
    /// `{"type": "mbg", "mbg": <mg/dL>, "date": <epoch ms>, "dateString": <ISO 8601 with the
    /// reading's own UTC offset>, "utcOffset": <minutes>, "sysTime": <same as dateString>,
    /// "device": "sugard://" + meter}`.
    ///
    /// Nightscout's `mbg` is a number in mg/dL; readings without one (HI, LO, no value), control
    /// solution tests and ketone records cannot be entries and are left out; `skipped` counts
    /// them so the caller can say so.
    public static func nightscout(_ readings: [Wire.Reading]) -> (entries: JSONValue, skipped: Int) {
        let entries = readings.compactMap { self.nightscoutEntry(Wire.CompactReading($0)) }
        return (.array(entries), readings.count - entries.count)
    }

    /// The Nightscout entry of one reading, or nil when it cannot be one (see ``nightscout(_:)``).
    public static func nightscoutEntry(_ r: Wire.CompactReading) -> JSONValue? {
        guard let mgdL = self.nightscoutGlucose(r) else { return nil }
        let entry: JSONObject = [
            "type": "mbg",
            "mbg": .int(Int64(mgdL.rounded())),
            "date": .int(r.time.epochMillis),
            "dateString": .string(r.time.local),
            "utcOffset": .int(r.time.utcOffsetMinutes),
            "sysTime": .string(r.time.local),
            "device": .string("sugard://" + r.meter),
        ]
        return .object(entry)
    }

    /// A Nightscout "BG Check" treatment for one reading (the same readings as entries):
    /// `{"eventType": "BG Check", "glucose": <value>, "glucoseType": "Finger", "units": "mg/dl" or
    /// "mmol", "created_at": <ISO 8601 with the reading's offset>, "enteredBy": "sugard",
    /// "identifier": <UUID>}`: mg/dL as an integer, mmol/L with one decimal.
    public static func nightscoutTreatment(_ r: Wire.CompactReading, unit: Wire.Unit) -> JSONValue? {
        guard let mgdL = self.nightscoutGlucose(r) else { return nil }
        let mmolL = r.mmolL ?? mgdL / glucoseMolarMass
        let treatment: JSONObject = [
            "eventType": "BG Check",
            "glucose": unit == .mgdl ? .int(Int64(mgdL.rounded())) : .double((mmolL * 10).rounded() / 10),
            "glucoseType": "Finger",
            "units": unit == .mgdl ? "mg/dl" : "mmol",
            "created_at": .string(r.time.local),
            "enteredBy": "sugard",
            "identifier": .string(self.nightscoutIdentifier(r)),
        ]
        return .object(treatment)
    }

    /// The Nightscout treatment of a LO or HI (``Wire/ReadingKind/lo``, ``Wire/ReadingKind/hi``),
    /// which has no number to be an entry: a `Note` the care portal shows, never with an invented
    /// glucose value: `{"eventType": "Note", "notes": "LO: glucose below the meter's range (meter
    /// <address>)", "created_at": <ISO 8601 with the reading's offset>, "enteredBy": "sugard",
    /// "identifier": <UUID>}`. nil for any other reading.
    public static func nightscoutRangeNote(_ r: Wire.CompactReading) -> JSONValue? {
        let notes: String
        switch r.kind {
        case .lo: notes = "LO: glucose below the meter's range (meter \(r.meter))"
        case .hi: notes = "HI: glucose above the meter's range (meter \(r.meter))"
        case .glucose, .controlSolution, .ketone, .noValue: return nil
        }
        let treatment: JSONObject = [
            "eventType": "Note",
            "notes": .string(notes),
            "created_at": .string(r.time.local),
            "enteredBy": "sugard",
            "identifier": .string(self.nightscoutIdentifier(r)),
        ]
        return .object(treatment)
    }

    /// A treatment's `identifier`: the version-5 UUID of the reading's identifier (the one its FHIR
    /// export names it by), so the same reading always upserts the same treatment and two meters'
    /// treatments in the same second stay two.
    public static func nightscoutIdentifier(_ r: Wire.CompactReading) -> String {
        NameUUID(namespace: self.uuidNamespace, name: "reading/" + self.identifier(r)).description
    }

    /// The mg/dL of a reading that can be a Nightscout entry: a glucose value (not a control
    /// solution test, a ketone record, LO, HI or a reading without a value).
    private static func nightscoutGlucose(_ r: Wire.CompactReading) -> Double? {
        guard r.kind == .glucose, let mgdL = r.mgdL else { return nil }
        return mgdL
    }

    /// `<meter>/<epoch>/<sequence>`: stable across exports and re-syncs.
    public static func identifier(meter: String, epoch: Int64, sequenceNumber: Int64) -> String {
        "\(meter)/\(epoch)/\(sequenceNumber)"
    }

    /// ``identifier(meter:epoch:sequenceNumber:)`` of a reading.
    public static func identifier(_ r: Wire.Reading) -> String {
        self.identifier(meter: r.meter, epoch: r.epoch, sequenceNumber: r.sequenceNumber)
    }

    /// ``identifier(meter:epoch:sequenceNumber:)`` of a compact reading.
    public static func identifier(_ r: Wire.CompactReading) -> String {
        self.identifier(meter: r.meter, epoch: r.epoch, sequenceNumber: r.sequenceNumber)
    }

    static func number(_ value: Double?, digits: Int) -> String {
        guard let value else { return "" }
        return self.formatted(value, digits: digits)
    }

    /// Fixed-point text without Foundation: `formatted(5.55, digits: 1)` is "5.6".
    public static func formatted(_ value: Double, digits: Int) -> String {
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let scaled = (abs(value) * scale).rounded()
        let whole = Int64(scaled / scale)
        var text = (value < 0 && scaled != 0 ? "-" : "") + String(whole)
        if digits > 0 {
            let frac = String(Int64(scaled) - whole * Int64(scale))
            text += "." + String(repeating: "0", count: digits - frac.count) + frac
        }
        return text
    }
}
