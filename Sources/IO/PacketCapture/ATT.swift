import GlucoseProfile

/// ATT protocol opcodes (Core Vol 3 Part F 3.4.8).
public struct ATTOpcode: Hashable, Sendable, CustomStringConvertible {
    /// The opcode byte (first byte of every ATT PDU).
    public let rawValue: UInt8
    /// Wraps any byte; unknown opcodes are kept and shown in hex.
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// Wraps any byte (unlabelled form for the constants below).
    public init(_ rawValue: UInt8) { self.rawValue = rawValue }

    /// The server refuses a request: the request's opcode, the handle and an ``ATTErrorCode``.
    public static let errorResponse = ATTOpcode(0x01)
    /// The client proposes its receive MTU.
    public static let exchangeMTURequest = ATTOpcode(0x02)
    /// The server's receive MTU; both then use the smaller.
    public static let exchangeMTUResponse = ATTOpcode(0x03)
    /// The types of the handles in a range (descriptor discovery).
    public static let findInformationRequest = ATTOpcode(0x04)
    /// Handle–UUID pairs, all 16-bit or all 128-bit.
    public static let findInformationResponse = ATTOpcode(0x05)
    /// The handles of attributes with a given 16-bit type and value (a primary service by UUID).
    public static let findByTypeValueRequest = ATTOpcode(0x06)
    /// Found handles with their group ends.
    public static let findByTypeValueResponse = ATTOpcode(0x07)
    /// The values of the attributes of a type in a range (characteristic discovery with 0x2803).
    public static let readByTypeRequest = ATTOpcode(0x08)
    /// Handle–value pairs of one length.
    public static let readByTypeResponse = ATTOpcode(0x09)
    /// Reads one attribute's value.
    public static let readRequest = ATTOpcode(0x0A)
    /// The value, cut at MTU − 1 bytes.
    public static let readResponse = ATTOpcode(0x0B)
    /// Reads a long value from an offset.
    public static let readBlobRequest = ATTOpcode(0x0C)
    /// The part of the value from that offset.
    public static let readBlobResponse = ATTOpcode(0x0D)
    /// Reads several fixed-length values at once.
    public static let readMultipleRequest = ATTOpcode(0x0E)
    /// The values, back to back.
    public static let readMultipleResponse = ATTOpcode(0x0F)
    /// The groups of a type in a range (primary service discovery with 0x2800).
    public static let readByGroupTypeRequest = ATTOpcode(0x10)
    /// Start handle, end handle and value (the service UUID) per group.
    public static let readByGroupTypeResponse = ATTOpcode(0x11)
    /// Writes a value; the server answers with a Write Response or an Error Response.
    public static let writeRequest = ATTOpcode(0x12)
    /// The write was done.
    public static let writeResponse = ATTOpcode(0x13)
    /// Queues part of a long write.
    public static let prepareWriteRequest = ATTOpcode(0x16)
    /// Echoes the queued part.
    public static let prepareWriteResponse = ATTOpcode(0x17)
    /// Writes (or cancels) the queued parts.
    public static let executeWriteRequest = ATTOpcode(0x18)
    /// The queued write was executed.
    public static let executeWriteResponse = ATTOpcode(0x19)
    /// The server sends a value unasked; nothing acknowledges it.
    public static let handleValueNotification = ATTOpcode(0x1B)
    /// The server sends a value unasked; the client confirms it.
    public static let handleValueIndication = ATTOpcode(0x1D)
    /// The client's acknowledgement of an indication.
    public static let handleValueConfirmation = ATTOpcode(0x1E)
    /// Reads several values of any length at once (Bluetooth 5.2).
    public static let readMultipleVariableRequest = ATTOpcode(0x20)
    /// Length-prefixed values.
    public static let readMultipleVariableResponse = ATTOpcode(0x21)
    /// Several notifications in one PDU: handle, length and value each.
    public static let multipleHandleValueNotification = ATTOpcode(0x23)
    /// Writes a value with no response.
    public static let writeCommand = ATTOpcode(0x52)
    /// A write command with a 12-byte signature.
    public static let signedWriteCommand = ATTOpcode(0xD2)

    /// The response opcode a request expects, nil when this is not a request.
    var expectedResponse: ATTOpcode? {
        switch self.rawValue {
        case 0x02, 0x04, 0x06, 0x08, 0x0A, 0x0C, 0x0E, 0x10, 0x12, 0x16, 0x18, 0x20: ATTOpcode(self.rawValue + 1)
        default: nil
        }
    }

    /// The opcode's name in the Core specification's words, or `ATT opcode 0xNN`.
    public var description: String {
        let name: String =
            switch self.rawValue {
            case 0x01: "Error Response"
            case 0x02: "Exchange MTU Request"
            case 0x03: "Exchange MTU Response"
            case 0x04: "Find Information Request"
            case 0x05: "Find Information Response"
            case 0x06: "Find By Type Value Request"
            case 0x07: "Find By Type Value Response"
            case 0x08: "Read By Type Request"
            case 0x09: "Read By Type Response"
            case 0x0A: "Read Request"
            case 0x0B: "Read Response"
            case 0x0C: "Read Blob Request"
            case 0x0D: "Read Blob Response"
            case 0x0E: "Read Multiple Request"
            case 0x0F: "Read Multiple Response"
            case 0x10: "Read By Group Type Request"
            case 0x11: "Read By Group Type Response"
            case 0x12: "Write Request"
            case 0x13: "Write Response"
            case 0x16: "Prepare Write Request"
            case 0x17: "Prepare Write Response"
            case 0x18: "Execute Write Request"
            case 0x19: "Execute Write Response"
            case 0x1B: "Handle Value Notification"
            case 0x1D: "Handle Value Indication"
            case 0x1E: "Handle Value Confirmation"
            case 0x20: "Read Multiple Variable Request"
            case 0x21: "Read Multiple Variable Response"
            case 0x23: "Multiple Handle Value Notification"
            case 0x52: "Write Command"
            case 0xD2: "Signed Write Command"
            default: "ATT opcode 0x" + hexByte(self.rawValue)
            }
        return name
    }
}

/// ATT error codes (Core Vol 3 Part F 3.4.1.1; 0x80–0x9F application, 0xE0–0xFF common profile codes).
public struct ATTErrorCode: Hashable, Sendable, CustomStringConvertible {
    /// The error code byte of an Error Response.
    public let rawValue: UInt8
    /// Wraps any byte; unknown codes are kept and shown in hex.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// No attribute has the handle.
    public static let invalidHandle = ATTErrorCode(rawValue: 0x01)
    /// The attribute cannot be read.
    public static let readNotPermitted = ATTErrorCode(rawValue: 0x02)
    /// The attribute cannot be written.
    public static let writeNotPermitted = ATTErrorCode(rawValue: 0x03)
    /// The request is malformed.
    public static let invalidPDU = ATTErrorCode(rawValue: 0x04)
    /// The link must be authenticated (bonded) first: what a meter answers before pairing.
    public static let insufficientAuthentication = ATTErrorCode(rawValue: 0x05)
    /// The server does not support the request.
    public static let requestNotSupported = ATTErrorCode(rawValue: 0x06)
    /// The offset is past the value's end.
    public static let invalidOffset = ATTErrorCode(rawValue: 0x07)
    /// The client is not authorized.
    public static let insufficientAuthorization = ATTErrorCode(rawValue: 0x08)
    /// Too many prepared writes are queued.
    public static let prepareQueueFull = ATTErrorCode(rawValue: 0x09)
    /// Nothing in the range: the normal end of a discovery procedure.
    public static let attributeNotFound = ATTErrorCode(rawValue: 0x0A)
    /// The value cannot be read or written with an offset.
    public static let attributeNotLong = ATTErrorCode(rawValue: 0x0B)
    /// The link's key is too short.
    public static let insufficientEncryptionKeySize = ATTErrorCode(rawValue: 0x0C)
    /// The written value has the wrong length.
    public static let invalidAttributeValueLength = ATTErrorCode(rawValue: 0x0D)
    /// The request failed for a reason the server does not name.
    public static let unlikelyError = ATTErrorCode(rawValue: 0x0E)
    /// The link must be encrypted first.
    public static let insufficientEncryption = ATTErrorCode(rawValue: 0x0F)
    /// The type is not a grouping type.
    public static let unsupportedGroupType = ATTErrorCode(rawValue: 0x10)
    /// The server lacks the resources.
    public static let insufficientResources = ATTErrorCode(rawValue: 0x11)
    /// GLS 1.0 application error: Procedure Already In Progress.
    public static let glucoseProcedureAlreadyInProgress = ATTErrorCode(rawValue: 0x80)
    /// GLS 1.0 application error: Client Characteristic Configuration Descriptor Improperly Configured.
    public static let glucoseCCCDImproperlyConfigured = ATTErrorCode(rawValue: 0x81)
    /// Common profile error (CSS Part B 1.2): a CCCD is not set as the procedure needs.
    public static let cccdImproperlyConfigured = ATTErrorCode(rawValue: 0xFD)
    /// Common profile error: a procedure is already running.
    public static let procedureAlreadyInProgress = ATTErrorCode(rawValue: 0xFE)
    /// Common profile error: a written value is outside its allowed range.
    public static let outOfRange = ATTErrorCode(rawValue: 0xFF)

    /// The error's name in the specification's words, `Application Error 0xNN`, or `ATT error 0xNN`.
    public var description: String {
        switch self.rawValue {
        case 0x01: "Invalid Handle"
        case 0x02: "Read Not Permitted"
        case 0x03: "Write Not Permitted"
        case 0x04: "Invalid PDU"
        case 0x05: "Insufficient Authentication"
        case 0x06: "Request Not Supported"
        case 0x07: "Invalid Offset"
        case 0x08: "Insufficient Authorization"
        case 0x09: "Prepare Queue Full"
        case 0x0A: "Attribute Not Found"
        case 0x0B: "Attribute Not Long"
        case 0x0C: "Insufficient Encryption Key Size"
        case 0x0D: "Invalid Attribute Value Length"
        case 0x0E: "Unlikely Error"
        case 0x0F: "Insufficient Encryption"
        case 0x10: "Unsupported Group Type"
        case 0x11: "Insufficient Resources"
        case 0x80...0x9F: "Application Error 0x" + hexByte(self.rawValue)
        case 0xFC: "Write Request Rejected"
        case 0xFD: "CCCD Improperly Configured"
        case 0xFE: "Procedure Already In Progress"
        case 0xFF: "Out of Range"
        default: "ATT error 0x" + hexByte(self.rawValue)
        }
    }
}

/// GATT characteristic properties bit field (Core Vol 3 Part G 3.3.1.1).
public struct CharacteristicProperties: OptionSet, Hashable, Sendable, CustomStringConvertible {
    /// The properties byte of a characteristic declaration.
    public let rawValue: UInt8
    /// Wraps the properties byte.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The value may be broadcast in advertising data.
    public static let broadcast = CharacteristicProperties(rawValue: 0x01)
    /// The value can be read.
    public static let read = CharacteristicProperties(rawValue: 0x02)
    /// The value can be written with a Write Command.
    public static let writeWithoutResponse = CharacteristicProperties(rawValue: 0x04)
    /// The value can be written with a Write Request.
    public static let write = CharacteristicProperties(rawValue: 0x08)
    /// The value can be notified (the CCCD's bit 0).
    public static let notify = CharacteristicProperties(rawValue: 0x10)
    /// The value can be indicated (the CCCD's bit 1).
    public static let indicate = CharacteristicProperties(rawValue: 0x20)
    /// The value can be written with a Signed Write Command.
    public static let authenticatedSignedWrites = CharacteristicProperties(rawValue: 0x40)
    /// More properties are in the Characteristic Extended Properties descriptor.
    public static let extendedProperties = CharacteristicProperties(rawValue: 0x80)

    /// The set bits' names, comma-separated in bit order (`write,indicate`); empty for none.
    public var description: String {
        let names = ["broadcast", "read", "write-without-response", "write", "notify", "indicate", "signed-write",
                     "extended"]
        return (0..<8).filter { self.rawValue & (1 << $0) != 0 }.map { names[$0] }.joined(separator: ",")
    }
}

/// Builds ATT PDUs (used by `CaptureBuilder` and available to simulators).
public enum ATTEncoder {
    /// Error Response to `request` about `handle`.
    public static func errorResponse(request: ATTOpcode, handle: UInt16, code: ATTErrorCode) -> [UInt8] {
        [0x01, request.rawValue] + le16(handle) + [code.rawValue]
    }
    /// Exchange MTU Request (client's Rx MTU) or Response (server's Rx MTU).
    public static func exchangeMTU(request: Bool, mtu: UInt16) -> [UInt8] {
        [request ? 0x02 : 0x03] + le16(mtu)
    }
    /// Find Information Request for the handles `start...end` (descriptor discovery).
    public static func findInformationRequest(start: UInt16, end: UInt16) -> [UInt8] {
        [0x04] + le16(start) + le16(end)
    }
    /// - Precondition: every UUID in `entries` has the same wire size (2 or 16 bytes).
    public static func findInformationResponse(_ entries: [(handle: UInt16, uuid: BluetoothUUID)]) -> [UInt8] {
        let format: UInt8 = entries.first?.uuid.uuid16 != nil ? 1 : 2
        var pdu: [UInt8] = [0x05, format]
        for entry in entries { pdu += le16(entry.handle) + entry.uuid.littleEndianBytes }
        return pdu
    }
    /// Find By Type Value Request (e.g. primary services of one UUID: `type` 0x2800, `value` the UUID).
    public static func findByTypeValueRequest(start: UInt16, end: UInt16, type: UInt16, value: [UInt8]) -> [UInt8] {
        [0x06] + le16(start) + le16(end) + le16(type) + value
    }
    /// Find By Type Value Response: the handle ranges found.
    public static func findByTypeValueResponse(_ ranges: [(found: UInt16, groupEnd: UInt16)]) -> [UInt8] {
        [0x07] + ranges.flatMap { le16($0.found) + le16($0.groupEnd) }
    }
    /// Read By Type Request (characteristic discovery with `type` 0x2803).
    public static func readByTypeRequest(start: UInt16, end: UInt16, type: BluetoothUUID) -> [UInt8] {
        [0x08] + le16(start) + le16(end) + type.littleEndianBytes
    }
    /// - Precondition: all values have the same length.
    public static func readByTypeResponse(_ entries: [(handle: UInt16, value: [UInt8])]) -> [UInt8] {
        let length = 2 + (entries.first?.value.count ?? 0)
        return [0x09, UInt8(truncatingIfNeeded: length)] + entries.flatMap { le16($0.handle) + $0.value }
    }
    /// Read Request for `handle`.
    public static func readRequest(handle: UInt16) -> [UInt8] { [0x0A] + le16(handle) }
    /// Read Response carrying `value`.
    public static func readResponse(_ value: [UInt8]) -> [UInt8] { [0x0B] + value }
    /// Read Blob Request: the part of a long value from `offset`.
    public static func readBlobRequest(handle: UInt16, offset: UInt16) -> [UInt8] {
        [0x0C] + le16(handle) + le16(offset)
    }
    /// Read Blob Response carrying part of a value.
    public static func readBlobResponse(_ value: [UInt8]) -> [UInt8] { [0x0D] + value }
    /// Read By Group Type Request (service discovery with `type` 0x2800).
    public static func readByGroupTypeRequest(start: UInt16, end: UInt16, type: BluetoothUUID) -> [UInt8] {
        [0x10] + le16(start) + le16(end) + type.littleEndianBytes
    }
    /// - Precondition: all UUIDs have the same wire size.
    public static func readByGroupTypeResponse(_ entries: [(start: UInt16, end: UInt16, uuid: BluetoothUUID)]) -> [UInt8] {
        let length = 4 + (entries.first?.uuid.littleEndianBytes.count ?? 2)
        return [0x11, UInt8(length)] + entries.flatMap { le16($0.start) + le16($0.end) + $0.uuid.littleEndianBytes }
    }
    /// Write Request (acknowledged by a Write Response).
    public static func writeRequest(handle: UInt16, value: [UInt8]) -> [UInt8] { [0x12] + le16(handle) + value }
    /// Write Response.
    public static func writeResponse() -> [UInt8] { [0x13] }
    /// Write Command (no response).
    public static func writeCommand(handle: UInt16, value: [UInt8]) -> [UInt8] { [0x52] + le16(handle) + value }
    /// Handle Value Notification (no confirmation).
    public static func notification(handle: UInt16, value: [UInt8]) -> [UInt8] { [0x1B] + le16(handle) + value }
    /// Handle Value Indication (the client confirms it).
    public static func indication(handle: UInt16, value: [UInt8]) -> [UInt8] { [0x1D] + le16(handle) + value }
    /// Handle Value Confirmation.
    public static func confirmation() -> [UInt8] { [0x1E] }

    /// A 16-bit field as ATT sends it, least significant byte first.
    static func le16(_ value: UInt16) -> [UInt8] {
        [UInt8(truncatingIfNeeded: value), UInt8(truncatingIfNeeded: value >> 8)]
    }
}
