/// Why a zone description could not be used.
public struct TimeZoneRulesError: Error, Hashable, Sendable, CustomStringConvertible {
    /// One sentence naming what was wrong and where.
    public var message: String

    /// An error saying `message`.
    public init(_ message: String) { self.message = message }

    /// The message.
    public var description: String { self.message }
}

/// The offset from UTC in force at some instant, with its name.
public struct ZoneOffset: Hashable, Sendable {
    /// Seconds east of UTC (Berlin in winter: 3600; New York in winter: −18000).
    public var utcOffsetSeconds: Int
    /// Daylight-saving time is in force.
    public var isDST: Bool
    /// `CET`, `EDT`, `+1030`.
    public var abbreviation: String

    /// An offset of `utcOffsetSeconds` east of UTC, named `abbreviation`.
    public init(utcOffsetSeconds: Int, isDST: Bool, abbreviation: String) {
        self.utcOffsetSeconds = utcOffsetSeconds
        self.isDST = isDST
        self.abbreviation = abbreviation
    }
}

/// How a local wall-clock time mapped to an instant.
public enum LocalTimeKind: String, Hashable, Sendable {
    /// Exactly one instant shows this wall-clock time.
    case unique
    /// The time falls in a gap (clocks jumped forward): it never existed. It is read with the
    /// offset in force before the gap, which lands it after the gap, shifted forward by the gap's length.
    case nonexistent
    /// The time falls in a fold (clocks went back): it happened twice. The earlier instant is taken.
    case ambiguous
}

/// A local wall-clock time resolved to an instant in a zone.
public struct LocalTimeResolution: Hashable, Sendable {
    /// Seconds since 1970-01-01T00:00:00Z.
    public var epochSeconds: Int64
    /// The offset used.
    public var offset: ZoneOffset
    /// Whether the time was unique, in a gap or in a fold.
    public var kind: LocalTimeKind

    /// A resolution to `epochSeconds` with the offset used.
    public init(epochSeconds: Int64, offset: ZoneOffset, kind: LocalTimeKind) {
        self.epochSeconds = epochSeconds
        self.offset = offset
        self.kind = kind
    }
}

/// The rules of one time zone: UTC offsets over time, as read from a TZif file
/// (RFC 8536, versions 1–3, the `/usr/share/zoneinfo` format) or a POSIX `TZ` string.
///
/// This type does no I/O: the caller reads the file and hands over its bytes. Instants after the
/// last transition in the file use the file's POSIX footer rule (version 2+), so "slim" files
/// and dates past 2037 work. Leap-second records are skipped (sugard counts POSIX time).
///
/// Local-to-instant rule (documented, deterministic): a wall-clock time in a fold (clocks went
/// back) resolves to the EARLIER instant; a time in a gap (clocks jumped forward) is read with the
/// offset before the gap, i.e. shifted forward by the gap's length. Both are reported in
/// ``LocalTimeResolution/kind`` so callers can flag them.
public struct TimeZoneRules: Hashable, Sendable {
    /// The IANA name when known (`Europe/Berlin`), else a description such as the TZ string.
    public var identifier: String
    /// Transition instants (seconds since the epoch), ascending.
    var transitions: [Int64]
    /// For each transition, the index into ``types`` in force from it on.
    var transitionTypes: [Int]
    /// The local time types the transitions refer to; the first is in force before the first transition.
    var types: [ZoneOffset]
    /// The rule after the last transition (TZif v2+ footer), when there is one.
    var footer: POSIXTimeZoneRule?

    /// Coordinated Universal Time.
    public static let utc = TimeZoneRules(fixed: ZoneOffset(utcOffsetSeconds: 0, isDST: false, abbreviation: "UTC"), identifier: "UTC")

    /// A zone with one fixed offset.
    public init(fixed offset: ZoneOffset, identifier: String) {
        self.identifier = identifier
        self.transitions = []
        self.transitionTypes = []
        self.types = [offset]
        self.footer = nil
    }

    /// Rules from a POSIX `TZ` string such as `CET-1CEST,M3.5.0,M10.5.0/3`.
    /// - Throws: ``TimeZoneRulesError`` naming the position of the first unreadable character.
    public init(posix: String, identifier: String? = nil) throws(TimeZoneRulesError) {
        let rule = try POSIXTimeZoneRule(parsing: posix)
        self.identifier = identifier ?? posix
        self.transitions = []
        self.transitionTypes = []
        self.types = [rule.standard]
        self.footer = rule
    }

    /// Rules from the bytes of a TZif file (RFC 8536, versions 1, 2 and 3).
    /// - Parameters:
    ///   - tzif: the whole file.
    ///   - identifier: the zone's IANA name, e.g. `Europe/Berlin`.
    /// - Throws: ``TimeZoneRulesError`` when the bytes are not a well-formed TZif file.
    public init(tzif bytes: [UInt8], identifier: String) throws(TimeZoneRulesError) {
        var reader = TZifReader(bytes: bytes)
        let v1 = try reader.readHeader()
        var block = v1
        var timeSize = 4
        if v1.version >= 2 {
            // Skip the v1 data block; the v2+ block repeats it with 64-bit times.
            try reader.skip(v1.dataLength(timeSize: 4))
            block = try reader.readHeader()
            timeSize = 8
        }
        var transitions: [Int64] = []
        transitions.reserveCapacity(block.timecnt)
        for _ in 0..<block.timecnt {
            transitions.append(timeSize == 8 ? try reader.readInt64() : Int64(try reader.readInt32()))
        }
        var transitionTypes: [Int] = []
        for _ in 0..<block.timecnt {
            let index = Int(try reader.readUInt8())
            guard index < block.typecnt else {
                throw TimeZoneRulesError("TZif transition type index \(index) is out of range (\(block.typecnt) types) in \(identifier).")
            }
            transitionTypes.append(index)
        }
        var rawTypes: [(Int, Bool, Int)] = []
        for _ in 0..<block.typecnt {
            let offset = Int(try reader.readInt32())
            let isDST = try reader.readUInt8() != 0
            let abbreviationIndex = Int(try reader.readUInt8())
            rawTypes.append((offset, isDST, abbreviationIndex))
        }
        let chars = Array(try reader.readBytes(block.charcnt))
        try reader.skip(block.leapcnt * (timeSize + 4) + block.isstdcnt + block.isutcnt)
        var types: [ZoneOffset] = []
        for (offset, isDST, index) in rawTypes {
            guard index < max(chars.count, 1) else {
                throw TimeZoneRulesError("TZif abbreviation index \(index) is out of range in \(identifier).")
            }
            let end = chars[index...].firstIndex(of: 0) ?? chars.count
            let abbreviation = String(decoding: chars[index..<end], as: UTF8.self)
            types.append(ZoneOffset(utcOffsetSeconds: offset, isDST: isDST, abbreviation: abbreviation))
        }
        guard !types.isEmpty else { throw TimeZoneRulesError("TZif file for \(identifier) has no local time types.") }
        for i in transitions.indices.dropFirst() where transitions[i] <= transitions[i - 1] {
            throw TimeZoneRulesError("TZif transitions are not ascending at index \(i) in \(identifier).")
        }
        var footer: POSIXTimeZoneRule?
        if v1.version >= 2 {
            let rest = reader.remaining()
            // The footer is "\n<TZ string>\n"; an empty string means "no rule".
            guard rest.first == 0x0A, let close = rest.dropFirst().firstIndex(of: 0x0A) else {
                throw TimeZoneRulesError("TZif v\(v1.version) file for \(identifier) lacks its footer line.")
            }
            let text = String(decoding: rest[(rest.startIndex + 1)..<close], as: UTF8.self)
            if !text.isEmpty { footer = try POSIXTimeZoneRule(parsing: text) }
        }
        self.identifier = identifier
        self.transitions = transitions
        self.transitionTypes = transitionTypes
        self.types = types
        self.footer = footer
    }

    /// The offset in force at an instant.
    /// - Parameter epochSeconds: seconds since 1970-01-01T00:00:00Z.
    public func offset(atEpochSeconds t: Int64) -> ZoneOffset {
        if let last = self.transitions.last, t >= last, let footer = self.footer {
            return footer.offset(at: t)
        }
        if self.transitions.isEmpty {
            if let footer = self.footer { return footer.offset(at: t) }
            return self.types[0]
        }
        if t < self.transitions[0] { return self.types[0] }
        // Largest i with transitions[i] <= t.
        var low = 0
        var high = self.transitions.count - 1
        while low < high {
            let mid = (low + high + 1) / 2
            if self.transitions[mid] <= t { low = mid } else { high = mid - 1 }
        }
        return self.types[self.transitionTypes[low]]
    }

    /// The offset in force at an instant.
    public func offset(at instant: Instant) -> ZoneOffset {
        self.offset(atEpochSeconds: Self.floorSeconds(instant))
    }

    /// The wall-clock time this zone shows at an instant.
    public func localTime(at instant: Instant) -> LocalDateTime {
        let seconds = Self.floorSeconds(instant)
        return LocalDateTime(secondsSinceEpoch: seconds + Int64(self.offset(atEpochSeconds: seconds).utcOffsetSeconds))
    }

    /// Resolves a local wall-clock time to an instant (see the type's rule for gaps and folds).
    public func resolve(_ local: LocalDateTime) -> LocalTimeResolution {
        let wall = local.secondsSinceEpoch
        // Offsets that could apply near this wall time. Two days either side covers every real
        // zone's offset range (±26 h) and every real transition spacing.
        var candidates: [ZoneOffset] = []
        for probe in [wall - 2 * 86_400, wall - 86_400, wall, wall + 86_400, wall + 2 * 86_400] {
            let o = self.offset(atEpochSeconds: probe)
            if !candidates.contains(where: { $0.utcOffsetSeconds == o.utcOffsetSeconds }) { candidates.append(o) }
        }
        var valid: [ZoneOffset] = []
        for c in candidates {
            let utc = wall - Int64(c.utcOffsetSeconds)
            let actual = self.offset(atEpochSeconds: utc)
            if actual.utcOffsetSeconds == c.utcOffsetSeconds { valid.append(actual) }
        }
        if valid.count == 1 {
            return LocalTimeResolution(epochSeconds: wall - Int64(valid[0].utcOffsetSeconds), offset: valid[0], kind: .unique)
        }
        if valid.count > 1 {
            // Fold: the earlier instant has the larger offset.
            let chosen = valid.max(by: { $0.utcOffsetSeconds < $1.utcOffsetSeconds })!
            return LocalTimeResolution(epochSeconds: wall - Int64(chosen.utcOffsetSeconds), offset: chosen, kind: .ambiguous)
        }
        // Gap: the offset before the jump is the smaller one; reading the wall time with it lands
        // after the transition, where the later offset is in force.
        let before = candidates.min(by: { $0.utcOffsetSeconds < $1.utcOffsetSeconds })!
        let utc = wall - Int64(before.utcOffsetSeconds)
        return LocalTimeResolution(epochSeconds: utc, offset: self.offset(atEpochSeconds: utc), kind: .nonexistent)
    }

    /// Whole seconds since the epoch, rounded down (also before 1970).
    static func floorSeconds(_ instant: Instant) -> Int64 {
        instant.epochMillis >= 0 ? instant.epochMillis / 1000 : (instant.epochMillis - 999) / 1000
    }
}

/// Reads big-endian TZif fields with bounds checks.
private struct TZifReader {
    /// The whole file.
    let bytes: [UInt8]
    /// The offset of the next byte.
    var index = 0

    /// A TZif header: the version and the counts of the data block that follows it.
    struct Header {
        /// 1, 2, 3 or 4.
        var version: Int
        /// The RFC 8536 counts: UT/local and standard/wall indicators, leap seconds, transitions, local
        /// time types and abbreviation characters.
        var isutcnt: Int, isstdcnt: Int, leapcnt: Int, timecnt: Int, typecnt: Int, charcnt: Int

        /// The length of the data block after this header, with `timeSize`-byte times (4 in v1, 8 after).
        func dataLength(timeSize: Int) -> Int {
            self.timecnt * timeSize + self.timecnt + self.typecnt * 6 + self.charcnt
                + self.leapcnt * (timeSize + 4) + self.isstdcnt + self.isutcnt
        }
    }

    /// Reads a 44-byte header; throws without the `TZif` magic, for an unknown version or a negative count.
    mutating func readHeader() throws(TimeZoneRulesError) -> Header {
        let start = self.index
        let magic = try self.readBytes(4)
        guard magic.elementsEqual("TZif".utf8) else {
            throw TimeZoneRulesError("Not a TZif file: no \"TZif\" magic at byte \(start).")
        }
        let versionByte = try self.readUInt8()
        let version: Int
        switch versionByte {
        case 0: version = 1
        case UInt8(ascii: "2"), UInt8(ascii: "3"), UInt8(ascii: "4"): version = Int(versionByte - UInt8(ascii: "0"))
        default: throw TimeZoneRulesError("Unknown TZif version byte \(versionByte) at byte \(start + 4).")
        }
        try self.skip(15)
        var counts: [Int] = []
        for _ in 0..<6 {
            let c = try self.readInt32()
            guard c >= 0 else { throw TimeZoneRulesError("Negative TZif count in the header at byte \(start).") }
            counts.append(Int(c))
        }
        return Header(
            version: version, isutcnt: counts[0], isstdcnt: counts[1], leapcnt: counts[2], timecnt: counts[3],
            typecnt: counts[4], charcnt: counts[5])
    }

    /// The next `count` bytes; throws when the file is shorter.
    mutating func readBytes(_ count: Int) throws(TimeZoneRulesError) -> ArraySlice<UInt8> {
        guard count >= 0, self.bytes.count - self.index >= count else {
            throw TimeZoneRulesError("TZif file is truncated: needed \(count) bytes at byte \(self.index) of \(self.bytes.count).")
        }
        defer { self.index += count }
        return self.bytes[self.index..<(self.index + count)]
    }

    /// Skips `count` bytes; throws when the file is shorter.
    mutating func skip(_ count: Int) throws(TimeZoneRulesError) { _ = try self.readBytes(count) }

    /// One byte.
    mutating func readUInt8() throws(TimeZoneRulesError) -> UInt8 { try self.readBytes(1).first! }

    /// A big-endian signed 32-bit number.
    mutating func readInt32() throws(TimeZoneRulesError) -> Int32 {
        var v: UInt32 = 0
        for b in try self.readBytes(4) { v = v << 8 | UInt32(b) }
        return Int32(bitPattern: v)
    }

    /// A big-endian signed 64-bit number.
    mutating func readInt64() throws(TimeZoneRulesError) -> Int64 {
        var v: UInt64 = 0
        for b in try self.readBytes(8) { v = v << 8 | UInt64(b) }
        return Int64(bitPattern: v)
    }

    /// The bytes not read yet (the v2+ footer).
    func remaining() -> ArraySlice<UInt8> { self.bytes[self.index...] }
}
