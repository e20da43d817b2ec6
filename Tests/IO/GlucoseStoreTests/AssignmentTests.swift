import Foundation
import GlucoseProfile
import HealthDataSync
import Testing

@testable import GlucoseStore

/// People as records, assignments with time, shared meters and attributions, on a real SQLite file.
@Suite struct AssignmentTests {
    /// Instant of `makeReading(seq)`: one reading per hour from 2024-03-01.
    static func at(_ seq: UInt16) -> Instant { makeReading(seq).instant }

    @Test func reassigningKeepsHistoryAndChangingThePastMovesOnlyThatSpan() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.addPerson(PersonRecord(id: 0, name: "Mia", created: Instant(epochMillis: 0)))
        _ = try await store.addPerson(PersonRecord(id: 0, name: "Jonas", created: Instant(epochMillis: 0)))
        _ = try await store.commit(syncOf(1...2))  // no assignment yet: nobody's
        let first = try await store.setAssignment(testMeter, holder: .person("Mia"), from: Self.at(3))
        #expect(first.moved == 0)
        _ = try await store.commit(syncOf(3...6))
        // The meter is given to Jonas from reading 5 on (a change in the past): only 5 and 6 move.
        let handover = try await store.setAssignment(testMeter, holder: .person("Jonas"), from: Self.at(5))
        #expect(handover == AttributionResult(moved: 2, unchanged: 0))
        _ = try await store.commit(syncOf(7...8))
        let people = try await store.readings(ReadingQuery(meter: testMeter)).map { $0.person ?? "-" }
        #expect(people == ["-", "-", "Mia", "Mia", "Jonas", "Jonas", "Jonas", "Jonas"])
        #expect(try await store.readings(ReadingQuery(person: "Mia")).map(\.reading.sequenceNumber) == [3, 4])
        #expect(try await store.readings(ReadingQuery(person: "Jonas")).map(\.reading.sequenceNumber) == [5, 6, 7, 8])
        #expect(
            try await store.assignments(testMeter) == [
                MeterAssignment(meter: testMeter, holder: .person("Mia"), from: Self.at(3), until: Self.at(5), readingCount: 2),
                MeterAssignment(meter: testMeter, holder: .person("Jonas"), from: Self.at(5), until: nil, readingCount: 4),
            ])
        #expect(try await store.meter(testMeter)?.person == "Jonas")

        // Mia had it from reading 1 after all: the gap before her period fills up to its start.
        #expect(try await store.setAssignment(testMeter, holder: .person("Mia"), from: Self.at(1)).moved == 2)
        #expect(try await store.readings(ReadingQuery(person: "Mia")).map(\.reading.sequenceNumber) == [1, 2, 3, 4])
        #expect(try await store.assignments(testMeter).map(\.person) == ["Mia", "Mia", "Jonas"])

        // Unassigning from reading 8 on releases only reading 8.
        #expect(try await store.setAssignment(testMeter, holder: nil, from: Self.at(8)).moved == 1)
        #expect(try await store.readings(ReadingQuery(meter: testMeter)).last?.person == nil)
        #expect(try await store.meter(testMeter)?.person == nil)
        await #expect(throws: StoreError.self) { try await store.setAssignment(testMeter, holder: nil, from: Self.at(9)) }
        await #expect(throws: StoreError.self) { try await store.setAssignment(testMeter, holder: .person("Nobody"), from: Self.at(9)) }
        await #expect(throws: StoreError.self) { try await store.setAssignment(testMeter, holder: .person("Jonas"), from: Self.at(6)) }

        // Every person change is a feed entry after the reading's first one, with the new person; a
        // follower from the start reads each reading once, at its latest entry, with its person now.
        #expect(try await ints(store, "SELECT count(*) FROM feed") == [13], "8 readings, then 2, 2 and 1 moved")
        let feed = try await store.readings(afterCursor: 0, limit: 100)
        #expect(feed.map(\.cursor) == [3, 4, 7, 8, 9, 11, 12, 13])
        #expect(feed.map { $0.person ?? "-" } == ["Mia", "Mia", "Jonas", "Jonas", "Jonas", "Mia", "Mia", "-"])
        #expect(feed.map(\.reading.sequenceNumber) == [3, 4, 5, 6, 7, 1, 2, 8])
        // A follower that had read up to the first handover gets only what changed after it.
        #expect(try await store.readings(afterCursor: 10, limit: 100).map(\.reading.sequenceNumber) == [1, 2, 8])
    }

    @Test func sharedMeterReadingsWaitUntilAttributed() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        for name in ["Anna", "Bert"] { _ = try await store.addPerson(PersonRecord(id: 0, name: name, created: Instant(epochMillis: 0))) }
        _ = try await store.commit(syncOf(1...1))
        try await store.assign(testMeter, person: "Anna")  // from the store's "now", after every reading here
        _ = try await store.setAssignment(testMeter, holder: .shared, from: Self.at(2))
        #expect(try await store.meter(testMeter)?.shared == false, "Anna's open period is the current one")
        let committed = try await store.commit(syncOf(2...5))
        #expect(committed.inserted.allSatisfy { $0.person == nil && $0.awaitingAttribution })
        #expect(try await store.unattributedCount() == 4)
        #expect(try await store.readings(ReadingQuery(unattributed: true)).map(\.reading.sequenceNumber) == [2, 3, 4, 5])

        let ids = committed.inserted.map(\.id)
        let cursor = try await store.readings(afterCursor: 0, limit: 100).last!.cursor
        #expect(try await store.attribute(.readings([ids[0], ids[1]]), person: "Anna").moved == 2)
        #expect(try await store.attribute(.meter(testMeter, since: Self.at(4), until: Self.at(6)), person: "Bert").moved == 2)
        #expect(try await store.unattributedCount() == 0)
        #expect(try await store.readings(ReadingQuery(person: "Bert")).map(\.reading.sequenceNumber) == [4, 5])
        // Attributing again to the same person changes nothing and adds nothing to the feed.
        #expect(try await store.attribute(.readings([ids[0]]), person: "Anna") == AttributionResult(moved: 0, unchanged: 1))
        let events = try await store.readings(afterCursor: cursor, limit: 100)
        #expect(events.map(\.reading.sequenceNumber) == [2, 3, 4, 5])
        #expect(events.map(\.person) == ["Anna", "Anna", "Bert", "Bert"])
        #expect(events.allSatisfy { $0.cursor > cursor && !$0.awaitingAttribution })

        // Reading 1 belongs to nobody by assignment (not shared then): it cannot be attributed.
        let one = try await store.readings(ReadingQuery(meter: testMeter)).first!
        await #expect(throws: StoreError.self) { try await store.attribute(.readings([one.id]), person: "Anna") }
        await #expect(throws: StoreError.self) { try await store.attribute(.readings([99_999]), person: "Anna") }
        await #expect(throws: StoreError.self) { try await store.attribute(.readings([ids[0]]), person: "Nobody") }
    }

    @Test func peopleAreRecordsWithIdentifiersThresholdsAndUnit() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        let clinic = PersonIdentifier(system: "urn:oid:1.2.36.146.595.217.0.1", value: "12345")
        let mia = try await store.addPerson(
            PersonRecord(id: 0, name: "Mia", identifiers: [clinic], lowMgdL: 70, highMgdL: 180, unit: .mmol, created: Instant(epochMillis: 0)))
        #expect(mia.identifiers == [clinic] && mia.unit == .mmol && mia.lowMgdL == 70 && mia.readingCount == 0)
        await #expect(throws: StoreError.self) { try await store.addPerson(PersonRecord(id: 0, name: "Mia", created: Instant(epochMillis: 0))) }
        await #expect(throws: StoreError.self) {
            try await store.addPerson(PersonRecord(id: 0, name: "Other", identifiers: [clinic], created: Instant(epochMillis: 0)))
        }
        await #expect(throws: StoreError.self) {
            try await store.addPerson(PersonRecord(id: 0, name: "Lo", lowMgdL: 200, highMgdL: 100, created: Instant(epochMillis: 0)))
        }
        let edited = try await store.editPerson(
            named: "Mia", PersonChange(name: "Mia S.", removeIdentifiers: [clinic], highMgdL: .some(nil), unit: .some(nil)))
        #expect(edited.name == "Mia S." && edited.identifiers.isEmpty && edited.highMgdL == nil && edited.unit == nil && edited.id == mia.id)

        _ = try await store.commit(syncOf(1...3))
        _ = try await store.setAssignment(testMeter, holder: .person("Mia S."), from: Self.at(1))
        await #expect(throws: StoreError.self) { try await store.removePerson(named: "Mia S.", force: false) }
        #expect(try await store.readings(ReadingQuery(person: "Mia S.")).count == 3, "refusal loses nothing")
        let removal = try await store.removePerson(named: "Mia S.", force: true)
        #expect(removal == PersonRemoval(releasedReadings: 3, removedAssignments: 1))
        #expect(try await store.readings(ReadingQuery(meter: testMeter)).count == 3)
        #expect(try await store.readings(ReadingQuery(meter: testMeter)).allSatisfy { $0.person == nil })
        #expect(try await store.people(includeCounts: true).isEmpty)
        #expect(try await store.textForTesting("PRAGMA foreign_key_check").isEmpty)
    }

    @Test func theGatewayIdentityIsRandomAndPersistent() async throws {
        let one = try TempDirectory()
        let two = try TempDirectory()
        let a = try await openStore(one.database).gatewayID()
        let b = try await openStore(two.database).gatewayID()
        #expect(a != b)
        #expect(a.count == 36 && a.split(separator: "-").map(\.count) == [8, 4, 4, 4, 12])
        #expect(UUID(uuidString: a) != nil)
        #expect(try await openStore(one.database).gatewayID() == a)
    }
}
