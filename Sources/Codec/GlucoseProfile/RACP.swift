/// RACP op code (GLS §6). Names: 1 `reportStoredRecords`, 2 `deleteStoredRecords`, 3 `abortOperation`,
/// 4 `reportNumberOfStoredRecords`, 5 `numberOfStoredRecordsResponse`, 6 `responseCode`; others `reserved`.
public struct RACPOpCode: RawRepresentable, Hashable, Sendable {
    /// The op code byte.
    public let rawValue: UInt8
    /// The op code with this byte (any value).
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// The op code byte.
    public var code: UInt8 { self.rawValue }

    /// 0x01: report the records the operator selects.
    public static let reportStoredRecords = RACPOpCode(rawValue: 0x01)
    /// 0x02: delete the records the operator selects.
    public static let deleteStoredRecords = RACPOpCode(rawValue: 0x02)
    /// 0x03: abort the procedure in progress.
    public static let abortOperation = RACPOpCode(rawValue: 0x03)
    /// 0x04: report how many records the operator selects.
    public static let reportNumberOfStoredRecords = RACPOpCode(rawValue: 0x04)
    /// 0x05: the meter's answer to 0x04, with the count.
    public static let numberOfStoredRecordsResponse = RACPOpCode(rawValue: 0x05)
    /// 0x06: the meter's answer to the other requests.
    public static let responseCode = RACPOpCode(rawValue: 0x06)

    /// The stable name of the op code; `reserved` for others.
    public var name: String {
        switch self.rawValue {
        case 1: "reportStoredRecords"
        case 2: "deleteStoredRecords"
        case 3: "abortOperation"
        case 4: "reportNumberOfStoredRecords"
        case 5: "numberOfStoredRecordsResponse"
        case 6: "responseCode"
        default: "reserved"
        }
    }

    /// True for the op codes that take a record filter (1, 2, 4).
    public var isRecordRequest: Bool { self.rawValue == 1 || self.rawValue == 2 || self.rawValue == 4 }
}

/// RACP operator (GLS §6). Names: 0 `null`, 1 `allRecords`, 2 `lessThanOrEqual`, 3 `greaterThanOrEqual`,
/// 4 `withinRange`, 5 `firstRecord`, 6 `lastRecord`; others `reserved`.
public struct RACPOperator: RawRepresentable, Hashable, Sendable {
    /// The operator byte.
    public let rawValue: UInt8
    /// The operator with this byte (any value).
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// The operator byte.
    public var code: UInt8 { self.rawValue }

    /// 0x00: no operator (responses).
    public static let null = RACPOperator(rawValue: 0x00)
    /// 0x01: every record.
    public static let allRecords = RACPOperator(rawValue: 0x01)
    /// 0x02: records up to the operand (inclusive).
    public static let lessThanOrEqual = RACPOperator(rawValue: 0x02)
    /// 0x03: records from the operand on (inclusive).
    public static let greaterThanOrEqual = RACPOperator(rawValue: 0x03)
    /// Inclusive range: two operands, min then max.
    public static let withinRange = RACPOperator(rawValue: 0x04)
    /// 0x05: the first (oldest) record.
    public static let firstRecord = RACPOperator(rawValue: 0x05)
    /// 0x06: the last (newest) record.
    public static let lastRecord = RACPOperator(rawValue: 0x06)

    /// The stable name of the operator; `reserved` for others.
    public var name: String {
        switch self.rawValue {
        case 0: "null"
        case 1: "allRecords"
        case 2: "lessThanOrEqual"
        case 3: "greaterThanOrEqual"
        case 4: "withinRange"
        case 5: "firstRecord"
        case 6: "lastRecord"
        default: "reserved"
        }
    }

    /// True for 2, 3 and 4, the operators followed by a filter.
    public var takesOperand: Bool { (2...4).contains(self.rawValue) }
}

/// RACP filter type, the first operand byte of operators 2–4. Names: 1 `sequenceNumber`,
/// 2 `userFacingTime`; others `reserved`.
public struct RACPFilterType: RawRepresentable, Hashable, Sendable {
    /// The filter type byte.
    public let rawValue: UInt8
    /// The filter type with this byte (any value).
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// The filter type byte.
    public var code: UInt8 { self.rawValue }

    /// 0x01: the operand is a sequence number (UInt16).
    public static let sequenceNumber = RACPFilterType(rawValue: 0x01)
    /// 0x02: the operand is a user-facing time (7-byte Date Time).
    public static let userFacingTime = RACPFilterType(rawValue: 0x02)

    /// The stable name of the filter type; `reserved` for others.
    public var name: String {
        switch self.rawValue {
        case 1: "sequenceNumber"
        case 2: "userFacingTime"
        default: "reserved"
        }
    }
}

/// RACP response code, the 4th byte of an op 6 response (GLS §6). Names: 1 `success`,
/// 2 `opCodeNotSupported`, 3 `invalidOperator`, 4 `operatorNotSupported`, 5 `invalidOperand`,
/// 6 `noRecordsFound`, 7 `abortUnsuccessful`, 8 `procedureNotCompleted`, 9 `operandNotSupported`;
/// others `reserved` (kept as received).
public struct RACPResponseCode: RawRepresentable, Hashable, Sendable {
    /// The response code byte.
    public let rawValue: UInt8
    /// The response code with this byte (any value, kept as received).
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// The response code byte.
    public var code: UInt8 { self.rawValue }

    /// 0x01: the request succeeded.
    public static let success = RACPResponseCode(rawValue: 0x01)
    /// 0x02: the meter does not support the op code.
    public static let opCodeNotSupported = RACPResponseCode(rawValue: 0x02)
    /// 0x03: the operator is invalid.
    public static let invalidOperator = RACPResponseCode(rawValue: 0x03)
    /// 0x04: the meter does not support the operator.
    public static let operatorNotSupported = RACPResponseCode(rawValue: 0x04)
    /// 0x05: the operand is invalid.
    public static let invalidOperand = RACPResponseCode(rawValue: 0x05)
    /// Normal for a delta query: nothing new. Not a failure.
    public static let noRecordsFound = RACPResponseCode(rawValue: 0x06)
    /// 0x07: the abort did not succeed.
    public static let abortUnsuccessful = RACPResponseCode(rawValue: 0x07)
    /// 0x08: the procedure could not be completed, for a reason no other code covers.
    public static let procedureNotCompleted = RACPResponseCode(rawValue: 0x08)
    /// 0x09: the meter does not support the operand.
    public static let operandNotSupported = RACPResponseCode(rawValue: 0x09)

    /// The stable name of the response code; `reserved` for others.
    public var name: String {
        switch self.rawValue {
        case 1: "success"
        case 2: "opCodeNotSupported"
        case 3: "invalidOperator"
        case 4: "operatorNotSupported"
        case 5: "invalidOperand"
        case 6: "noRecordsFound"
        case 7: "abortUnsuccessful"
        case 8: "procedureNotCompleted"
        case 9: "operandNotSupported"
        default: "reserved"
        }
    }

    /// True for codes 0 and 0x0A–0xFF.
    public var isReserved: Bool { !(1...9).contains(self.rawValue) }
}

/// The filter operand of RACP operators ≤ (only `max`), ≥ (only `min`) and within-range (both).
public enum RACPFilter: Hashable, Sendable {
    /// Filter type 0x01: uint16 sequence numbers.
    case sequenceNumber(min: UInt16?, max: UInt16?)
    /// Filter type 0x02: 7-byte Date Time user-facing times (base time + offset).
    case userFacingTime(min: DateTime?, max: DateTime?)

    /// The filter type byte.
    public var type: RACPFilterType {
        switch self {
        case .sequenceNumber: .sequenceNumber
        case .userFacingTime: .userFacingTime
        }
    }
}

/// What follows the op code and operator of a RACP message.
public enum RACPOperand: Hashable, Sendable {
    /// No operand (operators 0, 1, 5, 6 on requests; abort).
    case none
    /// A record filter (operators 2–4).
    case filter(RACPFilter)
    /// Op 5: the number of stored records matching the request (uint16 in GLS).
    case numberOfRecords(UInt16)
    /// Op 6: the request op code this answers, and the outcome.
    case response(requestOpCode: RACPOpCode, responseCode: RACPResponseCode)
}

/// A Record Access Control Point message (0x2A52, GLS §6): a request the client writes or a response the
/// meter indicates.
///
/// Decoding checks the shape each op code requires: operators 0x01/0x05/0x06 take no operand (a meter
/// rejects `04 01 00`, and so do we), operators 2–4 take a filter, responses use operator 0x00 (Null), and
/// reserved op codes, operators and filter types are errors. Encoding writes the fields as given.
public struct RACPMessage: Hashable, Sendable {
    /// What is asked (or answered).
    public var opCode: RACPOpCode
    /// Which records.
    public var `operator`: RACPOperator
    /// The filter, count or response the operator and op code call for.
    public var operand: RACPOperand

    /// Creates a message from its parts, unvalidated.
    public init(opCode: RACPOpCode, operator: RACPOperator, operand: RACPOperand = .none) {
        self.opCode = opCode
        self.operator = `operator`
        self.operand = operand
    }

    /// `01 01`: report all stored records.
    public static let reportAll = RACPMessage(opCode: .reportStoredRecords, operator: .allRecords)
    /// `04 01`: report the number of all stored records.
    public static let countAll = RACPMessage(opCode: .reportNumberOfStoredRecords, operator: .allRecords)
    /// `03 00`: abort the running procedure.
    public static let abort = RACPMessage(opCode: .abortOperation, operator: .null)
    /// `01 05`: report the oldest record.
    public static let reportFirst = RACPMessage(opCode: .reportStoredRecords, operator: .firstRecord)
    /// `01 06`: report the newest record.
    public static let reportLast = RACPMessage(opCode: .reportStoredRecords, operator: .lastRecord)

    /// `01 03 01 <seq LE>`: report records with sequence number ≥ `sequenceNumber`.
    public static func reportGreaterOrEqual(sequenceNumber: UInt16) -> RACPMessage {
        RACPMessage(
            opCode: .reportStoredRecords, operator: .greaterThanOrEqual,
            operand: .filter(.sequenceNumber(min: sequenceNumber, max: nil)))
    }

    /// `04 03 01 <seq LE>`: count records with sequence number ≥ `sequenceNumber`.
    public static func countGreaterOrEqual(sequenceNumber: UInt16) -> RACPMessage {
        RACPMessage(
            opCode: .reportNumberOfStoredRecords, operator: .greaterThanOrEqual,
            operand: .filter(.sequenceNumber(min: sequenceNumber, max: nil)))
    }

    /// The download's count request: records with sequence number ≥ `from`, or all records when nil.
    public static func count(from: UInt16?) -> RACPMessage {
        from.map { Self.countGreaterOrEqual(sequenceNumber: $0) } ?? .countAll
    }

    /// The download's report request: records with sequence number ≥ `from`, or all records when nil.
    public static func report(from: UInt16?) -> RACPMessage {
        from.map { Self.reportGreaterOrEqual(sequenceNumber: $0) } ?? .reportAll
    }

    /// `05 00 <count LE>`: a number-of-records response.
    public static func numberOfRecords(_ count: UInt16) -> RACPMessage {
        RACPMessage(opCode: .numberOfStoredRecordsResponse, operator: .null, operand: .numberOfRecords(count))
    }

    /// `06 00 <request op> <code>`: a response-code indication.
    public static func response(requestOpCode: RACPOpCode, responseCode: RACPResponseCode) -> RACPMessage {
        RACPMessage(
            opCode: .responseCode, operator: .null,
            operand: .response(requestOpCode: requestOpCode, responseCode: responseCode))
    }

    /// The count of a number-of-records response, else nil.
    public var numberOfRecords: UInt16? {
        if case .numberOfRecords(let count) = self.operand { return count }
        return nil
    }

    /// The request op code and outcome of a response-code message, else nil.
    public var response: (requestOpCode: RACPOpCode, responseCode: RACPResponseCode)? {
        if case .response(let request, let code) = self.operand { return (request, code) }
        return nil
    }

    /// The filter of a request with operator 2–4, else nil.
    public var filter: RACPFilter? {
        if case .filter(let filter) = self.operand { return filter }
        return nil
    }

    /// Decodes one message; RACP messages fill the whole value, so this reads to the end of `reader`.
    /// Throws for a reserved op code, operator or filter type, an operator the op code does not take
    /// (a response's must be null), or a truncated operand.
    public init(parsing reader: inout ByteReader) throws(GlucoseProfileError) {
        let opOffset = reader.offset
        self.opCode = RACPOpCode(rawValue: try reader.readUInt8(field: "opCode"))
        let operatorOffset = reader.offset
        self.operator = RACPOperator(rawValue: try reader.readUInt8(field: "operator"))

        switch self.opCode {
        case .reportStoredRecords, .deleteStoredRecords, .reportNumberOfStoredRecords:
            guard (1...6).contains(self.operator.rawValue) else {
                throw GlucoseProfileError(
                    offset: operatorOffset, field: "operator",
                    reason: .invalidValue(value: Int(self.operator.rawValue), expected: "an operator 0x01–0x06"))
            }
            if self.operator.takesOperand {
                self.operand = .filter(try Self.parseFilter(operator: self.operator, reader: &reader))
            } else {
                self.operand = .none
            }
        case .abortOperation:
            guard self.operator == .null else {
                throw GlucoseProfileError(
                    offset: operatorOffset, field: "operator",
                    reason: .invalidValue(value: Int(self.operator.rawValue), expected: "0x00 (null) for an abort"))
            }
            self.operand = .none
        case .numberOfStoredRecordsResponse:
            guard self.operator == .null else {
                throw GlucoseProfileError(
                    offset: operatorOffset, field: "operator", reason: .nonNullOperator(value: self.operator.rawValue))
            }
            self.operand = .numberOfRecords(try reader.readUInt16LE(field: "numberOfRecords"))
        case .responseCode:
            guard self.operator == .null else {
                throw GlucoseProfileError(
                    offset: operatorOffset, field: "operator", reason: .nonNullOperator(value: self.operator.rawValue))
            }
            try reader.require(2, for: "response")
            let request = RACPOpCode(rawValue: try reader.readUInt8(field: "requestOpCode"))
            let code = RACPResponseCode(rawValue: try reader.readUInt8(field: "responseCode"))
            self.operand = .response(requestOpCode: request, responseCode: code)
        default:
            throw GlucoseProfileError(
                offset: opOffset, field: "opCode",
                reason: .invalidValue(value: Int(self.opCode.rawValue), expected: "an op code 0x01–0x06"))
        }
    }

    /// The filter operand of operators 2–4: its type byte, then a minimum, a maximum or both as the
    /// operator calls for (uint16 LE sequence numbers or 7-byte user-facing times); throws for a
    /// reserved filter type.
    private static func parseFilter(
        operator op: RACPOperator, reader: inout ByteReader
    ) throws(GlucoseProfileError) -> RACPFilter {
        let typeOffset = reader.offset
        let type = RACPFilterType(rawValue: try reader.readUInt8(field: "filterType"))
        switch type {
        case .sequenceNumber:
            switch op {
            case .lessThanOrEqual: return .sequenceNumber(min: nil, max: try reader.readUInt16LE(field: "filter.max"))
            case .greaterThanOrEqual: return .sequenceNumber(min: try reader.readUInt16LE(field: "filter.min"), max: nil)
            default:
                let min = try reader.readUInt16LE(field: "filter.min")
                return .sequenceNumber(min: min, max: try reader.readUInt16LE(field: "filter.max"))
            }
        case .userFacingTime:
            switch op {
            case .lessThanOrEqual: return .userFacingTime(min: nil, max: try reader.readDateTime(field: "filter.max"))
            case .greaterThanOrEqual:
                return .userFacingTime(min: try reader.readDateTime(field: "filter.min"), max: nil)
            default:
                let min = try reader.readDateTime(field: "filter.min")
                return .userFacingTime(min: min, max: try reader.readDateTime(field: "filter.max"))
            }
        default:
            throw GlucoseProfileError(
                offset: typeOffset, field: "filterType",
                reason: .invalidValue(value: Int(type.rawValue), expected: "0x01 (sequence number) or 0x02 (user-facing time)"))
        }
    }

    /// Decodes exactly one message; bytes after the operand the op code and operator allow are an error.
    public init(bytes: [UInt8]) throws(GlucoseProfileError) {
        var reader = ByteReader(bytes)
        try self.init(parsing: &reader)
        try reader.expectEnd(of: "RACP message")
    }

    /// Appends the wire encoding to `writer`. A filter writes its type byte, then `min` and `max` when set.
    public func serialize(into writer: inout ByteWriter) {
        writer.writeUInt8(self.opCode.rawValue)
        writer.writeUInt8(self.operator.rawValue)
        switch self.operand {
        case .none: break
        case .filter(let filter):
            writer.writeUInt8(filter.type.rawValue)
            switch filter {
            case .sequenceNumber(let min, let max):
                if let min { writer.writeUInt16LE(min) }
                if let max { writer.writeUInt16LE(max) }
            case .userFacingTime(let min, let max):
                if let min { writer.writeDateTime(min) }
                if let max { writer.writeDateTime(max) }
            }
        case .numberOfRecords(let count): writer.writeUInt16LE(count)
        case .response(let request, let code):
            writer.writeUInt8(request.rawValue)
            writer.writeUInt8(code.rawValue)
        }
    }

    /// The wire encoding.
    public func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 17)
        self.serialize(into: &writer)
        return writer.bytes
    }
}

extension RACPMessage: GlucoseProfileEncodable {}
