import GlucoseProfile

/// A calendar date and wall-clock time with no zone: what a meter's clock shows.
///
/// Glucose Profile base times carry no zone; turning one into an instant needs a zone and the
/// meter's clock skew (see ``TimeResolution``). This type does the calendar arithmetic for that
/// (proleptic Gregorian, no leap seconds).
public struct LocalDateTime: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The year (proleptic Gregorian; not checked).
    public var year: Int
    /// 1…12 when valid.
    public var month: Int
    /// 1…31 when valid.
    public var day: Int
    /// 0…23 when valid.
    public var hour: Int
    /// 0…59 when valid.
    public var minute: Int
    /// 0…59 when valid (no leap seconds).
    public var second: Int

    /// A time from its fields, unchecked (see ``isValid``).
    public init(year: Int, month: Int, day: Int, hour: Int = 0, minute: Int = 0, second: Int = 0) {
        self.year = year
        self.month = month
        self.day = day
        self.hour = hour
        self.minute = minute
        self.second = second
    }

    /// Whether every field is within its calendar range (month 1–12, a day that exists in that
    /// month, hour 0–23, minute and second 0–59).
    public var isValid: Bool {
        CivilCalendar.isValid(
            year: self.year, month: self.month, day: self.day, hour: self.hour, minute: self.minute, second: self.second)
    }

    /// `2019-02-27T11:10:30`.
    public var isoString: String {
        CivilCalendar.isoString(
            year: self.year, month: self.month, day: self.day, hour: self.hour, minute: self.minute, second: self.second)
    }

    /// The most bytes ``writeISOString(into:)`` writes.
    public static let isoStringMaxBytes = CivilCalendar.isoStringMaxBytes

    /// Writes ``isoString``'s UTF-8 bytes into `out` (at least ``isoStringMaxBytes`` long) and
    /// returns how many (no String is made, so the store can bind the text from the stack).
    public func writeISOString(into out: UnsafeMutableBufferPointer<UInt8>) -> Int {
        CivilCalendar.writeISOString(
            year: self.year, month: self.month, day: self.day, hour: self.hour, minute: self.minute, second: self.second,
            into: out)
    }

    /// ``isoString``.
    public var description: String { self.isoString }

    /// Earlier wall-clock time first.
    public static func < (lhs: LocalDateTime, rhs: LocalDateTime) -> Bool {
        lhs.secondsSinceEpoch < rhs.secondsSinceEpoch
    }

    /// Seconds since 1970-01-01T00:00:00 if this wall-clock time were UTC.
    public var secondsSinceEpoch: Int64 {
        CivilCalendar.secondsSinceEpoch(
            year: self.year, month: self.month, day: self.day, hour: self.hour, minute: self.minute, second: self.second)
    }

    /// The wall-clock time `seconds` after 1970-01-01T00:00:00.
    public init(secondsSinceEpoch seconds: Int64) {
        let t = CivilCalendar.civil(secondsSinceEpoch: seconds)
        self.init(year: t.year, month: t.month, day: t.day, hour: t.hour, minute: t.minute, second: t.second)
    }

    /// This time moved by a number of seconds, with calendar carry.
    public func adding(seconds: Int64) -> LocalDateTime {
        LocalDateTime(secondsSinceEpoch: self.secondsSinceEpoch + seconds)
    }
}

/// The wall clock as the domain sees it: the one shape of "now" that is injected where time is
/// recorded (the sync engine's session times, the view model's bridge, the store's `storedAt`), so
/// tests pass a fixed or stepping clock. Production passes GlucoseStore's `systemNow`, which reads
/// SystemIO's `wallClockMilliseconds`. Scheduling runs on the monotonic ``SyncClock`` instead.
public typealias WallClock = @Sendable () -> Instant

/// An instant, as milliseconds since 1970-01-01T00:00:00Z.
public struct Instant: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Milliseconds since 1970-01-01T00:00:00Z (negative before).
    public var epochMillis: Int64

    /// The instant `epochMillis` ms after the epoch.
    public init(epochMillis: Int64) { self.epochMillis = epochMillis }
    /// The instant `epochSeconds` s after the epoch.
    public init(epochSeconds: Int64) { self.epochMillis = epochSeconds * 1000 }

    /// Earlier instant first.
    public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.epochMillis < rhs.epochMillis }

    /// ISO 8601 in UTC: `2019-02-27T10:10:30Z`, or with milliseconds when they are not zero.
    public var isoString: String { CivilCalendar.isoUTC(epochMillis: self.epochMillis) }

    /// ISO 8601 with a numeric zone offset: `2019-02-27T11:10:30+01:00`.
    public func isoString(utcOffsetSeconds offset: Int) -> String {
        CivilCalendar.isoString(epochMillis: self.epochMillis, utcOffsetSeconds: offset)
    }

    /// ``isoString``.
    public var description: String { self.isoString }
}
