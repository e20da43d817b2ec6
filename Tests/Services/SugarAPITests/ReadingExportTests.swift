import GlucoseProfile
import HealthDataSync
import JSON
import SugarAPI
import SugarWire
import Testing

@Suite struct ReadingExportTests {
    static let gateway = "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f"

    /// A reading as ListReadings sends it, read as the exports take it.
    func reading(seq: Int, mgdL: Double?, flags: [String] = [], meter: String = "C0:26:DA:01:02:03") throws -> Wire.Reading {
        try Wire.Reading(json: [
            "id": .int(Int64(seq)), "meter": .string(meter), "epoch": 0, "sequenceNumber": .int(Int64(seq)),
            "mgdL": .from(mgdL), "mmolL": .from(mgdL.map { $0 / GlucoseUnit.molarMass }), "ketoneMmolL": .null,
            "type": ["code": 1, "name": "capillaryWholeBlood"],
            "sampleLocation": ["code": 1, "name": "finger"],
            "context": ["meal": ["code": 1, "name": "preprandial"]],
            "flags": .array(flags.map { .string($0) }),
            "time": ["iso": "2024-03-31T01:30:00Z", "epochMillis": 1_711_848_600_000,
                     "local": "2024-03-31T03:30:00+02:00", "utcOffsetMinutes": 120, "zone": "Europe/Berlin",
                     "method": "meterClock", "meterLocalTime": "2024-03-31T03:30:00", "meterClockSkewSeconds": .null,
                     "quirks": []],
            "storedAt": ["iso": "2024-03-31T01:31:00Z", "epochMillis": 1_711_848_660_000],
            "person": .null,
        ])
    }

    /// mmol/L is exact in the CSV (issue 33: rounded only where people read it), mg/dL whole.
    @Test func csvHasHeaderAndBothUnits() throws {
        let text = ReadingExport.csv([try self.reading(seq: 7, mgdL: 100, flags: ["timeFault"])])
        let lines = text.split(separator: "\r\n").map(String.init)
        #expect(lines.count == 2)
        #expect(lines[0].hasPrefix("reading_id,meter,sequence,measured_at_utc"))
        #expect(lines[1] == "C0:26:DA:01:02:03/0/7,C0:26:DA:01:02:03,7,2024-03-31T01:30:00Z,1711848600000,2024-03-31T03:30:00,120,100,5.550744909966918,,capillaryWholeBlood,finger,preprandial,false,timeFault,")
    }

    @Test func csvQuotesFields() throws {
        var r = try self.reading(seq: 1, mgdL: 90)
        r.meter = "a,\"b\""
        #expect(ReadingExport.csv([r]).contains("\"a,\"\"b\"\"\""))
    }

    @Test func nightscoutEntriesAreMgdLAndSkipNonGlucose() throws {
        let (entries, skipped) = ReadingExport.nightscout([
            try self.reading(seq: 1, mgdL: 88.4),
            try self.reading(seq: 2, mgdL: nil, flags: ["lo"]),
            try self.reading(seq: 3, mgdL: 120, flags: ["controlSolution"]),
        ])
        #expect(skipped == 2)
        let list = entries.arrayValue ?? []
        #expect(list.count == 1)
        #expect(list.first?["type"] == "mbg")
        #expect(list.first?["mbg"] == .int(88))
        #expect(list.first?["date"] == .int(1_711_848_600_000))
        #expect(list.first?["dateString"] == "2024-03-31T03:30:00+02:00", "the reading's own UTC offset")
        #expect(list.first?["utcOffset"] == 120)
        #expect(list.first?["sysTime"] == "2024-03-31T03:30:00+02:00")
        #expect(list.first?["device"] == "sugard://C0:26:DA:01:02:03")
        #expect(list.first?.objectValue.map { Set($0.keys) } == ["type", "mbg", "date", "dateString", "utcOffset", "sysTime", "device"])
    }

    @Test func nightscoutTreatmentsAreBGChecksInTheConfiguredUnit() throws {
        func compact(seq: Int, mgdL: Double?, flags: [String] = []) throws -> Wire.CompactReading {
            Wire.CompactReading(try self.reading(seq: seq, mgdL: mgdL, flags: flags))
        }
        let full = try self.reading(seq: 1, mgdL: 88.4)
        let reading = Wire.CompactReading(full)
        let mg = ReadingExport.nightscoutTreatment(reading, unit: .mgdl)
        #expect(mg == [
            "eventType": "BG Check", "glucose": 88, "glucoseType": "Finger", "units": "mg/dl",
            "created_at": "2024-03-31T03:30:00+02:00", "enteredBy": "sugard",
            // The reading's FHIR UUID: stable, one per reading.
            "identifier": .string(String(ReadingExport.fhirURN(reading: full).dropFirst("urn:uuid:".count))),
        ])
        let mmol = ReadingExport.nightscoutTreatment(try compact(seq: 1, mgdL: 88.4), unit: .mmol)
        #expect(mmol?["glucose"] == .double(4.9))
        #expect(mmol?["units"] == "mmol")
        #expect(ReadingExport.nightscoutTreatment(try compact(seq: 2, mgdL: nil, flags: ["hi"]), unit: .mgdl) == nil)
        #expect(ReadingExport.nightscoutTreatment(try compact(seq: 3, mgdL: 99, flags: ["controlSolution"]), unit: .mgdl) == nil)
    }

    /// The streamed export writes each FHIR Bundle entry by entry: the same bytes as the whole tree.
    @Test func fhirWrittenEntryByEntryIsTheTreesBytes() throws {
        var mia = try self.reading(seq: 1, mgdL: 101)
        mia.person = "Mia"
        let people = [
            "Mia": Wire.Person(
                id: 3, name: "Mia", identifiers: [Wire.PersonIdentifier(system: "urn:clinic", value: "42")], low: nil, high: nil,
                unit: nil, created: Wire.Instant(iso: "2024-01-01T00:00:00Z", epochMillis: 1_704_067_200_000), readingCount: 1,
                meters: [])
        ]
        let readings = [
            mia, try self.reading(seq: 2, mgdL: nil, flags: ["lo"], meter: "C0:26:DA:01:02:04"),
            try self.reading(seq: 3, mgdL: 120, flags: ["controlSolution"]), try self.reading(seq: 4, mgdL: 250),
        ]
        for unit in [Wire.Unit.mgdl, .mmol] {
            let (tree, skipped) = ReadingExport.fhir(readings, meters: [:], unit: unit, people: people, gateway: Self.gateway)
            var bytes: [UInt8] = []
            let written = ReadingExport.writeFHIR(readings, meters: [:], unit: unit, people: people, gateway: Self.gateway, into: &bytes)
            #expect(String(decoding: bytes, as: UTF8.self) == tree.prettySerialized())
            #expect(written == skipped && skipped == 1)
        }
        var empty: [UInt8] = []
        _ = ReadingExport.writeFHIR([], meters: [:], unit: .mgdl, gateway: Self.gateway, into: &empty)
        #expect(String(decoding: empty, as: UTF8.self) == ReadingExport.fhir([], meters: [:], unit: .mgdl, gateway: Self.gateway).bundle.prettySerialized())
    }

    func typed(_ r: Wire.Reading, type: Int64, context: JSONObject? = nil) -> Wire.Reading {
        var r = r
        r.sampleType = Wire.Coded(name: "x", code: type)
        if let context { r.context = context }
        return r
    }

    /// LOINC follows the sample type and the unit; context becomes components; LO keeps no number.
    @Test func fhirCodesFollowSampleTypeUnitAndContext() throws {
        let base = try self.reading(seq: 1, mgdL: 99)
        let cases: [(Int64, Wire.Unit, String)] = [
            (1, .mgdl, "41653-7"), (1, .mmol, "14743-9"), (2, .mgdl, "2345-7"), (2, .mmol, "14749-6"),
            (4, .mgdl, "2345-7"), (3, .mgdl, "2339-0"), (7, .mmol, "15074-8"), (9, .mmol, "99504-3"),
        ]
        for (type, unit, code) in cases {
            let (bundle, _) = ReadingExport.fhir([self.typed(base, type: type)], meters: [:], unit: unit, gateway: Self.gateway)
            let obs = try #require(bundle["entry"]?.arrayValue?.last?["resource"])
            #expect(obs["code"]?["coding"]?.arrayValue?.first?["code"]?.stringValue == code, "type \(type) \(unit)")
            #expect(obs["valueQuantity"]?["system"] == "http://unitsofmeasure.org")
        }
        let (mmol, _) = ReadingExport.fhir([base], meters: [:], unit: .mmol, gateway: Self.gateway)
        #expect(mmol["entry"]?.arrayValue?.last?["resource"]?["valueQuantity"]?["value"] == .double(5.5))
        #expect(mmol["entry"]?.arrayValue?.last?["resource"]?["valueQuantity"]?["code"] == "mmol/L")

        let context: JSONObject = [
            "meal": ["code": 2, "name": "postprandial"], "tester": ["code": 1, "name": "self"],
            "carbohydrate": ["id": ["code": 2, "name": "lunch"], "kg": 0.045], "hba1cPercent": 6.8,
        ]
        let (bundle, _) = ReadingExport.fhir([self.typed(base, type: 1, context: context)], meters: [:], unit: .mgdl, gateway: Self.gateway)
        let components = bundle["entry"]?.arrayValue?.last?["resource"]?["component"]?.arrayValue ?? []
        let meal = try #require(components.first)
        #expect(meal["code"]?["coding"]?.arrayValue?.first?["code"] == "8417864")
        #expect(meal["valueCodeableConcept"]?["coding"]?.arrayValue?.first?["code"] == "8417872")
        #expect(components.contains { $0["valueQuantity"]?["value"] == .double(45) && $0["valueQuantity"]?["code"] == "g" })
        #expect(components.count == 4)

        let (lo, _) = ReadingExport.fhir([try self.reading(seq: 2, mgdL: nil, flags: ["lo"])], meters: [:], unit: .mgdl, gateway: Self.gateway)
        let obs = try #require(lo["entry"]?.arrayValue?.last?["resource"])
        #expect(obs["valueQuantity"] == nil)
        #expect(obs["dataAbsentReason"]?["coding"]?.arrayValue?.first?["code"] == "negative-infinity")
        #expect(obs["interpretation"]?.arrayValue?.first?["coding"]?.arrayValue?.first?["code"] == "LL")
    }

    /// FIPS 180-4 / RFC 3174 test vectors, and Python's hashlib on inputs of every length around the block size.
    @Test func sha1MatchesTheStandardAndHashlib() async throws {
        #expect(SHA1.hex("abc") == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(SHA1.hex("") == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        #expect(SHA1.hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") == "84983e441c3bd26ebaae4aa1f95129e5e54670f1")
        // Python's hashlib on inputs of every length around the block size (one process for all).
        let lengths = [1, 55, 56, 63, 64, 65, 119, 120, 127, 128, 1000]
        let texts = lengths.map { length in String((0..<length).map { Character(UnicodeScalar(UInt8(97 + $0 % 26))) }) }
        let script = "import hashlib, sys\nfor line in sys.stdin.read().split():\n    print(hashlib.sha1(line.encode()).hexdigest())"
        let out = try await runProcess("/usr/bin/env", ["python3", "-c", script], stdin: texts.joined(separator: "\n"))
        #expect(out.stdout.split(separator: "\n").map(String.init) == texts.map(SHA1.hex))
    }

    /// RFC 4122 version-5 UUIDs agree with Python's `uuid.uuid5`.
    @Test func nameUUIDsAgreeWithPython() async throws {
        let names = ["https://github.com/sugard/sugard", "reading/C0:26:DA:01:02:03/0/7", "person/Mia", "ü"]
        let script = """
            import sys, uuid
            for name in sys.stdin.read().split("\\n"):
                print(uuid.uuid5(uuid.NAMESPACE_URL, name))
            """
        let out = try await runProcess("/usr/bin/env", ["python3", "-c", script], stdin: names.joined(separator: "\n"))
        #expect(out.stdout.split(separator: "\n").map(String.init) == names.map { NameUUID(namespace: .urlNamespace, name: $0).description })
        #expect(ReadingExport.uuidNamespace.description == NameUUID(namespace: .urlNamespace, name: names[0]).description)
    }

    @Test func fixedPointFormatting() {
        #expect(ReadingExport.formatted(5.55, digits: 1) == "5.6")
        #expect(ReadingExport.formatted(-0.04, digits: 1) == "0.0")
        #expect(ReadingExport.formatted(100.4, digits: 0) == "100")
        #expect(ReadingExport.formatted(7.05, digits: 2) == "7.05")
    }
}
