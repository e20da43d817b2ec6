import GlucoseProfile

/// Makes a btsnoop capture safe to share: keeps only the glucose meter's traffic, removes every key and
/// replaces Bluetooth addresses with stable fake ones.
///
/// What is kept, per frame (a whitelist: anything not listed is removed):
/// - LE connections to the chosen meter (`RedactionOptions.meter`), or, without one, to every peer
///   that is a glucose meter (Glucose service 0x1808 discovered or used, or advertised): their
///   connection and disconnection events, encryption events, the HCI commands about them (connect,
///   disconnect, encryption, connection parameters) with their Command Status/Complete, and their ACL
///   data. Advertising reports only from those peers. Controller announcements (monitor New/Open/Close/
///   Delete Index, Index Info), Number Of Completed Packets, scan settings and Reset.
/// - Removed: other devices' connections, advertising and commands, classic (BR/EDR) traffic, SCO/ISO,
///   every Command Complete not on the list (Read BD_ADDR, Read Local Name, LE Rand, LE Encrypt…),
///   monitor system notes, user logs, vendor diagnostics and management-socket frames (they carry the
///   keys bluetoothd loads).
///
/// Keys (the choice made here): SMP key distribution PDUs (Encryption Information/LTK, Central
/// Identification/EDIV+Rand, Identity Information/IRK, Identity Address Information, Signing
/// Information/CSRK) are removed; pairing values that a reader of the capture may want to see happen
/// (Pairing Confirm, Pairing Random, Pairing Public Key, DHKey Check) and the keys HCI commands carry
/// (LTK and EDIV/Rand in LE Enable Encryption, LTK in LE Long Term Key Request Reply, EDIV/Rand in the
/// LE Long Term Key Request event, both IRKs in LE Add Device To Resolving List) are replaced by
/// same-length zeros. A key distribution PDU split over several ACL packets is zero-filled instead.
///
/// A removed frame is replaced by a 2-byte placeholder record with the same timestamp (H4/1001: an
/// empty vendor event 0xFF; monitor: a system note "redacted"), so frame numbers, and with them every
/// frame reference `capture inspect` prints, stay those of the original capture.
///
/// Addresses: each distinct address becomes `00:00:00:00:00:01`, `…:02`, … in order of first
/// appearance, keeping its two top bits (so a static random address stays static random). The same
/// address always gets the same fake within one capture. 00:00:00:00:00:00 and FF:FF:FF:FF:FF:FF
/// stay as they are.
public struct RedactionOptions: Sendable, Hashable {
    /// Keep only this peer's traffic; nil keeps every glucose meter.
    public var meter: BluetoothAddress?
    /// Leave addresses as they are (keys are removed regardless).
    public var keepAddresses: Bool

    /// Options keeping every glucose meter (or only `meter`) with fake addresses unless `keepAddresses`.
    public init(meter: BluetoothAddress? = nil, keepAddresses: Bool = false) {
        self.meter = meter
        self.keepAddresses = keepAddresses
    }
}

/// What a redaction did.
public struct RedactionSummary: Sendable, Hashable {
    /// Frames read (and written: removed frames leave a placeholder).
    public var frames = 0
    /// Frames replaced by a placeholder.
    public var framesRemoved = 0
    /// SMP key distribution PDUs removed.
    public var keyPDUsRemoved = 0
    /// Key or pairing fields zero-filled.
    public var keysZeroed = 0
    /// LE connections kept and removed.
    public var connectionsKept = 0
    /// LE connections to other peers, removed.
    public var connectionsRemoved = 0
    /// Distinct addresses replaced.
    public var addressesReplaced = 0

    /// All counts zero.
    public init() {}
}

/// The streaming redactor: one record in, one record out (see ``RedactionOptions`` for the rules).
/// Used by `CaptureRedaction` for files and by the live recorder frame by frame.
///
/// Not thread-safe: one owner.
public struct CaptureRedactor: Sendable {
    /// The datalink of the records redacted (and written).
    public let datalink: BTSnoopDatalink
    /// Which peers are kept and whether addresses are replaced.
    public let options: RedactionOptions
    /// What was removed and replaced so far.
    public private(set) var summary = RedactionSummary()
    /// Original → fake address, for every address replaced so far.
    public private(set) var addressMap: [BluetoothAddress: BluetoothAddress] = [:]

    /// Peers whose connections are kept (known in advance: the file pre-pass).
    private var meters: Set<BluetoothAddress>
    /// (index << 16 | handle) of connections without a captured connection event that are kept.
    private let orphanHandles: Set<UInt32>
    /// (index << 16 | handle) → kept?
    private var handles: [UInt32: Bool] = [:]
    /// L2CAP position per (index << 16 | handle) and direction (bit 31 set for controller → host).
    private var l2cap: [UInt32: L2CAPPosition] = [:]

    /// - Parameters:
    ///   - datalink: The capture's datalink (the output keeps it).
    ///   - options: Which meter, and whether addresses stay.
    ///   - glucosePeers: Peers known to be glucose meters (ignored when `options.meter` is set). Peers
    ///     advertising the Glucose service are added as their advertising reports pass.
    ///   - orphanHandles: `index << 16 | handle` of kept connections whose connection event is missing.
    public init(
        datalink: BTSnoopDatalink, options: RedactionOptions, glucosePeers: Set<BluetoothAddress> = [],
        orphanHandles: Set<UInt32> = []
    ) {
        self.datalink = datalink
        self.options = options
        self.meters = options.meter.map { [$0] } ?? glucosePeers
        self.orphanHandles = orphanHandles
    }

    /// Redacts one record; returns the flags and bytes to write in its place.
    public mutating func redact(flags: UInt32, payload: UnsafeRawBufferPointer) -> (flags: UInt32, payload: [UInt8]) {
        self.summary.frames += 1
        var bytes = Array(payload)
        let kept: Bool
        switch self.datalink {
        case .hciUART:
            guard let type = bytes.first else { return self.placeholder(flags) }
            var body = Array(bytes.dropFirst())
            let direction: Direction = flags & 1 == 0 ? .sent : .received
            switch type {
            case H4PacketType.command.rawValue: kept = self.command(&body)
            case H4PacketType.event.rawValue: kept = self.event(&body, index: 0)
            case H4PacketType.acl.rawValue: kept = self.acl(&body, index: 0, direction: direction)
            default: kept = false
            }
            bytes = [type] + body
        case .hciUnencapsulated:
            let direction: Direction = flags & 1 == 0 ? .sent : .received
            if flags & 2 == 0 {
                kept = self.acl(&bytes, index: 0, direction: direction)
            } else if direction == .received {
                kept = self.event(&bytes, index: 0)
            } else {
                kept = self.command(&bytes)
            }
        case .monitor:
            let index = UInt16(truncatingIfNeeded: flags >> 16)
            switch MonitorOpcode(rawValue: UInt16(truncatingIfNeeded: flags)) {
            case .newIndex:
                if bytes.count >= 8 { self.replaceAddress(&bytes, at: 2) }
                kept = true
            case .indexInfo:
                if bytes.count >= 6 { self.replaceAddress(&bytes, at: 0) }
                kept = true
            case .deleteIndex, .openIndex, .closeIndex:
                kept = true
            case .commandPacket: kept = self.command(&bytes)
            case .eventPacket: kept = self.event(&bytes, index: index)
            case .aclTX: kept = self.acl(&bytes, index: index, direction: .sent)
            case .aclRX: kept = self.acl(&bytes, index: index, direction: .received)
            default: kept = false
            }
        }
        return kept ? (flags, bytes) : self.placeholder(flags)
    }

    /// The record that stands in for a removed one: an empty vendor event, or a monitor system note
    /// "redacted" on index 0xFFFF.
    private mutating func placeholder(_ flags: UInt32) -> (flags: UInt32, payload: [UInt8]) {
        self.summary.framesRemoved += 1
        switch self.datalink {
        case .hciUART: return (BTSnoopFlags.hci(direction: .received, commandOrEvent: true), [0x04, 0xFF, 0x00])
        case .hciUnencapsulated: return (BTSnoopFlags.hci(direction: .received, commandOrEvent: true), [0xFF, 0x00])
        case .monitor: return (BTSnoopFlags.monitor(index: 0xFFFF, opcode: .systemNote), Array("redacted".utf8) + [0])
        }
    }

    // MARK: - Addresses

    /// True for a peer whose traffic is kept.
    private func isMeter(_ address: BluetoothAddress) -> Bool { self.meters.contains(address) }

    /// Replaces the 6-byte address at `offset` by its fake (made on first sight), unless addresses are
    /// kept or it is all zeros or all ones.
    private mutating func replaceAddress(_ bytes: inout [UInt8], at offset: Int) {
        guard !self.options.keepAddresses, offset + 6 <= bytes.count else { return }
        let original = BluetoothAddress(littleEndianBytes: Array(bytes[offset..<(offset + 6)]))
        guard original.rawValue != 0, original.rawValue != 0xFFFF_FFFF_FFFF else { return }
        let fake: BluetoothAddress
        if let known = self.addressMap[original] {
            fake = known
        } else {
            fake = BluetoothAddress(rawValue: original.rawValue & 0xC000_0000_0000 | UInt64(self.addressMap.count + 1))
            self.addressMap[original] = fake
            self.summary.addressesReplaced += 1
        }
        bytes.replaceSubrange(offset..<(offset + 6), with: fake.littleEndianBytes)
    }

    /// Zero-fills the part of `range` the packet has, and counts it as one key zeroed.
    private mutating func zero(_ bytes: inout [UInt8], _ range: Range<Int>) {
        let range = range.clamped(to: 0..<bytes.count)
        guard !range.isEmpty else { return }
        for position in range { bytes[position] = 0 }
        self.summary.keysZeroed += 1
    }

    /// True for a kept connection, or a kept orphan handle not seen connecting.
    private func handleKept(_ index: UInt16, _ handle: UInt16) -> Bool {
        let key = UInt32(index) << 16 | UInt32(handle & 0x0FFF)
        return self.handles[key] ?? self.orphanHandles.contains(key)
    }

    // MARK: - HCI commands (host → controller)

    /// Commands about a connection (handle at parameter offset 0) that are kept for kept connections.
    static let connectionCommands: Set<UInt16> = [
        0x0406, 0x041D, 0x2013, 0x2016, 0x2019, 0x201A, 0x201B, 0x2020, 0x2021, 0x2022, 0x2032,
    ]
    /// Commands about a peer address (address type, address) kept for kept peers: offset of the address.
    static let addressCommands: [UInt16: Int] = [0x200D: 6, 0x2043: 3, 0x2011: 1, 0x2012: 1, 0x2027: 1, 0x2028: 1]
    /// Commands with nothing identifying in them or in their completion.
    static let harmlessCommands: Set<UInt16> = [0x0C03, 0x200B, 0x200C, 0x200E, 0x2041, 0x2042]

    /// Whether a Command Complete or Command Status for `opcode` may stay.
    static func isKeptCommand(_ opcode: UInt16) -> Bool {
        Self.connectionCommands.contains(opcode) || Self.addressCommands[opcode] != nil
            || Self.harmlessCommands.contains(opcode)
    }

    /// Decides on an HCI command (zeroing the keys of kept encryption and resolving-list commands and
    /// replacing kept peers' addresses); true when it stays.
    private mutating func command(_ packet: inout [UInt8]) -> Bool {
        guard packet.count >= 3 else { return false }
        let opcode = UInt16(packet[0]) | UInt16(packet[1]) << 8
        let p = 3  // parameters start
        if Self.connectionCommands.contains(opcode) {
            guard packet.count >= p + 2 else { return false }
            let handle = UInt16(packet[p]) | UInt16(packet[p + 1]) << 8
            guard self.handleKeptOnAnyIndex(handle) else { return false }
            switch opcode {
            case 0x2019: self.zero(&packet, (p + 2)..<(p + 28))  // Rand, EDIV, LTK
            case 0x201A: self.zero(&packet, (p + 2)..<(p + 18))  // LTK
            default: break
            }
            return true
        }
        if let offset = Self.addressCommands[opcode] {
            guard packet.count >= p + offset + 6 else { return false }
            let peer = BluetoothAddress(littleEndianBytes: Array(packet[(p + offset)..<(p + offset + 6)]))
            guard self.isMeter(peer) else { return false }
            if opcode == 0x2027 { self.zero(&packet, (p + 7)..<(p + 39)) }  // peer IRK, local IRK
            self.replaceAddress(&packet, at: p + offset)
            return true
        }
        return Self.harmlessCommands.contains(opcode)
    }

    /// Monitor captures carry the controller index in the flags, but commands are matched by handle
    /// alone (handles are rarely reused across controllers in one capture).
    private func handleKeptOnAnyIndex(_ handle: UInt16) -> Bool {
        self.handles.contains { $0.key & 0x0FFF == UInt32(handle & 0x0FFF) && $0.value }
            || self.orphanHandles.contains { $0 & 0x0FFF == UInt32(handle & 0x0FFF) }
    }

    // MARK: - HCI events (controller → host)

    /// The connection handle at `offset` into an event's parameters, when the parameters reach that far.
    static func handle(_ packet: [UInt8], at offset: Int) -> UInt16? {
        guard packet.count >= 2, Int(packet[1]) >= offset + 2, packet.count >= 4 + offset else { return nil }
        return (UInt16(packet[2 + offset]) | UInt16(packet[3 + offset]) << 8) & 0x0FFF
    }

    /// Decides on an HCI event of controller `index`: kept connections' disconnection, encryption and
    /// remote-version events, flow control, completions of kept commands and LE meta events; true when it stays.
    private mutating func event(_ packet: inout [UInt8], index: UInt16) -> Bool {
        guard packet.count >= 2, packet.count >= 2 + Int(packet[1]) else { return false }
        let code = packet[0]
        let p = 2
        let length = Int(packet[1])
        func handle(at offset: Int) -> UInt16? { Self.handle(packet, at: offset) }
        switch code {
        case 0x05:  // Disconnection Complete
            guard let h = handle(at: 1) else { return false }
            let kept = self.handleKept(index, h)
            if packet[p] == 0 {
                let key = UInt32(index) << 16 | UInt32(h)
                self.handles[key] = nil
                self.l2cap[key] = nil
                self.l2cap[key | 1 << 31] = nil
            }
            return kept
        case 0x08, 0x59, 0x30, 0x0C:  // Encryption Change v1/v2, Key Refresh, Remote Version
            guard let h = handle(at: 1) else { return false }
            return self.handleKept(index, h)
        case 0x13, 0x10, 0x1A:  // Number Of Completed Packets, Hardware Error, Data Buffer Overflow
            return true
        case 0x0E:  // Command Complete
            guard length >= 3 else { return false }
            return Self.isKeptCommand(UInt16(packet[p + 1]) | UInt16(packet[p + 2]) << 8)
        case 0x0F:  // Command Status
            guard length >= 4 else { return false }
            return Self.isKeptCommand(UInt16(packet[p + 2]) | UInt16(packet[p + 3]) << 8)
        case 0x3E where length >= 1:
            return self.leEvent(&packet, index: index)
        default:
            return false
        }
    }

    /// Decides on an LE meta event: a connection event records whether its connection is kept (and
    /// replaces its addresses), advertising reports are filtered, kept connections' other events stay
    /// (the LTK request's Rand and EDIV zeroed).
    private mutating func leEvent(_ packet: inout [UInt8], index: UInt16) -> Bool {
        let p = 2
        func handle(at offset: Int) -> UInt16? { Self.handle(packet, at: offset) }
        switch packet[p] {
        case 0x01, 0x0A, 0x29:  // LE (Enhanced) Connection Complete
            guard let connection = HCIEventFields.leConnection(packet) else { return false }
            let kept = self.isMeter(connection.peer)
            if connection.status == 0 {
                let key = UInt32(index) << 16 | UInt32(connection.handle)
                self.handles[key] = kept
                self.l2cap[key] = nil
                self.l2cap[key | 1 << 31] = nil
                if kept { self.summary.connectionsKept += 1 } else { self.summary.connectionsRemoved += 1 }
            }
            guard kept else { return false }
            self.replaceAddress(&packet, at: p + 6)
            if packet[p] != 0x01 {  // local and peer resolvable private addresses
                self.replaceAddress(&packet, at: p + 12)
                self.replaceAddress(&packet, at: p + 18)
            }
            return true
        case 0x02:  // LE Advertising Report: per report type, address type, address, length, data, RSSI
            return self.advertisingReports(&packet, fixed: 9, addressAt: 2, lengthAt: 8, trailer: 1)
        case 0x0D:  // LE Extended Advertising Report
            return self.advertisingReports(&packet, fixed: 24, addressAt: 3, lengthAt: 23, trailer: 0, directAt: 17)
        case 0x0B:  // LE Directed Advertising Report
            return self.advertisingReports(&packet, fixed: 16, addressAt: 2, lengthAt: nil, trailer: 0, directAt: 9)
        case 0x05:  // LE Long Term Key Request: handle, Rand, EDIV
            guard let h = handle(at: 1), self.handleKept(index, h) else { return false }
            self.zero(&packet, (p + 3)..<(p + 13))
            return true
        case 0x06, 0x07, 0x14:  // Remote Connection Parameter Request, Data Length Change, Channel Selection
            guard let h = handle(at: 1) else { return false }
            return self.handleKept(index, h)
        case 0x03, 0x04, 0x0C:  // Connection Update Complete, Read Remote Features Complete, PHY Update
            guard let h = handle(at: 2) else { return false }
            return self.handleKept(index, h)
        default:
            return false
        }
    }

    /// Keeps the reports of kept peers (and of peers advertising the Glucose service when no meter was
    /// chosen); rewrites the event with only those. Returns false when none is left.
    private mutating func advertisingReports(
        _ packet: inout [UInt8], fixed: Int, addressAt: Int, lengthAt: Int?, trailer: Int, directAt: Int? = nil
    ) -> Bool {
        let p = 2
        guard packet.count >= p + 2 else { return false }
        let count = Int(packet[p + 1])
        var offset = p + 2
        var reports: [[UInt8]] = []
        for _ in 0..<count {
            guard offset + fixed <= packet.count else { return false }
            let dataLength = lengthAt.map { Int(packet[offset + $0]) } ?? 0
            let size = fixed + dataLength + trailer
            guard offset + size <= packet.count else { return false }
            var report = Array(packet[offset..<(offset + size)])
            offset += size
            let peer = BluetoothAddress(littleEndianBytes: Array(report[addressAt..<(addressAt + 6)]))
            if self.options.meter == nil, let lengthAt,
                Self.advertisesGlucose(report[(lengthAt + 1)..<(lengthAt + 1 + dataLength)])
            {
                self.meters.insert(peer)
            }
            guard self.isMeter(peer) else { continue }
            self.replaceAddress(&report, at: addressAt)
            if let directAt { self.replaceAddress(&report, at: directAt) }
            reports.append(report)
        }
        guard !reports.isEmpty else { return false }
        let body = [packet[p], UInt8(reports.count)] + reports.joined()
        guard body.count <= 255 else { return false }
        packet = [packet[0], UInt8(body.count)] + body
        return true
    }

    /// True when advertising data lists the Glucose service (0x1808) among its 16-bit service UUIDs.
    static func advertisesGlucose(_ data: ArraySlice<UInt8>) -> Bool {
        var position = data.startIndex
        while position < data.endIndex {
            let length = Int(data[position])
            guard length > 0, position + 1 + length <= data.endIndex else { break }
            let type = data[position + 1]
            if type == 0x02 || type == 0x03 {
                var uuid = position + 2
                while uuid + 1 < position + 1 + length {
                    if data[uuid] == 0x08 && data[uuid + 1] == 0x18 { return true }
                    uuid += 2
                }
            }
            position += 1 + length
        }
        return false
    }

    // MARK: - ACL and SMP

    /// SMP opcodes whose parameters are zero-filled: Pairing Confirm, Pairing Random, Public Key, DHKey Check,
    /// and (when split over fragments) the key distribution PDUs.
    static let zeroedSMP: Set<UInt8> = [0x03, 0x04, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0C, 0x0D]
    /// SMP key distribution opcodes: the PDU is removed.
    static let keyDistributionSMP: ClosedRange<UInt8> = 0x06...0x0A

    /// Decides on an ACL packet: kept connections only. A whole SMP key distribution PDU is removed;
    /// pairing values and fragmented key PDUs are zeroed byte by byte, following each PDU across
    /// fragments (a continuation whose start was not seen is zeroed entirely).
    private mutating func acl(_ packet: inout [UInt8], index: UInt16, direction: Direction) -> Bool {
        guard packet.count >= 4 else { return false }
        let header = UInt16(packet[0]) | UInt16(packet[1]) << 8
        let handle = header & 0x0FFF
        guard self.handleKept(index, handle) else { return false }
        let key = UInt32(index) << 16 | UInt32(handle) | (direction == .received ? 1 << 31 : 0)
        let start = (header >> 12) & 0x3 != 0b01
        var position = start ? L2CAPPosition() : (self.l2cap[key] ?? L2CAPPosition(lost: true))
        let data = 4..<packet.count
        if start, packet.count >= 9 {
            let length = Int(packet[4]) | Int(packet[5]) << 8
            let cid = UInt16(packet[6]) | UInt16(packet[7]) << 8
            if cid == 0x0006, length + 4 == packet.count - 4, Self.keyDistributionSMP.contains(packet[8]) {
                self.summary.keyPDUsRemoved += 1
                self.l2cap[key] = nil
                return false
            }
        }
        var zeroed = false
        for offset in data {
            if position.lost {
                packet[offset] = 0
                zeroed = true
                continue
            }
            let byte = packet[offset]
            switch position.seen {
            case 0: position.length = Int(byte)
            case 1: position.length |= Int(byte) << 8
            case 2: position.cid = UInt16(byte)
            case 3: position.cid |= UInt16(byte) << 8
            case 4: position.opcode = byte
            default:
                if position.cid == 0x0006 && Self.zeroedSMP.contains(position.opcode) {
                    packet[offset] = 0
                    zeroed = true
                }
            }
            position.seen += 1
        }
        if zeroed { self.summary.keysZeroed += 1 }
        if position.lost || (position.seen >= 4 && position.seen >= position.length + 4) {
            self.l2cap[key] = nil
        } else {
            self.l2cap[key] = position
        }
        return true
    }
}

/// Where a reassembly stands in an L2CAP PDU (for zero-filling across fragments).
struct L2CAPPosition: Sendable {
    /// Bytes of the PDU seen so far, header included.
    var seen = 0
    /// The PDU's payload length, from its header.
    var length = 0
    /// The PDU's channel.
    var cid: UInt16 = 0
    /// The first payload byte (the SMP opcode on channel 6).
    var opcode: UInt8 = 0
    /// A continuation without its start: what it carries is unknown, so its bytes are zeroed.
    var lost = false
}

/// Fields of HCI events other parts need (the recorder's stop condition, the redactor).
public enum HCIEventFields {
    /// An LE (Enhanced) Connection Complete event: status, handle, peer.
    /// - Parameter packet: An HCI event packet (code, length, parameters).
    public static func leConnection(_ packet: [UInt8]) -> (status: UInt8, handle: UInt16, peer: BluetoothAddress)? {
        guard packet.count >= 3, packet[0] == 0x3E, packet.count >= 2 + Int(packet[1]) else { return nil }
        let p = 2
        let needed: Int
        switch packet[p] {
        case 0x01: needed = 19
        case 0x0A: needed = 31
        case 0x29: needed = 34
        default: return nil
        }
        guard Int(packet[1]) >= needed else { return nil }
        let handle = (UInt16(packet[p + 2]) | UInt16(packet[p + 3]) << 8) & 0x0FFF
        let peer = BluetoothAddress(littleEndianBytes: Array(packet[(p + 6)..<(p + 12)]))
        return (packet[p + 1], handle, peer)
    }

    /// A successful Disconnection Complete event's handle.
    public static func disconnectedHandle(_ packet: [UInt8]) -> UInt16? {
        guard packet.count >= 6, packet[0] == 0x05, packet[1] >= 4, packet[2] == 0 else { return nil }
        return (UInt16(packet[3]) | UInt16(packet[4]) << 8) & 0x0FFF
    }
}

/// Redacting whole captures (two passes: find the glucose meters, then rewrite).
public enum CaptureRedaction {
    /// Redacts the capture at `input` into a new btsnoop file at `output` (same datalink).
    /// - Throws: `CaptureError` when the input cannot be read or the output written; `.invalidArgument`
    ///   when no connection is left to keep (no glucose meter, or `options.meter` never connected).
    public static func redact(input: String, output: String, options: RedactionOptions) throws(CaptureError)
        -> RedactionSummary
    {
        let (peers, orphans) = try self.glucoseConnections(GATTEventReader(path: input), options: options)
        let reader = try BTSnoopReader(path: input)
        let writer = try BTSnoopWriter(path: output, datalink: reader.datalink)
        var redactor = CaptureRedactor(datalink: reader.datalink, options: options, glucosePeers: peers, orphanHandles: orphans)
        try self.copy(reader, writer, &redactor)
        try writer.close()
        return redactor.summary
    }

    /// Redacts a capture image in memory; returns the redacted image, the summary and the address map.
    /// - Throws: `CaptureError` as ``redact(input:output:options:)``.
    public static func redact(bytes: [UInt8], options: RedactionOptions) throws(CaptureError)
        -> (image: [UInt8], summary: RedactionSummary, addresses: [BluetoothAddress: BluetoothAddress])
    {
        let (peers, orphans) = try self.glucoseConnections(GATTEventReader(bytes: bytes), options: options)
        let reader = try BTSnoopReader(bytes: bytes)
        let writer = BTSnoopWriter(datalink: reader.datalink)
        var redactor = CaptureRedactor(datalink: reader.datalink, options: options, glucosePeers: peers, orphanHandles: orphans)
        try self.copy(reader, writer, &redactor)
        try writer.flush()
        return (writer.bytes, redactor.summary, redactor.addressMap)
    }

    /// Second pass: every record through the redactor into the writer, timestamps and drop counts kept
    /// (the original length too when the bytes kept their length).
    private static func copy(_ reader: BTSnoopReader, _ writer: BTSnoopWriter, _ redactor: inout CaptureRedactor)
        throws(CaptureError)
    {
        while let (record, payload) = try reader.nextRecord() {
            let (flags, bytes) = redactor.redact(flags: record.flags, payload: payload)
            let unchangedLength = bytes.count == record.includedLength
            try writer.append(
                bytes, flags: flags, timestamp: record.timestamp, cumulativeDrops: record.cumulativeDrops,
                originalLength: unchangedLength ? record.originalLength : nil)
        }
    }

    /// First pass: the peers (and, for connections without a connection event, the handles) to keep.
    static func glucoseConnections(_ reader: GATTEventReader, options: RedactionOptions) throws(CaptureError)
        -> (Set<BluetoothAddress>, Set<UInt32>)
    {
        var peers = Set<BluetoothAddress>()
        var orphans = Set<UInt32>()
        var glucoseSessions = Set<Int>()
        // A OneTouch Verio has no Glucose service: its command and reply characteristics mark it.
        let glucose: Set<BluetoothUUID> = [
            .glucoseMeasurement, .glucoseMeasurementContext, .recordAccessControlPoint, BluetoothUUID(0x2A51),
            Verio.commandCharacteristic, Verio.replyCharacteristic,
        ]
        while let item = try reader.next() {
            switch item {
            case .event(let event):
                switch event.kind {
                case .notification(let attribute, _), .indication(let attribute, _), .read(let attribute, _, _),
                    .write(let attribute, _, _):
                    if let uuid = attribute.characteristic, glucose.contains(uuid) { glucoseSessions.insert(event.session) }
                default: break
                }
            case .sessionEnded(let session):
                let isGlucose =
                    glucoseSessions.contains(session.index)
                    || session.database.services.contains { $0.uuid == BluetoothUUID(0x1808) || $0.uuid == Verio.service }
                let wanted = options.meter.map { session.peer == $0 } ?? isGlucose
                guard wanted else { continue }
                if let peer = session.peer {
                    peers.insert(peer)
                } else if options.meter == nil {
                    orphans.insert(UInt32(session.controllerIndex) << 16 | UInt32(session.connectionHandle))
                }
            case .anomaly:
                break
            }
        }
        guard !peers.isEmpty || !orphans.isEmpty else {
            throw CaptureError(
                .invalidArgument,
                options.meter.map { "The capture holds no connection to \($0)." }
                    ?? "The capture holds no glucose meter connection (no Glucose or Verio service, no glucose values); "
                    + "name the meter with --meter ADDR.")
        }
        return (peers, orphans)
    }
}
