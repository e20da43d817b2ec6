import Foundation
import GlucoseProfile
import HealthDataSync
import JSON
import SugarAPI
import SugarWire
import Testing

/// `sugarctl readings --format fhir` from the real daemon, checked by the FHIR R4 (4.0.1) models of
/// the PyPI `fhir.resources` 6.4.0 release and by the rules a FHIR server applies to a transaction.
@Suite struct FHIRExportTests {
    /// The interpreter of the venv `scripts/install-deps` makes for `fhir.resources`.
    static let validatorPython = ProcessInfo.processInfo.environment["SUGARD_FHIR_PYTHON"] ?? "/opt/sugard-fhir/bin/python"

    static let validator = """
        import json, sys
        from fhir.resources import __fhir_version__
        from fhir.resources.bundle import Bundle
        assert __fhir_version__ == "4.0.1", __fhir_version__
        bundle = Bundle.parse_raw(sys.stdin.read())
        print(bundle.type, len(bundle.entry or []), ",".join(e.resource.resource_type for e in bundle.entry or []))
        """

    /// Runs the R4 model check; the stdout line, or the validator's complaint as the error.
    static func validate(_ json: String) async throws -> ProcessOutput {
        guard FileManager.default.isExecutableFile(atPath: self.validatorPython) else {
            throw TestError("no FHIR validator at \(self.validatorPython): run scripts/install-deps")
        }
        return try await runProcess(self.validatorPython, ["-c", self.validator], stdin: json)
    }

    nonisolated(unsafe) static let uuidURN = #/urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}/#

    /// Every `reference` anywhere below `value`.
    static func references(_ value: JSONValue) -> [String] {
        switch value {
        case .object(let o): return (o["reference"]?.stringValue.map { [$0] } ?? []) + o.entries.map(\.value).flatMap(self.references)
        case .array(let a): return a.flatMap(self.references)
        default: return []
        }
    }

    /// Every identifier `system` below `value`.
    static func identifierSystems(_ value: JSONValue) -> [String] {
        switch value {
        case .object(let o):
            let own = o["identifier"]?.arrayValue?.compactMap { $0["system"]?.stringValue } ?? []
            return own + o.entries.map(\.value).flatMap(self.identifierSystems)
        case .array(let a): return a.flatMap(self.identifierSystems)
        default: return []
        }
    }

    @Test func bundleIsATransactionAServerAccepts() async throws {
        try await withAPIServer { f in
            let a = meterA.id.rawValue
            _ = try await f.call(
                api + "AddPerson",
                ["name": "Mia", "identifiers": [["system": "urn:oid:1.2.36.146.595.217.0.1", "value": "MRN 12|3"]]])
            _ = try await f.call(api + "AssignMeter", ["meter": .string(a), "person": "Mia", "from": "2024-01-01"])
            let gateway = try #require(try await f.call(api + "GetPeopleStatus")["gateway"]?.stringValue)
            let out = try await runProcess(
                try sugarctlPath(), ["--socket", f.path, "readings", "--format", "fhir"], environment: ["HOME": "/nonexistent-home"])
            #expect(out.status == 0, "\(out.stderr)")
            #expect(out.stderr.contains("skipped 1 of 7"), "the control-solution test")

            let checked = try await Self.validate(out.stdout)
            #expect(checked.status == 0, "fhir.resources rejected the Bundle: \(checked.stderr)")
            #expect(checked.stdout.hasPrefix("transaction 10 Patient,Device,Device,Device,Observation"), "\(checked.stdout)")

            let bundle = try JSONValue(parsing: out.stdout)
            #expect(bundle["type"] == "transaction")
            let entries = try #require(bundle["entry"]?.arrayValue)
            let fullUrls = entries.compactMap { $0["fullUrl"]?.stringValue }
            #expect(fullUrls.count == entries.count && Set(fullUrls).count == entries.count)
            for url in fullUrls { #expect(url.wholeMatch(of: Self.uuidURN) != nil, "\(url) is not a version-5 UUID URN") }
            // Every reference resolves inside the Bundle.
            let references = Self.references(bundle)
            #expect(!references.isEmpty)
            for reference in references { #expect(fullUrls.contains(reference), "dangling reference \(reference)") }
            // Identifier systems are absolute URIs (no home-made urn:sugard: names).
            for system in Self.identifierSystems(bundle) {
                #expect(
                    ["urn:ietf:rfc:3986", "urn:oid:1.2.36.146.595.217.0.1", "urn:uuid:" + gateway, "http://hl7.org/fhir/sid/eui-48/bluetooth"]
                        .contains(system), "\(system)")
            }
            // POST each, unless a resource with its identifier exists (posting twice creates nothing twice).
            for entry in entries {
                let resource = try #require(entry["resource"])
                let identifier = try #require(resource["identifier"]?.arrayValue?.first)
                #expect(resource["id"] == nil, "a server assigns ids on POST")
                #expect(entry["request"]?["method"] == "POST")
                #expect(entry["request"]?["url"] == resource["resourceType"])
                // The first identifier, as a search token (FHIR escapes | with \, then percent-encoding).
                let value = (identifier["value"]?.stringValue ?? "").replacingOccurrences(of: "|", with: "\\|")
                    .addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed.subtracting(CharacterSet(charactersIn: "&=+#?|,$%\"")))
                #expect(
                    entry["request"]?["ifNoneExist"]?.stringValue
                        == "identifier=\(identifier["system"]?.stringValue ?? "")|\(value ?? "")")
            }

            func resources(_ type: String) -> [JSONValue] {
                entries.filter { $0["resource"]?["resourceType"]?.stringValue == type }.compactMap { $0["resource"] }
            }
            func urlOf(_ resource: JSONValue) -> String? { entries.first { $0["resource"] == resource }?["fullUrl"]?.stringValue }
            let patient = try #require(resources("Patient").first)
            #expect(patient["name"]?.arrayValue?.first?["text"] == "Mia")
            // The clinic's identifier first (ifNoneExist finds the clinic's record), then the gateway-scoped one.
            let mia = try #require(try await f.call(api + "GetPerson", ["name": "Mia"])["person"]?["id"]?.intValue)
            #expect(
                patient["identifier"]
                    == [
                        ["system": "urn:oid:1.2.36.146.595.217.0.1", "value": "MRN 12|3"],
                        ["system": .string("urn:uuid:" + gateway), "value": .string(String(mia))],
                    ])
            #expect(entries.first?["request"]?["ifNoneExist"] == "identifier=urn:oid:1.2.36.146.595.217.0.1|MRN%2012%5C%7C3")
            let patientURL = try #require(urlOf(patient))
            // The gateway: a Device every Observation names in the PHD gatewayDevice extension.
            let gatewayDevice = try #require(
                resources("Device").first { $0["identifier"]?.arrayValue?.first?["value"]?.stringValue == "urn:uuid:" + gateway })
            #expect(gatewayDevice["type"]?["coding"]?.arrayValue?.first?["code"] == "531981")
            let gatewayURL = try #require(urlOf(gatewayDevice))
            let device = try #require(resources("Device").first { $0["serialNumber"] == "92600001" })
            #expect(device["manufacturer"] == "Roche")
            #expect(device["modelNumber"] == "Accu-Chek Guide")
            #expect(device["identifier"]?.arrayValue?.first?["value"] == "urn:dev:mac:c026da010203")
            #expect(device["identifier"]?.arrayValue?.last?["value"] == "C0-26-DA-01-02-03")
            #expect(device["identifier"]?.arrayValue?.last?["type"]?["coding"]?.arrayValue?.first?["code"] == "BTMAC")
            #expect(device["patient"]?["reference"]?.stringValue == patientURL)
            let deviceURL = try #require(urlOf(device))

            let observations = resources("Observation")
            #expect(observations.count == 6)
            let fromA = observations.filter { $0["device"]?["reference"]?.stringValue == deviceURL }
            #expect(fromA.count == 4)
            for observation in fromA { #expect(observation["subject"]?["reference"]?.stringValue == patientURL) }
            for observation in observations where !fromA.contains(observation) {
                #expect(observation["subject"] == nil, "meter B is nobody's")
            }
            for observation in observations {
                #expect(observation["code"]?["coding"]?.arrayValue?.first?["code"] == "41653-7", "capillary whole blood, mg/dL")
                #expect(observation["code"]?["coding"]?.arrayValue?.last?["code"] == "160184", "MDC_CONC_GLU_CAPILLARY_WHOLEBLOOD")
                #expect(observation["category"]?.arrayValue?.first?["coding"]?.arrayValue?.first?["code"] == "phd")
                let gatewayReference = observation["extension"]?.arrayValue?.first { $0["url"] == "http://hl7.org/fhir/StructureDefinition/observation-gatewayDevice" }
                #expect(gatewayReference?["valueReference"]?["reference"]?.stringValue == gatewayURL)
                #expect(observation["effectiveDateTime"]?.stringValue?.hasSuffix("+01:00") == true)
            }
            // The HI reading: no number, why not, and how to read it.
            let hi = try #require(observations.first { $0["valueQuantity"] == nil })
            #expect(hi["dataAbsentReason"]?["coding"]?.arrayValue?.first?["code"] == "positive-infinity")
            #expect(hi["interpretation"]?.arrayValue?.first?["coding"]?.arrayValue?.first?["code"] == "HH")

            // The same reading gets the same UUID in every export, and that UUID is the RFC 4122
            // version-5 UUID of its reading id (checked with Python's uuid module).
            let again = try await runProcess(
                try sugarctlPath(), ["--socket", f.path, "readings", "--format", "fhir", "--unit", "mmol"],
                environment: ["HOME": "/nonexistent-home"])
            let mmol = try JSONValue(parsing: again.stdout)
            #expect(mmol["entry"]?.arrayValue?.compactMap { $0["fullUrl"]?.stringValue } == fullUrls)
            #expect(try await Self.validate(again.stdout).status == 0)
            #expect(
                mmol["entry"]?.arrayValue?.last?["resource"]?["code"]?["coding"]?.arrayValue?.first?["code"] == "14743-9")
            let listed = try await f.call(api + "ListReadings", ["meter": .string(a), "limit": 1])
            let id = ReadingExport.identifier(try Wire.Reading(json: try #require(listed["readings"]?.arrayValue?.first)))
            let python = try await runProcess(
                "/usr/bin/env",
                [
                    "python3", "-c",
                    "import sys, uuid; ns = uuid.uuid5(uuid.NAMESPACE_URL, 'https://github.com/sugard/sugard'); print(uuid.uuid5(ns, 'reading/' + sys.argv[1]).urn)",
                    id,
                ])
            #expect(fullUrls.contains(python.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(python)")
        }
    }

    /// Two gateways (two databases), each with a person named "Mia" and no identifier: two distinct
    /// Patients (identifiers, fullUrls), never one made from the name; a gateway keeps its identity.
    @Test func twoGatewaysWithAMiaEachMakeTwoPatients() async throws {
        var patients: [JSONValue] = []
        var urls: [String] = []
        for _ in 0..<2 {
            try await withAPIServer { f in
                _ = try await f.call(api + "AssignMeter", ["meter": .string(meterA.id.rawValue), "person": "Mia", "from": "2024-01-01"])
                let out = try await runProcess(
                    try sugarctlPath(), ["--socket", f.path, "readings", "--format", "fhir"], environment: ["HOME": "/nonexistent-home"])
                #expect(out.status == 0, "\(out.stderr)")
                #expect(try await Self.validate(out.stdout).status == 0)
                let bundle = try JSONValue(parsing: out.stdout)
                let entry = try #require(bundle["entry"]?.arrayValue?.first { $0["resource"]?["resourceType"] == "Patient" })
                patients.append(try #require(entry["resource"]))
                urls.append(try #require(entry["fullUrl"]?.stringValue))
                // The same gateway exports the same Patient again.
                let again = try JSONValue(parsing: try await runProcess(
                    try sugarctlPath(), ["--socket", f.path, "readings", "--format", "fhir"], environment: ["HOME": "/nonexistent-home"]).stdout)
                #expect(again["entry"]?.arrayValue?.first { $0["resource"]?["resourceType"] == "Patient" }?["fullUrl"]?.stringValue == urls.last)
            }
        }
        #expect(patients.count == 2)
        #expect(patients[0]["name"] == patients[1]["name"])
        #expect(patients[0]["identifier"] != patients[1]["identifier"])
        #expect(urls[0] != urls[1])
        for patient in patients {
            let identifier = try #require(patient["identifier"]?.arrayValue?.first)
            #expect(identifier["system"]?.stringValue?.hasPrefix("urn:uuid:") == true)
            #expect(identifier["value"]?.stringValue?.contains("Mia") == false, "never the name")
        }
    }

    /// The validator itself says no to a broken Bundle (so the check above can fail).
    @Test func theValidatorRejectsABrokenBundle() async throws {
        let reading = try Wire.Reading(json: [
            "id": 1, "meter": "C0:26:DA:01:02:03", "epoch": 0, "sequenceNumber": 1, "mgdL": 99, "mmolL": 5.5, "flags": [],
            "time": [
                "iso": "2024-03-31T01:30:00Z", "epochMillis": 1_711_848_600_000, "local": "2024-03-31T03:30:00+02:00",
                "utcOffsetMinutes": 120, "zone": "Europe/Berlin", "method": "meterClock", "meterLocalTime": "2024-03-31T03:30:00",
                "quirks": [],
            ],
            "storedAt": ["iso": "2024-03-31T01:31:00Z", "epochMillis": 1_711_848_660_000],
        ])
        let (bundle, _) = ReadingExport.fhir([reading], meters: [:], unit: .mgdl, gateway: "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f")
        #expect(try await Self.validate(bundle.serialized()).status == 0)
        // An Observation without its required status.
        let text = bundle.serialized()
        let broken = text.replacingOccurrences(of: #""status":"final","#, with: "")
        #expect(broken != text)
        let refused = try await Self.validate(broken)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("status"), "\(refused.stderr)")
    }
}
