/// The proleptic Gregorian calendar, no leap seconds: the one home of the date arithmetic the
/// codec, the domain's wall-clock times and the capture timestamps share.
public enum CivilCalendar {
    /// True for Gregorian leap years.
    @inlinable
    public static func isLeapYear(_ year: Int) -> Bool { (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 }

    /// Days in `month` (1–12) of `year`; a year of 0 (unknown in GLS) counts as a leap year, as in the
    /// proleptic calendar.
    @inlinable
    public static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: return isLeapYear(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a civil date (Howard Hinnant's `days_from_civil`).
    public static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The civil date (year, month, day) `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
    public static func civilFromDays(_ days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    /// Whether the fields name a time that exists: year 1–9999, month 1–12, a day of that month,
    /// hour 0–23, minute and second 0–59.
    public static func isValid(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> Bool {
        guard (1...12).contains(month), (0...23).contains(hour), (0...59).contains(minute), (0...59).contains(second),
            (1...9999).contains(year)
        else { return false }
        return (1...daysInMonth(year: year, month: month)).contains(day)
    }

    /// Seconds since 1970-01-01T00:00:00 of a wall-clock time read as UTC.
    public static func secondsSinceEpoch(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> Int64 {
        Int64(daysFromCivil(year: year, month: month, day: day)) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
    }

    /// The wall-clock time `seconds` after 1970-01-01T00:00:00.
    public static func civil(secondsSinceEpoch seconds: Int64) -> (
        year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int
    ) {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let rest = Int(seconds - days * 86_400)
        let (y, m, d) = civilFromDays(Int(days))
        return (y, m, d, rest / 3600, rest % 3600 / 60, rest % 60)
    }

    /// `2019-02-27T11:10:30` (ISO 8601 date and time, no zone); the year has at least four digits.
    public static func isoString(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> String {
        String(unsafeUninitializedCapacity: isoStringMaxBytes) {
            writeISOString(year: year, month: month, day: day, hour: hour, minute: minute, second: second, into: $0)
        }
    }

    /// The most bytes ``writeISOString(year:month:day:hour:minute:second:into:)`` writes: 6 fields of
    /// at most 20 characters (a sign and 19 digits) and 5 separators.
    public static let isoStringMaxBytes = 128

    /// Writes ``isoString(year:month:day:hour:minute:second:)``'s UTF-8 bytes into `out` (at least
    /// ``isoStringMaxBytes`` long) and returns how many: each field is "-" when negative, then its
    /// digits zero-padded to its width. No String is made, so the store can bind the text from the stack.
    public static func writeISOString(
        year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, into out: UnsafeMutableBufferPointer<UInt8>
    ) -> Int {
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
        put(year, 4, after: nil)
        put(month, 2, after: UInt8(ascii: "-"))
        put(day, 2, after: UInt8(ascii: "-"))
        put(hour, 2, after: UInt8(ascii: "T"))
        put(minute, 2, after: UInt8(ascii: ":"))
        put(second, 2, after: UInt8(ascii: ":"))
        return n
    }

    /// `value` in decimal with leading zeros to `width` digits (a minus sign in front of them).
    public static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value.magnitude)
        return (value < 0 ? "-" : "") + String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
