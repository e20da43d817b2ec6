/// ISO 8601 instants, written and read in one place: the daemon's `iso` and `local` fields, the
/// logs, the exports, sugarctl's arguments and the capture timestamps all use these.
extension CivilCalendar {
    /// The UTC instant `seconds` after the epoch: `2019-02-27T10:10:30Z`, with `fraction` written in
    /// `fractionDigits` digits after a dot when `fractionDigits` is not 0 (`…30.123Z`, `…30.123456Z`).
    public static func isoUTC(secondsSinceEpoch seconds: Int64, fraction: Int = 0, fractionDigits: Int = 0) -> String {
        let t = civil(secondsSinceEpoch: seconds)
        let base = isoString(year: t.year, month: t.month, day: t.day, hour: t.hour, minute: t.minute, second: t.second)
        return fractionDigits == 0 ? base + "Z" : base + "." + pad(fraction, fractionDigits) + "Z"
    }

    /// ISO 8601 in UTC: `2019-02-27T10:10:30Z`, or with milliseconds when they are not zero.
    public static func isoUTC(epochMillis: Int64) -> String {
        let seconds = epochMillis >= 0 ? epochMillis / 1000 : (epochMillis - 999) / 1000
        let millis = Int(epochMillis - seconds * 1000)
        return isoUTC(secondsSinceEpoch: seconds, fraction: millis, fractionDigits: millis == 0 ? 0 : 3)
    }

    /// ISO 8601 with a numeric zone offset, whole seconds: `2019-02-27T11:10:30+01:00`.
    public static func isoString(epochMillis: Int64, utcOffsetSeconds offset: Int) -> String {
        let t = civil(secondsSinceEpoch: (epochMillis / 1000) + Int64(offset))
        return isoString(year: t.year, month: t.month, day: t.day, hour: t.hour, minute: t.minute, second: t.second)
            + isoOffset(seconds: offset)
    }

    /// A numeric zone offset as ISO 8601 writes it after a local time: `+01:00`, `-03:30`, `+00:00`.
    public static func isoOffset(seconds offset: Int) -> String {
        let a = abs(offset)
        return (offset < 0 ? "-" : "+") + pad(a / 3600, 2) + ":" + pad(a % 3600 / 60, 2)
    }

    /// Milliseconds since the epoch for an ISO 8601 instant with a zone (`Z`, `+02:00`, `+0200`,
    /// `+02`), seconds and fractions optional, or a bare date (`2024-03-31`, midnight UTC).
    /// Nil for anything else, including a time without a zone (ambiguous).
    public static func parseISOInstant(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        var i = 0
        func digits(_ count: Int) -> Int? {
            guard i + count <= b.count else { return nil }
            var value = 0
            for k in 0..<count {
                let c = b[i + k]
                guard c >= 48 && c <= 57 else { return nil }
                value = value * 10 + Int(c - 48)
            }
            i += count
            return value
        }
        func expect(_ c: UInt8) -> Bool {
            guard i < b.count, b[i] == c else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect(45), let month = digits(2), expect(45), let day = digits(2) else { return nil }
        guard isValid(year: year, month: month, day: day, hour: 0, minute: 0, second: 0) else { return nil }
        if i == b.count { return secondsSinceEpoch(year: year, month: month, day: day, hour: 0, minute: 0, second: 0) * 1000 }
        guard i < b.count, b[i] == 84 || b[i] == 116 || b[i] == 32 else { return nil }  // T, t or space
        i += 1
        guard let hour = digits(2), expect(58), let minute = digits(2) else { return nil }
        var second = 0
        var millis = 0
        if expect(58) {
            guard let s = digits(2) else { return nil }
            second = s
            if i < b.count, b[i] == 46 || b[i] == 44 {  // . or ,
                i += 1
                var scale = 100
                var any = false
                while i < b.count, b[i] >= 48 && b[i] <= 57 {
                    millis += Int(b[i] - 48) * scale
                    scale /= 10
                    any = true
                    i += 1
                }
                guard any else { return nil }
            }
        }
        guard isValid(year: year, month: month, day: day, hour: hour, minute: minute, second: second) else { return nil }
        guard i < b.count else { return nil }  // no zone
        var offsetSeconds = 0
        if b[i] == 90 || b[i] == 122 {  // Z or z
            i += 1
        } else if b[i] == 43 || b[i] == 45 {  // + or -
            let sign = b[i] == 45 ? -1 : 1
            i += 1
            guard let hh = digits(2), hh <= 23 else { return nil }
            var mm = 0
            if i < b.count {
                _ = expect(58)
                guard let m = digits(2), m <= 59 else { return nil }
                mm = m
            }
            offsetSeconds = sign * (hh * 3600 + mm * 60)
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        let local = secondsSinceEpoch(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        return (local - Int64(offsetSeconds)) * 1000 + Int64(millis)
    }
}
