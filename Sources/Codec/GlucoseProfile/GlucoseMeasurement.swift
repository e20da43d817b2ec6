/// The unit a meter sent a glucose concentration in, from Glucose Measurement flags bit 2 (GLS §2).
/// The one unit type: the codec decodes it, readings carry it, the store keeps its raw value.
public enum ConcentrationUnit: String, Hashable, Sendable, CaseIterable {
    /// kg/L (flag bit 2 clear); meters send mg/dL-scale values with exponent −5.
    case kilogramsPerLiter = "kg/L"
    /// mol/L (flag bit 2 set); meters send mmol/L-scale values with exponent −3.
    case molesPerLiter = "mol/L"

    /// `kg/L` or `mol/L` (the raw value).
    public var symbol: String { self.rawValue }
}

/// Molar mass of glucose in g/mol, used to convert between mg/dL and mmol/L.
public let glucoseMolarMass = 18.0156

/// The sample type: low nibble of the Type-Sample Location byte (GLS §2).
///
/// Names (stable, used in JSON): 1 `capillaryWholeBlood`, 2 `capillaryPlasma`, 3 `venousWholeBlood`,
/// 4 `venousPlasma`, 5 `arterialWholeBlood`, 6 `arterialPlasma`, 7 `undeterminedWholeBlood`,
/// 8 `undeterminedPlasma`, 9 `interstitialFluid`, 10 `controlSolution`; 0 and 11–15 `reserved`.
public struct SampleType: RawRepresentable, Hashable, Sendable {
    /// The nibble, 0–15.
    public let code: UInt8
    /// The nibble, 0–15.
    public var rawValue: UInt8 { self.code }

    /// Wraps a nibble; only the low 4 bits are kept.
    @inlinable public init(rawValue: UInt8) { self.code = rawValue & 0x0F }
    /// Wraps a nibble; only the low 4 bits are kept.
    @inlinable public init(code: UInt8) { self.init(rawValue: code) }

    /// 1: capillary whole blood.
    public static let capillaryWholeBlood = SampleType(code: 1)
    /// 2: capillary plasma.
    public static let capillaryPlasma = SampleType(code: 2)
    /// 3: venous whole blood.
    public static let venousWholeBlood = SampleType(code: 3)
    /// 4: venous plasma.
    public static let venousPlasma = SampleType(code: 4)
    /// 5: arterial whole blood.
    public static let arterialWholeBlood = SampleType(code: 5)
    /// 6: arterial plasma.
    public static let arterialPlasma = SampleType(code: 6)
    /// 7: undetermined whole blood.
    public static let undeterminedWholeBlood = SampleType(code: 7)
    /// 8: undetermined plasma.
    public static let undeterminedPlasma = SampleType(code: 8)
    /// 9: interstitial fluid (ISF).
    public static let interstitialFluid = SampleType(code: 9)
    /// 10: control solution: a test of the meter, not of a person.
    public static let controlSolution = SampleType(code: 10)

    /// The stable name listed in the type documentation.
    public var name: String {
        switch self.code {
        case 1: "capillaryWholeBlood"
        case 2: "capillaryPlasma"
        case 3: "venousWholeBlood"
        case 4: "venousPlasma"
        case 5: "arterialWholeBlood"
        case 6: "arterialPlasma"
        case 7: "undeterminedWholeBlood"
        case 8: "undeterminedPlasma"
        case 9: "interstitialFluid"
        case 10: "controlSolution"
        default: "reserved"
        }
    }

    /// True for type 10, a control-solution test.
    public var isControlSolution: Bool { self.code == 10 }
}

/// The sample location: high nibble of the Type-Sample Location byte (GLS §2).
///
/// Names: 1 `finger`, 2 `alternateSiteTest`, 3 `earlobe`, 4 `controlSolution`, 15 `notAvailable`;
/// 0 and 5–14 `reserved`.
public struct SampleLocation: RawRepresentable, Hashable, Sendable {
    /// The nibble, 0–15.
    public let code: UInt8
    /// The nibble, 0–15.
    public var rawValue: UInt8 { self.code }

    /// Wraps a nibble value 0–15 (not shifted); only the low 4 bits are kept.
    @inlinable public init(rawValue: UInt8) { self.code = rawValue & 0x0F }
    /// Wraps a nibble value 0–15 (not shifted); only the low 4 bits are kept.
    @inlinable public init(code: UInt8) { self.init(rawValue: code) }

    /// 1: finger.
    public static let finger = SampleLocation(code: 1)
    /// 2: alternate site test (AST): forearm, palm.
    public static let alternateSiteTest = SampleLocation(code: 2)
    /// 3: earlobe.
    public static let earlobe = SampleLocation(code: 3)
    /// 4: control solution: a test of the meter, not of a person.
    public static let controlSolution = SampleLocation(code: 4)
    /// 15: sample location value not available.
    public static let notAvailable = SampleLocation(code: 15)

    /// The stable name listed in the type documentation.
    public var name: String {
        switch self.code {
        case 1: "finger"
        case 2: "alternateSiteTest"
        case 3: "earlobe"
        case 4: "controlSolution"
        case 15: "notAvailable"
        default: "reserved"
        }
    }

    /// The name in the daemon's socket API and exports (`io.sugard.HealthDataSync`): ``name``,
    /// except that code 2 has always been `alternateSite` there.
    public var apiName: String { self.code == 2 ? "alternateSite" : self.name }

    /// True for location 4, a control-solution test.
    public var isControlSolution: Bool { self.code == 4 }
}

/// Sensor Status Annunciation (GLS §2): 12 defined bits, 12–15 reserved (kept, named `reserved12` …).
public struct SensorStatus: OptionSet, Hashable, Sendable {
    /// The 16 status bits as received.
    public let rawValue: UInt16
    /// Status from its bits (reserved bits kept).
    @inlinable public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// Bit 0: the device battery is low at the time of measurement.
    public static let deviceBatteryLow = SensorStatus(rawValue: 1 << 0)
    /// Bit 1: sensor malfunction or faulting at the time of measurement.
    public static let sensorMalfunction = SensorStatus(rawValue: 1 << 1)
    /// Bit 2: the sample size was insufficient.
    public static let sampleSizeInsufficient = SensorStatus(rawValue: 1 << 2)
    /// Bit 3: strip insertion error.
    public static let stripInsertionError = SensorStatus(rawValue: 1 << 3)
    /// Bit 4: the strip type is incorrect for the device.
    public static let stripTypeIncorrect = SensorStatus(rawValue: 1 << 4)
    /// HI: the result is higher than the device can process.
    public static let resultTooHigh = SensorStatus(rawValue: 1 << 5)
    /// LO: the result is lower than the device can process.
    public static let resultTooLow = SensorStatus(rawValue: 1 << 6)
    /// Bit 7: the sensor temperature was too high for a valid test.
    public static let sensorTemperatureTooHigh = SensorStatus(rawValue: 1 << 7)
    /// Bit 8: the sensor temperature was too low for a valid test.
    public static let sensorTemperatureTooLow = SensorStatus(rawValue: 1 << 8)
    /// The strip was pulled too soon.
    public static let sensorReadInterrupted = SensorStatus(rawValue: 1 << 9)
    /// Bit 10: a general device fault occurred in the sensor.
    public static let generalDeviceFault = SensorStatus(rawValue: 1 << 10)
    /// The time may be inaccurate.
    public static let timeFault = SensorStatus(rawValue: 1 << 11)

    /// Bit names in bit order, index = bit number.
    public static let bitNames: [String] = [
        "deviceBatteryLow", "sensorMalfunction", "sampleSizeInsufficient", "stripInsertionError",
        "stripTypeIncorrect", "resultTooHigh", "resultTooLow", "sensorTemperatureTooHigh",
        "sensorTemperatureTooLow", "sensorReadInterrupted", "generalDeviceFault", "timeFault",
        "reserved12", "reserved13", "reserved14", "reserved15",
    ]

    /// Names of the set bits, lowest bit first.
    public var names: [String] { setBitNames(UInt64(self.rawValue), Self.bitNames) }
}

/// A Glucose Measurement (0x2A18) record (GLS §2).
///
/// Decoding reads the fields its flags announce, in spec order. Reserved flag bits 5–7 are tolerated and
/// kept in `reservedFlags`. The concentration stays an SFLOAT with its unit; `mgdL` and `mmolL` derive
/// the usual clinical values with decimal arithmetic.
public struct GlucoseMeasurement: Hashable, Sendable {
    /// Flags bit 0: Time Offset present.
    public static let timeOffsetPresentFlag: UInt8 = 0x01
    /// Flags bit 1: concentration, type and sample location present.
    public static let concentrationPresentFlag: UInt8 = 0x02
    /// Flags bit 2: concentration in mol/L (clear: kg/L).
    public static let molesPerLiterFlag: UInt8 = 0x04
    /// Flags bit 3: Sensor Status Annunciation present.
    public static let sensorStatusPresentFlag: UInt8 = 0x08
    /// Flags bit 4: a context (0x2A34) with the same sequence number follows.
    public static let contextFollowsFlag: UInt8 = 0x10
    /// Flags bits 5–7, reserved.
    public static let reservedFlagMask: UInt8 = 0xE0
    /// Smallest valid packet (flags, sequence number, base time).
    public static let minimumByteCount = 10
    /// Largest valid packet.
    public static let maximumByteCount = 17

    /// Reserved flag bits 5–7 as received (masked; 0 for a conforming meter).
    public var reservedFlags: UInt8
    /// Record number assigned by the meter.
    public var sequenceNumber: UInt16
    /// Base Time as received (see `userFacingTime`).
    public var baseTime: DateTime
    /// Time Offset in minutes, or nil when absent.
    public var timeOffsetMinutes: Int16?
    /// Concentration, or nil when flags bit 1 is clear.
    public var concentration: SFloat?
    /// Concentration unit from flags bit 2. Nil when there is no concentration and bit 2 is clear; a stray
    /// bit 2 without a concentration decodes as `.molesPerLiter` so the record re-encodes unchanged.
    public var unit: ConcentrationUnit?
    /// Sample type (low nibble); present exactly when `concentration` is.
    public var type: SampleType?
    /// Sample location (high nibble); present exactly when `concentration` is.
    public var sampleLocation: SampleLocation?
    /// Sensor Status Annunciation, or nil when absent.
    public var sensorStatus: SensorStatus?
    /// Flags bit 4: a Measurement Context with the same sequence number follows.
    public var contextFollows: Bool

    /// Builds a record. Flags are derived from which fields are set.
    ///
    /// A concentration with no unit encodes as kg/L; with no type or location, those nibbles encode as 0.
    public init(
        sequenceNumber: UInt16, baseTime: DateTime, timeOffsetMinutes: Int16? = nil, concentration: SFloat? = nil,
        unit: ConcentrationUnit? = nil, type: SampleType? = nil, sampleLocation: SampleLocation? = nil,
        sensorStatus: SensorStatus? = nil, contextFollows: Bool = false, reservedFlags: UInt8 = 0
    ) {
        self.reservedFlags = reservedFlags & Self.reservedFlagMask
        self.sequenceNumber = sequenceNumber
        self.baseTime = baseTime
        self.timeOffsetMinutes = timeOffsetMinutes
        self.concentration = concentration
        self.unit = concentration != nil && unit == nil ? .kilogramsPerLiter : unit
        self.type = concentration != nil && type == nil ? SampleType(code: 0) : type
        self.sampleLocation = concentration != nil && sampleLocation == nil ? SampleLocation(code: 0) : sampleLocation
        self.sensorStatus = sensorStatus
        self.contextFollows = contextFollows
    }

    /// Decodes one record from `reader`, leaving any later bytes unread.
    /// - Parameter options: `.lenientDateTime` keeps an out-of-range Base Time (i-SENS month 13).
    /// - Throws: `.truncated` naming the first incomplete field group, `.outOfRange` for a bad Base Time.
    ///
    /// Inlinable: the good path (one length check for the packet's shape, unaligned loads) compiles into
    /// the caller's loop like a C parser would.
    @inlinable
    public init(parsing reader: inout ByteReader, options: GlucoseParsingOptions = []) throws(GlucoseProfileError) {
        let validate = options.rawValue & 1 == 0  // not .lenientDateTime
        let start = reader.readerIndex
        let available = reader.endIndex - start
        let decoded: (GlucoseMeasurement, Int)? = reader.bytes.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return nil }
            return Self.decodeWholeShape(UnsafeRawBufferPointer(start: base + start, count: available), validate: validate)
        }
        if let (value, used) = decoded {
            reader.skipDecoded(used)
            self = value
            return
        }
        // Something is wrong with the packet (or it is short): the field-by-field reads name the field and
        // its byte offset. The fast path accepts nothing they reject.
        try self.init(fieldByField: &reader, options: options)
    }

    /// The good path: one length check for the packet's shape, unaligned loads, no error values. Nil when
    /// the packet is short or its base time is out of range (and `validate` is set).
    @inlinable @inline(__always)
    static func decodeWholeShape(_ raw: UnsafeRawBufferPointer, validate: Bool) -> (GlucoseMeasurement, Int)? {
        // Literal masks: the static constants are not visible to inlined code as constants.
        guard raw.count >= 10, let base = raw.baseAddress else { return nil }
        let flags = base.load(as: UInt8.self)
        let hasOffset = flags & 0x01 != 0
        let hasConcentration = flags & 0x02 != 0
        let hasStatus = flags & 0x08 != 0
        let length = 10 + (hasOffset ? 2 : 0) + (hasConcentration ? 3 : 0) + (hasStatus ? 2 : 0)
        guard raw.count >= length else { return nil }
        let year = UInt16(littleEndian: base.loadUnaligned(fromByteOffset: 3, as: UInt16.self))
        let month = base.load(fromByteOffset: 5, as: UInt8.self)
        let day = base.load(fromByteOffset: 6, as: UInt8.self)
        let hours = base.load(fromByteOffset: 7, as: UInt8.self)
        let minutes = base.load(fromByteOffset: 8, as: UInt8.self)
        let seconds = base.load(fromByteOffset: 9, as: UInt8.self)
        if validate {
            guard year == 0 || (year >= 1582 && year <= 9999), month <= 12, hours <= 23, minutes <= 59, seconds <= 59
            else { return nil }
            if day > 28 {
                guard day <= (month == 0 ? 31 : CivilCalendar.daysInMonth(year: Int(year), month: Int(month))) else { return nil }
            }
        }
        var position = 10
        var offset: Int16? = nil
        if hasOffset {
            offset = Int16(littleEndian: base.loadUnaligned(fromByteOffset: position, as: Int16.self))
            position += 2
        }
        var concentration: SFloat? = nil
        var type: SampleType? = nil
        var location: SampleLocation? = nil
        let molar = flags & 0x04 != 0
        var unit: ConcentrationUnit? = molar ? .molesPerLiter : nil
        if hasConcentration {
            concentration = SFloat(rawValue: UInt16(littleEndian: base.loadUnaligned(fromByteOffset: position, as: UInt16.self)))
            let typeLocation = base.load(fromByteOffset: position + 2, as: UInt8.self)
            type = SampleType(code: typeLocation & 0x0F)
            location = SampleLocation(code: typeLocation >> 4)
            if !molar { unit = .kilogramsPerLiter }
            position += 3
        }
        var status: SensorStatus? = nil
        if hasStatus {
            status = SensorStatus(rawValue: UInt16(littleEndian: base.loadUnaligned(fromByteOffset: position, as: UInt16.self)))
        }
        let measurement = GlucoseMeasurement(
            reservedFlags: flags & 0xE0,
            sequenceNumber: UInt16(littleEndian: base.loadUnaligned(fromByteOffset: 1, as: UInt16.self)),
            baseTime: DateTime(year: year, month: month, day: day, hours: hours, minutes: minutes, seconds: seconds),
            timeOffsetMinutes: offset, concentration: concentration, unit: unit, type: type, sampleLocation: location,
            sensorStatus: status, contextFollows: flags & 0x10 != 0)
        return (measurement, length)
    }

    /// Every field as given (the decoder's constructor).
    @inlinable @inline(__always)
    init(
        reservedFlags: UInt8, sequenceNumber: UInt16, baseTime: DateTime, timeOffsetMinutes: Int16?, concentration: SFloat?,
        unit: ConcentrationUnit?, type: SampleType?, sampleLocation: SampleLocation?, sensorStatus: SensorStatus?,
        contextFollows: Bool
    ) {
        self.reservedFlags = reservedFlags
        self.sequenceNumber = sequenceNumber
        self.baseTime = baseTime
        self.timeOffsetMinutes = timeOffsetMinutes
        self.concentration = concentration
        self.unit = unit
        self.type = type
        self.sampleLocation = sampleLocation
        self.sensorStatus = sensorStatus
        self.contextFollows = contextFollows
    }

    /// The field-by-field decoder: the reference for the fast path, and the one that names errors.
    @usableFromInline
    init(fieldByField reader: inout ByteReader, options: GlucoseParsingOptions) throws(GlucoseProfileError) {
        let flags = try reader.readUInt8(field: "flags")
        try reader.require(2, for: "sequenceNumber")
        self.sequenceNumber = try reader.readUInt16LE(field: "sequenceNumber")
        self.baseTime = try reader.readDateTime(field: "baseTime", validate: !options.contains(.lenientDateTime))
        self.reservedFlags = flags & Self.reservedFlagMask
        self.contextFollows = flags & Self.contextFollowsFlag != 0

        if flags & Self.timeOffsetPresentFlag != 0 {
            self.timeOffsetMinutes = try reader.readInt16LE(field: "timeOffset")
        } else {
            self.timeOffsetMinutes = nil
        }
        let molar = flags & 0x04 != 0
        if flags & Self.concentrationPresentFlag != 0 {
            // The concentration and its type-location byte are one group: a packet with either half
            // missing is truncated "in the concentration".
            try reader.require(3, for: "concentration")
            self.concentration = try reader.readSFloat(field: "concentration")
            let typeLocation = try reader.readUInt8(field: "concentration")
            self.type = SampleType(code: typeLocation & 0x0F)
            self.sampleLocation = SampleLocation(code: typeLocation >> 4)
            self.unit = molar ? .molesPerLiter : .kilogramsPerLiter
        } else {
            self.concentration = nil
            self.type = nil
            self.sampleLocation = nil
            self.unit = molar ? .molesPerLiter : nil
        }
        if flags & Self.sensorStatusPresentFlag != 0 {
            self.sensorStatus = SensorStatus(rawValue: try reader.readUInt16LE(field: "sensorStatus"))
        } else {
            self.sensorStatus = nil
        }
    }

    /// Decodes exactly one record; bytes after the last announced field are an error.
    public init(bytes: [UInt8], options: GlucoseParsingOptions = []) throws(GlucoseProfileError) {
        var reader = ByteReader(bytes)
        try self.init(parsing: &reader, options: options)
        try reader.expectEnd(of: "measurement")
    }

    /// The flags byte this record encodes with, reserved bits included.
    public var flags: UInt8 {
        var flags = self.reservedFlags & Self.reservedFlagMask
        if self.timeOffsetMinutes != nil { flags |= Self.timeOffsetPresentFlag }
        if self.concentration != nil { flags |= Self.concentrationPresentFlag }
        if self.unit == .molesPerLiter { flags |= Self.molesPerLiterFlag }
        if self.sensorStatus != nil { flags |= Self.sensorStatusPresentFlag }
        if self.contextFollows { flags |= Self.contextFollowsFlag }
        return flags
    }

    /// Appends the wire encoding to `writer`.
    public func serialize(into writer: inout ByteWriter) {
        writer.writeUInt8(self.flags)
        writer.writeUInt16LE(self.sequenceNumber)
        writer.writeDateTime(self.baseTime)
        if let offset = self.timeOffsetMinutes { writer.writeInt16LE(offset) }
        if let concentration = self.concentration {
            writer.writeSFloat(concentration)
            writer.writeUInt8((self.type?.code ?? 0) & 0x0F | (self.sampleLocation?.code ?? 0) << 4)
        }
        if let status = self.sensorStatus { writer.writeUInt16LE(status.rawValue) }
    }

    /// The wire encoding (10–17 bytes).
    public func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: Self.maximumByteCount)
        self.serialize(into: &writer)
        return writer.bytes
    }

    /// Base Time + Time Offset (Base Time alone when there is no offset).
    ///
    /// Nil when the base date has unknown (zero) or out-of-range fields, when the offset is the old
    /// overrun/underrun marker 0x7FFF/0x8000, or when the result leaves years 1582–9999.
    public var userFacingTime: DateTime? {
        let offset = self.timeOffsetMinutes ?? 0
        guard offset != Int16.max, offset != Int16.min else { return nil }
        return self.baseTime.adding(minutes: Int(offset))
    }

    /// True when the type or the location marks a control-solution test (either one suffices).
    public var isControlSolution: Bool {
        (self.type?.isControlSolution ?? false) || (self.sampleLocation?.isControlSolution ?? false)
    }

    /// Concentration in mg/dL: kg/L × 100 000, or mol/L × 1000 × 18.0156. Nil without a number.
    public var mgdL: Double? {
        guard let concentration = self.concentration, let unit = self.unit else { return nil }
        switch unit {
        case .kilogramsPerLiter: return concentration.value(shiftingExponentBy: 5)
        case .molesPerLiter: return concentration.value(shiftingExponentBy: 3).map { $0 * glucoseMolarMass }
        }
    }

    /// Concentration in mmol/L: mol/L × 1000, or kg/L × 100 000 ÷ 18.0156. Nil without a number.
    public var mmolL: Double? {
        guard let concentration = self.concentration, let unit = self.unit else { return nil }
        switch unit {
        case .kilogramsPerLiter: return concentration.value(shiftingExponentBy: 5).map { $0 / glucoseMolarMass }
        case .molesPerLiter: return concentration.value(shiftingExponentBy: 3)
        }
    }
}

func setBitNames(_ bits: UInt64, _ names: [String]) -> [String] {
    var result: [String] = []
    for bit in 0..<names.count where bits & (1 << UInt64(bit)) != 0 { result.append(names[bit]) }
    return result
}

extension GlucoseMeasurement: GlucoseProfileEncodable {}
