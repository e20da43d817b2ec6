import GlucoseProfile

/// Builds realistic btsnoop captures from a high-level script: HCI events, ACL fragmentation at a given
/// buffer size, ATT PDUs sized to the negotiated MTU, full GATT discovery for a handle layout.
///
/// The local host is the GATT client and LE central (a phone or PC talking to a meter): requests are
/// `.sent`, responses and notifications `.received`. Every frame advances the clock by `frameInterval`.
///
/// ```swift
/// var builder = CaptureBuilder(format: .h4, aclBufferSize: 27)
/// let layout = GATTLayout.glucoseMeter(startHandle: 0x0010)
/// builder.leConnect(handle: 0x0040, peer: meter)
/// builder.exchangeMTU(handle: 0x0040, client: 247, server: 185)
/// builder.discover(handle: 0x0040, layout: layout)
/// builder.write(handle: 0x0040, attribute: layout.cccdHandle(BluetoothUUID(0x2A18))!, value: [1, 0])
/// builder.notify(handle: 0x0040, attribute: layout.valueHandle(BluetoothUUID(0x2A18))!, value: payload)
/// builder.disconnect(handle: 0x0040)
/// try builder.write(to: path)
/// ```
public struct CaptureBuilder: Sendable {
    /// The btsnoop flavour to produce.
    public enum Format: Sendable, Hashable {
        /// Datalink 1002, H4 type byte per record (Android `btsnoop_hci.log`).
        case h4
        /// Datalink 2001, `btmon -w`: controller index and opcode in the flags.
        case monitor
    }

    /// The flavour being built (fixed at creation: the header is already in ``image``).
    public let format: Format
    /// Largest ACL data payload per HCI packet (LE controllers commonly report 27 or 251).
    public var aclBufferSize: Int
    /// Controller index for subsequent frames (monitor format only; H4 captures have one controller).
    public var controllerIndex: UInt16 = 0
    /// Time of the next frame.
    public var time: CaptureTimestamp
    /// Clock advance per frame.
    public var frameInterval: Int64 = 1250
    /// Written into every following record's cumulative drop field.
    public var cumulativeDrops: UInt32 = 0
    /// Frames written so far (the last frame's number).
    public private(set) var frameCount = 0
    /// The btsnoop image so far.
    public private(set) var image: [UInt8]

    /// The ATT MTU per (controller index, connection handle), set by connect and MTU exchange.
    private var mtus: [UInt32: Int] = [:]

    /// - Parameters:
    ///   - format: H4 (1002) or monitor (2001).
    ///   - aclBufferSize: ACL payload bytes per fragment; must be at least 1.
    ///   - start: Time of the first frame.
    ///   - controllerAddress: For monitor captures, announced in a New Index record for index 0.
    public init(
        format: Format = .h4, aclBufferSize: Int = 27,
        start: CaptureTimestamp = CaptureTimestamp(unixMicroseconds: 1_764_000_000_000_000),
        controllerAddress: BluetoothAddress = BluetoothAddress(rawValue: 0x00_1A_7D_DA_71_13)
    ) {
        precondition(aclBufferSize >= 1, "ACL buffer size must be positive")
        self.format = format
        self.aclBufferSize = aclBufferSize
        self.time = start
        let datalink: BTSnoopDatalink = format == .h4 ? .hciUART : .monitor
        self.image = Array("btsnoop".utf8) + [0, 0, 0, 0, 1] + Self.be32(datalink.rawValue)
        if format == .monitor { self.addController(index: 0, address: controllerAddress) }
    }

    // MARK: - Records

    /// Appends a raw record (for corrupt-file tests): the given flags and payload, as-is.
    public mutating func record(flags: UInt32, payload: [UInt8], originalLength: Int? = nil) {
        self.image += Self.be32(UInt32(truncatingIfNeeded: originalLength ?? payload.count))
        self.image += Self.be32(UInt32(truncatingIfNeeded: payload.count))
        self.image += Self.be32(flags)
        self.image += Self.be32(self.cumulativeDrops)
        let time = UInt64(bitPattern: self.time.microsecondsSinceYear0)
        self.image += Self.be32(UInt32(truncatingIfNeeded: time >> 32)) + Self.be32(UInt32(truncatingIfNeeded: time))
        self.image += payload
        self.frameCount += 1
        self.time = CaptureTimestamp(microsecondsSinceYear0: self.time.microsecondsSinceYear0 + self.frameInterval)
    }

    /// Appends raw bytes with no framing (to cut a capture short or corrupt it).
    public mutating func appendRawBytes(_ bytes: [UInt8]) {
        self.image += bytes
    }

    /// Moves the clock forward.
    public mutating func advance(microseconds: Int64) {
        self.time = CaptureTimestamp(microsecondsSinceYear0: self.time.microsecondsSinceYear0 + microseconds)
    }

    /// Announces a controller (monitor: New Index and Open Index records; H4: nothing).
    public mutating func addController(index: UInt16, address: BluetoothAddress) {
        guard self.format == .monitor else { return }
        let name = Array("hci\(index)".utf8.prefix(8)) + [UInt8](repeating: 0, count: max(0, 8 - "hci\(index)".utf8.count))
        self.record(flags: BTSnoopFlags.monitor(index: index, opcode: .newIndex),
                    payload: [0x00, 0x01] + address.littleEndianBytes + name)
        self.record(flags: BTSnoopFlags.monitor(index: index, opcode: .openIndex), payload: [])
    }

    /// Removes a controller (monitor: Delete Index record).
    public mutating func removeController(index: UInt16) {
        guard self.format == .monitor else { return }
        self.record(flags: BTSnoopFlags.monitor(index: index, opcode: .deleteIndex), payload: [])
    }

    /// Appends an HCI command packet (host to controller).
    public mutating func command(opcode: UInt16, parameters: [UInt8]) {
        let packet = Self.le16(opcode) + [UInt8(truncatingIfNeeded: parameters.count)] + parameters
        self.packet(.command, direction: .sent, packet)
    }

    /// Appends an HCI event packet (controller to host).
    public mutating func event(code: UInt8, parameters: [UInt8]) {
        self.packet(.event, direction: .received, [code, UInt8(truncatingIfNeeded: parameters.count)] + parameters)
    }

    /// Appends one ACL packet exactly as given (no fragmentation).
    /// - Parameter boundary: Packet-boundary flag: 0b00/0b10 start, 0b01 continuation.
    public mutating func aclPacket(handle: UInt16, boundary: UInt8, direction: Direction, data: [UInt8]) {
        let header = handle & 0x0FFF | UInt16(boundary & 0x3) << 12
        self.packet(.acl, direction: direction, Self.le16(header) + Self.le16(UInt16(truncatingIfNeeded: data.count)) + data)
    }

    /// Appends an SCO packet (noise for tests).
    public mutating func scoPacket(handle: UInt16, direction: Direction, data: [UInt8]) {
        self.packet(.sco, direction: direction, Self.le16(handle & 0x0FFF) + [UInt8(truncatingIfNeeded: data.count)] + data)
    }

    /// Appends an L2CAP PDU on `cid`, fragmented into ACL packets of at most `aclBufferSize` bytes.
    public mutating func l2cap(handle: UInt16, direction: Direction, cid: UInt16, payload: [UInt8]) {
        let pdu = Self.le16(UInt16(truncatingIfNeeded: payload.count)) + Self.le16(cid) + payload
        var offset = 0
        // Host-to-controller starts are non-flushable (0b00); controllers report flushable starts (0b10).
        var boundary: UInt8 = direction == .sent ? 0b00 : 0b10
        while offset < pdu.count {
            let end = min(pdu.count, offset + self.aclBufferSize)
            self.aclPacket(handle: handle, boundary: boundary, direction: direction, data: Array(pdu[offset..<end]))
            boundary = 0b01
            offset = end
        }
    }

    /// Appends an ATT PDU (CID 0x0004).
    public mutating func att(handle: UInt16, direction: Direction, _ pdu: [UInt8]) {
        self.l2cap(handle: handle, direction: direction, cid: 0x0004, payload: pdu)
    }

    /// Appends an SMP PDU (CID 0x0006).
    public mutating func smp(handle: UInt16, direction: Direction, _ pdu: [UInt8]) {
        self.l2cap(handle: handle, direction: direction, cid: 0x0006, payload: pdu)
    }

    /// Appends one HCI packet as a record of the builder's format (H4 type byte and flags, or monitor opcode).
    private mutating func packet(_ type: H4PacketType, direction: Direction, _ packet: [UInt8]) {
        switch self.format {
        case .h4:
            let commandOrEvent = type == .command || type == .event
            self.record(flags: BTSnoopFlags.hci(direction: direction, commandOrEvent: commandOrEvent),
                        payload: [type.rawValue] + packet)
        case .monitor:
            let opcode: MonitorOpcode =
                switch type {
                case .command: .commandPacket
                case .event: .eventPacket
                case .acl: direction == .sent ? .aclTX : .aclRX
                case .sco: direction == .sent ? .scoTX : .scoRX
                case .iso: direction == .sent ? .isoTX : .isoRX
                }
            self.record(flags: BTSnoopFlags.monitor(index: self.controllerIndex, opcode: opcode), payload: packet)
        }
    }

    // MARK: - Links

    /// LE connection established: HCI LE Connection Complete (or LE Enhanced Connection Complete v1).
    public mutating func leConnect(
        handle: UInt16, peer: BluetoothAddress, addressType: AddressType = .public, role: LinkRole = .central,
        enhanced: Bool = false
    ) {
        var parameters: [UInt8] = [enhanced ? 0x0A : 0x01, 0x00] + Self.le16(handle) + [role.rawValue, addressType.rawValue]
        parameters += peer.littleEndianBytes
        if enhanced { parameters += [UInt8](repeating: 0, count: 12) }  // local and peer RPAs
        parameters += Self.le16(24) + Self.le16(0) + Self.le16(400) + [0x00]
        self.mtus[self.key(handle)] = 23
        self.event(code: 0x3E, parameters: parameters)
    }

    /// Classic (BR/EDR) connection established: HCI Connection Complete.
    public mutating func classicConnect(handle: UInt16, peer: BluetoothAddress) {
        self.event(code: 0x03, parameters: [0x00] + Self.le16(handle) + peer.littleEndianBytes + [0x01, 0x00])
    }

    /// HCI Disconnect command followed by Disconnection Complete.
    public mutating func disconnect(handle: UInt16, reason: UInt8 = 0x13) {
        self.command(opcode: 0x0406, parameters: Self.le16(handle) + [reason])
        self.event(code: 0x0F, parameters: [0x00, 0x01] + Self.le16(0x0406))  // Command Status
        self.event(code: 0x05, parameters: [0x00] + Self.le16(handle) + [reason == 0x13 ? 0x16 : reason])
        self.mtus[self.key(handle)] = nil
    }

    /// HCI Encryption Change (v1).
    public mutating func encryptionChange(handle: UInt16, enabled: Bool, status: UInt8 = 0) {
        self.event(code: 0x08, parameters: [status] + Self.le16(handle) + [enabled ? 1 : 0])
    }

    /// HCI Number Of Completed Packets (flow-control noise).
    public mutating func completedPackets(handle: UInt16, count: UInt16) {
        self.event(code: 0x13, parameters: [0x01] + Self.le16(handle) + Self.le16(count))
    }

    /// A vendor-specific HCI event (0xFF).
    public mutating func vendorEvent(_ parameters: [UInt8]) {
        self.event(code: 0xFF, parameters: parameters)
    }

    // MARK: - ATT procedures (local host = client)

    /// Exchange MTU: request from the client, response from the server; the builder then sizes PDUs to
    /// the smaller value.
    public mutating func exchangeMTU(handle: UInt16, client: UInt16, server: UInt16) {
        self.att(handle: handle, direction: .sent, ATTEncoder.exchangeMTU(request: true, mtu: client))
        self.att(handle: handle, direction: .received, ATTEncoder.exchangeMTU(request: false, mtu: server))
        self.mtus[self.key(handle)] = max(23, Int(min(client, server)))
    }

    /// The ATT MTU the builder uses on `handle`.
    public func mtu(handle: UInt16) -> Int { self.mtus[self.key(handle)] ?? 23 }

    /// Full discovery as BlueZ does it: primary services (Read By Group Type), characteristics per service
    /// (Read By Type 0x2803), descriptors per characteristic (Find Information), each ended by
    /// "Attribute Not Found" where the procedure requires it. Responses are packed to the MTU.
    public mutating func discover(handle: UInt16, layout: GATTLayout, client: Direction = .sent) {
        let mtu = self.mtu(handle: handle)
        var start: UInt16 = 1
        while true {
            self.att(handle: handle, direction: client,
                     ATTEncoder.readByGroupTypeRequest(start: start, end: 0xFFFF, type: .primaryService))
            let remaining = layout.services.filter { $0.startHandle >= start }
            guard let first = remaining.first else {
                self.notFound(handle, .readByGroupTypeRequest, start, client)
                break
            }
            let size = first.uuid.littleEndianBytes.count
            let batch = Array(remaining.prefix { $0.uuid.littleEndianBytes.count == size }.prefix((mtu - 2) / (4 + size)))
            self.att(handle: handle, direction: client.reversed,
                     ATTEncoder.readByGroupTypeResponse(batch.map { ($0.startHandle, $0.endHandle, $0.uuid) }))
            guard let last = batch.last, last.endHandle < 0xFFFF else { break }
            start = last.endHandle + 1
        }
        for service in layout.services {
            var from = service.startHandle
            while from <= service.endHandle {
                self.att(handle: handle, direction: client,
                         ATTEncoder.readByTypeRequest(start: from, end: service.endHandle, type: .characteristic))
                let remaining = layout.characteristics.filter {
                    $0.declarationHandle >= from && $0.declarationHandle <= service.endHandle
                }
                guard let first = remaining.first else {
                    self.notFound(handle, .readByTypeRequest, from, client)
                    break
                }
                let size = first.uuid.littleEndianBytes.count
                let batch = Array(remaining.prefix { $0.uuid.littleEndianBytes.count == size }.prefix((mtu - 2) / (5 + size)))
                self.att(handle: handle, direction: client.reversed, ATTEncoder.readByTypeResponse(batch.map {
                    ($0.declarationHandle, [$0.properties?.rawValue ?? 0] + Self.le16($0.valueHandle) + $0.uuid.littleEndianBytes)
                }))
                from = batch.last!.declarationHandle + 1
            }
        }
        for (index, characteristic) in layout.characteristics.enumerated() {
            let end = layout.characteristicEnd(index)
            var from = characteristic.valueHandle + 1
            while from <= end {
                self.att(handle: handle, direction: client, ATTEncoder.findInformationRequest(start: from, end: end))
                let remaining = characteristic.descriptors.filter { $0.handle >= from }
                guard let first = remaining.first else {
                    self.notFound(handle, .findInformationRequest, from, client)
                    break
                }
                let size = first.uuid.littleEndianBytes.count
                let batch = Array(remaining.prefix { $0.uuid.littleEndianBytes.count == size }.prefix((mtu - 2) / (2 + size)))
                self.att(handle: handle, direction: client.reversed,
                         ATTEncoder.findInformationResponse(batch.map { ($0.handle, $0.uuid) }))
                from = batch.last!.handle + 1
            }
        }
    }

    /// The "Attribute Not Found" Error Response that ends a discovery procedure at `attribute`.
    private mutating func notFound(_ handle: UInt16, _ request: ATTOpcode, _ attribute: UInt16, _ client: Direction) {
        self.att(handle: handle, direction: client.reversed,
                 ATTEncoder.errorResponse(request: request, handle: attribute, code: .attributeNotFound))
    }

    /// Read Request and Response; values longer than MTU − 1 continue with Read Blob requests.
    /// `client` is the direction of the requests (`.received`: the peer reads the local host's server).
    public mutating func read(handle: UInt16, attribute: UInt16, value: [UInt8], client: Direction = .sent) {
        let chunk = self.mtu(handle: handle) - 1
        self.att(handle: handle, direction: client, ATTEncoder.readRequest(handle: attribute))
        self.att(handle: handle, direction: client.reversed, ATTEncoder.readResponse(Array(value.prefix(chunk))))
        guard value.count >= chunk else { return }
        var offset = chunk
        while true {
            self.att(handle: handle, direction: client,
                     ATTEncoder.readBlobRequest(handle: attribute, offset: UInt16(truncatingIfNeeded: offset)))
            let part = Array(value[min(offset, value.count)..<min(value.count, offset + chunk)])
            self.att(handle: handle, direction: client.reversed, ATTEncoder.readBlobResponse(part))
            offset += chunk
            if part.count < chunk { break }
        }
    }

    /// A read answered with an ATT error.
    public mutating func readError(handle: UInt16, attribute: UInt16, error: ATTErrorCode) {
        self.att(handle: handle, direction: .sent, ATTEncoder.readRequest(handle: attribute))
        self.att(handle: handle, direction: .received,
                 ATTEncoder.errorResponse(request: .readRequest, handle: attribute, code: error))
    }

    /// Write Request + Write Response (or an Error Response when `error` is given), or a Write Command.
    public mutating func write(
        handle: UInt16, attribute: UInt16, value: [UInt8], withResponse: Bool = true, error: ATTErrorCode? = nil
    ) {
        guard withResponse else {
            self.att(handle: handle, direction: .sent, ATTEncoder.writeCommand(handle: attribute, value: value))
            return
        }
        self.att(handle: handle, direction: .sent, ATTEncoder.writeRequest(handle: attribute, value: value))
        if let error {
            self.att(handle: handle, direction: .received,
                     ATTEncoder.errorResponse(request: .writeRequest, handle: attribute, code: error))
        } else {
            self.att(handle: handle, direction: .received, ATTEncoder.writeResponse())
        }
    }

    /// Handle Value Notification from the server.
    public mutating func notify(handle: UInt16, attribute: UInt16, value: [UInt8]) {
        self.att(handle: handle, direction: .received, ATTEncoder.notification(handle: attribute, value: value))
    }

    /// Handle Value Indication from the server, and the client's confirmation.
    public mutating func indicate(handle: UInt16, attribute: UInt16, value: [UInt8], confirm: Bool = true) {
        self.att(handle: handle, direction: .received, ATTEncoder.indication(handle: attribute, value: value))
        if confirm { self.att(handle: handle, direction: .sent, ATTEncoder.confirmation()) }
    }

    // MARK: - Advertising, pairing and keys

    /// LE Advertising Report (one report): `data` is the advertising data (see `advertisingData`).
    public mutating func advertise(
        peer: BluetoothAddress, addressType: AddressType = .public, data: [UInt8], rssi: Int8 = -60
    ) {
        self.event(code: 0x3E, parameters: [0x02, 0x01, 0x00, addressType.rawValue] + peer.littleEndianBytes
            + [UInt8(truncatingIfNeeded: data.count)] + data + [UInt8(bitPattern: rssi)])
    }

    /// Advertising data: flags, the complete list of 16-bit service UUIDs (when given) and the complete name.
    public static func advertisingData(name: String, services: [UInt16] = []) -> [UInt8] {
        var data: [UInt8] = [0x02, 0x01, 0x06]
        if !services.isEmpty {
            data += [UInt8(1 + 2 * services.count), 0x03] + services.flatMap(Self.le16)
        }
        let text = Array(name.utf8)
        return data + [UInt8(1 + text.count), 0x09] + text
    }

    /// The keys one side distributes at the end of pairing.
    public struct DistributedKeys: Sendable, Hashable {
        /// Long Term Key (16 bytes), sent in Encryption Information.
        public var ltk: [UInt8]
        /// Encrypted Diversifier, sent in Central Identification.
        public var ediv: UInt16
        /// Random number (8 bytes), sent in Central Identification.
        public var rand: [UInt8]
        /// Identity Resolving Key (16 bytes), sent in Identity Information.
        public var irk: [UInt8]
        /// Identity address (public), sent in Identity Address Information.
        public var identity: BluetoothAddress
        /// Connection Signature Resolving Key (16 bytes), sent in Signing Information.
        public var csrk: [UInt8]

        /// Keys with every field given (lengths are not checked).
        public init(ltk: [UInt8], ediv: UInt16, rand: [UInt8], irk: [UInt8], identity: BluetoothAddress, csrk: [UInt8]) {
            self.ltk = ltk
            self.ediv = ediv
            self.rand = rand
            self.irk = irk
            self.identity = identity
            self.csrk = csrk
        }
    }

    /// LE legacy pairing as a central sees it: Pairing Request/Response, Confirm and Random both ways,
    /// HCI LE Enable Encryption with `stk` (and its Command Status), Encryption Change, then the key
    /// distribution of the peer (`peerKeys`) and of the local host (`localKeys`).
    public mutating func pair(
        handle: UInt16, confirm: [UInt8], random: [UInt8], stk: [UInt8], peerKeys: DistributedKeys,
        localKeys: DistributedKeys
    ) {
        self.smp(handle: handle, direction: .sent, [0x01, 0x04, 0x00, 0x0D, 0x10, 0x07, 0x07])
        self.smp(handle: handle, direction: .received, [0x02, 0x00, 0x00, 0x0D, 0x10, 0x07, 0x07])
        self.smp(handle: handle, direction: .sent, [0x03] + confirm)
        self.smp(handle: handle, direction: .received, [0x03] + confirm.reversed())
        self.smp(handle: handle, direction: .sent, [0x04] + random)
        self.smp(handle: handle, direction: .received, [0x04] + random.reversed())
        self.enableEncryption(handle: handle, rand: [UInt8](repeating: 0, count: 8), ediv: 0, ltk: stk)
        self.encryptionChange(handle: handle, enabled: true)
        self.distributeKeys(handle: handle, direction: .received, peerKeys)
        self.distributeKeys(handle: handle, direction: .sent, localKeys)
    }

    /// SMP key distribution: Encryption Information, Central Identification, Identity Information,
    /// Identity Address Information, Signing Information.
    public mutating func distributeKeys(handle: UInt16, direction: Direction, _ keys: DistributedKeys) {
        self.smp(handle: handle, direction: direction, [0x06] + keys.ltk)
        self.smp(handle: handle, direction: direction, [0x07] + Self.le16(keys.ediv) + keys.rand)
        self.smp(handle: handle, direction: direction, [0x08] + keys.irk)
        self.smp(handle: handle, direction: direction, [0x09, 0x00] + keys.identity.littleEndianBytes)
        self.smp(handle: handle, direction: direction, [0x0A] + keys.csrk)
    }

    /// HCI LE Enable Encryption (central) and its Command Status.
    public mutating func enableEncryption(handle: UInt16, rand: [UInt8], ediv: UInt16, ltk: [UInt8]) {
        self.command(opcode: 0x2019, parameters: Self.le16(handle) + rand + Self.le16(ediv) + ltk)
        self.event(code: 0x0F, parameters: [0x00, 0x01] + Self.le16(0x2019))
    }

    /// LE Long Term Key Request event (peripheral) and the host's LE Long Term Key Request Reply with its
    /// Command Complete.
    public mutating func longTermKeyRequest(handle: UInt16, rand: [UInt8], ediv: UInt16, ltk: [UInt8]) {
        self.event(code: 0x3E, parameters: [0x05] + Self.le16(handle) + rand + Self.le16(ediv))
        self.command(opcode: 0x201A, parameters: Self.le16(handle) + ltk)
        self.event(code: 0x0E, parameters: [0x01] + Self.le16(0x201A) + [0x00] + Self.le16(handle))
    }

    /// HCI LE Add Device To Resolving List and its Command Complete.
    public mutating func addToResolvingList(
        peer: BluetoothAddress, addressType: AddressType = .public, peerIRK: [UInt8], localIRK: [UInt8]
    ) {
        self.command(opcode: 0x2027, parameters: [addressType.rawValue] + peer.littleEndianBytes + peerIRK + localIRK)
        self.event(code: 0x0E, parameters: [0x01] + Self.le16(0x2027) + [0x00])
    }

    /// HCI Read BD_ADDR and its Command Complete carrying the local address.
    public mutating func readLocalAddress(_ address: BluetoothAddress) {
        self.command(opcode: 0x1009, parameters: [])
        self.event(code: 0x0E, parameters: [0x01] + Self.le16(0x1009) + [0x00] + address.littleEndianBytes)
    }

    // MARK: - Output

    /// Writes the image to a file.
    /// - Throws: `CaptureError` `.io`.
    public func write(to path: String) throws(CaptureError) {
        let writer = try BTSnoopWriter(path: path, datalink: self.format == .h4 ? .hciUART : .monitor)
        // The writer already wrote a header; append everything after ours.
        try writer.appendRaw(self.image[16...])
        try writer.close()
    }

    /// The MTU table key of `handle` on the current controller.
    private func key(_ handle: UInt16) -> UInt32 { UInt32(self.controllerIndex) << 16 | UInt32(handle) }

    /// Little-endian 16-bit field.
    static func le16(_ value: UInt16) -> [UInt8] { ATTEncoder.le16(value) }

    /// Big-endian 32-bit field (btsnoop headers).
    static func be32(_ value: UInt32) -> [UInt8] {
        [UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16),
         UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
    }
}
