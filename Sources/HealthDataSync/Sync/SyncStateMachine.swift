import GlucoseProfile

/// The Glucose Profile sync procedure for one meter and one attempt, as a state machine.
///
/// It performs no I/O: each ``SyncEvent`` goes in through ``handle(_:at:)`` and the
/// ``SyncAction``s that come out are carried out, in order, by a driver (``SyncEngine``, or a test).
/// Starting a timer replaces the running timer of the same kind.
///
/// Procedure: connect → (pair when the meter demands it) → read Glucose Feature and Device
/// Information → read the meter clock (Date Time 0x2A08 first for Roche, else Current Time 0x2A2B,
/// else 0x2A08) → notify 0x2A18 (and 0x2A34 when present), indicate 0x2A52 → with a stored mark and
/// its record, the check of that record (`01 04 01 <hw> <hw>`) → RACP count (`04 03 01 <hw+1>`, or
/// `04 01`) → RACP report (`01 03 01 <hw+1>`, or `01 01`) → collect records, joining contexts by
/// sequence number, committing them in chunks → RACP response → commit the rest and the new
/// high-water mark in one call → disconnect.
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
/// cut off from its context, or numbers going backwards stop the mark for the attempt). The mark
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

    private enum Operation: Hashable {
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

    private struct Record: Sendable {
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

    /// 65 536 bits: which sequence numbers arrived in this transfer (8 KB whatever the count).
    private struct SequenceBits: Sendable {
        private var words = [UInt64](repeating: 0, count: 1024)

        func contains(_ seq: UInt16) -> Bool { self.words[Int(seq >> 6)] & (1 << UInt64(seq & 63)) != 0 }

        mutating func insert(_ seq: UInt16) { self.words[Int(seq >> 6)] |= 1 << UInt64(seq & 63) }
    }

    /// A record waiting for its context holds back a chunk only while it is among the last this
    /// many records; further back, its context is not coming (it is stored without it).
    static let contextPatience = 8
    /// Contexts waiting for their measurement are held up to this many; more are orphans at once.
    static let orphanContextLimit = 256

    public let context: Context
    public private(set) var phase: SyncPhase = .idle
    /// What the meter said about itself (DIS); the address only until it is read.
    public private(set) var identity: MeterIdentity
    /// The quirk-table row for the meter (the standard row until DIS is read).
    public private(set) var profile: MeterProfile
    /// The anomalies so far, counted per kind, the first few in full.
    public private(set) var anomalySummary = SyncAnomalySummary()
    /// The first anomalies (at most ``SyncAnomalySummary/sampleLimit``).
    public var anomalies: [SyncAnomaly] { self.anomalySummary.samples }
    /// The RACP count, when the meter answered it.
    public private(set) var expected: Int?
    /// The meter clock as read, if it was.
    public private(set) var clock: MeterClockSample?
    /// Glucose Feature bits, if read.
    public private(set) var features: UInt16?
    /// The last batch handed to the store (after the attempt ended: the final one).
    public private(set) var batch: SyncBatch?
    /// The session as finally recorded (after ``SyncAction/finished(_:)``).
    public private(set) var session: SyncSessionRecord?

    private var started = Instant(epochMillis: 0)
    private var services = MeterServices(characteristics: [])
    /// Where the attempt is, with what that point needs.
    private enum Step: Sendable {
        /// Nothing in flight (before the start, or between two operations).
        case none
        /// An operation is in flight. `resume` is the operation it interrupted (pairing, or
        /// re-enabling RACP indications), issued again once it succeeds.
        case awaiting(Operation, resume: Operation?)
        /// The pause before the one retry of an operation.
        case pausing(Operation)
        /// The attempt ended with this result; the batch is with the store (`lookup`: the batch
        /// waits for the store's answer about stored content first), or the link is being closed.
        case ended(SyncResult, SyncFailure?, lookup: SyncBatch?)
    }

    private var step: Step = .none
    private var retried: Set<Operation> = []
    private var pairingUsed = false
    private var readQueue: [BluetoothUUID] = []
    private var subscribeQueue: [BluetoothUUID] = []
    private var clockUUID: BluetoothUUID?
    /// Records received and not yet handed to the store (at most about one chunk).
    private var pendingRecords: [Record] = []
    private var pendingIndex: [UInt16: Int] = [:]
    /// When the oldest pending record arrived.
    private var chunkStarted: Instant?
    private var seen = SequenceBits()
    private var receivedCount = 0
    /// Highest sequence number handed to the store in this attempt.
    private var maxKept: UInt16?
    /// The contiguous mark (see the type's documentation), and what it was before the chunk in flight.
    public private(set) var contiguousMark: UInt16?
    private var markBeforeChunk: UInt16?
    private var lastKept: UInt16?
    private var contiguityBroken = false
    /// A measurement packet did not decode: the next record follows a gap.
    private var gapPending = false
    private var chunkInFlight = false
    /// The attempt ended while a chunk was with the store: its final batch waits for the answer.
    private var finalWaiting: (result: SyncResult, failure: SyncFailure?, now: Instant)?
    /// The session row the store made for the first batch of the attempt.
    private var sessionID: Int64?
    /// The highest sequence number the attempt's batches stored in the current epoch, per the store.
    private var storedEarlier: UInt16?
    /// The next batch opens a new epoch (the meter was found reset).
    private var resetToCommit = false
    /// Chunks committed in this attempt.
    public private(set) var chunksCommitted = 0
    private var orphanContexts: [UInt16: ([UInt8], MeasurementContext)] = [:]
    private var lastMeasurementSequence: UInt16?
    private var racpInFlight = false
    private var reportFilterDropped = false
    /// The meter no longer holds the record at the high-water mark: a full download into a new epoch.
    public private(set) var resetDetected = false
    /// The high-water record as the meter sent it for the check.
    private var verifyRecord: [UInt8]?
    private var connected = false
    /// How the meter is downloaded (known once connected).
    public private(set) var procedure: MeterProcedure = .gls
    /// The Verio download plan, for a Verio meter.
    private var verio: VerioProcedure?
    /// What follows the acknowledgement in flight.
    private var verioNext: VerioProcedure.Next?
    /// The clock set after the download, if it was.
    public private(set) var clockSetting: ClockSetting?
    /// The complete result waiting for the clock to be set.
    private var resultAfterClock: SyncResult?
    /// The host time the clock write started (the new skew is measured from it when read back).
    private var clockWrittenAt: Instant?

    /// The operation in flight.
    private var pending: Operation? {
        if case .awaiting(let op, _) = self.step { op } else { nil }
    }

    /// The operation the one in flight interrupted.
    private var resume: Operation? {
        if case .awaiting(_, let resume) = self.step { resume } else { nil }
    }

    public init(_ context: Context) {
        self.context = context
        self.identity = MeterIdentity(id: context.meter, name: context.advertisedName)
        self.profile = context.quirks.profile(for: self.identity)
    }

    /// Records received and kept so far (repeats excluded).
    public var received: Int { self.receivedCount }

    /// Whether the machine is between ``SyncEvent/start`` and its final phase.
    public var isActive: Bool {
        switch self.phase {
        case .idle, .done, .failed: false
        default: true
        }
    }

    /// Feeds one event; returns what to do, in order.
    /// - Parameters:
    ///   - event: what happened.
    ///   - now: the host clock (session times, and the host side of the meter clock skew).
    public mutating func handle(_ event: SyncEvent, at now: Instant) -> [SyncAction] {
        var out: [SyncAction] = []
        switch event {
        case .start:
            guard self.phase == .idle else { break }
            self.started = now
            self.setPhase(.connecting, &out)
            self.issue(.connect, &out)

        case .connected(let services):
            guard self.pending == .connect else { break }
            self.step = .none
            self.connected = true
            self.services = services
            if services.characteristic(Verio.commandCharacteristic)?.service == Verio.service,
                services.characteristic(Verio.replyCharacteristic)?.service == Verio.service,
                !services.has(.recordAccessControlPoint)
            {
                self.procedure = .verio
                self.verio = VerioProcedure(
                    highWater: self.context.highWater, highWaterRecord: self.context.highWaterRecord,
                    fullDownload: self.context.fullDownload)
                self.profile = self.context.quirks.profile(for: self.identity, procedure: .verio)
                self.readQueue = BluetoothUUID.deviceInformationStrings.filter { services.has($0) }
                self.setPhase(.readingDeviceInfo, &out)
                self.nextRead(now, &out)
                break
            }
            guard services.has(.glucoseMeasurement), services.has(.recordAccessControlPoint) else {
                let verio = services.characteristics.contains { $0.service == Verio.service }
                let message = verio
                    ? "\(self.context.meter) offers the OneTouch Verio vendor service (\(Verio.service.uuidString)) without its command and reply characteristics, and no Glucose Profile."
                    : "\(self.context.meter) has no Glucose Measurement and RACP characteristics; it is not a Glucose Profile meter."
                self.end(SyncFailure(.notAGlucoseMeter, message), now, &out)
                break
            }
            let wanted: [BluetoothUUID] = [.glucoseFeature] + BluetoothUUID.deviceInformationStrings
            self.readQueue = wanted.filter { services.has($0) }
            self.setPhase(.readingDeviceInfo, &out)
            self.nextRead(now, &out)

        case .connectFailed(let error):
            guard self.pending == .connect else { break }
            self.operationFailed(.connect, error, now, &out)

        case .paired:
            guard self.pending == .pair else { break }
            let resume = self.resume ?? .connect
            self.step = .none
            self.setPhase(self.phase(for: resume), &out)
            self.issue(resume, &out)

        case .pairingFailed(let error):
            guard self.pending == .pair else { break }
            if error.code == .disconnected || error.code == .notConnected {
                self.operationFailed(.pair, error, now, &out)
            } else {
                // BlueZ's errors already say "Pairing with <meter> failed: ..."; don't say it twice.
                let message = error.message.hasPrefix("Pairing") ? error.message : "Pairing with \(self.context.meter) failed: \(error.message)"
                self.end(SyncFailure(.pairingFailed, message), now, &out)
            }

        case .readCompleted(let uuid, let bytes):
            guard self.pending == .read(uuid) else { break }
            self.step = .none
            if self.phase == .settingClock {
                self.clockReadBack(bytes, now, &out)
                break
            }
            self.store(read: uuid, bytes: bytes, now: now)
            self.nextRead(now, &out)

        case .readFailed(let uuid, let error):
            guard self.pending == .read(uuid) else { break }
            self.operationFailed(.read(uuid), error, now, &out)

        case .notificationsEnabled(let uuid):
            guard self.pending == .enable(uuid) else { break }
            let resume = self.resume
            self.step = .none
            if let resume {
                self.setPhase(self.phase(for: resume), &out)
                self.issue(resume, &out)
            } else {
                self.nextSubscription(now, &out)
            }

        case .notificationsFailed(let uuid, let error):
            guard self.pending == .enable(uuid) else { break }
            self.operationFailed(.enable(uuid), error, now, &out)

        case .writeCompleted:
            // The answer (an indication) may come before or after this; the answer completes the step.
            break

        case .writeFailed(let purpose, let error):
            guard self.pending == .racp(purpose) else { break }
            self.racpInFlight = false
            self.operationFailed(.racp(purpose), error, now, &out)

        case .characteristicWritten(let uuid):
            switch self.pending {
            case .ack? where uuid == Verio.commandCharacteristic:
                self.step = .none
                self.followVerio(self.verioNext ?? .done, now, &out)
            case .setClock(let target)? where target == uuid:
                self.step = .none
                self.clockWritten(now, &out)
            default:
                break  // a Verio command completes with its reply, not its write
            }

        case .characteristicWriteFailed(let uuid, let error):
            switch self.pending {
            case .verio(let command)? where uuid == Verio.commandCharacteristic:
                self.operationFailed(.verio(command), error, now, &out)
            case .ack? where uuid == Verio.commandCharacteristic:
                self.operationFailed(.ack, error, now, &out)
            case .setClock(let target)? where target == uuid:
                self.step = .none
                self.note(SyncAnomaly(.clockNotSet, "Setting the meter clock (\(uuid.shortString)) failed: \(error.message)"))
                self.clockDone(now, &out)
            default:
                break
            }

        case .value(let uuid, let bytes):
            if uuid == Verio.replyCharacteristic, self.procedure == .verio {
                self.receiveVerio(bytes, now, &out)
            } else if uuid == .glucoseMeasurement {
                self.receiveMeasurement(bytes, now, &out)
            } else if uuid == .glucoseMeasurementContext {
                self.receiveContext(bytes)
            } else if uuid == .recordAccessControlPoint {
                self.receiveRACP(bytes, now, &out)
            }

        case .disconnected(let reason):
            let wasConnected = self.connected
            self.connected = false
            switch self.phase {
            case .disconnecting:
                self.finalize(&out)
            case .idle, .done, .failed, .committing:
                break
            case .settingClock:
                // The download is complete; only the clock (or its read-back) is lost.
                self.step = .none
                if self.clockSetting == nil {
                    self.note(SyncAnomaly(.clockNotSet, "\(self.context.meter) disconnected while its clock was being set."))
                }
                self.clockDone(now, &out)
            default:
                guard wasConnected || self.pending != .connect else { break }
                let why = reason.map { " (\($0))" } ?? ""
                self.end(SyncFailure(.meterDisconnected, "\(self.context.meter) disconnected before the transfer finished\(why)."), now, &out)
            }

        case .timerFired(.operation):
            guard case .awaiting(let op, let resume) = self.step, self.isActive else { break }
            self.timedOut(op, resume: resume, now, &out)

        case .timerFired(.retry):
            guard self.phase == .waitingToRetry, case .pausing(let op) = self.step else { break }
            self.step = .none
            self.setPhase(self.phase(for: op), &out)
            self.issue(op, &out)

        case .storedLookup(let highest, let known):
            guard self.phase == .committing, case .ended(let result, let failure, let batch?) = self.step else { break }
            self.step = .ended(result, failure, lookup: nil)
            self.commitNormalized(batch, highest: highest, known: known, &out)

        case .committed(let result):
            if self.chunkInFlight {
                self.chunkCommitted(result, now, &out)
                break
            }
            guard self.phase == .committing else { break }
            out.append(.publish(.committed(self.context.meter, result)))
            self.session = result.session
            self.afterCommit(&out)

        case .commitFailed(let error):
            if self.chunkInFlight {
                self.chunkFailed(error, now, &out)
                break
            }
            guard self.phase == .committing, case .ended(_, let earlier, _) = self.step else { break }
            let failure = SyncFailure(.storeError, "Readings from \(self.context.meter) could not be stored: \(error.message)")
            self.step = .ended(.failed, failure, lookup: nil)
            var record = self.batch?.session ?? SyncSessionRecord(meter: self.context.meter, started: self.started, result: .failed)
            record.result = .failed
            record.error = failure.message + (earlier.map { " (after: \($0.message))" } ?? "")
            self.session = record
            self.afterCommit(&out)

        case .disconnectCompleted:
            guard self.phase == .disconnecting else { break }
            self.finalize(&out)

        case .abort(let reason):
            switch self.phase {
            case .idle, .done, .failed, .committing, .disconnecting: break
            default: self.end(SyncFailure(.aborted, "Sync of \(self.context.meter) was stopped: \(reason)."), now, &out)
            }
        }
        return out
    }

    // MARK: - Steps

    private func phase(for op: Operation) -> SyncPhase {
        switch op {
        case .connect: .connecting
        case .pair: .pairing
        case .read(let uuid): uuid == self.clockUUID ? .readingClock : .readingDeviceInfo
        case .enable: .subscribing
        // The check of the high-water record comes before the count: it shows as counting, so
        // phases never go back.
        case .racp(.count), .racp(.verify): .counting
        case .racp: .receiving
        case .verio(.readClock): .readingClock
        case .verio(.highestRecordNumber), .verio(.recordCount): .counting
        case .verio(.record(let number)): self.verio?.isCheck(number) == true ? .counting : .receiving
        case .ack: self.phase
        case .setClock: .settingClock
        }
    }

    private mutating func setPhase(_ phase: SyncPhase, _ out: inout [SyncAction]) {
        guard phase != self.phase else { return }
        self.phase = phase
        out.append(.publish(.phaseChanged(self.context.meter, phase)))
    }

    private var usesHighWaterFilter: Bool {
        !self.profile.downloadsEverything && !self.context.fullDownload && !self.reportFilterDropped
            && !self.resetDetected && (self.context.highWater.map { $0 < UInt16.max } ?? false)
    }

    /// After the delta report, the high-water record itself is asked for again and compared with
    /// the stored one (a reset meter no longer holds it).
    private var verifiesHighWater: Bool {
        self.usesHighWaterFilter && self.context.highWaterRecord != nil
    }

    private func racpBytes(_ purpose: RACPWritePurpose) -> [UInt8] {
        let from = (self.context.highWater ?? 0) &+ 1
        switch purpose {
        case .verify:
            // `01 04 01 <hw> <hw>`: the record at the high-water mark, and only it.
            let mark = self.context.highWater ?? 0
            return RACPMessage(
                opCode: .reportStoredRecords, operator: .withinRange, operand: .filter(.sequenceNumber(min: mark, max: mark))
            ).encoded()
        case .count:
            return RACPMessage.count(from: self.usesHighWaterFilter ? from : nil).encoded()
        case .report:
            return RACPMessage.report(from: self.usesHighWaterFilter ? from : nil).encoded()
        case .abort:
            return RACPMessage.abort.encoded()
        }
    }

    private mutating func issue(_ op: Operation, resume: Operation? = nil, _ out: inout [SyncAction]) {
        self.step = .awaiting(op, resume: resume)
        let config = self.context.configuration
        let seconds: Double
        switch op {
        case .connect:
            out.append(.connect)
            seconds = config.connectTimeout
        case .pair:
            out.append(.pair)
            seconds = config.pairingTimeout
        case .read(let uuid):
            out.append(.read(uuid))
            seconds = config.operationTimeout
        case .enable(let uuid):
            out.append(.enableNotifications(uuid))
            seconds = config.operationTimeout
        case .racp(let purpose):
            self.racpInFlight = true
            out.append(.writeRACP(self.racpBytes(purpose), purpose: purpose))
            seconds = config.racpTimeout
        case .verio(let command):
            out.append(.write(command.encoded(), to: Verio.commandCharacteristic))
            seconds = config.racpTimeout
        case .ack:
            out.append(.write(Verio.acknowledgement, to: Verio.commandCharacteristic))
            seconds = config.operationTimeout
        case .setClock(let uuid):
            out.append(.write(self.clockValue(for: uuid, at: self.clockWrittenAt ?? self.started), to: uuid))
            seconds = config.operationTimeout
        }
        out.append(.startTimer(.operation, seconds: seconds))
    }

    private mutating func nextRead(_ now: Instant, _ out: inout [SyncAction]) {
        if !self.readQueue.isEmpty {
            self.issue(.read(self.readQueue.removeFirst()), &out)
            return
        }
        if self.procedure == .verio {
            self.profile = self.context.quirks.profile(for: self.identity, procedure: .verio)
            out.append(.publish(.identified(self.identity)))
            self.subscribeQueue = [Verio.replyCharacteristic]
            self.setPhase(.subscribing, &out)
            self.nextSubscription(now, &out)
            return
        }
        if self.phase == .readingDeviceInfo {
            self.profile = self.context.quirks.profile(for: self.identity)
            out.append(.publish(.identified(self.identity)))
            let candidates: [BluetoothUUID] =
                self.profile.clock == .dateTimeFirst ? [.dateTime, .currentTime] : [.currentTime, .dateTime]
            if let clock = candidates.first(where: { self.services.has($0) }) {
                self.clockUUID = clock
                self.setPhase(.readingClock, &out)
                self.issue(.read(clock), &out)
                return
            }
        }
        self.subscribeQueue = [.glucoseMeasurement]
        if self.services.has(.glucoseMeasurementContext) { self.subscribeQueue.append(.glucoseMeasurementContext) }
        self.subscribeQueue.append(.recordAccessControlPoint)
        self.setPhase(.subscribing, &out)
        self.nextSubscription(now, &out)
    }

    private mutating func nextSubscription(_ now: Instant, _ out: inout [SyncAction]) {
        if !self.subscribeQueue.isEmpty {
            self.issue(.enable(self.subscribeQueue.removeFirst()), &out)
            return
        }
        if self.procedure == .verio {
            self.setPhase(.readingClock, &out)
            self.issue(.verio(VerioProcedure.first), &out)
            return
        }
        if self.verifiesHighWater {
            // First the check that the meter still holds the high-water record: only then can the
            // records after it be committed as they arrive (into the right epoch).
            self.verifyRecord = nil
            self.setPhase(.counting, &out)
            self.issue(.racp(.verify), &out)
            return
        }
        self.startCount(&out)
    }

    private mutating func startCount(_ out: inout [SyncAction]) {
        self.setPhase(.counting, &out)
        self.issue(.racp(.count), &out)
    }

    private mutating func startReport(_ out: inout [SyncAction]) {
        self.setPhase(.receiving, &out)
        self.issue(.racp(.report), &out)
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
                self.features = try GlucoseFeature(bytes: bytes).rawValue
            } catch {
                self.note(SyncAnomaly(.deviceInfoUnreadable, "Glucose Feature did not decode: \(error)."))
            }
        case .manufacturerName: self.identity.manufacturer = Self.text(bytes)
        case .modelNumber: self.identity.model = Self.text(bytes)
        case .serialNumber: self.identity.serialNumber = Self.text(bytes)
        case .firmwareRevision: self.identity.firmware = Self.text(bytes)
        case self.clockUUID:
            do throws(GlucoseProfileError) {
                let dt = uuid == .currentTime ? try CurrentTime(bytes: bytes).dateTime : try DateTime(bytes: bytes)
                guard dt.isDateKnown else {
                    self.note(SyncAnomaly(.clockUnreadable, "The meter clock (\(uuid.shortString)) reports an unknown date."))
                    return
                }
                let local = LocalDateTime(
                    year: Int(dt.year), month: Int(dt.month), day: Int(dt.day), hour: Int(dt.hours),
                    minute: Int(dt.minutes), second: Int(dt.seconds))
                self.clock = MeterClockSample(meterTime: local, hostTime: now)
            } catch {
                self.note(SyncAnomaly(.clockUnreadable, "The meter clock (\(uuid.shortString)) did not decode: \(error)."))
            }
        default: break
        }
    }

    // MARK: - Records

    private var acceptsRecords: Bool {
        switch self.phase {
        case .subscribing, .counting, .receiving, .waitingToRetry: true
        default: false
        }
    }

    private mutating func receiveMeasurement(_ bytes: [UInt8], _ now: Instant, _ out: inout [SyncAction]) {
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
            if self.pending != .racp(.verify) { self.gapPending = true }
            self.keepWaiting(&out)
            return
        }
        let seq = m.sequenceNumber
        if self.pending == .racp(.verify) {
            // The check of the high-water record: compared, never part of the batch.
            if seq == self.context.highWater { self.verifyRecord = bytes }
            self.keepWaiting(&out)
            return
        }
        self.accept(bytes: bytes, measurement: m, now, &out)
    }

    /// A decoded record of the transfer (GLS measurement, or a Verio record read as one): repeats
    /// and conflicts are skipped, the rest waits for its context and its chunk.
    private mutating func accept(bytes: [UInt8], measurement m: GlucoseMeasurement, _ now: Instant, _ out: inout [SyncAction]) {
        let seq = m.sequenceNumber
        defer { self.lastMeasurementSequence = seq }
        if seq == self.lastMeasurementSequence {
            self.note(SyncAnomaly(.repeatedRecord, sequenceNumber: seq, "Record \(seq) was sent twice in a row; the repeat was skipped."))
            self.keepWaiting(&out)
            return
        }
        if self.seen.contains(seq) {
            if let i = self.pendingIndex[seq] {
                if self.pendingRecords[i].bytes != bytes {
                    self.note(SyncAnomaly(.conflictingRecord, sequenceNumber: seq, "Record \(seq) came again with other content; the first was kept."))
                }
            } else {
                // Already with the store: it cannot be compared any more, only skipped.
                self.note(SyncAnomaly(.conflictingRecord, sequenceNumber: seq, "Record \(seq) came again after it was stored; the first was kept."))
            }
            self.keepWaiting(&out)
            return
        }
        var record = Record(bytes: bytes, measurement: m, afterGap: self.gapPending)
        self.gapPending = false
        if let (contextBytes, context) = self.orphanContexts.removeValue(forKey: seq) {
            record.contextBytes = contextBytes
            record.context = context
        }
        self.seen.insert(seq)
        self.pendingIndex[seq] = self.pendingRecords.count
        self.pendingRecords.append(record)
        if self.chunkStarted == nil { self.chunkStarted = now }
        self.receivedCount += 1
        if self.receivedCount <= 256 || self.receivedCount % 16 == 0 || self.receivedCount == self.expected {
            // Progress for each of the first records, then every 16th: a big download does not
            // send observers an event per record.
            out.append(.publish(.progress(self.context.meter, received: self.receivedCount, expected: self.expected)))
        }
        self.keepWaiting(&out)
        self.flushIfDue(now, &out)
    }

    private mutating func receiveContext(_ bytes: [UInt8]) {
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
        if self.pending == .racp(.verify) { return }
        if let i = self.pendingIndex[seq] {
            if self.pendingRecords[i].context != nil {
                self.note(SyncAnomaly(.duplicateContext, sequenceNumber: seq, "Record \(seq) got a second context; the first was kept."))
            } else {
                self.pendingRecords[i].context = context
                self.pendingRecords[i].contextBytes = bytes
            }
        } else if self.seen.contains(seq) {
            self.note(SyncAnomaly(.orphanContext, sequenceNumber: seq, "A context for record \(seq) came after the record was stored."))
        } else if self.orphanContexts[seq] != nil {
            self.note(SyncAnomaly(.duplicateContext, sequenceNumber: seq, "Record \(seq) got a second context; the first was kept."))
        } else if self.orphanContexts.count >= Self.orphanContextLimit {
            self.note(SyncAnomaly(.orphanContext, sequenceNumber: seq, "A context for record \(seq) came without its measurement."))
        } else {
            self.orphanContexts[seq] = (bytes, context)
        }
    }

    /// A record arrived while a RACP answer is awaited: the gap timer starts over.
    private mutating func keepWaiting(_ out: inout [SyncAction]) {
        if case .racp = self.pending {
            out.append(.startTimer(.operation, seconds: self.context.configuration.racpTimeout))
        }
    }

    private mutating func receiveRACP(_ bytes: [UInt8], _ now: Instant, _ out: inout [SyncAction]) {
        guard self.isActive else { return }
        let message: RACPMessage
        do throws(GlucoseProfileError) {
            message = try RACPMessage(bytes: bytes)
        } catch {
            self.note(SyncAnomaly(.malformedRACP, "A RACP indication was ignored: \(error)."))
            return
        }
        if let count = message.numberOfRecords {
            guard self.pending == .racp(.count) else {
                self.note(SyncAnomaly(.unexpectedRACP, "The meter sent a record count nobody asked for."))
                return
            }
            self.racpInFlight = false
            self.step = .none
            self.expected = Int(count)
            out.append(.publish(.progress(self.context.meter, received: self.receivedCount, expected: self.expected)))
            self.startReport(&out)
            return
        }
        guard let (request, code) = message.response else {
            self.note(SyncAnomaly(.unexpectedRACP, "The meter sent a RACP request (op code \(message.opCode.rawValue)) instead of a response."))
            return
        }
        switch (request, self.pending) {
        case (.reportNumberOfStoredRecords, .racp(.count)?):
            self.racpInFlight = false
            self.step = .none
            self.note(SyncAnomaly(.countUnavailable, "The meter answered the record count with \(code.name); downloading without a count."))
            self.startReport(&out)
        case (.reportStoredRecords, .racp(.report)?):
            self.racpInFlight = false
            self.step = .none
            switch code {
            case .success, .noRecordsFound:
                self.end(result: code == .success ? .success : .noNewRecords, now, &out)
            case .opCodeNotSupported:
                self.end(SyncFailure(.reportNotSupported, "\(self.context.meter) does not support the RACP record report (op code not supported).", racpResponseCode: code.rawValue), now, &out)
            case let c where self.usesHighWaterFilter
                && [RACPResponseCode.invalidOperator, .operatorNotSupported, .invalidOperand, .operandNotSupported].contains(c):
                // The meter cannot filter by sequence number: ask for everything once; dedup keeps it safe.
                self.reportFilterDropped = true
                self.issue(.racp(.report), &out)
            default:
                self.end(SyncFailure(.racpError, "\(self.context.meter) ended the record report with RACP \(code.name) (0x\(String(code.rawValue, radix: 16))).", racpResponseCode: code.rawValue), now, &out)
            }
        case (.reportStoredRecords, .racp(.verify)?):
            self.racpInFlight = false
            self.step = .none
            switch code {
            case .success, .noRecordsFound:
                if self.verifyRecord == self.context.highWaterRecord {
                    self.startCount(&out)
                } else {
                    self.restartAfterReset(&out)  // gone or different: the meter was reset
                }
            default:
                self.note(SyncAnomaly(
                    .resetCheckUnavailable, "The meter answered the request for its high-water record with \(code.name); not checked for a reset."))
                self.startCount(&out)
            }
        case (.abortOperation, _):
            break  // The answer to our own abort; nothing waits for it.
        default:
            self.note(SyncAnomaly(.unexpectedRACP, "The meter sent a RACP response to op code \(request.rawValue) that nothing was waiting for."))
        }
    }

    // MARK: - Verio

    private mutating func receiveVerio(_ bytes: [UInt8], _ now: Instant, _ out: inout [SyncAction]) {
        guard self.isActive else { return }
        let reply: VerioReply
        do throws(GlucoseProfileError) {
            reply = try VerioReply(bytes: bytes)
        } catch {
            // A damaged packet: the command's timer runs on, and its one retry asks again.
            self.note(SyncAnomaly(.commandRefused, "A Verio reply did not decode and was ignored: \(error)."))
            return
        }
        guard case .verio(let command)? = self.pending else {
            if reply != .acknowledgement {
                self.note(SyncAnomaly(.unexpectedRACP, "The meter sent a Verio reply nothing was waiting for."))
            }
            return
        }
        switch reply {
        case .acknowledgement:
            break  // the meter took the command; its reply follows
        case .refused(let status) where status == .notAllowed:
            self.operationFailed(
                .verio(command),
                TransportError(.authenticationRequired, "\(self.context.meter) answered \(command.name) with \"not allowed\": it is not bonded to this host."),
                now, &out)
        case .refused(let status):
            self.step = .none
            self.note(SyncAnomaly(.commandRefused, "The meter answered \(command.name) with \(status.name) (0x\(String(status.rawValue, radix: 16)))."))
            self.verioAnswered(command, nil, acknowledge: false, now, &out)
        case .data(let payload):
            self.step = .none
            var answer: VerioAnswer?
            do throws(GlucoseProfileError) {
                answer = try command.answer(payload: payload)
            } catch {
                self.note(SyncAnomaly(.commandRefused, "The reply to \(command.name) did not decode: \(error)."))
            }
            self.verioAnswered(command, answer, acknowledge: true, now, &out)
        }
    }

    /// Takes in one answer (nil: refused or undecodable) and moves to what the procedure says next,
    /// after acknowledging a data reply.
    private mutating func verioAnswered(
        _ command: VerioCommand, _ answer: VerioAnswer?, acknowledge: Bool, _ now: Instant, _ out: inout [SyncAction]
    ) {
        guard var verio = self.verio else { return }
        switch command {
        case .readClock:
            if case .clock(let seconds)? = answer {
                self.clock = MeterClockSample(
                    meterTime: LocalDateTime(secondsSinceEpoch: Verio.clockEpoch + Int64(seconds)), hostTime: now)
            } else {
                self.note(SyncAnomaly(.clockUnreadable, "The Verio clock could not be read; times are assumed correct."))
            }
        case .record(let number) where verio.isCheck(number):
            if answer == nil {
                self.note(SyncAnomaly(
                    .resetCheckUnavailable, "The meter did not give its high-water record \(number) back; not checked for a reset."))
            }
        case .record(let number):
            if case .record(_, let record)? = answer {
                self.acceptVerio(number, record, now, &out)
            } else {
                // Not stored: the mark stops before it, so the next attempt asks for it again.
                self.gapPending = true
            }
        case .highestRecordNumber, .recordCount:
            break
        }
        let next = verio.next(after: command, answer: answer)
        if verio.resetDetected && !self.resetDetected {
            self.resetDetected = true
            self.resetToCommit = true
        }
        if self.expected == nil, let expected = verio.expected {
            self.expected = expected
            out.append(.publish(.progress(self.context.meter, received: self.receivedCount, expected: expected)))
        }
        self.verio = verio
        if acknowledge {
            self.verioNext = next
            self.issue(.ack, &out)
        } else {
            self.followVerio(next, now, &out)
        }
    }

    private mutating func followVerio(_ next: VerioProcedure.Next, _ now: Instant, _ out: inout [SyncAction]) {
        self.verioNext = nil
        switch next {
        case .send(let command):
            self.setPhase(self.phase(for: .verio(command)), &out)
            self.issue(.verio(command), &out)
        case .done:
            self.end(result: self.receivedCount > 0 ? .success : .noNewRecords, now, &out)
        case .fail(let why):
            self.end(SyncFailure(.reportNotSupported, "\(self.context.meter): \(why)."), now, &out)
        }
    }

    /// One Verio record, read as a Glucose Measurement (sequence number = record number, Base Time =
    /// the meter's local time, mg/dL as kg/L × 10⁻⁵) and stored with its 11 payload bytes as received.
    private mutating func acceptVerio(_ number: UInt16, _ record: VerioRecord, _ now: Instant, _ out: inout [SyncAction]) {
        guard record.isBloodGlucose else {
            self.note(SyncAnomaly(
                .notBloodGlucose, sequenceNumber: number, "Record \(number) is not a blood-glucose result (bytes 6-10 not zero); skipped."))
            return
        }
        guard record.mgdL <= UInt16(SFloat.maximumMantissa) else {
            self.note(SyncAnomaly(.malformedMeasurement, sequenceNumber: number, "Record \(number) has a value beyond what a meter measures; skipped."))
            self.gapPending = true
            return
        }
        let measurement = GlucoseMeasurement(
            sequenceNumber: number, baseTime: record.dateTime, concentration: SFloat(rawValue: 0xB000 | record.mgdL),
            unit: .kilogramsPerLiter)
        self.accept(bytes: record.encoded(), measurement: measurement, now, &out)
    }

    // MARK: - Setting the meter clock

    /// The procedure, once the services are known.
    private var knownProcedure: MeterProcedure? { self.services.characteristics.isEmpty ? nil : self.procedure }

    /// The characteristic the meter's clock can be set through: Current Time 0x2A2B in the Current
    /// Time Service with write, or (on a meter the quirk table names i-SENS) the vendor time 0xFFF1.
    public var settableClock: BluetoothUUID? {
        if let cts = self.services.characteristic(.currentTime), cts.service == .currentTimeService,
            cts.properties.contains(.write)
        {
            return .currentTime
        }
        if self.profile.clock == .vendorISENS, let isens = self.services.characteristic(.isensTime),
            isens.service == .isensTimeService, !isens.properties.isDisjoint(with: [.write, .writeWithoutResponse])
        {
            return .isensTime
        }
        return nil
    }

    /// Where to write the clock after the download: when setting is on, the meter is connected, its
    /// clock can be set, and it is unset/unreadable or off by more than the tolerance.
    private func clockToSet(_ now: Instant) -> BluetoothUUID? {
        let configuration = self.context.configuration
        guard configuration.setMeterClock, self.connected, let uuid = self.settableClock else { return nil }
        if let clock = self.clock {
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
        if let clock = self.clock {
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

    /// The write went through: read the clock back when it is readable, else record it as written.
    private mutating func clockWritten(_ now: Instant, _ out: inout [SyncAction]) {
        if let uuid = self.clockUUID, self.services.characteristic(uuid)?.properties.contains(.read) == true {
            self.recordClockSet(skewAfter: nil)
            self.issue(.read(uuid), &out)
            return
        }
        self.recordClockSet(skewAfter: nil)
        self.clockDone(now, &out)
    }

    private mutating func clockReadBack(_ bytes: [UInt8], _ now: Instant, _ out: inout [SyncAction]) {
        do throws(GlucoseProfileError) {
            let dt = self.clockUUID == .currentTime ? try CurrentTime(bytes: bytes).dateTime : try DateTime(bytes: bytes)
            let local = LocalDateTime(
                year: Int(dt.year), month: Int(dt.month), day: Int(dt.day), hour: Int(dt.hours), minute: Int(dt.minutes),
                second: Int(dt.seconds))
            if dt.isDateKnown {
                self.recordClockSet(skewAfter: TimeResolver.skew(of: MeterClockSample(meterTime: local, hostTime: now), in: self.context.zone))
            }
        } catch {
            self.note(SyncAnomaly(.clockUnreadable, "The meter clock read back after setting it did not decode: \(error)."))
        }
        self.clockDone(now, &out)
    }

    private mutating func recordClockSet(skewAfter: Int64?) {
        let at = self.clockWrittenAt ?? self.started
        self.clockSetting = ClockSetting(
            method: self.settableClock == .currentTime ? .currentTime : .isens, at: at,
            skewBeforeSeconds: self.clock.map { TimeResolver.skew(of: $0, in: self.context.zone) }, skewAfterSeconds: skewAfter,
            written: self.context.zone.localTime(at: at))
    }

    /// The clock write or its read-back failed or timed out: the download still ended as it did.
    private mutating func clockStepFailed(_ op: Operation, _ why: String, _ now: Instant, _ out: inout [SyncAction]) {
        if case .setClock(let uuid) = op {
            self.note(SyncAnomaly(.clockNotSet, "Setting the meter clock (\(uuid.shortString)) failed: \(why)"))
        } else {
            self.note(SyncAnomaly(.clockUnreadable, "The meter clock could not be read back after setting it: \(why)"))
        }
        self.clockDone(now, &out)
    }

    private mutating func clockDone(_ now: Instant, _ out: inout [SyncAction]) {
        self.finish(self.resultAfterClock ?? .success, nil, now, &out)
    }

    // MARK: - Resets

    /// The meter was reset: forget what this attempt received and download everything.
    private mutating func restartAfterReset(_ out: inout [SyncAction]) {
        self.resetDetected = true
        self.resetToCommit = true
        self.pendingRecords = []
        self.pendingIndex = [:]
        self.chunkStarted = nil
        self.seen = SequenceBits()
        self.receivedCount = 0
        self.maxKept = nil
        self.contiguousMark = nil
        self.lastKept = nil
        self.contiguityBroken = false
        self.gapPending = false
        self.orphanContexts = [:]
        self.lastMeasurementSequence = nil
        self.expected = nil
        out.append(.publish(.progress(self.context.meter, received: 0, expected: nil)))
        self.setPhase(.counting, &out)
        self.issue(.racp(.count), &out)
    }

    // MARK: - Errors and retries

    private static func needsPairing(_ error: TransportError) -> Bool {
        if error.code == .authenticationRequired { return true }
        // Insufficient Authentication, Insufficient Authorization, Insufficient Encryption.
        if let att = error.attError, [0x05, 0x08, 0x0F].contains(att) { return true }
        return false
    }

    private mutating func operationFailed(_ op: Operation, _ error: TransportError, _ now: Instant, _ out: inout [SyncAction]) {
        let resume = self.resume
        self.step = .none
        if self.phase == .settingClock {
            if error.code == .disconnected || error.code == .notConnected { self.connected = false }
            self.clockStepFailed(op, error.message, now, &out)
            return
        }
        if error.code == .disconnected || error.code == .notConnected {
            self.connected = false
            self.end(SyncFailure(.meterDisconnected, "\(self.context.meter) disconnected during \(self.phase.name): \(error.message)"), now, &out)
            return
        }
        if error.code == .cancelled {
            self.end(SyncFailure(.aborted, "Sync of \(self.context.meter) was cancelled during \(self.phase.name)."), now, &out)
            return
        }
        if error.code == .authenticationFailed, op == .pair {
            self.end(SyncFailure(.pairingFailed, "\(self.context.meter) rejected the bond: \(error.message)"), now, &out)
            return
        }
        // AuthenticationFailed outside Pair (a connect or read with a bond the meter no longer has)
        // means the meter has to be paired again.
        if Self.needsPairing(error) || error.code == .authenticationFailed {
            guard !self.pairingUsed, op != .pair else {
                self.end(SyncFailure(.pairingRequired, "\(self.context.meter) still requires pairing: \(error.message)", attError: error.attError), now, &out)
                return
            }
            self.pairingUsed = true
            self.setPhase(.pairing, &out)
            self.issue(.pair, resume: op, &out)
            return
        }
        if error.code == .timeout {
            self.timedOut(op, resume: resume, now, &out)
            return
        }
        if case .racp(let purpose) = op, let att = error.attError {
            if att == 0x80 || att == 0xFE {
                guard !self.retried.contains(op) else {
                    self.end(SyncFailure(.procedureAlreadyInProgress, "\(self.context.meter) kept answering \"procedure already in progress\" (ATT 0x\(String(att, radix: 16))) after abort and a retry.", attError: att), now, &out)
                    return
                }
                self.retried.insert(op)
                out.append(.writeRACP(self.racpBytes(.abort), purpose: .abort))
                self.scheduleRetry(op, &out)
                return
            }
            if att == 0x81 || att == 0xFD {
                guard !self.retried.contains(op) else {
                    self.end(SyncFailure(.cccdImproperlyConfigured, "\(self.context.meter) reports RACP indications not enabled (ATT 0x\(String(att, radix: 16))) even after re-enabling them.", attError: att), now, &out)
                    return
                }
                self.retried.insert(op)
                self.setPhase(.subscribing, &out)
                self.issue(.enable(.recordAccessControlPoint), resume: .racp(purpose), &out)
                return
            }
        }
        switch op {
        case .read(let uuid):
            let kind: SyncAnomaly.Kind = uuid == self.clockUUID ? .clockUnreadable : .deviceInfoUnreadable
            self.note(SyncAnomaly(kind, "Reading \(uuid.shortString) failed: \(error.message)"))
            self.nextRead(now, &out)
        case .enable(let uuid) where uuid == .glucoseMeasurementContext:
            self.note(SyncAnomaly(.missingContext, "Context notifications could not be enabled: \(error.message)"))
            self.nextSubscription(now, &out)
        case .racp(.count):
            self.racpInFlight = false
            self.note(SyncAnomaly(.countUnavailable, "The record count failed: \(error.message)"))
            self.startReport(&out)
        case .connect where !self.retried.contains(.connect) && error.code == .connectFailed:
            self.retried.insert(.connect)
            self.scheduleRetry(.connect, &out)
        default:
            let code: SyncFailure.Code = error.code == .attError ? .attError : .transportError
            let what = error.attError.map { "ATT error 0x\(String($0, radix: 16))" } ?? error.code.rawValue
            self.end(SyncFailure(code, "\(self.context.meter) failed during \(self.phase.name) (\(what)): \(error.message)", attError: error.attError), now, &out)
        }
    }

    private mutating func timedOut(_ op: Operation, resume: Operation?, _ now: Instant, _ out: inout [SyncAction]) {
        self.step = .none
        if self.phase == .settingClock {
            self.clockStepFailed(op, "timed out", now, &out)
            return
        }
        if op == .pair {
            self.end(SyncFailure(.pairingRequired, "Pairing with \(self.context.meter) timed out; was the passkey entered?"), now, &out)
            return
        }
        if op == .racp(.verify) {
            self.racpInFlight = false
            self.note(SyncAnomaly(.resetCheckUnavailable, "The meter did not answer the request for its high-water record; not checked for a reset."))
            out.append(.writeRACP(self.racpBytes(.abort), purpose: .abort))
            self.startCount(&out)
            return
        }
        if self.retried.contains(op) {
            if op == .racp(.count) {
                self.racpInFlight = false
                self.note(SyncAnomaly(.countUnavailable, "The record count timed out twice; downloading without a count."))
                out.append(.writeRACP(self.racpBytes(.abort), purpose: .abort))
                self.startReport(&out)
                return
            }
            self.end(SyncFailure(.timeout, "\(self.context.meter) stopped answering during \(self.phase.name) (timed out twice)."), now, &out)
            return
        }
        self.retried.insert(op)
        if case .racp = op {
            // The meter may still be inside the procedure: stop it before asking again.
            self.racpInFlight = false
            out.append(.writeRACP(self.racpBytes(.abort), purpose: .abort))
            self.scheduleRetry(op, &out)
        } else {
            self.issue(op, resume: resume, &out)
        }
    }

    private mutating func scheduleRetry(_ op: Operation, _ out: inout [SyncAction]) {
        self.step = .pausing(op)
        self.setPhase(.waitingToRetry, &out)
        out.append(.cancelTimer(.operation))
        out.append(.startTimer(.retry, seconds: self.context.configuration.retryDelay))
    }

    // MARK: - Ending

    private mutating func end(result: SyncResult, _ now: Instant, _ out: inout [SyncAction]) {
        // After a complete download (never before it): the meter's clock, when it is off and can be set.
        if self.resultAfterClock == nil, let uuid = self.clockToSet(now) {
            self.resultAfterClock = result
            self.clockWrittenAt = now
            self.setPhase(.settingClock, &out)
            self.issue(.setClock(uuid), &out)
            return
        }
        self.finish(result, nil, now, &out)
    }

    private mutating func end(_ failure: SyncFailure, _ now: Instant, _ out: inout [SyncAction]) {
        self.finish(failure.result, failure, now, &out)
    }

    private mutating func finish(_ result: SyncResult, _ failure: SyncFailure?, _ now: Instant, _ out: inout [SyncAction]) {
        out.append(.cancelTimer(.operation))
        out.append(.cancelTimer(.retry))
        if result == .aborted && self.racpInFlight && self.connected {
            out.append(.writeRACP(self.racpBytes(.abort), purpose: .abort))
        }
        self.racpInFlight = false
        self.step = .ended(result, failure, lookup: nil)
        for (seq, _) in self.orphanContexts.sorted(by: { $0.key < $1.key }) {
            self.note(SyncAnomaly(.orphanContext, sequenceNumber: seq, "A context for record \(seq) came without its measurement."))
        }
        self.orphanContexts = [:]
        self.setPhase(.committing, &out)
        if self.chunkInFlight {
            // The final batch follows the chunk with the store (it needs the chunk's session row).
            self.finalWaiting = (result, failure, now)
            return
        }
        self.commitFinal(result, failure, now, &out)
    }

    /// The records not handed over yet, the mark and the session as the attempt ended.
    private mutating func commitFinal(_ result: SyncResult, _ failure: SyncFailure?, _ now: Instant, _ out: inout [SyncAction]) {
        // More than a chunk left (the meter was faster than the store): it goes in chunks first,
        // so no one commit holds more than a chunk.
        if self.profile.sequenceOrder != .newestFirst, self.pendingRecords.count > self.context.configuration.chunkRecords,
            self.sendChunk(now, &out)
        {
            self.finalWaiting = (result, failure, now)
            return
        }
        // A transfer that ended early may have been cut between a record and its context. Such a
        // record is not stored and the mark stops before it, so the next attempt fetches it again,
        // context and all (stored now, its context would be lost to deduplication). After a
        // complete transfer the context is not coming: the record is kept without it.
        let complete = result == .success || result == .noNewRecords
        var kept: [Record] = []
        kept.reserveCapacity(self.pendingRecords.count)
        for r in self.pendingRecords {
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
                if kept.isEmpty { self.contiguityBroken = true } else { kept[kept.count - 1].cutAfter = true }
            }
        }
        self.pendingRecords = []
        self.pendingIndex = [:]
        self.chunkStarted = nil
        let readings = self.readings(for: kept)
        var highWater: UInt16?
        if self.profile.sequenceOrder == .newestFirst {
            highWater = nil  // numbered by the store after the lookup
        } else if complete {
            if self.resetDetected {
                highWater = self.maxKept
            } else if self.usesHighWaterFilter {
                highWater = [self.context.highWater, self.maxKept].compactMap { $0 }.max()
            } else {
                highWater = self.maxKept ?? self.context.highWater
            }
        } else {
            // Interrupted: the records up to the contiguous mark are stored; the next attempt asks
            // for the ones after it.
            highWater = self.contiguousMark
        }
        var session = self.runningSession(now)
        session.ended = now
        session.result = result
        session.error = failure?.message
        let batch = SyncBatch(
            meter: self.identity, features: self.features, readings: readings, newHighWater: highWater, session: session,
            meterReset: self.resetToCommit, isFinal: true, highestReceived: self.maxKept, storedEarlier: self.storedEarlier,
            procedure: self.knownProcedure, clockSettable: self.knownProcedure.map { _ in self.settableClock != nil })
        self.resetToCommit = false
        self.session = session
        if self.profile.sequenceOrder == .newestFirst {
            // Numbers identify nothing: ask the store which records it holds by content first.
            self.step = .ended(result, failure, lookup: batch)
            out.append(.lookUpStored(readings.map(ReadingContent.init)))
        } else {
            self.batch = batch
            out.append(.commit(batch))
        }
    }

    /// The session so far: the store's counts of the chunks committed, this machine's of the rest.
    private func runningSession(_ now: Instant) -> SyncSessionRecord {
        var session = SyncSessionRecord(
            id: self.sessionID, meter: self.context.meter, started: self.started, result: .running, expected: self.expected,
            received: self.receivedCount, clockSet: self.clockSetting)
        if let stored = self.session, stored.id != nil {
            session.stored = stored.stored
            session.duplicates = stored.duplicates
            session.sequenceResets = stored.sequenceResets
        }
        return session
    }

    /// Readings for records handed to the store, in order; moves the contiguous mark over them.
    private mutating func readings(for records: [Record]) -> [Reading] {
        let builder = ReadingBuilder(
            meter: self.context.meter, profile: self.profile,
            resolver: TimeResolver(zone: self.context.zone, clock: self.clock), recordCount: self.expected)
        // A clock that cannot be read but that a sync set: records stamped since then are on the corrected clock.
        var corrected = builder
        corrected.resolver = TimeResolver(zone: self.context.zone, skewSeconds: 0)
        let setLocal = self.clock == nil ? self.context.clockSetAt.map { self.context.zone.localTime(at: $0) } : nil
        var readings: [Reading] = []
        readings.reserveCapacity(records.count)
        for r in records {
            let seq = r.measurement.sequenceNumber
            if r.afterGap || self.lastKept.map({ seq <= $0 }) == true { self.contiguityBroken = true }
            if !self.contiguityBroken { self.contiguousMark = seq }
            if r.cutAfter { self.contiguityBroken = true }
            self.lastKept = max(self.lastKept ?? seq, seq)
            self.maxKept = max(self.maxKept ?? seq, seq)
            let t = r.measurement.baseTime
            let stamped = LocalDateTime(
                year: Int(t.year), month: Int(t.month), day: Int(t.day), hour: Int(t.hours), minute: Int(t.minutes), second: Int(t.seconds))
            let chosen = setLocal.map { stamped >= $0 } == true ? corrected : builder
            readings.append(
                chosen.reading(measurementBytes: r.bytes, measurement: r.measurement, contextBytes: r.contextBytes, context: r.context))
        }
        return readings
    }

    /// Hands the records ready so far to the store as a chunk, when one is due and none is with
    /// the store: ``SyncConfiguration/chunkRecords`` records, or the oldest pending one arrived
    /// ``SyncConfiguration/chunkSeconds`` ago.
    private mutating func flushIfDue(_ now: Instant, _ out: inout [SyncAction]) {
        guard !self.chunkInFlight, self.acceptsRecords, !self.pendingRecords.isEmpty, self.profile.sequenceOrder != .newestFirst
        else { return }
        let configuration = self.context.configuration
        let age = now.epochMillis - (self.chunkStarted ?? now).epochMillis
        guard self.pendingRecords.count >= configuration.chunkRecords || Double(age) >= configuration.chunkSeconds * 1000
        else { return }
        self.sendChunk(now, &out)
    }

    /// Hands up to ``SyncConfiguration/chunkRecords`` pending records to the store as a chunk.
    /// - Returns: whether a chunk went out.
    @discardableResult
    private mutating func sendChunk(_ now: Instant, _ out: inout [SyncAction]) -> Bool {
        // A record still waiting for its context holds back itself and what follows.
        var ready = min(self.pendingRecords.count, self.context.configuration.chunkRecords)
        let recent = max(0, self.pendingRecords.count - Self.contextPatience)
        if recent < ready, let i = self.pendingRecords[recent..<ready].firstIndex(where: \.awaitsContext) { ready = i }
        guard ready > 0 else { return false }
        let chunk = Array(self.pendingRecords[..<ready])
        self.pendingRecords.removeFirst(ready)
        self.pendingIndex = [:]
        for (i, r) in self.pendingRecords.enumerated() { self.pendingIndex[r.measurement.sequenceNumber] = i }
        self.chunkStarted = self.pendingRecords.isEmpty ? nil : now
        for r in chunk where r.awaitsContext {
            let seq = r.measurement.sequenceNumber
            self.note(SyncAnomaly(.missingContext, sequenceNumber: seq, "Record \(seq) announced a context that did not follow it; kept without it."))
        }
        self.markBeforeChunk = self.contiguousMark
        let readings = self.readings(for: chunk)
        let batch = SyncBatch(
            meter: self.identity, features: self.features, readings: readings, newHighWater: self.contiguousMark,
            session: self.runningSession(now), meterReset: self.resetToCommit, isFinal: false, highestReceived: self.maxKept,
            storedEarlier: self.storedEarlier, procedure: self.knownProcedure,
            clockSettable: self.knownProcedure.map { _ in self.settableClock != nil })
        self.resetToCommit = false
        self.chunkInFlight = true
        self.batch = batch
        out.append(.commit(batch))
        return true
    }

    /// The store committed a chunk.
    private mutating func chunkCommitted(_ result: CommitResult, _ now: Instant, _ out: inout [SyncAction]) {
        self.chunkInFlight = false
        self.chunksCommitted += 1
        self.sessionID = result.session.id
        self.storedEarlier = result.highestInCurrentEpoch
        self.session = result.session
        out.append(.publish(.committed(self.context.meter, result)))
        if let waiting = self.finalWaiting {
            self.finalWaiting = nil
            self.commitFinal(waiting.result, waiting.failure, waiting.now, &out)
        } else {
            self.flushIfDue(now, &out)
        }
    }

    /// The store could not commit a chunk: the mark goes back to where it was, and the attempt ends
    /// as a storage failure (the next attempt fetches the chunk's records again).
    private mutating func chunkFailed(_ error: StoreError, _ now: Instant, _ out: inout [SyncAction]) {
        self.chunkInFlight = false
        self.contiguousMark = self.markBeforeChunk
        self.contiguityBroken = true
        var failure = SyncFailure(.storeError, "Readings from \(self.context.meter) could not be stored: \(error.message)")
        if let waiting = self.finalWaiting {
            self.finalWaiting = nil
            failure.message += waiting.failure.map { " (after: \($0.message))" } ?? ""
            self.step = .ended(.failed, failure, lookup: nil)
            self.commitFinal(.failed, failure, waiting.now, &out)
        } else {
            self.end(failure, now, &out)
        }
    }

    /// Counts an anomaly (the first few are kept in full).
    private mutating func note(_ anomaly: SyncAnomaly) {
        self.anomalySummary.add(anomaly)
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
        self.batch = batch
        out.append(.commit(batch))
    }

    private mutating func afterCommit(_ out: inout [SyncAction]) {
        if self.connected {
            self.setPhase(.disconnecting, &out)
            out.append(.disconnect)
        } else {
            self.finalize(&out)
        }
    }

    private mutating func finalize(_ out: inout [SyncAction]) {
        guard case .ended(let result, let failure, _) = self.step, !self.phase.isFinal else { return }
        self.connected = false
        if let failure {
            self.setPhase(.failed(failure), &out)
            out.append(.publish(.failed(self.context.meter, failure)))
        } else {
            self.setPhase(.done(result), &out)
        }
        if !self.anomalySummary.isEmpty { out.append(.publish(.anomalies(self.context.meter, self.anomalySummary))) }
        let record = self.session ?? SyncSessionRecord(meter: self.context.meter, started: self.started, result: result)
        out.append(.publish(.finished(self.context.meter, record)))
        out.append(.finished(record))
    }
}
