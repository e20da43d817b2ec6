import GlucoseProfile
import HealthDataSync
import PacketCapture

extension ReplayTransport {
    /// A meter that plays a btsnoop capture: identity (address, DIS strings, name), Glucose Feature,
    /// clock, handle layout and pairing need come from the capture's sessions; the records are the
    /// captured 0x2A18/0x2A34 notifications (and undecodable RACP indications) byte for byte, in capture
    /// order, malformed ones included. A later session's records that repeat an earlier session's exactly
    /// are taken once.
    ///
    /// A OneTouch Verio capture (the Verio vendor service, docs/verio-protocol.md) plays as a simulated
    /// Verio: its records are the data replies to the record commands (`b3 nn nn`) captured, by number
    /// (as ``CaptureInspector`` pairs them: ``InspectedSession/verio``); its clock the captured clock
    /// reply, running from the time of that reply.
    ///
    /// The clock is the first one read in the session (the one the download resolved its times with),
    /// not a read-back after a clock write: a capture in which the client set the meter's clock replays
    /// as the meter was before, so a replay sets it again.
    ///
    /// - Parameters:
    ///   - path: a btsnoop file (H4 or btmon).
    ///   - handleOverrides: `0x0012=2a18` mappings for captures without discovery.
    ///   - passkey: the PIN the replayed meter asks for when the capture shows pairing; nil makes such a
    ///     meter pair without a passkey.
    /// - Throws: `CaptureError` when the file cannot be read, or `.invalidArgument` when it holds no
    ///   glucose meter session.
    public static func meter(
        fromCapture path: String, handleOverrides: [HandleOverride] = [], passkey: UInt32? = nil
    ) throws(CaptureError) -> MeterSimulator {
        let reader = try GATTEventReader(path: path, options: GATTEventReader.Options(handleOverrides: handleOverrides))
        return try Self.meter(reader, passkey: passkey, source: path)
    }

    /// Like ``meter(fromCapture:handleOverrides:passkey:)`` for a capture image in memory.
    public static func meter(
        fromCaptureBytes bytes: [UInt8], handleOverrides: [HandleOverride] = [], passkey: UInt32? = nil
    ) throws(CaptureError) -> MeterSimulator {
        let reader = try GATTEventReader(bytes: bytes, options: GATTEventReader.Options(handleOverrides: handleOverrides))
        return try Self.meter(reader, passkey: passkey, source: "the capture")
    }

    /// Reads the whole capture: the records of the meter's sessions (the first peer with glucose or
    /// Verio traffic), its identity, layout, clock and pairing; a Verio download becomes a Verio.
    private static func meter(
        _ reader: GATTEventReader, passkey: UInt32?, source: String
    ) throws(CaptureError) -> MeterSimulator {
        var inspector = CaptureInspector(options: CaptureInspector.Options(keepRecords: false))
        var streams: [Int: [SimulatedRecord.Packet]] = [:]
        while let item = try reader.next() {
            inspector.consume(item)
            guard case .event(let event) = item else { continue }
            switch event.kind {
            case .notification(let attribute, let value), .indication(let attribute, let value):
                if attribute.uuid == .glucoseMeasurement {
                    streams[event.session, default: []].append(.measurement(value))
                } else if attribute.uuid == .glucoseMeasurementContext {
                    streams[event.session, default: []].append(.context(value))
                } else if attribute.uuid == .recordAccessControlPoint, (try? RACPMessage(bytes: value)) == nil {
                    streams[event.session, default: []].append(.racpIndication(value))
                }
            default:
                break
            }
        }
        let inspection = inspector.finish()
        func isMeter(_ session: InspectedSession) -> Bool {
            session.glucoseService != nil || streams[session.capture.index] != nil || session.verio != nil
        }
        guard let first = inspection.sessions.first(where: isMeter) else {
            throw CaptureError(
                .invalidArgument, "\(source) holds no glucose meter session (no Glucose service, no 0x2A18 values).")
        }
        let peer = first.capture.peer
        let sessions = inspection.sessions.filter { $0.capture.peer == peer && isMeter($0) }

        func firstValue<T>(_ key: (InspectedSession) -> T?) -> T? { sessions.lazy.compactMap(key).first }
        let layoutSource = sessions.max { $0.capture.database.characteristics.count < $1.capture.database.characteristics.count }
        var layout = layoutSource.map { GATTLayout(database: $0.capture.database) }
        let clock: MeterPersonality.Clock =
            if let read = firstValue(\.clock), let value = read.dateTime {
                read.characteristic == .dateTime ? .dateTime(value) : .currentTime(value)
            } else {
                .none
            }
        let needsBond = sessions.contains { $0.pairingRequests > 0 || $0.capture.encrypted }
        let pairing: MeterPersonality.Pairing = needsBond ? (passkey.map { .passkey($0) } ?? .justWorks) : .none
        let info = DeviceInformation(
            deviceName: firstValue(\.deviceInformation.deviceName), manufacturer: firstValue(\.deviceInformation.manufacturer),
            model: firstValue(\.deviceInformation.model), serialNumber: firstValue(\.deviceInformation.serialNumber),
            firmware: firstValue(\.deviceInformation.firmware))
        let address = peer ?? BluetoothAddress(rawValue: 0xC0_00_00_00_00_01)
        var personality = MeterPersonality(
            address: address, name: info.deviceName ?? info.model ?? "Replayed meter", manufacturer: info.manufacturer,
            model: info.model, serialNumber: info.serialNumber, firmware: info.firmware,
            feature: firstValue(\.feature) ?? [], hasContext: true, clock: clock, pairing: pairing,
            mtu: UInt16(clamping: sessions.map(\.capture.mtu).max() ?? 23))
        let required: [BluetoothUUID] = [.glucoseMeasurement, .glucoseFeature, .recordAccessControlPoint]
        if let candidate = layout, required.allSatisfy({ uuid in
            candidate.characteristics.contains { $0.uuid == uuid && $0.service == .glucoseService }
        }) {
            layout = candidate
        } else {
            // Discovery is missing or partial: serve the standard layout.
            layout = nil
        }
        if let layout { personality.layout = layout }
        personality.clockReference = firstValue(\.clock)?.timestamp.unixMicroseconds
        if sessions.contains(where: { $0.verio != nil }) {
            return Self.verioMeter(sessions, personality, layout: layoutSource.map { GATTLayout(database: $0.capture.database) })
        }
        // Where the capture shows no discovery, the replay still needs CCCDs; a layout from overrides
        // only has values. The checks below keep the meter servable.
        if personality.layout.cccdHandle(.recordAccessControlPoint) == nil {
            personality.requiresRACPIndications = false
        }

        var records: [SimulatedRecord] = []
        var seen = Set<SimulatedRecord>()
        for session in sessions {
            var items: [SimulatedRecord] = []
            for packet in streams[session.capture.index] ?? [] {
                switch packet {
                case .measurement(let bytes):
                    var byteReader = ByteReader(bytes)
                    if let m = try? GlucoseMeasurement(parsing: &byteReader, options: .lenientDateTime) {
                        items.append(SimulatedRecord(sequenceNumber: m.sequenceNumber, packets: [packet]))
                    } else {
                        items.append(.stray(packet))
                    }
                case .context(let bytes):
                    if let context = try? MeasurementContext(bytes: bytes), let last = items.indices.last,
                        items[last].sequenceNumber == context.sequenceNumber,
                        !items[last].packets.contains(where: { if case .context = $0 { true } else { false } })
                    {
                        items[last].packets.append(packet)
                    } else {
                        items.append(.stray(packet))
                    }
                case .racpIndication:
                    items.append(.stray(packet))
                }
            }
            let fresh = items.filter { !seen.contains($0) }
            records += fresh
            seen.formUnion(items)
        }
        return MeterSimulator(personality: personality, records: records)
    }
}

extension ReplayTransport {
    /// The simulated Verio a capture showed: its identity (from `base`), the captured layout when it holds
    /// the Verio service, the first captured clock (running) and the records of every session (a later
    /// session's reply for a number replaces an earlier one's).
    static func verioMeter(_ sessions: [InspectedSession], _ base: MeterPersonality, layout: GATTLayout?) -> MeterSimulator {
        var records: [UInt16: VerioRecord] = [:]
        var highest: UInt32 = 0
        var clock: (timestamp: CaptureTimestamp, meterSeconds: UInt32)?
        for verio in sessions.compactMap(\.verio) {
            for item in verio.records { records[item.number] = item.record }
            highest = max(highest, verio.highestRecordNumber ?? 0)
            if clock == nil, let read = verio.clock { clock = (read.timestamp, read.meterSeconds) }
        }
        var personality = MeterPersonality.verio(
            address: base.address, name: base.name, serialNumber: base.serialNumber,
            clock: clock.map { Verio.dateTime(meterSeconds: $0.meterSeconds) },
            pairing: base.pairing == .none ? .none : .justWorks)
        personality.manufacturer = base.manufacturer ?? personality.manufacturer
        personality.model = base.model ?? personality.model
        personality.firmware = base.firmware
        if let layout, layout.valueHandle(Verio.commandCharacteristic) != nil, layout.valueHandle(Verio.replyCharacteristic) != nil {
            personality.layout = layout
        }
        personality.clockReference = clock?.timestamp.unixMicroseconds
        var meter = MeterSimulator(personality: personality)
        meter.setVerioRecords(records.map { ($0.key, $0.value) }, highest: highest)
        return meter
    }
}
