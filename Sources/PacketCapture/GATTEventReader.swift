/// Reads a btsnoop capture and streams high-level GATT events, anomalies and finished sessions.
///
/// Pipeline: btsnoop records → HCI (events, ACL) → L2CAP reassembly per controller, handle and direction →
/// ATT (CID 0x0004) and SMP (CID 0x0006) → GATT discovery tracking → `CaptureItem`s. Memory stays flat:
/// only open connections and their discovered layouts are kept.
///
/// ```swift
/// let reader = try GATTEventReader(path: "btsnoop_hci.log")
/// while let item = try reader.next() {
///     if case .event(let event) = item, case .notification(let attribute, let value) = event.kind,
///         attribute.uuid == BluetoothUUID(0x2A18) { … }
/// }
/// ```
///
/// Not thread-safe: one reader, one owner.
public final class GATTEventReader {
    /// Knobs for reading.
    public struct Options: Sendable {
        /// Handle → UUID mappings used when the capture does not reveal a handle's UUID.
        public var handleOverrides: [HandleOverride]
        /// Layouts known in advance (e.g. from another capture), keyed by peer address; used like a layout
        /// learned earlier in the file.
        public var knownDatabases: [BluetoothAddress: GATTDatabase]
        /// Included lengths above this are treated as file corruption.
        public var maxRecordLength: Int
        /// A damaged record (impossible header) becomes a `.corruptRecord` anomaly with its frame number and
        /// reading goes on at the next plausible record, instead of `next()` throwing.
        public var skipCorruptRecords: Bool

        public init(
            handleOverrides: [HandleOverride] = [], knownDatabases: [BluetoothAddress: GATTDatabase] = [:],
            maxRecordLength: Int = BTSnoopReader.defaultMaxRecordLength, skipCorruptRecords: Bool = false
        ) {
            self.handleOverrides = handleOverrides
            self.knownDatabases = knownDatabases
            self.maxRecordLength = maxRecordLength
            self.skipCorruptRecords = skipCorruptRecords
        }
    }

    /// The datalink of the capture.
    public let datalink: BTSnoopDatalink
    /// Counters so far.
    public var statistics: CaptureStatistics { self.pipeline.core.statistics }
    /// The layout learned per peer so far (from finished sessions).
    public var learnedDatabases: [BluetoothAddress: GATTDatabase] {
        self.pipeline.core.learned.mapValues(\.database)
    }

    // All mutable state sits in one struct: one exclusivity check per item, not one per field and record.
    private var pipeline: Pipeline

    /// Opens a capture file.
    /// - Throws: `CaptureError` when the file cannot be opened or is not a supported btsnoop file.
    public convenience init(path: String, options: Options = Options()) throws(CaptureError) {
        try self.init(path: path, bytes: [], options: options)
    }

    /// Reads a capture image held in memory.
    /// - Throws: `CaptureError` when the image is not a supported btsnoop file.
    public convenience init(bytes: [UInt8], options: Options = Options()) throws(CaptureError) {
        try self.init(path: nil, bytes: bytes, options: options)
    }

    private init(path: String?, bytes: [UInt8], options: Options) throws(CaptureError) {
        let (cursor, datalink) = try RecordCursor.open(path: path, bytes: bytes, maxRecordLength: options.maxRecordLength)
        self.datalink = datalink
        self.pipeline = Pipeline(cursor: cursor, core: DecoderCore(datalink: datalink, options: options))
    }

    /// The next item, or nil when the capture is exhausted (open sessions are reported as ended first).
    ///
    /// - Throws: `CaptureError` `.corruptRecord` (with the frame number) when a record header is impossible,
    ///   or `.io`. After an error, further calls return the remaining session ends, then nil.
    public func next() throws(CaptureError) -> CaptureItem? {
        try self.pipeline.next()
    }

    /// Reads a whole capture into memory-friendly lists (convenience for tools and tests).
    /// - Throws: `CaptureError` as `next()`.
    public static func readAll(path: String, options: Options = Options()) throws(CaptureError) -> CaptureSummary {
        try GATTEventReader(path: path, options: options).drain()
    }

    /// Reads a whole in-memory capture.
    /// - Throws: `CaptureError` as `next()`.
    public static func readAll(bytes: [UInt8], options: Options = Options()) throws(CaptureError) -> CaptureSummary {
        try GATTEventReader(bytes: bytes, options: options).drain()
    }

    private func drain() throws(CaptureError) -> CaptureSummary {
        var summary = CaptureSummary(datalink: self.datalink)
        while let item = try self.next() {
            switch item {
            case .event(let event): summary.events.append(event)
            case .anomaly(let anomaly): summary.anomalies.append(anomaly)
            case .sessionEnded(let session): summary.sessions.append(session)
            }
        }
        summary.statistics = self.statistics
        return summary
    }
}

/// Records from the cursor through the decoder, items out one at a time.
struct Pipeline {
    var cursor: RecordCursor
    var core: DecoderCore
    var queueHead = 0

    mutating func next() throws(CaptureError) -> CaptureItem? {
        while self.queueHead == self.core.queue.count {
            self.core.queue.removeAll(keepingCapacity: true)
            self.queueHead = 0
            if self.core.finished { return nil }
            do {
                if let (record, payload) = try self.cursor.next() {
                    self.core.process(record, payload)
                } else {
                    self.core.finish(truncatedTail: self.cursor.truncatedTail)
                }
            } catch {
                if error.code == .corruptRecord, self.core.options.skipCorruptRecords, let frame = error.frame {
                    let skipped = try self.cursor.resynchronize(datalink: self.core.datalink)
                    self.core.corruptRecord(frame: frame, reason: skipped.map {
                        "\(error.message.prefix { $0 != ";" }); \($0) byte(s) skipped to the next plausible record."
                    } ?? "\(error.message.prefix { $0 != ";" }); no plausible record follows, the rest is unreadable.")
                    if skipped == nil { self.core.finish(truncatedTail: nil) }
                    continue
                }
                self.core.finish(truncatedTail: nil)
                throw error
            }
        }
        defer { self.queueHead += 1 }
        return self.core.queue[self.queueHead]
    }
}

/// The decoding state machine: records in, `CaptureItem`s out (appended to `queue`).
struct DecoderCore {
    let datalink: BTSnoopDatalink
    let options: GATTEventReader.Options
    var queue: [CaptureItem] = []
    var finished = false
    var statistics = CaptureStatistics()
    var learned: [BluetoothAddress: (database: GATTDatabase, source: DiscoverySource)] = [:]

    /// Connection slots; `handles` maps (controller index, handle) to a slot or to "classic".
    private var slots: [ConnectionState] = []
    private var freeSlots: [Int] = []
    private var handles = HandleTable()
    private var nextSession = 1
    private let globalOverrides: GATTDatabase
    private var lastDrops: UInt32 = 0

    // The record being processed.
    private var frame = 0
    private var timestamp = CaptureTimestamp(microsecondsSinceYear0: 0)
    private var snapped = false

    init(datalink: BTSnoopDatalink, options: GATTEventReader.Options) {
        self.datalink = datalink
        self.options = options
        self.globalOverrides = GATTDatabase(overrides: options.handleOverrides.filter { $0.peer == nil })
        self.queue.reserveCapacity(64)
    }

    // MARK: - Records

    mutating func finish(truncatedTail: TruncatedRecord?) {
        guard !self.finished else { return }
        self.finished = true
        if let tail = truncatedTail {
            self.anomaly(.truncatedCapture, frame: tail.frame, reason: tail.description)
        }
        let open = self.slots.indices.filter { self.slots[$0].isOpen }.sorted {
            self.slots[$0].session < self.slots[$1].session
        }
        for slot in open { self.close(slot, .endOfCapture) }
    }

    mutating func process(_ record: BTSnoopRecord, _ payload: UnsafeRawBufferPointer) {
        self.frame = record.frame
        self.timestamp = record.timestamp
        self.snapped = record.isSnapped
        self.statistics.frames += 1
        self.statistics.bytes += 24 + record.includedLength
        if record.cumulativeDrops != self.lastDrops {
            if record.cumulativeDrops > self.lastDrops {
                let lost = record.cumulativeDrops - self.lastDrops
                self.anomaly(.droppedPackets, reason: "The capturing tool lost \(lost) packet(s) before this frame; "
                    + "ATT exchanges around it may be incomplete.")
            }
            self.lastDrops = record.cumulativeDrops
            self.statistics.droppedPackets = Int(record.cumulativeDrops)
        }
        if record.includedLength > record.originalLength {
            self.anomaly(.snappedFrame, reason: "The record stores \(record.includedLength) bytes but says the packet "
                + "had \(record.originalLength).")
        }
        switch self.datalink {
        case .hciUART:
            guard payload.count >= 1 else { return }
            let direction: Direction = record.flags & 1 == 0 ? .sent : .received
            let body = UnsafeRawBufferPointer(rebasing: payload[1...])
            switch payload[0] {
            case H4PacketType.acl.rawValue: self.acl(index: 0, direction: direction, body)
            case H4PacketType.event.rawValue: self.hciEvent(index: 0, body)
            default: break
            }
        case .hciUnencapsulated:
            let direction: Direction = record.flags & 1 == 0 ? .sent : .received
            if record.flags & 2 == 0 {
                self.acl(index: 0, direction: direction, payload)
            } else if direction == .received {
                self.hciEvent(index: 0, payload)
            }
        case .monitor:
            let index = UInt16(truncatingIfNeeded: record.flags >> 16)
            switch UInt16(truncatingIfNeeded: record.flags) {
            case MonitorOpcode.eventPacket.rawValue: self.hciEvent(index: index, payload)
            case MonitorOpcode.aclTX.rawValue: self.acl(index: index, direction: .sent, payload)
            case MonitorOpcode.aclRX.rawValue: self.acl(index: index, direction: .received, payload)
            case MonitorOpcode.deleteIndex.rawValue, MonitorOpcode.closeIndex.rawValue: self.controllerGone(index)
            default: break
            }
        }
    }

    // MARK: - HCI

    private mutating func hciEvent(index: UInt16, _ body: UnsafeRawBufferPointer) {
        self.statistics.hciEvents += 1
        guard body.count >= 2 else {
            self.anomaly(.malformedHCI, reason: "HCI event of \(body.count) byte(s) has no complete header.")
            return
        }
        let code = body[0]
        let length = Int(body[1])
        guard body.count >= 2 + length else {
            self.anomaly(self.snapped ? .snappedFrame : .malformedHCI,
                         reason: "HCI event 0x\(hexByte(code)) holds \(body.count - 2) of \(length) parameter bytes.")
            return
        }
        let parameters = UnsafeRawBufferPointer(rebasing: body[2..<(2 + length)])
        switch code {
        case 0x3E where length >= 1:
            let subevent = parameters[0]
            let needed: Int
            switch subevent {
            case 0x01: needed = 19  // LE Connection Complete
            case 0x0A: needed = 31  // LE Enhanced Connection Complete [v1]
            case 0x29: needed = 34  // LE Enhanced Connection Complete [v2]
            default: return
            }
            guard length >= needed else {
                self.anomaly(.malformedHCI, reason: "LE connection event 0x\(hexByte(subevent)) has \(length) of "
                    + "\(needed) parameter bytes.")
                return
            }
            guard parameters[1] == 0 else { return }  // failed connection attempt
            self.leConnected(
                index: index, handle: parameters.loadLE16(at: 2) & 0x0FFF, peer: parameters.address(at: 6),
                addressType: AddressType(rawValue: parameters[5]), role: LinkRole(rawValue: parameters[4]))
        case 0x05 where length >= 4:  // Disconnection Complete
            guard parameters[0] == 0 else { return }
            let handle = parameters.loadLE16(at: 1) & 0x0FFF
            let slot = self.handles[index, handle]
            self.handles[index, handle] = HandleTable.none
            guard slot >= 0 else { return }
            let reason = parameters[3]
            self.emit(Int(slot), .received, .disconnected(reason: reason))
            self.close(Int(slot), .disconnected(reason: reason))
        case 0x03 where length >= 11:  // classic Connection Complete: ignore that handle's traffic
            guard parameters[0] == 0 else { return }
            let handle = parameters.loadLE16(at: 1) & 0x0FFF
            let slot = self.handles[index, handle]
            if slot >= 0 { self.close(Int(slot), .replaced) }
            self.handles[index, handle] = HandleTable.classic
        case 0x08 where length >= 4, 0x59 where length >= 5:  // Encryption Change v1 / v2
            let slot = self.handles[index, parameters.loadLE16(at: 1) & 0x0FFF]
            guard slot >= 0 else { return }
            let enabled = parameters[3] != 0
            if parameters[0] == 0 && enabled { self.slots[Int(slot)].encrypted = true }
            self.emit(Int(slot), .received, .encryptionChanged(enabled: enabled, status: parameters[0]))
        default:
            break
        }
    }

    @discardableResult
    private mutating func leConnected(
        index: UInt16, handle: UInt16, peer: BluetoothAddress?, addressType: AddressType?, role: LinkRole?
    ) -> Int {
        let stale = self.handles[index, handle]
        if stale >= 0 {
            let session = self.slots[Int(stale)].session
            self.anomaly(.connectionReplaced, session: session,
                         reason: "Connection handle \(hex16(handle)) was reused without a Disconnection Complete; "
                            + "session \(session) is closed here.")
            self.close(Int(stale), .replaced)
        }
        var connection = ConnectionState(
            session: self.nextSession, index: index, handle: handle, peer: peer, addressType: addressType,
            role: role, frame: self.frame, timestamp: self.timestamp)
        self.nextSession += 1
        connection.overrides = self.globalOverrides
        if let peer {
            if let known = self.learned[peer] {
                connection.inherited = known.database
                connection.inheritedSource = known.source
            } else if let provided = self.options.knownDatabases[peer] {
                connection.inherited = provided
                connection.inheritedSource = .provided
            }
            for item in self.options.handleOverrides where item.peer == peer { connection.overrides.apply(item) }
        }
        let slot: Int
        if let free = self.freeSlots.popLast() {
            slot = free
            self.slots[slot] = connection
        } else {
            slot = self.slots.count
            self.slots.append(connection)
        }
        self.handles[index, handle] = Int32(slot)
        self.emit(slot, .received, .connected(peer: peer, addressType: addressType, role: role))
        return slot
    }

    private mutating func controllerGone(_ index: UInt16) {
        let gone = self.slots.indices.filter { self.slots[$0].isOpen && self.slots[$0].index == index }
            .sorted { self.slots[$0].session < self.slots[$1].session }
        for slot in gone { self.close(slot, .controllerRemoved) }
        self.handles.removeAll(index: index)
    }

    /// Reports the session, remembers its layout for the peer, and frees the slot.
    private mutating func close(_ slot: Int, _ end: SessionEnd) {
        let connection = self.slots[slot]
        guard connection.isOpen else { return }
        if self.handles[connection.index, connection.handle] == Int32(slot) {
            self.handles[connection.index, connection.handle] = HandleTable.none
        }
        var database = connection.peerDB
        database.absorb(connection.inherited)
        let discovery: DiscoverySource =
            connection.peerDB.hasServiceOrCharacteristicDiscovery
            ? .performed : (connection.inherited.isEmpty ? .none : connection.inheritedSource)
        if let peer = connection.peer, !database.isEmpty {
            let source: DiscoverySource = discovery == .performed ? .reused(fromSession: connection.session) : discovery
            self.learned[peer] = (database, source)
        }
        let session = CaptureSession(
            index: connection.session, controllerIndex: connection.index, connectionHandle: connection.handle,
            peer: connection.peer, peerAddressType: connection.addressType, role: connection.role,
            firstFrame: connection.firstFrame, lastFrame: connection.lastFrame, start: connection.start,
            end: connection.end, ended: end, mtu: connection.mtu, discovery: discovery,
            discovered: connection.peerDB, database: database, eventCount: connection.eventCount,
            pairingFailed: connection.pairingFailed, encrypted: connection.encrypted)
        self.queue.append(.sessionEnded(session))
        self.slots[slot] = ConnectionState.closed
        self.freeSlots.append(slot)
    }

    // MARK: - ACL and L2CAP

    private mutating func acl(index: UInt16, direction: Direction, _ body: UnsafeRawBufferPointer) {
        self.statistics.aclFrames += 1
        guard body.count >= 4 else {
            self.anomaly(self.snapped ? .snappedFrame : .malformedHCI,
                         reason: "ACL packet of \(body.count) byte(s) has no complete header.")
            return
        }
        let header = body.loadLE16(at: 0)
        let handle = header & 0x0FFF
        let boundary = (header >> 12) & 0x3
        let length = Int(body.loadLE16(at: 2))
        let slot = Int(self.handles[index, handle])
        if slot == Int(HandleTable.classic) { return }
        guard body.count - 4 >= length else {
            self.anomaly(self.snapped ? .snappedFrame : .malformedHCI, session: slot >= 0 ? self.slots[slot].session : nil,
                         reason: "ACL packet on handle \(hex16(handle)) holds \(body.count - 4) of \(length) data bytes.")
            if slot >= 0 { self.withReassembly(slot, direction) { $0.reset() } }
            return
        }
        let data = UnsafeRawBufferPointer(rebasing: body[4..<(4 + length)])
        if boundary == 0b01 {
            guard slot >= 0, self.withReassembly(slot, direction, { $0.active }) else { return }
            self.continuation(slot, direction, data)
        } else if slot >= 0 {
            self.start(slot, direction, data)
        } else {
            guard data.count >= 4 else { return }
            let cid = data.loadLE16(at: 2)
            guard cid == 0x0004 || cid == 0x0006 else { return }
            self.anomaly(.missingConnectionEvent, session: self.nextSession,
                         reason: "ATT/SMP traffic on handle \(hex16(handle)) without a captured connection event; "
                            + "the peer address is unknown for session \(self.nextSession).")
            let created = self.leConnected(index: index, handle: handle, peer: nil, addressType: nil, role: nil)
            self.start(created, direction, data)
        }
    }

    private mutating func withReassembly<R>(_ slot: Int, _ direction: Direction, _ body: (inout Reassembly) -> R) -> R {
        direction == .sent ? body(&self.slots[slot].tx) : body(&self.slots[slot].rx)
    }

    private mutating func start(_ slot: Int, _ direction: Direction, _ data: UnsafeRawBufferPointer) {
        if self.withReassembly(slot, direction, { $0.active }) {
            let state = direction == .sent ? self.slots[slot].tx : self.slots[slot].rx
            self.anomaly(.reassembly, session: self.slots[slot].session,
                         reason: "An L2CAP PDU on handle \(hex16(self.slots[slot].handle)) (\(direction)) was "
                            + "incomplete (\(state.collected) of \(state.expected) bytes) when a new one started.")
            self.withReassembly(slot, direction) { $0.reset() }
        }
        guard data.count >= 4 else {
            let frame = self.frame
            self.withReassembly(slot, direction) {
                $0.begin(expected: -1, interesting: true, frame: frame)
                $0.append(data)
            }
            return
        }
        let total = 4 + Int(data.loadLE16(at: 0))
        let cid = data.loadLE16(at: 2)
        if data.count == total {
            if cid == 0x0004 || cid == 0x0006 {
                self.l2cap(slot, direction, cid, UnsafeRawBufferPointer(rebasing: data[4...]))
            }
        } else if data.count > total {
            self.anomaly(.reassembly, session: self.slots[slot].session,
                         reason: "An ACL start fragment on handle \(hex16(self.slots[slot].handle)) carries "
                            + "\(data.count) bytes for an L2CAP PDU of \(total); the PDU is dropped.")
        } else {
            let frame = self.frame
            self.withReassembly(slot, direction) {
                $0.begin(expected: total, interesting: cid == 0x0004 || cid == 0x0006, frame: frame)
                $0.append(data)
            }
        }
    }

    private mutating func continuation(_ slot: Int, _ direction: Direction, _ data: UnsafeRawBufferPointer) {
        let complete = self.withReassembly(slot, direction) { state -> Bool? in
            state.append(data)
            if state.expected < 0 {
                guard state.buffer.count >= 4 else { return false }
                state.learnHeader()
            }
            if state.collected > state.expected { return nil }
            return state.collected == state.expected
        }
        guard let complete else {
            let state = direction == .sent ? self.slots[slot].tx : self.slots[slot].rx
            self.anomaly(.reassembly, session: self.slots[slot].session,
                         reason: "ACL fragments on handle \(hex16(self.slots[slot].handle)) (\(direction)) carry "
                            + "\(state.collected) bytes for an L2CAP PDU of \(state.expected); the PDU is dropped.")
            self.withReassembly(slot, direction) { $0.reset() }
            return
        }
        guard complete else { return }
        // Take the buffer out so the PDU can be read while the state is mutated; give it back for reuse.
        var buffer = self.withReassembly(slot, direction) { state -> [UInt8] in
            defer { state.buffer = [] }
            return state.interesting ? state.buffer : []
        }
        if !buffer.isEmpty {
            buffer.withUnsafeBytes { pdu in
                self.l2cap(slot, direction, pdu.loadLE16(at: 2), UnsafeRawBufferPointer(rebasing: pdu[4...]))
            }
        }
        buffer.removeAll(keepingCapacity: true)
        let reusable = buffer
        self.withReassembly(slot, direction) {
            $0.reset()
            $0.buffer = reusable
        }
    }

    private mutating func l2cap(_ slot: Int, _ direction: Direction, _ cid: UInt16, _ pdu: UnsafeRawBufferPointer) {
        self.statistics.l2capPDUs += 1
        self.slots[slot].lastFrame = self.frame
        self.slots[slot].end = self.timestamp
        if cid == 0x0004 {
            self.statistics.attPDUs += 1
            self.att(slot, direction, pdu)
        } else if cid == 0x0006, pdu.count >= 1 {
            switch pdu[0] {
            case 0x01: self.emit(slot, direction, .pairingRequested)
            case 0x05 where pdu.count >= 2:
                self.slots[slot].pairingFailed = true
                self.emit(slot, direction, .pairingFailed(reason: pdu[1]))
            default: break
            }
        }
    }

    // MARK: - ATT

    private mutating func att(_ slot: Int, _ direction: Direction, _ pdu: UnsafeRawBufferPointer) {
        guard pdu.count >= 1 else {
            self.malformed(slot, "Empty ATT PDU.")
            return
        }
        let opcode = ATTOpcode(pdu[0])
        let p = UnsafeRawBufferPointer(rebasing: pdu[1...])
        // Requests travel client → server; the server is the peer when the local host sent the request.
        let requestToPeer = direction == .sent
        switch opcode.rawValue {
        case 0x01:
            guard p.count == 4 else { return self.malformed(slot, "Error Response of \(p.count + 1) bytes.") }
            let request = ATTOpcode(p[0])
            let handle = p.loadLE16(at: 1)
            let code = ATTErrorCode(rawValue: p[3])
            let pending = self.takePending(slot, answeredBy: direction)
            if pending == nil || pending!.opcode != request {
                self.anomaly(.unmatchedResponse, session: self.slots[slot].session,
                             reason: "\(opcode) to \(request) on \(hex16(handle)) has no matching request.")
            }
            if code == .attributeNotFound, let pending, pending.isDiscovery { return }
            let attribute = self.attribute(slot, handle, serverIsPeer: !requestToPeer)
            self.emit(slot, direction, .error(request: request, attribute, code: code))
        case 0x02, 0x04, 0x06, 0x08, 0x0A, 0x0C, 0x10:
            self.request(slot, direction, opcode, p)
        case 0x0E, 0x16, 0x18, 0x20:
            self.setPending(slot, direction, PendingRequest(opcode: opcode))
            self.emit(slot, direction, .opaque(opcode: opcode, parameters: Array(p)))
        case 0x03, 0x05, 0x07, 0x09, 0x0B, 0x0D, 0x11, 0x13, 0x0F, 0x17, 0x19, 0x21:
            self.response(slot, direction, opcode, p)
        case 0x12, 0x52, 0xD2:
            let signature = opcode.rawValue == 0xD2 ? 12 : 0
            guard p.count >= 2 + signature else {
                return self.malformed(slot, "\(opcode) of \(p.count + 1) bytes has no handle.")
            }
            let handle = p.loadLE16(at: 0)
            let value = Array(p[2..<(p.count - signature)])
            if opcode == .writeRequest { self.setPending(slot, direction, PendingRequest(opcode: opcode, handle: handle)) }
            let attribute = self.valueAttribute(slot, handle, serverIsPeer: requestToPeer)
            self.emit(slot, direction, .write(attribute, value: value, withResponse: opcode == .writeRequest))
        case 0x1B, 0x1D:
            guard p.count >= 2 else { return self.malformed(slot, "\(opcode) of \(p.count + 1) bytes has no handle.") }
            let attribute = self.valueAttribute(slot, p.loadLE16(at: 0), serverIsPeer: direction == .received)
            let value = Array(p[2...])
            self.emit(slot, direction, opcode.rawValue == 0x1B
                ? .notification(attribute, value: value) : .indication(attribute, value: value))
        case 0x1E:
            self.emit(slot, direction, .confirmation)
        case 0x23:
            var offset = 0
            while offset < p.count {
                guard p.count - offset >= 4, p.count - offset - 4 >= Int(p.loadLE16(at: offset + 2)) else {
                    return self.malformed(slot, "\(opcode) entry at byte \(offset + 1) is truncated.")
                }
                let length = Int(p.loadLE16(at: offset + 2))
                let attribute = self.valueAttribute(slot, p.loadLE16(at: offset), serverIsPeer: direction == .received)
                let value = Array(p[(offset + 4)..<(offset + 4 + length)])
                self.emit(slot, direction, .notification(attribute, value: value))
                offset += 4 + length
            }
        default:
            self.emit(slot, direction, .opaque(opcode: opcode, parameters: Array(p)))
        }
    }

    private mutating func setPending(_ slot: Int, _ requester: Direction, _ request: PendingRequest) {
        if requester == .sent { self.slots[slot].pendingSent = request } else { self.slots[slot].pendingReceived = request }
    }

    /// Removes and returns the request that a response travelling in `direction` answers.
    private mutating func takePending(_ slot: Int, answeredBy direction: Direction) -> PendingRequest? {
        if direction == .received {
            defer { self.slots[slot].pendingSent = nil }
            return self.slots[slot].pendingSent
        }
        defer { self.slots[slot].pendingReceived = nil }
        return self.slots[slot].pendingReceived
    }

    private mutating func request(_ slot: Int, _ direction: Direction, _ opcode: ATTOpcode, _ p: UnsafeRawBufferPointer) {
        var pending = PendingRequest(opcode: opcode)
        switch opcode.rawValue {
        case 0x02:
            guard p.count == 2 else { return self.malformed(slot, "\(opcode) of \(p.count + 1) bytes.") }
            pending.mtu = p.loadLE16(at: 0)
        case 0x04:
            guard p.count == 4 else { return self.malformed(slot, "\(opcode) of \(p.count + 1) bytes.") }
            pending.handle = p.loadLE16(at: 0)
        case 0x06:
            guard p.count >= 6 else { return self.malformed(slot, "\(opcode) of \(p.count + 1) bytes.") }
            pending.handle = p.loadLE16(at: 0)
            pending.type = BluetoothUUID(p.loadLE16(at: 4))
            pending.typeValue = BluetoothUUID(wire: UnsafeRawBufferPointer(rebasing: p[6...]))
        case 0x08, 0x10:
            guard p.count == 6 || p.count == 20, let type = BluetoothUUID(wire: UnsafeRawBufferPointer(rebasing: p[4...]))
            else { return self.malformed(slot, "\(opcode) of \(p.count + 1) bytes.") }
            pending.handle = p.loadLE16(at: 0)
            pending.type = type
        case 0x0A:
            guard p.count == 2 else { return self.malformed(slot, "\(opcode) of \(p.count + 1) bytes.") }
            pending.handle = p.loadLE16(at: 0)
        case 0x0C:
            guard p.count == 4 else { return self.malformed(slot, "\(opcode) of \(p.count + 1) bytes.") }
            pending.handle = p.loadLE16(at: 0)
            pending.offset = Int(p.loadLE16(at: 2))
        default:
            break
        }
        self.setPending(slot, direction, pending)
    }

    private mutating func response(_ slot: Int, _ direction: Direction, _ opcode: ATTOpcode, _ p: UnsafeRawBufferPointer) {
        let serverIsPeer = direction == .received
        guard let pending = self.takePending(slot, answeredBy: direction), pending.opcode.expectedResponse == opcode
        else {
            self.anomaly(.unmatchedResponse, session: self.slots[slot].session,
                         reason: "\(opcode) on handle \(hex16(self.slots[slot].handle)) has no matching request.")
            return
        }
        switch opcode.rawValue {
        case 0x03:
            guard p.count == 2 else { return self.malformed(slot, "\(opcode) of \(p.count + 1) bytes.") }
            let server = p.loadLE16(at: 0)
            self.slots[slot].mtu = max(23, Int(min(pending.mtu, server)))
            self.emit(slot, direction, .mtuExchanged(client: pending.mtu, server: server))
        case 0x05:
            guard p.count >= 1, p[0] == 1 || p[0] == 2 else {
                return self.malformed(slot, "\(opcode) has no valid format byte.")
            }
            let entry = p[0] == 1 ? 4 : 18
            guard p.count > 1, (p.count - 1) % entry == 0 else {
                return self.malformed(slot, "\(opcode) has \(p.count - 1) bytes of \(entry)-byte entries.")
            }
            for offset in stride(from: 1, to: p.count, by: entry) {
                let handle = p.loadLE16(at: offset)
                let uuid = BluetoothUUID(wire: UnsafeRawBufferPointer(rebasing: p[(offset + 2)..<(offset + entry)]))!
                self.updateDatabase(slot, peer: serverIsPeer) { $0.setType(uuid, at: handle) }
            }
        case 0x07:
            guard !p.isEmpty, p.count % 4 == 0 else {
                return self.malformed(slot, "\(opcode) has \(p.count) bytes of 4-byte entries.")
            }
            guard let type = pending.type?.uuid16, type == 0x2800 || type == 0x2801, let uuid = pending.typeValue
            else { return }
            for offset in stride(from: 0, to: p.count, by: 4) {
                let service = GATTService(uuid: uuid, startHandle: p.loadLE16(at: offset),
                                          endHandle: p.loadLE16(at: offset + 2), isPrimary: type == 0x2800)
                self.updateDatabase(slot, peer: serverIsPeer) { $0.addService(service) }
            }
        case 0x09:
            guard p.count >= 1, p[0] >= 2, p.count > 1, (p.count - 1) % Int(p[0]) == 0 else {
                return self.malformed(slot, "\(opcode) entry length does not divide its \(p.count) bytes.")
            }
            let length = Int(p[0])
            let type = pending.type ?? .characteristic
            if type == .characteristic && length != 7 && length != 21 {
                return self.malformed(slot, "Characteristic declarations of \(length - 2) bytes.")
            }
            for offset in stride(from: 1, to: p.count, by: length) {
                let handle = p.loadLE16(at: offset)
                if type == .characteristic {
                    let uuid = BluetoothUUID(wire: UnsafeRawBufferPointer(rebasing: p[(offset + 5)..<(offset + length)]))!
                    let characteristic = GATTCharacteristic(
                        uuid: uuid, declarationHandle: handle, valueHandle: p.loadLE16(at: offset + 3),
                        properties: CharacteristicProperties(rawValue: p[offset + 2]))
                    self.updateDatabase(slot, peer: serverIsPeer) { $0.addCharacteristic(characteristic) }
                } else if type != .include {
                    self.updateDatabase(slot, peer: serverIsPeer) { $0.setType(type, at: handle) }
                    let attribute = self.valueAttribute(slot, handle, serverIsPeer: serverIsPeer)
                    let value = Array(p[(offset + 2)..<(offset + length)])
                    self.emit(slot, direction, .read(attribute, value: value, offset: 0))
                }
            }
        case 0x0B, 0x0D:
            let attribute = self.valueAttribute(slot, pending.handle, serverIsPeer: serverIsPeer)
            self.emit(slot, direction, .read(attribute, value: Array(p), offset: pending.offset))
        case 0x11:
            guard p.count >= 1, p[0] == 6 || p[0] == 20, p.count > 1, (p.count - 1) % Int(p[0]) == 0 else {
                return self.malformed(slot, "\(opcode) entry length does not divide its \(p.count) bytes.")
            }
            guard pending.type == .primaryService || pending.type == .secondaryService else { return }
            let length = Int(p[0])
            let primary = pending.type == .primaryService
            for offset in stride(from: 1, to: p.count, by: length) {
                let uuid = BluetoothUUID(wire: UnsafeRawBufferPointer(rebasing: p[(offset + 4)..<(offset + length)]))!
                let service = GATTService(uuid: uuid, startHandle: p.loadLE16(at: offset),
                                          endHandle: p.loadLE16(at: offset + 2), isPrimary: primary)
                self.updateDatabase(slot, peer: serverIsPeer) { $0.addService(service) }
            }
        case 0x13:
            let attribute = self.attribute(slot, pending.handle, serverIsPeer: serverIsPeer)
            self.emit(slot, direction, .writeResponse(attribute))
        default:
            self.emit(slot, direction, .opaque(opcode: opcode, parameters: Array(p)))
        }
    }

    private mutating func updateDatabase(_ slot: Int, peer: Bool, _ body: (inout GATTDatabase) -> Void) {
        if peer {
            body(&self.slots[slot].peerDB)
            self.slots[slot].attributeCache.removeAll(keepingCapacity: true)
        } else {
            body(&self.slots[slot].localDB)
        }
    }

    private mutating func attribute(_ slot: Int, _ handle: UInt16, serverIsPeer: Bool) -> GATTAttribute {
        guard serverIsPeer else { return self.slots[slot].localDB.attribute(at: handle) }
        if let cached = self.slots[slot].attributeCache[handle] { return cached }
        let connection = self.slots[slot]
        let attribute = connection.peerDB.attribute(at: handle, fallback: connection.inherited, connection.overrides)
        self.slots[slot].attributeCache[handle] = attribute
        return attribute
    }

    /// Like `attribute`, and reports a value on a handle nobody named (once per session and handle).
    private mutating func valueAttribute(_ slot: Int, _ handle: UInt16, serverIsPeer: Bool) -> GATTAttribute {
        let attribute = self.attribute(slot, handle, serverIsPeer: serverIsPeer)
        if attribute.uuid == nil, serverIsPeer, self.slots[slot].reportedUnknown.insert(handle).inserted {
            let connection = self.slots[slot]
            let why =
                connection.peerDB.hasServiceOrCharacteristicDiscovery || !connection.inherited.isEmpty
                ? "discovery did not cover it" : "the capture holds no GATT discovery for this peer"
            self.anomaly(.unknownHandle, session: connection.session, attribute: attribute,
                         reason: "Handle \(hex16(handle)) has no known UUID: \(why); pass an override such as "
                            + "\(hex16(handle))=2a18.")
        }
        return attribute
    }

    private mutating func malformed(_ slot: Int, _ reason: String) {
        self.anomaly(.malformedATT, session: self.slots[slot].session,
                     reason: "Malformed ATT PDU on handle \(hex16(self.slots[slot].handle)): \(reason)")
    }

    // MARK: - Output

    private mutating func emit(_ slot: Int, _ direction: Direction, _ kind: GATTEventKind) {
        self.slots[slot].eventCount += 1
        self.slots[slot].lastFrame = self.frame
        self.slots[slot].end = self.timestamp
        // Field by field: copying the whole connection state would retain every database it holds.
        self.queue.append(.event(GATTEvent(
            frame: self.frame, timestamp: self.timestamp, session: self.slots[slot].session,
            controllerIndex: self.slots[slot].index, connectionHandle: self.slots[slot].handle,
            peer: self.slots[slot].peer, direction: direction, kind: kind)))
    }

    /// A damaged record the cursor skipped (`Options.skipCorruptRecords`).
    mutating func corruptRecord(frame: Int, reason: String) {
        self.statistics.corruptRecords += 1
        self.anomaly(.corruptRecord, frame: frame, reason: reason)
    }

    private mutating func anomaly(_ kind: CaptureAnomaly.Kind, frame: Int? = nil, session: Int? = nil,
                                  attribute: GATTAttribute? = nil, reason: String) {
        self.queue.append(.anomaly(CaptureAnomaly(
            kind: kind, frame: frame ?? self.frame, session: session, attribute: attribute, reason: reason)))
    }
}

/// (controller index, connection handle) → connection slot, `none` or `classic`. Index 0 (every H4
/// capture, most monitor captures) uses a flat table so the hot path does not hash.
struct HandleTable {
    static let none: Int32 = -1
    static let classic: Int32 = -2
    private var zero = [Int32](repeating: HandleTable.none, count: 4096)
    private var others: [UInt32: Int32] = [:]

    subscript(index: UInt16, handle: UInt16) -> Int32 {
        get {
            index == 0 ? self.zero[Int(handle & 0x0FFF)] : self.others[UInt32(index) << 16 | UInt32(handle)] ?? Self.none
        }
        set {
            if index == 0 {
                self.zero[Int(handle & 0x0FFF)] = newValue
            } else if newValue == Self.none {
                self.others.removeValue(forKey: UInt32(index) << 16 | UInt32(handle))
            } else {
                self.others[UInt32(index) << 16 | UInt32(handle)] = newValue
            }
        }
    }

    mutating func removeAll(index: UInt16) {
        if index == 0 {
            for position in self.zero.indices { self.zero[position] = Self.none }
        } else {
            self.others = self.others.filter { UInt16($0.key >> 16) != index }
        }
    }
}

/// Everything a capture produced, collected (see `GATTEventReader.readAll`).
public struct CaptureSummary: Hashable, Sendable {
    public var datalink: BTSnoopDatalink
    public var events: [GATTEvent] = []
    public var anomalies: [CaptureAnomaly] = []
    /// Sessions in the order they ended.
    public var sessions: [CaptureSession] = []
    public var statistics = CaptureStatistics()

    public init(datalink: BTSnoopDatalink) { self.datalink = datalink }
}

/// An outstanding ATT request (ATT allows one per direction).
struct PendingRequest {
    var opcode: ATTOpcode
    var handle: UInt16 = 0
    var offset = 0
    var mtu: UInt16 = 23
    var type: BluetoothUUID?
    var typeValue: BluetoothUUID?

    /// Discovery procedures end with "Attribute Not Found"; that answer is routine.
    var isDiscovery: Bool {
        switch self.opcode.rawValue {
        case 0x04, 0x06, 0x10: true
        case 0x08: self.type == .characteristic || self.type == .include
        default: false
        }
    }
}

/// L2CAP reassembly for one handle and direction.
struct Reassembly {
    var active = false
    var interesting = false
    /// Total L2CAP bytes including the 4-byte header; −1 until the header is complete.
    var expected = 0
    var collected = 0
    var firstFrame = 0
    var buffer: [UInt8] = []

    mutating func begin(expected: Int, interesting: Bool, frame: Int) {
        self.active = true
        self.expected = expected
        self.interesting = interesting
        self.collected = 0
        self.firstFrame = frame
        self.buffer.removeAll(keepingCapacity: true)
    }

    mutating func append(_ data: UnsafeRawBufferPointer) {
        self.collected += data.count
        if self.interesting { self.buffer.append(contentsOf: data) }
    }

    mutating func learnHeader() {
        self.expected = 4 + Int(UInt16(self.buffer[0]) | UInt16(self.buffer[1]) << 8)
        let cid = UInt16(self.buffer[2]) | UInt16(self.buffer[3]) << 8
        self.interesting = cid == 0x0004 || cid == 0x0006
        if !self.interesting { self.buffer.removeAll(keepingCapacity: true) }
    }

    mutating func reset() {
        self.active = false
        self.expected = 0
        self.collected = 0
        self.buffer.removeAll(keepingCapacity: true)
    }
}

/// State of one LE connection.
struct ConnectionState {
    static let closed = ConnectionState(
        session: 0, index: 0, handle: 0, peer: nil, addressType: nil, role: nil, frame: 0,
        timestamp: CaptureTimestamp(microsecondsSinceYear0: 0), isOpen: false)

    var isOpen: Bool
    let session: Int
    let index: UInt16
    let handle: UInt16
    let peer: BluetoothAddress?
    let addressType: AddressType?
    let role: LinkRole?
    let firstFrame: Int
    let start: CaptureTimestamp
    var lastFrame: Int
    var end: CaptureTimestamp
    var mtu = 23
    /// Reassembly of host-to-controller and controller-to-host PDUs.
    var tx = Reassembly()
    var rx = Reassembly()
    /// Outstanding request sent by the local host / by the peer.
    var pendingSent: PendingRequest?
    var pendingReceived: PendingRequest?
    /// The peer's GATT server as discovered in this session.
    var peerDB = GATTDatabase()
    /// The local GATT server as the peer discovered it.
    var localDB = GATTDatabase()
    var inherited = GATTDatabase()
    var inheritedSource = DiscoverySource.none
    var overrides = GATTDatabase()
    /// Peer-side lookups, cleared whenever `peerDB` changes.
    var attributeCache: [UInt16: GATTAttribute] = [:]
    var reportedUnknown: Set<UInt16> = []
    var eventCount = 0
    var pairingFailed = false
    var encrypted = false

    init(session: Int, index: UInt16, handle: UInt16, peer: BluetoothAddress?, addressType: AddressType?,
         role: LinkRole?, frame: Int, timestamp: CaptureTimestamp, isOpen: Bool = true) {
        self.isOpen = isOpen
        self.session = session
        self.index = index
        self.handle = handle
        self.peer = peer
        self.addressType = addressType
        self.role = role
        self.firstFrame = frame
        self.lastFrame = frame
        self.start = timestamp
        self.end = timestamp
    }
}
