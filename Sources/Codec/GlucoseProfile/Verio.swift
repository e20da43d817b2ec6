/// The OneTouch Verio vendor protocol over BLE (Verio Flex, Verio Reflect): packet framing, CRC, the four
/// commands a download uses and the replies to them. Pure; the sync engine drives it.
///
/// The protocol as relied on (sources: xDrip+ `VerioHelper.java`, glucometer-protocols' LifeScan pages) is
/// written down in `docs/verio-protocol.md`. In short: a packet is
/// `01 | 02 L 00 03 body 03 crcLo crcHi`, where `L` counts STX through the CRC and the CRC is
/// CRC-16/CCITT-FALSE over STX…ETX. A reply body starts with a status byte (0x06 data, 0x07 not allowed,
/// 0x08 not supported, 0x09 not understood). Single `0x81` bytes are acknowledgements, outside the framing.
public enum Verio {
    /// The Verio service `af9df7a1-e595-11e3-96b4-0002a5d5c51b`.
    public static let service = BluetoothUUID(high: 0xAF9D_F7A1_E595_11E3, low: 0x96B4_0002_A5D5_C51B)
    /// The command characteristic `af9df7a2-…` (write).
    public static let commandCharacteristic = BluetoothUUID(high: 0xAF9D_F7A2_E595_11E3, low: 0x96B4_0002_A5D5_C51B)
    /// The reply characteristic `af9df7a3-…` (notify).
    public static let replyCharacteristic = BluetoothUUID(high: 0xAF9D_F7A3_E595_11E3, low: 0x96B4_0002_A5D5_C51B)

    /// The acknowledgement the host writes after each data reply.
    public static let acknowledgement: [UInt8] = [0x81]
    /// The meter's clock counts seconds from 2000-01-01 00:00:00 (local wall-clock time); this is that
    /// instant read as UTC, in seconds since 1970.
    public static let clockEpoch: Int64 = 946_684_800

    /// The first byte of every frame.
    static let linkByte: UInt8 = 0x01
    /// STX: starts the frame's header.
    static let stx: UInt8 = 0x02
    /// ETX: ends the body, before the CRC.
    static let etx: UInt8 = 0x03
    /// Link byte, STX, length, 0x00, 0x03 before the body; ETX and two CRC bytes after it.
    static let overhead = 8

    /// CRC-16/CCITT-FALSE (polynomial 0x1021, initial 0xFFFF, no reflection, no final XOR).
    public static func crc16(_ bytes: some Sequence<UInt8>) -> UInt16 {
        var crc: UInt16 = 0xFFFF
        for byte in bytes {
            crc ^= UInt16(byte) << 8
            for _ in 0..<8 {
                crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1
            }
        }
        return crc
    }

    /// Frames `body` into one packet: link byte, STX, length, 0x00, 0x03, body, ETX, CRC (LE).
    /// - Precondition: the body fits the one-byte length (at most 248 bytes).
    public static func frame(_ body: [UInt8]) -> [UInt8] {
        precondition(body.count + overhead - 1 <= 0xFF, "Verio body too long")
        var packet: [UInt8] = [linkByte, stx, UInt8(body.count + overhead - 1), 0x00, 0x03]
        packet.reserveCapacity(body.count + overhead)
        packet.append(contentsOf: body)
        packet.append(etx)
        let crc = crc16(packet[1...])
        packet.append(UInt8(truncatingIfNeeded: crc))
        packet.append(UInt8(truncatingIfNeeded: crc >> 8))
        return packet
    }

    /// The body of one framed packet, after checking the link byte, STX, length, the 0x00 0x03 prefix,
    /// ETX and the CRC. Errors name the field and its offset like every Glucose Profile error.
    public static func unframe(_ packet: [UInt8]) throws(GlucoseProfileError) -> [UInt8] {
        var reader = ByteReader(packet)
        try reader.require(overhead, for: "verioPacket")
        try expect(&reader, linkByte, field: "linkByte")
        try expect(&reader, stx, field: "stx")
        let length = Int(try reader.readUInt8(field: "length"))
        guard length == packet.count - 1 else {
            throw GlucoseProfileError(
                offset: 2, field: "length", reason: .invalidValue(value: length, expected: "\(packet.count - 1) (bytes from STX through the CRC)"))
        }
        try expect(&reader, 0x00, field: "reserved")
        try expect(&reader, 0x03, field: "bodyStart")
        let body = try reader.readBytes(count: packet.count - overhead, field: "body")
        try expect(&reader, etx, field: "etx")
        let received = try reader.readUInt16LE(field: "crc")
        let computed = crc16(packet[1..<(packet.count - 2)])
        guard received == computed else {
            throw GlucoseProfileError(
                offset: packet.count - 2, field: "crc", reason: .invalidValue(value: Int(received), expected: hexByte(Int(computed))))
        }
        return body
    }

    /// Reads one byte that must be `value`; throws `invalidValue` naming `field` otherwise.
    private static func expect(_ reader: inout ByteReader, _ value: UInt8, field: String) throws(GlucoseProfileError) {
        let offset = reader.offset
        let byte = try reader.readUInt8(field: field)
        guard byte == value else {
            throw GlucoseProfileError(offset: offset, field: field, reason: .invalidValue(value: Int(byte), expected: hexByte(Int(value))))
        }
    }

    /// The meter's local wall-clock time for `seconds` since its epoch.
    public static func dateTime(meterSeconds seconds: UInt32) -> DateTime {
        let civil = CivilCalendar.civil(secondsSinceEpoch: clockEpoch + Int64(seconds))
        return DateTime(
            year: UInt16(civil.year), month: UInt8(civil.month), day: UInt8(civil.day),
            hours: UInt8(civil.hour), minutes: UInt8(civil.minute), seconds: UInt8(civil.second))
    }

    /// Seconds since the meter's epoch for a known, valid wall-clock time; nil for an unknown date or a
    /// time before 2000 or beyond the 32-bit counter.
    public static func meterSeconds(_ time: DateTime) -> UInt32? {
        guard time.isDateKnown, time.isValid else { return nil }
        let seconds = CivilCalendar.secondsSinceEpoch(
            year: Int(time.year), month: Int(time.month), day: Int(time.day),
            hour: Int(time.hours), minute: Int(time.minutes), second: Int(time.seconds)) - clockEpoch
        return UInt32(exactly: seconds)
    }
}

/// A host → meter command.
public enum VerioCommand: Hashable, Sendable {
    /// `20 02`: the meter clock (uint32 LE seconds since 2000-01-01 00:00:00, local).
    case readClock
    /// `27 00`: the number of the newest record (uint32 LE).
    case highestRecordNumber
    /// `0a 02 06`: how many records the meter holds (uint16 LE).
    case recordCount
    /// `b3 nn nn`: one record by its number (an 11-byte ``VerioRecord``).
    case record(number: UInt16)

    /// The command bytes inside the frame.
    public var body: [UInt8] {
        switch self {
        case .readClock: [0x20, 0x02]
        case .highestRecordNumber: [0x27, 0x00]
        case .recordCount: [0x0A, 0x02, 0x06]
        case .record(let number): [0xB3, UInt8(truncatingIfNeeded: number), UInt8(truncatingIfNeeded: number >> 8)]
        }
    }

    /// The whole packet to write to the command characteristic.
    public func encoded() -> [UInt8] { Verio.frame(self.body) }

    /// Decodes a command packet (what a simulated meter receives).
    /// Throws for a bad frame (see ``Verio/unframe(_:)``) or a body that is none of the four commands.
    public init(bytes: [UInt8]) throws(GlucoseProfileError) {
        let body = try Verio.unframe(bytes)
        switch body {
        case [0x20, 0x02]: self = .readClock
        case [0x27, 0x00]: self = .highestRecordNumber
        case [0x0A, 0x02, 0x06]: self = .recordCount
        case _ where body.count == 3 && body[0] == 0xB3:
            self = .record(number: UInt16(body[1]) | UInt16(body[2]) << 8)
        default:
            throw GlucoseProfileError(
                offset: 5, field: "command", reason: .invalidValue(value: Int(body.first ?? 0), expected: "20 02, 27 00, 0a 02 06 or b3 nn nn"))
        }
    }

    /// Name for logs and errors.
    public var name: String {
        switch self {
        case .readClock: "readClock"
        case .highestRecordNumber: "highestRecordNumber"
        case .recordCount: "recordCount"
        case .record(let number): "record \(number)"
        }
    }

    /// The typed answer to this command from a data reply's payload; throws when the payload does not
    /// have this command's size. Replies carry no command code, so the caller pairs them with what it sent.
    public func answer(payload: [UInt8]) throws(GlucoseProfileError) -> VerioAnswer {
        var reader = ByteReader(payload)
        let answer: VerioAnswer
        switch self {
        case .readClock:
            try reader.require(4, for: "clock")
            answer = .clock(meterSeconds: try Self.readUInt32LE(&reader, field: "clock"))
        case .highestRecordNumber:
            try reader.require(4, for: "highestRecordNumber")
            answer = .highestRecordNumber(try Self.readUInt32LE(&reader, field: "highestRecordNumber"))
        case .recordCount:
            answer = .recordCount(try reader.readUInt16LE(field: "recordCount"))
        case .record(let number):
            answer = .record(number: number, try VerioRecord(parsing: &reader))
        }
        try reader.expectEnd(of: "\(self.name) reply")
        return answer
    }

    /// A uint32 sent as two uint16 LE halves, low half first.
    static func readUInt32LE(_ reader: inout ByteReader, field: String) throws(GlucoseProfileError) -> UInt32 {
        let low = UInt32(try reader.readUInt16LE(field: field))
        let high = UInt32(try reader.readUInt16LE(field: field))
        return low | high << 16
    }
}

/// What a data reply says, read for the command it answers.
public enum VerioAnswer: Hashable, Sendable {
    /// The meter clock in seconds since 2000-01-01 00:00:00 (local wall-clock time).
    case clock(meterSeconds: UInt32)
    /// The number of the newest record.
    case highestRecordNumber(UInt32)
    /// How many records the meter holds.
    case recordCount(UInt16)
    /// The record asked for, with its number.
    case record(number: UInt16, VerioRecord)

    /// The payload bytes (the simulated meter's side).
    public func payload() -> [UInt8] {
        var writer = ByteWriter(capacity: VerioRecord.byteCount)
        switch self {
        case .clock(let seconds), .highestRecordNumber(let seconds):
            writer.writeUInt16LE(UInt16(truncatingIfNeeded: seconds))
            writer.writeUInt16LE(UInt16(truncatingIfNeeded: seconds >> 16))
        case .recordCount(let count):
            writer.writeUInt16LE(count)
        case .record(_, let record):
            return record.encoded()
        }
        return writer.bytes
    }
}

/// The status byte that starts a reply body.
public struct VerioStatus: RawRepresentable, Hashable, Sendable {
    /// The status byte.
    public let rawValue: UInt8
    /// The status with this byte (any value).
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// 0x06: data follows.
    public static let data = VerioStatus(rawValue: 0x06)
    /// 0x07: command not allowed (the meter is not bonded to this host).
    public static let notAllowed = VerioStatus(rawValue: 0x07)
    /// 0x08: command not supported.
    public static let notSupported = VerioStatus(rawValue: 0x08)
    /// 0x09: command not understood.
    public static let notUnderstood = VerioStatus(rawValue: 0x09)

    /// The stable name of the status; `unknown` for other bytes.
    public var name: String {
        switch self.rawValue {
        case 0x06: "data"
        case 0x07: "notAllowed"
        case 0x08: "notSupported"
        case 0x09: "notUnderstood"
        default: "unknown"
        }
    }
}

/// One notification from the reply characteristic.
public enum VerioReply: Hashable, Sendable {
    /// A one-byte acknowledgement (bits 0x81 set).
    case acknowledgement
    /// Status 0x06 and the payload that follows it.
    case data([UInt8])
    /// Any other status (not allowed, not supported, not understood, unknown).
    case refused(VerioStatus)

    /// Decodes one notification.
    /// Throws for a one-byte packet without bits 0x81, a bad frame, an empty body, or a refusal
    /// with bytes after its status.
    public init(bytes: [UInt8]) throws(GlucoseProfileError) {
        if bytes.count == 1 {
            guard bytes[0] & 0x81 == 0x81 else {
                throw GlucoseProfileError(offset: 0, field: "acknowledgement", reason: .invalidValue(value: Int(bytes[0]), expected: "bits 0x81 set"))
            }
            self = .acknowledgement
            return
        }
        let body = try Verio.unframe(bytes)
        guard let status = body.first else {
            throw GlucoseProfileError(offset: 5, field: "status", reason: .truncated(needed: 1, available: 0))
        }
        if status == VerioStatus.data.rawValue {
            self = .data(Array(body.dropFirst()))
        } else {
            // Refusals carry no payload; bytes after the status are not guessed at.
            guard body.count == 1 else {
                throw GlucoseProfileError(offset: 6, field: "refusal", reason: .trailingBytes(count: body.count - 1))
            }
            self = .refused(VerioStatus(rawValue: status))
        }
    }

    /// The notification bytes (the simulated meter's side).
    public func encoded() -> [UInt8] {
        switch self {
        case .acknowledgement: Verio.acknowledgement
        case .data(let payload): Verio.frame([VerioStatus.data.rawValue] + payload)
        case .refused(let status): Verio.frame([status.rawValue])
        }
    }
}

/// One stored record (the 11-byte payload of a `record` reply).
public struct VerioRecord: Hashable, Sendable {
    /// Number of payload bytes.
    public static let byteCount = 11

    /// Seconds since 2000-01-01 00:00:00, meter local time.
    public var meterSeconds: UInt32
    /// The glucose value in mg/dL.
    public var mgdL: UInt16
    /// Bytes 6–10: all zero for a blood-glucose result; their meaning is not described.
    public var trailer: [UInt8]

    /// Creates a record; `trailer` defaults to the five zero bytes of a blood-glucose result.
    public init(meterSeconds: UInt32, mgdL: UInt16, trailer: [UInt8] = [0, 0, 0, 0, 0]) {
        self.meterSeconds = meterSeconds
        self.mgdL = mgdL
        self.trailer = trailer
    }

    /// Decodes the 11 bytes at the reader.
    /// Throws `truncated` when fewer than 11 bytes are left.
    public init(parsing reader: inout ByteReader) throws(GlucoseProfileError) {
        try reader.require(Self.byteCount, for: "record")
        self.meterSeconds = try VerioCommand.readUInt32LE(&reader, field: "time")
        self.mgdL = try reader.readUInt16LE(field: "glucose")
        self.trailer = try reader.readBytes(count: 5, field: "trailer")
    }

    /// True when bytes 6–10 are zero: a blood-glucose result (anything else is not read as glucose).
    public var isBloodGlucose: Bool { self.trailer.allSatisfy { $0 == 0 } }

    /// The values the meter measures, in mg/dL: a result below is LO, above is HI. Source: Tidepool
    /// uploader `oneTouchVerioBLE.js` (values above 600 are "high" and below 20 "low", annotated
    /// `bg/out-of-range`); the meter sends no other HI/LO marker over BLE.
    public static let measuringRange: ClosedRange<UInt16> = 20...600

    /// What a record's value means.
    public enum Meaning: String, Hashable, Sendable {
        /// A blood-glucose result within ``VerioRecord/measuringRange``.
        case glucose
        /// Below the measuring range (1–19 mg/dL): LO, never a number.
        case lo
        /// Above the measuring range (601 mg/dL and more): HI, never a number.
        case hi
        /// 0 mg/dL: no result (Tidepool reads it as "not a valid reading").
        case noValue
        /// Bytes 6–10 not zero: not a blood-glucose result (``VerioRecord/isBloodGlucose``).
        case notBloodGlucose
    }

    /// The record's meaning, decided from its bytes alone.
    public var meaning: Meaning {
        guard self.isBloodGlucose else { return .notBloodGlucose }
        if self.mgdL == 0 { return .noValue }
        if self.mgdL < Self.measuringRange.lowerBound { return .lo }
        if self.mgdL > Self.measuringRange.upperBound { return .hi }
        return .glucose
    }

    /// The record as a Glucose Measurement, so it is stored and read like a GLS record: the record
    /// number as sequence number, the meter's local time as Base Time (no offset), mg/dL as kg/L
    /// × 10⁻⁵ (SFLOAT exponent −5). HI is +INF with status bit 5 (result too high), LO −INF with bit 6
    /// (result too low), no value NaN: exactly what a GLS meter sends for them. Use it for blood-glucose
    /// records only (``isBloodGlucose``).
    public func measurement(sequenceNumber: UInt16) -> GlucoseMeasurement {
        let concentration: SFloat
        var status: SensorStatus?
        switch self.meaning {
        case .hi:
            concentration = .positiveInfinity
            status = .resultTooHigh
        case .lo:
            concentration = .negativeInfinity
            status = .resultTooLow
        case .noValue, .notBloodGlucose:
            concentration = .nan
        case .glucose:
            concentration = SFloat(rawValue: 0xB000 | self.mgdL)
        }
        return GlucoseMeasurement(
            sequenceNumber: sequenceNumber, baseTime: self.dateTime, concentration: concentration,
            unit: .kilogramsPerLiter, sensorStatus: status)
    }

    /// The meter's local wall-clock time of the record.
    public var dateTime: DateTime { Verio.dateTime(meterSeconds: self.meterSeconds) }

    /// The 11 payload bytes.
    public func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: Self.byteCount)
        writer.writeUInt16LE(UInt16(truncatingIfNeeded: self.meterSeconds))
        writer.writeUInt16LE(UInt16(truncatingIfNeeded: self.meterSeconds >> 16))
        writer.writeUInt16LE(self.mgdL)
        writer.writeBytes(self.trailer)
        return writer.bytes
    }
}

/// The i-SENS CareSens vendor time value (service 0xFFF0, characteristic 0xFFF1, write), 11 bytes:
/// `c0 03 01 00`, year uint16 LE, month, day, hours, minutes, seconds (local time). Source: xDrip+
/// `caresens/TimeTx.java`; see `docs/verio-protocol.md` "Setting a meter's clock".
public struct ISensTime: Hashable, Sendable {
    /// Number of bytes on the wire.
    public static let byteCount = 11
    /// The four bytes before the date-time.
    static let prefix: [UInt8] = [0xC0, 0x03, 0x01, 0x00]

    /// The local time to set.
    public var dateTime: DateTime

    /// A value setting the meter's clock to `dateTime`.
    public init(dateTime: DateTime) { self.dateTime = dateTime }

    /// Decodes the 11-byte value (what a simulated meter receives), validating the date-time.
    /// Throws `truncated` for fewer than 11 bytes, `invalidValue` for another prefix than
    /// `c0 03 01 00`, `outOfRange` for an invalid date-time, `trailingBytes` for more.
    public init(bytes: [UInt8]) throws(GlucoseProfileError) {
        var reader = ByteReader(bytes)
        try reader.require(Self.byteCount, for: "isensTime")
        let prefix = try reader.readBytes(count: 4, field: "command")
        guard prefix == Self.prefix else {
            throw GlucoseProfileError(offset: 0, field: "command", reason: .invalidValue(value: Int(prefix[0]), expected: "c0 03 01 00"))
        }
        self.dateTime = try reader.readDateTime(field: "dateTime")
        try reader.expectEnd(of: "i-SENS time")
    }

    /// The 11-byte encoding.
    public func encoded() -> [UInt8] {
        var writer = ByteWriter(appendingTo: Self.prefix)
        writer.writeDateTime(self.dateTime)
        return writer.bytes
    }
}

/// The i-SENS vendor UUIDs, used to set a CareSens meter's clock.
extension BluetoothUUID {
    /// i-SENS CareSens vendor service carrying the time characteristic (0xFFF0).
    public static let isensTimeService = BluetoothUUID(0xFFF0)
    /// i-SENS CareSens vendor time characteristic (0xFFF1, write): an ``ISensTime`` value.
    public static let isensTime = BluetoothUUID(0xFFF1)
}
