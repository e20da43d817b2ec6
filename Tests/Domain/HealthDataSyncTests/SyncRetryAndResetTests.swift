import HealthDataSync
import Testing

private func script(records: ClosedRange<UInt16>, base: Int = 90) -> MeterScript {
    var s = MeterScript()
    s.records = records.map { ScriptedRecord(measurement: measurementBytes(seq: $0, 2024, 6, 1 + Int($0 % 28), 8, sfloat: mgdl(base + Int($0)))) }
    return s
}

/// A meter that drops the link after its first record, every time.
private func droppingScript() -> MeterScript {
    var s = script(records: 1...3)
    s.disconnectAfter = 1
    return s
}

/// Moves the monotonic clock on and checks that the meter was connected only once.
private func expectNoFurtherAttempt(_ transport: ScriptedTransport, _ monotonic: ManualSyncClock, after: Duration) async throws {
    monotonic.advance(by: after)
    try await Task.sleep(for: .milliseconds(50))
    #expect(transport.log.filter { $0 == "connect" }.count == 1)
}

private func retries(_ log: EventLog) -> [Int] {
    log.all.compactMap { if case .retryScheduled(_, _, let attempt) = $0 { return attempt } else { return nil } }
}

private func finishedCount(_ log: EventLog) -> Int {
    log.all.filter { if case .finished = $0 { return true } else { return false } }.count
}

/// The engine's one policy: transient failures retried with capped backoff on the monotonic clock,
/// stopped by forget, shutdown and non-transient failures; a success resets the backoff.
@Suite struct SyncRetryTests {
    @Test func aTransientFailureIsRetriedWithCappedBackoffUntilItSucceeds() async throws {
        var s = script(records: 1...5)
        s.disconnectAfter = 0  // before any record: no attempt makes progress
        let monotonic = ManualSyncClock()
        try await withEngine([s], monotonic: monotonic) { engine, transport, store, log in
            let first = try await engine.sync(meter: s.id, force: true)
            #expect(first.result == .interrupted)
            // 2 s, 10 s, 60 s, 5 min, then 5 min again.
            for (attempt, pause) in [(1, 2), (2, 10), (3, 60), (4, 300), (5, 300)] {
                try await eventually("retry \(attempt) scheduled") { retries(log).count == attempt }
                #expect(await engine.scheduledAttempt(s.id) == monotonic.now + .seconds(pause), "retry \(attempt)")
                monotonic.advance(by: .seconds(pause) - .milliseconds(1))
                #expect(finishedCount(log) == attempt, "not before its time")
                if attempt == 5 { transport.update(s.id) { $0.disconnectAfter = nil } }
                monotonic.advance(by: .milliseconds(1))
                try await waitForFinished(log, count: attempt + 1)
            }
            // The sixth attempt got everything; nothing more is scheduled.
            try await eventually("stored") { try await store.readingCount(meter: s.id) == 5 }
            #expect(await engine.scheduledAttempt(s.id) == nil)
            #expect(transport.log.filter { $0 == "connect" }.count == 6)
            // A success resets the backoff: the next failure waits 2 s again.
            transport.update(s.id) {
                $0.disconnectAfter = 0
                $0.records.append(ScriptedRecord(measurement: measurementBytes(seq: 6, 2024, 6, 20, 8, sfloat: mgdl(120))))
            }
            #expect(try await engine.sync(meter: s.id, force: true).result == .interrupted)
            try await eventually("retry after the success") { retries(log).count == 6 }
            #expect(retries(log).last == 1)
            #expect(await engine.scheduledAttempt(s.id) == monotonic.now + .seconds(2))
        }
    }

    /// An attempt that stored new readings before the link dropped is progress: the next retry
    /// comes after 2 s again, so a link that always drops part-way does not wait minutes per step.
    @Test func anAttemptThatStoredReadingsStartsTheBackoffOver() async throws {
        var s = script(records: 1...10)
        s.disconnectAfter = 2
        let monotonic = ManualSyncClock()
        try await withEngine([s], monotonic: monotonic) { engine, _, store, log in
            #expect(try await engine.sync(meter: s.id, force: true).result == .interrupted)
            for attempt in 1...4 {
                try await eventually("retry \(attempt) scheduled") { retries(log).count == attempt }
                #expect(retries(log).last == 1, "each retry is a first retry again")
                #expect(await engine.scheduledAttempt(s.id) == monotonic.now + .seconds(2))
                monotonic.advance(by: .seconds(2))
                try await waitForFinished(log, count: attempt + 1)
            }
            // 2 records per attempt: the fifth got the last two and succeeded.
            try await eventually("stored") { try await store.readingCount(meter: s.id) == 10 }
            #expect(await engine.scheduledAttempt(s.id) == nil)
        }
        var policy = SyncPolicy()
        let m = s.id
        #expect(policy.request(m, .automatic, at: .zero) == .start)
        #expect(policy.finished(m, .interrupted, failure: .meterDisconnected, at: .zero) == .retry(at: .seconds(2), attempt: 1))
        #expect(policy.request(m, .retry, at: .seconds(2)) == .start)
        #expect(policy.finished(m, .interrupted, failure: .meterDisconnected, at: .seconds(2)) == .retry(at: .seconds(12), attempt: 2))
        #expect(policy.request(m, .retry, at: .seconds(12)) == .start)
        #expect(policy.finished(m, .interrupted, failure: .meterDisconnected, progressed: true, at: .seconds(12)) == .retry(at: .seconds(14), attempt: 1))
    }

    @Test func aFailureARetryCannotFixIsNotRetried() async throws {
        var s = script(records: 1...3)
        s.supportsReport = false
        let monotonic = ManualSyncClock()
        try await withEngine([s], monotonic: monotonic) { engine, transport, _, log in
            let session = try await engine.sync(meter: s.id, force: true)
            #expect(session.result == .failed)
            #expect(await engine.scheduledAttempt(s.id) == nil)
            try await expectNoFurtherAttempt(transport, monotonic, after: .seconds(600))
            #expect(retries(log).isEmpty)
        }
    }

    @Test func forgettingTheMeterStopsItsRetries() async throws {
        let s = droppingScript()
        let monotonic = ManualSyncClock()
        try await withEngine([s], monotonic: monotonic) { engine, transport, _, log in
            _ = try await engine.sync(meter: s.id, force: true)
            try await eventually("retry scheduled") { await engine.scheduledAttempt(s.id) != nil }
            await engine.forget(meter: s.id)
            #expect(await engine.scheduledAttempt(s.id) == nil)
            #expect(log.all.contains { if case .scheduleCleared = $0 { return true } else { return false } })
            try await eventually("the sleeper is cancelled") { monotonic.sleepers == 0 }
            try await expectNoFurtherAttempt(transport, monotonic, after: .seconds(10))
        }
    }

    @Test func shutdownCancelsScheduledRetries() async throws {
        let s = droppingScript()
        let monotonic = ManualSyncClock()
        try await withEngine([s], monotonic: monotonic) { engine, transport, _, _ in
            _ = try await engine.sync(meter: s.id, force: true)
            try await eventually("retry scheduled") { monotonic.sleepers == 1 }
            await engine.shutdown()
            #expect(monotonic.sleepers == 0)
            #expect(await engine.scheduledAttempt(s.id) == nil)
            try await expectNoFurtherAttempt(transport, monotonic, after: .seconds(10))
        }
    }

    @Test func theAdapterComingBackRetriesAtOnceButAdvertisingDoesNotShortenThePause() async throws {
        let s = droppingScript()
        let monotonic = ManualSyncClock()
        try await withEngine([s], automatic: true, monotonic: monotonic) { engine, transport, _, log in
            let powered = AdapterState(present: true, powered: true, discovering: false)
            transport.emit(.adapter(powered))
            _ = try await engine.sync(meter: s.id, force: true)
            try await eventually("retry scheduled") { await engine.scheduledAttempt(s.id) != nil }
            // The meter advertising (and the adapter merely changing its discovery) during the pause
            // starts nothing: the backoff stands.
            transport.emit(.meterAppeared(MeterAdvertisement(id: s.id, name: "meter")))
            transport.emit(.adapter(AdapterState(present: true, powered: true, discovering: true)))
            try await Task.sleep(for: .milliseconds(50))
            #expect(transport.log.filter { $0 == "connect" }.count == 1)
            // bluetoothd went away and came back: the waiting retry runs now, without the clock moving.
            transport.emit(.adapter(.absent))
            transport.update(s.id) { $0.disconnectAfter = nil }
            transport.emit(.adapter(powered))
            try await waitForFinished(log, count: 2)
            #expect(await engine.scheduledAttempt(s.id) == nil)
            #expect(transport.log.filter { $0 == "connect" }.count == 2)
            // The retry's sleeper is cancelled, not left waiting for a deadline that no longer matters
            // (it held the engine until then: a task nobody owned).
            try await eventually("the brought-forward retry's sleeper is gone") { monotonic.sleepers == 0 }
        }
    }

    @Test func transientAndPermanentFailureCodes() {
        for code in [SyncFailure.Code.timeout, .meterDisconnected, .procedureAlreadyInProgress, .transportError] {
            #expect(SyncPolicy.isTransient(code), "\(code)")
        }
        for code in [SyncFailure.Code.pairingRequired, .pairingFailed, .notAGlucoseMeter, .reportNotSupported, .aborted, .storeError] {
            #expect(!SyncPolicy.isTransient(code), "\(code)")
        }
    }

    @Test func thePolicyDefersOnlyAfterASuccessAndSeedsNoCooldownFromAClockThatWentBack() {
        var policy = SyncPolicy(cooldownSeconds: 30)
        let m = MeterID("C0:26:DA:01:02:03")
        let t0 = Duration.seconds(100)
        #expect(policy.request(m, .automatic, at: t0) == .start)
        #expect(policy.request(m, .forced, at: t0) == .alreadyRunning)
        #expect(policy.finished(m, .interrupted, failure: .meterDisconnected, at: t0) == .retry(at: t0 + .seconds(2), attempt: 1))
        // A failure starts no cooldown.
        #expect(policy.request(m, .automatic, at: t0 + .seconds(1)) == .start)
        #expect(policy.finished(m, .success, failure: nil, at: t0 + .seconds(1)) == .none)
        #expect(policy.failureCount(m) == 0)
        #expect(policy.request(m, .automatic, at: t0 + .seconds(11)) == .deferred(until: t0 + .seconds(31)))
        #expect(policy.request(m, .forced, at: t0 + .seconds(11)) == .start)
        _ = policy.finished(m, .noNewRecords, failure: nil, at: t0 + .seconds(12))
        #expect(policy.request(m, .automatic, at: t0 + .seconds(42)) == .start)
        // Seeding from a stored sync: a wall-clock age below zero (clock stepped back) seeds nothing.
        var fresh = SyncPolicy(cooldownSeconds: 30)
        fresh.noteEarlierSuccess(m, ago: .seconds(-3600), at: t0)
        #expect(fresh.request(m, .automatic, at: t0) == .start)
        var seeded = SyncPolicy(cooldownSeconds: 30)
        seeded.noteEarlierSuccess(m, ago: .seconds(10), at: t0)
        #expect(seeded.request(m, .automatic, at: t0) == .deferred(until: t0 + .seconds(20)))
    }
}

/// A meter whose memory was cleared (same address and serial, counter restarted) is downloaded
/// again in full into a new epoch.
@Suite struct SyncResetTests {
    @Test func aResetMeterWithMoreRecordsThanBeforeIsDownloadedInFullIntoANewEpoch() async throws {
        let s = script(records: 1...10)
        try await withEngine([s]) { engine, transport, store, _ in
            #expect(try await engine.sync(meter: s.id, force: true).stored == 10)
            // Reset: the counter restarts and the meter holds 1-12 with new values.
            transport.update(s.id) { $0.records = script(records: 1...12, base: 150).records }
            let session = try await engine.sync(meter: s.id, force: true)
            #expect(session.result == .success)
            #expect(session.stored == 12 && session.reset)
            let meter = try await store.meter(s.id)
            #expect(meter?.epoch == 1 && meter?.highWater == 12)
            let stored = try await store.readings(ReadingQuery(meter: s.id))
            #expect(stored.count == 22)
            #expect(stored.filter { $0.epoch == 1 }.map(\.reading.sequenceNumber) == Array(1...12))
            // #10 itself first: changed, so everything is asked for.
            #expect(transport.racpWrites.suffix(3) == ["write 01 04 01 0a 00 0a 00", "write 04 01", "write 01 01"])
            // Next time it checks #12 of the new epoch and finds nothing new.
            let again = try await engine.sync(meter: s.id, force: true)
            #expect(again.result == .noNewRecords && again.stored == 0 && !again.reset)
            #expect(try await store.meter(s.id)?.epoch == 1)
        }
    }

    @Test func aResetMeterWithFewerRecordsThanBeforeIsDownloadedToo() async throws {
        let s = script(records: 1...10)
        try await withEngine([s]) { engine, transport, store, _ in
            _ = try await engine.sync(meter: s.id, force: true)
            transport.update(s.id) { $0.records = script(records: 1...3, base: 150).records }
            let session = try await engine.sync(meter: s.id, force: true)
            #expect(session.result == .success && session.stored == 3 && session.reset)
            // #10 itself is gone: everything is asked for.
            #expect(transport.racpWrites.suffix(3) == ["write 01 04 01 0a 00 0a 00", "write 04 01", "write 01 01"])
            #expect(try await store.meter(s.id)?.highWater == 3)
        }
    }

    /// The check re-reads the high-water record, and with it its context: that context belongs to
    /// the check, so no sync of a meter with contexts reports an orphan context.
    @Test func theCheckedRecordsContextIsNoOrphan() async throws {
        var s = MeterScript()
        s.records = (1...4).map { seq in
            ScriptedRecord(
                measurement: measurementBytes(seq: seq, 2024, 6, 1, 8, Int(seq), sfloat: mgdl(100 + Int(seq)), contextFollows: true),
                context: contextBytes(seq: seq, meal: 1))
        }
        try await withEngine([s]) { engine, transport, store, log in
            #expect(try await engine.sync(meter: s.id, force: true).stored == 4)
            transport.update(s.id) { script in
                script.records.append(ScriptedRecord(
                    measurement: measurementBytes(seq: 5, 2024, 6, 1, 9, sfloat: mgdl(130), contextFollows: true),
                    context: contextBytes(seq: 5, meal: 2)))
            }
            let more = try await engine.sync(meter: s.id, force: true)
            #expect(more.result == .success && more.stored == 1 && !more.reset)
            let same = try await engine.sync(meter: s.id, force: true)
            #expect(same.result == .noNewRecords && !same.reset)
            let anomalies = log.all.flatMap { event -> [SyncAnomaly] in
                if case .anomalies(_, let found) = event { return found.samples.filter { $0.kind == .orphanContext } } else { return [] }
            }
            #expect(anomalies.isEmpty, "\(anomalies)")
            let stored = try await store.readings(ReadingQuery(meter: s.id))
            #expect(stored.count == 5 && stored.allSatisfy { $0.reading.contextBytes != nil })
        }
    }

    /// The link drops after record 3's measurement, before the context it announced: record 3 is
    /// not stored then, so the next sync stores it with its context (stored without it, the
    /// context would be lost: the next copy of record 3 is a duplicate).
    @Test func aRecordCutOffFromItsContextIsStoredWithItNextTime() async throws {
        var s = MeterScript()
        func meal(_ seq: UInt16) -> UInt8 { UInt8(1 + seq % 3) }
        s.records = (1...4).map { (seq: UInt16) -> ScriptedRecord in
            let value = mgdl(100 + Int(seq))
            return ScriptedRecord(
                measurement: measurementBytes(seq: seq, 2024, 6, 1, 8, Int(seq), sfloat: value, contextFollows: true),
                context: contextBytes(seq: seq, meal: meal(seq)))
        }
        s.disconnectBeforeContext = 2
        try await withEngine([s]) { engine, transport, store, _ in
            let cut = try await engine.sync(meter: s.id, force: true)
            #expect(cut.result == .interrupted && cut.stored == 2)
            transport.update(s.id) { $0.disconnectBeforeContext = nil }
            let next = try await engine.sync(meter: s.id, force: true)
            #expect(next.result == .success && next.stored == 2)
            let stored = try await store.readings(ReadingQuery(meter: s.id))
            #expect(stored.map(\.reading.sequenceNumber).sorted() == [1, 2, 3, 4])
            for r in stored {
                let seq = r.reading.sequenceNumber
                #expect(r.reading.contextBytes == contextBytes(seq: seq, meal: meal(seq)), "record \(seq)")
            }
        }
    }

    @Test func anUnchangedMeterIsNoReset() async throws {
        let s = script(records: 1...10)
        try await withEngine([s]) { engine, transport, store, _ in
            _ = try await engine.sync(meter: s.id, force: true)
            let same = try await engine.sync(meter: s.id, force: true)
            #expect(same.result == .noNewRecords && same.stored == 0 && same.received == 0 && !same.reset)
            transport.update(s.id) { $0.records += script(records: 11...11).records }
            let more = try await engine.sync(meter: s.id, force: true)
            #expect(more.result == .success && more.stored == 1 && more.received == 1 && more.expected == 1 && !more.reset)
            #expect(try await store.meter(s.id)?.epoch == 0)
        }
    }
}
