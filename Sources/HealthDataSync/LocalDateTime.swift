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
        return (1...LocalDateTime.daysInMonth(year: self.year, month: self.month)).contains(self.day)
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

    public static func isLeapYear(_ year: Int) -> Bool { (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 }

    public static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: return isLeapYear(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Seconds since 1970-01-01T00:00:00 if this wall-clock time were UTC.
    public var secondsSinceEpoch: Int64 {
        Int64(LocalDateTime.daysFromCivil(year: self.year, month: self.month, day: self.day)) * 86_400
            + Int64(self.hour * 3600 + self.minute * 60 + self.second)
    }

    /// The wall-clock time `seconds` after 1970-01-01T00:00:00.
    public init(secondsSinceEpoch seconds: Int64) {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let rest = Int(seconds - days * 86_400)
        let (y, m, d) = LocalDateTime.civilFromDays(Int(days))
        self.init(year: y, month: m, day: d, hour: rest / 3600, minute: rest % 3600 / 60, second: rest % 60)
    }

    /// This time moved by a number of seconds, with calendar carry.
    public func adding(seconds: Int64) -> LocalDateTime {
        LocalDateTime(secondsSinceEpoch: self.secondsSinceEpoch + seconds)
    }

    // Howard Hinnant's days_from_civil / civil_from_days algorithms.
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civilFromDays(_ z0: Int) -> (Int, Int, Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }
}

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
