import HealthDataSync
import JSON

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

    /// Nightscout `entries` (`type` "mbg", mg/dL, `date` epoch ms, `dateString`, `device`).
    ///
    /// Nightscout's `mbg` is a number in mg/dL; readings without one (HI, LO, no value), control
    /// solution tests and ketone records cannot be entries and are left out; `skipped` counts
    /// them so the caller can say so.
    public static func nightscout(_ readings: [JSONValue]) -> (entries: JSONValue, skipped: Int) {
        var entries: [JSONValue] = []
        var skipped = 0
        for r in readings {
            let flags = r["flags"]?.arrayValue?.compactMap(\.stringValue) ?? []
            guard let mgdL = r["mgdL"]?.doubleValue, !flags.contains("controlSolution"), !flags.contains("ketone"),
                let millis = r["time"]?["epochMillis"]?.intValue, let iso = r["time"]?["iso"]?.stringValue
            else {
                skipped += 1
                continue
            }
            let entry: JSONObject = [
                "type": "mbg",
                "mbg": .int(Int64(mgdL.rounded())),
                "date": .int(millis),
                "dateString": .string(iso),
                "device": .string("sugard://" + (r["meter"]?.stringValue ?? "unknown")),
                "identifier": .string(self.identifier(r)),
            ]
            entries.append(.object(entry))
        }
        return (.array(entries), skipped)
    }

    /// A FHIR R4 `Bundle` (type `collection`) of glucose `Observation`s with one `Device` per
    /// meter. LOINC 41653-7 (mass/volume, mg/dL) or 14743-9 (moles/volume, mmol/L) by `unit`;
    /// `effectiveDateTime` carries the zone offset the meter's clock was read in. HI and LO
    /// readings have no value: they carry `dataAbsentReason` and an H/L interpretation rather
    /// than a made-up number. Control-solution tests and ketone records are not patient glucose
    /// observations and are left out (`skipped`).
    public static func fhir(_ readings: [JSONValue], unit: GlucoseUnit) -> (bundle: JSONValue, skipped: Int) {
        var entries: [JSONValue] = []
        var devices: [String] = []
        var skipped = 0
        for r in readings {
            let flags = r["flags"]?.arrayValue?.compactMap(\.stringValue) ?? []
            guard let meter = r["meter"]?.stringValue, !flags.contains("controlSolution"), !flags.contains("ketone")
            else {
                skipped += 1
                continue
            }
            if !devices.contains(meter) { devices.append(meter) }
            let deviceID = self.fhirID(meter)
            let (loinc, display) =
                unit == .mgdL
                ? ("41653-7", "Glucose [Mass/volume] in Capillary blood by Glucometer")
                : ("14743-9", "Glucose [Moles/volume] in Capillary blood by Glucometer")
            var observation: JSONObject = [
                "resourceType": "Observation",
                "id": .string(self.fhirID(self.identifier(r))),
                "identifier": [["system": "urn:sugard:reading", "value": .string(self.identifier(r))]],
                "status": "final",
                "category": [
                    [
                        "coding": [
                            [
                                "system": "http://terminology.hl7.org/CodeSystem/observation-category",
                                "code": "laboratory", "display": "Laboratory",
                            ]
                        ]
                    ]
                ],
                "code": [
                    "coding": [["system": "http://loinc.org", "code": .string(loinc), "display": .string(display)]],
                    "text": "Blood glucose",
                ],
                "effectiveDateTime": .from(r["time"]?["local"]?.stringValue ?? r["time"]?["iso"]?.stringValue),
                "device": ["reference": .string("Device/" + deviceID)],
            ]
            let value = unit == .mgdL ? r["mgdL"]?.doubleValue : r["mmolL"]?.doubleValue
            if let value {
                observation["valueQuantity"] = [
                    "value": .double(unit == .mgdL ? value.rounded() : (value * 10).rounded() / 10),
                    "unit": .string(unit.rawValue), "system": "http://unitsofmeasure.org",
                    "code": .string(unit == .mgdL ? "mg/dL" : "mmol/L"),
                ]
            } else {
                let hi = flags.contains("hi"), lo = flags.contains("lo")
                observation["dataAbsentReason"] = [
                    "coding": [
                        [
                            "system": "http://terminology.hl7.org/CodeSystem/data-absent-reason",
                            "code": hi || lo ? "error" : "unknown",
                        ]
                    ],
                    "text": .string(hi ? "HI: above the meter's measuring range" : lo ? "LO: below the meter's measuring range" : "the meter reported no value"),
                ]
                if hi || lo {
                    observation["interpretation"] = [
                        [
                            "coding": [
                                [
                                    "system": "http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation",
                                    "code": .string(hi ? "HU" : "LU"),
                                    "display": .string(hi ? "Significantly high" : "Significantly low"),
                                ]
                            ]
                        ]
                    ]
                }
            }
            entries.append(["fullUrl": .string("urn:uuid:" + self.fhirID(self.identifier(r))), "resource": .object(observation)])
        }
        for meter in devices {
            let device: JSONObject = [
                "resourceType": "Device",
                "id": .string(self.fhirID(meter)),
                "identifier": [["system": "urn:sugard:meter", "value": .string(meter)]],
                "type": ["text": "Blood glucose meter"],
            ]
            entries.insert(["fullUrl": .string("urn:sugard:device:" + self.fhirID(meter)), "resource": .object(device)], at: 0)
        }
        let bundle: JSONObject = ["resourceType": "Bundle", "type": "collection", "entry": .array(entries)]
        return (.object(bundle), skipped)
    }

    /// `<meter>/<epoch>/<sequence>`: stable across exports and re-syncs.
    public static func identifier(_ reading: JSONValue) -> String {
        let meter = reading["meter"]?.stringValue ?? "unknown"
        let epoch = reading["epoch"]?.intValue ?? 0
        let seq = reading["sequenceNumber"]?.intValue ?? -1
        return "\(meter)/\(epoch)/\(seq)"
    }

    /// FHIR ids allow `[A-Za-z0-9\-\.]{1,64}`.
    static func fhirID(_ text: String) -> String {
        String(String(text.map { $0.isLetter && $0.isASCII || $0.isNumber && $0.isASCII || $0 == "." ? $0 : "-" }).prefix(64))
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
