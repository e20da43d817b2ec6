/// ACL packets to L2CAP PDUs: reassembly per connection and direction, ATT (CID 4) and SMP (CID 6) kept.
extension DecoderCore {
    /// One ACL data packet: starts or continues the L2CAP PDU of its handle and direction. Traffic on a
    /// handle without a captured connection event opens a session with an unknown peer (reported).
    /// Classic handles are skipped.
    mutating func acl(index: UInt16, direction: Direction, _ body: UnsafeRawBufferPointer) {
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

    /// Runs `body` on the reassembly state of `slot` for `direction`, in place.
    mutating func withReassembly<R>(_ slot: Int, _ direction: Direction, _ body: (inout Reassembly) -> R) -> R {
        direction == .sent ? body(&self.slots[slot].tx) : body(&self.slots[slot].rx)
    }

    /// An ACL start fragment: a complete PDU is handled at once, a partial one begins reassembly (an
    /// unfinished previous PDU is reported and dropped), an oversized one is reported and dropped.
    mutating func start(_ slot: Int, _ direction: Direction, _ data: UnsafeRawBufferPointer) {
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

    /// An ACL continuation fragment: appends it and handles the PDU once complete; more bytes than the
    /// header announced drop the PDU (reported).
    mutating func continuation(_ slot: Int, _ direction: Direction, _ data: UnsafeRawBufferPointer) {
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

    /// A complete L2CAP PDU: ATT (CID 4) is decoded; of SMP (CID 6) only Pairing Request and Pairing
    /// Failed become events.
    mutating func l2cap(_ slot: Int, _ direction: Direction, _ cid: UInt16, _ pdu: UnsafeRawBufferPointer) {
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
}

/// L2CAP reassembly for one handle and direction.
struct Reassembly {
    /// A PDU is being collected.
    var active = false
    /// Its channel is ATT or SMP, so its bytes are kept (others are only counted).
    var interesting = false
    /// Total L2CAP bytes including the 4-byte header; −1 until the header is complete.
    var expected = 0
    /// Bytes received so far, header included.
    var collected = 0
    /// The frame of the start fragment.
    var firstFrame = 0
    /// The bytes of an interesting PDU; its capacity is reused.
    var buffer: [UInt8] = []

    /// Starts a PDU of `expected` bytes (−1: header not complete yet).
    mutating func begin(expected: Int, interesting: Bool, frame: Int) {
        self.active = true
        self.expected = expected
        self.interesting = interesting
        self.collected = 0
        self.firstFrame = frame
        self.buffer.removeAll(keepingCapacity: true)
    }

    /// Adds a fragment (its bytes kept only when interesting).
    mutating func append(_ data: UnsafeRawBufferPointer) {
        self.collected += data.count
        if self.interesting { self.buffer.append(contentsOf: data) }
    }

    /// Reads length and channel once the 4-byte header has arrived.
    mutating func learnHeader() {
        self.expected = 4 + Int(UInt16(self.buffer[0]) | UInt16(self.buffer[1]) << 8)
        let cid = UInt16(self.buffer[2]) | UInt16(self.buffer[3]) << 8
        self.interesting = cid == 0x0004 || cid == 0x0006
        if !self.interesting { self.buffer.removeAll(keepingCapacity: true) }
    }

    /// Back to idle, keeping the buffer's capacity.
    mutating func reset() {
        self.active = false
        self.expected = 0
        self.collected = 0
        self.buffer.removeAll(keepingCapacity: true)
    }
}
