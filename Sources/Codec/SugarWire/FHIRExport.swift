import GlucoseProfile
public import JSON

/// The FHIR R4 export: a `transaction` Bundle a FHIR server accepts as it is.
///
/// - Every entry has `fullUrl` `urn:uuid:<RFC 4122 version-5 UUID>` (``NameUUID``) named after
///   what it is (reading id, meter address, gateway, gateway and person id), so an export of the
///   same reading always carries the same UUID, and a `request` `POST` with `ifNoneExist` on its
///   first identifier, so posting the Bundle twice creates nothing twice.
/// - The Patient carries the person's identifiers (a clinic's record number: its first one is what
///   `ifNoneExist` matches, so the clinic's existing record is used) and always one scoped to this
///   gateway: system `urn:uuid:<gateway UUID>` (a random UUID each database makes once), value the
///   person's id. Never one made from the name: two gateways' "Mia" are two Patients.
/// - Identifiers that are URIs use `urn:ietf:rfc:3986` (the Observation's `urn:uuid:`, the meter's
///   Bluetooth address as an RFC 9039 `urn:dev:mac:` URN, the gateway's `urn:uuid:`); the meter
///   also carries its address the HL7 Personal Health Device (PHD) IG's way (type `BTMAC`, system
///   `http://hl7.org/fhir/sid/eui-48/bluetooth`, `XX-XX-XX-XX-XX-XX`).
/// - PHD IG: the Observation's category is `phd` (PhdObservationCategories), `device` the meter
///   (a PhdDevice with its identity), and the gateway a Device (type MDC_MOC_VMS_MDS_AHD)
///   referenced by the `observation-gatewayDevice` extension.
/// - References (`subject`, `device`, `Device.patient`, the gateway extension) point at `fullUrl`s
///   inside the Bundle.
/// - LOINC follows the sample type and unit: capillary whole blood 41653-7 / 14743-9 (glucometer,
///   also coded MDC_CONC_GLU_CAPILLARY_WHOLEBLOOD), other whole blood 2339-0 / 15074-8, plasma
///   2345-7 / 14749-6, interstitial fluid 99504-3 (mass only); UCUM `mg/dL`, `mmol/L`.
/// - Meal context is a component coded in ISO/IEEE 11073-10101 (`MDC_CTXT_GLU_MEAL_*`, as the HL7
///   Personal Health Device IG codes it); the other context fields are components with text codes.
/// - HI and LO carry `dataAbsentReason` positive-/negative-infinity (what the meter's SFLOAT said)
///   and the interpretation HH / LL (critical), never a made-up number.
extension ReadingExport {
    /// The namespace of sugard's name-based UUIDs: version 5 of the project URL in `NameSpace_URL`.
    public static let uuidNamespace = NameUUID(namespace: .urlNamespace, name: "https://github.com/sugard/sugard")

    /// `urn:uuid:` of a reading (by ``identifier(_:)``), a meter (by address), a gateway (by its
    /// UUID) and a person (by gateway and person id: never by name alone).
    public static func fhirURN(reading: Wire.Reading) -> String {
        NameUUID(namespace: self.uuidNamespace, name: "reading/" + self.identifier(reading)).urn
    }
    /// The meter's `urn:uuid:`, the same for the same address on every gateway.
    public static func fhirURN(meter: String) -> String { NameUUID(namespace: self.uuidNamespace, name: "meter/" + meter).urn }
    /// The gateway's `urn:uuid:`, from its id.
    public static func fhirURN(gateway: String) -> String { NameUUID(namespace: self.uuidNamespace, name: "gateway/" + gateway).urn }
    /// A person's `urn:uuid:`, from the gateway and the person's id (never the name alone).
    public static func fhirURN(person id: Int64, gateway: String) -> String {
        NameUUID(namespace: self.uuidNamespace, name: "person/" + gateway + "/" + String(id)).urn
    }

    /// The identifier of a person scoped to this gateway: system `urn:uuid:<gateway>`, value the person's id.
    public static func gatewayIdentifier(person id: Int64, gateway: String) -> Wire.PersonIdentifier {
        Wire.PersonIdentifier(system: "urn:uuid:" + gateway, value: String(id))
    }

    /// FHIR's identifier system for a value that is a URI.
    static let uriSystem = "urn:ietf:rfc:3986"
    static let loinc = "http://loinc.org"
    static let ucum = "http://unitsofmeasure.org"
    static let snomed = "http://snomed.info/sct"
    static let mdc = "urn:iso:std:iso:11073:10101"
    static let phdCategories = "http://hl7.org/fhir/uv/phd/CodeSystem/PhdObservationCategories"
    static let continuaIdentifiers = "http://hl7.org/fhir/uv/phd/CodeSystem/ContinuaDeviceIdentifiers"
    static let bluetoothSystem = "http://hl7.org/fhir/sid/eui-48/bluetooth"
    static let gatewayExtension = "http://hl7.org/fhir/StructureDefinition/observation-gatewayDevice"

    /// A FHIR R4 `transaction` Bundle: a `Patient` per person the readings belong to, a `Device`
    /// per meter, the gateway `Device`, and an `Observation` per glucose reading (control-solution
    /// tests and ketone records are left out and counted in `skipped`). `meters` maps a meter id to
    /// its identity (from `ListMeters`) for the Device's manufacturer, model, serial number and name;
    /// `people` maps a name to the person's record (`ListPeople`: id and identifiers); `gateway` is
    /// the gateway's UUID (`GetPeopleStatus`). A reading whose person is not in `people` has no subject.
    public static func fhir(
        _ readings: [Wire.Reading], meters: [String: Wire.MeterIdentity], unit: Wire.Unit,
        people: [String: Wire.Person] = [:], gateway: String
    ) -> (bundle: JSONValue, skipped: Int) {
        var patients: [Wire.Person] = []
        var devices: [(meter: String, person: Wire.Person?)] = []
        var observations: [JSONValue] = []
        var skipped = 0
        for r in readings {
            guard !r.flags.contains("controlSolution"), !r.flags.contains("ketone") else {
                skipped += 1
                continue
            }
            let person = r.person.flatMap { people[$0] }
            if let person, !patients.contains(where: { $0.id == person.id }) { patients.append(person) }
            if !devices.contains(where: { $0.meter == r.meter }) { devices.append((r.meter, person)) }
            observations.append(self.observation(r, unit: unit, person: person, gateway: gateway))
        }
        var entries: [JSONValue] = patients.map { self.patient($0, gateway: gateway) }
        entries.append(self.gatewayDevice(gateway))
        for (meter, person) in devices {
            entries.append(self.device(meter, identity: meters[meter], person: person, gateway: gateway))
        }
        entries += observations
        let bundle: JSONObject = ["resourceType": "Bundle", "type": "transaction", "entry": .array(entries)]
        return (.object(bundle), skipped)
    }

    /// ``fhir(_:meters:unit:people:gateway:)``'s Bundle written straight into `out` as
    /// `prettySerialized()` writes it (the same bytes), one entry at a time: a streamed export holds
    /// one Observation's tree, not the whole Bundle's. Returns the readings left out.
    public static func writeFHIR(
        _ readings: [Wire.Reading], meters: [String: Wire.MeterIdentity], unit: Wire.Unit,
        people: [String: Wire.Person] = [:], gateway: String, into out: inout [UInt8]
    ) -> Int {
        var patients: [Wire.Person] = []
        var devices: [(meter: String, person: Wire.Person?)] = []
        var skipped = 0
        for r in readings {
            guard !r.flags.contains("controlSolution"), !r.flags.contains("ketone") else {
                skipped += 1
                continue
            }
            let person = r.person.flatMap { people[$0] }
            if let person, !patients.contains(where: { $0.id == person.id }) { patients.append(person) }
            if !devices.contains(where: { $0.meter == r.meter }) { devices.append((r.meter, person)) }
        }
        out.append(contentsOf: "{\n  \"resourceType\": \"Bundle\",\n  \"type\": \"transaction\",\n  \"entry\": [".utf8)
        var first = true
        func entry(_ value: JSONValue) {
            out.append(contentsOf: (first ? "\n    " : ",\n    ").utf8)
            first = false
            value.writePretty(into: &out, indent: 2)
        }
        for person in patients { entry(self.patient(person, gateway: gateway)) }
        entry(self.gatewayDevice(gateway))
        for (meter, person) in devices { entry(self.device(meter, identity: meters[meter], person: person, gateway: gateway)) }
        for r in readings where !r.flags.contains("controlSolution") && !r.flags.contains("ketone") {
            entry(self.observation(r, unit: unit, person: r.person.flatMap { people[$0] }, gateway: gateway))
        }
        out.append(contentsOf: "\n  ]\n}".utf8)
        return skipped
    }

    /// A Patient: the person's identifiers, then the one scoped to this gateway.
    static func patient(_ person: Wire.Person, gateway: String) -> JSONValue {
        let urn = self.fhirURN(person: person.id, gateway: gateway)
        let identifiers = person.identifiers + [self.gatewayIdentifier(person: person.id, gateway: gateway)]
        let patient: JSONObject = [
            "resourceType": "Patient",
            "identifier": .array(identifiers.map { ["system": .string($0.system), "value": .string($0.value)] }),
            "active": true,
            "name": [["text": .string(person.name)]],
        ]
        return self.entry(urn, .object(patient), type: "Patient", system: identifiers[0].system, identifier: identifiers[0].value)
    }

    /// The gateway (the PHD IG's PhgDevice): this sugard, identified by its UUID.
    static func gatewayDevice(_ gateway: String) -> JSONValue {
        let urn = self.fhirURN(gateway: gateway)
        let identifier = "urn:uuid:" + gateway
        let device: JSONObject = [
            "resourceType": "Device",
            "identifier": [["system": .string(self.uriSystem), "value": .string(identifier)]],
            "status": "active",
            "type": [
                "coding": [["system": .string(self.mdc), "code": "531981", "display": "MDC_MOC_VMS_MDS_AHD"]],
                "text": "Personal health gateway",
            ],
            "deviceName": [["name": "sugard", "type": "manufacturer-name"]],
        ]
        return self.entry(urn, .object(device), type: "Device", system: self.uriSystem, identifier: identifier)
    }

    /// A transaction entry: `POST` unless a resource with the identifier `system|identifier` exists.
    static func entry(_ urn: String, _ resource: JSONValue, type: String, system: String? = nil, identifier: String) -> JSONValue {
        [
            "fullUrl": .string(urn), "resource": resource,
            "request": [
                "method": "POST", "url": .string(type),
                "ifNoneExist": .string("identifier=\(self.query(system ?? self.uriSystem))|\(self.query(identifier))"),
            ],
        ]
    }

    /// A token of a search URL: `|`, `,`, `$` and `\` are escaped with `\` (FHIR search escaping),
    /// then what a query value may not hold is percent-encoded.
    static func query(_ text: String) -> String {
        var escaped = ""
        for character in text {
            if "|,$\\".contains(character) { escaped.append("\\") }
            escaped.append(character)
        }
        var out = ""
        for byte in escaped.utf8 {
            let c = Character(Unicode.Scalar(byte))
            if byte < 0x80, c.isLetter || c.isNumber || "-._~:/@!'()*;".contains(c) {
                out.append(c)
            } else {
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(2)
            }
        }
        return out
    }

    /// `urn:dev:mac:` + the 12 hex digits of a Bluetooth address (RFC 9039 §4.2), or nil.
    static func macURN(_ address: String) -> String? {
        let hex = address.lowercased().filter { $0 != ":" && $0 != "-" }
        guard hex.count == 12, hex.allSatisfy(\.isHexDigit) else { return nil }
        return "urn:dev:mac:" + hex
    }

    static func device(_ meter: String, identity: Wire.MeterIdentity?, person: Wire.Person?, gateway: String) -> JSONValue {
        let urn = self.fhirURN(meter: meter)
        let identifier = self.macURN(meter) ?? urn
        var identifiers: [JSONValue] = [["system": .string(self.uriSystem), "value": .string(identifier)]]
        if self.macURN(meter) != nil {
            identifiers.append([
                "type": ["coding": [["system": .string(self.continuaIdentifiers), "code": "BTMAC", "display": "Bluetooth MAC address"]]],
                "system": .string(self.bluetoothSystem), "value": .string(meter.uppercased().replacingColons(with: "-")),
            ])
        }
        var device: JSONObject = [
            "resourceType": "Device",
            "identifier": .array(identifiers),
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
        if let person {
            device["patient"] = ["reference": .string(self.fhirURN(person: person.id, gateway: gateway)), "display": .string(person.name)]
        }
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
                ? (self.capillaryMass, "Glucose [Mass/volume] in Capillary blood by Glucometer", unit)
                : (self.capillaryMolar, "Glucose [Moles/volume] in Capillary blood by Glucometer", unit)
        }
    }

    /// LOINC for glucose measured by a glucometer in capillary blood: mass and molar concentration.
    static let capillaryMass = "41653-7"
    static let capillaryMolar = "14743-9"

    static func observation(_ r: Wire.Reading, unit: Wire.Unit, person: Wire.Person?, gateway: String) -> JSONValue {
        let urn = self.fhirURN(reading: r)
        let loinc = self.loincCode(sampleType: r.sampleType?.code, unit: unit)
        var coding: [JSONValue] = [["system": .string(self.loinc), "code": .string(loinc.code), "display": .string(loinc.display)]]
        if loinc.code == self.capillaryMass || loinc.code == self.capillaryMolar {
            coding.append(["system": .string(self.mdc), "code": "160184", "display": "MDC_CONC_GLU_CAPILLARY_WHOLEBLOOD"])
        }
        var observation: JSONObject = [
            "resourceType": "Observation",
            "extension": [["url": .string(self.gatewayExtension), "valueReference": ["reference": .string(self.fhirURN(gateway: gateway))]]],
            "identifier": [["system": .string(self.uriSystem), "value": .string(urn)]],
            "status": "final",
            "category": [["coding": [["system": .string(self.phdCategories), "code": "phd", "display": "PHD generated Observation"]]]],
            "code": ["coding": .array(coding), "text": "Blood glucose"],
            "effectiveDateTime": .string(r.time.local),
            "device": ["reference": .string(self.fhirURN(meter: r.meter))],
        ]
        if let person {
            observation["subject"] = [
                "reference": .string(self.fhirURN(person: person.id, gateway: gateway)), "display": .string(person.name),
            ]
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

extension String {
    /// `C0:26:DA:01:02:03` with `-` for `:`.
    fileprivate func replacingColons(with separator: String) -> String {
        self.split(separator: ":", omittingEmptySubsequences: false).joined(separator: separator)
    }

    fileprivate func leftPadded(_ width: Int) -> String {
        String(repeating: "0", count: max(0, width - self.count)) + self
    }
}
