import HealthDataSync
import Testing

/// ``SyncEventReducer``: one test per sync event (and per pairing event), on plain values.
@Suite struct SyncEventReducerTests {
    let m = MeterID("C0:26:DA:01:02:03")
    let now = Instant(epochSeconds: 1_718_445_600)

    func meter(_ body: (inout MeterState) -> Void = { _ in }) -> MeterState {
        var s = MeterState(identity: MeterIdentity(id: self.m))
        body(&s)
        return s
    }

    func applied(_ event: SyncProgressEvent, to start: MeterState? = nil) -> MeterState {
        var s = start ?? self.meter()
        SyncEventReducer.apply(event, to: &s, now: self.now)
        return s
    }

    func commit(inserted: [StoredReading], highWater: UInt16?) -> CommitResult {
        let stored = StoredMeter(
            identity: MeterIdentity(id: self.m), features: nil, firstSeen: self.now, lastSeen: self.now, highWater: highWater,
            epoch: 0, lastSync: nil, lastSyncResult: nil, readingCount: inserted.count)
        return CommitResult(
            inserted: inserted, duplicates: 0, sequenceResets: 0, meter: stored,
            session: SyncSessionRecord(meter: self.m, started: self.now, result: .success))
    }

    func reading(_ seq: UInt16, at seconds: Int64, control: Bool = false) -> StoredReading {
        var r = VM.reading(meter: self.m, sequence: seq, mgdL: 100, at: seconds * 1000)
        if control { r.flags.insert(.controlSolution) }
        return StoredReading(id: Int64(seq), epoch: 0, storedAt: self.now, reading: r)
    }

    @Test func adapterChangedUpdatesTheViewOnly() {
        let adapter = AdapterState(present: true, powered: true, discovering: true, name: "hci0")
        #expect(SyncEventReducer.target(of: .adapterChanged(adapter)) == nil)
        var view = ViewState(daemon: VM.daemon())
        SyncEventReducer.apply(.adapterChanged(adapter), to: &view)
        #expect(view.adapter == adapter)
    }

    @Test func meterAppearedNamesAndMarksABondedMeterPaired() {
        let ad = MeterAdvertisement(id: self.m, name: "Meter", paired: true)
        #expect(SyncEventReducer.target(of: .meterAppeared(ad))?.creates == true)
        let s = self.applied(.meterAppeared(ad))
        #expect(s.identity.name == "Meter" && s.pairing == .paired)
        let failed = self.applied(.meterAppeared(ad), to: self.meter { $0.pairing = .failed; $0.identity.name = "Mine" })
        #expect(failed.pairing == .failed && failed.identity.name == "Mine")
    }

    @Test func meterDisappearedDropsTheLinkButMakesNoModel() {
        #expect(SyncEventReducer.target(of: .meterDisappeared(self.m))?.creates == false)
        #expect(self.applied(.meterDisappeared(self.m), to: self.meter { $0.link = .connected }).link == .disconnected)
    }

    @Test func identifiedMergesTheIdentityKeepingTheName() {
        let s = self.applied(
            .identified(MeterIdentity(id: self.m, manufacturer: "Acme", serialNumber: "SN")), to: self.meter { $0.identity.name = "Meter" })
        #expect(s.identity.manufacturer == "Acme" && s.identity.serialNumber == "SN" && s.identity.name == "Meter")
    }

    @Test func phaseChangedSetsSyncLinkPairingAndClearsProgressAndNextAttemptOnConnect() {
        let waiting = self.meter {
            $0.progress = SyncProgress(received: 3, expected: 5)
            $0.nextAttempt = self.now
            $0.sync = .waitingToRetry
        }
        let connecting = self.applied(.phaseChanged(self.m, .connecting), to: waiting)
        #expect(connecting.sync == .connecting && connecting.link == .connecting)
        #expect(connecting.progress == .none && connecting.nextAttempt == nil)
        let pairing = self.applied(.phaseChanged(self.m, .pairing))
        #expect(pairing.pairing == .pairing && pairing.link == .connected)
        #expect(self.applied(.phaseChanged(self.m, .done(.success))).link == .disconnected)
    }

    @Test func progressIsCopied() {
        #expect(self.applied(.progress(self.m, received: 4, expected: 9)).progress == SyncProgress(received: 4, expected: 9))
    }

    @Test func committedMovesTheHighWaterMarkCountAndLatestReading() {
        let result = self.commit(inserted: [self.reading(1, at: 100), self.reading(2, at: 300, control: true)], highWater: 2)
        #expect(self.applied(.committed(self.m, result)).highWater == 2)
        #expect(SyncEventReducer.changesView(.committed(self.m, result)))
        var view = ViewState(daemon: VM.daemon())
        view.readingCount = 5
        SyncEventReducer.apply(.committed(self.m, result), to: &view)
        #expect(view.readingCount == 7)
        #expect(view.lastReading?.sequenceNumber == 1, "control solution is never the last reading")
        // An older reading does not replace a newer one.
        SyncEventReducer.apply(.committed(self.m, self.commit(inserted: [self.reading(3, at: 50)], highWater: 3)), to: &view)
        #expect(view.lastReading?.sequenceNumber == 1)
    }

    @Test func failedReportsTheErrorWithAHintAndPairingState() {
        let s = self.applied(.failed(self.m, SyncFailure(.procedureAlreadyInProgress, "busy", attError: 0x80)))
        #expect(s.lastError?.code == "procedureAlreadyInProgress" && s.lastError?.specCode == 0x80)
        #expect(s.lastError?.hint?.contains("sugarctl capture inspect") == true && s.lastError?.at == self.now)
        #expect(self.applied(.failed(self.m, SyncFailure(.pairingFailed, "no"))).pairing == .failed)
        #expect(self.applied(.failed(self.m, SyncFailure(.pairingRequired, "no"))).pairing == .notPaired)
    }

    @Test func anomaliesChangeNoState() {
        let event = SyncProgressEvent.anomalies(self.m, SyncAnomalySummary([SyncAnomaly(.repeatedRecord, "x")]))
        #expect(SyncEventReducer.target(of: event) == nil && !SyncEventReducer.changesView(event))
        #expect(self.applied(event) == self.meter())
    }

    @Test func finishedRecordsTheLastSyncWithItsResetAndClearsTheErrorOnSuccess() {
        var session = SyncSessionRecord(meter: self.m, started: self.now, ended: Instant(epochSeconds: 1_718_445_610), result: .success, stored: 12, sequenceResets: 1)
        let start = self.meter {
            $0.lastError = ReportedError(code: "timeout", message: "t", at: self.now)
            $0.pairing = .waitingForPasskey
        }
        let s = self.applied(.finished(self.m, session), to: start)
        #expect(s.lastSync == LastSync(meter: self.m, at: Instant(epochSeconds: 1_718_445_610), result: .success, stored: 12, reset: true))
        #expect(s.lastError == nil && s.pairing == .paired)
        session.result = .interrupted
        #expect(self.applied(.finished(self.m, session), to: start).lastError != nil)
    }

    @Test func skippedChangesNoState() {
        let event = SyncProgressEvent.skipped(self.m, SyncFailure(.cooldown, "later"))
        #expect(SyncEventReducer.target(of: event) == nil)
        #expect(self.applied(event) == self.meter())
    }

    @Test func deferredShowsTheNextAttempt() {
        let at = Instant(epochSeconds: 1_718_445_630)
        let s = self.applied(.deferred(self.m, until: at), to: self.meter { $0.sync = .done(.success) })
        #expect(s.nextAttempt == at && s.sync == .done(.success))
    }

    @Test func retryScheduledShowsWaitingToRetryWithTheNextAttempt() {
        let at = Instant(epochSeconds: 1_718_445_602)
        let s = self.applied(.retryScheduled(self.m, at: at, attempt: 1), to: self.meter { $0.sync = .failed(SyncFailure(.timeout, "t")) })
        #expect(s.sync == .waitingToRetry && s.nextAttempt == at && s.link == .disconnected)
    }

    @Test func scheduleClearedDropsTheNextAttempt() {
        #expect(SyncEventReducer.target(of: .scheduleCleared(self.m))?.creates == false)
        let s = self.applied(.scheduleCleared(self.m), to: self.meter { $0.sync = .waitingToRetry; $0.nextAttempt = self.now })
        #expect(s.sync == .idle && s.nextAttempt == nil)
    }

    @Test func passkeyRequestedWaitsForThePasskey() {
        #expect(self.applied(.passkeyRequested(self.m)).pairing == .waitingForPasskey)
    }

    @Test func pairingEvents() {
        var s = self.meter { $0.pairing = .waitingForPasskey }
        SyncEventReducer.apply(.started, to: &s)
        #expect(s.pairing == .waitingForPasskey, "a pairing waiting for the passkey stays so")
        s.pairing = .notPaired
        SyncEventReducer.apply(.started, to: &s)
        #expect(s.pairing == .pairing)
        SyncEventReducer.apply(.passkeySubmitted, to: &s)
        #expect(s.pairing == .pairing)
        s.pairing = .waitingForPasskey
        SyncEventReducer.apply(.passkeySubmitted, to: &s)
        #expect(s.pairing == .pairing)
        s.pairing = .failed
        SyncEventReducer.apply(.passkeySubmitted, to: &s)
        #expect(s.pairing == .failed, "a pairing that already ended stays ended")
        let error = SyncEventReducer.reportedError(SyncFailure(.pairingFailed, "wrong PIN"), meter: self.m, at: self.now)
        SyncEventReducer.apply(.failed(error, duringSync: true), to: &s)
        #expect(s.pairing == .failed && s.lastError == nil, "the sync reports its own failure")
        SyncEventReducer.apply(.failed(error, duringSync: false), to: &s)
        #expect(s.lastError == error && error.hint?.contains("sugarctl pair") == true)
        SyncEventReducer.apply(.succeeded, to: &s)
        #expect(s.pairing == .paired && s.lastError == nil)
    }
}
