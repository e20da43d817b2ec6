import GlucoseProfile
public import SugarWire

extension Wire.Unit {
    /// A mg/dL value in this unit (the report's display unit): "142" or "7.9".
    func text(_ mgdL: Double) -> String { self.number(mgdL: mgdL) }

    /// A result in this unit, HI and LO as such.
    public func text(_ result: GlucoseResult) -> String {
        switch result {
        case .mgdL(let value): self.text(value)
        case .hi: "HI"
        case .lo: "LO"
        }
    }
}

/// The glucose ranges of the International Consensus on Time in Range (Battelino et al. 2019).
public enum GlucoseRange: String, CaseIterable, Sendable, Hashable {
    /// Below 54 mg/dL (3.0 mmol/L), LO included.
    case veryLow
    /// From 54 mg/dL to below the target.
    case low
    /// Within the target range.
    case target
    /// Above the target, up to 250 mg/dL.
    case high
    /// Above 250 mg/dL (13.9 mmol/L), HI included.
    case veryHigh

    /// The range's name for people ("Very low", "In target", …).
    public var label: String {
        switch self {
        case .veryLow: "Very low"
        case .low: "Low"
        case .target: "In target"
        case .high: "High"
        case .veryHigh: "Very high"
        }
    }
}

/// The target range, in mg/dL, inclusive at both ends.
public struct TargetRange: Sendable, Hashable {
    /// The lowest value in target.
    public var lowMgdL: Double
    /// The highest value in target.
    public var highMgdL: Double

    /// 70–180 mg/dL, the consensus target.
    public static let standard = TargetRange(lowMgdL: 70, highMgdL: 180)
    /// Below this is very low (54 mg/dL, 3.0 mmol/L); above ``veryHighAbove`` very high.
    public static let veryLowBelow = 54.0
    /// (Above 250 mg/dL, 13.9 mmol/L.)
    public static let veryHighAbove = 250.0
    /// Readings below this are listed as lows.
    public static let lowListBelow = 70.0

    /// A range from `lowMgdL` to `highMgdL`, both included.
    public init(lowMgdL: Double, highMgdL: Double) {
        self.lowMgdL = lowMgdL
        self.highMgdL = highMgdL
    }

    /// `LOW-HIGH` in mg/dL, or in mmol/L when both are at most 35 ("70-180", "3.9-10"); nil when it does not parse
    /// or the range is empty.
    public init?(parsing text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let low = Double(parts[0]), let high = Double(parts[1]), low.isFinite, high.isFinite,
            low > 0, low < high
        else { return nil }
        let scale = high <= 35 ? glucoseMolarMass : 1
        self.init(lowMgdL: (low * scale * 100).rounded() / 100, highMgdL: (high * scale * 100).rounded() / 100)
    }

    /// Which range a result falls in: HI is very high, LO very low. A value is compared as whole mg/dL
    /// (the ranges are 54-69, 70-180, 181-250), so 10.0 mmol/L (180.16 mg/dL) is in target and 3.0 mmol/L
    /// (54.05) low, as a mmol/L reader expects.
    public func range(of result: GlucoseResult) -> GlucoseRange {
        switch result {
        case .hi: return .veryHigh
        case .lo: return .veryLow
        case .mgdL(let value):
            let v = value.rounded()
            if v < Self.veryLowBelow { return .veryLow }
            if v > Self.veryHighAbove { return .veryHigh }
            if v < self.lowMgdL { return .low }
            if v > self.highMgdL { return .high }
            return .target
        }
    }
}

/// The targets by meal tag, in mg/dL: a range for readings taken before a meal (tagged fasting or
/// before meal; default 70-130) and an upper bound for readings after a meal (default below 180), as
/// blood-glucose-meter reports show them beside the overall target range.
public struct MealTargets: Sendable, Hashable {
    /// The range a reading tagged fasting or before a meal should be in.
    public var beforeMeal: TargetRange
    /// After a meal, a reading meets the target below this (whole mg/dL, as the ranges compare).
    public var afterMealBelowMgdL: Double

    /// 70–130 before a meal, below 180 after, in mg/dL.
    public static let standard = MealTargets(beforeMeal: TargetRange(lowMgdL: 70, highMgdL: 130), afterMealBelowMgdL: 180)

    /// Targets with both bounds given.
    public init(beforeMeal: TargetRange, afterMealBelowMgdL: Double) {
        self.beforeMeal = beforeMeal
        self.afterMealBelowMgdL = afterMealBelowMgdL
    }

    /// Whether a reading tagged before a meal meets its target: its whole mg/dL within the range. HI and LO never do.
    public func beforeMealMet(_ result: GlucoseResult) -> Bool {
        guard let value = result.mgdL?.rounded() else { return false }
        return value >= self.beforeMeal.lowMgdL && value <= self.beforeMeal.highMgdL
    }

    /// Whether a reading tagged after a meal meets its target: its whole mg/dL below the bound. HI and LO never do.
    public func afterMealMet(_ result: GlucoseResult) -> Bool {
        guard let value = result.mgdL?.rounded() else { return false }
        return value < self.afterMealBelowMgdL
    }

    /// A bound in mg/dL, or in mmol/L when at most 35 ("180", "10"); nil when it does not parse.
    public static func bound(parsing text: String) -> Double? {
        guard let value = Double(text), value.isFinite, value > 0 else { return nil }
        return value <= 35 ? (value * glucoseMolarMass * 100).rounded() / 100 : value
    }
}

/// How many readings with a meal target there were and how many met it.
public struct MealTargetFigures: Sendable, Hashable {
    /// Readings with the tags the target is for (HI and LO included).
    public var readings: Int
    /// Those that met it.
    public var met: Int
    /// Percent that met it (unrounded); nil without readings.
    public var percent: Double? { self.readings > 0 ? Double(self.met) * 100 / Double(self.readings) : nil }
}

/// The report period: from (inclusive) to (exclusive), in milliseconds since the epoch.
public struct ReportPeriod: Sendable, Hashable {
    /// The start, inclusive.
    public var fromMillis: Int64
    /// The end, exclusive.
    public var toMillis: Int64

    /// A period from `fromMillis` up to `toMillis`.
    public init(fromMillis: Int64, toMillis: Int64) {
        self.fromMillis = fromMillis
        self.toMillis = toMillis
    }

    /// Length in days (14 for two weeks).
    public var days: Double { Double(self.toMillis - self.fromMillis) / 86_400_000 }

    /// The period of the same length just before this one (for the comparison beside it).
    public var previous: ReportPeriod {
        ReportPeriod(fromMillis: self.fromMillis - (self.toMillis - self.fromMillis), toMillis: self.fromMillis)
    }
}

/// One hour of the day across the period.
public struct HourFigures: Sendable, Hashable {
    /// The local hour, 0–23.
    public var hour: Int
    /// Readings with a number in this hour (HI and LO have none).
    public var count: Int
    /// The 10th, 25th, 50th, 75th and 90th percentiles in mg/dL; nil under ``ReportFigures/minimumForPercentiles``.
    public var percentiles: [Double]?
}

/// Count and mean of the readings with one meal tag.
public struct MealFigures: Sendable, Hashable {
    /// The meal tag.
    public var tag: MealTag
    /// Readings with this tag, HI and LO included.
    public var count: Int
    /// Mean of the numeric ones (HI and LO left out); nil when there are none.
    public var meanMgdL: Double?
}

/// The logbook's time slots by local time: night 00-06, breakfast 06-11, lunch 11-16, dinner 16-21, bedtime 21-24.
public enum LogbookSlot: String, CaseIterable, Sendable, Hashable {
    case night, breakfast, lunch, dinner, bedtime

    /// The slot of a local hour.
    public init(hour: Int) {
        switch hour {
        case ..<6: self = .night
        case 6..<11: self = .breakfast
        case 11..<16: self = .lunch
        case 16..<21: self = .dinner
        default: self = .bedtime
        }
    }

    /// The slot's heading, with its hours.
    public var label: String {
        switch self {
        case .night: "Night 0-6"
        case .breakfast: "Breakfast 6-11"
        case .lunch: "Lunch 11-16"
        case .dinner: "Dinner 16-21"
        case .bedtime: "Bedtime 21-24"
        }
    }
}

/// Every figure of a report, computed in one pass over the readings of the period (control solution
/// already left out) by ``Accumulator``: what it holds does not grow with the readings but for the
/// lows (every one, for the JSON), the latest ``drawnReadings`` readings the time-of-day chart draws
/// and the readings of the latest ``printedDays`` days with readings (the daily view and logbook).
public struct ReportFigures: Sendable {
    /// An hour needs this many readings for percentile bands.
    public static let minimumForPercentiles = 5
    /// The percentiles the hourly bands show.
    public static let percentileLevels: [Double] = [0.10, 0.25, 0.50, 0.75, 0.90]
    /// At most this many readings (the latest) are drawn in the time-of-day chart; the page says so
    /// when the period holds more.
    public static let drawnReadings = 2000
    /// At most this many readings are kept for the daily view and the logbook (the latest days'),
    /// however many one day holds.
    public static let keptDayReadings = 4000

    /// The period the figures are for.
    public var period: ReportPeriod
    /// The target range the ranges were counted against.
    public var target: TargetRange
    /// The meal targets counted against.
    public var mealTargets: MealTargets
    /// Readings of the period.
    public var readingCount: Int
    /// The latest readings (at most ``drawnReadings``) in time order: the ones the time-of-day chart
    /// draws; every reading when the period holds no more.
    public var readings: [ReportReading]
    /// Readings per day of the period.
    public var readingsPerDay: Double
    /// Local days (in each reading's own zone) with at least one reading.
    public var daysWithReadings: Int
    /// Readings per local day.
    var dateCounts: [CivilDate: Int]
    /// Readings tagged fasting or before a meal, and those in ``MealTargets/beforeMeal``.
    public var beforeMealTarget: MealTargetFigures
    /// Readings tagged after a meal, and those below ``MealTargets/afterMealBelowMgdL``.
    public var afterMealTarget: MealTargetFigures
    /// Mean of the numeric readings (HI and LO left out); nil without one.
    public var meanMgdL: Double?
    /// Sample standard deviation (n − 1); nil under two numeric readings.
    public var sdMgdL: Double?
    /// Coefficient of variation: SD ÷ mean × 100; nil without an SD.
    public var cvPercent: Double?
    /// Readings per range.
    public var rangeCounts: [GlucoseRange: Int]
    /// Count and mean per meal tag.
    public var byMeal: [MealFigures]
    /// The 24 hours of the day.
    public var hourly: [HourFigures]
    /// Readings below 70 mg/dL, LO included, in time order.
    public var lows: [ReportReading]
    /// HI results.
    public var hiCount: Int
    /// LO results.
    public var loCount: Int
    /// The highest numeric reading in mg/dL (the charts' scale), 0 without one.
    public var highestMgdL: Double
    /// The first and the last reading of the period.
    var first: ReportReading?
    var last: ReportReading?
    /// The readings of the latest days with readings, by local date (at most ``printedDays`` dates
    /// and ``keptDayReadings`` readings).
    var dayReadings: [CivilDate: [ReportReading]]

    /// The figures of `readings` (in any order) over `period`.
    public init(
        readings unsorted: [ReportReading], period: ReportPeriod, target: TargetRange = .standard, mealTargets: MealTargets = .standard
    ) {
        var accumulator = Accumulator(period: period, target: target, mealTargets: mealTargets)
        for reading in unsorted.sorted(by: { ($0.epochMillis, $0.id) < ($1.epochMillis, $1.id) }) { accumulator.add(reading) }
        self = accumulator.figures()
    }

    /// The figures of a period from its readings one at a time, in time order (as `ListReadings`
    /// sends them): counts, sums and, per hour, how often each value occurred (percentiles are exact
    /// from those, and a meter has a few hundred distinct values at most).
    public struct Accumulator: Sendable {
        /// The period the figures are for.
        let period: ReportPeriod
        /// The range counts are against.
        let target: TargetRange
        /// The meal targets counted against.
        let mealTargets: MealTargets
        /// Readings added.
        private var count = 0
        /// Readings per local date.
        private var dates: [CivilDate: Int] = [:]
        private var beforeMeal = MealTargetFigures(readings: 0, met: 0)
        private var afterMeal = MealTargetFigures(readings: 0, met: 0)
        /// Sum of the numeric values, mg/dL.
        private var sum = 0.0
        /// Readings with a number (not HI or LO).
        private var numeric = 0
        /// How often each numeric value occurred (mean, SD and percentiles come from it).
        private var values: [Double: Int] = [:]
        /// Readings per range.
        private var rangeCounts: [GlucoseRange: Int] = [:]
        /// Readings per meal tag, HI and LO included.
        private var mealCounts: [MealTag: Int] = [:]
        /// Sum and count of the numeric values per meal tag.
        private var mealSums: [MealTag: (sum: Double, count: Int)] = [:]
        /// Per local hour, how often each numeric value occurred.
        private var hours: [[Double: Int]] = Array(repeating: [:], count: 24)
        /// Readings below 70 mg/dL and LO, in time order.
        private var lows: [ReportReading] = []
        private var hiCount = 0
        private var loCount = 0
        /// The highest numeric value.
        private var highest = 0.0
        private var first: ReportReading?
        private var last: ReportReading?
        /// The latest ``ReportFigures/drawnReadings`` readings, as a ring once full.
        private var drawn: [ReportReading] = []
        /// Where the oldest of `drawn` is once the ring is full.
        private var drawnStart = 0
        /// The readings of the latest days, within ``ReportFigures/printedDays`` and ``ReportFigures/keptDayReadings``.
        private var dayReadings: [CivilDate: [ReportReading]] = [:]
        /// Readings in `dayReadings`.
        private var dayReadingCount = 0

        /// An empty accumulator for `period`.
        public init(period: ReportPeriod, target: TargetRange = .standard, mealTargets: MealTargets = .standard) {
            self.period = period
            self.target = target
            self.mealTargets = mealTargets
        }

        /// Takes the next reading (in time order).
        public mutating func add(_ r: ReportReading) {
            self.count += 1
            if self.first == nil { self.first = r }
            self.last = r
            self.dates[r.local.date, default: 0] += 1
            if r.meal == .fasting || r.meal == .beforeMeal {
                self.beforeMeal.readings += 1
                if self.mealTargets.beforeMealMet(r.result) { self.beforeMeal.met += 1 }
            }
            if r.meal == .afterMeal {
                self.afterMeal.readings += 1
                if self.mealTargets.afterMealMet(r.result) { self.afterMeal.met += 1 }
            }
            self.rangeCounts[self.target.range(of: r.result), default: 0] += 1
            self.mealCounts[r.meal, default: 0] += 1
            switch r.result {
            case .mgdL(let v):
                self.sum += v
                self.numeric += 1
                self.values[v, default: 0] += 1
                let meal = self.mealSums[r.meal] ?? (0, 0)
                self.mealSums[r.meal] = (meal.sum + v, meal.count + 1)
                self.hours[r.local.hour][v, default: 0] += 1
                self.highest = max(self.highest, v)
                if v.rounded() < TargetRange.lowListBelow { self.lows.append(r) }
            case .lo:
                self.loCount += 1
                self.lows.append(r)
            case .hi:
                self.hiCount += 1
            }
            // The latest readings for the chart: a ring of drawnReadings.
            if self.drawn.count < ReportFigures.drawnReadings {
                self.drawn.append(r)
            } else {
                self.drawn[self.drawnStart] = r
                self.drawnStart = (self.drawnStart + 1) % self.drawn.count
            }
            // The latest days for the daily view and logbook.
            self.dayReadings[r.local.date, default: []].append(r)
            self.dayReadingCount += 1
            while self.dayReadings.count > ReportFigures.printedDays
                || (self.dayReadingCount > ReportFigures.keptDayReadings && self.dayReadings.count > 1)
            {
                guard let oldest = self.dayReadings.keys.min() else { break }
                self.dayReadingCount -= self.dayReadings.removeValue(forKey: oldest)?.count ?? 0
            }
        }

        /// The figures of every reading added so far.
        public func figures() -> ReportFigures {
            let mean = self.numeric > 0 ? self.sum / Double(self.numeric) : nil
            var sd: Double?
            if self.numeric >= 2, let mean {
                var squares = 0.0
                for (v, n) in self.values { squares += Double(n) * (v - mean) * (v - mean) }
                sd = (squares / Double(self.numeric - 1)).squareRoot()
            }
            var cv: Double?
            if let sd, let mean, mean > 0 { cv = sd / mean * 100 }
            let byMeal = MealTag.allCases.map { tag in
                let numeric = self.mealSums[tag]
                return MealFigures(
                    tag: tag, count: self.mealCounts[tag] ?? 0, meanMgdL: numeric.flatMap { $0.count > 0 ? $0.sum / Double($0.count) : nil })
            }
            let hourly = (0..<24).map { hour in
                let histogram = ValueHistogram(self.hours[hour])
                let bands =
                    histogram.count >= ReportFigures.minimumForPercentiles
                    ? ReportFigures.percentileLevels.map { histogram.percentile($0) } : nil
                return HourFigures(hour: hour, count: histogram.count, percentiles: bands)
            }
            let days = self.period.days
            return ReportFigures(
                period: self.period, target: self.target, mealTargets: self.mealTargets, readingCount: self.count,
                readings: Array(self.drawn[self.drawnStart...] + self.drawn[..<self.drawnStart]),
                readingsPerDay: days > 0 ? Double(self.count) / days : 0, daysWithReadings: self.dates.count, dateCounts: self.dates,
                beforeMealTarget: self.beforeMeal, afterMealTarget: self.afterMeal, meanMgdL: mean, sdMgdL: sd, cvPercent: cv,
                rangeCounts: self.rangeCounts, byMeal: byMeal, hourly: hourly, lows: self.lows, hiCount: self.hiCount,
                loCount: self.loCount, highestMgdL: self.highest, first: self.first, last: self.last, dayReadings: self.dayReadings)
        }
    }

    /// Figures with every field given (the accumulator's result).
    init(
        period: ReportPeriod, target: TargetRange, mealTargets: MealTargets, readingCount: Int, readings: [ReportReading],
        readingsPerDay: Double, daysWithReadings: Int, dateCounts: [CivilDate: Int], beforeMealTarget: MealTargetFigures, afterMealTarget: MealTargetFigures,
        meanMgdL: Double?, sdMgdL: Double?, cvPercent: Double?, rangeCounts: [GlucoseRange: Int], byMeal: [MealFigures],
        hourly: [HourFigures], lows: [ReportReading], hiCount: Int, loCount: Int, highestMgdL: Double, first: ReportReading?,
        last: ReportReading?, dayReadings: [CivilDate: [ReportReading]]
    ) {
        self.period = period
        self.target = target
        self.mealTargets = mealTargets
        self.readingCount = readingCount
        self.readings = readings
        self.readingsPerDay = readingsPerDay
        self.daysWithReadings = daysWithReadings
        self.dateCounts = dateCounts
        self.beforeMealTarget = beforeMealTarget
        self.afterMealTarget = afterMealTarget
        self.meanMgdL = meanMgdL
        self.sdMgdL = sdMgdL
        self.cvPercent = cvPercent
        self.rangeCounts = rangeCounts
        self.byMeal = byMeal
        self.hourly = hourly
        self.lows = lows
        self.hiCount = hiCount
        self.loCount = loCount
        self.highestMgdL = highestMgdL
        self.first = first
        self.last = last
        self.dayReadings = dayReadings
    }

    /// Percent of readings in a range (unrounded).
    public func percent(_ range: GlucoseRange) -> Double {
        self.readingCount == 0 ? 0 : Double(self.rangeCounts[range] ?? 0) * 100 / Double(self.readingCount)
    }

    /// Readings on a local date, whether or not the figures kept them (``days``).
    public func readingCount(on date: CivilDate) -> Int { self.dateCounts[date] ?? 0 }

    /// The local dates from the period's first day to its last, each with its readings (for the daily
    /// view and the logbook; only the latest days with readings keep theirs: ``dayReadings``). The
    /// zone offset at each end is the nearest reading's. A day at either end
    /// that the period covers for less than half and that holds no reading is left out (a period from UTC
    /// midnight to UTC midnight seen from Berlin does not get an empty extra day for its last two hours).
    public var days: [(date: CivilDate, readings: [ReportReading])] {
        guard let first = self.first, let last = self.last else { return [] }
        let start = LocalStamp(epochMillis: self.period.fromMillis, utcOffsetMinutes: first.local.utcOffsetMinutes)
        let end = LocalStamp(epochMillis: self.period.toMillis - 1, utcOffsetMinutes: last.local.utcOffsetMinutes)
        var firstDate = start.date
        var lastDate = end.date
        if start.hour >= 12, firstDate < first.local.date { firstDate = firstDate.next }
        if end.hour < 12, lastDate > last.local.date, firstDate < lastDate { lastDate = CivilDate.before(lastDate, from: firstDate) }
        // Readings outside the span (a zone change at the ends) still get their day.
        firstDate = min(firstDate, first.local.date)
        lastDate = max(lastDate, last.local.date)
        var result: [(CivilDate, [ReportReading])] = []
        var date = firstDate
        while date <= lastDate, result.count < 3700 {
            result.append((date, self.dayReadings[date] ?? []))
            date = date.next
        }
        return result
    }
}

/// How often each value occurred, in value order: the type-7 percentiles of the values it counts
/// (``percentile(sorted:_:)`` of the values written out) without writing them out.
struct ValueHistogram {
    private var values: [Double] = []
    /// Values up to and including each one: `cumulative[i]` counts those <= `values[i]`.
    private var cumulative: [Int] = []

    /// A histogram of `counts` (value → how often).
    init(_ counts: [Double: Int]) {
        var total = 0
        for (value, n) in counts.sorted(by: { $0.key < $1.key }) {
            total += n
            self.values.append(value)
            self.cumulative.append(total)
        }
    }

    /// How many values it counts.
    var count: Int { self.cumulative.last ?? 0 }

    /// The value at `rank` (0-based) of the sorted values.
    func value(at rank: Int) -> Double {
        var low = 0
        var high = self.cumulative.count - 1
        while low < high {
            let mid = (low + high) / 2
            if self.cumulative[mid] > rank { high = mid } else { low = mid + 1 }
        }
        return self.values[low]
    }

    /// The type-7 `p` quantile (0…1); traps without values.
    func percentile(_ p: Double) -> Double {
        precondition(self.count > 0, "percentile of no values")
        let h = Double(self.count - 1) * p
        let lower = Int(h.rounded(.down))
        let upper = min(lower + 1, self.count - 1)
        let a = self.value(at: lower)
        return a + (h - Double(lower)) * (self.value(at: upper) - a)
    }
}

/// Arithmetic mean; nil for no values.
func mean(_ values: [Double]) -> Double? {
    values.isEmpty ? nil : values.reduce(0, +) / Double(values.count)
}

/// Sample standard deviation (divides by n − 1); nil under two values.
func sampleStandardDeviation(_ values: [Double]) -> Double? {
    guard values.count >= 2, let m = mean(values) else { return nil }
    let squares = values.reduce(0) { $0 + ($1 - m) * ($1 - m) }
    return (squares / Double(values.count - 1)).squareRoot()
}

/// The `p` quantile (0…1) of sorted values by linear interpolation between closest ranks: R's type 7,
/// NumPy's default. h = (n − 1)·p; x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋]).
public func percentile(sorted values: [Double], _ p: Double) -> Double {
    precondition(!values.isEmpty, "percentile of no values")
    let h = Double(values.count - 1) * p
    let lower = Int(h.rounded(.down))
    let upper = min(lower + 1, values.count - 1)
    return values[lower] + (h - Double(lower)) * (values[upper] - values[lower])
}

/// Fixed-point text: `fixed(5.55, digits: 1)` is "5.6" (half away from zero); the report's short
/// name for ``ReadingExport/formatted(_:digits:)``, the one fixed-point formatter.
func fixed(_ value: Double, digits: Int) -> String { ReadingExport.formatted(value, digits: digits) }

/// A value rounded to `digits` decimals, for JSON.
func rounded(_ value: Double, _ digits: Int) -> Double {
    let scale = (0..<digits).reduce(1.0) { r, _ in r * 10 }
    return (value * scale).rounded() / scale
}
