import GlucoseProfile
public import JSON

/// Export formats for readings, from the reading objects `ListReadings` returns (the keys of
/// `sugarctl decode measurement --json` plus `meter`, `time`, `context`, `flags`).
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

    /// RFC 4180 CSV with a header row. Both units are always written (mg/dL = mmol/L × 18.0156).
    public static func csv(_ readings: [JSONValue]) -> String {
        var out = self.csvColumns.joined(separator: ",") + "\r\n"
        for r in readings {
            let flags = r["flags"]?.arrayValue?.compactMap(\.stringValue) ?? []
            let fields: [String] = [
                self.identifier(r),
                r["meter"]?.stringValue ?? "",
                self.text(r["sequenceNumber"]),
                r["time"]?["iso"]?.stringValue ?? "",
                self.text(r["time"]?["epochMillis"]),
                self.text(r["time"]?["meterLocalTime"] ?? r["userFacingTime"]),
                self.text(r["time"]?["utcOffsetMinutes"]),
                self.number(r["mgdL"], digits: 0),
                self.number(r["mmolL"], digits: 1),
                self.number(r["ketoneMmolL"], digits: 1),
                r["type"]?["name"]?.stringValue ?? "",
                r["sampleLocation"]?["name"]?.stringValue ?? "",
                r["context"]?["meal"]?["name"]?.stringValue ?? "",
                flags.contains("controlSolution") ? "true" : "false",
                flags.joined(separator: " "),
                r["person"]?.stringValue ?? "",
            ]
            out += fields.map(self.csvField).joined(separator: ",") + "\r\n"
        }
        return out
    }

    /// Nightscout `entries`, ready for `POST /api/v1/entries` (what the Nightscout sink posts):
    /// `{"type": "mbg", "mbg": <mg/dL>, "date": <epoch ms>, "dateString": <ISO 8601 with the
    /// reading's own UTC offset>, "utcOffset": <minutes>, "sysTime": <same as dateString>,
    /// "device": "sugard://" + meter}`.
    ///
    /// Nightscout's `mbg` is a number in mg/dL; readings without one (HI, LO, no value), control
    /// solution tests and ketone records cannot be entries and are left out; `skipped` counts
    /// them so the caller can say so.
    public static func nightscout(_ readings: [JSONValue]) -> (entries: JSONValue, skipped: Int) {
        let entries = readings.compactMap(self.nightscoutEntry)
        return (.array(entries), readings.count - entries.count)
    }

    /// The Nightscout entry of one reading, or nil when it cannot be one (see ``nightscout(_:)``).
    public static func nightscoutEntry(_ r: JSONValue) -> JSONValue? {
        guard let (mgdL, millis, local, offset) = self.nightscoutFacts(r) else { return nil }
        let entry: JSONObject = [
            "type": "mbg",
            "mbg": .int(Int64(mgdL.rounded())),
            "date": .int(millis),
            "dateString": .string(local),
            "utcOffset": .int(offset),
            "sysTime": .string(local),
            "device": .string("sugard://" + (r["meter"]?.stringValue ?? "unknown")),
        ]
        return .object(entry)
    }

    /// A Nightscout "BG Check" treatment for one reading (the same readings as entries):
    /// `{"eventType": "BG Check", "glucose": <value>, "glucoseType": "Finger", "units": "mg/dl" or
    /// "mmol", "created_at": <ISO 8601 with the reading's offset>, "enteredBy": "sugard"}`.
    public static func nightscoutTreatment(_ r: JSONValue, unit: Wire.Unit) -> JSONValue? {
        guard let (mgdL, _, local, _) = self.nightscoutFacts(r) else { return nil }
        let mmolL = r["mmolL"]?.doubleValue ?? mgdL / glucoseMolarMass
        let treatment: JSONObject = [
            "eventType": "BG Check",
            "glucose": unit == .mgdl ? .int(Int64(mgdL.rounded())) : .double((mmolL * 10).rounded() / 10),
            "glucoseType": "Finger",
            "units": unit == .mgdl ? "mg/dl" : "mmol",
            "created_at": .string(local),
            "enteredBy": "sugard",
        ]
        return .object(treatment)
    }

    /// mg/dL, epoch ms, the local ISO 8601 time and the UTC offset in minutes of a reading that can
    /// be a Nightscout entry.
    private static func nightscoutFacts(_ r: JSONValue) -> (Double, Int64, String, Int64)? {
        let flags = r["flags"]?.arrayValue?.compactMap(\.stringValue) ?? []
        guard let mgdL = r["mgdL"]?.doubleValue, !flags.contains("controlSolution"), !flags.contains("ketone"),
            let millis = r["time"]?["epochMillis"]?.intValue
        else { return nil }
        let offset = r["time"]?["utcOffsetMinutes"]?.intValue ?? 0
        guard let local = r["time"]?["local"]?.stringValue ?? r["time"]?["iso"]?.stringValue else { return nil }
        return (mgdL, millis, local, offset)
    }

    /// `<meter>/<epoch>/<sequence>`: stable across exports and re-syncs.
    public static func identifier(_ reading: JSONValue) -> String {
        let meter = reading["meter"]?.stringValue ?? "unknown"
        let epoch = reading["epoch"]?.intValue ?? 0
        let seq = reading["sequenceNumber"]?.intValue ?? -1
        return "\(meter)/\(epoch)/\(seq)"
    }

    static func text(_ value: JSONValue?) -> String {
        switch value {
        case .string(let s): s
        case .int(let i): String(i)
        case .double(let d): JSONValue.double(d).serialized()
        case .bool(let b): b ? "true" : "false"
        default: ""
        }
    }

    static func number(_ value: JSONValue?, digits: Int) -> String {
        guard let d = value?.doubleValue else { return "" }
        return self.formatted(d, digits: digits)
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

    static func csvField(_ s: String) -> String {
        guard s.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return s }
        return "\"" + s.split(separator: "\"", omittingEmptySubsequences: false).joined(separator: "\"\"") + "\""
    }
}
