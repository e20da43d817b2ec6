import Foundation
import HealthDataSync
import Testing

@testable import GlucoseStore

/// A database as the first release (schema version 1) left it: two meters, sync sessions, readings
/// (one with a context packet) and a sequence reset, written with the v1 statements.
enum V1Fixture {
    static let readings: [Reading] = [
        makeReading(1), makeReading(2, mgdL: 140, context: [0x02, 0x01, 0x00, 0x01]), makeReading(3, mgdL: 61),
        makeReading(1, meter: otherMeter, mgdL: 200),
    ]

    static func write(_ db: Connection) throws(StoreError) {
        try db.execute(
            """
            INSERT INTO meter (id, address, name, manufacturer, model, serial_number, firmware, features, first_seen_ms,
                last_seen_ms, epoch, high_water, last_sync_ms, last_sync_result, forgotten_ms)
            VALUES (1, '\(testMeter.rawValue)', 'meter', 'Roche', 'Accu-Chek Guide', 'SN-1', '1.0', 1026, 1710000000000,
                1710000004000, 1, 3, 1710000004000, 'success', NULL),
                (2, '\(otherMeter.rawValue)', 'Contour', 'Ascensia', 'Contour Next One', 'SN-2', '2.0', NULL, 1710000000000,
                1710000004000, 0, 1, 1710000004000, 'success', 1715000000000);
            INSERT INTO sync_session (id, meter_id, started_ms, ended_ms, result, expected, received, stored, duplicates,
                sequence_resets, epoch, high_water_before, high_water_after, error, committed_ms)
            VALUES (1, 1, 1710000000000, 1710000004000, 'success', 3, 3, 3, 0, 1, 1, NULL, 3, NULL, 1710000004000),
                (2, 2, 1710000000000, 1710000004000, 'success', 1, 1, 1, 0, 0, 0, NULL, 1, NULL, 1710000004000);
            INSERT INTO sequence_reset (meter_id, old_epoch, new_epoch, at_ms, reason, sequence_number, old_high_water, session_id)
            VALUES (1, 0, 1, 1710000004000, 'sequenceConflict', 1, 40, 1);
            """, "Writing the v1 fixture")
        for (index, reading) in Self.readings.enumerated() {
            let meterRow: Int64 = reading.meter == testMeter ? 1 : 2
            _ = try ReadingRows.insert(
                reading, meterRowID: meterRow, epoch: meterRow == 1 ? 1 : 0,
                storedAt: Instant(epochMillis: 1_710_000_004_000 + Int64(index)), sessionID: meterRow, db)
        }
    }
}

@Suite struct PeopleMigrationTests {
    /// A file of every earlier schema version (1, 2, 3, 4), with v3's meter-level person set where the
    /// version has it, opened by this build: at the latest version, every earlier row as it was
    /// (same columns, same values), every reading readable, the meter-level person become an
    /// assignment from the meter's first reading, the feed starting with each reading at its own id,
    /// and v4's database identity kept (an earlier file gets one).
    @Test(arguments: [Int64(1), 2, 3, 4])
    func earlierDatabaseUpgradesWithNothingLost(version: Int64) async throws {
        let dir = try TempDirectory()
        do {
            let db = try Connection(path: dir.database)
            try Schema.migrate(db, to: version)
            try V1Fixture.write(db)
            if version >= 3 { try db.execute("UPDATE meter SET person = 'Mia' WHERE id = 1", "v3 person") }
            db.close()
        }
        let before = try Self.dump(dir.database)
        let columns = try Self.columns(dir.database)
        let identityBefore: String?
        do {
            let db = try Connection(path: dir.database)
            identityBefore = try Schema.identity(db)
            db.close()
        }
        #expect((identityBefore != nil) == (version >= 4))
        let store = try openStore(dir.database)
        let identityAfter = await store.identity()
        #expect(identityAfter != nil)
        if version >= 4 { #expect(identityAfter == identityBefore, "a migration keeps the database's identity") }
        #expect(try await store.textForTesting("PRAGMA user_version") == ["\(Schema.latestVersion)"])
        #expect(try await store.integrityCheck() == ["ok"])
        #expect(try await store.textForTesting("PRAGMA foreign_key_check").isEmpty)

        // Every earlier table holds the same rows in its earlier columns; v3's meter.person is
        // cleared because meter_assignment now holds it.
        let after = try Self.dump(dir.database, columns: columns)
        for table in ["sync_session", "reading", "sequence_reset"] { #expect(after[table] == before[table], "\(table)") }
        if version >= 3 {
            #expect(after["meter"] == before["meter"]?.map { $0.replacingOccurrences(of: "'Mia'", with: "NULL") })
        } else {
            #expect(after["meter"] == before["meter"])
        }

        let readings = try await store.readings(ReadingQuery())
        #expect(readings.map(\.reading) == V1Fixture.readings.sorted { $0.instant < $1.instant || $0.instant == $1.instant && $0.meter < $1.meter })
        let mine = try await store.readings(ReadingQuery(meter: testMeter))
        #expect(mine.allSatisfy { $0.person == (version >= 3 ? "Mia" : nil) })
        #expect(try await store.readings(ReadingQuery(meter: otherMeter)).allSatisfy { $0.person == nil })
        #expect(try await store.meter(testMeter)?.epoch == 1)
        #expect(try await store.meter(testMeter)?.highWater == 3)
        #expect(try await store.meter(otherMeter) == nil, "still forgotten")
        #expect(try await store.sessions(meter: nil, limit: 10).count == 2)
        #expect(try await store.events(meter: testMeter, limit: 10).map(\.reason) == [.sequenceConflict])

        if version >= 3 {
            // The assignment starts at the meter's first reading (here earlier than its first sighting).
            let history = try await store.assignments(testMeter)
            let first = mine.map(\.reading.instant).min()!
            #expect(history == [MeterAssignment(meter: testMeter, holder: .person("Mia"), from: first, until: nil, readingCount: 3)])
            #expect(try await store.people(includeCounts: true).map(\.name) == ["Mia"])
            #expect(try await store.people() == [testMeter: "Mia"])
        }

        // The feed: each stored reading once, at a position equal to its id (old cursors keep their meaning).
        let feed = try await store.readings(afterCursor: 0, limit: 100)
        #expect(feed.map(\.cursor) == feed.map(\.id))
        #expect(feed.count == V1Fixture.readings.count)

        // New readings on the upgraded file get the person of their time, and come after in the feed.
        try await store.assign(testMeter, person: "Jonas")
        let committed = try await store.commit(makeBatch([makeReading(4)], newHighWater: 4))
        // makeReading(4) was measured in March 2024, before the store's clock (July 2024): Mia's period (v3) or none.
        #expect(committed.inserted.map(\.person) == [version >= 3 ? "Mia" : nil])
        #expect(try await store.readings(afterCursor: feed.last!.cursor, limit: 10).map(\.reading.sequenceNumber) == [4])

        await store.close()
        let reopened = try openStore(dir.database)
        #expect(try await reopened.people() == [testMeter: "Jonas"])
        await #expect(throws: StoreError.self) { try await reopened.assign(MeterID("00:00:00:00:00:01"), person: "Mia") }
        await #expect(throws: StoreError.self) { try await reopened.assign(testMeter, person: "") }
        await #expect(throws: StoreError.self) {
            try await reopened.assign(testMeter, person: String(repeating: "x", count: 65))
        }
    }

    /// The columns each table had before the upgrade.
    static func columns(_ path: String) throws -> [String: [String]] {
        let db = try Connection(path: path)
        defer { db.close() }
        var out: [String: [String]] = [:]
        for table in ["meter", "sync_session", "reading", "sequence_reset"] {
            out[table] = try db.textColumn("SELECT name FROM pragma_table_info('\(table)') ORDER BY cid", "columns")
        }
        return out
    }

    /// Every row of every table, `|`-separated, in rowid order (only `columns` when given).
    static func dump(_ path: String, columns: [String: [String]]? = nil) throws -> [String: [String]] {
        let db = try Connection(path: path)
        defer { db.close() }
        var out: [String: [String]] = [:]
        for table in ["meter", "sync_session", "reading", "sequence_reset"] {
            let names =
                try columns?[table] ?? db.textColumn("SELECT name FROM pragma_table_info('\(table)') ORDER BY cid", "columns")
            let expression = names.map { "coalesce(quote(\($0)), '')" }.joined(separator: " || '|' || ")
            out[table] = try db.textColumn("SELECT \(expression) FROM \(table) ORDER BY rowid", "dump \(table)")
        }
        return out
    }
}
