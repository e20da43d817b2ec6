import GlucoseProfile
import Testing
import TestSupport
@testable import PacketCapture

@Suite struct GATTEventReaderTests {
    static let formats: [CaptureBuilder.Format] = [.h4, .monitor]

    @Test(arguments: formats)
    func glucoseSessionRoundTripsThroughAFile(format: CaptureBuilder.Format) throws {
        var builder = CaptureBuilder(format: format)
        let layout = GATTLayout.glucoseMeter(startHandle: 0x0020)
        let script = glucoseDownload(&builder, handle: 0x0040, peer: meterA, layout: layout, records: 12)
        try withTemporaryDirectory { directory in
            let path = directory + "/session.btsnoop"
            try builder.write(to: path)
            let summary = try GATTEventReader.readAll(path: path)
            #expect(summary.datalink == (format == .h4 ? .hciUART : .monitor))
            #expect(summary.anomalies.isEmpty, "\(summary.anomalies)")
            #expect(summary.notifications(glucoseMeasurement) == script.measurements)
            #expect(summary.notifications(glucoseContext) == script.contexts)
            #expect(summary.indications(racp) == [script.racpResponse])
            #expect(summary.statistics.frames == builder.frameCount)

            // Writes carry the CCCD and its owning characteristic.
            let writes = summary.events.compactMap { event -> (GATTAttribute, [UInt8])? in
                if case .write(let attribute, let value, true) = event.kind { return (attribute, value) }
                return nil
            }
            #expect(writes.count == 4)
            #expect(writes[0].0.isCCCD && writes[0].0.characteristic == glucoseMeasurement && writes[0].1 == [1, 0])
            #expect(writes[2].0.isCCCD && writes[2].0.characteristic == racp && writes[2].1 == [2, 0])
            #expect(writes[3].0.uuid == racp && writes[3].0.service == BluetoothUUID(0x1808) && writes[3].1 == [1, 1])
            let acknowledged = summary.events.filter { if case .writeResponse = $0.kind { true } else { false } }
            #expect(acknowledged.count == 4)
            let reads = summary.events.compactMap { event -> GATTAttribute? in
                if case .read(let attribute, [0x03, 0x04], 0) = event.kind { return attribute }
                return nil
            }
            #expect(reads.map(\.uuid) == [glucoseFeature])
            // Routine "Attribute Not Found" errors that end discovery are not events.
            #expect(!summary.events.contains { if case .error = $0.kind { true } else { false } })

            let session = try #require(summary.sessions.only)
            #expect(session.peer == meterA)
            #expect(session.connectionHandle == 0x0040)
            #expect(session.discovery == .performed)
            #expect(session.ended == .disconnected(reason: 0x16))
            #expect(session.role == .central)
            #expect(session.database.services.map(\.uuid) == layout.services.map(\.uuid))
            #expect(session.database.characteristics == layout.characteristics)
            #expect(summary.events.first?.kind == .connected(peer: meterA, addressType: .public, role: .central))
            #expect(summary.events.last?.kind == .disconnected(reason: 0x16))
            #expect(summary.events.allSatisfy { $0.session == 1 && $0.peer == meterA && $0.connectionHandle == 0x40 })
            // Frames and timestamps increase.
            #expect(zip(summary.events, summary.events.dropFirst()).allSatisfy {
                $0.frame <= $1.frame && $0.timestamp <= $1.timestamp
            })
        }
    }

    @Test(arguments: formats)
    func largeMTUOverTinyACLBuffersReassembles(format: CaptureBuilder.Format) throws {
        // 512-byte values over 5-byte ACL fragments: ~100 fragments per PDU.
        var builder = CaptureBuilder(format: format, aclBufferSize: 5)
        let layout = GATTLayout(startHandle: 1, services: [
            .init(BluetoothUUID(0x1808), [
                .init(glucoseMeasurement, .notify),
                .init(try BluetoothUUID(parsing: "c4dea3bc-5a9d-11e9-8647-d663bd873d93"), [.read, .notify]),
            ])
        ])
        builder.leConnect(handle: 1, peer: meterA, enhanced: true)
        builder.exchangeMTU(handle: 1, client: 517, server: 515)
        builder.discover(handle: 1, layout: layout)
        var random = SeededRandom(seed: 42)
        var sent: [[UInt8]] = []
        for _ in 0..<20 {
            let value = (0..<Int(random.next() % 514)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            sent.append(value)
            builder.notify(handle: 1, attribute: layout.valueHandle(glucoseMeasurement)!, value: value)
        }
        let vendor = layout.characteristics[1]
        let long = (0..<1200).map { UInt8(truncatingIfNeeded: $0) }
        builder.read(handle: 1, attribute: vendor.valueHandle, value: long)
        let summary = try GATTEventReader.readAll(bytes: builder.image)
        #expect(summary.anomalies.isEmpty, "\(summary.anomalies)")
        #expect(summary.notifications(glucoseMeasurement) == sent)
        let mtu = summary.events.compactMap { if case .mtuExchanged(let c, let s) = $0.kind { (c, s) } else { nil } }
        #expect(mtu.count == 1 && mtu[0] == (517, 515))
        var reassembled: [UInt8] = []
        for event in summary.events {
            if case .read(let attribute, let value, let offset) = event.kind, attribute.uuid == vendor.uuid {
                #expect(offset == reassembled.count)
                reassembled += value
            }
        }
        #expect(reassembled == long)
        #expect(summary.sessions.first?.mtu == 515)
        #expect(summary.statistics.aclFrames > 20 * 50)
    }

    @Test(arguments: formats)
    func interleavedConnectionsStaySeparate(format: CaptureBuilder.Format) throws {
        var builder = CaptureBuilder(format: format, aclBufferSize: 8)
        let layoutA = GATTLayout.glucoseMeter(startHandle: 0x0001)
        let layoutB = GATTLayout.glucoseMeter(startHandle: 0x0100, withContext: false)
        builder.leConnect(handle: 0x0041, peer: meterA)
        builder.leConnect(handle: 0x0042, peer: meterB)
        // Interleave at the PDU level: discovery of B between A's steps, then alternate notifications.
        builder.discover(handle: 0x0041, layout: layoutA)
        builder.discover(handle: 0x0042, layout: layoutB)
        var expectedA: [[UInt8]] = []
        var expectedB: [[UInt8]] = []
        for sequence in UInt16(1)...30 {
            let a = fakeMeasurement(sequence: sequence)
            let b = fakeMeasurement(sequence: 1000 + sequence, length: 10)
            builder.notify(handle: 0x0041, attribute: layoutA.valueHandle(glucoseMeasurement)!, value: a)
            builder.notify(handle: 0x0042, attribute: layoutB.valueHandle(glucoseMeasurement)!, value: b)
            expectedA.append(a)
            expectedB.append(b)
        }
        // Interleave at the fragment level: start fragments of both before their continuations.
        let pduA = ATTEncoder.notification(handle: layoutA.valueHandle(glucoseMeasurement)!, value: fakeMeasurement(sequence: 99))
        let pduB = ATTEncoder.notification(handle: layoutB.valueHandle(glucoseMeasurement)!, value: fakeMeasurement(sequence: 1099))
        let l2A = CaptureBuilder.le16(UInt16(pduA.count)) + [4, 0] + pduA
        let l2B = CaptureBuilder.le16(UInt16(pduB.count)) + [4, 0] + pduB
        builder.aclPacket(handle: 0x41, boundary: 0b10, direction: .received, data: Array(l2A[..<6]))
        builder.aclPacket(handle: 0x42, boundary: 0b10, direction: .received, data: Array(l2B[..<9]))
        builder.aclPacket(handle: 0x41, boundary: 0b01, direction: .received, data: Array(l2A[6...]))
        builder.aclPacket(handle: 0x42, boundary: 0b01, direction: .received, data: Array(l2B[9...]))
        expectedA.append(fakeMeasurement(sequence: 99))
        expectedB.append(fakeMeasurement(sequence: 1099))
        builder.disconnect(handle: 0x0042)
        builder.disconnect(handle: 0x0041)

        let summary = try GATTEventReader.readAll(bytes: builder.image)
        #expect(summary.anomalies.isEmpty, "\(summary.anomalies)")
        #expect(summary.notifications(glucoseMeasurement, session: 1) == expectedA)
        #expect(summary.notifications(glucoseMeasurement, session: 2) == expectedB)
        #expect(summary.sessions.map(\.index) == [2, 1])
        #expect(summary.sessions.map(\.peer) == [meterB, meterA])
        #expect(summary.sessions[0].database.characteristic(glucoseContext) == nil)
        #expect(summary.sessions[1].database.characteristic(glucoseMeasurement)?.valueHandle
            == layoutA.valueHandle(glucoseMeasurement))
    }

    @Test(arguments: formats)
    func thousandsOfUnrelatedFramesDoNotDisturbOneSession(format: CaptureBuilder.Format) throws {
        var random = SeededRandom(seed: 0xC0FFEE)
        var builder = CaptureBuilder(format: format)
        let layout = GATTLayout.glucoseMeter(startHandle: 0x0030)
        builder.classicConnect(handle: 0x0005, peer: BluetoothAddress(rawValue: 0x1122_3344_5566))
        var leUp = false
        func noise(_ builder: inout CaptureBuilder, _ count: Int) {
            for _ in 0..<count {
                switch random.next() % 6 {
                case 0:  // classic ACL: L2CAP signalling / A2DP-ish on dynamic CIDs, even CID 4 shapes
                    let length = Int(random.next() % 60)
                    let payload = (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                    builder.l2cap(handle: 0x0005, direction: random.next() % 2 == 0 ? .sent : .received,
                                  cid: random.next() % 3 == 0 ? 0x0004 : 0x0041, payload: payload)
                case 1: builder.vendorEvent((0..<Int(random.next() % 40)).map { _ in UInt8(truncatingIfNeeded: random.next()) })
                case 2: builder.completedPackets(handle: 0x0040, count: 1)
                case 3 where leUp:  // SMP on the LE link
                    builder.smp(handle: 0x0040, direction: .received, [0x0B, 0x2D])
                case 4: builder.command(opcode: 0x200B, parameters: [0x01, 0x60, 0x00, 0x30, 0x00, 0x00, 0x00])
                default: builder.scoPacket(handle: 0x0006, direction: .received, data: [UInt8](repeating: 0x55, count: 48))
                }
            }
        }
        noise(&builder, 1500)
        builder.leConnect(handle: 0x0040, peer: meterA)
        leUp = true
        noise(&builder, 1500)
        builder.discover(handle: 0x0040, layout: layout)
        noise(&builder, 500)
        builder.write(handle: 0x0040, attribute: layout.cccdHandle(glucoseMeasurement)!, value: [1, 0])
        var expected: [[UInt8]] = []
        for sequence in UInt16(1)...50 {
            noise(&builder, 40)
            let value = fakeMeasurement(sequence: sequence)
            builder.notify(handle: 0x0040, attribute: layout.valueHandle(glucoseMeasurement)!, value: value)
            expected.append(value)
        }
        noise(&builder, 300)
        builder.disconnect(handle: 0x0040)
        leUp = false
        noise(&builder, 300)

        let summary = try GATTEventReader.readAll(bytes: builder.image)
        #expect(summary.anomalies.isEmpty, "\(summary.anomalies.prefix(3))")
        #expect(summary.notifications(glucoseMeasurement) == expected)
        #expect(summary.statistics.frames > 6000)
        // connected + CCCD write + write response + 50 notifications + disconnected: nothing else.
        #expect(summary.events.count == 54, "\(summary.events.count)")
        #expect(summary.sessions.count == 1)
    }

    @Test func truncatedLastFrameAndDropsBecomeAnomalies() throws {
        var builder = CaptureBuilder()
        let layout = GATTLayout.glucoseMeter()
        glucoseDownload(&builder, handle: 0x40, peer: meterA, layout: layout, records: 3, disconnect: false)
        builder.cumulativeDrops = 4
        builder.notify(handle: 0x40, attribute: layout.valueHandle(glucoseMeasurement)!, value: fakeMeasurement(sequence: 9))
        let complete = builder.image.count
        builder.notify(handle: 0x40, attribute: layout.valueHandle(glucoseMeasurement)!, value: fakeMeasurement(sequence: 10))
        let image = Array(builder.image[..<(complete + 30)])

        let summary = try GATTEventReader.readAll(bytes: image)
        let truncated = summary.anomalies(.truncatedCapture)
        #expect(truncated.count == 1)
        #expect(truncated.first?.frame == builder.frameCount)
        let drops = summary.anomalies(.droppedPackets)
        #expect(drops.count == 1 && drops.first?.frame == builder.frameCount - 1)
        #expect(summary.statistics.droppedPackets == 4)
        #expect(summary.notifications(glucoseMeasurement).count == 4)
        #expect(summary.sessions.only?.ended == .endOfCapture)
    }

    @Test func snappedFramesAreReported() throws {
        var builder = CaptureBuilder()
        builder.leConnect(handle: 0x40, peer: meterA)
        let pdu = CaptureBuilder.le16(7) + [4, 0] + ATTEncoder.notification(handle: 0x12, value: [1, 2, 3, 4])
        let acl = [UInt8(2)] + CaptureBuilder.le16(0x2040) + CaptureBuilder.le16(UInt16(pdu.count)) + pdu
        builder.record(flags: 1, payload: Array(acl.prefix(9)), originalLength: acl.count)
        let summary = try GATTEventReader.readAll(bytes: builder.image)
        #expect(summary.anomalies(.snappedFrame).count == 1)
        #expect(summary.anomalies(.snappedFrame).first?.frame == 2)
        #expect(summary.notifications(glucoseMeasurement).isEmpty)
    }

    @Test(arguments: formats)
    func bondedReconnectionReusesEarlierDiscovery(format: CaptureBuilder.Format) throws {
        var builder = CaptureBuilder(format: format)
        let layout = GATTLayout.glucoseMeter(startHandle: 0x0100)
        glucoseDownload(&builder, handle: 0x40, peer: meterA, layout: layout, records: 2)
        let second = glucoseDownload(&builder, handle: 0x41, peer: meterA, layout: layout, records: 3,
                                     firstSequence: 3, discover: false)
        // A different meter without discovery learns nothing from meter A.
        glucoseDownload(&builder, handle: 0x42, peer: meterB, layout: layout, records: 1, discover: false)

        let summary = try GATTEventReader.readAll(bytes: builder.image)
        #expect(summary.notifications(glucoseMeasurement, session: 2) == second.measurements)
        #expect(summary.indications(racp, session: 2) == [second.racpResponse])
        #expect(summary.sessions.map(\.discovery) == [.performed, .reused(fromSession: 1), .none])
        #expect(summary.sessions[1].database.characteristics == layout.characteristics)
        let unknown = summary.anomalies(.unknownHandle)
        #expect(!unknown.isEmpty && unknown.allSatisfy { $0.session == 3 })
        // One anomaly per handle, naming it.
        #expect(Set(unknown.compactMap { $0.attribute?.handle }).count == unknown.count)
        #expect(summary.notifications(glucoseMeasurement, session: 3).isEmpty)
    }

    @Test func noDiscoveryWithOverrides() throws {
        var builder = CaptureBuilder()
        let layout = GATTLayout.glucoseMeter(startHandle: 0x0009)
        let script = glucoseDownload(&builder, handle: 0x40, peer: meterA, layout: layout, records: 4, discover: false)

        let bare = try GATTEventReader.readAll(bytes: builder.image)
        #expect(bare.sessions.only?.discovery == DiscoverySource.none)
        #expect(bare.notifications(glucoseMeasurement).isEmpty)
        let unknown = bare.anomalies(.unknownHandle)
        #expect(unknown.contains { $0.attribute?.handle == layout.valueHandle(glucoseMeasurement) })
        #expect(unknown.allSatisfy { $0.reason.contains("no GATT discovery") })

        let text = [
            "\(hex16(layout.valueHandle(glucoseMeasurement)!))=2a18",
            "\(hex16(layout.cccdHandle(glucoseMeasurement)!))=2902",
            "C0:11:22:33:44:55/\(layout.valueHandle(glucoseContext)!)=2a34",
            "\(hex16(layout.valueHandle(racp)!))=2a52",
            "D0:66:77:88:99:AA/\(hex16(layout.valueHandle(glucoseFeature)!))=2a51",  // other peer: ignored
        ]
        let overrides = try text.map { try HandleOverride(parsing: $0) }
        let summary = try GATTEventReader.readAll(bytes: builder.image, options: .init(handleOverrides: overrides))
        #expect(summary.notifications(glucoseMeasurement) == script.measurements)
        #expect(summary.notifications(glucoseContext) == script.contexts)
        #expect(summary.indications(racp) == [script.racpResponse])
        let cccd = summary.events.compactMap { event -> GATTAttribute? in
            if case .write(let attribute, _, _) = event.kind, attribute.isCCCD { return attribute }
            return nil
        }
        #expect(cccd.first?.characteristic == glucoseMeasurement)
        // The feature read stays unknown: its override belongs to another peer.
        let unknownHandles = summary.anomalies(.unknownHandle).compactMap { $0.attribute?.handle }
        #expect(unknownHandles.contains(layout.valueHandle(glucoseFeature)!))
    }

    @Test func providedDatabasesActLikeEarlierDiscovery() throws {
        var withDiscovery = CaptureBuilder()
        let layout = GATTLayout.glucoseMeter(startHandle: 0x30)
        glucoseDownload(&withDiscovery, handle: 0x40, peer: meterA, layout: layout, records: 1)
        let learned = try GATTEventReader(bytes: withDiscovery.image)
        while try learned.next() != nil {}

        var later = CaptureBuilder()
        let script = glucoseDownload(&later, handle: 0x40, peer: meterA, layout: layout, records: 2, discover: false)
        let summary = try GATTEventReader.readAll(
            bytes: later.image, options: .init(knownDatabases: learned.learnedDatabases))
        #expect(summary.sessions.only?.discovery == .provided)
        #expect(summary.notifications(glucoseMeasurement) == script.measurements)
    }

    @Test func malformedATTBecomesAnomaliesNotCrashes() throws {
        var builder = CaptureBuilder()
        let layout = GATTLayout.glucoseMeter()
        builder.leConnect(handle: 0x40, peer: meterA)
        builder.discover(handle: 0x40, layout: layout)
        // (request preceding it or nil, malformed PDU from the meter)
        let malformed: [([UInt8]?, [UInt8])] = [
            (nil, []),  // empty ATT PDU
            (nil, [0x1B, 0x12]),  // notification without a full handle
            (nil, [0x01, 0x0A, 0x00]),  // short error response
            ([0x08, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x2A], [0x09, 0x07, 0x01, 0x00]),  // read-by-type entry cut short
            ([0x04, 0x01, 0x00, 0xFF, 0xFF], [0x05, 0x03, 0x01, 0x00]),  // find information with a bad format
            (nil, [0x23, 0x12, 0x00, 0x09, 0x00, 0x01]),  // multiple notification overrunning
            ([0x08, 0x01, 0x00, 0xFF, 0xFF, 0x03, 0x28], [0x09, 0x04, 0x01, 0x00, 0x02, 0x00]),  // 2-byte declaration
        ]
        var malformedFrames: [Int] = []
        for (request, pdu) in malformed {
            if let request { builder.att(handle: 0x40, direction: .sent, request) }
            builder.att(handle: 0x40, direction: .received, pdu)
            malformedFrames.append(builder.frameCount)
        }
        builder.att(handle: 0x40, direction: .received, [0x0B, 0x01])  // read response without request
        builder.notify(handle: 0x40, attribute: layout.valueHandle(glucoseMeasurement)!, value: [1, 2, 3])

        let summary = try GATTEventReader.readAll(bytes: builder.image)
        let bad = summary.anomalies(.malformedATT)
        #expect(bad.count == malformed.count, "\(bad)")
        #expect(bad.map { $0.frame! } == malformedFrames)
        #expect(bad.allSatisfy { $0.session == 1 })
        #expect(summary.anomalies(.unmatchedResponse).count == 1)
        // The stream carries on after the damage.
        #expect(summary.notifications(glucoseMeasurement) == [[1, 2, 3]])
    }

    @Test func pairingAndEncryptionAreSessionNotes() throws {
        var builder = CaptureBuilder()
        builder.leConnect(handle: 0x40, peer: meterA)
        builder.smp(handle: 0x40, direction: .sent, [0x01, 0x04, 0x00, 0x2D, 0x10, 0x0F, 0x0F])
        builder.smp(handle: 0x40, direction: .received, [0x05, 0x04])  // confirm value failed: wrong PIN
        builder.smp(handle: 0x40, direction: .sent, [0x01, 0x04, 0x00, 0x2D, 0x10, 0x0F, 0x0F])
        builder.encryptionChange(handle: 0x40, enabled: true)
        builder.readError(handle: 0x40, attribute: 0x22, error: .insufficientAuthentication)
        builder.disconnect(handle: 0x40)
        let summary = try GATTEventReader.readAll(bytes: builder.image)
        let kinds = summary.events.map(\.kind)
        #expect(kinds.contains(.pairingFailed(reason: 0x04)))
        #expect(kinds.filter { $0 == .pairingRequested }.count == 2)
        #expect(kinds.contains(.encryptionChanged(enabled: true, status: 0)))
        #expect(kinds.contains(.error(request: .readRequest, GATTAttribute(handle: 0x22), code: .insufficientAuthentication)))
        let session = try #require(summary.sessions.only)
        #expect(session.pairingFailed && session.encrypted)
    }

    @Test func trafficWithoutConnectionEventOpensAnAnonymousSession() throws {
        var builder = CaptureBuilder(format: .monitor)
        let layout = GATTLayout.glucoseMeter()
        builder.controllerIndex = 1
        builder.addController(index: 1, address: BluetoothAddress(rawValue: 0x0102_0304_0506))
        builder.discover(handle: 0x0800, layout: layout)
        builder.notify(handle: 0x0800, attribute: layout.valueHandle(glucoseMeasurement)!, value: [9])
        builder.removeController(index: 1)
        let summary = try GATTEventReader.readAll(bytes: builder.image)
        #expect(summary.anomalies(.missingConnectionEvent).count == 1)
        #expect(summary.notifications(glucoseMeasurement) == [[9]])
        let session = try #require(summary.sessions.only)
        #expect(session.peer == nil && session.controllerIndex == 1 && session.ended == .controllerRemoved)
    }

    @Test func handleReuseWithoutDisconnectEndsTheOldSession() throws {
        var builder = CaptureBuilder()
        builder.leConnect(handle: 0x40, peer: meterA)
        builder.leConnect(handle: 0x40, peer: meterB)
        let summary = try GATTEventReader.readAll(bytes: builder.image)
        #expect(summary.anomalies(.connectionReplaced).count == 1)
        #expect(summary.sessions.map(\.ended) == [.replaced, .endOfCapture])
        #expect(summary.sessions.map(\.peer) == [meterA, meterB])
    }
}

extension Array {
    /// The single element, or nil when there are zero or several.
    var only: Element? { self.count == 1 ? self.first : nil }
}

@Suite struct DatalinkVariantTests {
    /// Converts an H4 (1002) image to unencapsulated HCI (1001): drop the type byte, flag commands/events.
    static func toUnencapsulated(_ image: [UInt8]) throws -> [UInt8] {
        let reader = try BTSnoopReader(bytes: image)
        let writer = BTSnoopWriter(datalink: .hciUnencapsulated)
        while let frame = try reader.next() {
            let type = frame.payload[0]
            let flags = frame.record.flags & 1 | (type == 0x01 || type == 0x04 ? 2 : 0)
            try writer.append(frame.payload.dropFirst(), flags: flags, timestamp: frame.record.timestamp)
        }
        try writer.close()
        return writer.bytes
    }

    @Test func unencapsulatedHCIReadsLikeH4() throws {
        var builder = CaptureBuilder()
        let layout = GATTLayout.glucoseMeter(startHandle: 0x50)
        let script = glucoseDownload(&builder, handle: 0x40, peer: meterA, layout: layout, records: 6)
        let image = try Self.toUnencapsulated(builder.image)
        let summary = try GATTEventReader.readAll(bytes: image)
        #expect(summary.datalink == .hciUnencapsulated)
        #expect(summary.anomalies.isEmpty)
        #expect(summary.notifications(glucoseMeasurement) == script.measurements)
        #expect(summary.events == (try GATTEventReader.readAll(bytes: builder.image)).events)
    }

    @Test func monitorControllersWithTheSameHandleAreSeparate() throws {
        var builder = CaptureBuilder(format: .monitor, aclBufferSize: 10)
        builder.addController(index: 1, address: BluetoothAddress(rawValue: 0xAABB_CCDD_EEFF))
        let layout0 = GATTLayout.glucoseMeter(startHandle: 1)
        let layout1 = GATTLayout.glucoseMeter(startHandle: 0x40)
        builder.controllerIndex = 0
        builder.leConnect(handle: 0x40, peer: meterA)
        builder.controllerIndex = 1
        builder.leConnect(handle: 0x40, peer: meterB, enhanced: true)
        builder.controllerIndex = 0
        builder.discover(handle: 0x40, layout: layout0)
        builder.controllerIndex = 1
        builder.discover(handle: 0x40, layout: layout1)
        for sequence in UInt16(1)...5 {
            builder.controllerIndex = 0
            builder.notify(handle: 0x40, attribute: layout0.valueHandle(glucoseMeasurement)!, value: [0, UInt8(sequence)])
            builder.controllerIndex = 1
            builder.notify(handle: 0x40, attribute: layout1.valueHandle(glucoseMeasurement)!, value: [1, UInt8(sequence)])
        }
        builder.removeController(index: 1)
        let summary = try GATTEventReader.readAll(bytes: builder.image)
        #expect(summary.anomalies.isEmpty)
        #expect(summary.notifications(glucoseMeasurement, session: 1) == (1...5).map { [0, UInt8($0)] })
        #expect(summary.notifications(glucoseMeasurement, session: 2) == (1...5).map { [1, UInt8($0)] })
        #expect(summary.sessions.map(\.ended) == [.controllerRemoved, .endOfCapture])
        #expect(summary.sessions.map(\.controllerIndex) == [1, 0])
    }
}
