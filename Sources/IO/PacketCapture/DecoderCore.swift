/// The decoding state machine: records in, `CaptureItem`s out (appended to `queue`). Its work is split
/// by layer: HCI events and connections (DecoderCore+HCI.swift), ACL and L2CAP reassembly
/// (DecoderCore+L2CAP.swift), ATT and GATT discovery (DecoderCore+ATT.swift).
struct DecoderCore {
    /// The capture's datalink: how a record's payload and flags are to be read.
    let datalink: BTSnoopDatalink
    /// The reader's options (handle overrides, what to skip).
    let options: GATTEventReader.Options
    /// Items decoded and not yet taken by the reader.
    var queue: [CaptureItem] = []
    /// ``finish(truncatedTail:)`` ran: every connection is closed.
    var finished = false
    /// Counts kept while decoding (frames, bytes, drops, corrupt records…).
    var statistics = CaptureStatistics()
    /// The GATT database learned per peer, kept across reconnections (a client caches discovery).
    var learned: [BluetoothAddress: (database: GATTDatabase, source: DiscoverySource)] = [:]

    /// Connection slots; `handles` maps (controller index, handle) to a slot or to "classic".
    var slots: [ConnectionState] = []
    /// Indices of closed slots, reused for new connections.
    var freeSlots: [Int] = []
    /// (controller index, connection handle) → slot.
    var handles = HandleTable()
    /// The session number the next connection gets (1-based, in order of connection).
    var nextSession = 1
    /// Handle overrides that apply to every peer (those given without an address).
    let globalOverrides: GATTDatabase
    /// The cumulative drop count of the previous record.
    var lastDrops: UInt32 = 0

    // The record being processed.
    /// 1-based frame number of the record being processed.
    var frame = 0
    /// Its timestamp.
    var timestamp = CaptureTimestamp(microsecondsSinceYear0: 0)
    /// Its payload was cut short by the capturing tool.
    var snapped = false

    /// A decoder for one capture of `datalink`.
    init(datalink: BTSnoopDatalink, options: GATTEventReader.Options) {
        self.datalink = datalink
        self.options = options
        self.globalOverrides = GATTDatabase(overrides: options.handleOverrides.filter { $0.peer == nil })
        self.queue.reserveCapacity(64)
    }

    // MARK: - Records

    /// At the end of the capture: reports a truncated last record and closes every open connection
    /// (`endOfCapture`) in session order. Runs once.
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

    /// Decodes one record: counts it, reports drops and snapped frames, then routes HCI events and ACL
    /// data by datalink (H4 type byte for 1002, flags for 1001, monitor opcode and index for 2001).
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


    // MARK: - Output

    /// Queues a GATT event of the connection in `slot`, at the current frame and time.
    mutating func emit(_ slot: Int, _ direction: Direction, _ kind: GATTEventKind) {
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

    /// Queues an anomaly, at the current frame unless `frame` is given.
    mutating func anomaly(_ kind: CaptureAnomaly.Kind, frame: Int? = nil, session: Int? = nil,
                          attribute: GATTAttribute? = nil, reason: String) {
        self.queue.append(.anomaly(CaptureAnomaly(
            kind: kind, frame: frame ?? self.frame, session: session, attribute: attribute, reason: reason)))
    }
}
