import GlucoseProfile

/// A POSIX `TZ` rule such as `CET-1CEST,M3.5.0,M10.5.0/3` (POSIX.1 §8.3, with the RFC 8536 §3.3.1
/// extensions: hours up to 167 and negative transition times).
struct POSIXTimeZoneRule: Hashable, Sendable {
    /// A transition date rule.
    enum DateRule: Hashable, Sendable {
        /// `Jn`: day 1…365, February 29 never counted.
        case julianNoLeap(Int)
        /// `n`: day 0…365, February 29 counted.
        case zeroBased(Int)
        /// `Mm.w.d`: weekday d (0 = Sunday) of week w (5 = last) of month m.
        case monthWeekDay(month: Int, week: Int, weekday: Int)
    }

    /// When daylight time starts or ends in a year: a date rule and a local time.
    struct Transition: Hashable, Sendable {
        /// The day of the year.
        var date: DateRule
        /// Seconds after local midnight (may be negative or beyond 24 h).
        var time: Int
    }

    /// The standard offset (the name before the first offset); the only one when ``daylight`` is nil.
    var standard: ZoneOffset
    /// The daylight offset; nil for a rule without daylight time. Without a written offset it is one
    /// hour ahead of standard time.
    var daylight: ZoneOffset?
    /// When daylight time starts (read in standard time); the US rule (`M3.2.0,M11.1.0`, 02:00) when
    /// the rule names daylight time but no dates.
    var start: Transition?
    /// When daylight time ends (read in daylight time).
    var end: Transition?

    /// Parses a rule; throws a `TimeZoneRulesError` naming the character position for a name shorter
    /// than 3 characters, a number or field out of range, or text after the end rule.
    init(parsing text: String) throws(TimeZoneRulesError) {
        var p = Parser(chars: Array(text.unicodeScalars), text: text)
        let stdName = try p.name()
        let stdOffset = -(try p.offset(maxHours: 24))
        self.standard = ZoneOffset(utcOffsetSeconds: stdOffset, isDST: false, abbreviation: stdName)
        if p.atEnd {
            self.daylight = nil
            return
        }
        let dstName = try p.name()
        var dstOffset = stdOffset + 3600
        if let c = p.peek, c != "," { dstOffset = -(try p.offset(maxHours: 24)) }
        self.daylight = ZoneOffset(utcOffsetSeconds: dstOffset, isDST: true, abbreviation: dstName)
        if p.atEnd {
            // POSIX leaves the default rule to the implementation; glibc uses the US rule.
            self.start = Transition(date: .monthWeekDay(month: 3, week: 2, weekday: 0), time: 7200)
            self.end = Transition(date: .monthWeekDay(month: 11, week: 1, weekday: 0), time: 7200)
            return
        }
        try p.expect(",")
        self.start = try p.transition()
        try p.expect(",")
        self.end = try p.transition()
        guard p.atEnd else { throw p.error("unexpected text after the end rule") }
    }

    /// The offset in force at an instant.
    func offset(at t: Int64) -> ZoneOffset {
        guard let daylight = self.daylight, let start = self.start, let end = self.end else { return self.standard }
        let year = LocalDateTime(secondsSinceEpoch: t + Int64(self.standard.utcOffsetSeconds)).year
        var changes: [(at: Int64, dst: Bool)] = []
        for y in (year - 1)...(year + 1) {
            // The start time is read in standard time, the end time in daylight time.
            changes.append((Self.localSeconds(start, year: y) - Int64(self.standard.utcOffsetSeconds), true))
            changes.append((Self.localSeconds(end, year: y) - Int64(daylight.utcOffsetSeconds), false))
        }
        // On a tie, daylight wins: that is how "all year DST" rules (`0/0,J365/25`) are written.
        changes.sort { $0.at != $1.at ? $0.at < $1.at : (!$0.dst && $1.dst) }
        var inDST = false
        for change in changes where change.at <= t { inDST = change.dst }
        return inDST ? daylight : self.standard
    }

    /// Seconds since the epoch of a transition's local wall-clock time in a year, as if UTC.
    static func localSeconds(_ transition: Transition, year: Int) -> Int64 {
        let jan1 = CivilCalendar.daysFromCivil(year: year, month: 1, day: 1)
        let day: Int
        switch transition.date {
        case .julianNoLeap(let n):
            day = jan1 + n - 1 + (CivilCalendar.isLeapYear(year) && n >= 60 ? 1 : 0)
        case .zeroBased(let n):
            day = jan1 + n
        case .monthWeekDay(let month, let week, let weekday):
            let first = CivilCalendar.daysFromCivil(year: year, month: month, day: 1)
            let firstWeekday = ((first + 4) % 7 + 7) % 7  // 1970-01-01 was a Thursday.
            var dom = 1 + ((weekday - firstWeekday) % 7 + 7) % 7 + (week - 1) * 7
            let length = CivilCalendar.daysInMonth(year: year, month: month)
            while dom > length { dom -= 7 }
            day = first + dom - 1
        }
        return Int64(day) * 86_400 + Int64(transition.time)
    }

    /// A cursor over the rule's characters.
    private struct Parser {
        /// The rule as Unicode scalars.
        let chars: [Unicode.Scalar]
        /// The rule as written, for error messages.
        let text: String
        /// The position of the next character.
        var i = 0

        /// Whether every character has been read.
        var atEnd: Bool { self.i >= self.chars.count }
        /// The next character without reading it; nil at the end.
        var peek: Unicode.Scalar? { self.atEnd ? nil : self.chars[self.i] }

        /// An error naming the rule, what was wrong and the position.
        func error(_ what: String) -> TimeZoneRulesError {
            TimeZoneRulesError("Unreadable TZ rule \"\(self.text)\": \(what) at character \(self.i).")
        }

        /// Reads the character `c`; throws when the next one is another.
        mutating func expect(_ c: Unicode.Scalar) throws(TimeZoneRulesError) {
            guard self.peek == c else { throw self.error("expected \"\(c)\"") }
            self.i += 1
        }

        /// A zone abbreviation: alphabetic ASCII, or anything between `<` and `>` (`<+0330>`); at least 3
        /// characters.
        mutating func name() throws(TimeZoneRulesError) -> String {
            var out = ""
            if self.peek == "<" {
                self.i += 1
                while let c = self.peek, c != ">" {
                    out.unicodeScalars.append(c)
                    self.i += 1
                }
                try self.expect(">")
            } else {
                while let c = self.peek, c.properties.isAlphabetic, c.isASCII {
                    out.unicodeScalars.append(c)
                    self.i += 1
                }
            }
            guard out.unicodeScalars.count >= 3 else { throw self.error("zone abbreviation shorter than 3 characters") }
            return out
        }

        /// A decimal number of 1 to 4 digits.
        mutating func number() throws(TimeZoneRulesError) -> Int {
            var value = 0
            var digits = 0
            while let c = self.peek, ("0"..."9").contains(c) {
                value = value * 10 + Int(c.value - 48)
                digits += 1
                self.i += 1
                guard digits <= 4 else { throw self.error("number too long") }
            }
            guard digits > 0 else { throw self.error("expected a number") }
            return value
        }

        /// `[+-]hh[:mm[:ss]]` in seconds, sign as written.
        mutating func offset(maxHours: Int) throws(TimeZoneRulesError) -> Int {
            var sign = 1
            if self.peek == "+" {
                self.i += 1
            } else if self.peek == "-" {
                sign = -1
                self.i += 1
            }
            let hours = try self.number()
            guard hours <= maxHours else { throw self.error("hours out of range") }
            var seconds = hours * 3600
            if self.peek == ":" {
                self.i += 1
                let minutes = try self.number()
                guard minutes < 60 else { throw self.error("minutes out of range") }
                seconds += minutes * 60
                if self.peek == ":" {
                    self.i += 1
                    let secs = try self.number()
                    guard secs < 60 else { throw self.error("seconds out of range") }
                    seconds += secs
                }
            }
            return sign * seconds
        }

        /// A transition: `Jn`, `n` or `Mm.w.d`, then an optional `/time` (default 02:00, up to ±167 hours).
        mutating func transition() throws(TimeZoneRulesError) -> Transition {
            let date: DateRule
            if self.peek == "J" {
                self.i += 1
                let n = try self.number()
                guard (1...365).contains(n) else { throw self.error("Julian day out of range") }
                date = .julianNoLeap(n)
            } else if self.peek == "M" {
                self.i += 1
                let m = try self.number()
                try self.expect(".")
                let w = try self.number()
                try self.expect(".")
                let d = try self.number()
                guard (1...12).contains(m), (1...5).contains(w), (0...6).contains(d) else {
                    throw self.error("month/week/day rule out of range")
                }
                date = .monthWeekDay(month: m, week: w, weekday: d)
            } else {
                let n = try self.number()
                guard (0...365).contains(n) else { throw self.error("day number out of range") }
                date = .zeroBased(n)
            }
            var time = 7200
            if self.peek == "/" {
                self.i += 1
                time = try self.offset(maxHours: 167)
            }
            return Transition(date: date, time: time)
        }
    }
}
