/// Reads little-endian Glucose Profile fields from a byte array, front to back.
///
/// Method names follow NIO's `ByteBuffer`: `read…` consumes bytes, `peek…` does not. Every read names the
/// field it reads so that a short packet fails with the field and its offset. The reader can cover a
/// sub-range of a larger array, so a benchmark or a capture file can parse many packets without copying.
public struct ByteReader: Sendable {
    /// The underlying storage; only `startIndex..<endIndex` belongs to this reader.
    public let bytes: [UInt8]
    /// Index in `bytes` of the first byte of the packet.
    public let startIndex: Int
    /// Index in `bytes` just past the last byte of the packet.
    public let endIndex: Int
    /// Index in `bytes` of the next byte to read.
    public var readerIndex: Int {
        @inlinable get { self.cursor }
    }
    /// Storage of `readerIndex`, visible to the inlinable readers (callers outside see `readerIndex` only).
    @usableFromInline var cursor: Int

    /// Creates a reader over all of `bytes`.
    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
        self.startIndex = 0
        self.endIndex = bytes.count
        self.cursor = 0
    }

    /// Creates a reader over `range` of `bytes`; offsets in errors count from `range.lowerBound`.
    /// - Precondition: `range` lies within `bytes`.
    public init(_ bytes: [UInt8], range: Range<Int>) {
        precondition(range.lowerBound >= 0 && range.upperBound <= bytes.count, "range outside the byte array")
        self.bytes = bytes
        self.startIndex = range.lowerBound
        self.endIndex = range.upperBound
        self.cursor = range.lowerBound
    }

    /// Offset of the next byte from the start of the packet.
    @inlinable public var offset: Int { self.cursor - self.startIndex }

    /// Number of bytes not read yet.
    @inlinable public var readableBytes: Int { self.endIndex - self.cursor }

    /// Throws `.truncated` unless `count` more bytes are readable. Use it before a group of fields that
    /// the spec makes present together, so the error names the group.
    @inlinable
    public func require(_ count: Int, for field: String) throws(GlucoseProfileError) {
        guard self.readableBytes >= count else {
            throw GlucoseProfileError(
                offset: self.offset, field: field, reason: .truncated(needed: count, available: self.readableBytes))
        }
    }

    /// Throws `.trailingBytes` unless every byte has been read.
    /// - Parameter what: the thing that ended, for the message (`measurement`, `RACP message`).
    public func expectEnd(of what: String) throws(GlucoseProfileError) {
        guard self.readableBytes == 0 else {
            throw GlucoseProfileError(offset: self.offset, field: what, reason: .trailingBytes(count: self.readableBytes))
        }
    }

    /// The next byte without consuming it, or nil at the end.
    public func peekUInt8() -> UInt8? {
        self.readerIndex < self.endIndex ? self.bytes[self.readerIndex] : nil
    }

    /// Reads one byte.
    @inlinable
    public mutating func readUInt8(field: String) throws(GlucoseProfileError) -> UInt8 {
        try self.require(1, for: field)
        let value = self.bytes[self.cursor]
        self.cursor += 1
        return value
    }

    /// Reads a little-endian `uint16`.
    @inlinable
    public mutating func readUInt16LE(field: String) throws(GlucoseProfileError) -> UInt16 {
        try self.require(2, for: field)
        let value = UInt16(self.bytes[self.cursor]) | UInt16(self.bytes[self.cursor + 1]) << 8
        self.cursor += 2
        return value
    }

    /// Reads a little-endian `sint16`.
    /// Throws `truncated` when fewer than 2 bytes are left.
    public mutating func readInt16LE(field: String) throws(GlucoseProfileError) -> Int16 {
        Int16(bitPattern: try self.readUInt16LE(field: field))
    }

    /// Reads an IEEE 11073 16-bit SFLOAT (GLS §3); specials are kept, not converted.
    /// Throws `truncated` when fewer than 2 bytes are left.
    public mutating func readSFloat(field: String) throws(GlucoseProfileError) -> SFloat {
        SFloat(rawValue: try self.readUInt16LE(field: field))
    }

    /// Reads a 7-byte Date Time (0x2A08 layout).
    /// - Parameters:
    ///   - field: name used in errors; sub-fields are reported as `field.month` and so on.
    ///   - validate: when true (the default), out-of-range fields (month 13, hour 24) throw `.outOfRange`.
    public mutating func readDateTime(field: String, validate: Bool = true) throws(GlucoseProfileError) -> DateTime {
        try self.require(DateTime.byteCount, for: field)
        let start = self.offset
        let year = try self.readUInt16LE(field: field)
        let month = try self.readUInt8(field: field)
        let day = try self.readUInt8(field: field)
        let hours = try self.readUInt8(field: field)
        let minutes = try self.readUInt8(field: field)
        let seconds = try self.readUInt8(field: field)
        let value = DateTime(year: year, month: month, day: day, hours: hours, minutes: minutes, seconds: seconds)
        if validate { try value.validate(field: field, offset: start) }
        return value
    }

    /// Consumes `count` bytes a hot-path decoder has read straight from `bytes` (one length check for the
    /// whole packet shape instead of one per field).
    @inlinable
    mutating func skipDecoded(_ count: Int) {
        self.cursor += count
    }

    /// Reads `count` bytes into a new array.
    /// Throws `truncated` when fewer than `count` bytes are left.
    public mutating func readBytes(count: Int, field: String) throws(GlucoseProfileError) -> [UInt8] {
        try self.require(count, for: field)
        let slice = self.bytes[self.readerIndex..<(self.readerIndex + count)]
        self.cursor += count
        return Array(slice)
    }
}

/// Appends little-endian Glucose Profile fields to a byte array; the encoding twin of `ByteReader`.
public struct ByteWriter: Sendable {
    /// The bytes written so far.
    public private(set) var bytes: [UInt8]

    /// Creates an empty writer with room for `capacity` bytes.
    public init(capacity: Int = 20) {
        self.bytes = []
        self.bytes.reserveCapacity(capacity)
    }

    /// Continues after `bytes`, so encoders can append to an existing buffer.
    public init(appendingTo bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Appends one byte.
    public mutating func writeUInt8(_ value: UInt8) { self.bytes.append(value) }

    /// Appends a little-endian `uint16`.
    public mutating func writeUInt16LE(_ value: UInt16) {
        self.bytes.append(UInt8(truncatingIfNeeded: value))
        self.bytes.append(UInt8(truncatingIfNeeded: value >> 8))
    }

    /// Appends a little-endian `sint16`.
    public mutating func writeInt16LE(_ value: Int16) { self.writeUInt16LE(UInt16(bitPattern: value)) }

    /// Appends an SFLOAT bit pattern.
    public mutating func writeSFloat(_ value: SFloat) { self.writeUInt16LE(value.rawValue) }

    /// Appends a 7-byte Date Time, fields as they are (no validation).
    public mutating func writeDateTime(_ value: DateTime) {
        self.writeUInt16LE(value.year)
        self.bytes.append(contentsOf: [value.month, value.day, value.hours, value.minutes, value.seconds])
    }

    /// Appends raw bytes.
    public mutating func writeBytes(_ value: some Sequence<UInt8>) { self.bytes.append(contentsOf: value) }
}

/// A Glucose Profile value with a wire encoding.
public protocol GlucoseProfileEncodable {
    /// Appends the wire encoding to `writer`.
    func serialize(into writer: inout ByteWriter)
}

/// Encoding into a plain byte array, for types that encode into a ``ByteWriter``.
extension GlucoseProfileEncodable {
    /// Appends the wire encoding to `bytes`.
    public func serialize(into bytes: inout [UInt8]) {
        var writer = ByteWriter(appendingTo: bytes)
        bytes = []  // drop the second reference so the append does not copy
        self.serialize(into: &writer)
        bytes = writer.bytes
    }
}
