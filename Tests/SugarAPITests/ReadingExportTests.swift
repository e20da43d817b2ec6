import HealthDataSync
import JSON
import SugarAPI
import Testing

@Suite struct ReadingExportTests {
    func reading(seq: Int, mgdL: Double?, flags: [String] = [], meter: String = "C0:26:DA:01:02:03") -> JSONValue {
        [
            "meter": .string(meter), "epoch": 0, "sequenceNumber": .int(Int64(seq)),
            "userFacingTime": "2024-03-31T03:30:00",
            "mgdL": .from(mgdL), "mmolL": .from(mgdL.map { $0 / GlucoseUnit.molarMass }),
            "type": ["code": 1, "name": "capillaryWholeBlood"],
            "sampleLocation": ["code": 1, "name": "finger"],
            "context": ["meal": ["code": 1, "name": "preprandial"]],
            "flags": .array(flags.map { .string($0) }),
            "time": ["iso": "2024-03-31T01:30:00Z", "epochMillis": 1_711_848_600_000,
                     "local": "2024-03-31T03:30:00+02:00", "utcOffsetMinutes": 120],
        ]
    }

    @Test func csvHasHeaderAndBothUnits() {
        let text = ReadingExport.csv([self.reading(seq: 7, mgdL: 100, flags: ["timeFault"])])
        let lines = text.split(separator: "\r\n").map(String.init)
        #expect(lines.count == 2)
        #expect(lines[0].hasPrefix("reading_id,meter,sequence,measured_at_utc"))
        #expect(lines[1] == "C0:26:DA:01:02:03/0/7,C0:26:DA:01:02:03,7,2024-03-31T01:30:00Z,1711848600000,2024-03-31T03:30:00,120,100,5.6,,capillaryWholeBlood,finger,preprandial,false,timeFault")
    }

    @Test func csvQuotesFields() {
        var r = self.reading(seq: 1, mgdL: 90)
        if case .object(var o) = r { o["meter"] = "a,\"b\""; r = .object(o) }
        #expect(ReadingExport.csv([r]).contains("\"a,\"\"b\"\"\""))
    }

    @Test func nightscoutEntriesAreMgdLAndSkipNonGlucose() {
        let (entries, skipped) = ReadingExport.nightscout([
            self.reading(seq: 1, mgdL: 88.4),
            self.reading(seq: 2, mgdL: nil, flags: ["lo"]),
            self.reading(seq: 3, mgdL: 120, flags: ["controlSolution"]),
        ])
        #expect(skipped == 2)
        let list = entries.arrayValue ?? []
        #expect(list.count == 1)
        #expect(list.first?["type"] == "mbg")
        #expect(list.first?["mbg"] == .int(88))
        #expect(list.first?["date"] == .int(1_711_848_600_000))
        #expect(list.first?["dateString"] == "2024-03-31T01:30:00Z")
        #expect(list.first?["device"]?.stringValue?.contains("C0:26:DA:01:02:03") == true)
    }

    @Test func fhirBundleUsesLoincByUnitAndKeepsLoReadings() throws {
        let (bundle, skipped) = ReadingExport.fhir(
            [self.reading(seq: 1, mgdL: 99), self.reading(seq: 2, mgdL: nil, flags: ["lo"])], unit: .mmolL)
        #expect(skipped == 0)
        #expect(bundle["resourceType"] == "Bundle")
        let entries = try #require(bundle["entry"]?.arrayValue)
        #expect(entries.count == 3)
        #expect(entries[0]["resource"]?["resourceType"] == "Device")
        let obs = try #require(entries[1]["resource"])
        #expect(obs["code"]?["coding"]?.arrayValue?.first?["code"] == "14743-9")
        #expect(obs["valueQuantity"]?["value"] == .double(5.5))
        #expect(obs["valueQuantity"]?["code"] == "mmol/L")
        #expect(obs["effectiveDateTime"] == "2024-03-31T03:30:00+02:00")
        #expect(obs["device"]?["reference"]?.stringValue?.hasPrefix("Device/") == true)
        let lo = try #require(entries[2]["resource"])
        #expect(lo["valueQuantity"] == nil)
        #expect(lo["interpretation"]?.arrayValue?.first?["coding"]?.arrayValue?.first?["code"] == "LU")
        let (mg, _) = ReadingExport.fhir([self.reading(seq: 1, mgdL: 99)], unit: .mgdL)
        #expect(mg["entry"]?.arrayValue?[1]["resource"]?["code"]?["coding"]?.arrayValue?.first?["code"] == "41653-7")
    }

    @Test func fixedPointFormatting() {
        #expect(ReadingExport.formatted(5.55, digits: 1) == "5.6")
        #expect(ReadingExport.formatted(-0.04, digits: 1) == "0.0")
        #expect(ReadingExport.formatted(100.4, digits: 0) == "100")
        #expect(ReadingExport.formatted(7.05, digits: 2) == "7.05")
    }
}
