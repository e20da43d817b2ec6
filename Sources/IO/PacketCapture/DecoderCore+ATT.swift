import GlucoseProfile

/// ATT PDUs to GATT events: requests paired with their responses, discovery tracked into the layouts,
/// handles named.
extension DecoderCore {
    /// One ATT PDU of the connection in `slot`: requests are remembered, responses paired with them and
    /// folded into the discovered layouts, writes, notifications and indications named and emitted.
    /// Malformed PDUs become anomalies.
    mutating func att(_ slot: Int, _ direction: Direction, _ pdu: UnsafeRawBufferPointer) {
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

    /// Remembers the outstanding request of the side that sent it (one per direction, as ATT allows).
    mutating func setPending(_ slot: Int, _ requester: Direction, _ request: PendingRequest) {
        if requester == .sent { self.slots[slot].pendingSent = request } else { self.slots[slot].pendingReceived = request }
    }

    /// Removes and returns the request that a response travelling in `direction` answers.
    mutating func takePending(_ slot: Int, answeredBy direction: Direction) -> PendingRequest? {
        if direction == .received {
            defer { self.slots[slot].pendingSent = nil }
            return self.slots[slot].pendingSent
        }
        defer { self.slots[slot].pendingReceived = nil }
        return self.slots[slot].pendingReceived
    }

    /// A request whose answer is decoded later: keeps the fields its response needs (handle, offset,
    /// proposed MTU, discovery type and value).
    mutating func request(_ slot: Int, _ direction: Direction, _ opcode: ATTOpcode, _ p: UnsafeRawBufferPointer) {
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

    /// A response paired with its request: MTU exchange, discovery responses (into the serving side's
    /// layout), read values and write acknowledgements. A response without its request is an anomaly.
    mutating func response(_ slot: Int, _ direction: Direction, _ opcode: ATTOpcode, _ p: UnsafeRawBufferPointer) {
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

    /// Changes the peer's layout (clearing the lookup cache) or the local one.
    mutating func updateDatabase(_ slot: Int, peer: Bool, _ body: (inout GATTDatabase) -> Void) {
        if peer {
            body(&self.slots[slot].peerDB)
            self.slots[slot].attributeCache.removeAll(keepingCapacity: true)
        } else {
            body(&self.slots[slot].localDB)
        }
    }

    /// Names `handle` in the serving side's layout; the peer's handles also fall back on the inherited
    /// layout and the overrides (cached per session).
    mutating func attribute(_ slot: Int, _ handle: UInt16, serverIsPeer: Bool) -> GATTAttribute {
        guard serverIsPeer else { return self.slots[slot].localDB.attribute(at: handle) }
        if let cached = self.slots[slot].attributeCache[handle] { return cached }
        let connection = self.slots[slot]
        let attribute = connection.peerDB.attribute(at: handle, fallback: connection.inherited, connection.overrides)
        self.slots[slot].attributeCache[handle] = attribute
        return attribute
    }

    /// Like `attribute`, and reports a value on a handle nobody named (once per session and handle).
    mutating func valueAttribute(_ slot: Int, _ handle: UInt16, serverIsPeer: Bool) -> GATTAttribute {
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

    /// Reports a malformed ATT PDU on the connection.
    mutating func malformed(_ slot: Int, _ reason: String) {
        self.anomaly(.malformedATT, session: self.slots[slot].session,
                     reason: "Malformed ATT PDU on handle \(hex16(self.slots[slot].handle)): \(reason)")
    }
}

/// An outstanding ATT request (ATT allows one per direction).
struct PendingRequest {
    /// The request's opcode; its response must be `opcode.expectedResponse`.
    var opcode: ATTOpcode
    /// The handle read, written or started from.
    var handle: UInt16 = 0
    /// The Read Blob offset.
    var offset = 0
    /// The client's proposed MTU (Exchange MTU).
    var mtu: UInt16 = 23
    /// The attribute type of a Read By (Group) Type or Find By Type Value request.
    var type: BluetoothUUID?
    /// The service UUID searched for by Find By Type Value.
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
