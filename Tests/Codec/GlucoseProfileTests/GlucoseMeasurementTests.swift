import GlucoseProfile
import JSON
import SugarWire
import Testing

@Suite struct GlucoseMeasurementTests {
    @Test func decodesTheAccuChekStyleRecord() throws {
        let m = try GlucoseMeasurement(bytes: SpecExamples.accuChekStyle)
        #expect(m.flags == 0x1B)
        #expect(m.reservedFlags == 0)
        #expect(m.sequenceNumber == 4)
        #expect(m.baseTime == DateTime(year: 2019, month: 2, day: 27, hours: 11, minutes: 10, seconds: 30))
        #expect(m.timeOffsetMinutes == 60)
        #expect(m.userFacingTime?.isoString == "2019-02-27T12:10:30")
        #expect(m.concentration?.rawValue == 0xB058)
        #expect(m.unit == .kilogramsPerLiter)
        #expect(m.mgdL == 88)
        #expect(abs(m.mmolL! - 88 / 18.0156) < 1e-12)
        #expect(m.type == .capillaryPlasma)
        #expect(m.sampleLocation == .finger)
        #expect(m.sensorStatus == .resultTooLow)
        #expect(m.contextFollows)
        #expect(!m.isControlSolution)
    }

    @Test func minimalRecordHasNoOptionalFields() throws {
        let m = try GlucoseMeasurement(bytes: SpecExamples.minimal)
        #expect(m.timeOffsetMinutes == nil && m.concentration == nil && m.unit == nil && m.type == nil)
        #expect(m.sampleLocation == nil && m.sensorStatus == nil && !m.contextFollows)
        #expect(m.mgdL == nil && m.mmolL == nil)
        #expect(m.userFacingTime == m.baseTime)
    }

    @Test func molarUnitsAndAsymmetricNibbles() throws {
        let m = try GlucoseMeasurement(bytes: SpecExamples.molar)
        #expect(m.unit == .molesPerLiter)
        #expect(m.mmolL == 5.5)
        #expect(abs(m.mgdL! - 5.5 * 18.0156) < 1e-9)
        // 0xF8: type is the LOW nibble (8, undetermined plasma), location the high one (15, not available).
        #expect(m.type?.code == 8)
        #expect(m.type?.name == "undeterminedPlasma")
        #expect(m.sampleLocation?.code == 15)
        #expect(m.sampleLocation?.name == "notAvailable")
        #expect(m.baseTime.isoString == "2019-12-31T23:59:59")
        // 0x12 in the Accu-Chek record: type 2, location 1. A swap would give type 1, location 2.
        let a = try GlucoseMeasurement(bytes: SpecExamples.accuChekStyle)
        #expect(a.type?.code == 2 && a.sampleLocation?.code == 1)
    }

    @Test func controlSolutionFromEitherNibble() throws {
        var bytes = SpecExamples.accuChekStyle
        bytes[14] = 0x1A  // type 10 (control solution), location finger
        #expect(try GlucoseMeasurement(bytes: bytes).isControlSolution)
        #expect(try GlucoseMeasurement(bytes: bytes).type?.name == "controlSolution")
        bytes[14] = 0x41  // type capillary whole blood, location 4 (control solution)
        #expect(try GlucoseMeasurement(bytes: bytes).isControlSolution)
        #expect(try GlucoseMeasurement(bytes: bytes).sampleLocation?.name == "controlSolution")
    }

    @Test func negativeInfinityStaysASpecial() throws {
        let m = try GlucoseMeasurement(bytes: SpecExamples.negativeInfinity)
        #expect(m.concentration?.special == .negativeInfinity)
        #expect(m.mgdL == nil)
        #expect(m.sensorStatus?.contains(.resultTooLow) == true)
        let json = m.json
        #expect(json["concentration"]?["special"]?.stringValue == "-inf")
        #expect(json["concentration"]?["value"]?.isNull == true)
        #expect(json["mgdL"]?.isNull == true)
    }

    @Test func allTwelveSensorStatusBitsHaveNames() {
        let all = SensorStatus(rawValue: 0xFFFF)
        #expect(all.names.count == 16)
        #expect(SensorStatus(rawValue: 0x0FFF).names == Array(SensorStatus.bitNames.prefix(12)))
        #expect(SensorStatus(rawValue: 0x0800).names == ["timeFault"])
        #expect(SensorStatus(rawValue: 0x0021).names == ["deviceBatteryLow", "resultTooHigh"])
        #expect(SensorStatus(rawValue: 0x1000).names == ["reserved12"])
    }

    @Test func reservedFlagBitsAreToleratedAndReported() throws {
        var bytes = SpecExamples.minimal
        bytes[0] = 0xE0
        let m = try GlucoseMeasurement(bytes: bytes)
        #expect(m.reservedFlags == 0xE0)
        #expect(m.json["reservedFlags"]?.intValue == 0xE0)
        #expect(m.encoded() == bytes)
    }

    @Test func trailingBytesAreAnError() {
        #expect(throws: GlucoseProfileError(offset: 17, field: "measurement", reason: .trailingBytes(count: 2))) {
            try GlucoseMeasurement(bytes: SpecExamples.accuChekStyle + [0, 0])
        }
        // Parsing from a reader leaves them for the caller.
        var reader = ByteReader(SpecExamples.minimal + [0xAA])
        #expect(throws: Never.self) { try GlucoseMeasurement(parsing: &reader) }
        #expect(reader.readableBytes == 1)
    }

    @Test func issueExampleErrorMessage() {
        #expect {
            try GlucoseMeasurement(bytes: hex("02 0400 e307 02 1b 0b 0a 1e 58"))
        } throws: { error in
            (error as? GlucoseProfileError)?.description == "truncated at offset 10: concentration needs 3 bytes, 1 left"
        }
    }

    @Test func monthThirteenIsAnErrorUnlessLenient() throws {
        var bytes = SpecExamples.accuChekStyle
        bytes[5] = 13
        #expect(throws: GlucoseProfileError(offset: 5, field: "baseTime.month", reason: .outOfRange(value: 13, expected: "1–12 or 0 (unknown)"))) {
            try GlucoseMeasurement(bytes: bytes)
        }
        let lenient = try GlucoseMeasurement(bytes: bytes, options: .lenientDateTime)
        #expect(lenient.baseTime.month == 13)
        #expect(lenient.userFacingTime == nil)
        #expect(lenient.encoded() == bytes)
        bytes[5] = 2
        bytes[7] = 24
        #expect(throws: GlucoseProfileError(offset: 7, field: "baseTime.hours", reason: .outOfRange(value: 24, expected: "0–23"))) {
            try GlucoseMeasurement(bytes: bytes)
        }
    }

    /// Every prefix of a valid packet fails as truncated, at the start of the field group the cut falls in.
    @Test(arguments: [
        SpecExamples.accuChekStyle, SpecExamples.minimal, SpecExamples.molar, SpecExamples.negativeInfinity,
        hex("09 0100 e307 02 1b 0b 0a 1e ffff 0100"), hex("1f 0100 e307 02 1b 0b 0a 1e 0080 37c0 22 0008"),
    ])
    func everyPrefixFailsAtTheRightOffset(packet: [UInt8]) throws {
        let flags = packet[0]
        // Group layout straight from the GLS §2 table.
        var groups: [(start: Int, size: Int, field: String)] = [(0, 1, "flags"), (1, 2, "sequenceNumber"), (3, 7, "baseTime")]
        var next = 10
        for (bit, size, field) in [(UInt8(0x01), 2, "timeOffset"), (0x02, 3, "concentration"), (0x08, 2, "sensorStatus")]
        where flags & bit != 0 {
            groups.append((next, size, field))
            next += size
        }
        try #require(next == packet.count)
        #expect(throws: Never.self) { try GlucoseMeasurement(bytes: packet) }
        for length in 0..<packet.count {
            let group = groups.first { $0.start <= length && length < $0.start + $0.size }!
            let expected = GlucoseProfileError(
                offset: group.start, field: group.field,
                reason: .truncated(needed: group.size, available: length - group.start))
            #expect(throws: expected, "prefix of \(length) bytes") { try GlucoseMeasurement(bytes: Array(packet.prefix(length))) }
        }
    }

    @Test func encodeThenDecodeRoundTrips() throws {
        let time = DateTime(year: 2024, month: 2, day: 29, hours: 23, minutes: 59, seconds: 1)
        let records = [
            GlucoseMeasurement(sequenceNumber: 0, baseTime: time),
            GlucoseMeasurement(
                sequenceNumber: 65535, baseTime: time, timeOffsetMinutes: -300, concentration: SFloat(rawValue: 0xB078),
                unit: .kilogramsPerLiter, type: .venousPlasma, sampleLocation: .earlobe, sensorStatus: [.timeFault, .deviceBatteryLow],
                contextFollows: true),
            GlucoseMeasurement(
                sequenceNumber: 7, baseTime: time, concentration: .positiveInfinity, unit: .molesPerLiter,
                type: .controlSolution, sampleLocation: .notAvailable, reservedFlags: 0xA0),
            GlucoseMeasurement(sequenceNumber: 8, baseTime: time, unit: .molesPerLiter),  // stray unit bit
        ]
        for record in records {
            let bytes = record.encoded()
            #expect(try GlucoseMeasurement(bytes: bytes) == record)
            #expect(try GlucoseMeasurement(bytes: bytes).encoded() == bytes)
        }
        for packet in [SpecExamples.accuChekStyle, SpecExamples.minimal, SpecExamples.molar, SpecExamples.negativeInfinity] {
            #expect(try GlucoseMeasurement(bytes: packet).encoded() == packet)
        }
        // A concentration without unit, type or location encodes as kg/L with zero nibbles.
        let bare = GlucoseMeasurement(sequenceNumber: 1, baseTime: time, concentration: SFloat(rawValue: 0xB058))
        #expect(bare.flags == 0x02)
        #expect(bare.encoded().last == 0x00)
    }

    @Test func userFacingTimeHandlesOverrunMarkersAndUnknownDates() throws {
        var m = try GlucoseMeasurement(bytes: SpecExamples.accuChekStyle)
        m.timeOffsetMinutes = 0x7FFF
        #expect(m.userFacingTime == nil)
        m.timeOffsetMinutes = Int16.min
        #expect(m.userFacingTime == nil)
        m.timeOffsetMinutes = -(11 * 60 + 11)
        #expect(m.userFacingTime?.isoString == "2019-02-26T23:59:30")
        m.baseTime.year = 0
        #expect(m.userFacingTime == nil)
    }

    @Test func jsonHasExactlyTheContractKeysInOrder() throws {
        let json = try GlucoseMeasurement(bytes: SpecExamples.accuChekStyle).json
        #expect(json.objectValue?.keys == [
            "characteristic", "flags", "reservedFlags", "sequenceNumber", "baseTime", "timeOffsetMinutes",
            "userFacingTime", "concentration", "mgdL", "mmolL", "type", "sampleLocation", "sensorStatus", "contextFollows",
        ])
        #expect(json["concentration"]?.objectValue?.keys == ["raw", "mantissa", "exponent", "unit", "value", "special"])
        #expect(json["characteristic"]?.stringValue == "2a18")
        #expect(json["concentration"]?["raw"]?.intValue == 0xB058)
        #expect(json["concentration"]?["mantissa"]?.intValue == 88)
        #expect(json["concentration"]?["exponent"]?.intValue == -5)
        #expect(json["concentration"]?["unit"]?.stringValue == "kg/L")
        #expect(json["concentration"]?["special"]?.isNull == true)
        #expect(json["mgdL"]?.doubleValue == 88)
        #expect(json["type"]?["code"]?.intValue == 2)
        #expect(json["sensorStatus"]?["names"]?.arrayValue == ["resultTooLow"])
        let minimal = try GlucoseMeasurement(bytes: SpecExamples.minimal).json
        for key in ["timeOffsetMinutes", "concentration", "mgdL", "mmolL", "type", "sampleLocation", "sensorStatus"] {
            #expect(minimal[key]?.isNull == true, "\(key) should be null")
        }
        #expect(minimal.objectValue?.count == 14)
    }
}
