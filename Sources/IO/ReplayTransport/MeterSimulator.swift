import GlucoseProfile
import HealthDataSync
import PacketCapture

/// Something the simulated GATT server sends on its own after an operation.
public enum SimulatorOutput: Sendable, Hashable {
    /// Handle Value Notification.
    case notification(handle: UInt16, characteristic: BluetoothUUID, value: [UInt8])
    /// Handle Value Indication (confirmed by the client).
    case indication(handle: UInt16, characteristic: BluetoothUUID, value: [UInt8])
    /// The meter dropped the link (HCI reason, 0x08 connection timeout).
    case disconnected(reason: UInt8)
}

/// The answer to a write: the ATT result and what the server sends afterwards.
public struct SimulatorWriteResult: Sendable, Hashable {
    /// Nil for a Write Response, else the ATT Error Response code.
    public var error: ATTErrorCode?
    /// What the server sends after answering (RACP indications, notifications, a dropped link).
    public var outputs: [SimulatorOutput]

    /// A write result; by default a plain Write Response with nothing after it.
    public init(error: ATTErrorCode? = nil, outputs: [SimulatorOutput] = []) {
        self.error = error
        self.outputs = outputs
    }
}

/// The answer to a read.
public enum SimulatorReadResult: Sendable, Hashable {
    /// A Read Response carrying the value.
    case value([UInt8])
    /// An ATT Error Response.
    case error(ATTErrorCode)
}

/// The outcome of a pairing attempt.
public enum SimulatorPairingResult: Sendable, Hashable {
    /// Bonded (or no bond needed).
    case bonded
    /// The passkey was wrong (SMP Pairing Failed, 0x04 confirm value failed).
    case wrongPasskey
}

/// A pure model of a Bluetooth LE glucose meter's GATT server (Glucose Service 1.0.1): discovery with
/// the personality's handles, Feature, Device Information, clock, CCCDs, RACP and its faults. It does no
/// I/O: operations go in, responses and notifications come out. With ``startRecording(format:)`` every
/// operation is also written as btsnoop frames (central's view), so a session can be saved as a capture.
///
/// RACP follows GLS §6: `01`/`04` with operators all (`01`), ≤ (`02`), ≥ (`03`), range (`04`), first
/// (`05`) and last (`06`) on sequence numbers, `03 00` abort, response codes for everything else (op
/// code not supported, invalid operator, invalid operand, operand not supported for user-facing time).
///
/// **Sequence numbers across the wrap.** Records keep the order they were taken in; the next record gets
/// the last number + 1 modulo 65536. Filters compare in serial-number arithmetic (RFC 1982) with a
/// window of 32768: record `s` is "≥ N" when `(s − N) mod 65536 < 32768` and "≤ N" when
/// `(N − s) mod 65536 < 32768`. So with records 65534, 65535, 0, 1, "≥ 65535" selects 65535, 0 and 1,
/// and "≥ 1" selects only 1. (A meter that compares plain numbers would send 65534 and 65535 for "≥ 1"
/// too; the engine's deduplication makes either safe.) "First" is the oldest record taken, "last" the
/// newest.
public struct MeterSimulator: Sendable {
    /// What the meter is.
    public private(set) var personality: MeterPersonality
    /// Stored records, oldest first.
    public private(set) var records: SimulatedRecordList
    /// A central is connected now.
    public private(set) var isConnected = false
    /// The bond survives disconnects (as a bond does).
    public private(set) var isBonded = false
    /// The effective ATT MTU of the current connection.
    public private(set) var mtu = 23
    /// CCCD values by CCCD handle, for the current connection.
    public private(set) var cccds: [UInt16: [UInt8]] = [:]
    /// Overrides the personality's clock value when set (a live demo follows the host's clock).
    public var clockValue: DateTime?
    /// The central wrote the clock (CTS 0x2A2B or i-SENS 0xFFF1): it now shows what was written, and a
    /// transport's host-clock override no longer applies.
    public private(set) var clockWasSet = false
    /// The clock values written, in order (CTS or i-SENS), as the meter decoded them.
    public private(set) var clockWrites: [DateTime] = []
    /// A Verio's stored records, oldest first (numbers keep rising; see ``addVerioRecord(_:)``).
    public private(set) var verioRecords: [(number: UInt16, record: VerioRecord)] = []
    /// The number of the newest Verio record ever taken (0 for none); `27 00` answers it.
    public private(set) var verioHighest: UInt32 = 0
    /// How many records a Verio keeps (the oldest go first).
    public var verioCapacity = 500
    /// Verio record replies sent on the current connection.
    private var verioSent = 0
    /// The faults still armed.
    private var faults: SimulatorFaults
    /// The capture being recorded, when recording.
    private var recorder: CaptureBuilder?
    /// The current write asked for streamed reports.
    private var streamReports = false
    /// A record report being sent a record at a time (``write(_:_:streamingReports:)``).
    private var streaming: ReportCursor?

    /// Where a streamed record report is.
    private struct ReportCursor: Sendable {
        /// The records to send, in order.
        var indices: [Int]
        /// The next of `indices` to send.
        var position = 0
        /// Records sent so far (for the disconnect faults).
        var sent = 0
    }

    /// The HCI connection handle used in recorded captures.
    public static let connectionHandle: UInt16 = 0x0040
    /// The central's address in recorded captures.
    public static let centralAddress = BluetoothAddress(rawValue: 0x00_1A_7D_DA_71_13)

    /// A disconnected, unbonded meter holding `records`, oldest first.
    public init(personality: MeterPersonality, records: [SimulatedRecord] = []) {
        self.personality = personality
        self.records = SimulatedRecordList(records)
        self.faults = personality.faults
    }

    /// The meter's id as the sync engine knows it.
    public var id: MeterID { self.personality.id }

    /// A Verio takes a new reading: it gets the next record number (the oldest record goes when the
    /// memory is full). - Returns: the record number.
    @discardableResult
    public mutating func addVerioRecord(_ record: VerioRecord) -> UInt16 {
        self.verioHighest += 1
        let number = UInt16(truncatingIfNeeded: self.verioHighest)
        self.verioRecords.append((number, record))
        if self.verioRecords.count > self.verioCapacity { self.verioRecords.removeFirst(self.verioRecords.count - self.verioCapacity) }
        return number
    }

    /// A Verio holding exactly these records (numbers as given, oldest first) with `highest` as the
    /// newest number ever taken (at least the highest record's), as a replayed capture showed them.
    public mutating func setVerioRecords(_ records: [(number: UInt16, record: VerioRecord)], highest: UInt32) {
        self.verioRecords = records.sorted { $0.number < $1.number }
        self.verioHighest = max(highest, UInt32(self.verioRecords.last?.number ?? 0))
    }

    /// A Verio's memory is cleared (a reset): no records, and numbering starts again from 1.
    public mutating func clearVerioMemory() {
        self.verioRecords = []
        self.verioHighest = 0
    }

    /// A Glucose Profile meter's memory is cleared (a reset): no records, and numbering starts again
    /// from 1 (``nextSequenceNumber``). A report being streamed ends.
    public mutating func clearRecords() {
        self.records = SimulatedRecordList()
        self.streaming = nil
    }

    /// The faults still armed (one-shot faults disappear once used).
    public var pendingFaults: SimulatorFaults { self.faults }

    /// Arms faults (replacing the current ones).
    public mutating func setFaults(_ faults: SimulatorFaults) { self.faults = faults }

    /// The number the next added record gets: last + 1 (mod 65536), or 1 for an empty meter.
    public var nextSequenceNumber: UInt16 {
        (self.records.indices.last { self.records.sequenceNumber(at: $0) != nil }.flatMap { self.records.sequenceNumber(at: $0) })
            .map { $0 &+ 1 } ?? 1
    }

    /// Stores a new reading as the meter does after a test: the measurement gets ``nextSequenceNumber``.
    /// The context is dropped when the meter has no 0x2A34.
    /// - Returns: the sequence number given.
    @discardableResult
    public mutating func addRecord(_ measurement: GlucoseMeasurement, context: MeasurementContext? = nil) -> UInt16 {
        var m = measurement
        m.sequenceNumber = self.nextSequenceNumber
        self.records.append(SimulatedRecord(m, context: self.personality.hasContext ? context : nil))
        return m.sequenceNumber
    }

    /// Stores a record exactly as given (its own number, or a stray packet).
    public mutating func addRecord(_ record: SimulatedRecord) {
        self.records.append(record)
    }

    // MARK: - Discovery

    /// The services as the sync engine sees them (characteristics by UUID, no handles).
    public var services: MeterServices {
        MeterServices(characteristics: self.personality.layout.characteristics.compactMap { item in
            guard let service = item.service else { return nil }
            return DiscoveredCharacteristic(
                uuid: item.uuid, service: service,
                properties: HealthDataSync.CharacteristicProperties(rawValue: item.properties?.rawValue ?? 0))
        })
    }

    /// The value handle of a characteristic (the one in the Glucose service when there are several).
    public func valueHandle(_ uuid: BluetoothUUID) -> UInt16? {
        self.characteristic(uuid)?.valueHandle
    }

    /// The CCCD handle of a characteristic.
    public func cccdHandle(_ uuid: BluetoothUUID) -> UInt16? {
        self.characteristic(uuid)?.cccdHandle
    }

    /// The characteristic with `uuid`, the one in the Glucose service first.
    private func characteristic(_ uuid: BluetoothUUID) -> GATTCharacteristic? {
        let matches = self.personality.layout.characteristics.filter { $0.uuid == uuid }
        return matches.first { $0.service == .glucoseService } ?? matches.first
    }

    // MARK: - Link

    /// The central connects, exchanges MTU and discovers the layout.
    /// - Returns: the services (the same as ``services``).
    @discardableResult
    public mutating func connect(clientMTU: UInt16 = 517) -> MeterServices {
        self.isConnected = true
        self.cccds = [:]
        self.verioSent = 0
        self.mtu = max(23, Int(min(clientMTU, self.personality.mtu)))
        let (address, serverMTU, layout) = (self.personality.address, self.personality.mtu, self.personality.layout)
        self.record { builder in
            builder.leConnect(handle: Self.connectionHandle, peer: address)
            builder.exchangeMTU(handle: Self.connectionHandle, client: clientMTU, server: serverMTU)
            builder.discover(handle: Self.connectionHandle, layout: layout)
        }
        return self.services
    }

    /// The central disconnects (HCI reason 0x13, remote user terminated).
    public mutating func disconnect() {
        self.streaming = nil
        guard self.isConnected else { return }
        self.isConnected = false
        self.cccds = [:]
        self.record { $0.disconnect(handle: Self.connectionHandle) }
    }

    /// Pairs. Needs `passkey` for a ``MeterPersonality/Pairing/passkey(_:)`` meter.
    public mutating func pair(passkey: UInt32?) -> SimulatorPairingResult {
        self.record {
            // SMP Pairing Request: KeyboardDisplay, bonding, MITM, 16-byte keys.
            $0.smp(handle: Self.connectionHandle, direction: .sent, [0x01, 0x04, 0x00, 0x0D, 0x10, 0x03, 0x03])
        }
        if case .passkey(let expected) = self.personality.pairing, passkey != expected {
            self.record { $0.smp(handle: Self.connectionHandle, direction: .received, [0x05, 0x04]) }
            return .wrongPasskey
        }
        self.isBonded = true
        self.record { $0.encryptionChange(handle: Self.connectionHandle, enabled: true) }
        return .bonded
    }

    /// Forgets the bond (the meter was reset or paired elsewhere).
    public mutating func removeBond() { self.isBonded = false }

    /// The link may reach bonded-only characteristics.
    private var linkAuthenticated: Bool { !self.personality.pairing.isRequired || self.isBonded }

    /// Whether a handle lies in a service that needs a bond.
    private func needsBond(_ handle: UInt16) -> Bool {
        guard self.personality.pairing.isRequired else { return false }
        let service = self.personality.layout.services.first { $0.startHandle <= handle && handle <= $0.endHandle }
        return service?.uuid == .glucoseService
    }

    // MARK: - Reads

    /// A Read Request. Errors: invalid handle (0x01), read not permitted (0x02), insufficient
    /// authentication (0x05) before bonding.
    public mutating func read(_ handle: UInt16) -> SimulatorReadResult {
        let result = self.readValue(handle)
        self.record { builder in
            switch result {
            case .value(let value): builder.read(handle: Self.connectionHandle, attribute: handle, value: value)
            case .error(let error): builder.readError(handle: Self.connectionHandle, attribute: handle, error: error)
            }
        }
        return result
    }

    /// The value a read of `handle` gets: GAP name and appearance, Device Information, Feature, the
    /// clock (Date Time or Current Time), or an ATT error.
    private func readValue(_ handle: UInt16) -> SimulatorReadResult {
        guard let item = self.personality.layout.characteristics.first(where: { $0.valueHandle == handle }) else {
            return .error(.invalidHandle)
        }
        guard item.properties?.contains(.read) ?? false else { return .error(.readNotPermitted) }
        if self.needsBond(handle) && !self.linkAuthenticated { return .error(.insufficientAuthentication) }
        let p = self.personality
        switch item.uuid {
        case BluetoothUUID(0x2A00): return .value(Array(p.name.utf8))
        case BluetoothUUID(0x2A01): return .value([0x00, 0x0D])  // appearance: glucose meter (0x0D00)
        case .manufacturerName: return .value(Array((p.manufacturer ?? "").utf8))
        case .modelNumber: return .value(Array((p.model ?? "").utf8))
        case .serialNumber: return .value(Array((p.serialNumber ?? "").utf8))
        case .firmwareRevision: return .value(Array((p.firmware ?? "").utf8))
        case .glucoseFeature: return .value(p.feature.encoded())
        case .dateTime:
            guard let value = self.clockValue ?? p.clock.value else { return .error(.readNotPermitted) }
            return .value(value.encoded())
        case .currentTime:
            guard let value = self.clockValue ?? p.clock.value else { return .error(.readNotPermitted) }
            return .value(CurrentTime(dateTime: value, dayOfWeek: Self.dayOfWeek(value)).encoded())
        default: return .value([])
        }
    }

    /// 1 Monday … 7 Sunday (Sakamoto), 0 when the date is unknown.
    static func dayOfWeek(_ t: DateTime) -> UInt8 {
        guard t.isDateKnown, (1...12).contains(t.month) else { return 0 }
        let offsets = [0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4]
        var y = Int(t.year)
        if t.month < 3 { y -= 1 }
        let sunday0 = (y + y / 4 - y / 100 + y / 400 + offsets[Int(t.month) - 1] + Int(t.day)) % 7
        return UInt8(sunday0 == 0 ? 7 : sunday0)
    }

    // MARK: - Writes

    /// A Write Request: a CCCD (notifications/indications) or the RACP.
    public mutating func write(_ handle: UInt16, _ value: [UInt8]) -> SimulatorWriteResult {
        self.write(handle, value, streamingReports: false)
    }

    /// A Write Request. With `streamingReports`, a record report's records are not in the result:
    /// ``nextReportOutputs()`` hands them out one record at a time (with the final RACP response),
    /// so a report of 100 000 records is never held as one list. Abort and disconnect end it.
    public mutating func write(_ handle: UInt16, _ value: [UInt8], streamingReports: Bool) -> SimulatorWriteResult {
        self.streamReports = streamingReports
        defer { self.streamReports = false }
        let result = self.handleWrite(handle, value)
        self.record { builder in
            builder.write(handle: Self.connectionHandle, attribute: handle, value: value, withResponse: true,
                          error: result.error)
        }
        self.deliver(result.outputs)
        return result
    }

    /// Enables (`01 00` notify / `02 00` indicate) or disables a characteristic's CCCD, by UUID.
    public mutating func setNotifications(_ enabled: Bool, for uuid: BluetoothUUID) -> SimulatorWriteResult {
        guard let item = self.characteristic(uuid), let cccd = item.cccdHandle else {
            return SimulatorWriteResult(error: .invalidHandle)
        }
        let indicate = !(item.properties?.contains(.notify) ?? false) && (item.properties?.contains(.indicate) ?? false)
        return self.write(cccd, enabled ? (indicate ? [0x02, 0x00] : [0x01, 0x00]) : [0x00, 0x00])
    }

    /// A RACP write, by value.
    public mutating func writeRACP(_ value: [UInt8]) -> SimulatorWriteResult {
        guard let handle = self.valueHandle(.recordAccessControlPoint) else {
            return SimulatorWriteResult(error: .invalidHandle)
        }
        return self.write(handle, value)
    }

    /// Dispatches a write: a CCCD (2 bytes, only the bits the characteristic supports, bonded where
    /// needed), the Verio command, a clock write, or the RACP (bond, indications enabled when the
    /// personality requires them, armed write faults); anything else is refused.
    private mutating func handleWrite(_ handle: UInt16, _ value: [UInt8]) -> SimulatorWriteResult {
        let layout = self.personality.layout
        if let owner = layout.characteristics.first(where: { $0.cccdHandle == handle }) {
            guard value.count == 2 else { return SimulatorWriteResult(error: .invalidAttributeValueLength) }
            if self.needsBond(handle) && !self.linkAuthenticated {
                return SimulatorWriteResult(error: .insufficientAuthentication)
            }
            let bits = value[0] & 0x03
            let allowed: UInt8 = (owner.properties?.contains(.notify) ?? false ? 1 : 0)
                | (owner.properties?.contains(.indicate) ?? false ? 2 : 0)
            guard bits & ~allowed == 0 else { return SimulatorWriteResult(error: .glucoseCCCDImproperlyConfigured) }
            self.cccds[handle] = value
            return SimulatorWriteResult()
        }
        guard let item = layout.characteristics.first(where: { $0.valueHandle == handle }) else {
            return SimulatorWriteResult(error: .invalidHandle)
        }
        let writable = item.properties?.contains(.write) ?? false
        if item.uuid == Verio.commandCharacteristic, item.service == Verio.service {
            return SimulatorWriteResult(outputs: self.verio(value))
        }
        if writable, item.uuid == .currentTime || (item.uuid == .isensTime && item.service == .isensTimeService) {
            return self.setClock(item.uuid, value)
        }
        guard item.uuid == .recordAccessControlPoint, item.service == .glucoseService else {
            return SimulatorWriteResult(error: .writeNotPermitted)
        }
        // A RACP write (abort included) ends a report still being streamed.
        self.streaming = nil
        if !self.linkAuthenticated { return SimulatorWriteResult(error: .insufficientAuthentication) }
        if self.personality.requiresRACPIndications && !self.enabled(.recordAccessControlPoint, bit: 0x02) {
            return SimulatorWriteResult(error: .glucoseCCCDImproperlyConfigured)
        }
        guard !value.isEmpty else { return SimulatorWriteResult(error: .invalidAttributeValueLength) }
        let isAbort = value.first == RACPOpCode.abortOperation.rawValue
        if !isAbort && !self.faults.racpWriteErrors.isEmpty {
            return SimulatorWriteResult(error: ATTErrorCode(rawValue: self.faults.racpWriteErrors.removeFirst()))
        }
        return SimulatorWriteResult(outputs: self.racp(value))
    }

    /// Whether the characteristic's CCCD has `bit` set (0x01 notify, 0x02 indicate).
    private func enabled(_ uuid: BluetoothUUID, bit: UInt8) -> Bool {
        guard let cccd = self.cccdHandle(uuid), let value = self.cccds[cccd] else { return false }
        return value[0] & bit != 0
    }

    // MARK: - Clock writes

    /// CTS 0x2A2B (10 bytes: Date Time, day of week, fractions, adjust reason) or i-SENS 0xFFF1
    /// (`c0 03 01 00`, Date Time): the clock shows the value from now on. A value that does not decode
    /// is refused with ATT 0x13 (value not allowed… here: invalid attribute value length 0x0D for size).
    private mutating func setClock(_ uuid: BluetoothUUID, _ value: [UInt8]) -> SimulatorWriteResult {
        let time: DateTime
        do throws(GlucoseProfileError) {
            time = uuid == .currentTime ? try CurrentTime(bytes: value).dateTime : try ISensTime(bytes: value).dateTime
        } catch {
            return SimulatorWriteResult(error: .invalidAttributeValueLength)
        }
        guard time.isDateKnown, time.isValid else { return SimulatorWriteResult(error: .invalidAttributeValueLength) }
        self.clockValue = time
        self.clockWasSet = true
        self.clockWrites.append(time)
        return SimulatorWriteResult()
    }

    // MARK: - Verio

    /// One write to the Verio command characteristic, answered as docs/verio-protocol.md describes:
    /// a one-byte acknowledgement (`81`), then the framed reply. The host's own `81` gets nothing. An
    /// unbonded host is answered "not allowed"; a missing record "not supported"; a packet that is not
    /// one of the four commands "not understood". Nothing is heard without notifications on the reply.
    private mutating func verio(_ value: [UInt8]) -> [SimulatorOutput] {
        if value == Verio.acknowledgement { return [] }
        guard let handle = self.valueHandle(Verio.replyCharacteristic), self.enabled(Verio.replyCharacteristic, bit: 0x01) else {
            return []
        }
        func notify(_ reply: VerioReply) -> SimulatorOutput {
            .notification(handle: handle, characteristic: Verio.replyCharacteristic, value: reply.encoded())
        }
        let command: VerioCommand
        do throws(GlucoseProfileError) {
            command = try VerioCommand(bytes: value)
        } catch {
            return [notify(.acknowledgement), notify(.refused(.notUnderstood))]
        }
        if !self.linkAuthenticated { return [notify(.refused(.notAllowed))] }
        var out = [notify(.acknowledgement)]
        switch command {
        case .readClock:
            guard let time = self.clockValue ?? self.personality.clock.value, let seconds = Verio.meterSeconds(time) else {
                out.append(notify(.refused(.notSupported)))
                break
            }
            out.append(notify(.data(VerioAnswer.clock(meterSeconds: seconds).payload())))
        case .highestRecordNumber:
            out.append(notify(.data(VerioAnswer.highestRecordNumber(self.verioHighest).payload())))
        case .recordCount:
            out.append(notify(.data(VerioAnswer.recordCount(UInt16(clamping: self.verioRecords.count)).payload())))
        case .record(let number):
            if let limit = self.faults.disconnectAfterRecords ?? self.faults.alwaysDisconnectAfterRecords, self.verioSent >= limit {
                self.faults.disconnectAfterRecords = nil
                return [.disconnected(reason: 0x08)]
            }
            guard let stored = self.verioRecords.first(where: { $0.number == number }) else {
                out.append(notify(.refused(.notSupported)))
                break
            }
            self.verioSent += 1
            out.append(notify(.data(VerioAnswer.record(number: number, stored.record).payload())))
        }
        return out
    }

    // MARK: - RACP

    /// A RACP response indication (`06 00 <request> <code>`).
    private func response(_ request: UInt8, _ code: RACPResponseCode) -> SimulatorOutput {
        self.racpIndication(RACPMessage.response(requestOpCode: RACPOpCode(rawValue: request), responseCode: code).encoded())
    }

    /// An indication on the RACP characteristic.
    private func racpIndication(_ bytes: [UInt8]) -> SimulatorOutput {
        .indication(handle: self.valueHandle(.recordAccessControlPoint) ?? 0, characteristic: .recordAccessControlPoint,
                    value: bytes)
    }

    /// Answers a RACP request: undecodable ones with the response code for the field at fault, abort
    /// with success, count and report per ``select(_:)`` and the faults, other op codes not supported.
    private mutating func racp(_ value: [UInt8]) -> [SimulatorOutput] {
        let message: RACPMessage
        do throws(GlucoseProfileError) {
            message = try RACPMessage(bytes: value)
        } catch {
            let code: RACPResponseCode =
                switch error.field {
                case "opCode": .opCodeNotSupported
                case "operator": .invalidOperator
                case "filterType": .operandNotSupported
                default: .invalidOperand
                }
            return [self.response(value[0], code)]
        }
        switch message.opCode {
        case .abortOperation:
            // Procedures complete within one write here, so there is never anything left to stop.
            return [self.response(message.opCode.rawValue, .success)]
        case .reportNumberOfStoredRecords:
            if self.faults.countNotSupported { return [self.response(message.opCode.rawValue, .opCodeNotSupported)] }
            switch self.select(message) {
            case .rejected(let code): return [self.response(message.opCode.rawValue, code)]
            case .records(let indices):
                let count = indices.filter { self.records.sequenceNumber(at: $0) != nil }.count
                return [self.racpIndication(RACPMessage.numberOfRecords(UInt16(clamping: count)).encoded())]
            }
        case .reportStoredRecords:
            if self.faults.reportNotSupported { return [self.response(message.opCode.rawValue, .opCodeNotSupported)] }
            switch self.select(message) {
            case .rejected(let code): return [self.response(message.opCode.rawValue, code)]
            case .records(let indices):
                if self.streamReports {
                    self.streaming = ReportCursor(indices: indices)
                    return []
                }
                return self.report(indices)
            }
        default:
            // Delete (0x02) is optional in GLS and not offered; 0x05/0x06 are server-to-client.
            return [self.response(message.opCode.rawValue, .opCodeNotSupported)]
        }
    }

    /// The records a request selects, or why it is refused.
    private enum Selection {
        /// Record indices, strays included.
        case records([Int])
        /// The RACP response code to answer with.
        case rejected(RACPResponseCode)
    }

    /// Indices of the records a request selects; strays go with the record before them.
    private func select(_ message: RACPMessage) -> Selection {
        if self.faults.noRecords { return .records([]) }
        let numbered = self.records.indices.filter { self.records.sequenceNumber(at: $0) != nil }
        var chosen: Set<Int>
        switch message.operator {
        case .allRecords:
            return .records(Array(self.records.indices))
        case .firstRecord:
            chosen = Set(numbered.prefix(1))
        case .lastRecord:
            chosen = Set(numbered.suffix(1))
        case .lessThanOrEqual, .greaterThanOrEqual, .withinRange:
            guard case .sequenceNumber(let min, let max)? = message.filter else { return .rejected(.operandNotSupported) }
            chosen = Set(numbered.filter { index in
                let s = self.records.sequenceNumber(at: index)!
                if let min, s &- min >= 0x8000 { return false }
                if let max, max &- s >= 0x8000 { return false }
                return true
            })
        default:
            return .rejected(.operatorNotSupported)
        }
        var result: [Int] = []
        var owner: Int?
        for index in self.records.indices {
            if self.records.sequenceNumber(at: index) != nil { owner = index }
            if let owner, chosen.contains(owner) { result.append(index) }
        }
        return .records(result)
    }

    /// A whole report at once: every record's packets, then its end.
    private mutating func report(_ indices: [Int]) -> [SimulatorOutput] {
        var cursor = ReportCursor(indices: indices)
        var out: [SimulatorOutput] = []
        while self.reportStep(&cursor, into: &out) {}
        return out
    }

    /// The next record of a streamed report (or its end: the RACP response, or the link dropping);
    /// empty when no report is being streamed.
    public mutating func nextReportOutputs() -> [SimulatorOutput] {
        guard var cursor = self.streaming else { return [] }
        var out: [SimulatorOutput] = []
        let more = self.reportStep(&cursor, into: &out)
        self.streaming = more ? cursor : nil
        self.deliver(out)
        return out
    }

    /// Whether a streamed report has records or its end still to send.
    public var isStreamingReport: Bool { self.streaming != nil }

    /// One record of a report, or its end; false once the report is over.
    private mutating func reportStep(_ cursor: inout ReportCursor, into out: inout [SimulatorOutput]) -> Bool {
        let notifyMeasurements = self.enabled(.glucoseMeasurement, bit: 0x01)
        let notifyContexts = self.enabled(.glucoseMeasurementContext, bit: 0x01)
        guard cursor.position < cursor.indices.count else {
            out.append(self.response(RACPOpCode.reportStoredRecords.rawValue, cursor.sent == 0 ? .noRecordsFound : .success))
            return false
        }
        let index = cursor.indices[cursor.position]
        cursor.position += 1
        let numbered = self.records.sequenceNumber(at: index) != nil
        if numbered, let limit = self.faults.disconnectAfterRecords ?? self.faults.alwaysDisconnectAfterRecords,
            cursor.sent >= limit
        {
            self.faults.disconnectAfterRecords = nil
            out.append(.disconnected(reason: 0x08))
            return false
        }
        for packet in self.records.packets(at: index) {
            switch packet {
            case .measurement(let bytes):
                if notifyMeasurements, let handle = self.valueHandle(.glucoseMeasurement) {
                    out.append(.notification(handle: handle, characteristic: .glucoseMeasurement, value: bytes))
                }
            case .context(let bytes):
                if notifyContexts, let handle = self.valueHandle(.glucoseMeasurementContext) {
                    out.append(.notification(handle: handle, characteristic: .glucoseMeasurementContext, value: bytes))
                }
            case .racpIndication(let bytes):
                out.append(self.racpIndication(bytes))
            }
        }
        if numbered { cursor.sent += 1 }
        return true
    }

    /// Applies the link side of outputs (a drop) and records them.
    private mutating func deliver(_ outputs: [SimulatorOutput]) {
        for output in outputs {
            switch output {
            case .notification(let handle, _, let value):
                self.record { $0.notify(handle: Self.connectionHandle, attribute: handle, value: value) }
            case .indication(let handle, _, let value):
                self.record { $0.indicate(handle: Self.connectionHandle, attribute: handle, value: value) }
            case .disconnected(let reason):
                self.isConnected = false
                self.cccds = [:]
                let handle = Self.connectionHandle
                // HCI Disconnection Complete: the meter dropped the link.
                self.record { $0.event(code: 0x05, parameters: [0x00, UInt8(handle & 0xFF), UInt8(handle >> 8), reason]) }
            }
        }
    }

    // MARK: - Recording

    /// Starts writing every later operation as btsnoop frames (the local host is the central).
    public mutating func startRecording(format: CaptureBuilder.Format = .h4) {
        self.recorder = CaptureBuilder(format: format, aclBufferSize: self.personality.aclBufferSize)
    }

    /// The capture so far (nil when not recording).
    public var recording: CaptureBuilder? { self.recorder }

    /// Stops recording and returns the capture.
    public mutating func stopRecording() -> CaptureBuilder? {
        defer { self.recorder = nil }
        return self.recorder
    }

    /// Writes frames to the recording, when recording.
    private mutating func record(_ body: (inout CaptureBuilder) -> Void) {
        guard var builder = self.recorder else { return }
        self.recorder = nil  // keep the builder uniquely referenced while it grows
        body(&builder)
        self.recorder = builder
    }
}
