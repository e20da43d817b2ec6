public import JSON

/// The FHIR R4 export: a `transaction` Bundle a FHIR server accepts as it is.
///
/// - Every entry has `fullUrl` `urn:uuid:<RFC 4122 version-5 UUID>` (``NameUUID``) named after
///   what it is (reading id, meter address, person), so an export of the same reading always
///   carries the same UUID, and a `request` `POST` with `ifNoneExist` on its identifier, so posting
///   the Bundle twice creates nothing twice.
/// - Identifiers use `urn:ietf:rfc:3986` (FHIR's system for an identifier that is itself a URI):
///   the Observation's and Patient's value is their `urn:uuid:`, the Device's is its Bluetooth
///   address as an RFC 9039 `urn:dev:mac:` URN.
/// - References (`subject`, `device`, `Device.patient`) point at `fullUrl`s inside the Bundle.
/// - LOINC follows the sample type and unit: capillary whole blood 41653-7 / 14743-9 (glucometer),
///   other whole blood 2339-0 / 15074-8, plasma 2345-7 / 14749-6, interstitial fluid 99504-3
///   (mass only); UCUM `mg/dL`, `mmol/L`.
/// - Meal context is a component coded in ISO/IEEE 11073-10101 (`MDC_CTXT_GLU_MEAL_*`, as the HL7
///   Personal Health Device IG codes it); the other context fields are components with text codes.
/// - HI and LO carry `dataAbsentReason` positive-/negative-infinity (what the meter's SFLOAT said)
///   and the interpretation HH / LL (critical), never a made-up number.
extension ReadingExport {
    /// The namespace of sugard's name-based UUIDs: version 5 of the project URL in `NameSpace_URL`.
    public static let uuidNamespace = NameUUID(namespace: .urlNamespace, name: "https://github.com/sugard/sugard")

    /// `urn:uuid:` of a reading (by ``identifier(_:)``), a meter (by address) and a person (by name).
    public static func fhirURN(reading: Wire.Reading) -> String {
        NameUUID(namespace: self.uuidNamespace, name: "reading/" + self.identifier(reading)).urn
    }
    public static func fhirURN(meter: String) -> String { NameUUID(namespace: self.uuidNamespace, name: "meter/" + meter).urn }
    public static func fhirURN(person: String) -> String { NameUUID(namespace: self.uuidNamespace, name: "person/" + person).urn }

    /// FHIR's identifier system for a value that is a URI.
    static let uriSystem = "urn:ietf:rfc:3986"
    static let loinc = "http://loinc.org"
    static let ucum = "http://unitsofmeasure.org"
    static let snomed = "http://snomed.info/sct"
    static let mdc = "urn:iso:std:iso:11073:10101"

    /// A FHIR R4 `transaction` Bundle: a `Patient` per assigned person, a `Device` per meter and an
    /// `Observation` per glucose reading (control-solution tests and ketone records are left out and
    /// counted in `skipped`). `meters` maps a meter id to its identity (from `ListMeters`) for the
    /// Device's manufacturer, model, serial number and name.
    public static func fhir(
        _ readings: [Wire.Reading], meters: [String: Wire.MeterIdentity], unit: Wire.Unit
    ) -> (bundle: JSONValue, skipped: Int) {
        var people: [String] = []
        var devices: [(meter: String, person: String?)] = []
        var observations: [JSONValue] = []
        var skipped = 0
        for r in readings {
            guard !r.flags.contains("controlSolution"), !r.flags.contains("ketone") else {
                skipped += 1
                continue
            }
            if let person = r.person, !people.contains(person) { people.append(person) }
            if !devices.contains(where: { $0.meter == r.meter }) { devices.append((r.meter, r.person)) }
            observations.append(self.observation(r, unit: unit))
        }
        var entries: [JSONValue] = people.map { person in
            let urn = self.fhirURN(person: person)
            let patient: JSONObject = [
                "resourceType": "Patient",
                "identifier": [["system": .string(self.uriSystem), "value": .string(urn)]],
                "active": true,
                "name": [["text": .string(person)]],
            ]
            return self.entry(urn, .object(patient), type: "Patient", identifier: urn)
        }
        for (meter, person) in devices {
            entries.append(self.device(meter, identity: meters[meter], person: person))
        }
        entries += observations
        let bundle: JSONObject = ["resourceType": "Bundle", "type": "transaction", "entry": .array(entries)]
        return (.object(bundle), skipped)
    }

    /// A transaction entry: `POST` unless a resource with `identifier` exists.
    static func entry(_ urn: String, _ resource: JSONValue, type: String, identifier: String) -> JSONValue {
        [
            "fullUrl": .string(urn), "resource": resource,
            "request": [
                "method": "POST", "url": .string(type), "ifNoneExist": .string("identifier=\(self.uriSystem)|\(identifier)"),
            ],
        ]
    }

    /// `urn:dev:mac:` + the 12 hex digits of a Bluetooth address (RFC 9039 §4.2), or nil.
    static func macURN(_ address: String) -> String? {
        let hex = address.lowercased().filter { $0 != ":" && $0 != "-" }
        guard hex.count == 12, hex.allSatisfy(\.isHexDigit) else { return nil }
        return "urn:dev:mac:" + hex
    }

    static func device(_ meter: String, identity: Wire.MeterIdentity?, person: String?) -> JSONValue {
        let urn = self.fhirURN(meter: meter)
        let identifier = self.macURN(meter) ?? urn
        var device: JSONObject = [
            "resourceType": "Device",
            "identifier": [["system": .string(self.uriSystem), "value": .string(identifier)]],
            "status": "active",
            "type": [
                "coding": [["system": .string(self.snomed), "code": "337414009", "display": "Blood glucose meter"]],
                "text": "Blood glucose meter",
            ],
            "deviceName": [
                ["name": .string(identity?.displayName ?? meter), "type": "user-friendly-name"]
            ],
        ]
        if let manufacturer = identity?.manufacturer { device["manufacturer"] = .string(manufacturer) }
        if let model = identity?.model { device["modelNumber"] = .string(model) }
        if let serial = identity?.serialNumber { device["serialNumber"] = .string(serial) }
        if let firmware = identity?.firmware {
            device["version"] = [["type": ["text": "firmware"], "value": .string(firmware)]]
        }
        if let person { device["patient"] = ["reference": .string(self.fhirURN(person: person)), "display": .string(person)] }
        return self.entry(urn, .object(device), type: "Device", identifier: identifier)
    }

    /// The LOINC code and display for a sample type code (nil: a meter that does not say) and unit.
    static func loincCode(sampleType: Int64?, unit: Wire.Unit) -> (code: String, display: String, unit: Wire.Unit) {
        let mass = unit == .mgdl
        switch sampleType {
        case 2, 4, 6, 8:
            return mass
                ? ("2345-7", "Glucose [Mass/volume] in Serum or Plasma", unit)
                : ("14749-6", "Glucose [Moles/volume] in Serum or Plasma", unit)
        case 3, 5, 7:
            return mass
                ? ("2339-0", "Glucose [Mass/volume] in Blood", unit) : ("15074-8", "Glucose [Moles/volume] in Blood", unit)
        case 9:
            // LOINC has a mass-concentration term only for interstitial fluid.
            return ("99504-3", "Glucose [Mass/volume] in Interstitial fluid", .mgdl)
        default:  // 1 (capillary whole blood) or not stated: a glucometer's finger-stick reading
            return mass
                ? ("41653-7", "Glucose [Mass/volume] in Capillary blood by Glucometer", unit)
                : ("14743-9", "Glucose [Moles/volume] in Capillary blood by Glucometer", unit)
        }
    }

    static func observation(_ r: Wire.Reading, unit: Wire.Unit) -> JSONValue {
        let urn = self.fhirURN(reading: r)
        let loinc = self.loincCode(sampleType: r.sampleType?.code, unit: unit)
        var observation: JSONObject = [
            "resourceType": "Observation",
            "identifier": [["system": .string(self.uriSystem), "value": .string(urn)]],
            "status": "final",
            "category": [
                [
                    "coding": [
                        [
                            "system": "http://terminology.hl7.org/CodeSystem/observation-category", "code": "laboratory",
                            "display": "Laboratory",
                        ]
                    ]
                ]
            ],
            "code": [
                "coding": [["system": .string(self.loinc), "code": .string(loinc.code), "display": .string(loinc.display)]],
                "text": "Blood glucose",
            ],
            "effectiveDateTime": .string(r.time.local),
            "device": ["reference": .string(self.fhirURN(meter: r.meter))],
        ]
        if let person = r.person {
            observation["subject"] = ["reference": .string(self.fhirURN(person: person)), "display": .string(person)]
        }
        observation["issued"] = .string(r.storedAt.iso)
        let value = loinc.unit == .mgdl ? r.mgdL : r.mmolL
        if let value {
            observation["valueQuantity"] = [
                "value": .double(loinc.unit == .mgdl ? value.rounded() : (value * 10).rounded() / 10),
                "unit": .string(loinc.unit.symbol), "system": .string(self.ucum),
                "code": .string(loinc.unit == .mgdl ? "mg/dL" : "mmol/L"),
            ]
        } else {
            let hi = r.flags.contains("hi"), lo = r.flags.contains("lo")
            observation["dataAbsentReason"] = [
                "coding": [
                    [
                        "system": "http://terminology.hl7.org/CodeSystem/data-absent-reason",
                        "code": .string(hi ? "positive-infinity" : lo ? "negative-infinity" : "unknown"),
                    ]
                ],
                "text": .string(
                    hi ? "HI: above the meter's measuring range" : lo ? "LO: below the meter's measuring range" : "the meter reported no value"),
            ]
            if hi || lo {
                observation["interpretation"] = [
                    [
                        "coding": [
                            [
                                "system": "http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation",
                                "code": .string(hi ? "HH" : "LL"), "display": .string(hi ? "Critical high" : "Critical low"),
                            ]
                        ],
                        "text": .string(hi ? "HI" : "LO"),
                    ]
                ]
            }
        }
        if let site = self.bodySite(r.sampleLocation?.code) { observation["bodySite"] = site }
        let components = self.components(r.context)
        if !components.isEmpty { observation["component"] = .array(components) }
        return self.entry(urn, .object(observation), type: "Observation", identifier: urn)
    }

    static func bodySite(_ location: Int64?) -> JSONValue? {
        switch location {
        case 1: return ["coding": [["system": .string(self.snomed), "code": "7569003", "display": "Finger structure"]], "text": "finger"]
        case 3: return ["coding": [["system": .string(self.snomed), "code": "48800003", "display": "Ear lobule structure"]], "text": "earlobe"]
        case 2: return ["text": "alternate site"]
        default: return nil
        }
    }

    /// MDC term codes of the Glucose Profile meal values (ISO/IEEE 11073-10417, partition 128).
    static let mealCodes: [Int64: (code: String, display: String)] = [
        1: ("8417868", "MDC_CTXT_GLU_MEAL_PREPRANDIAL"), 2: ("8417872", "MDC_CTXT_GLU_MEAL_POSTPRANDIAL"),
        3: ("8417876", "MDC_CTXT_GLU_MEAL_FASTING"), 4: ("8417880", "MDC_CTXT_GLU_MEAL_CASUAL"),
        5: ("8417908", "MDC_CTXT_GLU_MEAL_BEDTIME"),
    ]

    /// The Glucose Measurement Context as Observation components.
    static func components(_ object: JSONObject?) -> [JSONValue] {
        guard let object else { return [] }
        let context = JSONValue.object(object)
        var out: [JSONValue] = []
        func text(_ label: String) -> JSONValue { ["text": .string(label)] }
        if let meal = context["meal"], let code = meal["code"]?.intValue, let name = meal["name"]?.stringValue {
            var value: JSONObject = ["text": .string(name)]
            if let mdc = self.mealCodes[code] {
                value["coding"] = [["system": .string(self.mdc), "code": .string(mdc.code), "display": .string(mdc.display)]]
            }
            out.append([
                "code": [
                    "coding": [["system": .string(self.mdc), "code": "8417864", "display": "MDC_CTXT_GLU_MEAL"]], "text": "meal",
                ],
                "valueCodeableConcept": .object(value),
            ])
        }
        for key in ["tester", "health"] {
            if let name = context[key]?["name"]?.stringValue {
                out.append(["code": text(key), "valueCodeableConcept": text(name)])
            }
        }
        if let carbs = context["carbohydrate"], let kg = carbs["kg"]?.doubleValue {
            let label = "carbohydrate" + (carbs["id"]?["name"]?.stringValue.map { " (\($0))" } ?? "")
            out.append([
                "code": text(label),
                "valueQuantity": ["value": .double((kg * 1_000_000).rounded() / 1000), "unit": "g", "system": .string(self.ucum), "code": "g"],
            ])
        }
        if let exercise = context["exercise"], !exercise.isNull {
            if let seconds = exercise["durationSeconds"]?.intValue {
                out.append([
                    "code": text("exercise duration"),
                    "valueQuantity": ["value": .int(seconds), "unit": "s", "system": .string(self.ucum), "code": "s"],
                ])
            }
            if let percent = exercise["intensityPercent"]?.intValue {
                out.append([
                    "code": text("exercise intensity"),
                    "valueQuantity": ["value": .int(percent), "unit": "%", "system": .string(self.ucum), "code": "%"],
                ])
            }
        }
        if let medication = context["medication"], let amount = medication["value"]?.doubleValue {
            let label = "medication" + (medication["id"]?["name"]?.stringValue.map { " (\($0))" } ?? "")
            let isVolume = medication["unit"]?.stringValue == "L"
            out.append([
                "code": text(label),
                "valueQuantity": [
                    // The profile carries kg or litres; FHIR readers expect mg or mL.
                    "value": .double((amount * (isVolume ? 1000 : 1_000_000) * 1000).rounded() / 1000),
                    "unit": .string(isVolume ? "mL" : "mg"),
                    "system": .string(self.ucum), "code": .string(isVolume ? "mL" : "mg"),
                ],
            ])
        }
        if let hba1c = context["hba1cPercent"]?.doubleValue {
            out.append([
                "code": ["coding": [["system": .string(self.loinc), "code": "4548-4", "display": "Hemoglobin A1c/Hemoglobin.total in Blood"]]],
                "valueQuantity": ["value": .double(hba1c), "unit": "%", "system": .string(self.ucum), "code": "%"],
            ])
        }
        return out
    }
}
