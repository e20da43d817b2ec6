import GlucoseProfile

/// Where a meter's sync is, as a stable name for the view model and `sugarctl`.
public enum SyncPhase: Hashable, Sendable, CustomStringConvertible {
    /// No sync running.
    case idle
    /// Waiting for a connection slot (`max_connections`): served in the order meters queued.
    case queued
    /// Connecting and resolving GATT services.
    case connecting
    /// Bonding with the meter (a passkey may be requested).
    case pairing
    /// Reading Glucose Feature and Device Information.
    case readingDeviceInfo
    /// Reading the meter clock (Current Time 0x2A2B or Date Time 0x2A08).
    case readingClock
    /// Enabling notifications on 0x2A18/0x2A34 and indications on RACP.
    case subscribing
    /// RACP "report number of stored records" (and, before it, the check of the high-water record).
    case counting
    /// RACP "report stored records": records are arriving.
    case receiving
    /// Waiting before the one retry (after a timeout or "procedure already in progress").
    case waitingToRetry
    /// Writing the current local time to the meter's clock (after the download).
    case settingClock
    /// Handing the batch to the store.
    case committing
    /// Disconnecting from the meter.
    case disconnecting
    /// Ended; the batch is committed.
    case done(SyncResult)
    /// Ended by an error (readings received before it were still committed).
    case failed(SyncFailure)

    /// `idle`, `connecting`, … `done`, `failed`.
    public var name: String {
        switch self {
        case .idle: "idle"
        case .queued: "queued"
        case .connecting: "connecting"
        case .pairing: "pairing"
        case .readingDeviceInfo: "readingDeviceInfo"
        case .readingClock: "readingClock"
        case .subscribing: "subscribing"
        case .counting: "counting"
        case .receiving: "receiving"
        case .waitingToRetry: "waitingToRetry"
        case .settingClock: "settingClock"
        case .committing: "committing"
        case .disconnecting: "disconnecting"
        case .done: "done"
        case .failed: "failed"
        }
    }

    /// Whether the sync has ended.
    public var isFinal: Bool {
        switch self {
        case .done, .failed: true
        default: false
        }
    }

    public var description: String { self.name }
}

/// Why a sync failed, as a code the view model can name and one sentence for people.
public struct SyncFailure: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable {
        /// The meter stopped answering (after the one retry).
        case timeout
        /// The link dropped before the RACP response.
        case meterDisconnected
        /// The meter needs a bond (pair it: `sugarctl pair`).
        case pairingRequired
        /// Pairing was refused or the passkey was wrong.
        case pairingFailed
        /// The device lacks the Glucose service characteristics (0x2A18 and 0x2A52).
        case notAGlucoseMeter
        /// The meter answered "op code not supported" to the record report.
        case reportNotSupported
        /// Another RACP response code ended the report (see ``SyncFailure/racpResponseCode``).
        case racpError
        /// "Procedure already in progress" (ATT 0x80/0xFE) persisted after abort and one retry.
        case procedureAlreadyInProgress
        /// "CCCD improperly configured" (ATT 0x81/0xFD) persisted after re-enabling indications.
        case cccdImproperlyConfigured
        /// Another ATT error (see ``SyncFailure/attError``).
        case attError
        /// The transport failed in another way (adapter gone, connect failed).
        case transportError
        /// The store could not commit.
        case storeError
        /// The sync was stopped on purpose (shutdown, forget).
        case aborted
        /// A sync of this meter is already running.
        case syncInProgress
        /// An automatic sync came within the cooldown of a successful sync: it was deferred to its end.
        case cooldown
    }

    public var code: Code
    /// One sentence for people; never contains reading values.
    public var message: String
    /// The RACP response code, for ``Code/racpError`` and ``Code/reportNotSupported``.
    public var racpResponseCode: UInt8?
    /// The ATT error code, when one caused the failure.
    public var attError: UInt8?

    public init(_ code: Code, _ message: String, racpResponseCode: UInt8? = nil, attError: UInt8? = nil) {
        self.code = code
        self.message = message
        self.racpResponseCode = racpResponseCode
        self.attError = attError
    }

    /// How a session that ended with this failure is recorded.
    public var result: SyncResult {
        switch self.code {
        case .meterDisconnected: .interrupted
        case .aborted: .aborted
        default: .failed
        }
    }

    public var description: String { self.message }
}

/// Something odd in one sync that did not stop it: counted, logged, reported.
public struct SyncAnomaly: Hashable, Sendable, CustomStringConvertible {
    public enum Kind: String, Hashable, Sendable {
        /// A 0x2A18 packet could not be decoded; the record is skipped.
        case malformedMeasurement
        /// A 0x2A34 packet could not be decoded.
        case malformedContext
        /// A RACP indication could not be decoded.
        case malformedRACP
        /// A context whose measurement never came.
        case orphanContext
        /// A measurement announced a context that never came; kept without it.
        case missingContext
        /// A measurement that came before the sync asked for records (the rest of an earlier
        /// procedure); skipped, the report fetches it.
        case recordBeforeReport
        /// A measurement sent twice in a row; the repeat is skipped.
        case repeatedRecord
        /// A sequence number seen earlier in this sync with other content; the first is kept.
        case conflictingRecord
        /// A second context for the same record; the first is kept.
        case duplicateContext
        /// A Device Information or Feature read failed; the sync goes on without it.
        case deviceInfoUnreadable
        /// The meter clock could not be read or decoded; times are assumed correct.
        case clockUnreadable
        /// A RACP indication that fits no request in flight.
        case unexpectedRACP
        /// The RACP count could not be obtained; the report goes ahead without it.
        case countUnavailable
        /// The meter did not give its high-water record back, so the sync could not check for a reset.
        case resetCheckUnavailable
        /// A Verio record that is not a blood-glucose result (bytes 6–10 not zero): skipped.
        case notBloodGlucose
        /// A Verio command was refused or its reply did not decode; the sync went on without it.
        case commandRefused
        /// The meter clock was off (or unset) but could not be set.
        case clockNotSet
    }

    public var kind: Kind
    public var sequenceNumber: UInt16?
    /// One sentence; never contains reading values.
    public var message: String

    public init(_ kind: Kind, sequenceNumber: UInt16? = nil, _ message: String) {
        self.kind = kind
        self.sequenceNumber = sequenceNumber
        self.message = message
    }

    public var description: String { self.message }
}

/// The anomalies of one sync, bounded whatever the meter sends: a count per kind and the first
/// ``sampleLimit`` in full. Logs and observers get this summary, never an unbounded list.
public struct SyncAnomalySummary: Hashable, Sendable, CustomStringConvertible {
    /// How many anomalies are kept in full.
    public static let sampleLimit = 20

    /// The first anomalies, in the order they happened (at most ``sampleLimit``).
    public private(set) var samples: [SyncAnomaly] = []
    /// Kinds in the order they first happened, with how often each did.
    public private(set) var counts: [(kind: SyncAnomaly.Kind, count: Int)] = []
    /// All anomalies of the sync.
    public private(set) var total = 0

    public init() {}

    public init(_ anomalies: [SyncAnomaly]) {
        for a in anomalies { self.add(a) }
    }

    public var isEmpty: Bool { self.total == 0 }

    /// Counts one anomaly (and keeps it while fewer than ``sampleLimit`` are kept).
    public mutating func add(_ anomaly: SyncAnomaly) {
        self.total += 1
        if self.samples.count < Self.sampleLimit { self.samples.append(anomaly) }
        if let i = self.counts.firstIndex(where: { $0.kind == anomaly.kind }) {
            self.counts[i].count += 1
        } else {
            self.counts.append((anomaly.kind, 1))
        }
    }

    /// How many anomalies of one kind happened.
    public func count(of kind: SyncAnomaly.Kind) -> Int { self.counts.first { $0.kind == kind }?.count ?? 0 }

    /// `malformedMeasurement=3,orphanContext=1`: one entry per kind, so the length is bounded.
    public var description: String { self.counts.map { "\($0.kind.rawValue)=\($0.count)" }.joined(separator: ",") }

    public static func == (a: Self, b: Self) -> Bool {
        a.samples == b.samples && a.total == b.total && a.counts.elementsEqual(b.counts) { $0.kind == $1.kind && $0.count == $1.count }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.samples)
        hasher.combine(self.total)
    }
}

/// Timers a sync runs (at most one of each at a time).
public enum SyncTimer: String, Hashable, Sendable {
    /// The operation in flight (connect, read, CCCD write, RACP answer or the gap between records).
    case operation
    /// The pause before the one retry.
    case retry
}

/// What a RACP write is for, so its completion can be matched to it.
public enum RACPWritePurpose: String, Hashable, Sendable {
    case count
    case report
    /// The check of the high-water record after a delta report (`01 04 01 <hw> <hw>`).
    case verify
    case abort
}

/// A meter clock set by a sync after its download: how far off it was and is.
public struct ClockSetting: Hashable, Sendable {
    /// How the clock was written.
    public enum Method: String, Hashable, Sendable {
        /// Current Time 0x2A2B (Current Time Service 0x1805).
        case currentTime
        /// The i-SENS CareSens vendor time characteristic 0xFFF1.
        case isens
    }

    public var method: Method
    /// When the new time was written (host clock).
    public var at: Instant
    /// meter clock − host clock before, in seconds; nil when the clock was unset or unreadable.
    public var skewBeforeSeconds: Int64?
    /// meter clock − host clock after, in seconds: read back when the meter's clock is readable,
    /// else nil (the meter was set to the host's local time, so about 0).
    public var skewAfterSeconds: Int64?
    /// The local wall-clock time written.
    public var written: LocalDateTime

    public init(method: Method, at: Instant, skewBeforeSeconds: Int64?, skewAfterSeconds: Int64?, written: LocalDateTime) {
        self.method = method
        self.at = at
        self.skewBeforeSeconds = skewBeforeSeconds
        self.skewAfterSeconds = skewAfterSeconds
        self.written = written
    }
}

/// Something that happened, fed into ``SyncStateMachine``.
public enum SyncEvent: Hashable, Sendable {
    /// Begin the sync.
    case start
    case connected(MeterServices)
    case connectFailed(TransportError)
    case paired
    case pairingFailed(TransportError)
    case readCompleted(BluetoothUUID, [UInt8])
    case readFailed(BluetoothUUID, TransportError)
    case notificationsEnabled(BluetoothUUID)
    case notificationsFailed(BluetoothUUID, TransportError)
    case writeCompleted(RACPWritePurpose)
    case writeFailed(RACPWritePurpose, TransportError)
    /// A ``SyncAction/write(_:to:)`` completed.
    case characteristicWritten(BluetoothUUID)
    case characteristicWriteFailed(BluetoothUUID, TransportError)
    /// A notification or indication value.
    case value(BluetoothUUID, [UInt8])
    /// The link dropped.
    case disconnected(reason: String?)
    case timerFired(SyncTimer)
    /// The store's answer to ``SyncAction/lookUpStored(_:)``: the highest stored sequence number
    /// and which of the contents it holds.
    case storedLookup(highest: UInt16?, known: Set<ReadingContent>)
    /// The store committed the batch.
    case committed(CommitResult)
    case commitFailed(StoreError)
    /// The engine's disconnect returned.
    case disconnectCompleted
    /// Stop now (shutdown, forget): abort RACP, commit what arrived, disconnect.
    case abort(reason: String)
}

/// Something the driver must do for ``SyncStateMachine``, in order.
public enum SyncAction: Sendable, CustomStringConvertible {
    case connect
    case pair
    case read(BluetoothUUID)
    /// Enable notifications (indications for RACP).
    case enableNotifications(BluetoothUUID)
    /// Write with response to RACP; report completion as ``SyncEvent/writeCompleted(_:)``.
    case writeRACP([UInt8], purpose: RACPWritePurpose)
    /// Write with response to another characteristic (a Verio command or acknowledgement, a clock);
    /// report completion as ``SyncEvent/characteristicWritten(_:)``.
    case write([UInt8], to: BluetoothUUID)
    case startTimer(SyncTimer, seconds: Double)
    case cancelTimer(SyncTimer)
    /// Ask the store which of these are stored (any epoch) and its highest sequence number; answer
    /// with ``SyncEvent/storedLookup(highest:known:)`` or ``SyncEvent/commitFailed(_:)``.
    case lookUpStored([ReadingContent])
    /// Commit in one transaction; answer with ``SyncEvent/committed(_:)`` or ``SyncEvent/commitFailed(_:)``.
    case commit(SyncBatch)
    /// Disconnect; answer with ``SyncEvent/disconnectCompleted``.
    case disconnect
    /// Tell observers.
    case publish(SyncProgressEvent)
    /// The sync has ended; the record is final.
    case finished(SyncSessionRecord)

    /// A short form for logs and tests: `write(04 03 01 05 00 count)`, `commit(3, hw 7)`.
    public var description: String {
        switch self {
        case .connect: return "connect"
        case .pair: return "pair"
        case .read(let uuid): return "read(\(uuid.shortString))"
        case .enableNotifications(let uuid): return "notify(\(uuid.shortString))"
        case .writeRACP(let bytes, let purpose): return "write(\(hexString(bytes)) \(purpose.rawValue))"
        case .write(let bytes, let uuid): return "write(\(hexString(bytes)) to \(uuid.shortString))"
        case .startTimer(let timer, let seconds): return "startTimer(\(timer.rawValue), \(seconds))"
        case .cancelTimer(let timer): return "cancelTimer(\(timer.rawValue))"
        case .lookUpStored(let contents): return "lookUpStored(\(contents.count))"
        case .commit(let batch):
            return "commit(\(batch.readings.count), hw \(batch.newHighWater.map { String($0) } ?? "nil"), \(batch.session.result.rawValue))"
                + (batch.isFinal ? "" : " chunk")
        case .disconnect: return "disconnect"
        case .publish(let event): return "publish(\(event))"
        case .finished(let record): return "finished(\(record.result.rawValue))"
        }
    }
}

/// `01 03 01 05 00`.
func hexString(_ bytes: [UInt8]) -> String {
    bytes.map { b in
        let h = String(b, radix: 16)
        return h.count == 1 ? "0" + h : h
    }.joined(separator: " ")
}

/// Timeouts and retry pacing for a sync.
public struct SyncConfiguration: Hashable, Sendable {
    /// Connect plus service resolution.
    public var connectTimeout: Double
    /// Waiting for the user to enter a passkey and the bond to complete.
    public var pairingTimeout: Double
    /// A GATT read or CCCD write.
    public var operationTimeout: Double
    /// A RACP answer, and the longest gap between two records.
    public var racpTimeout: Double
    /// The pause before the one retry (Tidepool waits 1–5 s).
    public var retryDelay: Double
    /// The engine's pauses before retrying an attempt that ended for a transient reason: retry n
    /// waits entry n (the last repeats).
    public var retryBackoff: [Double]
    /// Records are committed while they arrive, in chunks of at most this many...
    public var chunkRecords: Int
    /// ...or of what arrived within this many seconds, whichever comes first.
    public var chunkSeconds: Double
    /// Set a meter's clock after a complete download when it can be set (CTS 0x2A2B with write, or the
    /// i-SENS time characteristic) and is off by more than ``clockToleranceSeconds`` or unset.
    public var setMeterClock: Bool
    /// How far a meter's clock may be off before it is set (sugard.conf `clock_tolerance`, 2 minutes).
    public var clockToleranceSeconds: Double

    /// 2 s, 10 s, 60 s, 5 min (then every 5 min).
    public static let defaultRetryBackoff: [Double] = [2, 10, 60, 300]

    public init(
        connectTimeout: Double = 30, pairingTimeout: Double = 120, operationTimeout: Double = 10,
        racpTimeout: Double = 20, retryDelay: Double = 2, retryBackoff: [Double] = SyncConfiguration.defaultRetryBackoff,
        chunkRecords: Int = 256, chunkSeconds: Double = 2, setMeterClock: Bool = true, clockToleranceSeconds: Double = 120
    ) {
        self.setMeterClock = setMeterClock
        self.clockToleranceSeconds = clockToleranceSeconds
        self.retryBackoff = retryBackoff
        self.chunkRecords = max(1, chunkRecords)
        self.chunkSeconds = chunkSeconds
        self.connectTimeout = connectTimeout
        self.pairingTimeout = pairingTimeout
        self.operationTimeout = operationTimeout
        self.racpTimeout = racpTimeout
        self.retryDelay = retryDelay
    }
}

/// What observers (the view model) hear about syncs.
public enum SyncProgressEvent: Hashable, Sendable {
    /// The transport saw a meter.
    case meterAppeared(MeterAdvertisement)
    case meterDisappeared(MeterID)
    case adapterChanged(AdapterState)
    /// The meter's identity became known (Device Information read).
    case identified(MeterIdentity)
    case phaseChanged(MeterID, SyncPhase)
    /// Records received so far and the RACP count when the meter gave one.
    case progress(MeterID, received: Int, expected: Int?)
    /// The store committed a batch.
    case committed(MeterID, CommitResult)
    case failed(MeterID, SyncFailure)
    /// Odd packets that did not stop the sync (counted per kind, the first few in full).
    case anomalies(MeterID, SyncAnomalySummary)
    /// The sync ended; the session as recorded.
    case finished(MeterID, SyncSessionRecord)
    /// An automatic sync was not started now (cooldown); ``deferred(_:until:)`` follows.
    case skipped(MeterID, SyncFailure)
    /// A trigger inside the cooldown was deferred: the sync starts at `until` (the wall-clock
    /// reading of the monotonic deadline when it was set).
    case deferred(MeterID, until: Instant)
    /// The attempt ended for a transient reason; the engine tries again at `at` (retry `attempt`).
    case retryScheduled(MeterID, at: Instant, attempt: Int)
    /// A scheduled retry or deferred sync was dropped (meter forgotten, shutdown, a sync started).
    case scheduleCleared(MeterID)
    /// Pairing waits for the passkey the meter shows (answer with `SyncEngine.submitPasskey`).
    case passkeyRequested(MeterID)
}

/// Receives ``SyncProgressEvent``s from the ``SyncEngine``, in order per meter.
///
/// Called on the engine's executor: implementations must return quickly (hand the event to the
/// view model's owner and return).
public protocol SyncObserver: Sendable {
    func syncEvent(_ event: SyncProgressEvent)
}

/// A ``SyncObserver`` from a closure.
public struct ClosureSyncObserver: SyncObserver {
    private let body: @Sendable (SyncProgressEvent) -> Void

    public init(_ body: @escaping @Sendable (SyncProgressEvent) -> Void) { self.body = body }

    public func syncEvent(_ event: SyncProgressEvent) { self.body(event) }
}
