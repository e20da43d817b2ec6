import GlucoseProfile
import HealthDataSync
import Testing

/// One test (or more) per state of ``SyncStateMachine`` whose handler the other suites reach only
/// in passing: what the state does with its own answer, and with the events every state shares.
@Suite struct SyncStateHandlerTests {
    /// `pairing(then:)`: the interrupted Device Information read is issued again once paired, and
    /// the reads after it follow.
    @Test func pairingResumesTheInterruptedReadAndTheRestFollow() {
        var h = Harness(highWater: nil)
        h.send(.start)
        #expect(h.send(.connected(Harness.fullServices)) == ["read(2a51)", "startTimer(operation, 10.0)"])
        let auth = TransportError(.authenticationRequired, "bond first")
        #expect(h.send(.readFailed(.glucoseFeature, auth)) == ["pair", "startTimer(operation, 120.0)"])
        #expect(h.sm.phase == .pairing)
        #expect(h.send(.value(.glucoseMeasurement, measurementBytes(seq: 1, 2024, 6, 14, sfloat: mgdl(90)))) == [])
        #expect(h.send(.paired) == ["read(2a51)", "startTimer(operation, 10.0)"])
        #expect(h.phases == ["connecting", "readingDeviceInfo", "pairing", "readingDeviceInfo"])
        #expect(h.send(.readCompleted(.glucoseFeature, [0x00, 0x04])) == ["read(2a29)", "startTimer(operation, 10.0)"])
        #expect(h.sm.received == 0)  // nothing is taken in before the subscriptions
    }

    /// `pairing(then:)`: the pairing timer is final (the passkey was not entered).
    @Test func aPairingTimeoutFailsAsPairingRequired() throws {
        var h = Harness(highWater: nil)
        h.send(.start)
        h.send(.connectFailed(TransportError(.authenticationFailed, "bond lost")))
        #expect(h.sm.phase == .pairing)
        #expect(h.send(.timerFired(.operation)) == ["cancelTimer(operation)", "cancelTimer(retry)", "commit(0, hw nil, failed)"])
        _ = h.close()
        guard case .failed(let failure) = h.sm.phase else { Issue.record("not failed: \(h.sm.phase)"); return }
        #expect(failure.code == .pairingRequired)
    }

    /// `waitingToRetry(then:)`: records that still arrive during the pause go into the interrupted
    /// transfer (no gap timer: nothing is in flight), and the retry timer issues the report again.
    @Test func recordsDuringThePauseBelongToTheInterruptedTransfer() throws {
        var h = Harness(highWater: nil)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x03, 0x00])
        _ = h.record(1)
        #expect(h.send(.timerFired(.operation)) == ["write(03 00 abort)", "cancelTimer(operation)", "startTimer(retry, 2.0)"])
        #expect(h.sm.phase == .waitingToRetry)
        #expect(h.record(2) == [])
        #expect(h.sm.received == 2)
        // An abort in the pause writes no RACP abort: no request is in flight.
        var paused = h
        #expect(paused.send(.abort(reason: "stop")) == ["cancelTimer(operation)", "cancelTimer(retry)", "commit(2, hw 2, aborted)"])
        #expect(h.send(.timerFired(.retry)) == ["write(01 01 report)", "startTimer(operation, 20.0)"])
        _ = h.record(3)
        #expect(h.racp([0x06, 0x00, 0x01, 0x01]).last == "commit(3, hw 3, success)")
    }

    /// `waitingToRetry(then:)`: a connect retried once after the pause; a second failure is final.
    @Test func aFailedConnectIsRetriedOnceAfterThePause() throws {
        var h = Harness(highWater: nil)
        h.send(.start)
        let failed = TransportError(.connectFailed, "le-connection-abort-by-local")
        #expect(h.send(.connectFailed(failed)) == ["cancelTimer(operation)", "startTimer(retry, 2.0)"])
        #expect(h.sm.phase == .waitingToRetry)
        #expect(h.send(.timerFired(.operation)) == [])  // no operation in flight
        #expect(h.send(.timerFired(.retry)) == ["connect", "startTimer(operation, 30.0)"])
        #expect(h.send(.connectFailed(failed)) == ["cancelTimer(operation)", "cancelTimer(retry)", "commit(0, hw nil, failed)"])
    }

    /// `checkingReset`: a count nobody asked for is an anomaly, the high-water record's context is
    /// part of the check (no orphan), and an unchanged record leads to the delta count.
    @Test func theResetCheckTakesOnlyItsOwnAnswer() throws {
        let record = measurementBytes(seq: 5, 2024, 6, 14, 8, 5, sfloat: mgdl(100), contextFollows: true)
        var h = Harness(highWater: 5, highWaterRecord: record)
        h.send(.start)
        h.send(.connected(Harness.bareServices))
        h.send(.notificationsEnabled(.glucoseMeasurement))
        #expect(h.send(.notificationsEnabled(.recordAccessControlPoint)) == ["write(01 04 01 05 00 05 00 verify)", "startTimer(operation, 20.0)"])
        #expect(h.racp([0x05, 0x00, 0x09, 0x00]) == [])
        #expect(h.sm.anomalies.map(\.kind) == [.unexpectedRACP])
        #expect(h.send(.value(.glucoseMeasurement, record)) == ["startTimer(operation, 20.0)"])
        #expect(h.send(.value(.glucoseMeasurementContext, contextBytes(seq: 5, meal: 1))) == [])
        #expect(h.racp([0x06, 0x00, 0x01, 0x01]) == ["write(04 03 01 06 00 count)", "startTimer(operation, 20.0)"])
        #expect(!h.sm.resetDetected && h.sm.received == 0)
        _ = h.racp([0x05, 0x00, 0x00, 0x00])
        let end = h.racp([0x06, 0x00, 0x01, 0x06])
        #expect(end.last == "commit(0, hw 5, noNewRecords)")
        #expect(h.sm.anomalies.map(\.kind) == [.unexpectedRACP])  // no orphan context
    }

    /// `subscribing(resume:)`: RACP indications re-enabled after ATT 0x81 write the interrupted
    /// request again, and records that arrive meanwhile are kept.
    @Test func reEnablingIndicationsResumesTheInterruptedRequest() {
        var h = Harness(highWater: nil)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x02, 0x00])
        let cccd = TransportError(.attError, "CCCD improperly configured", attError: 0x81)
        #expect(h.send(.writeFailed(.report, cccd)) == ["notify(2a52)", "startTimer(operation, 10.0)"])
        #expect(h.sm.phase == .subscribing)
        _ = h.record(1)
        #expect(h.sm.received == 1)
        #expect(h.send(.notificationsEnabled(.recordAccessControlPoint)) == ["write(01 01 report)", "startTimer(operation, 20.0)"])
        #expect(h.sm.phase == .receiving)
    }

    /// `settingClock`: the link dropping while the clock is written loses only the clock; the
    /// download is committed as the success it was.
    @Test func aDisconnectWhileSettingTheClockKeepsTheDownload() throws {
        var h = Harness()
        let late = LocalDateTime(year: 2024, month: 6, day: 15, hour: 9, minute: 40)
        _ = ClockSettingTests.download(&h, services: ClockSettingTests.services(), clock: late)
        #expect(h.sm.phase == .settingClock)
        let end = h.send(.disconnected(reason: "gone"))
        #expect(end == ["cancelTimer(operation)", "cancelTimer(retry)", "commit(1, hw 1, success)"])
        #expect(h.sm.anomalies.map(\.kind) == [.clockNotSet])
        let closed = h.close()
        let record = try #require(closed)
        #expect(record.result == .success && record.clockSet == nil)
        guard case .done(.success) = h.sm.phase else { Issue.record("not done: \(h.sm.phase)"); return }
    }

    /// `committing`: stray packets are counted (a RACP one) or ignored (records), an abort changes
    /// nothing, and a disconnect means no disconnect action is needed.
    @Test func whileCommittingOnlyTheStoreCounts() throws {
        var h = Harness(highWater: nil)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x01, 0x00])
        _ = h.record(1)
        #expect(h.racp([0x06, 0x00, 0x01, 0x01]).last == "commit(1, hw 1, success)")
        #expect(h.sm.phase == .committing)
        #expect(h.record(2) == [])
        #expect(h.racp([0x06, 0x00, 0x01, 0x01]) == [])
        #expect(h.send(.abort(reason: "late")) == [])
        #expect(h.send(.disconnected(reason: nil)) == [])
        #expect(h.sm.received == 1)
        #expect(h.sm.anomalies.map(\.kind) == [.unexpectedRACP])
        let batch = try #require(h.committedBatch)
        let result = CommitResult(
            inserted: [], duplicates: 0, sequenceResets: 0,
            meter: StoredMeter(
                identity: batch.meter, features: nil, firstSeen: h.now, lastSeen: h.now, highWater: 1, epoch: 0, lastSync: h.now,
                lastSyncResult: .success, readingCount: 1),
            session: batch.session)
        // The link is gone already: straight to done, no disconnect.
        #expect(h.send(.committed(result)) == ["finished(success)"])
        guard case .done(.success) = h.sm.phase else { Issue.record("not done: \(h.sm.phase)"); return }
    }

    /// `disconnecting`: the meter dropping the link before the disconnect completes ends the sync
    /// the same way; later events change nothing.
    @Test func theLinkDroppingWhileDisconnectingFinishes() throws {
        var h = Harness(highWater: nil)
        h.toCounting()
        _ = h.racp([0x05, 0x00, 0x00, 0x00])
        _ = h.racp([0x06, 0x00, 0x01, 0x06])
        let batch = try #require(h.committedBatch)
        let result = CommitResult(
            inserted: [], duplicates: 0, sequenceResets: 0,
            meter: StoredMeter(
                identity: batch.meter, features: nil, firstSeen: h.now, lastSeen: h.now, highWater: nil, epoch: 0, lastSync: h.now,
                lastSyncResult: .noNewRecords, readingCount: 0),
            session: batch.session)
        #expect(h.send(.committed(result)) == ["disconnect"])
        #expect(h.sm.phase == .disconnecting)
        #expect(h.send(.disconnected(reason: "remote")) == ["finished(noNewRecords)"])
        #expect(h.send(.disconnectCompleted) == [])
        #expect(h.send(.start) == [])
        guard case .done(.noNewRecords) = h.sm.phase else { Issue.record("not done: \(h.sm.phase)"); return }
    }
}
