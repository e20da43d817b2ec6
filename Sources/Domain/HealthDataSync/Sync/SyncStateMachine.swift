import GlucoseProfile

/// The Glucose Profile sync procedure for one meter and one attempt, as a state machine.
///
/// It performs no I/O: each ``SyncEvent`` goes in through ``handle(_:at:)`` and the
/// ``SyncAction``s that come out are carried out, in order, by a driver (``SyncEngine``, or a test).
/// Starting a timer replaces the running timer of the same kind.
///
/// Shape: where the attempt is is one enum, ``State``, whose cases carry what that point needs
/// (the DIS reads still to do, the subscriptions still to make, the download's ``Transfer``, the
/// Verio plan, the clock write, how the attempt ended). ``handle(_:at:)`` hands each event to the
/// one handler of the current case, which returns the next state. Beside the state the machine
/// keeps only the session-wide ``Context`` and the ``Attempt`` record (the meter's identity and
/// profile, what it said about itself, the link, the retry budget, the anomalies and the session).
/// Vendor behaviour comes from the meter's ``MeterProfile``, asked by name
/// (`profile.sequenceOrder`, `profile.clock`, `profile.downloadsEverything`).
///
/// Procedure: connect → (pair when the meter demands it) → read Glucose Feature and Device
/// Information → read the meter clock (Date Time 0x2A08 first for Roche, else Current Time 0x2A2B,
/// else 0x2A08) → notify 0x2A18 (and 0x2A34 when present), indicate 0x2A52 → with a stored mark and
/// its record, the check of that record (`01 04 01 <hw> <hw>`) → RACP count (`04 03 01 <hw+1>`, or
/// `04 01`) → RACP report (`01 03 01 <hw+1>`, or `01 01`) → collect records, joining contexts by
/// sequence number, committing them in chunks → RACP response → commit the rest and the new
/// high-water mark in one call → disconnect. A meter offering the OneTouch Verio service runs the
/// second procedure (``VerioProcedure``) in the ``State/verio(_:_:_:)`` state instead of the RACP
/// states; everything around it (reads, pairing, retries, chunks, the mark, the session) is shared.
///
/// Error handling:
/// - A timeout retries the operation once (a RACP one after writing abort `03 00` and a pause);
///   a second count timeout skips counting, any other second timeout fails with `timeout`.
/// - Count "op code not supported" (or any other count error) skips counting; the report goes ahead.
/// - Report "op code not supported" fails with `reportNotSupported`; "no records found" is success
///   with nothing new. A filtered report the meter rejects as invalid/unsupported operator or
///   operand is repeated once as "all records".
/// - ATT 0x80/0xFE (procedure already in progress) on a RACP write: abort, pause, retry once.
/// - ATT 0x81/0xFD (CCCD improperly configured): re-enable RACP indications, retry once.
/// - Authentication errors (``TransportError/Code/authenticationRequired``, ATT 0x05/0x08/0x0F, and
///   ``TransportError/Code/authenticationFailed`` outside pairing): pair once, then redo the operation.
/// - The meter disconnecting before the RACP response ends the attempt as `interrupted`.
/// - ``SyncEvent/abort(reason:)`` writes `03 00` when a RACP procedure is in flight.
///
/// Records are committed while they arrive, in chunks (``SyncConfiguration/chunkRecords`` records
/// or ``SyncConfiguration/chunkSeconds``, whichever comes first; one chunk in flight at a time),
/// each together with the sync's **contiguous mark**: the highest sequence number up to which
/// every record the meter sent in this transfer is stored (a packet that did not decode, a record
/// cut off from its context, or numbers going backwards stop the mark for the attempt). A record
/// that comes before the attempt's report request is the rest of an earlier procedure (a gateway
/// killed mid-report leaves the meter sending): it is skipped, never counted by the mark, and the
/// report brings it in order. The mark
/// is the stored high-water mark, so the next attempt after an interruption asks for the records
/// after it; after RACP success or "no records found" the mark becomes the highest record
/// received, as before. With a stored mark and its record, the meter is first asked for that
/// record again (`01 04 01 <hw> <hw>`): gone or different means it was reset, and everything is
/// downloaded into a new epoch before any chunk of it is committed.
///
/// However an attempt ends, the records received so far are committed (with the session record).
/// Deduplication in the store makes that safe to repeat. Packets that do not decode are
/// ``SyncAnomaly``s, never a reason to stop; they are counted per kind and the first few kept
/// (``SyncAnomalySummary``), so nothing the machine holds grows with the number of records beyond
/// one chunk.
public struct SyncStateMachine: Sendable {
    /// What the machine needs to know before it starts.
    public struct Context: Sendable {
        public var meter: MeterID
        /// The advertised name (used by the quirk table when DIS strings are placeholders).
        public var advertisedName: String?
        /// The stored high-water sequence number; nil for a new meter.
        public var highWater: UInt16?
        /// The measurement packet stored at ``highWater`` (current epoch). When known, the sync asks
        /// from the high-water record itself and compares it: gone or different means the meter was
        /// reset, and everything is downloaded into a new epoch.
        public var highWaterRecord: [UInt8]?
        /// Ask for all records even when a high-water mark is stored.
        public var fullDownload: Bool
        /// When a sync last set the meter's clock. For a meter whose clock cannot be read, records the
        /// meter stamped at or after that moment are resolved on the corrected clock (skew 0) instead of
        /// as unverified.
        public var clockSetAt: Instant?
        public var zone: TimeZoneRules
        public var quirks: QuirkTable
        public var configuration: SyncConfiguration

        public init(
            meter: MeterID, advertisedName: String? = nil, highWater: UInt16?, highWaterRecord: [UInt8]? = nil,
            fullDownload: Bool = false, zone: TimeZoneRules, quirks: QuirkTable = .builtIn,
            configuration: SyncConfiguration = SyncConfiguration(), clockSetAt: Instant? = nil
        ) {
            self.clockSetAt = clockSetAt
            self.meter = meter
            self.advertisedName = advertisedName
            self.highWater = highWater
            self.highWaterRecord = highWaterRecord
            self.fullDownload = fullDownload
            self.zone = zone
            self.quirks = quirks
            self.configuration = configuration
        }
    }

    /// One GATT operation the machine waits for; the key of the one-retry budget.
    enum Operation: Hashable, Sendable {
        case connect
        case pair
        case read(BluetoothUUID)
        case enable(BluetoothUUID)
        case racp(RACPWritePurpose)
        /// A Verio command: done when its reply comes.
        case verio(VerioCommand)
        /// The host's acknowledgement of a Verio data reply (`81`): done when the write completes.
        case ack
        /// Writing the meter clock (CTS or i-SENS): done when the write completes.
        case setClock(BluetoothUUID)
    }

    /// Where the attempt is, with what that point needs. Every case but ``idle``, ``waitingToRetry``
    /// and the three after the download has exactly one operation in flight (``operation``), whose
    /// timer runs.
    enum State: Sendable {
        /// Before ``SyncEvent/start``.
        case idle
        /// Connecting (and discovering the services).
        case connecting
        /// Pairing; `then` is the interrupted state, whose operation is issued again once paired.
        indirect case pairing(then: State)
        /// Reading one Glucose Feature / Device Information characteristic; `rest` follow.
        case readingDeviceInfo(BluetoothUUID, rest: [BluetoothUUID])
        /// Reading the meter clock (Current Time or Date Time).
        case readingClock(BluetoothUUID)
        /// Enabling notifications or indications on one characteristic; `rest` follow. `resume`:
        /// the RACP request this re-enabling interrupted (ATT 0x81/0xFD), written again after it.
        case subscribing(BluetoothUUID, rest: [BluetoothUUID], resume: RACPWritePurpose?, Transfer)
        /// The request for the high-water record (`01 04 01 <hw> <hw>`): is the meter reset?
        case checkingReset(Transfer)
        /// The RACP count (`04 ...`).
        case counting(Transfer)
        /// The RACP report (`01 ...`): records arrive, chunks go to the store.
        case receiving(Transfer)
        /// The Verio procedure: a command (or the acknowledgement of a reply) in flight.
        case verio(VerioStep, VerioProcedure, Transfer)
        /// The pause before the one retry of `then`'s operation.
        indirect case waitingToRetry(then: State)
        /// After a complete download: writing the meter clock, or reading it back.
        case settingClock(ClockStep, Transfer)
        /// The attempt ended; the batch is with the store.
        case committing(Ending, Transfer)
        /// Committed; the link is being closed.
        case disconnecting(Ending, Transfer)
        /// ``SyncAction/finished(_:)`` went out.
        case finished(Ending, Transfer)
        /// Only while a handler holds the state's data (never seen between two events).
        case busy
    }

    /// What the Verio state has in flight.
    enum VerioStep: Sendable {
        /// A command, done when its reply comes.
        case command(VerioCommand)
        /// The acknowledgement of a data reply; `then` follows once written. `shown`: the phase of
        /// the command it acknowledges.
        case acknowledging(then: VerioProcedure.Next, shown: SyncPhase)
    }

    /// The clock write after a complete download.
    struct ClockStep: Sendable {
        /// How the download ended (what the attempt reports once the clock is done).
        var result: SyncResult
        /// The host time the write started (the new skew is measured from it when read back).
        var writtenAt: Instant
        /// The characteristic the clock is written to.
        var written: BluetoothUUID
        /// The clock characteristic being read back after the write (nil: the write is in flight).
        var readingBack: BluetoothUUID?
    }

    /// How the attempt ended, while the store and the link finish.
    struct Ending: Sendable {
        var result: SyncResult
        var failure: SyncFailure?
        /// TaiDoc: the final batch waits for the store's answer about stored content.
        var lookup: SyncBatch?
        /// A chunk was with the store when the attempt ended: the final batch follows its answer
        /// (it needs the chunk's session row). The host time the attempt ended.
        var afterChunk: Instant?
    }

    /// One record of the transfer, with its context.
    struct Record: Sendable {
        var bytes: [UInt8]
        var measurement: GlucoseMeasurement
        var contextBytes: [UInt8]?
        var context: MeasurementContext?
        /// A measurement packet that did not decode came just before: the mark stops here.
        var afterGap = false
        /// The record after this one was not stored (cut off from its context): the mark stops here.
        var cutAfter = false

        var awaitsContext: Bool { self.measurement.contextFollows && self.context == nil }
    }

    /// 65 536 bits: which sequence numbers arrived in this transfer (8 KB once the first arrives).
    struct SequenceBits: Sendable {
        private var words: [UInt64] = []

        func contains(_ seq: UInt16) -> Bool {
            !self.words.isEmpty && self.words[Int(seq >> 6)] & (1 << UInt64(seq & 63)) != 0
        }

        mutating func insert(_ seq: UInt16) {
            if self.words.isEmpty { self.words = [UInt64](repeating: 0, count: 1024) }
            self.words[Int(seq >> 6)] |= 1 << UInt64(seq & 63)
        }
    }

    /// The download's progress: records on their way to the store, the contiguous mark, the
    /// chunk with the store. Carried by every state from the subscriptions on.
    struct Transfer: Sendable {
        /// The RACP count (or the Verio plan's), when known.
        var expected: Int?
        /// Records received and kept (repeats excluded).
        var received = 0
        /// Records received and not yet handed to the store (at most about one chunk).
        var pending: [Record] = []
        var pendingIndex: [UInt16: Int] = [:]
        /// When the oldest pending record arrived.
        var chunkStarted: Instant?
        var seen = SequenceBits()
        /// Highest sequence number handed to the store in this attempt.
        var maxKept: UInt16?
        /// The contiguous mark (see the type's documentation), and what it was before the chunk in flight.
        var contiguousMark: UInt16?
        var markBeforeChunk: UInt16?
        var lastKept: UInt16?
        var contiguityBroken = false
        /// A measurement packet did not decode: the next record follows a gap.
        var gapPending = false
        var chunkInFlight = false
        /// The session row the store made for the first batch of the attempt.
        var sessionID: Int64?
        /// The highest sequence number the attempt's batches stored in the current epoch, per the store.
        var storedEarlier: UInt16?
        /// The next batch opens a new epoch (the meter was found reset).
        var resetToCommit = false
        var chunksCommitted = 0
        var orphanContexts: [UInt16: ([UInt8], MeasurementContext)] = [:]
        var lastMeasurementSequence: UInt16?
        /// The report request was written in this attempt. Records before it are the rest of an
        /// earlier procedure (a gateway killed mid-report leaves the meter sending): they come in
        /// no order the mark can trust, so they are skipped and the report fetches them.
        var reportAsked = false
        /// The meter rejected the filtered report: everything is asked for.
        var reportFilterDropped = false
        /// The meter no longer holds the record at the high-water mark: a full download into a new epoch.
        var resetDetected = false
        /// The high-water record as the meter sent it for the reset check.
        var resetCheckRecord: [UInt8]?
    }

    /// What the attempt learned about the meter and the link, session-wide (where the attempt is
    /// lives in ``State``).
    struct Attempt: Sendable {
        var started = Instant(epochMillis: 0)
        /// What the meter said about itself (DIS); the address only until it is read.
        var identity: MeterIdentity
        /// The quirk-table row for the meter (the standard row until DIS is read).
        var profile: MeterProfile
        var services = MeterServices(characteristics: [])
        var procedure = MeterProcedure.gls
        /// The clock characteristic chosen after DIS.
        var clockUUID: BluetoothUUID?
        var connected = false
        /// Operations retried once already, and whether pairing was tried.
        var retried: Set<Operation> = []
        var pairingUsed = false
        var features: UInt16?
        var clock: MeterClockSample?
        var anomalies = SyncAnomalySummary()
        var batch: SyncBatch?
        var session: SyncSessionRecord?
        var clockSetting: ClockSetting?
    }

    /// A record waiting for its context holds back a chunk only while it is among the last this
    /// many records; further back, its context is not coming (it is stored without it).
    static let contextPatience = 8
    /// Contexts waiting for their measurement are held up to this many; more are orphans at once.
    static let orphanContextLimit = 256

    public let context: Context
    private var state: State = .idle
    private var attempt: Attempt
    /// The phase last published (the phase of ``state`` between two events).
    public private(set) var phase: SyncPhase = .idle

    public init(_ context: Context) {
        self.context = context
        let identity = MeterIdentity(id: context.meter, name: context.advertisedName)
        self.attempt = Attempt(identity: identity, profile: context.quirks.profile(for: identity))
    }

    // MARK: - What the machine shows

    /// What the meter said about itself (DIS); the address only until it is read.
    public var identity: MeterIdentity { self.attempt.identity }
    /// The quirk-table row for the meter (the standard row until DIS is read).
    public var profile: MeterProfile { self.attempt.profile }
    /// The anomalies so far, counted per kind, the first few in full.
    public var anomalySummary: SyncAnomalySummary { self.attempt.anomalies }
    /// The first anomalies (at most ``SyncAnomalySummary/sampleLimit``).
    public var anomalies: [SyncAnomaly] { self.attempt.anomalies.samples }
    /// The meter clock as read, if it was.
    public var clock: MeterClockSample? { self.attempt.clock }
    /// Glucose Feature bits, if read.
    public var features: UInt16? { self.attempt.features }
    /// The last batch handed to the store (after the attempt ended: the final one).
    public var batch: SyncBatch? { self.attempt.batch }
    /// The session as finally recorded (after ``SyncAction/finished(_:)``).
    public var session: SyncSessionRecord? { self.attempt.session }
    /// How the meter is downloaded (known once connected).
    public var procedure: MeterProcedure { self.attempt.procedure }
    /// The clock set after the download, if it was.
    public var clockSetting: ClockSetting? { self.attempt.clockSetting }
    /// The RACP count, when the meter answered it.
    public var expected: Int? { self.state.transfer?.expected }
    /// Records received and kept so far (repeats excluded).
    public var received: Int { self.state.transfer?.received ?? 0 }
    /// The contiguous mark (see the type's documentation).
    public var contiguousMark: UInt16? { self.state.transfer?.contiguousMark }
    /// Chunks committed in this attempt.
    public var chunksCommitted: Int { self.state.transfer?.chunksCommitted ?? 0 }
    /// The meter no longer holds the record at the high-water mark: a full download into a new epoch.
    public var resetDetected: Bool { self.state.transfer?.resetDetected ?? false }

    /// Whether the machine is between ``SyncEvent/start`` and its final phase.
    public var isActive: Bool {
        switch self.phase {
        case .idle, .done, .failed: false
        default: true
        }
    }

    /// The characteristic the meter's clock can be set through: Current Time 0x2A2B in the Current
    /// Time Service with write, or (on a meter whose profile's clock is ``MeterClock/vendorISENS``)
    /// the vendor time 0xFFF1.
    public var settableClock: BluetoothUUID? {
        if let cts = self.attempt.services.characteristic(.currentTime), cts.service == .currentTimeService,
            cts.properties.contains(.write)
        {
            return .currentTime
        }
        if self.attempt.profile.clock == .vendorISENS, let isens = self.attempt.services.characteristic(.isensTime),
            isens.service == .isensTimeService, !isens.properties.isDisjoint(with: [.write, .writeWithoutResponse])
        {
            return .isensTime
        }
        return nil
    }

    // MARK: - Events

    /// Feeds one event; returns what to do, in order.
    /// - Parameters:
    ///   - event: what happened.
    ///   - now: the host clock (session times, and the host side of the meter clock skew).
    public mutating func handle(_ event: SyncEvent, at now: Instant) -> [SyncAction] {
        var out: [SyncAction] = []
        // Each case takes its data out of the state (`busy` in its place, so that the handler
        // changes the data in place) and the handler returns the next state.
        switch self.state {
        case .idle:
            self.state = self.idle(event, now, &out)
        case .connecting:
            self.state = .busy
            self.state = self.connecting(event, now, &out)
        case .pairing(let then):
            self.state = .busy
            self.state = self.pairing(event, then: then, now, &out)
        case .readingDeviceInfo(let uuid, let rest):
            self.state = .busy
            self.state = self.readingDeviceInfo(event, uuid, rest: rest, now, &out)
        case .readingClock(let uuid):
            self.state = .busy
            self.state = self.readingClock(event, uuid, now, &out)
        case .subscribing(let uuid, let rest, let resume, var t):
            self.state = .busy
            self.state = self.subscribing(event, uuid, rest: rest, resume: resume, &t, now, &out)
        case .checkingReset(var t):
            self.state = .busy
            self.state = self.checkingReset(event, &t, now, &out)
        case .counting(var t):
            self.state = .busy
            self.state = self.counting(event, &t, now, &out)
        case .receiving(var t):
            self.state = .busy
            self.state = self.receiving(event, &t, now, &out)
        case .verio(let step, var plan, var t):
            self.state = .busy
            self.state = self.verio(event, step, &plan, &t, now, &out)
        case .waitingToRetry(let then):
            self.state = .busy
            self.state = self.waitingToRetry(event, then: then, now, &out)
        case .settingClock(let step, var t):
            self.state = .busy
            self.state = self.settingClock(event, step, &t, now, &out)
        case .committing(let ending, var t):
            self.state = .busy
            self.state = self.committing(event, ending, &t, now, &out)
        case .disconnecting(let ending, var t):
            self.state = .busy
            self.state = self.disconnecting(event, ending, &t, now, &out)
        case .finished, .busy:
            break
        }
        return out
    }

    // MARK: - One handler per state

    private mutating func idle(_ event: SyncEvent, _ now: Instant, _ out: inout [SyncAction]) -> State {
        guard case .start = event else { return .idle }
        self.attempt.started = now
        return self.issue(.connecting, &out)
    }

    private mutating func connecting(_ event: SyncEvent, _ now: Instant, _ out: inout [SyncAction]) -> State {
        guard case .connected(let services) = event else { return self.anyState(event, .connecting, now, &out) }
        self.attempt.connected = true
        self.attempt.services = services
        if services.characteristic(Verio.commandCharacteristic)?.service == Verio.service,
            services.characteristic(Verio.replyCharacteristic)?.service == Verio.service,
            !services.has(.recordAccessControlPoint)
        {
            self.attempt.procedure = .verio
            self.attempt.profile = self.context.quirks.profile(for: self.attempt.identity, procedure: .verio)
            self.show(.readingDeviceInfo, &out)
            return self.readDeviceInfo(BluetoothUUID.deviceInformationStrings.filter { services.has($0) }, now, &out)
        }
        guard services.has(.glucoseMeasurement), services.has(.recordAccessControlPoint) else {
            let verio = services.characteristics.contains { $0.service == Verio.service }
            let message = verio
                ? "\(self.context.meter) offers the OneTouch Verio vendor service (\(Verio.service.uuidString)) without its command and reply characteristics, and no Glucose Profile."
                : "\(self.context.meter) has no Glucose Measurement and RACP characteristics; it is not a Glucose Profile meter."
            var t = Transfer()
            return self.end(SyncFailure(.notAGlucoseMeter, message), &t, now, &out)
        }
        let wanted: [BluetoothUUID] = [.glucoseFeature] + BluetoothUUID.deviceInformationStrings
        self.show(.readingDeviceInfo, &out)
        return self.readDeviceInfo(wanted.filter { services.has($0) }, now, &out)
    }

    private mutating func pairing(_ event: SyncEvent, then: State, _ now: Instant, _ out: inout [SyncAction]) -> State {
        switch event {
        case .paired:
            return self.issue(then, &out)
        case .pairingFailed(let error):
            if error.code == .disconnected || error.code == .notConnected {
                return self.operationFailed(.pairing(then: then), .pair, error, now, &out)
            }
            // BlueZ's errors already say "Pairing with <meter> failed: ..."; don't say it twice.
            let message = error.message.hasPrefix("Pairing") ? error.message : "Pairing with \(self.context.meter) failed: \(error.message)"
            var t = then.transfer ?? Transfer()
            return self.end(SyncFailure(.pairingFailed, message), &t, now, &out)
        default:
            return self.anyState(event, .pairing(then: then), now, &out)
        }
    }

    private mutating func readingDeviceInfo(
        _ event: SyncEvent, _ uuid: BluetoothUUID, rest: [BluetoothUUID], _ now: Instant, _ out: inout [SyncAction]
    ) -> State {
        guard case .readCompleted(uuid, let bytes) = event else {
            return self.anyState(event, .readingDeviceInfo(uuid, rest: rest), now, &out)
        }
        self.store(read: uuid, bytes: bytes, now: now)
        return self.readDeviceInfo(rest, now, &out)
    }

    private mutating func readingClock(_ event: SyncEvent, _ uuid: BluetoothUUID, _ now: Instant, _ out: inout [SyncAction]) -> State {
        guard case .readCompleted(uuid, let bytes) = event else { return self.anyState(event, .readingClock(uuid), now, &out) }
        self.store(read: uuid, bytes: bytes, now: now)
        return self.subscribe(now, &out)
    }

    private mutating func subscribing(
        _ event: SyncEvent, _ uuid: BluetoothUUID, rest: [BluetoothUUID], resume: RACPWritePurpose?, _ t: inout Transfer,
        _ now: Instant, _ out: inout [SyncAction]
    ) -> State {
        guard case .notificationsEnabled(uuid) = event else {
            return self.otherEvent(event, &t, racp: nil, now, &out) { .subscribing(uuid, rest: rest, resume: resume, $0) }
        }
        if let resume { return self.issue(Self.racpState(resume, t), &out) }
        return self.nextSubscription(rest, &t, now, &out)
    }

    private mutating func checkingReset(_ event: SyncEvent, _ t: inout Transfer, _ now: Instant, _ out: inout [SyncAction]) -> State {
        guard case .value(.recordAccessControlPoint, let bytes) = event else {
            return self.otherEvent(event, &t, racp: .verify, now, &out, in: State.checkingReset)
        }
        guard let code = self.reportResponse(bytes) else { return .checkingReset(t) }
        switch code {
        case .success, .noRecordsFound:
            if t.resetCheckRecord == self.context.highWaterRecord { return self.startCount(&t, &out) }
            return self.restartAfterReset(&t, &out)  // gone or different: the meter was reset
        default:
            self.note(SyncAnomaly(
                .resetCheckUnavailable, "The meter answered the request for its high-water record with \(code.name); not checked for a reset."))
            return self.startCount(&t, &out)
        }
    }

    private mutating func counting(_ event: SyncEvent, _ t: inout Transfer, _ now: Instant, _ out: inout [SyncAction]) -> State {
        guard case .value(.recordAccessControlPoint, let bytes) = event else {
            return self.otherEvent(event, &t, racp: .count, now, &out, in: State.counting)
        }
        guard let message = self.racpMessage(bytes) else { return .counting(t) }
        if let count = message.numberOfRecords {
            t.expected = Int(count)
            out.append(.publish(.progress(self.context.meter, received: t.received, expected: t.expected)))
            return self.startReport(&t, &out)
        }
        guard let (request, code) = message.response, request == .reportNumberOfStoredRecords else {
            self.unexpectedRACP(message)
            return .counting(t)
        }
        self.note(SyncAnomaly(.countUnavailable, "The meter answered the record count with \(code.name); downloading without a count."))
        return self.startReport(&t, &out)
    }

    private mutating func receiving(_ event: SyncEvent, _ t: inout Transfer, _ now: Instant, _ out: inout [SyncAction]) -> State {
        guard case .value(.recordAccessControlPoint, let bytes) = event else {
            return self.otherEvent(event, &t, racp: .report, now, &out, in: State.receiving)
        }
        guard let code = self.reportResponse(bytes) else { return .receiving(t) }
        switch code {
        case .success, .noRecordsFound:
            return self.end(result: code == .success ? .success : .noNewRecords, &t, now, &out)
        case .opCodeNotSupported:
            return self.end(
                SyncFailure(
                    .reportNotSupported, "\(self.context.meter) does not support the RACP record report (op code not supported).",
                    racpResponseCode: code.rawValue), &t, now, &out)
        case let c where self.usesHighWaterFilter(t)
            && [RACPResponseCode.invalidOperator, .operatorNotSupported, .invalidOperand, .operandNotSupported].contains(c):
            // The meter cannot filter by sequence number: ask for everything once; dedup keeps it safe.
            t.reportFilterDropped = true
            return self.issue(.receiving(t), &out)
        default:
            return self.end(
                SyncFailure(
                    .racpError, "\(self.context.meter) ended the record report with RACP \(code.name) (0x\(String(code.rawValue, radix: 16))).",
                    racpResponseCode: code.rawValue), &t, now, &out)
        }
    }

    private mutating func verio(
        _ event: SyncEvent, _ step: VerioStep, _ plan: inout VerioProcedure, _ t: inout Transfer, _ now: Instant,
        _ out: inout [SyncAction]
    ) -> State {
        switch event {
        case .value(Verio.replyCharacteristic, let bytes):
            guard case .command(let command) = step else { return self.anyState(event, .verio(step, plan, t), now, &out) }
            let reply: VerioReply
            do throws(GlucoseProfileError) {
                reply = try VerioReply(bytes: bytes)
            } catch {
                // A damaged packet: the command's timer runs on, and its one retry asks again.
                self.note(SyncAnomaly(.commandRefused, "A Verio reply did not decode and was ignored: \(error)."))
                return .verio(step, plan, t)
            }
            switch reply {
            case .acknowledgement:
                return .verio(step, plan, t)  // the meter took the command; its reply follows
            case .refused(let status) where status == .notAllowed:
                return self.operationFailed(
                    .verio(step, plan, t), .verio(command),
                    TransportError(.authenticationRequired, "\(self.context.meter) answered \(command.name) with \"not allowed\": it is not bonded to this host."),
                    now, &out)
            case .refused(let status):
                self.note(SyncAnomaly(.commandRefused, "The meter answered \(command.name) with \(status.name) (0x\(String(status.rawValue, radix: 16)))."))
                return self.verioAnswered(command, nil, acknowledge: false, &plan, &t, now, &out)
            case .data(let payload):
                var answer: VerioAnswer?
                do throws(GlucoseProfileError) {
                    answer = try command.answer(payload: payload)
                } catch {
                    self.note(SyncAnomaly(.commandRefused, "The reply to \(command.name) did not decode: \(error)."))
                }
                return self.verioAnswered(command, answer, acknowledge: true, &plan, &t, now, &out)
            }
        case .characteristicWritten(Verio.commandCharacteristic):
            guard case .acknowledging(let next, _) = step else { return .verio(step, plan, t) }
            return self.followVerio(next, &plan, &t, now, &out)
        default:
            return self.otherEvent(event, &t, racp: nil, now, &out) { [plan] in .verio(step, plan, $0) }
        }
    }

    private mutating func waitingToRetry(_ event: SyncEvent, then: State, _ now: Instant, _ out: inout [SyncAction]) -> State {
        guard case .timerFired(.retry) = event else { return self.anyState(event, .waitingToRetry(then: then), now, &out) }
        return self.issue(then, &out)
    }

    private mutating func settingClock(
        _ event: SyncEvent, _ step: ClockStep, _ t: inout Transfer, _ now: Instant, _ out: inout [SyncAction]
    ) -> State {
        switch event {
        case .readCompleted(let uuid, let bytes) where uuid == step.readingBack:
            self.clockReadBack(bytes, step, now)
            return self.finish(step.result, nil, &t, now, &out)
        case .characteristicWritten(let uuid) where step.readingBack == nil && uuid == step.written:
            // The write went through: read the clock back when it is readable, else record it as written.
            self.recordClockSet(step, skewAfter: nil)
            if let clock = self.attempt.clockUUID, self.attempt.services.characteristic(clock)?.properties.contains(.read) == true {
                var readBack = step
                readBack.readingBack = clock
                return self.issue(.settingClock(readBack, t), &out)
            }
            return self.finish(step.result, nil, &t, now, &out)
        case .characteristicWriteFailed(let uuid, let error) where step.readingBack == nil && uuid == step.written:
            self.note(SyncAnomaly(.clockNotSet, "Setting the meter clock (\(uuid.shortString)) failed: \(error.message)"))
            return self.finish(step.result, nil, &t, now, &out)
        case .disconnected:
            // The download is complete; only the clock (or its read-back) is lost.
            self.attempt.connected = false
            if self.attempt.clockSetting == nil {
                self.note(SyncAnomaly(.clockNotSet, "\(self.context.meter) disconnected while its clock was being set."))
            }
            return self.finish(step.result, nil, &t, now, &out)
        default:
            return self.anyState(event, .settingClock(step, t), now, &out)
        }
    }

    private mutating func committing(
        _ event: SyncEvent, _ ending: Ending, _ t: inout Transfer, _ now: Instant, _ out: inout [SyncAction]
    ) -> State {
        switch event {
        case .storedLookup(let highest, let known):
            guard let batch = ending.lookup else { return .committing(ending, t) }
            var ending = ending
            ending.lookup = nil
            self.commitNormalized(batch, highest: highest, known: known, &out)
            return .committing(ending, t)
        case .committed(let result):
            if t.chunkInFlight {
                self.chunkCommitted(result, &t, now, &out)
                guard let endedAt = ending.afterChunk else { return .committing(ending, t) }
                var ending = ending
                ending.afterChunk = nil
                return self.commitFinal(ending, &t, endedAt, &out)
            }
            out.append(.publish(.committed(self.context.meter, result)))
            self.attempt.session = result.session
            return self.afterCommit(ending, t, &out)
        case .commitFailed(let error):
            if t.chunkInFlight {
                var failure = self.chunkFailed(error, &t)
                guard let endedAt = ending.afterChunk else { return self.end(failure, &t, now, &out) }
                failure.message += ending.failure.map { " (after: \($0.message))" } ?? ""
                return self.commitFinal(Ending(result: .failed, failure: failure), &t, endedAt, &out)
            }
            let failure = SyncFailure(.storeError, "Readings from \(self.context.meter) could not be stored: \(error.message)")
            var record = self.attempt.batch?.session ?? SyncSessionRecord(meter: self.context.meter, started: self.attempt.started, result: .failed)
            record.result = .failed
            record.error = failure.message + (ending.failure.map { " (after: \($0.message))" } ?? "")
            self.attempt.session = record
            return self.afterCommit(Ending(result: .failed, failure: failure), t, &out)
        default:
            return self.anyState(event, .committing(ending, t), now, &out)
        }
    }

    private mutating func disconnecting(
        _ event: SyncEvent, _ ending: Ending, _ t: inout Transfer, _ now: Instant, _ out: inout [SyncAction]
    ) -> State {
        switch event {
        case .disconnectCompleted:
            return self.finalize(ending, t, &out)
        case .disconnected:
            self.attempt.connected = false
            return self.finalize(ending, t, &out)
        default:
            return self.anyState(event, .disconnecting(ending, t), now, &out)
        }
    }

    /// What a state carrying the transfer does with an event other than its own answer: records,
    /// contexts and chunk answers go to the transfer, the rest to ``anyState(_:_:_:_:)``.
    /// `state` rebuilds the state around the transfer.
    private mutating func otherEvent(
        _ event: SyncEvent, _ t: inout Transfer, racp: RACPWritePurpose?, _ now: Instant, _ out: inout [SyncAction],
        in state: (Transfer) -> State
    ) -> State {
        switch self.transferEvent(event, &t, racp: racp, now, &out) {
        case .handled: state(t)
        case .next(let next): next
        case .notMine: self.anyState(event, state(t), now, &out)
        }
    }

    /// What every state does with an event its own handler does not take: the in-flight
    /// operation's failure and timeout, the link dropping, an abort, stray packets, the answer
    /// about a chunk.
    private mutating func anyState(_ event: SyncEvent, _ current: State, _ now: Instant, _ out: inout [SyncAction]) -> State {
        switch event {
        case .disconnected(let reason):
            let wasConnected = self.attempt.connected
            self.attempt.connected = false
            switch self.phase {
            case .idle, .done, .failed, .committing, .disconnecting:
                return current
            default:
                guard wasConnected || current.operation != .connect else { return current }
                let why = reason.map { " (\($0))" } ?? ""
                var t = current.transfer ?? Transfer()
                return self.end(SyncFailure(.meterDisconnected, "\(self.context.meter) disconnected before the transfer finished\(why)."), &t, now, &out)
            }

        case .abort(let reason):
            switch self.phase {
            case .idle, .done, .failed, .committing, .disconnecting:
                return current
            default:
                var t = current.transfer ?? Transfer()
                return self.end(
                    SyncFailure(.aborted, "Sync of \(self.context.meter) was stopped: \(reason)."), &t, now, &out,
                    abortRACP: current.racpPurpose != nil && self.attempt.connected)
            }

        case .timerFired(.operation):
            guard let op = current.operation, self.isActive else { return current }
            return self.timedOut(current, op, now, &out)

        case .connectFailed(let error):
            guard current.operation == .connect else { return current }
            return self.operationFailed(current, .connect, error, now, &out)
        case .readFailed(let uuid, let error):
            guard current.operation == .read(uuid) else { return current }
            return self.operationFailed(current, .read(uuid), error, now, &out)
        case .notificationsFailed(let uuid, let error):
            guard current.operation == .enable(uuid) else { return current }
            return self.operationFailed(current, .enable(uuid), error, now, &out)
        case .writeFailed(let purpose, let error):
            guard current.operation == .racp(purpose) else { return current }
            return self.operationFailed(current, .racp(purpose), error, now, &out)
        case .characteristicWriteFailed(Verio.commandCharacteristic, let error):
            // A Verio command or acknowledgement (a clock write fails in its own state).
            switch current.operation {
            case let op? where op == .ack: return self.operationFailed(current, op, error, now, &out)
            case .verio(let command)?: return self.operationFailed(current, .verio(command), error, now, &out)
            default: return current
            }

        case .value(let uuid, let bytes):
            if uuid == Verio.replyCharacteristic, self.attempt.procedure == .verio {
                self.strayVerioReply(bytes)
                return current
            }
            if uuid == .recordAccessControlPoint {
                if self.isActive, let message = self.racpMessage(bytes) { self.unexpectedRACP(message) }
                return current
            }
            guard uuid == .glucoseMeasurement || uuid == .glucoseMeasurementContext else { return current }
            // Records between two operations (the pause before a retry) belong to the interrupted transfer.
            var state = current
            guard var t = state.takeTransfer() else { return current }
            _ = self.transferEvent(event, &t, racp: current.racpPurpose, now, &out)
            state.putTransfer(t)
            return state

        case .committed, .commitFailed:
            var state = current
            guard var t = state.takeTransfer() else { return current }
            switch self.transferEvent(event, &t, racp: current.racpPurpose, now, &out) {
            case .next(let next):
                return next
            case .handled, .notMine:
                state.putTransfer(t)
                return state
            }

        default:
            return current
        }
    }

    // MARK: - Steps

    /// Publishes the phase when it changed.
    private mutating func show(_ phase: SyncPhase, _ out: inout [SyncAction]) {
        guard phase != self.phase else { return }
        self.phase = phase
        out.append(.publish(.phaseChanged(self.context.meter, phase)))
    }

    /// Enters a state and issues its operation (with the operation timer).
    private mutating func issue(_ state: State, _ out: inout [SyncAction]) -> State {
        self.show(state.phase, &out)
        let config = self.context.configuration
        let seconds: Double
        switch state {
        case .connecting:
            out.append(.connect)
            seconds = config.connectTimeout
        case .pairing:
            out.append(.pair)
            seconds = config.pairingTimeout
        case .readingDeviceInfo(let uuid, _), .readingClock(let uuid):
            out.append(.read(uuid))
            seconds = config.operationTimeout
        case .subscribing(let uuid, _, _, _):
            out.append(.enableNotifications(uuid))
            seconds = config.operationTimeout
        case .checkingReset(let t), .counting(let t), .receiving(let t):
            let purpose = state.racpPurpose!
            out.append(.writeRACP(self.racpBytes(purpose, t), purpose: purpose))
            seconds = config.racpTimeout
        case .verio(.command(let command), _, _):
            out.append(.write(command.encoded(), to: Verio.commandCharacteristic))
            seconds = config.racpTimeout
        case .verio(.acknowledging, _, _):
            out.append(.write(Verio.acknowledgement, to: Verio.commandCharacteristic))
            seconds = config.operationTimeout
        case .settingClock(let step, _):
            if let uuid = step.readingBack {
                out.append(.read(uuid))
            } else {
                out.append(.write(self.clockValue(for: step.written, at: step.writtenAt), to: step.written))
            }
            seconds = config.operationTimeout
        case .idle, .waitingToRetry, .committing, .disconnecting, .finished, .busy:
            return state
        }
        out.append(.startTimer(.operation, seconds: seconds))
        return state
    }

    /// The next Glucose Feature / DIS read, or what follows the reads.
    private mutating func readDeviceInfo(_ queue: [BluetoothUUID], _ now: Instant, _ out: inout [SyncAction]) -> State {
        if let first = queue.first { return self.issue(.readingDeviceInfo(first, rest: Array(queue.dropFirst())), &out) }
        if self.attempt.procedure == .verio {
            self.attempt.profile = self.context.quirks.profile(for: self.attempt.identity, procedure: .verio)
            out.append(.publish(.identified(self.attempt.identity)))
            self.show(.subscribing, &out)
            var t = Transfer()
            return self.nextSubscription([Verio.replyCharacteristic], &t, now, &out)
        }
        // The meter is identified: its profile is decided here, once, from the quirk table.
        self.attempt.profile = self.context.quirks.profile(for: self.attempt.identity)
        out.append(.publish(.identified(self.attempt.identity)))
        let candidates: [BluetoothUUID] =
            self.attempt.profile.clock == .dateTimeFirst ? [.dateTime, .currentTime] : [.currentTime, .dateTime]
        if let clock = candidates.first(where: { self.attempt.services.has($0) }) {
            self.attempt.clockUUID = clock
            return self.issue(.readingClock(clock), &out)
        }
        return self.subscribe(now, &out)
    }

    /// The Glucose Profile subscriptions: measurements, contexts when offered, RACP.
    private mutating func subscribe(_ now: Instant, _ out: inout [SyncAction]) -> State {
        var queue: [BluetoothUUID] = [.glucoseMeasurement]
        if self.attempt.services.has(.glucoseMeasurementContext) { queue.append(.glucoseMeasurementContext) }
        queue.append(.recordAccessControlPoint)
        self.show(.subscribing, &out)
        var t = Transfer()
        return self.nextSubscription(queue, &t, now, &out)
    }

    private mutating func nextSubscription(
        _ queue: [BluetoothUUID], _ t: inout Transfer, _ now: Instant, _ out: inout [SyncAction]
    ) -> State {
        if let first = queue.first {
            return self.issue(.subscribing(first, rest: Array(queue.dropFirst()), resume: nil, t), &out)
        }
        if self.attempt.procedure == .verio {
            let plan = VerioProcedure(
                highWater: self.context.highWater, highWaterRecord: self.context.highWaterRecord, fullDownload: self.context.fullDownload)
            self.show(.readingClock, &out)
            return self.issue(.verio(.command(VerioProcedure.first), plan, t), &out)
        }
        if self.verifiesHighWater(t) {
            // First the check that the meter still holds the high-water record: only then can the
            // records after it be committed as they arrive (into the right epoch).
            t.resetCheckRecord = nil
            self.show(.counting, &out)
            return self.issue(.checkingReset(t), &out)
        }
        return self.startCount(&t, &out)
    }

    private mutating func startCount(_ t: inout Transfer, _ out: inout [SyncAction]) -> State {
        self.show(.counting, &out)
        return self.issue(.counting(t), &out)
    }

    private mutating func startReport(_ t: inout Transfer, _ out: inout [SyncAction]) -> State {
        t.reportAsked = true
        self.show(.receiving, &out)
        return self.issue(.receiving(t), &out)
    }

    /// The state that writes a RACP request.
    private static func racpState(_ purpose: RACPWritePurpose, _ t: Transfer) -> State {
        switch purpose {
        case .verify: .checkingReset(t)
        case .count: .counting(t)
        case .report, .abort: .receiving(t)
        }
    }

    private func usesHighWaterFilter(_ t: Transfer) -> Bool {
        !self.attempt.profile.downloadsEverything && !self.context.fullDownload && !t.reportFilterDropped
            && !t.resetDetected && (self.context.highWater.map { $0 < UInt16.max } ?? false)
    }

    /// After the delta report, the high-water record itself is asked for again and compared with
    /// the stored one (a reset meter no longer holds it).
    private func verifiesHighWater(_ t: Transfer) -> Bool {
        self.usesHighWaterFilter(t) && self.context.highWaterRecord != nil
    }

    private func racpBytes(_ purpose: RACPWritePurpose, _ t: Transfer) -> [UInt8] {
        let from = (self.context.highWater ?? 0) &+ 1
        switch purpose {
        case .verify:
            // `01 04 01 <hw> <hw>`: the record at the high-water mark, and only it.
            let mark = self.context.highWater ?? 0
            return RACPMessage(
                opCode: .reportStoredRecords, operator: .withinRange, operand: .filter(.sequenceNumber(min: mark, max: mark))
            ).encoded()
        case .count:
            return RACPMessage.count(from: self.usesHighWaterFilter(t) ? from : nil).encoded()
        case .report:
            return RACPMessage.report(from: self.usesHighWaterFilter(t) ? from : nil).encoded()
        case .abort:
            return RACPMessage.abort.encoded()
        }
    }

    private static func text(_ bytes: [UInt8]) -> String? {
        let trimmed = bytes.prefix(while: { $0 != 0 })
        let s = String(decoding: trimmed, as: UTF8.self)
        let cleaned = String(s.unicodeScalars.filter { !$0.properties.isWhitespace || $0 == " " })
        let result = cleaned.drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed()
        return result.isEmpty ? nil : String(result)
    }

    private mutating func store(read uuid: BluetoothUUID, bytes: [UInt8], now: Instant) {
        switch uuid {
        case .glucoseFeature:
            do throws(GlucoseProfileError) {
                self.attempt.features = try GlucoseFeature(bytes: bytes).rawValue
            } catch {
                self.note(SyncAnomaly(.deviceInfoUnreadable, "Glucose Feature did not decode: \(error)."))
            }
        case .manufacturerName: self.attempt.identity.manufacturer = Self.text(bytes)
        case .modelNumber: self.attempt.identity.model = Self.text(bytes)
        case .serialNumber: self.attempt.identity.serialNumber = Self.text(bytes)
        case .firmwareRevision: self.attempt.identity.firmware = Self.text(bytes)
        case self.attempt.clockUUID:
            do throws(GlucoseProfileError) {
                let dt = uuid == .currentTime ? try CurrentTime(bytes: bytes).dateTime : try DateTime(bytes: bytes)
                guard dt.isDateKnown else {
                    self.note(SyncAnomaly(.clockUnreadable, "The meter clock (\(uuid.shortString)) reports an unknown date."))
                    return
                }
                let local = LocalDateTime(
                    year: Int(dt.year), month: Int(dt.month), day: Int(dt.day), hour: Int(dt.hours),
                    minute: Int(dt.minutes), second: Int(dt.seconds))
                self.attempt.clock = MeterClockSample(meterTime: local, hostTime: now)
            } catch {
                self.note(SyncAnomaly(.clockUnreadable, "The meter clock (\(uuid.shortString)) did not decode: \(error)."))
            }
        default: break
        }
    }

    // MARK: - Records

    /// What a state that carries the transfer does with records, contexts and the store's answer
    /// about a chunk.
    private enum Outcome {
        case notMine
        case handled
        case next(State)
    }

    /// Records, contexts and chunk answers. `racp`: the RACP request in flight, if any.
    private mutating func transferEvent(
        _ event: SyncEvent, _ t: inout Transfer, racp: RACPWritePurpose?, _ now: Instant, _ out: inout [SyncAction]
    ) -> Outcome {
        switch event {
        case .value(.glucoseMeasurement, let bytes):
            self.receiveMeasurement(bytes, &t, racp: racp, now, &out)
            return .handled
        case .value(.glucoseMeasurementContext, let bytes):
            self.receiveContext(bytes, &t, racp: racp)
            return .handled
        case .committed(let result) where t.chunkInFlight:
            self.chunkCommitted(result, &t, now, &out)
            return .handled
        case .commitFailed(let error) where t.chunkInFlight:
            let failure = self.chunkFailed(error, &t)
            return .next(self.end(failure, &t, now, &out))
        default:
            return .notMine
        }
    }

    private var acceptsRecords: Bool {
        switch self.phase {
        case .subscribing, .counting, .receiving, .waitingToRetry: true
        default: false
        }
    }

    private mutating func receiveMeasurement(
        _ bytes: [UInt8], _ t: inout Transfer, racp: RACPWritePurpose?, _ now: Instant, _ out: inout [SyncAction]
    ) {
        guard self.acceptsRecords else { return }
        let m: GlucoseMeasurement
        do throws(GlucoseProfileError) {
            var reader = ByteReader(bytes)
            m = try GlucoseMeasurement(parsing: &reader, options: .lenientDateTime)
            if reader.readableBytes > 0 {
                self.note(SyncAnomaly(
                    .malformedMeasurement, sequenceNumber: m.sequenceNumber,
                    "Record \(m.sequenceNumber) has \(reader.readableBytes) trailing bytes; they were ignored."))
            }
        } catch {
            self.note(SyncAnomaly(.malformedMeasurement, "A Glucose Measurement packet was skipped: \(error)."))
            if racp != .verify { t.gapPending = true }
            self.keepWaiting(racp, &out)
            return
        }
        let seq = m.sequenceNumber
        if racp == .verify {
            // The check of the high-water record: compared, never part of the batch.
            if seq == self.context.highWater { t.resetCheckRecord = bytes }
            self.keepWaiting(racp, &out)
            return
        }
        guard t.reportAsked else {
            self.note(SyncAnomaly(
                .recordBeforeReport, sequenceNumber: seq,
                "Record \(seq) came before this sync asked for records (an earlier procedure still sending); skipped, the report fetches it."))
            return
        }
        self.accept(bytes: bytes, measurement: m, &t, racp: racp, now, &out)
    }

    /// A decoded record of the transfer (GLS measurement, or a Verio record read as one): repeats
    /// and conflicts are skipped, the rest waits for its context and its chunk.
    private mutating func accept(
        bytes: [UInt8], measurement m: GlucoseMeasurement, _ t: inout Transfer, racp: RACPWritePurpose?, _ now: Instant,
        _ out: inout [SyncAction]
    ) {
        let seq = m.sequenceNumber
        defer { t.lastMeasurementSequence = seq }
        if seq == t.lastMeasurementSequence {
            self.note(SyncAnomaly(.repeatedRecord, sequenceNumber: seq, "Record \(seq) was sent twice in a row; the repeat was skipped."))
            self.keepWaiting(racp, &out)
            return
        }
        if t.seen.contains(seq) {
            if let i = t.pendingIndex[seq] {
                if t.pending[i].bytes != bytes {
                    self.note(SyncAnomaly(.conflictingRecord, sequenceNumber: seq, "Record \(seq) came again with other content; the first was kept."))
                }
            } else {
                // Already with the store: it cannot be compared any more, only skipped.
                self.note(SyncAnomaly(.conflictingRecord, sequenceNumber: seq, "Record \(seq) came again after it was stored; the first was kept."))
            }
            self.keepWaiting(racp, &out)
            return
        }
        var record = Record(bytes: bytes, measurement: m, afterGap: t.gapPending)
        t.gapPending = false
        if let (contextBytes, context) = t.orphanContexts.removeValue(forKey: seq) {
            record.contextBytes = contextBytes
            record.context = context
        }
        t.seen.insert(seq)
        t.pendingIndex[seq] = t.pending.count
        t.pending.append(record)
        if t.chunkStarted == nil { t.chunkStarted = now }
        t.received += 1
        if t.received <= 256 || t.received % 16 == 0 || t.received == t.expected {
            // Progress for each of the first records, then every 16th: a big download does not
            // send observers an event per record.
            out.append(.publish(.progress(self.context.meter, received: t.received, expected: t.expected)))
        }
        self.keepWaiting(racp, &out)
        self.flushIfDue(&t, now, &out)
    }

    private mutating func receiveContext(_ bytes: [UInt8], _ t: inout Transfer, racp: RACPWritePurpose?) {
        guard self.acceptsRecords else { return }
        let context: MeasurementContext
        do throws(GlucoseProfileError) {
            context = try MeasurementContext(bytes: bytes)
        } catch {
            self.note(SyncAnomaly(.malformedContext, "A Measurement Context packet was skipped: \(error)."))
            return
        }
        let seq = context.sequenceNumber
        // The high-water record's context during the reset check: part of the check, not the batch.
        if racp == .verify { return }
        if let i = t.pendingIndex[seq] {
            if t.pending[i].context != nil {
                self.note(SyncAnomaly(.duplicateContext, sequenceNumber: seq, "Record \(seq) got a second context; the first was kept."))
            } else {
                t.pending[i].context = context
                t.pending[i].contextBytes = bytes
            }
        } else if t.seen.contains(seq) {
            self.note(SyncAnomaly(.orphanContext, sequenceNumber: seq, "A context for record \(seq) came after the record was stored."))
        } else if t.orphanContexts[seq] != nil {
            self.note(SyncAnomaly(.duplicateContext, sequenceNumber: seq, "Record \(seq) got a second context; the first was kept."))
        } else if t.orphanContexts.count >= Self.orphanContextLimit {
            self.note(SyncAnomaly(.orphanContext, sequenceNumber: seq, "A context for record \(seq) came without its measurement."))
        } else {
            t.orphanContexts[seq] = (bytes, context)
        }
    }

    /// A record arrived while a RACP answer is awaited: the gap timer starts over.
    private func keepWaiting(_ racp: RACPWritePurpose?, _ out: inout [SyncAction]) {
        if racp != nil {
            out.append(.startTimer(.operation, seconds: self.context.configuration.racpTimeout))
        }
    }

    /// Decodes a RACP indication (a malformed one is an anomaly).
    private mutating func racpMessage(_ bytes: [UInt8]) -> RACPMessage? {
        do throws(GlucoseProfileError) {
            return try RACPMessage(bytes: bytes)
        } catch {
            self.note(SyncAnomaly(.malformedRACP, "A RACP indication was ignored: \(error)."))
            return nil
        }
    }

    /// The code of a response to the record report request (the reset check's or the report's);
    /// nil, and an anomaly when there is one to count, for anything else.
    private mutating func reportResponse(_ bytes: [UInt8]) -> RACPResponseCode? {
        guard let message = self.racpMessage(bytes) else { return nil }
        guard message.numberOfRecords == nil, let (request, code) = message.response, request == .reportStoredRecords else {
            self.unexpectedRACP(message)
            return nil
        }
        return code
    }

    /// A RACP indication the state in flight was not waiting for.
    private mutating func unexpectedRACP(_ message: RACPMessage) {
        if message.numberOfRecords != nil {
            self.note(SyncAnomaly(.unexpectedRACP, "The meter sent a record count nobody asked for."))
            return
        }
        guard let (request, _) = message.response else {
            self.note(SyncAnomaly(.unexpectedRACP, "The meter sent a RACP request (op code \(message.opCode.rawValue)) instead of a response."))
            return
        }
        guard request != .abortOperation else { return }  // The answer to our own abort; nothing waits for it.
        self.note(SyncAnomaly(.unexpectedRACP, "The meter sent a RACP response to op code \(request.rawValue) that nothing was waiting for."))
    }

    // MARK: - Verio

    /// A Verio reply with no command waiting for it.
    private mutating func strayVerioReply(_ bytes: [UInt8]) {
        guard self.isActive else { return }
        do throws(GlucoseProfileError) {
            if try VerioReply(bytes: bytes) != .acknowledgement {
                self.note(SyncAnomaly(.unexpectedRACP, "The meter sent a Verio reply nothing was waiting for."))
            }
        } catch {
            self.note(SyncAnomaly(.commandRefused, "A Verio reply did not decode and was ignored: \(error)."))
        }
    }

    /// Takes in one answer (nil: refused or undecodable) and moves to what the procedure says next,
    /// after acknowledging a data reply.
    private mutating func verioAnswered(
        _ command: VerioCommand, _ answer: VerioAnswer?, acknowledge: Bool, _ plan: inout VerioProcedure, _ t: inout Transfer,
        _ now: Instant, _ out: inout [SyncAction]
    ) -> State {
        switch command {
        case .readClock:
            if case .clock(let seconds)? = answer {
                self.attempt.clock = MeterClockSample(
                    meterTime: LocalDateTime(secondsSinceEpoch: Verio.clockEpoch + Int64(seconds)), hostTime: now)
            } else {
                self.note(SyncAnomaly(.clockUnreadable, "The Verio clock could not be read; times are assumed correct."))
            }
        case .record(let number) where plan.isCheck(number):
            if answer == nil {
                self.note(SyncAnomaly(
                    .resetCheckUnavailable, "The meter did not give its high-water record \(number) back; not checked for a reset."))
            }
        case .record(let number):
            if case .record(_, let record)? = answer {
                self.acceptVerio(number, record, &t, now, &out)
            } else {
                // Not stored: the mark stops before it, so the next attempt asks for it again.
                t.gapPending = true
            }
        case .highestRecordNumber, .recordCount:
            break
        }
        let next = plan.next(after: command, answer: answer)
        if plan.resetDetected && !t.resetDetected {
            t.resetDetected = true
            t.resetToCommit = true
        }
        if t.expected == nil, let expected = plan.expected {
            t.expected = expected
            out.append(.publish(.progress(self.context.meter, received: t.received, expected: expected)))
        }
        if acknowledge {
            return self.issue(.verio(.acknowledging(then: next, shown: self.phase), plan, t), &out)
        }
        return self.followVerio(next, &plan, &t, now, &out)
    }

    private mutating func followVerio(
        _ next: VerioProcedure.Next, _ plan: inout VerioProcedure, _ t: inout Transfer, _ now: Instant, _ out: inout [SyncAction]
    ) -> State {
        switch next {
        case .send(let command):
            return self.issue(.verio(.command(command), plan, t), &out)
        case .done:
            return self.end(result: t.received > 0 ? .success : .noNewRecords, &t, now, &out)
        case .fail(let why):
            return self.end(SyncFailure(.reportNotSupported, "\(self.context.meter): \(why)."), &t, now, &out)
        }
    }

    /// One Verio record, read as a Glucose Measurement (``VerioRecord/measurement(sequenceNumber:)``:
    /// HI and LO as GLS sends them) and stored with its 11 payload bytes as received.
    private mutating func acceptVerio(
        _ number: UInt16, _ record: VerioRecord, _ t: inout Transfer, _ now: Instant, _ out: inout [SyncAction]
    ) {
        guard record.isBloodGlucose else {
            self.note(SyncAnomaly(
                .notBloodGlucose, sequenceNumber: number, "Record \(number) is not a blood-glucose result (bytes 6-10 not zero); skipped."))
            return
        }
        self.accept(bytes: record.encoded(), measurement: record.measurement(sequenceNumber: number), &t, racp: nil, now, &out)
    }

    // MARK: - Setting the meter clock

    /// The procedure, once the services are known.
    private var knownProcedure: MeterProcedure? {
        self.attempt.services.characteristics.isEmpty ? nil : self.attempt.procedure
    }

    /// Where to write the clock after the download: when setting is on, the meter is connected, its
    /// clock can be set, and it is unset/unreadable or off by more than the tolerance.
    private func clockToSet(_ now: Instant) -> BluetoothUUID? {
        let configuration = self.context.configuration
        guard configuration.setMeterClock, self.attempt.connected, let uuid = self.settableClock else { return nil }
        if let clock = self.attempt.clock {
            let skew = TimeResolver.skew(of: clock, in: self.context.zone)
            guard Double(abs(skew)) > configuration.clockToleranceSeconds else { return nil }
        }
        return uuid
    }

    /// The meter's form of the local time at `instant`.
    private func clockValue(for uuid: BluetoothUUID, at instant: Instant) -> [UInt8] {
        let local = self.context.zone.localTime(at: instant)
        let time = DateTime(
            year: UInt16(clamping: local.year), month: UInt8(clamping: local.month), day: UInt8(clamping: local.day),
            hours: UInt8(clamping: local.hour), minutes: UInt8(clamping: local.minute), seconds: UInt8(clamping: local.second))
        guard uuid == .currentTime else { return ISensTime(dateTime: time).encoded() }
        // Adjust Reason: manual update; also "time zone change" when the skew is a whole number of
        // quarter hours (within the tolerance), as after travel or a zone change.
        var reason: UInt8 = 0x01
        if let clock = self.attempt.clock {
            let skew = TimeResolver.skew(of: clock, in: self.context.zone)
            let quarters = (Double(skew) / 900).rounded()
            if quarters != 0, abs(Double(skew) - quarters * 900) <= self.context.configuration.clockToleranceSeconds {
                reason |= 0x04
            }
        }
        let days = (local.secondsSinceEpoch >= 0 ? local.secondsSinceEpoch : local.secondsSinceEpoch - 86_399) / 86_400
        let weekday = UInt8(((days + 3) % 7 + 7) % 7 + 1)  // 1970-01-01 was a Thursday; 1 Monday … 7 Sunday
        return CurrentTime(dateTime: time, dayOfWeek: weekday, fractions256: 0, adjustReason: reason).encoded()
    }

    private mutating func clockReadBack(_ bytes: [UInt8], _ step: ClockStep, _ now: Instant) {
        do throws(GlucoseProfileError) {
            let dt = self.attempt.clockUUID == .currentTime ? try CurrentTime(bytes: bytes).dateTime : try DateTime(bytes: bytes)
            let local = LocalDateTime(
                year: Int(dt.year), month: Int(dt.month), day: Int(dt.day), hour: Int(dt.hours), minute: Int(dt.minutes),
                second: Int(dt.seconds))
            if dt.isDateKnown {
                self.recordClockSet(
                    step, skewAfter: TimeResolver.skew(of: MeterClockSample(meterTime: local, hostTime: now), in: self.context.zone))
            }
        } catch {
            self.note(SyncAnomaly(.clockUnreadable, "The meter clock read back after setting it did not decode: \(error)."))
        }
    }

    private mutating func recordClockSet(_ step: ClockStep, skewAfter: Int64?) {
        self.attempt.clockSetting = ClockSetting(
            method: self.settableClock == .currentTime ? .currentTime : .isens, at: step.writtenAt,
            skewBeforeSeconds: self.attempt.clock.map { TimeResolver.skew(of: $0, in: self.context.zone) },
            skewAfterSeconds: skewAfter, written: self.context.zone.localTime(at: step.writtenAt))
    }

    // MARK: - Resets

    /// The meter was reset: forget what this attempt received and download everything.
    private mutating func restartAfterReset(_ t: inout Transfer, _ out: inout [SyncAction]) -> State {
        t.resetDetected = true
        t.resetToCommit = true
        t.pending = []
        t.pendingIndex = [:]
        t.chunkStarted = nil
        t.seen = SequenceBits()
        t.received = 0
        t.maxKept = nil
        t.contiguousMark = nil
        t.lastKept = nil
        t.contiguityBroken = false
        t.gapPending = false
        t.orphanContexts = [:]
        t.lastMeasurementSequence = nil
        t.expected = nil
        out.append(.publish(.progress(self.context.meter, received: 0, expected: nil)))
        return self.startCount(&t, &out)
    }

    // MARK: - Errors and retries

    private static func needsPairing(_ error: TransportError) -> Bool {
        if error.code == .authenticationRequired { return true }
        // Insufficient Authentication, Insufficient Authorization, Insufficient Encryption.
        if let att = error.attError, [0x05, 0x08, 0x0F].contains(att) { return true }
        return false
    }

    /// The operation of `current` failed.
    private mutating func operationFailed(
        _ current: State, _ op: Operation, _ error: TransportError, _ now: Instant, _ out: inout [SyncAction]
    ) -> State {
        var t = current.transfer ?? Transfer()
        if case .settingClock(let step, _) = current {
            if error.code == .disconnected || error.code == .notConnected { self.attempt.connected = false }
            return self.clockStepFailed(op, error.message, step, &t, now, &out)
        }
        if error.code == .disconnected || error.code == .notConnected {
            self.attempt.connected = false
            return self.end(SyncFailure(.meterDisconnected, "\(self.context.meter) disconnected during \(self.phase.name): \(error.message)"), &t, now, &out)
        }
        if error.code == .cancelled {
            return self.end(SyncFailure(.aborted, "Sync of \(self.context.meter) was cancelled during \(self.phase.name)."), &t, now, &out)
        }
        if error.code == .authenticationFailed, op == .pair {
            return self.end(SyncFailure(.pairingFailed, "\(self.context.meter) rejected the bond: \(error.message)"), &t, now, &out)
        }
        // AuthenticationFailed outside Pair (a connect or read with a bond the meter no longer has)
        // means the meter has to be paired again.
        if Self.needsPairing(error) || error.code == .authenticationFailed {
            guard !self.attempt.pairingUsed, op != .pair else {
                return self.end(
                    SyncFailure(.pairingRequired, "\(self.context.meter) still requires pairing: \(error.message)", attError: error.attError),
                    &t, now, &out)
            }
            self.attempt.pairingUsed = true
            return self.issue(.pairing(then: current.resumedAfterPairing), &out)
        }
        if error.code == .timeout {
            return self.timedOut(current, op, now, &out)
        }
        if case .racp(let purpose) = op, let att = error.attError {
            if att == 0x80 || att == 0xFE {
                guard !self.attempt.retried.contains(op) else {
                    return self.end(
                        SyncFailure(
                            .procedureAlreadyInProgress,
                            "\(self.context.meter) kept answering \"procedure already in progress\" (ATT 0x\(String(att, radix: 16))) after abort and a retry.",
                            attError: att), &t, now, &out)
                }
                self.attempt.retried.insert(op)
                out.append(.writeRACP(self.racpBytes(.abort, t), purpose: .abort))
                return self.scheduleRetry(current, &out)
            }
            if att == 0x81 || att == 0xFD {
                guard !self.attempt.retried.contains(op) else {
                    return self.end(
                        SyncFailure(
                            .cccdImproperlyConfigured,
                            "\(self.context.meter) reports RACP indications not enabled (ATT 0x\(String(att, radix: 16))) even after re-enabling them.",
                            attError: att), &t, now, &out)
                }
                self.attempt.retried.insert(op)
                return self.issue(.subscribing(.recordAccessControlPoint, rest: [], resume: purpose, t), &out)
            }
        }
        switch (op, current) {
        case (.read(let uuid), .readingDeviceInfo(_, let rest)):
            self.note(SyncAnomaly(.deviceInfoUnreadable, "Reading \(uuid.shortString) failed: \(error.message)"))
            return self.readDeviceInfo(rest, now, &out)
        case (.read(let uuid), .readingClock):
            self.note(SyncAnomaly(.clockUnreadable, "Reading \(uuid.shortString) failed: \(error.message)"))
            return self.subscribe(now, &out)
        case (.enable(.glucoseMeasurementContext), .subscribing(_, let rest, _, _)):
            self.note(SyncAnomaly(.missingContext, "Context notifications could not be enabled: \(error.message)"))
            return self.nextSubscription(rest, &t, now, &out)
        case (.racp(.count), _):
            self.note(SyncAnomaly(.countUnavailable, "The record count failed: \(error.message)"))
            return self.startReport(&t, &out)
        case (.connect, _) where !self.attempt.retried.contains(.connect) && error.code == .connectFailed:
            self.attempt.retried.insert(.connect)
            return self.scheduleRetry(current, &out)
        default:
            let code: SyncFailure.Code = error.code == .attError ? .attError : .transportError
            let what = error.attError.map { "ATT error 0x\(String($0, radix: 16))" } ?? error.code.rawValue
            return self.end(
                SyncFailure(code, "\(self.context.meter) failed during \(self.phase.name) (\(what)): \(error.message)", attError: error.attError),
                &t, now, &out)
        }
    }

    /// The operation of `current` timed out.
    private mutating func timedOut(_ current: State, _ op: Operation, _ now: Instant, _ out: inout [SyncAction]) -> State {
        var t = current.transfer ?? Transfer()
        if case .settingClock(let step, _) = current {
            return self.clockStepFailed(op, "timed out", step, &t, now, &out)
        }
        if op == .pair {
            return self.end(SyncFailure(.pairingRequired, "Pairing with \(self.context.meter) timed out; was the passkey entered?"), &t, now, &out)
        }
        if op == .racp(.verify) {
            self.note(SyncAnomaly(.resetCheckUnavailable, "The meter did not answer the request for its high-water record; not checked for a reset."))
            out.append(.writeRACP(self.racpBytes(.abort, t), purpose: .abort))
            return self.startCount(&t, &out)
        }
        if self.attempt.retried.contains(op) {
            if op == .racp(.count) {
                self.note(SyncAnomaly(.countUnavailable, "The record count timed out twice; downloading without a count."))
                out.append(.writeRACP(self.racpBytes(.abort, t), purpose: .abort))
                return self.startReport(&t, &out)
            }
            return self.end(SyncFailure(.timeout, "\(self.context.meter) stopped answering during \(self.phase.name) (timed out twice)."), &t, now, &out)
        }
        self.attempt.retried.insert(op)
        if case .racp = op {
            // The meter may still be inside the procedure: stop it before asking again.
            out.append(.writeRACP(self.racpBytes(.abort, t), purpose: .abort))
            return self.scheduleRetry(current, &out)
        }
        return self.issue(current, &out)
    }

    /// The pause before the one retry of `current`'s operation.
    private mutating func scheduleRetry(_ current: State, _ out: inout [SyncAction]) -> State {
        self.show(.waitingToRetry, &out)
        out.append(.cancelTimer(.operation))
        out.append(.startTimer(.retry, seconds: self.context.configuration.retryDelay))
        return .waitingToRetry(then: current)
    }

    /// The clock write or its read-back failed or timed out: the download still ended as it did.
    private mutating func clockStepFailed(
        _ op: Operation, _ why: String, _ step: ClockStep, _ t: inout Transfer, _ now: Instant, _ out: inout [SyncAction]
    ) -> State {
        if case .setClock(let uuid) = op {
            self.note(SyncAnomaly(.clockNotSet, "Setting the meter clock (\(uuid.shortString)) failed: \(why)"))
        } else {
            self.note(SyncAnomaly(.clockUnreadable, "The meter clock could not be read back after setting it: \(why)"))
        }
        return self.finish(step.result, nil, &t, now, &out)
    }

    // MARK: - Ending

    /// The download is complete: the meter's clock when it is off and can be set, then the commit.
    private mutating func end(result: SyncResult, _ t: inout Transfer, _ now: Instant, _ out: inout [SyncAction]) -> State {
        if let uuid = self.clockToSet(now) {
            return self.issue(.settingClock(ClockStep(result: result, writtenAt: now, written: uuid), t), &out)
        }
        return self.finish(result, nil, &t, now, &out)
    }

    private mutating func end(
        _ failure: SyncFailure, _ t: inout Transfer, _ now: Instant, _ out: inout [SyncAction], abortRACP: Bool = false
    ) -> State {
        self.finish(failure.result, failure, &t, now, &out, abortRACP: abortRACP)
    }

    private mutating func finish(
        _ result: SyncResult, _ failure: SyncFailure?, _ t: inout Transfer, _ now: Instant, _ out: inout [SyncAction],
        abortRACP: Bool = false
    ) -> State {
        out.append(.cancelTimer(.operation))
        out.append(.cancelTimer(.retry))
        if abortRACP { out.append(.writeRACP(self.racpBytes(.abort, t), purpose: .abort)) }
        for (seq, _) in t.orphanContexts.sorted(by: { $0.key < $1.key }) {
            self.note(SyncAnomaly(.orphanContext, sequenceNumber: seq, "A context for record \(seq) came without its measurement."))
        }
        t.orphanContexts = [:]
        self.show(.committing, &out)
        var ending = Ending(result: result, failure: failure)
        if t.chunkInFlight {
            // The final batch follows the chunk with the store (it needs the chunk's session row).
            ending.afterChunk = now
            return .committing(ending, t)
        }
        return self.commitFinal(ending, &t, now, &out)
    }

    /// The records not handed over yet, the mark and the session as the attempt ended.
    private mutating func commitFinal(_ ending: Ending, _ t: inout Transfer, _ now: Instant, _ out: inout [SyncAction]) -> State {
        let newestFirst = self.attempt.profile.sequenceOrder == .newestFirst
        // More than a chunk left (the meter was faster than the store): it goes in chunks first,
        // so no one commit holds more than a chunk.
        if !newestFirst, t.pending.count > self.context.configuration.chunkRecords, self.sendChunk(&t, now, &out) {
            var waiting = ending
            waiting.afterChunk = now
            return .committing(waiting, t)
        }
        // A transfer that ended early may have been cut between a record and its context. Such a
        // record is not stored and the mark stops before it, so the next attempt fetches it again,
        // context and all (stored now, its context would be lost to deduplication). After a
        // complete transfer the context is not coming: the record is kept without it.
        let result = ending.result
        let complete = result == .success || result == .noNewRecords
        var kept: [Record] = []
        kept.reserveCapacity(t.pending.count)
        for r in t.pending {
            guard r.awaitsContext else {
                kept.append(r)
                continue
            }
            let seq = r.measurement.sequenceNumber
            if complete {
                self.note(SyncAnomaly(.missingContext, sequenceNumber: seq, "Record \(seq) announced a context that never came; kept without it."))
                kept.append(r)
            } else {
                self.note(SyncAnomaly(.missingContext, sequenceNumber: seq, "Record \(seq) announced a context that had not come when the transfer ended; not stored, fetched again next time."))
                // The mark stops before it: after the record kept last, or where it is now.
                if kept.isEmpty { t.contiguityBroken = true } else { kept[kept.count - 1].cutAfter = true }
            }
        }
        t.pending = []
        t.pendingIndex = [:]
        t.chunkStarted = nil
        let readings = self.readings(for: kept, &t)
        var highWater: UInt16?
        if newestFirst {
            highWater = nil  // numbered by the store after the lookup
        } else if complete {
            if t.resetDetected {
                highWater = t.maxKept
            } else if self.usesHighWaterFilter(t) {
                highWater = [self.context.highWater, t.maxKept].compactMap { $0 }.max()
            } else {
                highWater = t.maxKept ?? self.context.highWater
            }
        } else {
            // Interrupted: the records up to the contiguous mark are stored; the next attempt asks
            // for the ones after it.
            highWater = t.contiguousMark
        }
        var session = self.runningSession(t, now)
        session.ended = now
        session.result = result
        session.error = ending.failure?.message
        let batch = SyncBatch(
            meter: self.attempt.identity, features: self.attempt.features, readings: readings, newHighWater: highWater,
            session: session, meterReset: t.resetToCommit, isFinal: true, highestReceived: t.maxKept,
            storedEarlier: t.storedEarlier, procedure: self.knownProcedure,
            clockSettable: self.knownProcedure.map { _ in self.settableClock != nil })
        t.resetToCommit = false
        self.attempt.session = session
        var committing = ending
        committing.afterChunk = nil
        if newestFirst {
            // Numbers identify nothing: ask the store which records it holds by content first.
            committing.lookup = batch
            out.append(.lookUpStored(readings.map(ReadingContent.init)))
        } else {
            self.attempt.batch = batch
            out.append(.commit(batch))
        }
        return .committing(committing, t)
    }

    /// The session so far: the store's counts of the chunks committed, this machine's of the rest.
    private func runningSession(_ t: Transfer, _ now: Instant) -> SyncSessionRecord {
        var session = SyncSessionRecord(
            id: t.sessionID, meter: self.context.meter, started: self.attempt.started, result: .running, expected: t.expected,
            received: t.received, clockSet: self.attempt.clockSetting)
        if let stored = self.attempt.session, stored.id != nil {
            session.stored = stored.stored
            session.duplicates = stored.duplicates
            session.sequenceResets = stored.sequenceResets
        }
        return session
    }

    /// Readings for records handed to the store, in order; moves the contiguous mark over them.
    private mutating func readings(for records: [Record], _ t: inout Transfer) -> [Reading] {
        let builder = ReadingBuilder(
            meter: self.context.meter, profile: self.attempt.profile,
            resolver: TimeResolver(zone: self.context.zone, clock: self.attempt.clock), recordCount: t.expected)
        // A clock that cannot be read but that a sync set: records stamped since then are on the corrected clock.
        var corrected = builder
        corrected.resolver = TimeResolver(zone: self.context.zone, skewSeconds: 0)
        let setLocal = self.attempt.clock == nil ? self.context.clockSetAt.map { self.context.zone.localTime(at: $0) } : nil
        var readings: [Reading] = []
        readings.reserveCapacity(records.count)
        for r in records {
            let seq = r.measurement.sequenceNumber
            if r.afterGap || t.lastKept.map({ seq <= $0 }) == true { t.contiguityBroken = true }
            if !t.contiguityBroken { t.contiguousMark = seq }
            if r.cutAfter { t.contiguityBroken = true }
            t.lastKept = max(t.lastKept ?? seq, seq)
            t.maxKept = max(t.maxKept ?? seq, seq)
            let time = r.measurement.baseTime
            let stamped = LocalDateTime(
                year: Int(time.year), month: Int(time.month), day: Int(time.day), hour: Int(time.hours), minute: Int(time.minutes),
                second: Int(time.seconds))
            let chosen = setLocal.map { stamped >= $0 } == true ? corrected : builder
            readings.append(
                chosen.reading(measurementBytes: r.bytes, measurement: r.measurement, contextBytes: r.contextBytes, context: r.context))
        }
        return readings
    }

    /// Hands the records ready so far to the store as a chunk, when one is due and none is with
    /// the store: ``SyncConfiguration/chunkRecords`` records, or the oldest pending one arrived
    /// ``SyncConfiguration/chunkSeconds`` ago.
    private mutating func flushIfDue(_ t: inout Transfer, _ now: Instant, _ out: inout [SyncAction]) {
        guard !t.chunkInFlight, self.acceptsRecords, !t.pending.isEmpty, self.attempt.profile.sequenceOrder != .newestFirst
        else { return }
        let configuration = self.context.configuration
        let age = now.epochMillis - (t.chunkStarted ?? now).epochMillis
        guard t.pending.count >= configuration.chunkRecords || Double(age) >= configuration.chunkSeconds * 1000
        else { return }
        self.sendChunk(&t, now, &out)
    }

    /// Hands up to ``SyncConfiguration/chunkRecords`` pending records to the store as a chunk.
    /// - Returns: whether a chunk went out.
    @discardableResult
    private mutating func sendChunk(_ t: inout Transfer, _ now: Instant, _ out: inout [SyncAction]) -> Bool {
        // A record still waiting for its context holds back itself and what follows.
        var ready = min(t.pending.count, self.context.configuration.chunkRecords)
        let recent = max(0, t.pending.count - Self.contextPatience)
        if recent < ready, let i = t.pending[recent..<ready].firstIndex(where: \.awaitsContext) { ready = i }
        guard ready > 0 else { return false }
        let chunk = Array(t.pending[..<ready])
        t.pending.removeFirst(ready)
        t.pendingIndex = [:]
        for (i, r) in t.pending.enumerated() { t.pendingIndex[r.measurement.sequenceNumber] = i }
        t.chunkStarted = t.pending.isEmpty ? nil : now
        for r in chunk where r.awaitsContext {
            let seq = r.measurement.sequenceNumber
            self.note(SyncAnomaly(.missingContext, sequenceNumber: seq, "Record \(seq) announced a context that did not follow it; kept without it."))
        }
        t.markBeforeChunk = t.contiguousMark
        let readings = self.readings(for: chunk, &t)
        let batch = SyncBatch(
            meter: self.attempt.identity, features: self.attempt.features, readings: readings, newHighWater: t.contiguousMark,
            session: self.runningSession(t, now), meterReset: t.resetToCommit, isFinal: false, highestReceived: t.maxKept,
            storedEarlier: t.storedEarlier, procedure: self.knownProcedure,
            clockSettable: self.knownProcedure.map { _ in self.settableClock != nil })
        t.resetToCommit = false
        t.chunkInFlight = true
        self.attempt.batch = batch
        out.append(.commit(batch))
        return true
    }

    /// The store committed a chunk.
    private mutating func chunkCommitted(_ result: CommitResult, _ t: inout Transfer, _ now: Instant, _ out: inout [SyncAction]) {
        t.chunkInFlight = false
        t.chunksCommitted += 1
        t.sessionID = result.session.id
        t.storedEarlier = result.highestInCurrentEpoch
        self.attempt.session = result.session
        out.append(.publish(.committed(self.context.meter, result)))
        self.flushIfDue(&t, now, &out)
    }

    /// The store could not commit a chunk: the mark goes back to where it was, and the attempt ends
    /// as a storage failure (the next attempt fetches the chunk's records again).
    private mutating func chunkFailed(_ error: StoreError, _ t: inout Transfer) -> SyncFailure {
        t.chunkInFlight = false
        t.contiguousMark = t.markBeforeChunk
        t.contiguityBroken = true
        return SyncFailure(.storeError, "Readings from \(self.context.meter) could not be stored: \(error.message)")
    }

    /// Counts an anomaly (the first few are kept in full).
    private mutating func note(_ anomaly: SyncAnomaly) {
        self.attempt.anomalies.add(anomaly)
    }

    /// TaiDoc: drops what is stored already and numbers the rest after the highest stored number.
    private mutating func commitNormalized(
        _ received: SyncBatch, highest: UInt16?, known: Set<ReadingContent>, _ out: inout [SyncAction]
    ) {
        var batch = received
        let (fresh, already) = ReversedSequenceNormalizer.normalize(
            received: batch.readings, storedContent: known, highestStored: highest)
        batch.readings = fresh
        batch.session.duplicates += already
        if batch.session.result == .success || batch.session.result == .noNewRecords {
            batch.newHighWater = (fresh.map(\.sequenceNumber) + [highest].compactMap { $0 }).max()
        }
        self.attempt.batch = batch
        out.append(.commit(batch))
    }

    private mutating func afterCommit(_ ending: Ending, _ t: Transfer, _ out: inout [SyncAction]) -> State {
        if self.attempt.connected {
            self.show(.disconnecting, &out)
            out.append(.disconnect)
            return .disconnecting(ending, t)
        }
        return self.finalize(ending, t, &out)
    }

    private mutating func finalize(_ ending: Ending, _ t: Transfer, _ out: inout [SyncAction]) -> State {
        self.attempt.connected = false
        if let failure = ending.failure {
            self.show(.failed(failure), &out)
            out.append(.publish(.failed(self.context.meter, failure)))
        } else {
            self.show(.done(ending.result), &out)
        }
        if !self.attempt.anomalies.isEmpty { out.append(.publish(.anomalies(self.context.meter, self.attempt.anomalies))) }
        let record = self.attempt.session ?? SyncSessionRecord(meter: self.context.meter, started: self.attempt.started, result: ending.result)
        out.append(.publish(.finished(self.context.meter, record)))
        out.append(.finished(record))
        return .finished(ending, t)
    }
}

extension SyncStateMachine.State {
    /// The phase this state shows.
    var phase: SyncPhase {
        switch self {
        case .idle, .busy: .idle
        case .connecting: .connecting
        case .pairing: .pairing
        case .readingDeviceInfo: .readingDeviceInfo
        case .readingClock: .readingClock
        case .subscribing: .subscribing
        // The check of the high-water record comes before the count: it shows as counting, so
        // phases never go back.
        case .checkingReset, .counting: .counting
        case .receiving: .receiving
        case .verio(.command(.readClock), _, _): .readingClock
        case .verio(.command(.highestRecordNumber), _, _), .verio(.command(.recordCount), _, _): .counting
        case .verio(.command(.record(let number)), let plan, _): plan.isCheck(number) ? .counting : .receiving
        case .verio(.acknowledging(_, let shown), _, _): shown
        case .waitingToRetry: .waitingToRetry
        case .settingClock: .settingClock
        case .committing: .committing
        case .disconnecting: .disconnecting
        case .finished(let ending, _): ending.failure.map { .failed($0) } ?? .done(ending.result)
        }
    }

    /// The operation in flight (nil while pausing, and once the attempt ended).
    var operation: SyncStateMachine.Operation? {
        switch self {
        case .connecting: .connect
        case .pairing: .pair
        case .readingDeviceInfo(let uuid, _), .readingClock(let uuid): .read(uuid)
        case .subscribing(let uuid, _, _, _): .enable(uuid)
        case .checkingReset, .counting, .receiving: self.racpPurpose.map { .racp($0) }
        case .verio(.command(let command), _, _): .verio(command)
        case .verio(.acknowledging, _, _): .ack
        case .settingClock(let step, _): step.readingBack.map { .read($0) } ?? .setClock(step.written)
        case .idle, .waitingToRetry, .committing, .disconnecting, .finished, .busy: nil
        }
    }

    /// The RACP request in flight, in the three RACP states.
    var racpPurpose: RACPWritePurpose? {
        switch self {
        case .checkingReset: .verify
        case .counting: .count
        case .receiving: .report
        default: nil
        }
    }

    /// The download's progress, in the states that carry it (also inside a pause or a pairing).
    var transfer: SyncStateMachine.Transfer? {
        switch self {
        case .subscribing(_, _, _, let t), .checkingReset(let t), .counting(let t), .receiving(let t), .verio(_, _, let t),
            .settingClock(_, let t), .committing(_, let t), .disconnecting(_, let t), .finished(_, let t):
            t
        case .pairing(let then), .waitingToRetry(let then):
            then.transfer
        case .idle, .connecting, .readingDeviceInfo, .readingClock, .busy:
            nil
        }
    }

    /// The state to issue again after pairing. Re-enabling RACP indications is issued alone (the
    /// request it interrupted is not written again), and an acknowledgement keeps showing pairing.
    var resumedAfterPairing: Self {
        switch self {
        case .subscribing(let uuid, let rest, _, let t): .subscribing(uuid, rest: rest, resume: nil, t)
        case .verio(.acknowledging(let next, _), let plan, let t): .verio(.acknowledging(then: next, shown: .pairing), plan, t)
        default: self
        }
    }

    /// Takes the transfer out (an empty one in its place), so that it is changed in place.
    mutating func takeTransfer() -> SyncStateMachine.Transfer? {
        guard var t = self.transfer else { return nil }
        self.swapTransfer(&t)
        return t
    }

    /// Puts back a transfer taken out with ``takeTransfer()``.
    mutating func putTransfer(_ t: SyncStateMachine.Transfer) {
        var t = t
        self.swapTransfer(&t)
    }

    private mutating func swapTransfer(_ other: inout SyncStateMachine.Transfer) {
        switch self {
        case .subscribing(let uuid, let rest, let resume, var t):
            self = .busy
            swap(&t, &other)
            self = .subscribing(uuid, rest: rest, resume: resume, t)
        case .checkingReset(var t):
            self = .busy
            swap(&t, &other)
            self = .checkingReset(t)
        case .counting(var t):
            self = .busy
            swap(&t, &other)
            self = .counting(t)
        case .receiving(var t):
            self = .busy
            swap(&t, &other)
            self = .receiving(t)
        case .verio(let step, let plan, var t):
            self = .busy
            swap(&t, &other)
            self = .verio(step, plan, t)
        case .settingClock(let step, var t):
            self = .busy
            swap(&t, &other)
            self = .settingClock(step, t)
        case .committing(let ending, var t):
            self = .busy
            swap(&t, &other)
            self = .committing(ending, t)
        case .disconnecting(let ending, var t):
            self = .busy
            swap(&t, &other)
            self = .disconnecting(ending, t)
        case .finished(let ending, var t):
            self = .busy
            swap(&t, &other)
            self = .finished(ending, t)
        case .pairing(var then):
            self = .busy
            then.swapTransfer(&other)
            self = .pairing(then: then)
        case .waitingToRetry(var then):
            self = .busy
            then.swapTransfer(&other)
            self = .waitingToRetry(then: then)
        case .idle, .connecting, .readingDeviceInfo, .readingClock, .busy:
            break
        }
    }
}
