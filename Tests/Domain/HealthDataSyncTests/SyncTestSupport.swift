import GlucoseProfile
import HealthDataSync
import Testing
import Locking

// Test doubles for the sync engine: a scripted GATT meter that answers RACP from a list of
// records, and an in-memory store that follows the ReadingStore deduplication rules.

/// Hand-encoded Glucose Measurement (0x2A18) bytes (GLS §2), independent of the codec.
func measurementBytes(
    seq: UInt16, _ y: Int, _ mo: Int, _ d: Int, _ h: Int = 12, _ mi: Int = 0, _ s: Int = 0, offset: Int16? = nil,
    sfloat: UInt16? = nil, molPerL: Bool = false, type: UInt8 = 1, location: UInt8 = 1, status: UInt16? = nil,
    contextFollows: Bool = false
) -> [UInt8] {
    var flags: UInt8 = 0
    if offset != nil { flags |= 0x01 }
    if sfloat != nil { flags |= 0x02 }
    if molPerL { flags |= 0x04 }
    if status != nil { flags |= 0x08 }
    if contextFollows { flags |= 0x10 }
    var b: [UInt8] = [flags, UInt8(seq & 0xFF), UInt8(seq >> 8), UInt8(y & 0xFF), UInt8(y >> 8), UInt8(mo), UInt8(d), UInt8(h), UInt8(mi), UInt8(s)]
    if let offset {
        let u = UInt16(bitPattern: offset)
        b += [UInt8(u & 0xFF), UInt8(u >> 8)]
    }
    if let sfloat { b += [UInt8(sfloat & 0xFF), UInt8(sfloat >> 8), (type & 0x0F) | (location << 4)] }
    if let status { b += [UInt8(status & 0xFF), UInt8(status >> 8)] }
    return b
}

/// mg/dL as an SFLOAT in kg/L (exponent −5).
func mgdl(_ value: Int) -> UInt16 { 0xB000 | UInt16(value & 0x0FFF) }

/// A Measurement Context (0x2A34) with a meal field.
func contextBytes(seq: UInt16, meal: UInt8) -> [UInt8] { [0x02, UInt8(seq & 0xFF), UInt8(seq >> 8), meal] }

/// Current Time (0x2A2B) bytes.
func currentTimeBytes(_ t: LocalDateTime) -> [UInt8] {
    [UInt8(t.year & 0xFF), UInt8(t.year >> 8), UInt8(t.month), UInt8(t.day), UInt8(t.hour), UInt8(t.minute), UInt8(t.second), 1, 0, 0]
}

/// Date Time (0x2A08) bytes.
func dateTimeBytes(_ t: LocalDateTime) -> [UInt8] { Array(currentTimeBytes(t).prefix(7)) }

/// One stored record on a scripted meter.
struct ScriptedRecord: Sendable {
    var measurement: [UInt8]
    var context: [UInt8]?
    var seq: UInt16 { UInt16(self.measurement[1]) | UInt16(self.measurement[2]) << 8 }
}

/// What a scripted meter is and how it misbehaves.
struct MeterScript: Sendable {
    var id = MeterID("C0:26:DA:01:02:03")
    var name: String? = "meter"
    var manufacturer: String? = "Acme"
    var model: String? = "GL-1"
    var serial: String? = "SN1"
    var hasContext = true
    var clockUUID: BluetoothUUID? = .currentTime
    var clockBytes: [UInt8]? = nil
    var feature: [UInt8] = [0x00, 0x04]
    var records: [ScriptedRecord] = []
    /// `05 00` count support; false answers `06 00 04 02`.
    var supportsCount = true
    /// false answers the report with `06 00 01 02`.
    var supportsReport = true
    /// false answers a filtered report with `06 00 01 04` (operator not supported).
    var supportsFilter = true
    /// The meter says "pair first" until `pair` is called.
    var requiresBond = false
    /// ATT errors returned by the first RACP writes, in order.
    var racpWriteErrors: [UInt8] = []
    /// Drop the link after this many records of a report.
    var disconnectAfter: Int? = nil
    /// Drop the link after the measurement of the record at this index of a report (0: the first),
    /// before its context.
    var disconnectBeforeContext: Int? = nil
    /// Send this many records of a report, then go silent (no RACP response).
    var stallAfter: Int? = nil
    /// Ignore this many RACP requests (no answer), to cause timeouts.
    var ignoreRACPWrites = 0
    /// Send every record twice in a row.
    var repeatRecords = false
    /// Extra raw packets sent on 0x2A18 before the records.
    var junkBefore: [[UInt8]] = []
    /// Sends contexts before their measurement.
    var contextFirst = false
    /// Extra contexts with no measurement.
    var orphanContexts: [[UInt8]] = []
    /// Count answer override (e.g. 450 for a full Fora).
    var countOverride: UInt16? = nil
    /// Require RACP indications to be enabled before RACP writes (Contour: ATT 0x81).
    var checksCCCD = true
}

/// A GATT meter in memory, answering RACP from its records. Thread-safe.
final class ScriptedTransport: MeterTransport, Sendable {
    struct State {
        var scripts: [MeterID: MeterScript] = [:]
        var bonded: Set<MeterID> = []
        var connected: Set<MeterID> = []
        var racpIndications: Set<MeterID> = []
        var log: [String] = []
        var connects = 0
        /// How many more `connect`s may go ahead (nil: all); the others wait for a permit. A test
        /// holds meters in their slots with it, and lets them finish one at a time.
        var connectPermits: Int?
        var continuation: AsyncStream<TransportEvent>.Continuation?
    }

    let state = Lock(State())
    let stream: AsyncStream<TransportEvent>

    init(_ scripts: [MeterScript]) {
        let (stream, continuation) = AsyncStream.makeStream(of: TransportEvent.self)
        self.stream = stream
        self.state.withLock {
            $0.continuation = continuation
            for s in scripts { $0.scripts[s.id] = s }
        }
    }

    var log: [String] { self.state.withLock { $0.log } }
    var racpWrites: [String] { self.log.filter { $0.hasPrefix("write ") } }

    func update(_ id: MeterID, _ body: (inout MeterScript) -> Void) {
        self.state.withLock { body(&$0.scripts[id]!) }
    }

    /// From now on `connect` waits for a permit (``permitConnects(_:)``).
    func holdConnects() { self.state.withLock { $0.connectPermits = 0 } }

    /// Lets `count` more held `connect`s go ahead.
    func permitConnects(_ count: Int) { self.state.withLock { $0.connectPermits = $0.connectPermits.map { $0 + count } } }

    func emit(_ event: TransportEvent) { _ = self.state.withLock { $0.continuation?.yield(event) } }

    func finish() { self.state.withLock { $0.continuation?.finish() } }

    func events() -> AsyncStream<TransportEvent> { self.stream }

    func setDiscovery(_ enabled: Bool) async throws(TransportError) {}

    func connect(_ meter: MeterID) async throws(TransportError) -> MeterServices {
        while !Task.isCancelled {
            let permitted = self.state.withLock { state -> Bool in
                guard let permits = state.connectPermits else { return true }
                guard permits > 0 else { return false }
                state.connectPermits = permits - 1
                return true
            }
            if permitted { break }
            try? await Task.sleep(for: .milliseconds(2))
        }
        let script: MeterScript? = self.state.withLock {
            $0.connects += 1
            $0.log.append("connect")
            $0.connected.insert(meter)
            $0.racpIndications.remove(meter)
            return $0.scripts[meter]
        }
        guard let script else { throw TransportError(.meterNotFound, "no such meter") }
        var chars: [DiscoveredCharacteristic] = [
            .init(uuid: .glucoseMeasurement, service: .glucoseService, properties: .notify),
            .init(uuid: .glucoseFeature, service: .glucoseService, properties: .read),
            .init(uuid: .recordAccessControlPoint, service: .glucoseService, properties: [.write, .indicate]),
            .init(uuid: .manufacturerName, service: .deviceInformationService, properties: .read),
            .init(uuid: .modelNumber, service: .deviceInformationService, properties: .read),
            .init(uuid: .serialNumber, service: .deviceInformationService, properties: .read),
        ]
        if script.hasContext {
            chars.append(.init(uuid: .glucoseMeasurementContext, service: .glucoseService, properties: .notify))
        }
        if let clock = script.clockUUID {
            chars.append(.init(uuid: clock, service: clock == .dateTime ? .glucoseService : .currentTimeService, properties: .read))
        }
        return MeterServices(characteristics: chars)
    }

    func pair(_ meter: MeterID) async throws(TransportError) {
        self.state.withLock {
            $0.log.append("pair")
            $0.bonded.insert(meter)
        }
    }

    func submitPasskey(_ passkey: UInt32?, for meter: MeterID) async throws(TransportError) {}

    private func checkBond(_ meter: MeterID) throws(TransportError) {
        let ok = self.state.withLock { !($0.scripts[meter]?.requiresBond ?? false) || $0.bonded.contains(meter) }
        if !ok { throw TransportError(.attError, "Insufficient Authentication", attError: 0x05) }
    }

    func read(_ characteristic: BluetoothUUID, on meter: MeterID) async throws(TransportError) -> [UInt8] {
        let script = self.state.withLock {
            $0.log.append("read \(characteristic.shortString)")
            return $0.scripts[meter]!
        }
        switch characteristic {
        case .glucoseFeature: return script.feature
        case .manufacturerName: return Array((script.manufacturer ?? "").utf8)
        case .modelNumber: return Array((script.model ?? "").utf8)
        case .serialNumber: return Array((script.serial ?? "").utf8)
        case .currentTime, .dateTime:
            guard let bytes = script.clockBytes else { throw TransportError(.attError, "Read Not Permitted", attError: 0x02) }
            return bytes
        default: throw TransportError(.characteristicNotFound, "no \(characteristic.shortString)")
        }
    }

    func setNotifications(_ enabled: Bool, for characteristic: BluetoothUUID, on meter: MeterID) async throws(TransportError) {
        try self.checkBond(meter)
        self.state.withLock {
            $0.log.append("notify \(characteristic.shortString)")
            if characteristic == .recordAccessControlPoint { $0.racpIndications.insert(meter) }
        }
    }

    func write(_ value: [UInt8], to characteristic: BluetoothUUID, on meter: MeterID) async throws(TransportError) {
        try self.checkBond(meter)
        enum Plan {
            case fail(UInt8)
            case ignore
            case answer(MeterScript)
        }
        let plan: Plan = self.state.withLock {
            $0.log.append("write " + value.map { b in (b < 16 ? "0" : "") + String(b, radix: 16) }.joined(separator: " "))
            var script = $0.scripts[meter]!
            if script.checksCCCD && !$0.racpIndications.contains(meter) { return .fail(0x81) }
            if value.first == 0x03 { return .answer(script) }
            if !script.racpWriteErrors.isEmpty {
                let e = script.racpWriteErrors.removeFirst()
                $0.scripts[meter] = script
                return .fail(e)
            }
            if script.ignoreRACPWrites > 0 {
                script.ignoreRACPWrites -= 1
                $0.scripts[meter] = script
                return .ignore
            }
            return .answer(script)
        }
        switch plan {
        case .fail(let code): throw TransportError(.attError, "ATT error", attError: code)
        case .ignore: return
        case .answer(let script): self.answer(value, script: script, meter: meter)
        }
    }

    private func answer(_ request: [UInt8], script: MeterScript, meter: MeterID) {
        func racp(_ bytes: [UInt8]) { self.emit(.value(meter, .recordAccessControlPoint, bytes)) }
        let filtered = request.count >= 5 && (request[1] == 0x03 || request[1] == 0x04)
        let minSeq: UInt16? = filtered ? UInt16(request[3]) | UInt16(request[4]) << 8 : nil
        // Within range (`04`): a second sequence number bounds it.
        let maxSeq: UInt16? = filtered && request[1] == 0x04 && request.count >= 7 ? UInt16(request[5]) | UInt16(request[6]) << 8 : nil
        let selected = script.records.filter { (minSeq == nil || $0.seq >= minSeq!) && (maxSeq == nil || $0.seq <= maxSeq!) }
        switch request.first {
        case 0x03:
            racp([0x06, 0x00, 0x03, 0x01])
        case 0x04:
            guard script.supportsCount else { return racp([0x06, 0x00, 0x04, 0x02]) }
            let n = script.countOverride ?? UInt16(selected.count)
            racp([0x05, 0x00, UInt8(n & 0xFF), UInt8(n >> 8)])
        case 0x01:
            guard script.supportsReport else { return racp([0x06, 0x00, 0x01, 0x02]) }
            if minSeq != nil && !script.supportsFilter { return racp([0x06, 0x00, 0x01, 0x04]) }
            for junk in script.junkBefore { self.emit(.value(meter, .glucoseMeasurement, junk)) }
            func dropLink() {
                self.state.withLock { _ = $0.connected.remove(meter) }
                self.emit(.disconnected(meter, reason: "link lost"))
            }
            for (i, r) in selected.enumerated() {
                if let limit = script.disconnectAfter, i == limit { return dropLink() }
                if let limit = script.stallAfter, i == limit { return }
                if script.contextFirst, let c = r.context { self.emit(.value(meter, .glucoseMeasurementContext, c)) }
                self.emit(.value(meter, .glucoseMeasurement, r.measurement))
                if script.repeatRecords { self.emit(.value(meter, .glucoseMeasurement, r.measurement)) }
                if let limit = script.disconnectBeforeContext, i == limit { return dropLink() }
                if !script.contextFirst, let c = r.context { self.emit(.value(meter, .glucoseMeasurementContext, c)) }
            }
            for c in script.orphanContexts { self.emit(.value(meter, .glucoseMeasurementContext, c)) }
            racp([0x06, 0x00, 0x01, selected.isEmpty ? 0x06 : 0x01])
        default:
            racp([0x06, 0x00, request.first ?? 0, 0x02])
        }
    }

    func disconnect(_ meter: MeterID) async {
        self.state.withLock {
            $0.log.append("disconnect")
            $0.connected.remove(meter)
        }
    }
}

/// A ReadingStore in memory that follows the protocol's deduplication rules.
actor MemoryStore: ReadingStore {
    private var metersByID: [MeterID: StoredMeter] = [:]
    private var stored: [StoredReading] = []
    private var sessionList: [SyncSessionRecord] = []
    private var nextID: Int64 = 1
    var commits = 0
    /// Every batch committed, in order (chunks and final batches).
    var batches: [SyncBatch] = []
    var failNextCommit: StoreError?

    func setFailNextCommit(_ error: StoreError?) { self.failNextCommit = error }

    func meter(_ id: MeterID) async throws(StoreError) -> StoredMeter? { self.metersByID[id] }

    func meters() async throws(StoreError) -> [StoredMeter] { self.metersByID.values.sorted { $0.identity.id < $1.identity.id } }

    func assign(_ meter: MeterID, person: String?) async throws(StoreError) {
        guard self.metersByID[meter] != nil else { throw StoreError(.constraint, "No meter \(meter) is stored.") }
        self.metersByID[meter]?.person = person
    }

    func people() async throws(StoreError) -> [MeterID: String] {
        self.metersByID.compactMapValues(\.person)
    }

    func noteMeterSeen(_ identity: MeterIdentity, at: Instant) async throws(StoreError) {
        self.upsert(identity, features: nil, at: at)
    }

    private func upsert(_ identity: MeterIdentity, features: UInt16?, at: Instant) {
        if var m = self.metersByID[identity.id] {
            m.identity.manufacturer = identity.manufacturer ?? m.identity.manufacturer
            m.identity.model = identity.model ?? m.identity.model
            m.identity.serialNumber = identity.serialNumber ?? m.identity.serialNumber
            m.features = features ?? m.features
            m.lastSeen = at
            self.metersByID[identity.id] = m
        } else {
            self.metersByID[identity.id] = StoredMeter(
                identity: identity, features: features, firstSeen: at, lastSeen: at, highWater: nil, epoch: 0,
                lastSync: nil, lastSyncResult: nil, readingCount: 0)
        }
    }

    func commit(_ batch: SyncBatch) async throws(StoreError) -> CommitResult {
        if let error = self.failNextCommit {
            self.failNextCommit = nil
            throw error
        }
        self.commits += 1
        let now = batch.session.ended ?? batch.session.started
        self.upsert(batch.meter, features: batch.features, at: now)
        var meter = self.metersByID[batch.meter.id]!
        var inserted: [StoredReading] = []
        var duplicates = 0
        var resets = 0
        if batch.meterReset {
            meter.epoch += 1
            meter.highWater = nil
            resets += 1
        }
        for r in batch.readings {
            let same = self.stored.filter { $0.reading.meter == r.meter && $0.epoch == meter.epoch && $0.reading.sequenceNumber == r.sequenceNumber }
            if same.contains(where: { $0.reading.baseTime == r.baseTime && $0.reading.concentrationRaw == r.concentrationRaw }) {
                duplicates += 1
                continue
            }
            if !same.isEmpty {
                meter.epoch += 1
                meter.highWater = nil
                resets += 1
            }
            let s = StoredReading(id: self.nextID, epoch: meter.epoch, storedAt: now, reading: r)
            self.nextID += 1
            self.stored.append(s)
            inserted.append(s)
        }
        if let hw = batch.newHighWater {
            if let old = meter.highWater, hw < old {
                if batch.isFinal && batch.session.id == nil {
                    meter.epoch += 1
                    resets += 1
                    meter.highWater = hw
                }
                // A chunk's contiguous mark below the stored one (a full download) leaves it.
            } else {
                meter.highWater = hw
            }
        }
        if batch.isFinal {
            meter.lastSync = now
            meter.lastSyncResult = batch.session.result
        }
        meter.readingCount = self.stored.filter { $0.reading.meter == batch.meter.id }.count
        self.metersByID[batch.meter.id] = meter
        var session = batch.session
        if let id = session.id, let i = self.sessionList.firstIndex(where: { $0.id == id }) {
            // A later batch of the attempt: its counts add to the session's.
            session.stored = self.sessionList[i].stored + inserted.count
            session.duplicates = self.sessionList[i].duplicates + duplicates
            session.sequenceResets = self.sessionList[i].sequenceResets + resets
            self.sessionList[i] = session
        } else {
            session.id = Int64(self.sessionList.count + 1)
            session.stored = inserted.count
            session.duplicates += duplicates
            session.sequenceResets = resets
            self.sessionList.insert(session, at: 0)
        }
        self.batches.append(batch)
        return CommitResult(inserted: inserted, duplicates: duplicates, sequenceResets: resets, meter: meter, session: session)
    }

    func readings(afterCursor cursor: Int64, limit: Int) async throws(StoreError) -> [StoredReading] {
        Array(self.stored.filter { $0.id > cursor }.prefix(limit))
    }

    /// How often the whole reading list was asked for (a sync never should).
    var readingQueries = 0

    func readings(_ query: ReadingQuery) async throws(StoreError) -> [StoredReading] {
        self.readingQueries += 1
        return self.stored.filter { query.meter == nil || $0.reading.meter == query.meter }
    }

    func storedMeasurement(meter: MeterID, sequenceNumber: UInt16) async throws(StoreError) -> [UInt8]? {
        let epoch = self.metersByID[meter]?.epoch
        return self.stored.last { $0.reading.meter == meter && $0.epoch == epoch && $0.reading.sequenceNumber == sequenceNumber }?
            .reading.measurementBytes
    }

    func highestSequenceNumber(meter: MeterID) async throws(StoreError) -> UInt16? {
        self.stored.filter { $0.reading.meter == meter }.map(\.reading.sequenceNumber).max()
    }

    func storedContent(meter: MeterID, among candidates: [ReadingContent]) async throws(StoreError) -> Set<ReadingContent> {
        let wanted = Set(candidates)
        return Set(self.stored.filter { $0.reading.meter == meter }.map { ReadingContent($0.reading) }.filter(wanted.contains))
    }

    func readingCount(meter: MeterID?) async throws(StoreError) -> Int {
        self.stored.filter { meter == nil || $0.reading.meter == meter }.count
    }

    func sessions(meter: MeterID?, limit: Int) async throws(StoreError) -> [SyncSessionRecord] {
        Array(self.sessionList.filter { meter == nil || $0.meter == meter }.prefix(limit))
    }

    func forget(_ meter: MeterID) async throws(StoreError) {
        self.metersByID[meter] = nil
    }

    func health() async -> StorageHealth { StorageHealth(status: .ok, path: ":memory:") }
}

/// Collects observer events.
final class EventLog: SyncObserver, Sendable {
    let events = Lock<[SyncProgressEvent]>([])
    func syncEvent(_ event: SyncProgressEvent) { self.events.withLock { $0.append(event) } }
    var all: [SyncProgressEvent] { self.events.withLock { $0 } }
    var phases: [String] {
        self.all.compactMap { if case .phaseChanged(_, let p) = $0 { return p.name } else { return nil } }
    }
}

/// A settable clock.
final class TestClock: Sendable {
    let value = Lock<Int64>(1_718_445_600_000)  // 2024-06-15T10:00:00Z
    var now: Instant { Instant(epochMillis: self.value.withLock { $0 }) }
    func advance(seconds: Int64) { self.value.withLock { $0 += seconds * 1000 } }
}

/// A monotonic clock the test moves by hand: sleepers wake when ``advance(by:)`` passes their
/// deadline, never by themselves.
final class ManualSyncClock: SyncClock, Sendable {
    private struct Sleeper {
        var id: UInt64
        var deadline: Duration
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: Duration = .seconds(1000)
        var sleepers: [Sleeper] = []
        var nextID: UInt64 = 0
    }

    private let state = Lock<State>(State())

    var now: Duration { self.state.withLock { $0.now } }

    /// Sleepers waiting now.
    var sleepers: Int { self.state.withLock { $0.sleepers.count } }

    /// Deadlines of the sleepers waiting now, earliest first.
    var deadlines: [Duration] { self.state.withLock { $0.sleepers.map(\.deadline).sorted() } }

    func advance(by step: Duration) {
        let due = self.state.withLock { s -> [Sleeper] in
            s.now += step
            let now = s.now
            let due = s.sleepers.filter { $0.deadline <= now }
            s.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    func sleep(until deadline: Duration) async throws {
        let id = self.state.withLock { s -> UInt64 in
            s.nextID += 1
            return s.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                let wakeNow = self.state.withLock { s -> Bool in
                    if s.now >= deadline || Task.isCancelled { return true }
                    s.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: c))
                    return false
                }
                if wakeNow { Task.isCancelled ? c.resume(throwing: CancellationError()) : c.resume() }
            }
        } onCancel: {
            let sleeper = self.state.withLock { s -> Sleeper? in
                guard let i = s.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return s.sleepers.remove(at: i)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }
}

/// Waits (up to 5 s of real time) until `condition` holds.
func eventually(_ what: String, _ condition: () async throws -> Bool) async throws {
    for _ in 0..<1000 {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(5))
    }
    Issue.record("timed out waiting: \(what)")
}
