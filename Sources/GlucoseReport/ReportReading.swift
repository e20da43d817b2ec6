public import JSON
import GlucoseProfile
import SugarWire

/// The meal tags a report groups by. GLS meal codes: 1 preprandial is "before meal", 2
/// postprandial "after meal", 3 fasting, 5 bedtime; 4 casual, reserved codes and no context are "none".
public enum MealTag: String, CaseIterable, Sendable, Hashable {
    case fasting
    case beforeMeal
    case afterMeal
    case bedtime
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
    case mgdL(Double)
    case hi
    case lo

    public var mgdL: Double? { if case .mgdL(let value) = self { return value } else { return nil } }
}

/// A calendar date.
public struct CivilDate: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var year: Int
    public var month: Int
    public var day: Int

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

    public static func < (a: CivilDate, b: CivilDate) -> Bool { (a.year, a.month, a.day) < (b.year, b.month, b.day) }
}

/// A reading's wall-clock time where it was taken, with the UTC offset sugard resolved for it.
public struct LocalStamp: Hashable, Sendable {
    public var date: CivilDate
    public var hour: Int
    public var minute: Int
    /// The second, as the meter measured it (the lows list shows it).
    public var second: Int
    public var utcOffsetMinutes: Int

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
    public var epochMillis: Int64
    /// Local wall-clock time in the zone sugard resolved for the reading.
    public var local: LocalStamp
    public var result: GlucoseResult
    public var meal: MealTag
    /// The person the reading belongs to, when readings carry one.
    public var person: String?

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

    /// Reads one element of `ListReadings`' `readings`: the reading, or why it is left out.
    public static func parse(_ json: JSONValue) -> Result<ReportReading, ExclusionError> {
        let flags = Set(json["flags"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        if flags.contains("controlSolution") { return .failure(ExclusionError(.controlSolution)) }
        if !flags.isDisjoint(with: ["ketone", "noValue", "suspect"]) { return .failure(ExclusionError(.notGlucose)) }
        guard let id = json["id"]?.intValue, let millis = json["time"]?["epochMillis"]?.intValue else {
            return .failure(ExclusionError(.unreadable))
        }
        let result: GlucoseResult
        if flags.contains("hi") {
            result = .hi
        } else if flags.contains("lo") {
            result = .lo
        } else if let mgdL = json["mgdL"]?.doubleValue {
            result = .mgdL(mgdL)
        } else {
            return .failure(ExclusionError(.notGlucose))
        }
        let offset = Int(json["time"]?["utcOffsetMinutes"]?.intValue ?? 0)
        let local =
            json["time"]?["local"]?.stringValue.flatMap { LocalStamp(localISO: $0, utcOffsetMinutes: offset) }
            ?? LocalStamp(epochMillis: millis, utcOffsetMinutes: offset)
        let meter = json["meter"]?.stringValue ?? "?"
        let readingID = ReadingExport.identifier(
            meter: meter, epoch: json["epoch"]?.intValue ?? 0, sequenceNumber: json["sequenceNumber"]?.intValue ?? id)
        return .success(
            ReportReading(
                id: id, readingID: readingID, meter: meter, epochMillis: millis, local: local, result: result,
                meal: MealTag(glsName: json["context"]?["meal"]?["name"]?.stringValue),
                person: json["person"]?.stringValue ?? json["person"]?["name"]?.stringValue))
    }

    /// Reads one reading of `ListReadings` with `compact` (decoded straight from the reply's bytes):
    /// the reading, or why it is left out, as ``parse(_:)`` reads the same reading's object.
    public static func parse(_ r: Wire.CompactReading) -> Result<ReportReading, ExclusionError> {
        let flags = r.flags
        if flags.contains("controlSolution") { return .failure(ExclusionError(.controlSolution)) }
        if flags.contains(where: { $0 == "ketone" || $0 == "noValue" || $0 == "suspect" }) { return .failure(ExclusionError(.notGlucose)) }
        let result: GlucoseResult
        if flags.contains("hi") {
            result = .hi
        } else if flags.contains("lo") {
            result = .lo
        } else if let mgdL = r.mgdL {
            result = .mgdL(mgdL)
        } else {
            return .failure(ExclusionError(.notGlucose))
        }
        let offset = Int(r.time.utcOffsetMinutes)
        let local =
            LocalStamp(localISO: r.time.local, utcOffsetMinutes: offset) ?? LocalStamp(epochMillis: r.time.epochMillis, utcOffsetMinutes: offset)
        return .success(
            ReportReading(
                id: r.id, readingID: ReadingExport.identifier(r), meter: r.meter, epochMillis: r.time.epochMillis, local: local,
                result: result, meal: MealTag(glsName: r.meal?.name), person: r.person))
    }

    /// ``Exclusion`` as an error for `Result`.
    public struct ExclusionError: Error, Sendable, Hashable {
        public var exclusion: Exclusion
        public init(_ exclusion: Exclusion) { self.exclusion = exclusion }
    }
}

