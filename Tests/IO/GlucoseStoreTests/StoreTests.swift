import Foundation
import HealthDataSync
import Testing

@testable import GlucoseStore

@Suite struct StoreTests {
    @Test func connectionPragmasAreSet() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database, busyMilliseconds: 1234)
        #expect(try await store.textForTesting("PRAGMA journal_mode") == ["wal"])
        #expect(try await store.textForTesting("PRAGMA synchronous") == ["2"])  // FULL
        #expect(try await store.textForTesting("PRAGMA foreign_keys") == ["1"])
        #expect(try await store.textForTesting("PRAGMA busy_timeout") == ["1234"])
        #expect(try await store.textForTesting("PRAGMA user_version") == [String(SQLiteReadingStore.schemaVersion)])
        #expect(await store.health().status == .ok)
        #expect(try await store.integrityCheck() == ["ok"])
    }

    @Test func foreignKeysAreEnforced() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        await #expect(throws: StoreError.self) {
            try await store.executeForTesting(
                "INSERT INTO sync_session (meter_id, started_ms, result, received, stored, duplicates, sequence_resets, epoch, committed_ms) VALUES (999, 0, 'success', 0, 0, 0, 0, 0, 0)"
            )
        }
    }

    @Test func everyFieldRoundTrips() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        var ketone = makeReading(7, context: [0x02, 0x07, 0x00, 0x06], flags: [.ketone, .quirkApplied, .timeFault])
        ketone.mgdL = nil
        ketone.mmolL = nil
        ketone.ketoneMmolL = 1.3
        ketone.meal = 6
        ketone.sensorStatus = 0x0800
        ketone.time.quirks = ["isens.month13", "roche.offset"]
        ketone.time.meterClockSkewSeconds = nil
        ketone.time.method = .untrusted
        ketone.baseTime = LocalDateTime(year: 2019, month: 13, day: 5, hour: 10)  // buggy firmware, kept as sent
        var noValue = makeReading(8, flags: [.noValue, .hi])
        noValue.concentrationRaw = nil
        noValue.unit = nil
        noValue.timeOffsetMinutes = nil
        noValue.sampleType = nil
        noValue.sampleLocation = nil
        noValue.mgdL = nil
        noValue.mmolL = nil
        noValue.measurementBytes = []
        let result = try await store.commit(makeBatch([ketone, noValue], newHighWater: 8))
        #expect(result.inserted.count == 2)
        let stored = try await store.readings(ReadingQuery(meter: testMeter))
        #expect(Set(stored.map(\.reading)) == [ketone, noValue])
        #expect(stored.allSatisfy { $0.storedAt == Instant(epochSeconds: 1_720_000_000) && $0.epoch == 0 })
        #expect(try await store.textForTesting("SELECT flag_names FROM reading WHERE seq = 7") == ["timeFault,ketone,quirkApplied"])
        #expect(try await store.textForTesting("SELECT base_time FROM reading WHERE seq = 7") == ["2019-13-05T10:00:00"])
    }

    @Test func rawFactsCannotBeChanged() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...2))
        let error = await #expect(throws: StoreError.self) {
            try await store.executeForTesting("UPDATE reading SET concentration_raw = 1 WHERE seq = 1")
        }
        #expect(error?.code == .constraint)
        // Conclusions may be recomputed.
        try await store.executeForTesting("UPDATE reading SET time_zone = 'UTC' WHERE seq = 1")
    }

    @Test func queriesFilterByRangeMeterLimitAndOrder() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        _ = try await store.commit(syncOf(1...10))
        _ = try await store.commit(syncOf(1...4, meter: identity(otherMeter, serial: "X")))
        let first = makeReading(1).instant
        let hour: Int64 = 3_600_000

        let all = try await store.readings(ReadingQuery())
        #expect(all.count == 14)
        #expect(all.map(\.reading.instant) == all.map(\.reading.instant).sorted())

        let newest = try await store.readings(ReadingQuery(meter: testMeter, limit: 3, order: .descending))
        #expect(newest.map(\.reading.sequenceNumber) == [10, 9, 8])

        // since is inclusive, until exclusive.
        let window = try await store.readings(
            ReadingQuery(
                since: Instant(epochMillis: first.epochMillis + 2 * hour),
                until: Instant(epochMillis: first.epochMillis + 5 * hour), meter: testMeter))
        #expect(window.map(\.reading.sequenceNumber) == [3, 4, 5])

        let both = try await store.readings(
            ReadingQuery(since: Instant(epochMillis: first.epochMillis + 3 * hour), until: nil, limit: 100))
        #expect(both.count == 7 + 1)
        #expect(try await store.readings(ReadingQuery(meter: MeterID("AA:AA:AA:AA:AA:AA"))).isEmpty)
        #expect(try await store.readings(ReadingQuery(limit: 0)).isEmpty)

        #expect(try await store.readingCount(meter: nil) == 14)
        #expect(try await store.readingCount(meter: otherMeter) == 4)
        #expect(try await store.readingCount(meter: MeterID("AA:AA:AA:AA:AA:AA")) == 0)
    }

    @Test func queriesUseTheIndexes() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        func plan(_ sql: String) async throws -> String {
            try await store.textForTesting("EXPLAIN QUERY PLAN " + sql, column: 3).joined(separator: " | ")
        }
        let byMeter = try await plan(
            "SELECT * FROM reading WHERE meter_id = 1 AND instant_ms >= 0 AND instant_ms < 9 ORDER BY instant_ms DESC LIMIT 5")
        #expect(byMeter.contains("reading_by_meter_instant"), "\(byMeter)")
        let byTime = try await plan("SELECT * FROM reading WHERE instant_ms >= 0 ORDER BY instant_ms LIMIT 5")
        #expect(byTime.contains("reading_by_instant"), "\(byTime)")
        let dedup = try await plan("SELECT epoch FROM reading WHERE meter_id = 1 AND seq = 2")
        #expect(dedup.contains("reading_by_seq"), "\(dedup)")
        let sessions = try await plan("SELECT * FROM sync_session WHERE meter_id = 1 ORDER BY started_ms DESC LIMIT 3")
        #expect(sessions.contains("sync_session_by_meter"), "\(sessions)")
    }

    @Test func sessionsAreRecordedNewestFirstWithTheStoresCounts() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        let t0 = Instant(epochSeconds: 1_710_000_000)
        let t1 = Instant(epochSeconds: 1_710_003_600)
        let t2 = Instant(epochSeconds: 1_710_007_200)
        _ = try await store.commit(syncOf(1...3, started: t0))
        _ = try await store.commit(makeBatch([makeReading(3), makeReading(4)], newHighWater: 4, started: t1))
        _ = try await store.commit(
            makeBatch([], meter: identity(otherMeter, serial: "X"), newHighWater: nil, result: .failed, started: t2,
                error: "ATT error 0x81."))

        let all = try await store.sessions(meter: nil, limit: 10)
        #expect(all.map(\.started) == [t2, t1, t0])
        #expect(all.map(\.result) == [.failed, .success, .success])
        #expect(all[1].stored == 1 && all[1].duplicates == 1 && all[1].received == 2 && all[1].expected == 2)
        #expect(all[0].error == "ATT error 0x81.")
        #expect(all.allSatisfy { $0.id != nil })
        #expect(try await store.sessions(meter: testMeter, limit: 1).map(\.started) == [t1])
        #expect(try await store.sessions(meter: nil, limit: 0).isEmpty)

        let meter = try #require(try await store.meter(testMeter))
        #expect(meter.lastSync == Instant(epochMillis: t1.epochMillis + 4000))
        #expect(meter.lastSyncResult == .success)
        #expect(meter.readingCount == 4)
    }

    @Test func metersKeepIdentityFeaturesAndSeenTimes() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        let seen = Instant(epochSeconds: 1_700_000_000)
        try await store.noteMeterSeen(MeterIdentity(id: testMeter, name: "meter"), at: seen)
        var meter = try #require(try await store.meter(testMeter))
        #expect(meter.firstSeen == seen && meter.lastSeen == seen)
        #expect(meter.highWater == nil && meter.epoch == 0 && meter.readingCount == 0 && meter.features == nil)

        _ = try await store.commit(syncOf(1...2))
        meter = try #require(try await store.meter(testMeter))
        #expect(meter.identity == identity())
        #expect(meter.features == 0x0402)
        #expect(meter.firstSeen == seen)
        #expect(meter.lastSeen > seen)

        // An older sighting does not move last_seen back.
        try await store.noteMeterSeen(MeterIdentity(id: testMeter), at: Instant(epochSeconds: 1))
        #expect(try await store.meter(testMeter)?.lastSeen == meter.lastSeen)
        #expect(try await store.meter(MeterID("AA:AA:AA:AA:AA:AA")) == nil)
    }

    @Test func summariesCountWhatCountsAsGlucose() async throws {
        let dir = try TempDirectory()
        let store = try openStore(dir.database)
        var ketone = makeReading(3, flags: [.ketone])
        ketone.mgdL = nil
        let readings = [makeReading(1), makeReading(2, flags: [.controlSolution]), ketone, makeReading(4, flags: [.lo])]
        _ = try await store.commit(makeBatch(readings, newHighWater: 4))
        let summary = try #require(try await store.summaries().first)
        #expect(summary.meter.readingCount == 4)
        #expect(summary.glucoseReadings == 2)
        #expect(summary.controlSolutionReadings == 1)
        #expect(summary.ketoneReadings == 1)
        #expect(summary.firstReading == makeReading(1).instant)
        #expect(summary.lastReading == makeReading(4).instant)
        #expect(summary.sessions == 1 && summary.failedSessions == 0 && summary.sequenceResets == 0)
        #expect(summary.forgotten == false)
    }

    @Test func dataSurvivesReopening() async throws {
        let dir = try TempDirectory()
        do {
            let store = try openStore(dir.database)
            _ = try await store.commit(syncOf(1...5))
            await store.close()
            await #expect(throws: StoreError.self) { try await store.readingCount(meter: nil) }
        }
        let store = try openStore(dir.database)
        #expect(try await store.readingCount(meter: nil) == 5)
        #expect(try await store.meter(testMeter)?.highWater == 5)
    }

    @Test func unopenablePathGivesACannotOpenError() async throws {
        let dir = try TempDirectory()
        let error = #expect(throws: StoreError.self) {
            _ = try SQLiteReadingStore(path: dir.path + "/missing/dir/db.sqlite")
        }
        #expect(error?.code == .cannotOpen)
        #expect(error?.message.contains("missing/dir") == true)
    }
}

@Suite struct MigrationTests {
    /// Writes representative rows into a database at the given (old) schema version. Every schema
    /// version before the latest needs an entry, so adding v3 forced a v2 fixture.
    static let fixtureWriters: [Int64: @Sendable (Connection) throws(StoreError) -> Void] = [
        0: { _ in },  // an empty, new file
        1: { (db) throws(StoreError) in try V1Fixture.write(db) },  // what the first release stored
        // Version 2 (the base-time index the TaiDoc lookup uses) holding readings; version 3 adds people.
        2: { (db) throws(StoreError) in try V1Fixture.write(db) },  // v2 only added an index: the same rows
        // Version 3 (a meter-level person): v5 turns it into an assignment period.
        3: { (db) throws(StoreError) in
            try V1Fixture.write(db)
            try db.execute("UPDATE meter SET person = 'Mia' WHERE id = 1", "v3 person")
        },
        // Version 4 (the database identity, made by the step) with v3's meter-level person.
        4: { (db) throws(StoreError) in
            try V1Fixture.write(db)
            try db.execute("UPDATE meter SET person = 'Mia' WHERE id = 1", "v3 person")
        },
        // Version 5 (people, assignments, the feed): v6 adds the meter procedure and clock columns.
        5: { (db) throws(StoreError) in try V1Fixture.write(db) },
    ]

    static func schema(_ path: String) throws -> [String] {
        let db = try Connection(path: path)
        return try db.textColumn(
            "SELECT type || ' ' || name || ': ' || coalesce(sql, '') FROM sqlite_master ORDER BY type, name", "schema")
    }

    @Test func everyEarlierVersionMigratesToTheFreshSchema() async throws {
        let freshDir = try TempDirectory()
        _ = try openStore(freshDir.database)
        let fresh = try Self.schema(freshDir.database)
        #expect(fresh.contains { $0.hasPrefix("table reading:") })

        for version in [0] + Schema.versions.dropLast() {
            let writer = try #require(Self.fixtureWriters[version], "no fixture for schema version \(version)")
            let dir = try TempDirectory()
            do {
                let db = try Connection(path: dir.database)
                try Schema.migrate(db, to: version)
                #expect(try Schema.userVersion(db) == version)
                try writer(db)
                db.close()
            }
            let store = try openStore(dir.database)
            #expect(try await store.textForTesting("PRAGMA user_version") == [String(Schema.latestVersion)])
            #expect(try Self.schema(dir.database) == fresh, "schema after migrating from version \(version)")
            // The migrated database works.
            let fresh = MeterID("C0:26:DA:0F:0F:0F")
            _ = try await store.commit(syncOf(1...3, meter: identity(fresh)))
            #expect(try await store.readingCount(meter: fresh) == 3)
        }
    }

    /// v6: meters with readings from before it were Glucose Profile meters; what can set a clock is unknown.
    @Test func v6MarksEarlierMetersAsGlucoseProfile() async throws {
        let dir = try TempDirectory()
        do {
            let db = try Connection(path: dir.database)
            try Schema.migrate(db, to: 5)
            try V1Fixture.write(db)
            try db.execute(
                "INSERT INTO meter (address, first_seen_ms, last_seen_ms, epoch) VALUES ('C0:26:DA:0D:0D:0D', 1, 1, 0)", "a meter never synced")
            db.close()
        }
        let store = try openStore(dir.database)
        #expect(try await store.meter(testMeter)?.procedure == .gls)
        #expect(try await store.meter(testMeter)?.clockSettable == nil)
        #expect(try await store.meter(MeterID("C0:26:DA:0D:0D:0D"))?.procedure == nil)
        #expect(try await store.sessions(meter: testMeter, limit: 5).allSatisfy { $0.clockSet == nil })
    }

    @Test func migratingTwiceIsHarmless() async throws {
        let dir = try TempDirectory()
        _ = try openStore(dir.database)
        let db = try Connection(path: dir.database)
        try Schema.migrate(db)
        #expect(try Schema.userVersion(db) == Schema.latestVersion)
    }

    @Test func newerSchemaIsRefusedWithAClearError() async throws {
        let dir = try TempDirectory()
        do {
            let db = try Connection(path: dir.database)
            try db.execute("PRAGMA user_version = \(Schema.latestVersion + 1)", "test")
        }
        let error = #expect(throws: StoreError.self) { _ = try SQLiteReadingStore(path: dir.database) }
        #expect(error?.code == .cannotOpen)
        #expect(error?.message.contains("newer") == true)
    }
}
