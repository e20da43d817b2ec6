import GlucoseProfile
import HealthDataSync
import Testing

/// Drives a SyncStateMachine with scripted events; actions come back as short strings.
struct Harness {
    var sm: SyncStateMachine
    var now = Instant(epochSeconds: 1_718_445_600)  // 2024-06-15T10:00:00Z
    var lastActions: [SyncAction] = []
    /// Every phase published so far.
    var phases: [String] = []
    var lastBatch: SyncBatch?

    static let meter = MeterID("C0:26:DA:01:02:03")
    static let fullServices = MeterServices(characteristics: [
        .init(uuid: .glucoseMeasurement, service: .glucoseService, properties: .notify),
        .init(uuid: .glucoseMeasurementContext, service: .glucoseService, properties: .notify),
        .init(uuid: .glucoseFeature, service: .glucoseService, properties: .read),
        .init(uuid: .recordAccessControlPoint, service: .glucoseService, properties: [.write, .indicate]),
        .init(uuid: .manufacturerName, service: .deviceInformationService, properties: .read),
        .init(uuid: .currentTime, service: .currentTimeService, properties: .read),
    ])
    static let bareServices = MeterServices(characteristics: [
        .init(uuid: .glucoseMeasurement, service: .glucoseService, properties: .notify),
        .init(uuid: .recordAccessControlPoint, service: .glucoseService, properties: [.write, .indicate]),
    ])

    init(
        highWater: UInt16? = nil, highWaterRecord: [UInt8]? = nil, fullDownload: Bool = false, name: String? = nil,
        zone: TimeZoneRules = .utc, configuration: SyncConfiguration = SyncConfiguration()
    ) {
        self.sm = SyncStateMachine(.init(
            meter: Harness.meter, advertisedName: name, highWater: highWater, highWaterRecord: highWaterRecord,
            fullDownload: fullDownload, zone: zone, configuration: configuration))
    }

    @discardableResult
    mutating func send(_ event: SyncEvent) -> [String] {
        self.lastActions = self.sm.handle(event, at: self.now)
        for a in self.lastActions {
            if case .publish(.phaseChanged(_, let p)) = a { self.phases.append(p.name) }
            if case .commit(let b) = a { self.lastBatch = b }
        }
        return self.lastActions.compactMap { a in
            if case .publish = a { return nil }
            return a.description
        }
    }

    /// The published events of the last step.
    var published: [SyncProgressEvent] {
        self.lastActions.compactMap { if case .publish(let e) = $0 { return e } else { return nil } }
    }

    var committedBatch: SyncBatch? { self.lastBatch }

    var lastStrings: [String] {
        self.lastActions.compactMap { a in
            if case .publish = a { return nil }
            return a.description
        }
    }

    /// Runs a bare meter (no DIS, no clock, no context) up to the RACP count write.
    mutating func toCounting() {
        self.send(.start)
        self.send(.connected(Harness.bareServices))
        self.send(.notificationsEnabled(.glucoseMeasurement))
        self.send(.notificationsEnabled(.recordAccessControlPoint))
    }

    mutating func record(_ seq: UInt16, mg: Int = 100, context: Bool = false) -> [String] {
        self.send(.value(.glucoseMeasurement, measurementBytes(seq: seq, 2024, 6, 14, 8, Int(seq % 60), sfloat: mgdl(mg), contextFollows: context)))
    }

    mutating func racp(_ bytes: [UInt8]) -> [String] { self.send(.value(.recordAccessControlPoint, bytes)) }

    /// committed → disconnect → finished.
    mutating func close() -> SyncSessionRecord? {
        guard let batch = self.committedBatch else { return nil }
        let result = CommitResult(
            inserted: [], duplicates: 0, sequenceResets: 0,
            meter: StoredMeter(identity: batch.meter, features: nil, firstSeen: self.now, lastSeen: self.now, highWater: batch.newHighWater, epoch: 0, lastSync: self.now, lastSyncResult: batch.session.result, readingCount: 0),
            session: batch.session)
        var actions = self.send(.committed(result))
        if actions.contains("disconnect") { actions = self.send(.disconnectCompleted) }
        return self.sm.session
    }
}

@Suite struct SyncStateMachineTests {
    @Test func fullProcedureFromHighWater() throws {
        var h = Harness(highWater: 5)
        #expect(h.send(.start) == ["connect", "startTimer(operation, 30.0)"])
        #expect(h.sm.phase == .connecting)
        #expect(h.send(.connected(Harness.fullServices)) == ["read(2a51)", "startTimer(operation, 10.0)"])
        #expect(h.send(.readCompleted(.glucoseFeature, [0x00, 0x04])) == ["read(2a29)", "startTimer(operation, 10.0)"])
        #expect(h.send(.readCompleted(.manufacturerName, Array("Acme\0".utf8))) == ["read(2a2b)", "startTimer(operation, 10.0)"])
        #expect(h.sm.phase == .readingClock)
        #expect(h.sm.identity.manufacturer == "Acme")
        // The meter clock is 2 minutes fast.
        let clock = currentTimeBytes(LocalDateTime(year: 2024, month: 6, day: 15, hour: 10, minute: 2))
        #expect(h.send(.readCompleted(.currentTime, clock)) == ["notify(2a18)", "startTimer(operation, 10.0)"])
        #expect(h.sm.clock?.meterTime.minute == 2)
        #expect(h.send(.notificationsEnabled(.glucoseMeasurement)) == ["notify(2a34)", "startTimer(operation, 10.0)"])
        #expect(h.send(.notificationsEnabled(.glucoseMeasurementContext)) == ["notify(2a52)", "startTimer(operation, 10.0)"])
        #expect(h.send(.notificationsEnabled(.recordAccessControlPoint)) == ["write(04 03 01 06 00 count)", "startTimer(operation, 20.0)"])
        #expect(h.sm.phase == .counting)
        #expect(h.send(.writeCompleted(.count)) == [])
        #expect(h.racp([0x05, 0x00, 0x02, 0x00]) == ["write(01 03 01 06 00 report)", "startTimer(operation, 20.0)"])
        #expect(h.sm.expected == 2)
        #expect(h.sm.phase == .receiving)
        // Values may come before the write's completion.
        #expect(h.record(6) == ["startTimer(operation, 20.0)"])
        #expect(h.published.contains(.progress(Harness.meter, received: 1, expected: 2)))
        _ = h.record(7)
        #expect(h.send(.writeCompleted(.report)) == [])
        #expect(h.racp([0x06, 0x00, 0x01, 0x01]) == ["cancelTimer(operation)", "cancelTimer(retry)", "commit(2, hw 7, success)"])
        let batch = try #require(h.committedBatch)
        #expect(batch.features == 0x0400)
        #expect(batch.meter.manufacturer == "Acme")
        #expect(batch.readings.map(\.sequenceNumber) == [6, 7])
        #expect(batch.readings[0].time.meterClockSkewSeconds == 120)
        #expect(batch.readings[0].time.method == .meterClock)
        #expect(batch.readings[0].mgdL == 100)
        let closed = h.close()
        let record = try #require(closed)
        #expect(record.result == .success && record.expected == 2 && record.received == 2)
        #expect(h.sm.phase == .done(.success))
        #expect(h.lastActions.contains(where: { if case .finished = $0 { return true } else { return false } }))
    }

    @Test func newMeterAsksForEverything() {
        var h = Harness(highWater: nil)
        h.toCounting()
        #expect(h.lastStrings.first == "write(04 01 count)")
        #expect(h.racp([0x05, 0x00, 0x00, 0x00]) == ["write(01 01 report)", "startTimer(operation, 20.0)"])
        let fullDownload = { () -> String? in
            var f = Harness(highWater: 9, fullDownload: true)
            f.toCounting()
            return f.lastStrings.first
        }()
        #expect(fullDownload == "write(04 01 count)")
    }

    @Test func noRecordsFoundIsSuccessWithNothingStored() throws {
        var h = Harness(highWater: 41)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x00, 0x00])
        #expect(h.racp([0x06, 0x00, 0x01, 0x06]).last == "commit(0, hw 41, noNewRecords)")
        let record = h.close()
        #expect(record?.result == .noNewRecords)
        #expect(h.sm.phase == .done(.noNewRecords))
    }

    @Test func countNotSupportedSkipsCountingAndReportsAnyway() {
        var h = Harness(highWater: 2)
        h.toCounting()
        #expect(h.racp([0x06, 0x00, 0x04, 0x02]) == ["write(01 03 01 03 00 report)", "startTimer(operation, 20.0)"])
        #expect(h.sm.anomalies.map(\.kind) == [.countUnavailable])
        #expect(h.sm.expected == nil)
        _ = h.record(3)
        #expect(h.racp([0x06, 0x00, 0x01, 0x01]).last == "commit(1, hw 3, success)")
    }

    @Test func reportNotSupportedFailsWithAClearReason() throws {
        var h = Harness(highWater: 2)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x01, 0x00])
        #expect(h.racp([0x06, 0x00, 0x01, 0x02]).last == "commit(0, hw nil, failed)")
        _ = h.close()
        guard case .failed(let failure) = h.sm.phase else { Issue.record("not failed: \(h.sm.phase)"); return }
        #expect(failure.code == .reportNotSupported && failure.racpResponseCode == 0x02)
        #expect(h.sm.session?.error?.contains("not support") == true)
    }

    @Test func filterRejectedFallsBackToAllRecordsOnce() {
        var h = Harness(highWater: 2)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x01, 0x00])
        #expect(h.racp([0x06, 0x00, 0x01, 0x04]) == ["write(01 01 report)", "startTimer(operation, 20.0)"])
        _ = h.record(1)
        _ = h.record(3)
        // All records were asked for: the high-water mark is the highest received.
        #expect(h.racp([0x06, 0x00, 0x01, 0x01]).last == "commit(2, hw 3, success)")
        var again = Harness(highWater: nil)
        again.toCounting()
        _ = again.racp([0x05, 0x00, 0x01, 0x00])
        #expect(again.racp([0x06, 0x00, 0x01, 0x04]).last == "commit(0, hw nil, failed)")
    }

    @Test(arguments: [UInt8(0x80), 0xFE])
    func procedureAlreadyInProgressAbortsAndRetriesOnce(att: UInt8) {
        var h = Harness(highWater: nil)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x01, 0x00])
        let busy = TransportError(.attError, "busy", attError: att)
        #expect(h.send(.writeFailed(.report, busy)) == ["write(03 00 abort)", "cancelTimer(operation)", "startTimer(retry, 2.0)"])
        #expect(h.sm.phase == .waitingToRetry)
        _ = h.racp([0x06, 0x00, 0x03, 0x01])  // the abort's answer is ignored
        #expect(h.send(.timerFired(.retry)) == ["write(01 01 report)", "startTimer(operation, 20.0)"])
        #expect(h.sm.phase == .receiving)
        #expect(h.send(.writeFailed(.report, busy)).last == "commit(0, hw nil, failed)")
        _ = h.close()
        guard case .failed(let failure) = h.sm.phase else { Issue.record("not failed"); return }
        #expect(failure.code == .procedureAlreadyInProgress && failure.attError == att)
    }

    @Test(arguments: [UInt8(0x81), 0xFD])
    func cccdImproperlyConfiguredReEnablesIndicationsAndRetriesOnce(att: UInt8) {
        var h = Harness(highWater: nil)
        h.toCounting()
        let cccd = TransportError(.attError, "cccd", attError: att)
        #expect(h.send(.writeFailed(.count, cccd)) == ["notify(2a52)", "startTimer(operation, 10.0)"])
        #expect(h.sm.phase == .subscribing)
        #expect(h.send(.notificationsEnabled(.recordAccessControlPoint)) == ["write(04 01 count)", "startTimer(operation, 20.0)"])
        #expect(h.send(.writeFailed(.count, cccd)).last == "commit(0, hw nil, failed)")
        _ = h.close()
        guard case .failed(let failure) = h.sm.phase else { Issue.record("not failed"); return }
        #expect(failure.code == .cccdImproperlyConfigured)
    }

    @Test func otherATTErrorsFailNamed() {
        var h = Harness(highWater: nil)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x01, 0x00])
        _ = h.send(.writeFailed(.report, TransportError(.attError, "Write Not Permitted", attError: 0x03)))
        _ = h.close()
        guard case .failed(let failure) = h.sm.phase else { Issue.record("not failed"); return }
        #expect(failure.code == .attError && failure.attError == 0x03)
    }

    @Test func disconnectMidTransferCommitsWhatArrivedWithTheContiguousMark() throws {
        var h = Harness(highWater: 10)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x03, 0x00])
        _ = h.record(11)
        _ = h.record(12)
        #expect(h.send(.disconnected(reason: "timeout")).last == "commit(2, hw 12, interrupted)")
        let batch = try #require(h.committedBatch)
        #expect(batch.readings.count == 2)
        let closed = h.close()
        let record = try #require(closed)
        #expect(!h.lastActions.contains(where: { $0.description == "disconnect" }))
        #expect(record.result == .interrupted)
        guard case .failed(let failure) = h.sm.phase else { Issue.record("not failed"); return }
        #expect(failure.code == .meterDisconnected)
    }

    /// Cut between a record and the context it announced: stored now, the record would keep no
    /// context forever (the next attempt's copy is a duplicate). It waits for the next attempt.
    @Test func aRecordCutOffFromItsContextIsLeftForTheNextAttempt() throws {
        var h = Harness(highWater: 10)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x03, 0x00])
        _ = h.record(11, context: true)
        _ = h.send(.value(.glucoseMeasurementContext, contextBytes(seq: 11, meal: 1)))
        _ = h.record(12)
        _ = h.record(13, context: true)  // the link drops before its context
        #expect(h.send(.disconnected(reason: "timeout")).last == "commit(2, hw 12, interrupted)")
        let batch = try #require(h.committedBatch)
        #expect(batch.readings.map(\.sequenceNumber) == [11, 12])
        #expect(batch.readings[0].meal == 1)
        // The mark stops before #13: the next attempt asks for it again, context and all.
        #expect(batch.newHighWater == 12)
        #expect(h.sm.anomalies.map(\.kind) == [.missingContext])
        #expect(h.sm.anomalies.map(\.sequenceNumber) == [13])
        #expect(h.sm.anomalies.first?.message.contains("not stored") == true)
    }

    @Test func aReadTimeoutRetriesOnceThenFails() {
        var h = Harness(highWater: nil)
        h.send(.start)
        h.send(.connected(Harness.fullServices))
        #expect(h.send(.timerFired(.operation)) == ["read(2a51)", "startTimer(operation, 10.0)"])
        #expect(h.send(.timerFired(.operation)).last == "commit(0, hw nil, failed)")
        _ = h.close()
        guard case .failed(let failure) = h.sm.phase else { Issue.record("not failed"); return }
        #expect(failure.code == .timeout)
    }

    @Test func aReportTimeoutAbortsWaitsAndRetriesOnce() {
        var h = Harness(highWater: nil)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x02, 0x00])
        _ = h.record(1)
        #expect(h.send(.timerFired(.operation)) == ["write(03 00 abort)", "cancelTimer(operation)", "startTimer(retry, 2.0)"])
        #expect(h.send(.timerFired(.retry)) == ["write(01 01 report)", "startTimer(operation, 20.0)"])
        _ = h.record(1)  // re-sent after the retry: kept once
        _ = h.record(2)
        #expect(h.racp([0x06, 0x00, 0x01, 0x01]).last == "commit(2, hw 2, success)")
    }

    @Test func aCountTimeoutTwiceSkipsTheCount() {
        var h = Harness(highWater: nil)
        h.toCounting()
        _ = h.send(.timerFired(.operation))
        _ = h.send(.timerFired(.retry))
        #expect(h.send(.timerFired(.operation)) == ["write(03 00 abort)", "write(01 01 report)", "startTimer(operation, 20.0)"])
        #expect(h.sm.anomalies.map(\.kind) == [.countUnavailable])
    }

    @Test func abortOnShutdownWritesRACPAbortAndCommitsWhatArrived() throws {
        var h = Harness(highWater: nil)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x05, 0x00])
        _ = h.record(1)
        #expect(h.send(.abort(reason: "shutdown")) == ["cancelTimer(operation)", "cancelTimer(retry)", "write(03 00 abort)", "commit(1, hw 1, aborted)"])
        #expect(h.send(.abort(reason: "again")) == [])  // idempotent while committing
        let closed = h.close()
        let record = try #require(closed)
        #expect(record.result == .aborted)
        // Before any RACP procedure there is nothing to abort on the meter.
        var early = Harness(highWater: nil)
        early.send(.start)
        #expect(early.send(.abort(reason: "shutdown")) == ["cancelTimer(operation)", "cancelTimer(retry)", "commit(0, hw nil, aborted)"])
    }

    @Test func authenticationRequiredPairsThenResumes() {
        var h = Harness(highWater: nil)
        h.send(.start)
        h.send(.connected(Harness.bareServices))
        let auth = TransportError(.attError, "Insufficient Authentication", attError: 0x05)
        #expect(h.send(.notificationsFailed(.glucoseMeasurement, auth)) == ["pair", "startTimer(operation, 120.0)"])
        #expect(h.sm.phase == .pairing)
        #expect(h.send(.paired) == ["notify(2a18)", "startTimer(operation, 10.0)"])
        #expect(h.sm.phase == .subscribing)
        // A second authentication failure after pairing is final.
        _ = h.send(.notificationsFailed(.glucoseMeasurement, TransportError(.authenticationRequired, "still")))
        _ = h.close()
        guard case .failed(let failure) = h.sm.phase else { Issue.record("not failed"); return }
        #expect(failure.code == .pairingRequired)
    }

    @Test func pairingRejectedFails() {
        var h = Harness(highWater: nil)
        h.send(.start)
        #expect(h.send(.connectFailed(TransportError(.authenticationRequired, "bond"))) == ["pair", "startTimer(operation, 120.0)"])
        #expect(h.send(.paired) == ["connect", "startTimer(operation, 30.0)"])
        var bad = Harness(highWater: nil)
        bad.send(.start)
        bad.send(.connectFailed(TransportError(.authenticationRequired, "bond")))
        bad.send(.pairingFailed(TransportError(.authenticationFailed, "wrong passkey")))
        _ = bad.close()
        guard case .failed(let failure) = bad.sm.phase else { Issue.record("not failed"); return }
        #expect(failure.code == .pairingFailed)
    }

    @Test func authenticationFailedOutsidePairingMeansPairAgain() {
        // A bond the meter no longer has: BlueZ answers Connect (or a read) with AuthenticationFailed.
        var h = Harness(highWater: nil)
        h.send(.start)
        #expect(h.send(.connectFailed(TransportError(.authenticationFailed, "bond lost"))) == ["pair", "startTimer(operation, 120.0)"])
        #expect(h.sm.phase == .pairing)
        // Failing again after pairing: "pairing needed", not a wrong PIN.
        h.send(.paired)
        _ = h.send(.connectFailed(TransportError(.authenticationFailed, "still")))
        _ = h.close()
        guard case .failed(let failure) = h.sm.phase else { Issue.record("not failed"); return }
        #expect(failure.code == .pairingRequired)
    }

    @Test func contextsJoinBySequenceNumberInEitherOrder() throws {
        var h = Harness(highWater: nil)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x03, 0x00])
        _ = h.record(1, context: true)
        _ = h.send(.value(.glucoseMeasurementContext, contextBytes(seq: 1, meal: 1)))
        _ = h.send(.value(.glucoseMeasurementContext, contextBytes(seq: 2, meal: 3)))  // before its measurement
        _ = h.record(2, context: true)
        _ = h.record(3, context: true)  // its context never comes
        _ = h.send(.value(.glucoseMeasurementContext, contextBytes(seq: 9, meal: 2)))  // orphan
        _ = h.racp([0x06, 0x00, 0x01, 0x01])
        let batch = try #require(h.committedBatch)
        #expect(batch.readings.map(\.meal) == [1, 3, nil])
        #expect(batch.readings[0].contextBytes == contextBytes(seq: 1, meal: 1))
        #expect(batch.readings[2].contextBytes == nil)
        #expect(h.sm.anomalies.map(\.kind) == [.orphanContext, .missingContext])
        #expect(h.sm.anomalies.map(\.sequenceNumber) == [9, 3])
    }

    @Test func aRecordSentTwiceInARowIsKeptOnce() throws {
        var h = Harness(highWater: nil)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x02, 0x00])
        _ = h.record(1)
        _ = h.record(1)
        _ = h.record(2)
        _ = h.racp([0x06, 0x00, 0x01, 0x01])
        #expect(try #require(h.committedBatch).readings.map(\.sequenceNumber) == [1, 2])
        #expect(h.sm.anomalies.map(\.kind) == [.repeatedRecord])
    }

    @Test func malformedPacketsAmongGoodOnesBecomeAnomalies() throws {
        var h = Harness(highWater: nil)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x02, 0x00])
        _ = h.record(1)
        _ = h.send(.value(.glucoseMeasurement, [0x02, 0x05, 0x00, 0xE8]))  // truncated
        _ = h.send(.value(.glucoseMeasurementContext, [0x02]))  // truncated
        _ = h.racp([0x07])  // not a RACP message
        _ = h.record(2)
        #expect(h.racp([0x06, 0x00, 0x01, 0x01]).last == "commit(2, hw 2, success)")
        #expect(h.sm.anomalies.map(\.kind) == [.malformedMeasurement, .malformedContext, .malformedRACP])
        _ = h.close()
        #expect(h.published.contains(where: { if case .anomalies(_, let a) = $0 { return a.total == 3 } else { return false } }))
    }

    @Test func notAGlucoseMeterFails() {
        var h = Harness(highWater: nil)
        h.send(.start)
        h.send(.connected(MeterServices(characteristics: [])))
        _ = h.close()
        guard case .failed(let failure) = h.sm.phase else { Issue.record("not failed"); return }
        #expect(failure.code == .notAGlucoseMeter)
        #expect(!failure.message.contains("Verio"))
    }

    @Test func verioServiceWithoutItsReplyIsNamedInTheFailure() {
        var h = Harness(highWater: nil)
        h.send(.start)
        h.send(.connected(MeterServices(characteristics: [
            DiscoveredCharacteristic(uuid: Verio.commandCharacteristic, service: Verio.service, properties: [.write])
        ])))
        _ = h.close()
        guard case .failed(let failure) = h.sm.phase else { Issue.record("not failed"); return }
        #expect(failure.code == .notAGlucoseMeter)
        #expect(failure.message.contains("OneTouch Verio vendor service (af9df7a1-e595-11e3-96b4-0002a5d5c51b)"))
    }

    @Test func commitFailureIsAStoreError() {
        var h = Harness(highWater: nil)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x00, 0x00])
        _ = h.racp([0x06, 0x00, 0x01, 0x06])
        #expect(h.send(.commitFailed(StoreError(.diskFull, "disk full"))) == ["disconnect"])
        _ = h.send(.disconnectCompleted)
        guard case .failed(let failure) = h.sm.phase else { Issue.record("not failed"); return }
        #expect(failure.code == .storeError)
        #expect(h.sm.session?.result == .failed)
    }

    @Test func phasesArePublishedInOrder() {
        var h = Harness(highWater: nil)
        for e: SyncEvent in [
            .start, .connected(Harness.fullServices), .readCompleted(.glucoseFeature, [0, 0]),
            .readCompleted(.manufacturerName, Array("X".utf8)), .readFailed(.currentTime, TransportError(.attError, "no", attError: 0x02)),
            .notificationsEnabled(.glucoseMeasurement), .notificationsEnabled(.glucoseMeasurementContext),
            .notificationsEnabled(.recordAccessControlPoint), .value(.recordAccessControlPoint, [5, 0, 0, 0]),
            .value(.recordAccessControlPoint, [6, 0, 1, 6]),
        ] {
            h.send(e)
        }
        _ = h.close()
        #expect(h.phases == ["connecting", "readingDeviceInfo", "readingClock", "subscribing", "counting", "receiving", "committing", "disconnecting", "done"])
        #expect(h.sm.anomalies.map(\.kind) == [.clockUnreadable])
    }
}
