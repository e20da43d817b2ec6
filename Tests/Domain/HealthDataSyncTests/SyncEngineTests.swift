import GlucoseProfile
import HealthDataSync
import Testing

/// The fixture meters: each one's behaviour as maintained implementations and the Accu-Chek
/// capture describe it (glucose-profile.md §8).
enum FixtureMeter: String, CaseIterable, Sendable, CustomStringConvertible {
    case accuChekGuide, contourNextOne, careSens, foraFull, taiDoc

    var description: String { self.rawValue }

    var script: MeterScript {
        var s = MeterScript()
        switch self {
        case .accuChekGuide:
            s.id = MeterID("60:77:71:00:00:01")
            s.manufacturer = "Roche"
            s.model = "Accu-Chek Guide"
            s.clockUUID = .dateTime
            s.clockBytes = dateTimeBytes(LocalDateTime(year: 2024, month: 6, day: 15, hour: 11, minute: 0, second: 30))
            // Sequence numbers start at 4; a +60 min offset on every record, a LO and a control test.
            s.records = [
                ScriptedRecord(measurement: measurementBytes(seq: 4, 2024, 6, 14, 7, 10, offset: 60, sfloat: 0xB058, contextFollows: true), context: contextBytes(seq: 4, meal: 1)),
                ScriptedRecord(measurement: measurementBytes(seq: 5, 2024, 6, 14, 11, 0, offset: 60, sfloat: 0x0802, status: 0x0040)),
                ScriptedRecord(measurement: measurementBytes(seq: 6, 2024, 6, 14, 12, 0, offset: 60, sfloat: mgdl(105), location: 4)),
                ScriptedRecord(measurement: measurementBytes(seq: 7, 2024, 6, 15, 6, 45, offset: 60, sfloat: mgdl(131))),
            ]
        case .contourNextOne:
            s.id = MeterID("C0:26:DA:00:00:02")
            s.manufacturer = "Ascensia Diabetes Care"
            s.model = "Contour Next One"
            s.requiresBond = true
            s.clockBytes = currentTimeBytes(LocalDateTime(year: 2024, month: 6, day: 15, hour: 10, minute: 3))
            s.records = (1...5).map { ScriptedRecord(measurement: measurementBytes(seq: UInt16($0), 2024, 6, 10 + $0, 8, sfloat: mgdl(90 + $0))) }
        case .careSens:
            s.id = MeterID("00:09:1F:00:00:03")
            s.manufacturer = "i-SENS"
            s.model = "CareSens N Premier"
            s.clockUUID = nil
            s.records = [
                ScriptedRecord(measurement: measurementBytes(seq: 10, 2023, 12, 31, 23, 50, sfloat: mgdl(99))),
                ScriptedRecord(measurement: measurementBytes(seq: 11, 2023, 13, 1, 0, 20, sfloat: mgdl(101))),
                ScriptedRecord(measurement: measurementBytes(seq: 12, 2024, 1, 2, 8, 0, sfloat: mgdl(14), contextFollows: true), context: contextBytes(seq: 12, meal: 6)),
            ]
        case .foraFull:
            s.id = MeterID("00:1C:97:00:00:04")
            s.manufacturer = "Manufacturer name"
            s.model = "Model Number"
            s.name = "FORA TNG VOICE"
            s.hasContext = false
            s.clockUUID = nil
            s.supportsFilter = false
            var records = (0..<450).map { i in
                ScriptedRecord(measurement: measurementBytes(seq: UInt16(i + 1), 2023, 1 + (i / 28) % 12, 1 + i % 28, 8 + i % 12, sfloat: mgdl(80 + i % 100)))
            }
            records.append(ScriptedRecord(measurement: measurementBytes(seq: 451, 2037, 1, 1, sfloat: 0x07FE, status: 0x0020)))
            s.records = records
        case .taiDoc:
            s.id = MeterID("00:12:A1:00:00:05")
            s.manufacturer = "TaiDoc"
            s.model = "DM30b"
            s.hasContext = false
            s.clockUUID = nil
            s.records = [3, 2, 1].enumerated().map { i, day in
                ScriptedRecord(measurement: measurementBytes(seq: UInt16(i), 2024, 6, day, 9, sfloat: mgdl(100 + day)))
            }
        }
        return s
    }

    /// Readings a first sync stores.
    var expectedStored: Int {
        switch self {
        case .accuChekGuide: 4
        case .contourNextOne: 5
        case .careSens: 3
        case .foraFull: 451
        case .taiDoc: 3
        }
    }
}

/// Timeouts generous enough for a loaded CI machine; tests that need a timeout to fire use ``shortTimeouts``.
let fastConfiguration = SyncConfiguration(connectTimeout: 5, pairingTimeout: 5, operationTimeout: 5, racpTimeout: 3, retryDelay: 0.05)
let shortTimeouts = SyncConfiguration(connectTimeout: 5, pairingTimeout: 5, operationTimeout: 5, racpTimeout: 0.3, retryDelay: 0.05)

/// Runs an engine over the doubles for the body's duration.
func withEngine(
    _ scripts: [MeterScript], store: MemoryStore = MemoryStore(), clock: TestClock = TestClock(), cooldown: Double = 30,
    automatic: Bool = false, configuration: SyncConfiguration = fastConfiguration,
    monotonic: any SyncClock = ContinuousSyncClock(), maxConnections: Int? = nil,
    _ body: (SyncEngine, ScriptedTransport, MemoryStore, EventLog) async throws -> Void
) async throws {
    let transport = ScriptedTransport(scripts)
    let log = EventLog()
    let engine = SyncEngine(
        transport: transport, store: store, zone: .utc, configuration: configuration, cooldownSeconds: cooldown,
        automaticSync: automatic, observer: log, now: { clock.now }, clock: monotonic, maxConnections: maxConnections)
    let runner = Task { await engine.run() }
    do {
        try await body(engine, transport, store, log)
    } catch {
        await engine.shutdown()
        await runner.value
        throw error
    }
    await engine.shutdown()
    transport.finish()
    await runner.value
}

/// Waits (up to 5 s) until the log holds `count` finished events.
func waitForFinished(_ log: EventLog, count: Int) async throws {
    for _ in 0..<500 {
        let n = log.all.filter { if case .finished = $0 { return true } else { return false } }.count
        if n >= count { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    Issue.record("timed out waiting for \(count) finished syncs")
}

@Suite struct SyncEngineTests {
    @Test(arguments: FixtureMeter.allCases)
    func everyFixtureMeterSyncsAndReRunningStoresNothingTwice(fixture: FixtureMeter) async throws {
        try await withEngine([fixture.script]) { engine, transport, store, log in
            let id = fixture.script.id
            // The advertised name matters to the quirk table when DIS strings are placeholders (Fora).
            transport.emit(.meterAppeared(MeterAdvertisement(id: id, name: fixture.script.name)))
            for _ in 0..<200 where !log.all.contains(where: { if case .meterAppeared = $0 { return true } else { return false } }) {
                try await Task.sleep(for: .milliseconds(2))
            }
            let first = try await engine.sync(meter: id, force: true)
            #expect(first.result == .success, "\(first.error ?? "")")
            #expect(first.stored == fixture.expectedStored)
            #expect(try await store.readingCount(meter: id) == fixture.expectedStored)
            let second = try await engine.sync(meter: id, force: true)
            #expect(second.result == .success || second.result == .noNewRecords)
            #expect(second.stored == 0)
            #expect(try await store.readingCount(meter: id) == fixture.expectedStored)
            let readings = try await store.readings(ReadingQuery(meter: id)).map(\.reading)
            switch fixture {
            case .accuChekGuide:
                #expect(transport.log.contains("read 2a08"))
                #expect(readings.map(\.sequenceNumber) == [4, 5, 6, 7])
                #expect(readings[0].meal == 1)
                #expect(readings[1].flags.contains(.lo) && readings[1].mgdL == nil)
                #expect(readings[2].flags.contains(.controlSolution))
                // Meter clock 11:00:30 at host 10:00:00Z in UTC: skew 3630 s; +60 min offset applied.
                #expect(readings[0].time.meterClockSkewSeconds == 3630)
                #expect(readings[0].instant == Instant(epochSeconds: utc(2024, 6, 14, 8, 10) - 3630))
                // The second sync first checks #7 is unchanged, then asks for the records after it.
                #expect(transport.racpWrites.suffix(3) == ["write 01 04 01 07 00 07 00", "write 04 03 01 08 00", "write 01 03 01 08 00"])
            case .contourNextOne:
                #expect(transport.log.contains("pair"))
                #expect(readings.allSatisfy { $0.time.meterClockSkewSeconds == 180 })
            case .careSens:
                #expect(readings[1].time.meterLocalTime.isoString == "2024-01-01T00:20:00")
                #expect(readings[2].flags.contains(.ketone) && readings[2].ketoneMmolL == 1.4)
                #expect(readings.allSatisfy { $0.flags.contains(.clockUnverified) })
            case .foraFull:
                #expect(transport.racpWrites.allSatisfy { $0 == "write 04 01" || $0 == "write 01 01" })
                #expect(readings.last?.flags.contains(.suspect) == true)
                #expect(readings.filter(\.countsAsGlucose).count == 450)
            case .taiDoc:
                #expect(readings.map(\.baseTime.day) == [1, 2, 3])
                #expect(readings.map(\.sequenceNumber) == [0, 1, 2])
                // A new test renumbers the meter's records; only the new one is stored.
                transport.update(id) { s in
                    s.records = [4, 3, 2, 1].enumerated().map { i, day in
                        ScriptedRecord(measurement: measurementBytes(seq: UInt16(i), 2024, 6, day, 9, sfloat: mgdl(100 + day)))
                    }
                }
                let queries = await store.readingQueries
                let third = try await engine.sync(meter: id, force: true)
                #expect(third.result == .success && third.stored == 1)
                #expect(await store.readingQueries == queries, "the renumbering looks up only the received records")
                let after = try await store.readings(ReadingQuery(meter: id)).map(\.reading)
                #expect(after.map(\.baseTime.day) == [1, 2, 3, 4])
                #expect(after.map(\.sequenceNumber) == [0, 1, 2, 3])
            }
        }
    }

    @Test func aDeltaSyncAsksFromTheHighWaterMark() async throws {
        var script = FixtureMeter.contourNextOne.script
        script.requiresBond = false
        try await withEngine([script]) { engine, transport, store, _ in
            _ = try await engine.sync(meter: script.id, force: true)
            #expect(try await store.meter(script.id)?.highWater == 5)
            transport.update(script.id) { $0.records.append(ScriptedRecord(measurement: measurementBytes(seq: 6, 2024, 6, 15, 9, sfloat: mgdl(140)))) }
            let second = try await engine.sync(meter: script.id, force: true)
            #expect(second.stored == 1 && second.received == 1 && second.expected == 1)
            // #5 itself, compared with the stored one (no reset), then the records after it.
            #expect(transport.racpWrites.suffix(3) == ["write 01 04 01 05 00 05 00", "write 04 03 01 06 00", "write 01 03 01 06 00"])
            #expect(try await store.meter(script.id)?.highWater == 6)
        }
    }

    @Test func cooldownDefersAutomaticSyncsToItsEndButNotForcedOnesOnTheMonotonicClock() async throws {
        let clock = TestClock()
        let monotonic = ManualSyncClock()
        let script = FixtureMeter.taiDoc.script
        try await withEngine([script], clock: clock, automatic: true, monotonic: monotonic) { engine, transport, _, log in
            transport.emit(.meterAppeared(MeterAdvertisement(id: script.id, name: "DM30")))
            try await waitForFinished(log, count: 1)
            // Inside the cooldown: deferred to its end (scheduled, not dropped), nothing connects now.
            monotonic.advance(by: .seconds(10))
            transport.emit(.meterAppeared(MeterAdvertisement(id: script.id, name: "DM30")))
            try await eventually("the trigger is deferred") { await engine.scheduledAttempt(script.id) != nil }
            #expect(await engine.scheduledAttempt(script.id) == monotonic.now + .seconds(20))
            #expect(log.all.contains(where: { if case .skipped(_, let f) = $0 { return f.code == .cooldown } else { return false } }))
            #expect(log.all.contains(where: { if case .deferred = $0 { return true } else { return false } }))
            await #expect(throws: SyncFailure.self) { try await engine.sync(meter: script.id, force: false) }
            #expect(transport.log.filter { $0 == "connect" }.count == 1)
            // A forced sync runs at once (and replaces the deferred one).
            let forced = try await engine.sync(meter: script.id, force: true)
            #expect(forced.result == .success)
            #expect(await engine.scheduledAttempt(script.id) == nil)
            // The wall clock steps back an hour: the cooldown runs on the monotonic clock regardless.
            clock.advance(seconds: -3600)
            transport.emit(.meterAppeared(MeterAdvertisement(id: script.id, name: "DM30")))
            try await eventually("deferred again") { await engine.scheduledAttempt(script.id) != nil }
            monotonic.advance(by: .seconds(31))
            try await waitForFinished(log, count: 3)
            #expect(transport.log.filter { $0 == "connect" }.count == 3)
        }
    }

    @Test func twoSyncsOfOneMeterNeverRunAtOnce() async throws {
        var script = FixtureMeter.contourNextOne.script
        script.requiresBond = false
        script.stallAfter = 2  // the first sync hangs until its timeouts run out
        let id = script.id
        try await withEngine([script], configuration: shortTimeouts) { engine, _, _, _ in
            async let first = engine.sync(meter: id, force: true)
            for _ in 0..<200 where await !engine.isSyncing(script.id) { try await Task.sleep(for: .milliseconds(2)) }
            do {
                _ = try await engine.sync(meter: script.id, force: true)
                Issue.record("a second sync started")
            } catch let error as SyncFailure {
                #expect(error.code == .syncInProgress)
            }
            let record = try await first
            #expect(record.result == .failed)  // timed out twice
        }
    }

    @Test func manyMetersSyncIndependently() async throws {
        let fixtures: [FixtureMeter] = [.accuChekGuide, .careSens, .taiDoc]
        try await withEngine(fixtures.map(\.script)) { engine, _, store, _ in
            async let a = engine.sync(meter: fixtures[0].script.id, force: false)
            async let b = engine.sync(meter: fixtures[1].script.id, force: false)
            async let c = engine.sync(meter: fixtures[2].script.id, force: false)
            let results = try await [a, b, c]
            #expect(results.map(\.result) == [.success, .success, .success])
            #expect(try await store.readingCount(meter: nil) == fixtures.map(\.expectedStored).reduce(0, +))
        }
    }

    @Test func shutdownAbortsTheRACPProcedureCommitsWhatArrivedAndDisconnects() async throws {
        var script = FixtureMeter.contourNextOne.script
        script.requiresBond = false
        script.stallAfter = 3
        let slow = SyncConfiguration(connectTimeout: 5, pairingTimeout: 5, operationTimeout: 5, racpTimeout: 30, retryDelay: 1)
        let store = MemoryStore()
        let transport = ScriptedTransport([script])
        let log = EventLog()
        let engine = SyncEngine(transport: transport, store: store, zone: .utc, configuration: slow, observer: log, now: { Instant(epochSeconds: 1_718_445_600) })
        let runner = Task { await engine.run() }
        let id = script.id
        let syncing = Task { try await engine.sync(meter: id, force: true) }
        for _ in 0..<500 where try await store.readingCount(meter: nil) == 0 {
            if log.all.contains(where: { if case .progress(_, 3, _) = $0 { return true } else { return false } }) { break }
            try await Task.sleep(for: .milliseconds(5))
        }
        await engine.shutdown()
        await engine.shutdown()  // safe twice
        await runner.value
        let record = try await syncing.value
        #expect(record.result == .aborted)
        #expect(transport.racpWrites.last == "write 03 00")
        #expect(transport.log.last == "disconnect")
        #expect(try await store.readingCount(meter: script.id) == 3)
        // The three records that arrived are contiguous: the next attempt asks for what follows.
        #expect(try await store.meter(script.id)?.highWater == 3)
        await #expect(throws: SyncFailure.self) { try await engine.sync(meter: script.id, force: true) }
    }

    @Test func aMeterThatDropsTheLinkKeepsWhatArrivedAndTheRetryCompletesIt() async throws {
        var script = FixtureMeter.contourNextOne.script
        script.requiresBond = false
        script.disconnectAfter = 2
        try await withEngine([script]) { engine, transport, store, log in
            let first = try await engine.sync(meter: script.id, force: true)
            #expect(first.result == .interrupted)
            #expect(try await store.readingCount(meter: script.id) == 2)
            #expect(try await store.meter(script.id)?.highWater == 2)
            #expect(log.all.contains(where: { if case .failed(_, let f) = $0 { return f.code == .meterDisconnected } else { return false } }))
            transport.update(script.id) { $0.disconnectAfter = nil }
            let second = try await engine.sync(meter: script.id, force: true)
            // Only the records after the contiguous mark are asked for.
            #expect(second.result == .success && second.stored == 3 && second.duplicates == 0 && second.received == 3)
            #expect(transport.racpWrites.contains("write 01 03 01 03 00"))
            #expect(try await store.readingCount(meter: script.id) == 5)
        }
    }

    @Test func aSilentMeterTimesOutAndTheOneRetrySucceeds() async throws {
        var script = FixtureMeter.careSens.script
        script.ignoreRACPWrites = 1
        try await withEngine([script], configuration: shortTimeouts) { engine, transport, _, log in
            let record = try await engine.sync(meter: script.id, force: true)
            #expect(record.result == .success)
            #expect(transport.racpWrites.prefix(3) == ["write 04 01", "write 03 00", "write 04 01"])
            #expect(log.phases.contains("waitingToRetry"))
        }
    }

    @Test func procedureAlreadyInProgressAbortsAndRetries() async throws {
        var script = FixtureMeter.careSens.script
        script.racpWriteErrors = [0xFE]
        try await withEngine([script]) { engine, transport, _, _ in
            let record = try await engine.sync(meter: script.id, force: true)
            #expect(record.result == .success)
            #expect(transport.racpWrites.prefix(3) == ["write 04 01", "write 03 00", "write 04 01"])
        }
    }

    @Test func storeFailureIsReportedAndTheMeterIsReleased() async throws {
        let script = FixtureMeter.taiDoc.script
        let store = MemoryStore()
        await store.setFailNextCommit(StoreError(.diskFull, "The disk is full."))
        try await withEngine([script], store: store) { engine, transport, _, _ in
            let record = try await engine.sync(meter: script.id, force: true)
            #expect(record.result == .failed)
            #expect(record.error?.contains("disk is full") == true)
            #expect(transport.log.last == "disconnect")
            #expect(await !engine.isSyncing(script.id))
        }
    }

    @Test func observersHearPhasesProgressAndTheCommit() async throws {
        let script = FixtureMeter.accuChekGuide.script
        try await withEngine([script]) { engine, _, _, log in
            _ = try await engine.sync(meter: script.id, force: true)
            #expect(log.phases == ["connecting", "readingDeviceInfo", "readingClock", "subscribing", "counting", "receiving", "committing", "disconnecting", "done"])
            #expect(log.all.contains(.progress(script.id, received: 4, expected: 4)))
            #expect(log.all.contains(where: { if case .committed(_, let r) = $0 { return r.inserted.count == 4 } else { return false } }))
            #expect(log.all.contains(where: { if case .identified(let i) = $0 { return i.model == "Accu-Chek Guide" } else { return false } }))
        }
    }

    @Test func passkeyRequestsReachObserversAndAbortStopsOneMeter() async throws {
        var script = FixtureMeter.contourNextOne.script
        script.requiresBond = false
        script.stallAfter = 1
        let id = script.id
        try await withEngine([script]) { engine, transport, store, log in
            transport.emit(.passkeyRequested(id))
            for _ in 0..<200 where !log.all.contains(.passkeyRequested(id)) { try await Task.sleep(for: .milliseconds(2)) }
            #expect(log.all.contains(.passkeyRequested(id)))
            try await engine.submitPasskey(123_456, for: id)
            async let syncing = engine.sync(meter: id, force: true)
            for _ in 0..<500 where !log.all.contains(.progress(id, received: 1, expected: 5)) { try await Task.sleep(for: .milliseconds(2)) }
            await engine.abort(meter: id, reason: "meter forgotten")
            let record = try await syncing
            #expect(record.result == .aborted)
            #expect(transport.racpWrites.last == "write 03 00")
            #expect(try await store.readingCount(meter: id) == 1)
        }
    }

    @Test func aPerMeterZoneOverridesTheHostZone() async throws {
        let script = FixtureMeter.careSens.script
        let newYork = try systemZone("America/New_York")
        try await withEngine([script]) { engine, _, store, _ in
            await engine.setZone(newYork, for: script.id)
            _ = try await engine.sync(meter: script.id, force: true)
            let first = try #require(try await store.readings(ReadingQuery(meter: script.id)).first?.reading)
            // 2023-12-31 23:50 in New York (EST) is 2024-01-01 04:50Z.
            #expect(first.time.zone == "America/New_York" && first.time.utcOffsetSeconds == -18_000)
            #expect(first.instant == Instant(epochSeconds: utc(2024, 1, 1, 4, 50)))
        }
    }
}
