public import JSON
import GlucoseProfile
public import SugarWire

/// The meal tags a report groups by. GLS meal codes: 1 preprandial is "before meal", 2
/// postprandial "after meal", 3 fasting, 5 bedtime; 4 casual, reserved codes and no context are "none".
public enum MealTag: String, CaseIterable, Sendable, Hashable {
    /// GLS meal code 3.
    case fasting
    /// GLS `preprandial` (code 1).
    case beforeMeal
    /// GLS `postprandial` (code 2).
    case afterMeal
    /// GLS meal code 5.
    case bedtime
    /// Casual (code 4), a reserved code, or no context.
    case none

    /// The tag for a context's meal name (`context.meal.name` of a reading).
    public init(glsName: String?) {
        switch glsName {
        case "fasting": self = .fasting
        case "preprandial": self = .beforeMeal
        case "postprandial": self = .afterMeal
        case "bedtime": self = .bedtime
        default: self = .none
        }
    }

    /// For people: "Before meal".
    public var label: String {
        switch self {
        case .fasting: "Fasting"
        case .beforeMeal: "Before meal"
        case .afterMeal: "After meal"
        case .bedtime: "Bedtime"
        case .none: "No tag"
        }
    }
}

/// A glucose result: a number in mg/dL, or the meter's HI (above its range) or LO (below it).
public enum GlucoseResult: Sendable, Hashable {
    /// A glucose concentration in mg/dL.
    case mgdL(Double)
    /// Above the meter's measuring range; no number.
    case hi
    /// Below the meter's measuring range; no number.
    case lo

    /// The concentration in mg/dL; nil for HI and LO.
    public var mgdL: Double? { if case .mgdL(let value) = self { return value } else { return nil } }
}

/// A calendar date.
public struct CivilDate: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The year of the Gregorian calendar (2026).
    public var year: Int
    /// The month, 1 to 12.
    public var month: Int
    /// The day of the month, from 1.
    public var day: Int

    /// The date as given; not checked to be a real day.
    public init(year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }

    /// The local date of an instant at a UTC offset.
    public init(epochMillis: Int64, utcOffsetMinutes: Int) {
        let stamp = LocalStamp(epochMillis: epochMillis, utcOffsetMinutes: utcOffsetMinutes)
        self = stamp.date
    }

    /// `2024-03-31`.
    public var description: String { CivilCalendar.pad(self.year, 4) + "-" + CivilCalendar.pad(self.month, 2) + "-" + CivilCalendar.pad(self.day, 2) }

    /// The next day (calendar carry from GlucoseProfile's DateTime).
    public var next: CivilDate {
        let time = DateTime(year: UInt16(self.year), month: UInt8(self.month), day: UInt8(self.day)).adding(minutes: 1440)
        guard let time else { return self }
        return CivilDate(year: Int(time.year), month: Int(time.month), day: Int(time.day))
    }

    /// The day before `date`, stepping from `start` (an earlier date), so only ``next`` is needed.
    public static func before(_ date: CivilDate, from start: CivilDate) -> CivilDate {
        var previous = start
        var day = start.next
        while day < date {
            previous = day
            day = day.next
        }
        return previous
    }

    /// 0 Monday … 6 Sunday (Sakamoto's method).
    public var weekday: Int {
        let offsets = [0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4]
        let y = self.month < 3 ? self.year - 1 : self.year
        let sundayFirst = (y + y / 4 - y / 100 + y / 400 + offsets[self.month - 1] + self.day) % 7
        return (sundayFirst + 6) % 7
    }

    /// "Sun 31 Mar".
    public var shortText: String {
        Self.weekdayNames[self.weekday] + " " + String(self.day) + " " + Self.monthNames[self.month - 1]
    }

    /// "31 Mar 2024".
    public var longText: String { String(self.day) + " " + Self.monthNames[self.month - 1] + " " + String(self.year) }

    static let weekdayNames = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Earlier dates sort first.
    public static func < (a: CivilDate, b: CivilDate) -> Bool { (a.year, a.month, a.day) < (b.year, b.month, b.day) }
}

/// A reading's wall-clock time where it was taken, with the UTC offset sugard resolved for it.
public struct LocalStamp: Hashable, Sendable {
    /// The local calendar date.
    public var date: CivilDate
    /// The local hour, 0 to 23.
    public var hour: Int
    /// The local minute, 0 to 59.
    public var minute: Int
    /// The second, as the meter measured it (the lows list shows it).
    public var second: Int
    /// Local time minus UTC, in minutes, at the reading's instant.
    public var utcOffsetMinutes: Int

    /// A wall-clock time as given (the second defaults to 0).
    public init(date: CivilDate, hour: Int, minute: Int, second: Int = 0, utcOffsetMinutes: Int) {
        self.date = date
        self.hour = hour
        self.minute = minute
        self.second = second
        self.utcOffsetMinutes = utcOffsetMinutes
    }

    /// The wall-clock time of an instant at a UTC offset.
    public init(epochMillis: Int64, utcOffsetMinutes: Int) {
        let seconds = epochMillis >= 0 ? epochMillis / 1000 : (epochMillis - 999) / 1000
        let minutes = seconds >= 0 ? seconds / 60 : (seconds - 59) / 60
        let local = DateTime(year: 1970, month: 1, day: 1).adding(minutes: Int(minutes) + utcOffsetMinutes)
            ?? DateTime(year: 1970, month: 1, day: 1)
        self.init(
            date: CivilDate(year: Int(local.year), month: Int(local.month), day: Int(local.day)), hour: Int(local.hours),
            minute: Int(local.minutes), second: Int(seconds - minutes * 60), utcOffsetMinutes: utcOffsetMinutes)
    }

    /// `YYYY-MM-DDTHH:MM[:SS]…` as in a reading's `time.local`; nil when it does not start that way.
    init?(localISO text: String, utcOffsetMinutes: Int) {
        let b = Array(text.utf8.prefix(16))
        guard b.count == 16, b[4] == 45, b[7] == 45, b[10] == 84 || b[10] == 32, b[13] == 58 else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for i in range {
                guard b[i] >= 48 && b[i] <= 57 else { return nil }
                value = value * 10 + Int(b[i] - 48)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), let hour = number(11..<13),
            let minute = number(14..<16), (1...12).contains(month), day >= 1, day <= 31, hour < 24, minute < 60
        else { return nil }
        var second = 0
        let full = Array(text.utf8.prefix(19))
        if full.count == 19, full[16] == 58, let s = (full[17] >= 48 && full[17] <= 57 && full[18] >= 48 && full[18] <= 57)
            ? Int(full[17] - 48) * 10 + Int(full[18] - 48) : nil, s < 60
        {
            second = s
        }
        self.init(
            date: CivilDate(year: year, month: month, day: day), hour: hour, minute: minute, second: second,
            utcOffsetMinutes: utcOffsetMinutes)
    }

    /// "07:05".
    public var clockText: String { CivilCalendar.pad(self.hour, 2) + ":" + CivilCalendar.pad(self.minute, 2) }

    /// "22:37:45": the time as measured.
    public var clockTextWithSeconds: String { self.clockText + ":" + CivilCalendar.pad(self.second, 2) }

    /// "2024-03-31 07:05".
    public var text: String { self.date.description + " " + self.clockText }

    /// `2024-03-31T07:05:00+02:00`.
    public var iso: String {
        CivilCalendar.isoString(
            year: self.date.year, month: self.date.month, day: self.date.day, hour: self.hour, minute: self.minute, second: self.second)
            + CivilCalendar.isoOffset(seconds: self.utcOffsetMinutes * 60)
    }

    /// Hours since local midnight (7.5 for 07:30).
    public var hourOfDay: Double { Double(self.hour) + Double(self.minute) / 60 }
}

/// One glucose reading as the report uses it.
public struct ReportReading: Sendable, Hashable {
    /// The stored reading's row (`id` in `ListReadings`): what the page's `data-id` attributes carry.
    public var id: Int64
    /// The reading's id as everywhere else (exports, Nightscout, MQTT): `<meter>/<epoch>/<sequence>`.
    public var readingID: String
    /// The meter's id (its Bluetooth address).
    public var meter: String
    /// The reading's instant, milliseconds since 1970 UTC.
    public var epochMillis: Int64
    /// Local wall-clock time in the zone sugard resolved for the reading.
    public var local: LocalStamp
    /// The value, or HI or LO.
    public var result: GlucoseResult
    /// The meal tag the meter recorded (`none` without one).
    public var meal: MealTag
    /// The person the reading belongs to, when readings carry one.
    public var person: String?

    /// A reading; without `readingID` one is made from `meter`, epoch 0 and `id` (for tests and samples).
    public init(
        id: Int64, readingID: String? = nil, meter: String, epochMillis: Int64, local: LocalStamp, result: GlucoseResult,
        meal: MealTag, person: String? = nil
    ) {
        self.id = id
        self.readingID = readingID ?? ReadingExport.identifier(meter: meter, epoch: 0, sequenceNumber: id)
        self.meter = meter
        self.epochMillis = epochMillis
        self.local = local
        self.result = result
        self.meal = meal
        self.person = person
    }

    /// Why a stored reading is not part of a report.
    public enum Exclusion: String, Sendable, Hashable {
        /// A control-solution test.
        case controlSolution
        /// Not a glucose value: a ketone record, no concentration, or a record the meter marked suspect.
        case notGlucose
        /// The object lacks what a report needs (an id, a time).
        case unreadable
    }

    /// Reads one element of `ListReadings`' `readings` (the full or the compact form) as the typed
    /// reading ``Wire/CompactReading``: the reading, or why it is left out (``Exclusion/unreadable``
    /// when the object is not a reading).
    public static func parse(_ json: JSONValue) -> Result<ReportReading, ExclusionError> {
        guard let reading = try? Wire.CompactReading(json: json) else { return .failure(ExclusionError(.unreadable)) }
        return Self.from(reading)
    }

    /// A stored reading (`ListReadings(compact: true)`'s form) as the report takes it, or why it is
    /// left out: control-solution tests, ketone, no-value and suspect records are not glucose; HI and
    /// LO stay HI and LO.
    public static func from(_ reading: Wire.CompactReading) -> Result<ReportReading, ExclusionError> {
        let result: GlucoseResult
        switch reading.kind {
        case .controlSolution: return .failure(ExclusionError(.controlSolution))
        case .ketone, .noValue: return .failure(ExclusionError(.notGlucose))
        case _ where reading.flags.contains("suspect"): return .failure(ExclusionError(.notGlucose))
        case .hi: result = .hi
        case .lo: result = .lo
        case .glucose:
            guard let mgdL = reading.mgdL else { return .failure(ExclusionError(.notGlucose)) }
            result = .mgdL(mgdL)
        }
        let time = reading.time
        let offset = Int(time.utcOffsetMinutes)
        let local =
            LocalStamp(localISO: time.local, utcOffsetMinutes: offset) ?? LocalStamp(epochMillis: time.epochMillis, utcOffsetMinutes: offset)
        return .success(
            ReportReading(
                id: reading.id, readingID: ReadingExport.identifier(reading), meter: reading.meter, epochMillis: time.epochMillis, local: local,
                result: result, meal: MealTag(glsName: reading.meal?.name), person: reading.person))
    }

    /// ``Exclusion`` as an error for `Result`.
    public struct ExclusionError: Error, Sendable, Hashable {
        /// Why the reading is left out.
        public var exclusion: Exclusion
        /// The error for `exclusion`.
        public init(_ exclusion: Exclusion) { self.exclusion = exclusion }
    }
}

