import Foundation
import HealthDataSync
import JSON
import SugarAPI
import SugarWire
import Testing
import Varlink

/// People as records, meters changing hands with history kept, shared meters and attributions,
/// through the real daemon, its socket and `sugarctl`.
@Suite struct AssignmentHistoryTests {
    static func sugarctl(_ f: Fixture, _ arguments: [String]) async throws -> ProcessOutput {
        try await runProcess(try sugarctlPath(), ["--socket", f.path] + arguments, environment: ["HOME": "/nonexistent-home"])
    }

    static func json(_ f: Fixture, _ arguments: [String]) async throws -> JSONValue {
        let out = try await Self.sugarctl(f, arguments)
        #expect(out.status == 0, "\(arguments): \(out.stderr)")
        return try JSONValue(parsing: out.stdout)
    }

    static func iso(_ millis: Int64) -> String { Instant(epochMillis: millis).isoString }

    @Test func aMeterChangingHandsKeepsEachPersonsHistory() async throws {
        try await withAPIServer { f in
            let a = meterA.id.rawValue
            #expect(try await Self.sugarctl(f, ["people", "add", "Mia"]).status == 0)
            #expect(try await Self.sugarctl(f, ["people", "add", "Jonas"]).status == 0)
            #expect(try await Self.sugarctl(f, ["meters", "assign", a, "Mia", "--from", "2024-01-01"]).status == 0)
            // Jonas gets the meter between its 3rd and 4th reading: only the 4th and 5th move.
            let handover = Self.iso(seedStart.epochMillis + 2 * hour + hour / 2)
            let moved = try await Self.sugarctl(f, ["meters", "assign", a, "Jonas", "--from", handover])
            #expect(moved.status == 0, "\(moved.stderr)")
            #expect(moved.stdout.contains("2 stored reading(s) measured since then now belong to Jonas"), "\(moved.stdout)")

            let mia = try await Self.json(f, ["readings", "--person", "Mia", "--format", "json"])
            let jonas = try await Self.json(f, ["readings", "--person", "Jonas", "--format", "json"])
            #expect(mia.arrayValue?.compactMap { $0["sequenceNumber"]?.intValue } == [1, 2, 3])
            #expect(jonas.arrayValue?.compactMap { $0["sequenceNumber"]?.intValue } == [4, 5])
            let listed = try await f.call(api + "ListReadings", ["person": "Jonas"])
            expectValidReply("ListReadings", listed)

            // Reports per person: Mia's keeps her readings (90 and 100; her control test is left out),
            // Jonas's has his.
            let period = ["--since", "2024-03-30", "--until", "2024-04-02", "--format", "json"]
            let miaReport = try await Self.json(f, ["report", "--person", "Mia"] + period)
            #expect(miaReport["person"] == "Mia" && miaReport["meanMgdL"]?.doubleValue == 95, "\(miaReport)")
            let jonasReport = try await Self.json(f, ["report", "--person", "Jonas"] + period)
            #expect(jonasReport["person"] == "Jonas" && jonasReport["meanMgdL"]?.doubleValue == 130, "\(jonasReport)")

            // History: two periods with their reading counts.
            let history = try await f.call(api + "ListAssignments", ["meter": .string(a)])
            expectValidReply("ListAssignments", history)
            let periods = try Wire.AssignmentsReply(json: .object(history)).assignments
            #expect(periods.map(\.person) == ["Mia", "Jonas"])
            #expect(periods.map(\.readingCount) == [3, 2])
            #expect(periods[0].until == periods[1].from && periods[1].until == nil)
            let table = try await Self.sugarctl(f, ["meters", "history", a])
            #expect(table.stdout.contains("Mia") && table.stdout.contains("Jonas") && table.stdout.contains("(now)"), "\(table.stdout)")

            // The meter changes hands again now: nothing stored moves, and new readings are the new holder's.
            let back = try await Self.sugarctl(f, ["meters", "assign", a, "Mia", "--from", "5m"])
            #expect(back.stdout.contains("no stored reading changed hands"), "\(back)")
            f.queue([meterRecord(sequence: 6, mgdL: 123, at: Instant(epochMillis: wallClockMillisecondsForTests() - 60_000))], for: meterA.id)
            #expect(try await Self.sugarctl(f, ["sync", a, "--force"]).status == 0)
            let newest = try await f.call(api + "ListReadings", ["meter": .string(a), "order": "desc", "limit": 1])
            #expect(newest["readings"]?.arrayValue?.first?["person"] == "Mia")
            #expect(try await Self.json(f, ["readings", "--person", "Jonas", "--format", "json"]).arrayValue?.count == 2)

            // The person's record: meters now, reading count, periods.
            let shown = try await f.call(api + "GetPerson", ["name": "Jonas"])
            expectValidReply("GetPerson", shown)
            let person = try Wire.PersonHistoryReply(json: .object(shown))
            #expect(person.person.readingCount == 2 && person.person.meters.isEmpty)
            #expect(person.assignments.count == 1)

            // Refusals: a future start, an unknown meter, a holder the meter already has.
            let future = Self.iso(wallClockMillisecondsForTests() + 86_400_000)
            #expect(try await Self.sugarctl(f, ["meters", "assign", a, "Jonas", "--from", future]).status == 64)
            #expect(try await Self.sugarctl(f, ["meters", "assign", "00:11:22:33:44:55", "Jonas"]).status == 1)
            let again = try await Self.sugarctl(f, ["meters", "assign", a, "Mia"])
            #expect(again.status == 64 && again.stderr.contains("already assigned to Mia"), "\(again.stderr)")
        }
    }

    @Test func aSharedMetersReadingsWaitAndAreAttributedOnce() async throws {
        try await withAPIServer { f in
            let b = meterB.id.rawValue
            for name in ["Anna", "Bert"] { #expect(try await Self.sugarctl(f, ["people", "add", name]).status == 0) }
            let shared = try await Self.sugarctl(f, ["meters", "share", b, "--from", "2024-01-01"])
            #expect(shared.status == 0 && shared.stdout.contains("is shared"), "\(shared)")
            let waiting = try await Self.json(f, ["readings", "--unattributed", "--format", "json"])
            let ids = waiting.arrayValue?.compactMap { $0["id"]?.intValue } ?? []
            #expect(ids.count == 2)
            #expect(waiting.arrayValue?.allSatisfy { $0["person"]?.isNull == true && $0["awaitingAttribution"] == true } == true)
            #expect(try await Self.sugarctl(f, ["status"]).stdout.contains("2 of shared meters wait for a person"))
            #expect(try await f.call(api + "GetPeopleStatus")["unattributed"] == 2)
            let meters = try await f.call(api + "ListMeters")
            expectValidReply("ListMeters", meters)
            #expect(meters["meters"]?.arrayValue?.first { $0["id"]?.stringValue == b }?["stored"]?["shared"] == true)

            // Follow the feed from its end: an attribution is a new entry with the new person.
            let first = try await Self.sugarctl(f, ["readings", "attribute", "--person", "Anna", String(ids[0])])
            #expect(first.status == 0 && first.stdout.contains("Gave 1 reading(s) to Anna"), "\(first)")
            let second = try await Self.sugarctl(
                f, ["readings", "attribute", "--person", "Bert", "--meter", b, "--since", "2024-01-01", "--until", "now"])
            #expect(second.stdout.contains("Gave 1 reading(s) to Bert"), "\(second)")
            let status = try await f.call(api + "GetPeopleStatus")
            expectValidReply("GetPeopleStatus", status)
            #expect(status["unattributed"] == 0 && status["people"] == 2)
            #expect(try await Self.json(f, ["readings", "--person", "Anna", "--format", "json"]).arrayValue?.count == 1)

            // A reading of an assigned period cannot be attributed; nor one of an unknown person.
            let aReading = try await f.call(api + "ListReadings", ["meter": .string(meterA.id.rawValue), "limit": 1])
            let aID = aReading["readings"]?.arrayValue?.first?["id"]?.intValue ?? 0
            #expect(try await Self.sugarctl(f, ["readings", "attribute", "--person", "Anna", String(aID)]).status == 64)
            #expect(try await Self.sugarctl(f, ["readings", "attribute", "--person", "Nobody", String(ids[1])]).status == 1)
            #expect(try await Self.sugarctl(f, ["readings", "attribute", String(ids[1])]).status == 64)
        }
    }

    /// FollowReadings: after the stored readings, an attribution comes as one more entry (a new
    /// cursor, the same reading id) with the person it gave; attributing again to the same person
    /// adds nothing.
    @Test func followersSeeAnAttributionOnce() async throws {
        try await withAPIServer { f in
            let b = meterB.id.rawValue
            _ = try await Self.sugarctl(f, ["people", "add", "Anna"])
            _ = try await Self.sugarctl(f, ["meters", "share", b, "--from", "2024-01-01"])
            let client = try f.client()
            defer { client.close() }
            var replies = client.callMore(api + "FollowReadings", ["after": 0]).makeAsyncIterator()
            var seen: [(cursor: Int64, id: Int64, meter: String)] = []
            while seen.count < 7, let reply = try await replies.next() {
                seen.append(
                    (reply["cursor"]?.intValue ?? 0, reply["reading"]?["id"]?.intValue ?? 0, reply["reading"]?["meter"]?.stringValue ?? ""))
            }
            let target = try #require(seen.last { $0.meter == b }).id
            let given = try await f.call(api + "AttributeReadings", ["person": "Anna", "ids": [.int(target)]])
            expectValidReply("AttributeReadings", given)
            #expect(given["moved"] == 1)
            _ = try await f.call(api + "AttributeReadings", ["person": "Anna", "ids": [.int(target)]])
            let next = try #require(try await replies.next())
            #expect(next["reading"]?["id"]?.intValue == target)
            #expect(next["reading"]?["person"] == "Anna")
            #expect((next["cursor"]?.intValue ?? 0) > seen.last!.cursor)
            // Nothing more is waiting: a new reading is the next entry, not the same attribution again.
            f.queue([meterRecord(sequence: 9, mgdL: 111, at: Instant(epochMillis: wallClockMillisecondsForTests() - 60_000))], for: meterA.id)
            _ = try await Self.sugarctl(f, ["sync", meterA.id.rawValue, "--force"])
            let after = try #require(try await replies.next())
            #expect(after["reading"]?["sequenceNumber"] == 9)
        }
    }

    @Test func peopleAreRecordsManagedWithSugarctl() async throws {
        try await withAPIServer { f in
            let added = try await Self.sugarctl(
                f, ["people", "add", "Mia", "--identifier", "urn:oid:1.2.36.146.595.217.0.1|12345", "--low", "4", "--high", "10",
                    "--unit", "mmol"])
            #expect(added.status == 0, "\(added.stderr)")
            let list = try await Self.json(f, ["people", "list", "--json"])
            let mia = try #require(list["people"]?.arrayValue?.first)
            #expect(mia["name"] == "Mia" && mia["unit"] == "mmol")
            #expect(mia["identifiers"] == [["system": "urn:oid:1.2.36.146.595.217.0.1", "value": "12345"]])
            #expect(abs((mia["low"]?["mmolL"]?.doubleValue ?? 0) - 4) < 0.01)
            #expect(abs((mia["high"]?["mgdL"]?.doubleValue ?? 0) - 180.2) < 0.1)
            expectValidReply("ListPeople", try await f.call(api + "ListPeople"))

            // Validation: a bad identifier, a taken one, a duplicate name, thresholds out of order.
            #expect(try await Self.sugarctl(f, ["people", "add", "Jonas", "--identifier", "12345"]).status == 64)
            let taken = try await Self.sugarctl(f, ["people", "add", "Jonas", "--identifier", "urn:oid:1.2.36.146.595.217.0.1|12345"])
            #expect(taken.status == 64 && taken.stderr.contains("belongs to Mia"), "\(taken.stderr)")
            #expect(try await Self.sugarctl(f, ["people", "add", "Mia"]).status == 64)
            #expect(try await Self.sugarctl(f, ["people", "add", "Lo", "--low", "200", "--high", "100"]).status == 64)
            #expect(try await Self.sugarctl(f, ["people", "add", "Bad\u{7}"]).status == 64)

            // Edit: rename, identifiers, thresholds in the person's unit.
            let edited = try await Self.sugarctl(
                f, ["people", "edit", "Mia", "--name", "Mia S.", "--remove-identifier", "urn:oid:1.2.36.146.595.217.0.1|12345",
                    "--identifier", "https://clinic.example/patients|A-7", "--high", "none"])
            #expect(edited.status == 0, "\(edited.stderr)")
            let shown = try await Self.json(f, ["people", "show", "Mia S.", "--json"])
            #expect(shown["person"]?["identifiers"] == [["system": "https://clinic.example/patients", "value": "A-7"]])
            #expect(shown["person"]?["high"]?.isNull == true)
            #expect(try await Self.sugarctl(f, ["people", "show", "Mia"]).status == 1)

            // Remove: refused while the person has readings (and says what would happen), then forced.
            _ = try await Self.sugarctl(f, ["meters", "assign", meterA.id.rawValue, "Mia S.", "--from", "2024-01-01"])
            let refused = try await Self.sugarctl(f, ["people", "remove", "Mia S."])
            #expect(refused.status == 64 && refused.stderr.contains("--force") && refused.stderr.contains("5 reading(s)"), "\(refused.stderr)")
            #expect(try await f.store.readings(ReadingQuery(person: "Mia S.")).count == 5)
            let removed = try await Self.sugarctl(f, ["people", "remove", "Mia S.", "--force"])
            #expect(removed.status == 0 && removed.stdout.contains("5 reading(s) stay"), "\(removed)")
            #expect(try await f.store.readings(ReadingQuery(meter: meterA.id)).count == 5)
            #expect(try await Self.json(f, ["people", "--json"])["people"] == [])
        }
    }
}

func wallClockMillisecondsForTests() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
