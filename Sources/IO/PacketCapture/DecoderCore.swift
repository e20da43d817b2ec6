/// The decoding state machine: records in, `CaptureItem`s out (appended to `queue`). Its work is split
/// by layer: HCI events and connections (DecoderCore+HCI.swift), ACL and L2CAP reassembly
/// (DecoderCore+L2CAP.swift), ATT and GATT discovery (DecoderCore+ATT.swift).
struct DecoderCore {
    let datalink: BTSnoopDatalink
    let options: GATTEventReader.Options
    var queue: [CaptureItem] = []
    var finished = false
    var statistics = CaptureStatistics()
    var learned: [BluetoothAddress: (database: GATTDatabase, source: DiscoverySource)] = [:]

    /// Connection slots; `handles` maps (controller index, handle) to a slot or to "classic".
    var slots: [ConnectionState] = []
    var freeSlots: [Int] = []
    var handles = HandleTable()
    var nextSession = 1
    let globalOverrides: GATTDatabase
    var lastDrops: UInt32 = 0

    // The record being processed.
    var frame = 0
    var timestamp = CaptureTimestamp(microsecondsSinceYear0: 0)
    var snapped = false

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


    // MARK: - Output

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

    mutating func anomaly(_ kind: CaptureAnomaly.Kind, frame: Int? = nil, session: Int? = nil,
                          attribute: GATTAttribute? = nil, reason: String) {
        self.queue.append(.anomaly(CaptureAnomaly(
            kind: kind, frame: frame ?? self.frame, session: session, attribute: attribute, reason: reason)))
    }
}
