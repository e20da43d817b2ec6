/// A Bluetooth Date Time (0x2A08 layout, 7 bytes): local wall-clock time with no time zone.
///
/// Zero in `year`, `month` or `day` means "unknown", as the spec allows. Values are stored exactly as
/// received; `validate(field:offset:)` reports fields outside their ranges. Ordering compares the fields
/// from year down to seconds.
public struct DateTime: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// Number of bytes on the wire.
    public static let byteCount = 7

    /// 1582–9999, or 0 when unknown.
    public var year: UInt16
    /// 1–12, or 0 when unknown.
    public var month: UInt8
    /// 1–31 (and within the month), or 0 when unknown.
    public var day: UInt8
    /// 0–23.
    public var hours: UInt8
    /// 0–59.
    public var minutes: UInt8
    /// 0–59.
    public var seconds: UInt8

    /// Creates a date-time from its fields, unvalidated.
    @inlinable
    public init(year: UInt16, month: UInt8, day: UInt8, hours: UInt8 = 0, minutes: UInt8 = 0, seconds: UInt8 = 0) {
        self.year = year
        self.month = month
        self.day = day
        self.hours = hours
        self.minutes = minutes
        self.seconds = seconds
    }

    /// Decodes exactly 7 bytes (a Date Time 0x2A08 characteristic value), validating the fields.
    /// - Parameter options: `.lenientDateTime` keeps out-of-range fields instead of throwing.
    public init(bytes: [UInt8], options: GlucoseParsingOptions = []) throws(GlucoseProfileError) {
        var reader = ByteReader(bytes)
        self = try reader.readDateTime(field: "dateTime", validate: !options.contains(.lenientDateTime))
        try reader.expectEnd(of: "date time")
    }

    /// The 7-byte encoding.
    public func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: Self.byteCount)
        writer.writeDateTime(self)
        return writer.bytes
    }

    /// True when year, month and day are all known (non-zero).
    public var isDateKnown: Bool { self.year != 0 && self.month != 0 && self.day != 0 }

    /// True when every field is within its range (unknown zeros allowed).
    public var isValid: Bool {
        do {
            try self.validate(field: "dateTime", offset: 0)
            return true
        } catch {
            return false
        }
    }

    /// Throws `.outOfRange` for the first field outside its range.
    ///
    /// Ranges: year 1582–9999 or 0, month 1–12 or 0, day 1–31 or 0 and no later than the month's last day
    /// when the month is known (29 February is allowed when the year is unknown), hours 0–23, minutes and
    /// seconds 0–59.
    /// - Parameters:
    ///   - field: name of the whole date-time; errors name `field.month` and so on.
    ///   - offset: offset of the first byte of the date-time in its packet.
    public func validate(field: String, offset: Int) throws(GlucoseProfileError) {
        func fail(_ name: String, _ at: Int, _ value: Int, _ expected: String) -> GlucoseProfileError {
            GlucoseProfileError(
                offset: offset + at, field: field + "." + name, reason: .outOfRange(value: Int(value), expected: expected))
        }
        if self.year != 0 && !(1582...9999).contains(self.year) {
            throw fail("year", 0, Int(self.year), "1582–9999 or 0 (unknown)")
        }
        if self.month > 12 { throw fail("month", 2, Int(self.month), "1–12 or 0 (unknown)") }
        let lastDay = self.month == 0 ? 31 : CivilCalendar.daysInMonth(year: Int(self.year), month: Int(self.month))
        if self.day > lastDay { throw fail("day", 3, Int(self.day), "1–\(lastDay) or 0 (unknown)") }
        if self.hours > 23 { throw fail("hours", 4, Int(self.hours), "0–23") }
        if self.minutes > 59 { throw fail("minutes", 5, Int(self.minutes), "0–59") }
        if self.seconds > 59 { throw fail("seconds", 6, Int(self.seconds), "0–59") }
    }

    /// Returns the date-time, or throws `.outOfRange` naming the first bad field (offset 0 = year).
    public func validated(field: String = "dateTime") throws(GlucoseProfileError) -> DateTime {
        try self.validate(field: field, offset: 0)
        return self
    }

    /// `2019-02-27T11:10:30`: ISO 8601 local time, no zone; unknown fields print as zeros.
    public var isoString: String {
        CivilCalendar.isoString(
            year: Int(self.year), month: Int(self.month), day: Int(self.day), hour: Int(self.hours),
            minute: Int(self.minutes), second: Int(self.seconds))
    }

    /// ``isoString``.
    public var description: String { self.isoString }


    /// Field by field, year first (out-of-range fields compare as their numbers).
    public static func < (lhs: DateTime, rhs: DateTime) -> Bool {
        (lhs.year, lhs.month, lhs.day, lhs.hours, lhs.minutes, lhs.seconds)
            < (rhs.year, rhs.month, rhs.day, rhs.hours, rhs.minutes, rhs.seconds)
    }

    /// The date-time `minutes` later (or earlier when negative), carrying across days, months and years
    /// with leap years.
    ///
    /// Returns nil when the date is not fully known (a zero year, month or day), when any field is out of
    /// range, or when the result leaves 1582–9999. GLS user-facing time is `baseTime.adding(minutes:
    /// timeOffset)`.
    public func adding(minutes delta: Int) -> DateTime? {
        guard self.isDateKnown, self.isValid else { return nil }
        var total = Int(self.hours) * 60 + Int(self.minutes) + delta
        var dayShift = total / 1440
        total %= 1440
        if total < 0 {
            total += 1440
            dayShift -= 1
        }
        var year = Int(self.year)
        var month = Int(self.month)
        var day = Int(self.day) + dayShift
        while day > CivilCalendar.daysInMonth(year: year, month: month) {
            day -= CivilCalendar.daysInMonth(year: year, month: month)
            month += 1
            if month > 12 {
                month = 1
                year += 1
            }
        }
        while day < 1 {
            month -= 1
            if month < 1 {
                month = 12
                year -= 1
            }
            day += CivilCalendar.daysInMonth(year: year, month: month)
        }
        guard (1582...9999).contains(year) else { return nil }
        return DateTime(
            year: UInt16(year), month: UInt8(month), day: UInt8(day), hours: UInt8(total / 60),
            minutes: UInt8(total % 60), seconds: self.seconds)
    }
}

/// Choices for decoding that relax the default checks.
public struct GlucoseParsingOptions: OptionSet, Hashable, Sendable {
    /// The option bits.
    public let rawValue: UInt8
    /// Options from their bits.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Keep Date Time fields that are out of range (the i-SENS month 13) instead of throwing, so the caller
    /// can apply a vendor quirk. Check `DateTime.isValid` afterwards.
    public static let lenientDateTime = GlucoseParsingOptions(rawValue: 1 << 0)
}

/// Current Time (0x2A2B, Current Time Service): the meter's clock, read to measure its skew.
public struct CurrentTime: Hashable, Sendable {
    /// Number of bytes on the wire.
    public static let byteCount = 10

    /// The clock's local date and time.
    public var dateTime: DateTime
    /// 1 Monday … 7 Sunday, 0 unknown (8–255 reserved, kept as received).
    public var dayOfWeek: UInt8
    /// Fractions of a second in 1/256 units.
    public var fractions256: UInt8
    /// Adjust Reason bits: 0 manual update, 1 external reference, 2 time zone change, 3 DST change.
    public var adjustReason: UInt8

    /// Creates a current-time value.
    public init(dateTime: DateTime, dayOfWeek: UInt8 = 0, fractions256: UInt8 = 0, adjustReason: UInt8 = 0) {
        self.dateTime = dateTime
        self.dayOfWeek = dayOfWeek
        self.fractions256 = fractions256
        self.adjustReason = adjustReason
    }

    /// Decodes the 10-byte characteristic value.
    /// Throws `truncated` for fewer than 10 bytes, `outOfRange` for an invalid date-time unless
    /// `options` has ``GlucoseParsingOptions/lenientDateTime``.
    public init(parsing reader: inout ByteReader, options: GlucoseParsingOptions = []) throws(GlucoseProfileError) {
        try reader.require(Self.byteCount, for: "currentTime")
        self.dateTime = try reader.readDateTime(field: "dateTime", validate: !options.contains(.lenientDateTime))
        self.dayOfWeek = try reader.readUInt8(field: "dayOfWeek")
        self.fractions256 = try reader.readUInt8(field: "fractions256")
        self.adjustReason = try reader.readUInt8(field: "adjustReason")
    }

    /// Decodes exactly one 10-byte value; extra bytes are an error.
    /// Throws as ``init(parsing:options:)`` does, and `trailingBytes` after the 10th byte.
    public init(bytes: [UInt8], options: GlucoseParsingOptions = []) throws(GlucoseProfileError) {
        var reader = ByteReader(bytes)
        try self.init(parsing: &reader, options: options)
        try reader.expectEnd(of: "current time")
    }

    /// The 10-byte encoding.
    public func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: Self.byteCount)
        writer.writeDateTime(self.dateTime)
        writer.writeUInt8(self.dayOfWeek)
        writer.writeUInt8(self.fractions256)
        writer.writeUInt8(self.adjustReason)
        return writer.bytes
    }
}

