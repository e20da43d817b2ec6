import GlucoseProfile
import HealthDataSync
import PacketCapture

/// What a simulated meter is: identity, GATT layout, clock, pairing, link parameters and faults.
public struct MeterPersonality: Sendable, Hashable {
    /// Where the meter keeps its clock.
    public enum Clock: Sendable, Hashable {
        /// No clock characteristic (i-SENS, Fora).
        case none
        /// Current Time Service 0x1805 / 0x2A2B.
        case currentTime(DateTime)
        /// Date Time 0x2A08 inside the Glucose service (Roche).
        case dateTime(DateTime)

        /// The clock value, nil for `.none`.
        public var value: DateTime? {
            switch self {
            case .none: nil
            case .currentTime(let value), .dateTime(let value): value
            }
        }
    }

    /// How the meter bonds.
    public enum Pairing: Sendable, Hashable {
        /// No bond needed.
        case none
        /// Glucose characteristics need a bond; pairing needs no passkey.
        case justWorks
        /// Glucose characteristics need a bond; pairing needs the passkey the meter shows.
        case passkey(UInt32)

        /// True when the glucose characteristics need a bond.
        public var isRequired: Bool { self != .none }
    }

    /// The meter's Bluetooth address (its id for the sync engine).
    public var address: BluetoothAddress
    /// The advertised name (also GAP Device Name 0x2A00).
    public var name: String
    /// Device Information Manufacturer Name (0x2A29).
    public var manufacturer: String?
    /// Device Information Model Number (0x2A24).
    public var model: String?
    /// Device Information Serial Number (0x2A25).
    public var serialNumber: String?
    /// Device Information Firmware Revision (0x2A26).
    public var firmware: String?
    /// Glucose Feature (0x2A51).
    public var feature: GlucoseFeature
    /// Where the clock is and what it shows.
    public var clock: Clock
    /// When set, the clock runs: it showed `clock.value` at this instant (Unix microseconds) and reads
    /// `clock.value + (now − clockReference)` later, so a replayed capture keeps the meter's skew.
    /// Nil: the clock reads `clock.value` (or the transport's ``ReplayTransport/Options/clock``).
    public var clockReference: Int64?
    /// Whether and how the meter bonds.
    public var pairing: Pairing
    /// The server's ATT MTU (the effective MTU is the smaller of this and the client's).
    public var mtu: UInt16
    /// ACL payload bytes per HCI packet in recorded captures (27 for most LE controllers).
    public var aclBufferSize: Int
    /// The GATT server's handles. Must hold 0x2A18, 0x2A51 and 0x2A52 in the Glucose service.
    public var layout: GATTLayout
    /// RACP writes before RACP indications are enabled fail with ATT 0x81 (Contour does this).
    public var requiresRACPIndications: Bool
    /// The misbehaviour asked for.
    public var faults: SimulatorFaults

    /// - Parameters:
    ///   - startHandle: first handle of the layout (meters differ); see
    ///     ``standardLayout(startHandle:glucoseGap:hasContext:clock:vendorService:)``.
    ///   - glucoseGap: unused handles before the Glucose service.
    ///   - hasContext: whether the meter has Glucose Measurement Context (0x2A34).
    ///   - vendorService: an extra 128-bit service (Roche and Ascensia have one), or nil.
    public init(
        address: BluetoothAddress, name: String, manufacturer: String?, model: String?, serialNumber: String? = nil,
        firmware: String? = nil, feature: GlucoseFeature = [.lowBatteryDetection, .resultHighLowDetection, .multipleBond],
        hasContext: Bool = true, clock: Clock = .none, pairing: Pairing = .none, mtu: UInt16 = 23,
        aclBufferSize: Int = 27, startHandle: UInt16 = 1, glucoseGap: UInt16 = 0, vendorService: BluetoothUUID? = nil,
        requiresRACPIndications: Bool = true, faults: SimulatorFaults = SimulatorFaults(), clockWritable: Bool = false,
        isensTime: Bool = false
    ) {
        self.address = address
        self.name = name
        self.manufacturer = manufacturer
        self.model = model
        self.serialNumber = serialNumber
        self.firmware = firmware
        self.feature = feature
        self.clock = clock
        self.pairing = pairing
        self.mtu = mtu
        self.aclBufferSize = aclBufferSize
        self.layout = Self.standardLayout(
            startHandle: startHandle, glucoseGap: glucoseGap, hasContext: hasContext, clock: clock,
            vendorService: vendorService, clockWritable: clockWritable, isensTime: isensTime)
        self.requiresRACPIndications = requiresRACPIndications
        self.faults = faults
    }

    /// The meter's identifier as the sync engine knows it (`C0:26:DA:01:02:03`).
    public var id: MeterID { MeterID(self.address.description) }

    /// A OneTouch Verio: no Glucose service, the Verio vendor service (command `af9df7a2-…` write, reply
    /// `af9df7a3-…` notify) beside GAP, GATT and Device Information; a bond is needed (docs/verio-protocol.md).
    /// Its clock is `clock`'s value (read with `20 02`).
    public static func verio(
        address: BluetoothAddress, name: String = "OneTouch Verio", serialNumber: String? = "VF-0001",
        clock: DateTime?, pairing: Pairing = .justWorks, faults: SimulatorFaults = SimulatorFaults()
    ) -> MeterPersonality {
        var personality = MeterPersonality(
            address: address, name: name, manufacturer: "LifeScan", model: "OneTouch Verio Flex", serialNumber: serialNumber,
            clock: clock.map { .currentTime($0) } ?? .none, pairing: pairing, faults: faults)
        typealias Spec = GATTLayout.CharacteristicSpec
        personality.layout = GATTLayout(startHandle: 1, services: [
            .init(BluetoothUUID(0x1800), [Spec(BluetoothUUID(0x2A00), .read), Spec(BluetoothUUID(0x2A01), .read)]),
            .init(BluetoothUUID(0x1801), [Spec(BluetoothUUID(0x2A05), .indicate)]),
            .init(.deviceInformationService, [
                Spec(.manufacturerName, .read), Spec(.modelNumber, .read), Spec(.serialNumber, .read),
            ]),
            .init(Verio.service, [Spec(Verio.commandCharacteristic, [.write]), Spec(Verio.replyCharacteristic, [.notify])]),
        ])
        personality.requiresRACPIndications = false
        return personality
    }

    /// Whether the meter speaks the Verio protocol (its layout has the Verio command characteristic).
    public var isVerio: Bool { self.layout.valueHandle(Verio.commandCharacteristic) != nil }

    /// Whether the layout has Glucose Measurement Context.
    public var hasContext: Bool { self.layout.valueHandle(.glucoseMeasurementContext) != nil }

    /// GAP (0x1800: name, appearance), GATT (0x1801), Glucose (0x1808: 0x2A18, [0x2A34], 0x2A51, 0x2A52,
    /// [0x2A08]), Device Information (0x180A: 0x2A29, 0x2A24, 0x2A25, 0x2A26), [CTS 0x1805: 0x2A2B],
    /// [a vendor service].
    /// - Parameters:
    ///   - clockWritable: Current Time 0x2A2B also takes writes (the meter's clock can be set).
    ///   - isensTime: the i-SENS vendor time service 0xFFF0 with its write characteristic 0xFFF1.
    public static func standardLayout(
        startHandle: UInt16 = 1, glucoseGap: UInt16 = 0, hasContext: Bool = true, clock: Clock = .none,
        vendorService: BluetoothUUID? = nil, clockWritable: Bool = false, isensTime: Bool = false
    ) -> GATTLayout {
        typealias Spec = GATTLayout.CharacteristicSpec
        var glucose: [Spec] = [Spec(.glucoseMeasurement, .notify)]
        if hasContext { glucose.append(Spec(.glucoseMeasurementContext, .notify)) }
        glucose += [Spec(.glucoseFeature, .read), Spec(.recordAccessControlPoint, [.write, .indicate])]
        if case .dateTime = clock { glucose.append(Spec(.dateTime, .read)) }
        var services: [GATTLayout.ServiceSpec] = [
            .init(BluetoothUUID(0x1800), [Spec(BluetoothUUID(0x2A00), .read), Spec(BluetoothUUID(0x2A01), .read)]),
            .init(BluetoothUUID(0x1801), [Spec(BluetoothUUID(0x2A05), .indicate)]),
            .init(.glucoseService, gapBefore: glucoseGap, glucose),
            .init(.deviceInformationService, [
                Spec(.manufacturerName, .read), Spec(.modelNumber, .read),
                Spec(.serialNumber, .read), Spec(.firmwareRevision, .read),
            ]),
        ]
        if case .currentTime = clock {
            services.append(.init(.currentTimeService, [
                Spec(.currentTime, clockWritable ? [.read, .write, .notify] : [.read, .notify])
            ]))
        }
        if isensTime {
            services.append(.init(.isensTimeService, [Spec(.isensTime, [.write])]))
        }
        if let vendorService {
            // One vendor characteristic whose UUID is the service's with the last byte + 1.
            let characteristic = BluetoothUUID(high: vendorService.high, low: vendorService.low &+ 1)
            services.append(.init(vendorService, [Spec(characteristic, [.write, .indicate])]))
        }
        return GATTLayout(startHandle: startHandle, services: services)
    }
}

/// Ways a simulated meter misbehaves on request.
public struct SimulatorFaults: Sendable, Hashable {
    /// RACP `04` (count) is answered `06 00 04 02` (op code not supported).
    public var countNotSupported: Bool
    /// RACP `01` (report) is answered `06 00 01 02`.
    public var reportNotSupported: Bool
    /// The meter behaves as if it stored nothing (count 0, report `06 00 01 06`).
    public var noRecords: Bool
    /// ATT errors for the next RACP writes other than abort, one each, in order (0x80 procedure already in
    /// progress, 0x81 CCCD improperly configured, 0xFE, 0xFD…). Each is used once.
    public var racpWriteErrors: [UInt8]
    /// Drop the link after sending this many records of a report (once; cleared when it fires).
    public var disconnectAfterRecords: Int?
    /// Drop the link after sending this many records of every report (a link that always gives
    /// out part-way; never cleared).
    public var alwaysDisconnectAfterRecords: Int?

    /// No fault.
    public init(
        countNotSupported: Bool = false, reportNotSupported: Bool = false, noRecords: Bool = false,
        racpWriteErrors: [UInt8] = [], disconnectAfterRecords: Int? = nil, alwaysDisconnectAfterRecords: Int? = nil
    ) {
        self.alwaysDisconnectAfterRecords = alwaysDisconnectAfterRecords
        self.countNotSupported = countNotSupported
        self.reportNotSupported = reportNotSupported
        self.noRecords = noRecords
        self.racpWriteErrors = racpWriteErrors
        self.disconnectAfterRecords = disconnectAfterRecords
    }

    /// "Procedure already in progress" (ATT 0x80) for the next RACP write, once.
    public static let procedureAlreadyInProgressOnce = SimulatorFaults(racpWriteErrors: [0x80])
}

/// One stored record of a simulated meter: the packets a report sends for it, in order.
///
/// A normal record is a measurement and, optionally, its context. A record can also carry exactly
/// recorded bytes, malformed ones included (replayed captures), and packets with no sequence number
/// (a truncated measurement, an orphan context, a bad RACP indication) that travel with the record
/// before them.
public struct SimulatedRecord: Sendable, Hashable {
    /// Where a packet goes.
    public enum Packet: Sendable, Hashable {
        /// A Glucose Measurement (0x2A18) notification.
        case measurement([UInt8])
        /// A Glucose Measurement Context (0x2A34) notification.
        case context([UInt8])
        /// A RACP (0x2A52) indication sent among the records (a misbehaving meter).
        case racpIndication([UInt8])

        /// The packet's value as sent.
        public var bytes: [UInt8] {
            switch self {
            case .measurement(let bytes), .context(let bytes), .racpIndication(let bytes): bytes
            }
        }
    }

    /// Nil for packets that belong to no record (they are sent with the record before them).
    public var sequenceNumber: UInt16?
    /// The packets a report sends for it, in order.
    public var packets: [Packet]

    /// A record of exactly these packets (recorded bytes, malformed ones included).
    public init(sequenceNumber: UInt16?, packets: [Packet]) {
        self.sequenceNumber = sequenceNumber
        self.packets = packets
    }

    /// A record from codec values; the measurement's context-follows flag is set to match `context`.
    public init(_ measurement: GlucoseMeasurement, context: MeasurementContext? = nil) {
        var m = measurement
        m.contextFollows = context != nil
        var packets: [Packet] = [.measurement(m.encoded())]
        if var context {
            context.sequenceNumber = m.sequenceNumber
            packets.append(.context(context.encoded()))
        }
        self.init(sequenceNumber: m.sequenceNumber, packets: packets)
    }

    /// A stray packet with no record of its own.
    public static func stray(_ packet: Packet) -> SimulatedRecord {
        SimulatedRecord(sequenceNumber: nil, packets: [packet])
    }
}

/// A simulated meter's records, stored compactly: the packets' bytes back to back and a few
/// integers per record (about 30 bytes for a plain record instead of two heap arrays), so a
/// simulated meter of 100 000 records costs the process about 3 MB. Reads give
/// ``SimulatedRecord`` values; ``sequenceNumber(at:)`` reads a number without building one.
public struct SimulatedRecordList: RandomAccessCollection, Sendable, Hashable {
    /// Every packet's bytes, back to back.
    private var bytes: [UInt8] = []
    /// Per packet: where its bytes end in ``bytes``, and its kind (0 measurement, 1 context, 2 RACP).
    private var packetEnds: [UInt32] = []
    /// (See ``packetEnds``.)
    private var packetKinds: [UInt8] = []
    /// Per record: its first packet, and its sequence number (`UInt32.max`: none).
    private var firstPackets: [UInt32] = []
    /// (See ``firstPackets``.)
    private var numbers: [UInt32] = []

    /// An empty list.
    public init() {}

    /// A list of `records`, in order.
    public init<S: Sequence>(_ records: S) where S.Element == SimulatedRecord {
        self.init()
        for record in records { self.append(record) }
    }

    /// The first record's index, 0.
    public var startIndex: Int { 0 }
    /// The number of records.
    public var endIndex: Int { self.firstPackets.count }

    /// The record at `index`, built from the stored bytes.
    public subscript(index: Int) -> SimulatedRecord {
        SimulatedRecord(sequenceNumber: self.sequenceNumber(at: index), packets: self.packets(at: index))
    }

    /// The record's sequence number (nil for stray packets).
    public func sequenceNumber(at index: Int) -> UInt16? {
        let n = self.numbers[index]
        return n == UInt32.max ? nil : UInt16(n)
    }

    /// The record's packets, in order.
    public func packets(at index: Int) -> [SimulatedRecord.Packet] {
        let first = Int(self.firstPackets[index])
        let end = index + 1 < self.firstPackets.count ? Int(self.firstPackets[index + 1]) : self.packetEnds.count
        return (first..<end).map { p in
            let start = p == 0 ? 0 : Int(self.packetEnds[p - 1])
            let bytes = Array(self.bytes[start..<Int(self.packetEnds[p])])
            switch self.packetKinds[p] {
            case 0: return .measurement(bytes)
            case 1: return .context(bytes)
            default: return .racpIndication(bytes)
            }
        }
    }

    /// Stores a record after the others.
    public mutating func append(_ record: SimulatedRecord) {
        self.firstPackets.append(UInt32(self.packetEnds.count))
        self.numbers.append(record.sequenceNumber.map { UInt32($0) } ?? UInt32.max)
        for packet in record.packets {
            self.bytes += packet.bytes
            self.packetEnds.append(UInt32(self.bytes.count))
            switch packet {
            case .measurement: self.packetKinds.append(0)
            case .context: self.packetKinds.append(1)
            case .racpIndication: self.packetKinds.append(2)
            }
        }
    }

    /// Room for `records` more records of about `bytesPerRecord` bytes.
    public mutating func reserveCapacity(_ records: Int, bytesPerRecord: Int = 16) {
        self.firstPackets.reserveCapacity(self.firstPackets.count + records)
        self.numbers.reserveCapacity(self.numbers.count + records)
        self.packetEnds.reserveCapacity(self.packetEnds.count + records)
        self.packetKinds.reserveCapacity(self.packetKinds.count + records)
        self.bytes.reserveCapacity(self.bytes.count + records * bytesPerRecord)
    }
}
