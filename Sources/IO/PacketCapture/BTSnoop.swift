internal import Glibc
internal import SystemIO

/// The datalink types PacketCapture reads and writes (btsnoop header field 3).
public enum BTSnoopDatalink: UInt32, Sendable, Hashable, CustomStringConvertible {
    /// Raw HCI without the H4 type byte; the record flags tell command/event from data.
    case hciUnencapsulated = 1001
    /// HCI UART (H4): each record starts with the H4 packet type byte. Android's `btsnoop_hci.log`.
    case hciUART = 1002
    /// Linux monitor format (`btmon -w`): flags carry `controllerIndex << 16 | opcode`.
    case monitor = 2001

    /// The datalink's name with its number, e.g. `HCI UART/H4 (1002)`.
    public var description: String {
        switch self {
        case .hciUnencapsulated: "HCI (1001)"
        case .hciUART: "HCI UART/H4 (1002)"
        case .monitor: "Linux monitor (2001)"
        }
    }
}

/// Opcodes of the Linux monitor format (BlueZ `src/shared/btsnoop.h`), the low 16 bits of a 2001 record's flags.
public struct MonitorOpcode: Hashable, Sendable, CustomStringConvertible {
    /// The opcode (low 16 bits of the record flags).
    public let rawValue: UInt16
    /// Wraps any value; unknown opcodes are kept.
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// A controller was added (its index appears).
    public static let newIndex = MonitorOpcode(rawValue: 0)
    /// A controller was removed: its connections are gone.
    public static let deleteIndex = MonitorOpcode(rawValue: 1)
    /// An HCI command to the controller.
    public static let commandPacket = MonitorOpcode(rawValue: 2)
    /// An HCI event from the controller.
    public static let eventPacket = MonitorOpcode(rawValue: 3)
    /// ACL data sent by the host.
    public static let aclTX = MonitorOpcode(rawValue: 4)
    /// ACL data received by the host.
    public static let aclRX = MonitorOpcode(rawValue: 5)
    /// SCO data sent.
    public static let scoTX = MonitorOpcode(rawValue: 6)
    /// SCO data received.
    public static let scoRX = MonitorOpcode(rawValue: 7)
    /// A controller was opened (powered up).
    public static let openIndex = MonitorOpcode(rawValue: 8)
    /// A controller was closed (powered down): its connections are gone.
    public static let closeIndex = MonitorOpcode(rawValue: 9)
    /// A controller's address and manufacturer.
    public static let indexInfo = MonitorOpcode(rawValue: 10)
    /// A vendor diagnostic packet.
    public static let vendorDiagnostic = MonitorOpcode(rawValue: 11)
    /// A text note (also the redactor's placeholder, "redacted").
    public static let systemNote = MonitorOpcode(rawValue: 12)
    /// A log line of a user-space program (bluetoothd).
    public static let userLogging = MonitorOpcode(rawValue: 13)
    /// A management-socket client opened.
    public static let controlOpen = MonitorOpcode(rawValue: 14)
    /// A management-socket client closed.
    public static let controlClose = MonitorOpcode(rawValue: 15)
    /// A management command (it may carry keys bluetoothd loads).
    public static let controlCommand = MonitorOpcode(rawValue: 16)
    /// A management event.
    public static let controlEvent = MonitorOpcode(rawValue: 17)
    /// ISO data sent.
    public static let isoTX = MonitorOpcode(rawValue: 18)
    /// ISO data received.
    public static let isoRX = MonitorOpcode(rawValue: 19)

    /// `monitor opcode N`.
    public var description: String { "monitor opcode \(self.rawValue)" }
}

/// The H4 packet type byte (first byte of a 1002 record).
public enum H4PacketType: UInt8, Sendable, Hashable {
    /// HCI command (host to controller).
    case command = 0x01
    /// ACL data, either direction.
    case acl = 0x02
    /// SCO (voice) data; ignored.
    case sco = 0x03
    /// HCI event (controller to host).
    case event = 0x04
    /// ISO data; ignored.
    case iso = 0x05
}

/// Builders for the 32-bit record flags field.
public enum BTSnoopFlags {
    /// 1001/1002 flags: bit 0 = received (controller to host), bit 1 = command or event (not data).
    public static func hci(direction: Direction, commandOrEvent: Bool) -> UInt32 {
        (direction == .received ? 1 : 0) | (commandOrEvent ? 2 : 0)
    }

    /// 2001 flags: controller index in the high 16 bits, monitor opcode in the low 16.
    public static func monitor(index: UInt16, opcode: MonitorOpcode) -> UInt32 {
        UInt32(index) << 16 | UInt32(opcode.rawValue)
    }
}

/// The header of one btsnoop record. All fields are big-endian on disk.
public struct BTSnoopRecord: Sendable, Hashable {
    /// 1-based position of the record in the file.
    public var frame: Int
    /// Length of the packet as it was on the wire.
    public var originalLength: Int
    /// Bytes of it stored in the file; less than `originalLength` when the capture cut the packet.
    public var includedLength: Int
    /// The record flags; their meaning depends on the datalink (see ``BTSnoopFlags``).
    public var flags: UInt32
    /// Packets the capturing tool lost since the capture began (cumulative).
    public var cumulativeDrops: UInt32
    /// When the packet was captured.
    public var timestamp: CaptureTimestamp

    /// A record header with every field given.
    public init(
        frame: Int, originalLength: Int, includedLength: Int, flags: UInt32, cumulativeDrops: UInt32,
        timestamp: CaptureTimestamp
    ) {
        self.frame = frame
        self.originalLength = originalLength
        self.includedLength = includedLength
        self.flags = flags
        self.cumulativeDrops = cumulativeDrops
        self.timestamp = timestamp
    }

    /// True when the stored bytes are fewer than the packet had.
    public var isSnapped: Bool { self.includedLength < self.originalLength }
}

/// A record with a copy of its bytes (convenience; the hot path uses `BTSnoopReader.withNextRecord`).
public struct BTSnoopFrame: Sendable, Hashable {
    /// The record's header.
    public var record: BTSnoopRecord
    /// The record's stored bytes (`includedLength` of them).
    public var payload: [UInt8]
}

/// The file ended inside a record: its header or its data is incomplete.
public struct TruncatedRecord: Sendable, Hashable, CustomStringConvertible {
    /// The frame number the incomplete record would have had.
    public var frame: Int
    /// Bytes the record needs (24-byte header plus included length, when the header is complete).
    public var expectedBytes: Int
    /// Bytes the file still had.
    public var availableBytes: Int

    /// One sentence naming the frame and the bytes present and needed.
    public var description: String {
        "The capture ends inside frame \(self.frame): \(self.availableBytes) of \(self.expectedBytes) bytes are present."
    }
}

/// Streaming btsnoop reader. Reads the file in 1 MiB chunks into one reused buffer, so memory stays
/// flat however large the capture is.
///
/// Not thread-safe: one reader, one owner.
public final class BTSnoopReader {
    /// The datalink type from the file header.
    public let datalink: BTSnoopDatalink
    /// The format version from the file header (always 1).
    public let version: UInt32
    /// Set when the file ended inside a record; `withNextRecord` then returns nil.
    public var truncatedTail: TruncatedRecord? { self.cursor.truncatedTail }
    /// Records returned so far (also the frame number of the last one).
    public var framesRead: Int { self.cursor.framesRead }
    /// Bytes consumed from the input, header included.
    public var bytesRead: Int { self.cursor.bytesRead }

    // All mutable state sits in one struct so the hot path pays one exclusivity check per record.
    /// The buffer and the position in the input.
    private var cursor: RecordCursor

    /// Default ceiling on a record's included length: the largest H4 ACL packet (1 + 4 + 65535) with room
    /// for monitor metadata. Longer records mean a corrupt file.
    public static let defaultMaxRecordLength = 65_600

    /// Opens a btsnoop file and checks its header.
    /// - Parameters:
    ///   - path: The file to read.
    ///   - maxRecordLength: Included lengths above this are treated as corruption.
    /// - Throws: `CaptureError` (`.io`, `.notBTSnoop`, `.unsupportedVersion`, `.unsupportedDatalink`).
    public convenience init(path: String, maxRecordLength: Int = BTSnoopReader.defaultMaxRecordLength)
        throws(CaptureError)
    {
        try self.init(path: path, bytes: [], maxRecordLength: maxRecordLength)
    }

    /// Reads a btsnoop image held in memory (tests, fuzzing).
    /// - Throws: `CaptureError` (`.notBTSnoop`, `.unsupportedVersion`, `.unsupportedDatalink`).
    public convenience init(bytes: [UInt8], maxRecordLength: Int = BTSnoopReader.defaultMaxRecordLength)
        throws(CaptureError)
    {
        try self.init(path: nil, bytes: bytes, maxRecordLength: maxRecordLength)
    }

    /// Opens `path`, or reads `bytes` when `path` is nil, and checks the header.
    private init(path: String?, bytes: [UInt8], maxRecordLength: Int) throws(CaptureError) {
        (self.cursor, self.datalink) = try RecordCursor.open(path: path, bytes: bytes, maxRecordLength: maxRecordLength)
        self.version = 1  // `open` accepts no other version.
    }

    /// Reads the next record and lends its bytes to `body`; the bytes are valid only inside `body`.
    /// - Returns: `body`'s result, or nil at the end of the file (check `truncatedTail` afterwards).
    /// - Throws: `CaptureError` `.corruptRecord` for an absurd length (the frame number is set), `.io`.
    public func withNextRecord<R>(_ body: (BTSnoopRecord, UnsafeRawBufferPointer) -> R) throws(CaptureError) -> R? {
        guard let (record, payload) = try self.cursor.next() else { return nil }
        return body(record, payload)
    }

    /// The next record; its bytes stay valid until the next call (internal hot path).
    func nextRecord() throws(CaptureError) -> (BTSnoopRecord, UnsafeRawBufferPointer)? {
        try self.cursor.next()
    }

    /// Reads the next record and copies its bytes. Allocates; prefer `withNextRecord` in loops.
    public func next() throws(CaptureError) -> BTSnoopFrame? {
        try self.withNextRecord { record, payload in BTSnoopFrame(record: record, payload: Array(payload)) }
    }
}

/// Owns the read buffer and the file descriptor.
final class InputStorage {
    /// The open file, closed with the storage; nil for an in-memory image.
    let fd: Int32?
    /// `file <path>` or `capture image`, for messages.
    let name: String
    /// The read buffer: 1 MiB for files, 64 KiB for images, and always room for the largest record.
    let buffer: UnsafeMutableRawBufferPointer

    /// Takes ownership of `fd` and allocates a buffer of `capacity` bytes.
    init(fd: Int32?, name: String, capacity: Int) {
        self.fd = fd
        self.name = name
        self.buffer = .allocate(byteCount: capacity, alignment: 16)
    }

    deinit {
        if let fd = self.fd { _ = close(fd) }
        self.buffer.deallocate()
    }
}

/// Record framing over a reusable buffer refilled from a file or an in-memory image.
struct RecordCursor {
    /// The buffer and the file.
    let storage: InputStorage
    /// The in-memory image, when there is no file.
    private let memory: [UInt8]
    /// How much of `memory` was copied into the buffer.
    private var memoryPosition = 0
    /// Included lengths above this are corruption.
    private let maxRecordLength: Int
    /// Offset in the buffer of the first unconsumed byte.
    private var start = 0
    /// Offset in the buffer after the last byte read.
    private var end = 0
    /// The input is exhausted.
    private var atEOF = false
    /// Set when the input ended inside a record; no record is returned after it.
    private(set) var truncatedTail: TruncatedRecord?
    /// Records returned (and damaged records skipped).
    private(set) var framesRead = 0
    /// Bytes consumed, file header included.
    private(set) var bytesRead = 0
    /// Timestamp of the last good record, for resynchronizing after a damaged one.
    private var lastTimestamp: Int64?

    /// A cursor at the start of the input, before the header is read.
    init(storage: InputStorage, memory: [UInt8], maxRecordLength: Int) {
        self.storage = storage
        self.memory = memory
        self.maxRecordLength = maxRecordLength
    }

    /// Opens a file (path) or image (bytes) and reads its header.
    static func open(path: String?, bytes: [UInt8], maxRecordLength: Int) throws(CaptureError)
        -> (RecordCursor, BTSnoopDatalink)
    {
        let storage: InputStorage
        if let path {
            let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                throw CaptureError(.io, "Cannot open \(path): \(String(cString: strerror(errno))).")
            }
            storage = InputStorage(fd: fd, name: "file \(path)", capacity: max(1 << 20, maxRecordLength + 64))
        } else {
            storage = InputStorage(fd: nil, name: "capture image", capacity: max(1 << 16, maxRecordLength + 64))
        }
        var cursor = RecordCursor(storage: storage, memory: bytes, maxRecordLength: maxRecordLength)
        let (_, datalink) = try cursor.readFileHeader()
        return (cursor, datalink)
    }

    /// Checks and consumes the 16-byte file header.
    mutating func readFileHeader() throws(CaptureError) -> (version: UInt32, datalink: BTSnoopDatalink) {
        let name = self.storage.name
        let available = try self.ensure(16)
        guard available >= 16 else {
            throw CaptureError(.notBTSnoop, "The \(name) is \(available) bytes, too short for a btsnoop header.")
        }
        let header = self.window(16)
        let magic: [UInt8] = Array("btsnoop".utf8) + [0]
        guard header.prefix(8).elementsEqual(magic) else {
            throw CaptureError(.notBTSnoop, "The \(name) is not a btsnoop capture (no “btsnoop” magic).")
        }
        let version = header.loadBE32(at: 8)
        guard version == 1 else {
            throw CaptureError(.unsupportedVersion, "The \(name) has btsnoop version \(version); only 1 exists.")
        }
        let link = header.loadBE32(at: 12)
        guard let datalink = BTSnoopDatalink(rawValue: link) else {
            throw CaptureError(
                .unsupportedDatalink,
                "The \(name) has datalink type \(link); supported are 1001, 1002 (H4) and 2001 (btmon).")
        }
        self.consume(16)
        return (version, datalink)
    }

    /// The next record and a view of its bytes, valid until the next call.
    mutating func next() throws(CaptureError) -> (BTSnoopRecord, UnsafeRawBufferPointer)? {
        guard self.truncatedTail == nil else { return nil }
        let frame = self.framesRead + 1
        let headerBytes = try self.ensure(24)
        if headerBytes < 24 {
            if headerBytes > 0 {
                self.truncatedTail = TruncatedRecord(frame: frame, expectedBytes: 24, availableBytes: headerBytes)
            }
            return nil
        }
        let header = self.window(24)
        let originalLength = header.loadBE32(at: 0)
        let includedLength = header.loadBE32(at: 4)
        guard includedLength <= self.maxRecordLength else {
            throw CaptureError(
                .corruptRecord, frame: frame,
                "Frame \(frame) claims \(includedLength) bytes (limit \(self.maxRecordLength)); the capture is corrupt from there on.")
        }
        let total = 24 + Int(includedLength)
        let available = try self.ensure(total)
        guard available >= total else {
            self.truncatedTail = TruncatedRecord(frame: frame, expectedBytes: total, availableBytes: available)
            return nil
        }
        let window = self.window(total)
        let record = BTSnoopRecord(
            frame: frame, originalLength: Int(originalLength), includedLength: Int(includedLength),
            flags: window.loadBE32(at: 8), cumulativeDrops: window.loadBE32(at: 12),
            timestamp: CaptureTimestamp(microsecondsSinceYear0: Int64(bitPattern: window.loadBE64(at: 16))))
        // The bytes stay in place until the next `ensure`, which only happens on the next call.
        self.consume(total)
        self.framesRead = frame
        self.lastTimestamp = record.timestamp.microsecondsSinceYear0
        return (record, UnsafeRawBufferPointer(rebasing: window[24..<total]))
    }

    /// After `next()` threw `.corruptRecord`: counts the damaged record as a frame and skips forward byte
    /// by byte to the next plausible record header (length within the limit and not above the original
    /// length, flags that fit the datalink, a timestamp within a day of the last good record's, the whole
    /// record present, and the header after it plausible too or the end of the file right after it).
    /// - Returns: the bytes skipped, or nil when nothing plausible follows (the rest is consumed).
    mutating func resynchronize(datalink: BTSnoopDatalink) throws(CaptureError) -> Int? {
        self.framesRead += 1
        var skipped = 0
        while true {
            self.consume(1)
            skipped += 1
            let available = try self.ensure(24)
            if available < 24 {
                self.consume(available)
                return nil
            }
            guard let length = self.plausibleRecord(at: 0, datalink: datalink, whole: true) else { continue }
            let withNext = try self.ensure(length + 24)
            if withNext == length
                || (withNext >= length + 24 && self.plausibleRecord(at: length, datalink: datalink, whole: false) != nil)
            {
                return skipped
            }
        }
    }

    /// The total length of a plausible record whose header starts `offset` bytes into the available
    /// bytes, or nil (with `whole`, also nil when the record is not wholly available).
    private func plausibleRecord(at offset: Int, datalink: BTSnoopDatalink, whole: Bool) -> Int? {
        guard self.end - self.start >= offset + 24 else { return nil }
        let header = UnsafeRawBufferPointer(rebasing: self.window(offset + 24)[offset...])
        let original = header.loadBE32(at: 0)
        let included = header.loadBE32(at: 4)
        let flags = header.loadBE32(at: 8)
        let timestamp = Int64(bitPattern: header.loadBE64(at: 16))
        guard included >= 1, included <= self.maxRecordLength, included <= original, original <= 0x1_0000 + 64 else { return nil }
        switch datalink {
        case .monitor: guard flags & 0xFFFF <= 0x40 else { return nil }
        default: guard flags <= 3 else { return nil }
        }
        if let last = self.lastTimestamp, (timestamp &- last).magnitude > 86_400_000_000 { return nil }
        let total = 24 + Int(included)
        return !whole || self.end - self.start >= offset + total ? total : nil
    }

    /// Makes at least `count` bytes available if the input has them; returns how many are available.
    mutating func ensure(_ count: Int) throws(CaptureError) -> Int {
        if self.end - self.start >= count || self.atEOF { return self.end - self.start }
        let buffer = self.storage.buffer
        precondition(count <= buffer.count, "Internal inconsistency: record larger than the read buffer")
        if self.start > 0 {
            let pending = self.end - self.start
            if pending > 0 { buffer.baseAddress!.copyMemory(from: buffer.baseAddress! + self.start, byteCount: pending) }
            self.start = 0
            self.end = pending
        }
        while self.end < count && !self.atEOF {
            let got = try self.fill(UnsafeMutableRawBufferPointer(rebasing: buffer[self.end...]))
            if got == 0 { self.atEOF = true } else { self.end += got }
        }
        return self.end - self.start
    }

    /// Reads more input into `target`: from the file (EINTR retried) or the image. 0 at the end;
    /// throws `.io` when `read` fails.
    private mutating func fill(_ target: UnsafeMutableRawBufferPointer) throws(CaptureError) -> Int {
        guard let fd = self.storage.fd else {
            let count = min(target.count, self.memory.count - self.memoryPosition)
            if count > 0 {
                let position = self.memoryPosition
                self.memory.withUnsafeBytes { source in
                    target.baseAddress!.copyMemory(from: source.baseAddress! + position, byteCount: count)
                }
                self.memoryPosition += count
            }
            return count
        }
        let got = retryingInterrupted { read(fd, target.baseAddress, target.count) }
        if got >= 0 { return got }
        throw CaptureError(.io, "Reading the \(self.storage.name) failed: \(String(cString: strerror(errno))).")
    }

    /// The first `count` available bytes; valid until the next `ensure`.
    func window(_ count: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: self.storage.buffer.baseAddress! + self.start, count: count)
    }

    /// Steps over `count` available bytes.
    mutating func consume(_ count: Int) {
        self.start += count
        self.bytesRead += count
    }
}
