import GlucoseProfile
public import HealthDataSync
import JSON
public import SugarWire

// The daemon's domain values (HealthDataSync) as the values of io.sugard.HealthDataSync
// (SugarWire). Every reply is built as `Wire.X(domainValue)` and sent as its `json`: the wire form
// has one home (SugarWire), the mapping from the domain one (this file). HealthDataSync knows
// nothing of the wire.

extension Wire.Instant {
    /// An instant as ISO 8601 in UTC and milliseconds since the epoch.
    public init(_ instant: HealthDataSync.Instant) { self.init(iso: instant.isoString, epochMillis: instant.epochMillis) }
}

extension Wire.Coded {
    /// A Glucose Measurement sample type by its stable name; codes above 15 are `reserved`.
    public init(sampleType code: UInt8) {
        self.init(name: code <= 15 ? SampleType(code: code).name : "reserved", code: Int64(code))
    }

    /// A Glucose Measurement sample location by its stable name; codes above 15 are `reserved`.
    public init(sampleLocation code: UInt8) {
        self.init(name: code <= 15 ? SampleLocation(code: code).apiName : "reserved", code: Int64(code))
    }
}

// MARK: The view model

extension Wire.Daemon {
    /// The daemon's facts with its storage health (status, path, error, identity, last check).
    public init(_ info: DaemonInfo) {
        let health = info.storage
        let status: Wire.Storage.Status
        switch health.status {
        case .ok: status = .ok
        case .degraded: status = .degraded
        case .failed: status = .failed
        }
        let error = health.error.map { Wire.StoreFailure(code: $0.code.rawValue, message: $0.message) }
        self.init(
            version: info.version, startedAt: Wire.Instant(info.startedAt),
            storage: Wire.Storage(
                status: status, path: health.path, error: error, databaseId: health.databaseId,
                check: health.check.map { Wire.StorageCheck($0) }))
    }
}

extension Wire.StorageCheck {
    /// An integrity check, case for case.
    public init(_ check: HealthDataSync.StorageCheck) {
        let kind: Kind = check.kind == .quick ? .quick : .full
        let reason: Reason
        switch check.reason {
        case .uncleanShutdown: reason = .uncleanShutdown
        case .scheduled: reason = .scheduled
        case .requested: reason = .requested
        }
        let result: Result
        switch check.result {
        case .running: result = .running
        case .ok: result = .ok
        case .damaged: result = .damaged
        case .failed: result = .failed
        }
        self.init(
            kind: kind, reason: reason, result: result, startedAt: Wire.Instant(check.started),
            finishedAt: check.finished.map { Wire.Instant($0) }, problemCount: Int64(check.problemCount),
            problems: check.problems, message: check.message)
    }
}

extension Wire.Adapter {
    /// The adapter's state, field for field.
    public init(_ adapter: AdapterState) {
        self.init(
            present: adapter.present, powered: adapter.powered, discovering: adapter.discovering, name: adapter.name,
            address: adapter.address)
    }
}

extension Wire.MeterIdentity {
    /// A meter's identity with its display name.
    public init(_ identity: HealthDataSync.MeterIdentity) {
        self.init(
            id: identity.id.rawValue, name: identity.name, manufacturer: identity.manufacturer, model: identity.model,
            serialNumber: identity.serialNumber, firmware: identity.firmware, displayName: identity.displayName)
    }
}

extension Wire.SyncResult {
    /// A sync result, case for case.
    public init(_ result: HealthDataSync.SyncResult) {
        switch result {
        case .success: self = .success
        case .noNewRecords: self = .noNewRecords
        case .failed: self = .failed
        case .interrupted: self = .interrupted
        case .aborted: self = .aborted
        case .running: self = .running
        }
    }
}

extension Wire.SyncPhase {
    /// A sync phase, case for case.
    public init(_ phase: HealthDataSync.SyncPhase) {
        switch phase {
        case .idle: self = .idle
        case .queued: self = .queued
        case .connecting: self = .connecting
        case .pairing: self = .pairing
        case .readingDeviceInfo: self = .readingDeviceInfo
        case .readingClock: self = .readingClock
        case .subscribing: self = .subscribing
        case .counting: self = .counting
        case .receiving: self = .receiving
        case .waitingToRetry: self = .waitingToRetry
        case .settingClock: self = .settingClock
        case .committing: self = .committing
        case .disconnecting: self = .disconnecting
        case .done: self = .done
        case .failed: self = .failed
        }
    }
}

extension Wire.PairingState {
    /// A pairing state, case for case.
    public init(_ pairing: HealthDataSync.PairingState) {
        switch pairing {
        case .unknown: self = .unknown
        case .notPaired: self = .notPaired
        case .pairing: self = .pairing
        case .waitingForPasskey: self = .waitingForPasskey
        case .paired: self = .paired
        case .failed: self = .failed
        }
    }
}

extension Wire.Meter.Link {
    /// A link phase, case for case.
    public init(_ link: LinkPhase) {
        switch link {
        case .disconnected: self = .disconnected
        case .connecting: self = .connecting
        case .connected: self = .connected
        case .disconnecting: self = .disconnecting
        }
    }
}

extension Wire.Progress {
    /// Records received and announced.
    public init(_ progress: SyncProgress) {
        self.init(received: Int64(progress.received), expected: progress.expected.map(Int64.init))
    }
}

extension Wire.LastSync {
    /// A meter's last finished attempt, with the clock it set.
    public init(_ last: HealthDataSync.LastSync) {
        self.init(
            meter: last.meter.rawValue, at: Wire.Instant(last.at), result: Wire.SyncResult(last.result),
            stored: Int64(last.stored), duplicates: Int64(last.duplicates), reset: last.reset,
            clockSet: last.clockSet.map(Wire.ClockSet.init))
    }
}

extension Wire.ReportedError {
    /// A reported error with its hint, meter and spec code.
    public init(_ error: HealthDataSync.ReportedError) {
        self.init(
            code: error.code, message: error.message, hint: error.hint, at: Wire.Instant(error.at), meter: error.meter?.rawValue,
            specCode: error.specCode.map(Int64.init))
    }
}

extension Wire.Meter {
    /// A meter model's whole state.
    public init(_ meter: MeterState) {
        self.init(
            id: meter.id.rawValue, identity: Wire.MeterIdentity(meter.identity), link: Link(meter.link),
            sync: Wire.SyncPhase(meter.sync), progress: Wire.Progress(meter.progress), lastSync: meter.lastSync.map(Wire.LastSync.init),
            highWater: meter.highWater.map(Int64.init), pairing: Wire.PairingState(meter.pairing),
            lastError: meter.lastError.map(Wire.ReportedError.init), nextAttempt: meter.nextAttempt.map(Wire.Instant.init))
    }
}

extension Wire.LastReading.TimeMethod {
    /// How the reading's instant was worked out, case for case.
    public init(_ method: TimeResolution.Method) {
        switch method {
        case .meterClock: self = .meterClock
        case .assumedClock: self = .assumedClock
        case .untrusted: self = .untrusted
        }
    }
}

extension Wire.LastReading {
    /// The summary; `glucose` only when it has both units (none for ketone, HI/LO and value-less records).
    public init(_ summary: ReadingSummary) {
        var glucose: Wire.Glucose?
        if let mgdL = summary.mgdL, let mmolL = summary.mmolL { glucose = Wire.Glucose(mgdL: mgdL, mmolL: mmolL) }
        self.init(
            meter: summary.meter.rawValue, sequenceNumber: Int64(summary.sequenceNumber), instant: Wire.Instant(summary.instant),
            glucose: glucose, ketoneMmolL: summary.ketoneMmolL, flags: summary.flags.names,
            sampleType: summary.sampleType.map { Wire.Coded(sampleType: $0) },
            sampleLocation: summary.sampleLocation.map { Wire.Coded(sampleLocation: $0) },
            meterLocalTime: summary.meterLocalTime.isoString, utcOffsetSeconds: Int64(summary.utcOffsetSeconds),
            timeMethod: TimeMethod(summary.timeMethod), storeID: summary.storeID, storedAt: summary.storedAt.map(Wire.Instant.init))
    }
}

extension Wire.SyncOverview {
    /// The sync overview: syncing while any meter is active, and the last result.
    public init(_ overview: HealthDataSync.SyncOverview) {
        self.init(
            phase: overview.phase == .idle ? .idle : .syncing, activeMeters: overview.activeMeters.map(\.rawValue),
            lastResult: overview.lastResult.map(Wire.LastSync.init))
    }
}

extension Wire.State {
    /// The whole view model as `GetStatus` and a Watch snapshot of `State` send it.
    public init(_ state: ViewState) {
        self.init(
            daemon: Wire.Daemon(state.daemon), adapter: Wire.Adapter(state.adapter), meters: state.meterList.map(Wire.Meter.init),
            lastReading: state.lastReading.map(Wire.LastReading.init), readingCount: Int64(state.readingCount),
            sync: Wire.SyncOverview(state.sync), errors: state.errors.map(Wire.ReportedError.init))
    }
}

// MARK: Watch

/// A model field's value with a wire form: a field of `State` (the view model) or of `Meter`.
public protocol WireFieldValue {
    var wire: Wire.WatchedField { get }
}

extension ViewState.Value: WireFieldValue {
    /// The field's value as a Watch reply carries it.
    public var wire: Wire.WatchedField {
        switch self {
        case .daemon(let daemon): return .daemon(Wire.Daemon(daemon))
        case .adapter(let adapter): return .adapter(Wire.Adapter(adapter))
        case .meters(let meters): return .meters(meters.map(Wire.Meter.init))
        case .lastReading(let reading): return .lastReading(reading.map(Wire.LastReading.init))
        case .readingCount(let count): return .readingCount(Int64(count))
        case .sync(let sync): return .syncOverview(Wire.SyncOverview(sync))
        case .errors(let errors): return .errors(errors.map(Wire.ReportedError.init))
        }
    }
}

extension MeterState.Value: WireFieldValue {
    /// The meter field's value as a Watch reply carries it.
    public var wire: Wire.WatchedField {
        switch self {
        case .identity(let identity): return .identity(Wire.MeterIdentity(identity))
        case .link(let link): return .link(Wire.Meter.Link(link))
        case .sync(let phase): return .syncPhase(Wire.SyncPhase(phase))
        case .progress(let progress): return .progress(Wire.Progress(progress))
        case .lastSync(let last): return .lastSync(last.map(Wire.LastSync.init))
        case .highWater(let mark): return .highWater(mark.map(Int64.init))
        case .pairing(let pairing): return .pairing(Wire.PairingState(pairing))
        case .lastError(let error): return .lastError(error.map(Wire.ReportedError.init))
        case .nextAttempt(let at): return .nextAttempt(at.map(Wire.Instant.init))
        }
    }
}

extension WireMap<Int64> {
    /// The revision of each field of `message`, in declaration order.
    public init<State: ObservableState>(revisionsOf message: WatchMessage<State>) {
        self.init(revisions: State.Field.allCases.compactMap { field in message.fields[field].map { (field, $0.revision) } })
    }

    /// Revisions of fields, in the order given, under the fields' wire names.
    public init<Field: RawRepresentable>(revisions: [(Field, UInt64)]) where Field.RawValue == String {
        self.init(revisions.map { (key: $0.0.rawValue, value: Int64(truncatingIfNeeded: $0.1)) })
    }
}

extension Wire.WatchReply {
    /// A watcher's message, its fields in declaration order; `meter` names the meter a
    /// `followSyncing` watcher is bound to.
    public init<State: ObservableState>(_ message: WatchMessage<State>, meter: String? = nil) where State.Value: WireFieldValue {
        var fields = JSONObject()
        fields.reserveCapacity(message.fields.count)
        for field in State.Field.allCases {
            guard let update = message.fields[field] else { continue }
            fields[field.rawValue] = update.value.wire.json
        }
        self.init(
            generation: Int64(truncatingIfNeeded: message.generation), revision: Int64(truncatingIfNeeded: message.globalRevision),
            snapshot: message.isSnapshot, fields: fields, revisions: WireMap(revisionsOf: message), meter: meter)
    }
}

// MARK: The store

extension Wire.StoredMeter {
    /// What the store knows about a meter.
    public init(_ meter: HealthDataSync.StoredMeter) {
        self.init(
            firstSeen: Wire.Instant(meter.firstSeen), lastSeen: Wire.Instant(meter.lastSeen), highWater: meter.highWater.map(Int64.init),
            epoch: Int64(meter.epoch), lastSync: meter.lastSync.map(Wire.Instant.init),
            lastSyncResult: meter.lastSyncResult.map(Wire.SyncResult.init), readingCount: Int64(meter.readingCount),
            features: meter.features.map(Int64.init), person: meter.person, shared: meter.shared)
    }
}

extension Wire.Session {
    /// A sync session with its counts, error, resets and clock setting.
    public init(_ session: SyncSessionRecord) {
        self.init(
            id: session.id, meter: session.meter.rawValue, started: Wire.Instant(session.started),
            ended: session.ended.map(Wire.Instant.init), result: Wire.SyncResult(session.result),
            expected: session.expected.map(Int64.init), received: Int64(session.received), stored: Int64(session.stored),
            duplicates: Int64(session.duplicates), error: session.error, reset: session.reset,
            sequenceResets: Int64(session.sequenceResets), clockSet: session.clockSet.map(Wire.ClockSet.init))
    }
}

extension Wire.ClockSet {
    /// A clock setting: method, when, the time written and the skew before and after.
    public init(_ clock: ClockSetting) {
        self.init(
            method: clock.method == .currentTime ? .currentTime : .isens, at: Wire.Instant(clock.at),
            written: clock.written.isoString, skewBeforeSeconds: clock.skewBeforeSeconds, skewAfterSeconds: clock.skewAfterSeconds)
    }
}

extension Wire.ReadingTime {
    /// A reading's `time` object: the instant in UTC and in the zone used, how it was worked out, the
    /// meter's own clock reading and skew, and the quirks applied.
    public init(_ reading: HealthDataSync.Reading) {
        let time = reading.time
        self.init(
            iso: reading.instant.isoString, epochMillis: reading.instant.epochMillis,
            local: reading.instant.isoString(utcOffsetSeconds: time.utcOffsetSeconds), utcOffsetMinutes: Int64(time.utcOffsetSeconds / 60),
            zone: time.zone, method: Wire.LastReading.TimeMethod(time.method), meterLocalTime: time.meterLocalTime.isoString,
            meterClockSkewSeconds: time.meterClockSkewSeconds, quirks: time.quirks)
    }
}

extension Wire.Reading {
    /// The Verio record an 11-byte stored payload holds, if it decodes.
    static func verioRecord(_ bytes: [UInt8]) -> VerioRecord? {
        var reader = ByteReader(bytes)
        return try? VerioRecord(parsing: &reader)
    }

    /// A stored reading as `ListReadings` (and `sugarctl readings --format json`) shows it.
    ///
    /// It carries every key of `sugarctl decode measurement --json` (decoded again from the stored
    /// raw packet, so the two can never disagree), with `mgdL`/`mmolL` replaced by the daemon's
    /// conclusion (null for ketone, HI, LO and value-less records), plus: `id`, `meter`, `epoch`
    /// (sequence-reset epoch), `ketoneMmolL`, `flags` (names), `time` {`iso` (UTC), `epochMillis`,
    /// `local` (ISO 8601 with the zone offset used), `utcOffsetMinutes`, `zone`, `method`,
    /// `meterClockSkewSeconds`, `quirks`}, `storedAt` {`iso`, `epochMillis`}, `person` (the person the
    /// reading belongs to, or null), `context` (the decoded context object or null) and
    /// `awaitingAttribution`. A packet this version cannot decode shows its stored raw facts instead.
    public init(_ stored: StoredReading) {
        let r = stored.reading
        let profile: JSONObject
        let sequenceNumber: Int64
        if let measurement = try? GlucoseMeasurement(bytes: r.measurementBytes, options: .lenientDateTime),
            case .object(let decoded) = measurement.json
        {
            profile = decoded
            sequenceNumber = Int64(measurement.sequenceNumber)
        } else if r.measurementBytes.count == VerioRecord.byteCount,
            let record = Self.verioRecord(r.measurementBytes)
        {
            // A OneTouch Verio record (its 11 payload bytes, kept as received): the characteristic is
            // the Verio reply, the record number the sequence number.
            profile = [
                "characteristic": .string(Verio.replyCharacteristic.uuidString), "procedure": "verio",
                "sequenceNumber": .int(Int64(r.sequenceNumber)), "baseTime": .string(r.baseTime.isoString),
                "timeOffsetMinutes": .null, "meterSeconds": .int(Int64(record.meterSeconds)),
                "mgdL": .int(Int64(record.mgdL)),
            ]
            sequenceNumber = Int64(r.sequenceNumber)
        } else {
            // Only reachable for a row written by a future version with a packet this one cannot
            // read: show the stored raw facts rather than nothing.
            profile = [
                "characteristic": "2a18",
                "sequenceNumber": .int(Int64(r.sequenceNumber)),
                "baseTime": .string(r.baseTime.isoString),
                "timeOffsetMinutes": .from(r.timeOffsetMinutes),
            ]
            sequenceNumber = Int64(r.sequenceNumber)
        }
        var context: JSONObject?
        if let bytes = r.contextBytes, let decoded = try? MeasurementContext(bytes: bytes), case .object(let object) = decoded.json {
            context = object
        }
        self.init(
            profile: profile, id: stored.id, meter: r.meter.rawValue, epoch: Int64(stored.epoch), sequenceNumber: sequenceNumber,
            mgdL: r.mgdL, mmolL: r.mmolL, ketoneMmolL: r.ketoneMmolL, flags: r.flags.names, time: Wire.ReadingTime(r),
            storedAt: Wire.Instant(stored.storedAt), person: stored.person, context: context,
            awaitingAttribution: stored.awaitingAttribution)
    }
}

extension Wire.Glucose {
    /// A threshold in mg/dL in both units.
    public init(mgdL: Double) { self.init(mgdL: mgdL, mmolL: mgdL / GlucoseUnit.molarMass) }
}

extension Wire.PersonIdentifier {
    /// An identifier as `{system, value}`.
    public init(_ identifier: PersonIdentifier) { self.init(system: identifier.system, value: identifier.value) }
    /// The identifier as the domain keeps it.
    public var domain: PersonIdentifier { PersonIdentifier(system: self.system, value: self.value) }
}

extension Wire.Person {
    /// A stored person; `meters` are the meters assigned to them now.
    public init(_ person: PersonRecord, meters: [String]) {
        self.init(
            id: person.id, name: person.name, identifiers: person.identifiers.map(Wire.PersonIdentifier.init),
            low: person.lowMgdL.map { Wire.Glucose(mgdL: $0) }, high: person.highMgdL.map { Wire.Glucose(mgdL: $0) },
            unit: person.unit, created: Wire.Instant(person.created),
            readingCount: Int64(person.readingCount), meters: meters)
    }
}

extension Wire.Assignment {
    /// An assignment period: person or shared, from, until and its reading count.
    public init(_ period: MeterAssignment) {
        self.init(
            meter: period.meter.rawValue, person: period.person, shared: period.holder == .shared,
            from: Wire.Instant(period.from), until: period.until.map(Wire.Instant.init), readingCount: Int64(period.readingCount))
    }
}
