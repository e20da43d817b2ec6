import GlucoseProfile

/// A calendar date and wall-clock time with no zone: what a meter's clock shows.
///
/// Glucose Profile base times carry no zone; turning one into an instant needs a zone and the
/// meter's clock skew (see ``TimeResolution``). This type does the calendar arithmetic for that
/// (proleptic Gregorian, no leap seconds).
public struct LocalDateTime: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var year: Int
    public var month: Int
    public var day: Int
    public var hour: Int
    public var minute: Int
    public var second: Int

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
        guard (1...12).contains(self.month), (0...23).contains(self.hour), (0...59).contains(self.minute),
            (0...59).contains(self.second), (1...9999).contains(self.year)
        else { return false }
        return (1...CivilCalendar.daysInMonth(year: self.year, month: self.month)).contains(self.day)
    }

    /// `2019-02-27T11:10:30`.
    public var isoString: String {
        String(unsafeUninitializedCapacity: Self.isoStringMaxBytes) { self.writeISOString(into: $0) }
    }

    /// The most bytes ``writeISOString(into:)`` writes: 6 fields of at most 20 characters (a sign and
    /// 19 digits) and 5 separators.
    public static let isoStringMaxBytes = 128

    /// Writes ``isoString``'s UTF-8 bytes into `out` (at least ``isoStringMaxBytes`` long) and
    /// returns how many: each field is "-" when negative, then its digits zero-padded to its width.
    /// No String is made, so the store can bind the text from the stack.
    public func writeISOString(into out: UnsafeMutableBufferPointer<UInt8>) -> Int {
        var n = 0
        func put(_ v: Int, _ width: Int, after separator: UInt8?) {
            if let separator {
                out[n] = separator
                n += 1
            }
            if v < 0 {
                out[n] = UInt8(ascii: "-")
                n += 1
            }
            var digits = v.magnitude
            var count = 1
            while digits >= 10 {
                digits /= 10
                count += 1
            }
            for _ in count..<max(count, width) {
                out[n] = UInt8(ascii: "0")
                n += 1
            }
            digits = v.magnitude
            var position = n + count - 1
            repeat {
                out[position] = UInt8(ascii: "0") + UInt8(digits % 10)
                digits /= 10
                position -= 1
            } while digits > 0
            n += count
        }
        put(self.year, 4, after: nil)
        put(self.month, 2, after: UInt8(ascii: "-"))
        put(self.day, 2, after: UInt8(ascii: "-"))
        put(self.hour, 2, after: UInt8(ascii: "T"))
        put(self.minute, 2, after: UInt8(ascii: ":"))
        put(self.second, 2, after: UInt8(ascii: ":"))
        return n
    }

    public var description: String { self.isoString }

    public static func < (lhs: LocalDateTime, rhs: LocalDateTime) -> Bool {
        lhs.secondsSinceEpoch < rhs.secondsSinceEpoch
    }

    /// Seconds since 1970-01-01T00:00:00 if this wall-clock time were UTC.
    public var secondsSinceEpoch: Int64 {
        Int64(CivilCalendar.daysFromCivil(year: self.year, month: self.month, day: self.day)) * 86_400
            + Int64(self.hour * 3600 + self.minute * 60 + self.second)
    }

    /// The wall-clock time `seconds` after 1970-01-01T00:00:00.
    public init(secondsSinceEpoch seconds: Int64) {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let rest = Int(seconds - days * 86_400)
        let (y, m, d) = CivilCalendar.civilFromDays(Int(days))
        self.init(year: y, month: m, day: d, hour: rest / 3600, minute: rest % 3600 / 60, second: rest % 60)
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
    public var epochMillis: Int64

    public init(epochMillis: Int64) { self.epochMillis = epochMillis }
    public init(epochSeconds: Int64) { self.epochMillis = epochSeconds * 1000 }

    public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.epochMillis < rhs.epochMillis }

    /// ISO 8601 in UTC: `2019-02-27T10:10:30Z`, or with milliseconds when they are not zero.
    public var isoString: String {
        let seconds = self.epochMillis >= 0 ? self.epochMillis / 1000 : (self.epochMillis - 999) / 1000
        let millis = Int(self.epochMillis - seconds * 1000)
        let base = LocalDateTime(secondsSinceEpoch: seconds).isoString
        if millis == 0 { return base + "Z" }
        let ms = String(millis)
        return base + "." + String(repeating: "0", count: 3 - ms.count) + ms + "Z"
    }

    /// ISO 8601 with a numeric zone offset: `2019-02-27T11:10:30+01:00`.
    public func isoString(utcOffsetSeconds offset: Int) -> String {
        let local = LocalDateTime(secondsSinceEpoch: (self.epochMillis / 1000) + Int64(offset))
        let sign = offset < 0 ? "-" : "+"
        let a = abs(offset)
        let hh = a / 3600, mm = a % 3600 / 60
        return local.isoString + sign + (hh < 10 ? "0" : "") + String(hh) + ":" + (mm < 10 ? "0" : "") + String(mm)
    }

    public var description: String { self.isoString }
}
