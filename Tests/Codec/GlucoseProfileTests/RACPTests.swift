import GlucoseProfile
import JSON
import SugarWire
import Testing

@Suite struct RACPTests {
    @Test func requestConstructorsEncodeLittleEndian() {
        #expect(RACPMessage.reportAll.encoded() == [0x01, 0x01])
        #expect(RACPMessage.countAll.encoded() == [0x04, 0x01])
        #expect(RACPMessage.abort.encoded() == [0x03, 0x00])
        #expect(RACPMessage.reportFirst.encoded() == [0x01, 0x05])
        #expect(RACPMessage.reportLast.encoded() == [0x01, 0x06])
        // ≥ 15 must go out as 0f 00 (nRF Toolbox sent it big-endian).
        #expect(RACPMessage.reportGreaterOrEqual(sequenceNumber: 15).encoded() == hex("01 03 01 0f00"))
        #expect(RACPMessage.countGreaterOrEqual(sequenceNumber: 0x1234).encoded() == hex("04 03 01 3412"))
    }

    @Test func decodesEveryOperatorAndFilterType() throws {
        let t1 = DateTime(year: 2019, month: 2, day: 27, hours: 11, minutes: 10, seconds: 30)
        let t2 = DateTime(year: 2019, month: 3, day: 1)
        let cases: [(String, RACPMessage)] = [
            ("01 01", .reportAll),
            ("02 01", RACPMessage(opCode: .deleteStoredRecords, operator: .allRecords)),
            ("01 02 01 0a00", RACPMessage(opCode: .reportStoredRecords, operator: .lessThanOrEqual, operand: .filter(.sequenceNumber(min: nil, max: 10)))),
            ("01 03 01 0a00", .reportGreaterOrEqual(sequenceNumber: 10)),
            ("04 04 01 0a00 1400", RACPMessage(opCode: .reportNumberOfStoredRecords, operator: .withinRange, operand: .filter(.sequenceNumber(min: 10, max: 20)))),
            ("01 02 02 e307 02 1b 0b 0a 1e", RACPMessage(opCode: .reportStoredRecords, operator: .lessThanOrEqual, operand: .filter(.userFacingTime(min: nil, max: t1)))),
            ("01 03 02 e307 02 1b 0b 0a 1e", RACPMessage(opCode: .reportStoredRecords, operator: .greaterThanOrEqual, operand: .filter(.userFacingTime(min: t1, max: nil)))),
            ("02 04 02 e307 02 1b 0b 0a 1e e307 03 01 00 00 00", RACPMessage(opCode: .deleteStoredRecords, operator: .withinRange, operand: .filter(.userFacingTime(min: t1, max: t2)))),
            ("01 05", .reportFirst),
            ("01 06", .reportLast),
            ("03 00", .abort),
            ("05 00 2c01", .numberOfRecords(300)),
            ("06 00 01 01", .response(requestOpCode: .reportStoredRecords, responseCode: .success)),
            ("06 00 03 07", .response(requestOpCode: .abortOperation, responseCode: .abortUnsuccessful)),
            ("06 00 04 05", .response(requestOpCode: .reportNumberOfStoredRecords, responseCode: .invalidOperand)),
        ]
        for (text, expected) in cases {
            let bytes = hex(text)
            let decoded = try RACPMessage(bytes: bytes)
            #expect(decoded == expected, "\(text)")
            #expect(decoded.encoded() == bytes, "\(text)")
        }
    }

    @Test func noRecordsFoundResponse() throws {
        let message = try RACPMessage(bytes: hex("06 00 01 06"))
        #expect(message.response?.requestOpCode == .reportStoredRecords)
        #expect(message.response?.responseCode == .noRecordsFound)
        #expect(message.json == [
            "characteristic": "2a52", "opCode": ["code": 6, "name": "responseCode"], "operator": ["code": 0, "name": "null"],
            "requestOpCode": ["code": 1, "name": "reportStoredRecords"], "responseCode": ["code": 6, "name": "noRecordsFound"],
        ])
    }

    @Test(arguments: Array(UInt8(1)...9))
    func everyResponseCodeHasAName(code: UInt8) throws {
        let message = try RACPMessage(bytes: [0x06, 0x00, 0x01, code])
        let name = try #require(message.response?.responseCode.name)
        #expect(name != "reserved")
        #expect(message.response?.responseCode.isReserved == false)
    }

    @Test func reservedResponseCodesAreKept() throws {
        let message = try RACPMessage(bytes: hex("06 00 01 0a"))
        #expect(message.response?.responseCode.rawValue == 0x0A)
        #expect(message.response?.responseCode.isReserved == true)
        #expect(message.json["responseCode"] == ["code": 10, "name": "reserved"])
    }

    @Test func countAllWithExtraOperandIsRejected() {
        // A meter answered `04 01 00` with Invalid Operand; we reject it the same way.
        #expect(throws: GlucoseProfileError(offset: 2, field: "RACP message", reason: .trailingBytes(count: 1))) {
            try RACPMessage(bytes: hex("04 01 00"))
        }
        #expect(throws: GlucoseProfileError.self) { try RACPMessage(bytes: hex("01 05 00")) }
        #expect(throws: GlucoseProfileError.self) { try RACPMessage(bytes: hex("01 06 01 0100")) }
        #expect(throws: GlucoseProfileError.self) { try RACPMessage(bytes: hex("03 00 00")) }
    }

    @Test func nonNullOperatorsOnResponsesAreReported() {
        #expect(throws: GlucoseProfileError(offset: 1, field: "operator", reason: .nonNullOperator(value: 1))) {
            try RACPMessage(bytes: hex("06 01 01 01"))
        }
        #expect(throws: GlucoseProfileError(offset: 1, field: "operator", reason: .nonNullOperator(value: 3))) {
            try RACPMessage(bytes: hex("05 03 0100"))
        }
    }

    @Test func reservedOpCodesOperatorsAndFilterTypesAreErrors() {
        #expect(throws: GlucoseProfileError(offset: 0, field: "opCode", reason: .invalidValue(value: 7, expected: "an op code 0x01–0x06"))) {
            try RACPMessage(bytes: hex("07 00"))
        }
        #expect(throws: GlucoseProfileError.self) { try RACPMessage(bytes: hex("00 00")) }
        #expect(throws: GlucoseProfileError.self) { try RACPMessage(bytes: hex("01 07")) }
        #expect(throws: GlucoseProfileError.self) { try RACPMessage(bytes: hex("01 00")) }
        #expect(throws: GlucoseProfileError(offset: 2, field: "filterType", reason: .invalidValue(value: 3, expected: "0x01 (sequence number) or 0x02 (user-facing time)"))) {
            try RACPMessage(bytes: hex("01 03 03 0100"))
        }
        // An out-of-range user-facing time in a filter is reported at its field.
        #expect(throws: GlucoseProfileError(offset: 5, field: "filter.min.month", reason: .outOfRange(value: 13, expected: "1–12 or 0 (unknown)"))) {
            try RACPMessage(bytes: hex("01 03 02 e307 0d 01 00 00 00"))
        }
    }

    @Test(arguments: ["01 04 01 0a00 1400", "05 00 2c01", "06 00 01 06", "01 04 02 e307 02 1b 0b 0a 1e e307 03 01 00 00 00"])
    func everyPrefixFailsAsTruncated(text: String) {
        let packet = hex(text)
        for length in 0..<packet.count {
            #expect(performing: { try RACPMessage(bytes: Array(packet.prefix(length))) }, throws: { error in
                guard let error = error as? GlucoseProfileError, case .truncated(let needed, let available) = error.reason else {
                    return false
                }
                return error.offset + available == length && error.offset + needed <= packet.count
            })
        }
    }

    @Test func jsonShapesByOpCode() throws {
        let request = try RACPMessage(bytes: hex("01 04 01 0a00 1400")).json
        #expect(request.objectValue?.keys == ["characteristic", "opCode", "operator", "filter"])
        #expect(request["filter"] == ["type": ["code": 1, "name": "sequenceNumber"], "min": 10, "max": 20])
        let lessOrEqual = try RACPMessage(bytes: hex("01 02 02 e307 02 1b 0b 0a 1e")).json
        #expect(lessOrEqual["filter"] == ["type": ["code": 2, "name": "userFacingTime"], "min": nil, "max": "2019-02-27T11:10:30"])
        #expect(try RACPMessage(bytes: hex("01 01")).json["filter"]?.isNull == true)
        let count = try RACPMessage(bytes: hex("05 00 2c01")).json
        #expect(count.objectValue?.keys == ["characteristic", "opCode", "operator", "numberOfRecords"])
        #expect(count["numberOfRecords"]?.intValue == 300)
        #expect(try RACPMessage(bytes: hex("03 00")).json.objectValue?.keys == ["characteristic", "opCode", "operator"])
    }
}

@Suite struct ByteWriterTests {
    @Test func serializeAppendsToAnExistingBuffer() {
        var bytes: [UInt8] = [0xAA]
        RACPMessage.reportGreaterOrEqual(sequenceNumber: 0x0102).serialize(into: &bytes)
        #expect(bytes == [0xAA, 0x01, 0x03, 0x01, 0x02, 0x01])
    }
}
