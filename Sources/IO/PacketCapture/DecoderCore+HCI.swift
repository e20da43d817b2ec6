/// HCI events: LE connections opening and closing (a session each), encryption, controllers going away.
extension DecoderCore {
    /// One HCI event from controller `index`: LE (Enhanced) Connection Complete opens a session,
    /// Disconnection Complete closes it, a classic Connection Complete marks its handle as ignored,
    /// Encryption Change is recorded. Short or truncated events are reported as anomalies.
    mutating func hciEvent(index: UInt16, _ body: UnsafeRawBufferPointer) {
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

    /// Opens a session for `handle` (closing a stale one that reused it) with the layout known for the
    /// peer: learned in an earlier session, else provided by the options; applies handle overrides.
    /// - Returns: the new connection's slot.
    @discardableResult
    mutating func leConnected(
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

    /// Controller `index` was removed or closed (monitor captures): closes its sessions and forgets its handles.
    mutating func controllerGone(_ index: UInt16) {
        let gone = self.slots.indices.filter { self.slots[$0].isOpen && self.slots[$0].index == index }
            .sorted { self.slots[$0].session < self.slots[$1].session }
        for slot in gone { self.close(slot, .controllerRemoved) }
        self.handles.removeAll(index: index)
    }

    /// Reports the session, remembers its layout for the peer, and frees the slot.
    mutating func close(_ slot: Int, _ end: SessionEnd) {
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
}

/// (controller index, connection handle) → connection slot, `none` or `classic`. Index 0 (every H4
/// capture, most monitor captures) uses a flat table so the hot path does not hash.
struct HandleTable {
    /// No connection on this handle.
    static let none: Int32 = -1
    /// A BR/EDR connection: its traffic is not GATT over LE and is skipped.
    static let classic: Int32 = -2
    /// Controller 0, indexed by the 12-bit handle.
    private var zero = [Int32](repeating: HandleTable.none, count: 4096)
    /// Other controllers, keyed by index << 16 | handle.
    private var others: [UInt32: Int32] = [:]

    /// The slot (≥ 0), ``none`` or ``classic`` for a handle of a controller.
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

    /// Forgets every handle of controller `index`.
    mutating func removeAll(index: UInt16) {
        if index == 0 {
            for position in self.zero.indices { self.zero[position] = Self.none }
        } else {
            self.others = self.others.filter { UInt16($0.key >> 16) != index }
        }
    }
}

/// State of one LE connection.
struct ConnectionState {
    /// The placeholder a closed slot holds until it is reused.
    static let closed = ConnectionState(
        session: 0, index: 0, handle: 0, peer: nil, addressType: nil, role: nil, frame: 0,
        timestamp: CaptureTimestamp(microsecondsSinceYear0: 0), isOpen: false)

    /// False once the session was reported.
    var isOpen: Bool
    /// The session number (1-based, in connection order).
    let session: Int
    /// The controller index (0 for non-monitor captures).
    let index: UInt16
    /// The HCI connection handle.
    let handle: UInt16
    /// The peer's address; nil when the connection event was not captured.
    let peer: BluetoothAddress?
    /// How the peer's address was given.
    let addressType: AddressType?
    /// The local controller's role (central or peripheral).
    let role: LinkRole?
    /// The frame that opened the session.
    let firstFrame: Int
    /// When it opened.
    let start: CaptureTimestamp
    /// The last frame that carried something of this session.
    var lastFrame: Int
    /// When that frame was captured.
    var end: CaptureTimestamp
    /// The ATT MTU agreed (23 until an Exchange MTU completes).
    var mtu = 23
    /// Reassembly of host-to-controller and controller-to-host PDUs.
    var tx = Reassembly()
    /// Controller-to-host reassembly.
    var rx = Reassembly()
    /// Outstanding request sent by the local host / by the peer.
    var pendingSent: PendingRequest?
    /// Outstanding request sent by the peer.
    var pendingReceived: PendingRequest?
    /// The peer's GATT server as discovered in this session.
    var peerDB = GATTDatabase()
    /// The local GATT server as the peer discovered it.
    var localDB = GATTDatabase()
    /// The layout known before this session (learned earlier or provided), used until discovery says otherwise.
    var inherited = GATTDatabase()
    /// Where `inherited` came from.
    var inheritedSource = DiscoverySource.none
    /// Handle overrides from the options; they win over discovered and inherited handles.
    var overrides = GATTDatabase()
    /// Peer-side lookups, cleared whenever `peerDB` changes.
    var attributeCache: [UInt16: GATTAttribute] = [:]
    /// Handles already reported as unknown, so each is reported once.
    var reportedUnknown: Set<UInt16> = []
    /// GATT events emitted for this session.
    var eventCount = 0
    /// An SMP Pairing Failed was seen.
    var pairingFailed = false
    /// The link was encrypted successfully.
    var encrypted = false

    /// An open connection starting at `frame`.
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
