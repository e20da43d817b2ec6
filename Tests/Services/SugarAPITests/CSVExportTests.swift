import Foundation
import GlucoseProfile
import HealthDataSync
import JSON
import SugarAPI
import SugarWire
import Testing
import Varlink

/// Issue 39: `ListReadings` with `csv` (what `sugarctl readings --format csv` asks for) writes the
/// rows in the daemon, straight from the stored rows. They must be the bytes the CSV writer gives
/// for the full reading objects of the same store, whatever the readings hold; json and ndjson,
/// which sugarctl now writes from each object's text, the bytes of the parsed objects.
@Suite struct CSVExportTests {
    static let meterC = MeterIdentity(id: MeterID("C0:26:DA:0C:0C:0C"), name: "C")

    /// Readings of every kind the CSV has a column for, beside the seeded ones (a control-solution
    /// test and a HI): a context with a meal, LO, ketone, a record the store numbered after the
    /// meter's own number (TaiDoc), a packet that is no Glucose Measurement (a Verio record's 11
    /// bytes), several flags, mmol/L that is not a short decimal.
    static func commitReadingsOfEveryKind(_ store: any ReadingStore) async throws {
        func at(_ hours: Int64) -> Instant { Instant(epochMillis: seedStart.epochMillis + (10 + hours) * hour) }
        var meal = storedReading(meter: Self.meterC.id, sequence: 1, mgdL: 101, at: at(0))
        meal.contextBytes = [0x02, 0x01, 0x00, 0x01]  // meal present: preprandial
        meal.meal = 1
        var lo = storedReading(meter: Self.meterC.id, sequence: 2, mgdL: 20, at: at(1))
        lo.flags = [.lo]
        lo.mgdL = nil
        lo.mmolL = nil
        var ketone = storedReading(meter: Self.meterC.id, sequence: 3, mgdL: 13, at: at(2))
        ketone.flags = [.ketone, .quirkApplied]
        ketone.ketoneMmolL = 1.3
        ketone.mgdL = nil
        ketone.mmolL = nil
        var renumbered = storedReading(meter: Self.meterC.id, sequence: 7, mgdL: 120, at: at(3))
        renumbered.sequenceNumber = 40
        var verio = storedReading(meter: Self.meterC.id, sequence: 5, mgdL: 104, at: at(4))
        verio.measurementBytes = [0x00, 0x05, 0x00, 0xE8, 0x07, 0x04, 0x01, 0x0A, 0x00, 0x68, 0x00]
        verio.mgdL = 104.5
        verio.mmolL = 104.5 / GlucoseUnit.molarMass
        var faults = storedReading(meter: Self.meterC.id, sequence: 6, mgdL: 77, at: at(5))
        faults.flags = [.timeFault, .deviceFault, .clockUnverified]
        _ = try await store.commit(
            SyncBatch(
                meter: Self.meterC, features: nil, readings: [meal, lo, ketone, renumbered, verio, faults], newHighWater: 40,
                session: SyncSessionRecord(meter: Self.meterC.id, started: at(6), result: .success)))
    }

    /// The full reading objects of a listing, through the CSV writer sugarctl used for them.
    static func expectedRows(_ client: VarlinkClient, _ parameters: JSONObject) async throws -> (rows: String, count: Int) {
        let whole = try await client.call(api + "ListReadings", parameters.merging(["limit": 10_000]))
        let readings = try Wire.Reading.list((whole["readings"]?.arrayValue ?? []).compactMap(\.objectValue))
        return (ReadingExport.csvRows(readings), readings.count)
    }

    @Test func csvRepliesAreTheWritersRowsByteForByte() async throws {
        var limits = HealthDataSyncService.Limits()
        limits.leanReadingsPerStreamedReply = 2
        try await withAPIServer(limits: limits) { f in
            try await Self.commitReadingsOfEveryKind(f.store)
            // A person whose name needs quotes, given meter A's readings.
            let person = #"Mia "M", Jr"#
            let assigned = try await runProcess(
                try sugarctlPath(), ["--socket", f.path, "meters", "assign", meterA.id.rawValue, person, "--from", "2024-01-01"],
                environment: ["HOME": "/nonexistent-home"])
            #expect(assigned.status == 0, "\(assigned.stderr)")
            let client = try f.client()
            for parameters: JSONObject in [[:], ["order": "desc"], ["meter": .string(Self.meterC.id.rawValue)], ["person": .string(person)]] {
                let expected = try await Self.expectedRows(client, parameters)
                let replies = try await collect(client.callMore(api + "ListReadings", parameters.merging(["all": true, "csv": true])))
                for reply in replies {
                    expectValidReply("ListReadings", reply)
                    #expect(reply["readings"] == [])
                }
                let text = replies.map { $0["csv"]?.stringValue ?? "?" }.joined()
                #expect(text == expected.rows, "\(parameters)")
                #expect(replies.map { $0["csvRows"]?.intValue ?? -1 }.reduce(0, +) == Int64(expected.count))
                #expect(replies.dropLast().allSatisfy { $0["csvRows"] == 2 }, "pages of leanReadingsPerStreamedReply")
                #expect(replies.last?["truncated"] == false)
            }
            let all = try await Self.expectedRows(client, [:])
            #expect(all.count == 13)
            #expect(all.rows.contains(#","Mia ""M"", Jr"\#r\#n"#), "the person quoted")
            #expect(all.rows.contains(",preprandial,false,,"), "the meal")
            #expect(all.rows.contains("C0:26:DA:0C:0C:0C/0/7,C0:26:DA:0C:0C:0C,7,"), "the packet's own number, as the full object has it")
            #expect(all.rows.contains(",60,,,1.3,capillaryWholeBlood,finger,,false,ketone quirkApplied,"), "ketone")
            #expect(all.rows.contains(",timeFault deviceFault clockUnverified,"), "several flags")

            // A limit cuts the rows (truncated), and each reply reads back as a CSV page.
            let limited = try await collect(client.callMore(api + "ListReadings", ["limit": 5, "csv": true]))
            #expect(limited.map { $0["csvRows"]?.intValue } == [2, 2, 1] && limited.last?["truncated"] == true)
            let first = try await Self.expectedRows(client, [:])
            let limitedText = limited.map { $0["csv"]?.stringValue ?? "" }.joined()
            #expect(first.rows.hasPrefix(limitedText) && limitedText.split(separator: "\r\n").count == 5)
            for reply in limited {
                var reader = JSONReader(Array(JSONValue.object(reply).serialized().utf8))
                let page = try Wire.CSVPage(reading: &reader)
                #expect(page.text == reply["csv"]?.stringValue && page.rows == reply["csvRows"]?.intValue)
                #expect(page.unit == .mgdl)
            }
            // Without more: one reply; compact and csv together are refused.
            let single = try await client.call(api + "ListReadings", ["limit": 3, "csv": true])
            #expect(single["csvRows"] == 3 && single["truncated"] == true)
            #expect(all.rows.hasPrefix(single["csv"]?.stringValue ?? "?"))
            let both = await remoteError { _ = try await client.call(api + "ListReadings", ["csv": true, "compact": true]) }
            #expect(both?.name == api + "InvalidParameter" && both?.parameters["parameter"] == "csv")

            // sugarctl's CSV export: the header, then these rows.
            let export = try await runProcess(
                try sugarctlPath(), ["--socket", f.path, "readings", "--format", "csv"], environment: ["HOME": "/nonexistent-home"])
            #expect(export.status == 0, "\(export.stderr)")
            #expect(export.stdout == ReadingExport.csvHeader + all.rows)
            let cut = try await runProcess(
                try sugarctlPath(), ["--socket", f.path, "readings", "--format", "csv", "--limit", "4", "--order", "desc"],
                environment: ["HOME": "/nonexistent-home"])
            let desc = try await Self.expectedRows(client, ["order": "desc"])
            #expect(cut.stdout == ReadingExport.csvHeader + desc.rows.split(separator: "\r\n").prefix(4).map { $0 + "\r\n" }.joined())
            #expect(cut.stderr.contains("wrote the first 4 readings"), "\(cut.stderr)")

            // json and ndjson pass on each object's text as sugard wrote it: the bytes sugarctl
            // wrote from the parsed objects (the indented array, one object per line).
            let objects = try await client.call(api + "ListReadings", ["limit": 10_000])["readings"]?.arrayValue ?? []
            #expect(objects.count == 13)
            let json = try await runProcess(
                try sugarctlPath(), ["--socket", f.path, "readings", "--format", "json"], environment: ["HOME": "/nonexistent-home"])
            #expect(json.status == 0, "\(json.stderr)")
            #expect(json.stdout == JSONValue.array(objects).prettySerialized() + "\n")
            let ndjson = try await runProcess(
                try sugarctlPath(), ["--socket", f.path, "readings", "--format", "ndjson", "--order", "desc"],
                environment: ["HOME": "/nonexistent-home"])
            #expect(ndjson.stdout == objects.reversed().map { $0.serialized() + "\n" }.joined())
            let none = try await runProcess(
                try sugarctlPath(), ["--socket", f.path, "readings", "--format", "json", "--since", "2030-01-01"],
                environment: ["HOME": "/nonexistent-home"])
            #expect(none.stdout == "[]\n" && none.status == 0)
        }
    }

    /// The report reads the compact replies straight from their bytes: the same figures as from
    /// the objects.
    @Test func compactPagesReadAsTheObjects() async throws {
        try await withAPIServer { f in
            try await Self.commitReadingsOfEveryKind(f.store)
            let client = try f.client()
            let replies = try await collect(client.callMore(api + "ListReadings", ["all": true, "compact": true]))
            for reply in replies {
                var reader = JSONReader(Array(JSONValue.object(reply).serialized().utf8))
                let page = try Wire.CompactPage(reading: &reader)
                let objects = (reply["readings"]?.arrayValue ?? [])
                #expect(page.readings.map { $0.json.serialized() } == objects.map { $0.serialized() })
                #expect(page.truncated == reply["truncated"]?.boolValue && page.unit == .mgdl)
            }
        }
    }
}

extension JSONObject {
    /// These members with `other`'s added (replacing any of the same key).
    fileprivate func merging(_ other: JSONObject) -> JSONObject {
        var result = self
        for entry in other.entries { result[entry.key] = entry.value }
        return result
    }
}
