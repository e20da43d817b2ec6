import GlucoseProfile
public import JSON
public import SugarWire

/// Who and what a report is about, beyond the readings.
public struct ReportContext: Sendable {
    /// A meter as the header shows it.
    public struct Meter: Sendable, Hashable {
        /// The meter's id (its Bluetooth address).
        public var id: String
        /// The name to show.
        public var name: String
        /// Its serial number, when known.
        public var serialNumber: String?
        /// A meter with every field given.
        public init(id: String, name: String, serialNumber: String?) {
            self.id = id
            self.name = name
            self.serialNumber = serialNumber
        }
    }

    /// The unit values are shown in.
    public var unit: Wire.Unit
    /// Who the report is about; nil for a report over every reading.
    public var person: String?
    /// The meters whose readings it holds.
    public var meters: [Meter]
    /// When the report was made (milliseconds since the epoch) and the offset to show it at.
    public var madeAtMillis: Int64
    /// (The UTC offset, in minutes.)
    public var madeAtUTCOffsetMinutes: Int
    /// Readings of the period left out: control-solution tests, and records that are not glucose values.
    public var controlSolutionCount: Int
    /// (The records that are not glucose values: ketone, no value, suspect.)
    public var notGlucoseCount: Int
    /// The figures of the period of the same length just before the report's, shown beside its own;
    /// nil when not asked for.
    public var previous: ReportFigures?

    /// A context; by default no person, meters, exclusions or previous figures, shown in UTC.
    public init(
        unit: Wire.Unit, person: String? = nil, meters: [Meter] = [], madeAtMillis: Int64, madeAtUTCOffsetMinutes: Int = 0,
        controlSolutionCount: Int = 0, notGlucoseCount: Int = 0, previous: ReportFigures? = nil
    ) {
        self.previous = previous
        self.unit = unit
        self.person = person
        self.meters = meters
        self.madeAtMillis = madeAtMillis
        self.madeAtUTCOffsetMinutes = madeAtUTCOffsetMinutes
        self.controlSolutionCount = controlSolutionCount
        self.notGlucoseCount = notGlucoseCount
    }
}

extension ReportFigures {
    /// `sugarctl report --json`: `period` {`from`, `to`, `days`}, `unit`, `readings`, `readingsPerDay`,
    /// `daysWithReadings`, `meanMgdL`, `sdMgdL`, `cvPercent`, `ranges` (percent, one decimal), `target`,
    /// `mealTargets` {`beforeMeal` {`lowMgdL`, `highMgdL`, `readings`, `inTarget`, `percent`}, `afterMeal`
    /// {`belowMgdL`, `readings`, `inTarget`, `percent`}}, `byMeal`, `hourly` (24 hours, percentiles null under 5
    /// readings), `lows` (`id` is the reading id `<meter>/<epoch>/<sequence>`, `time` with seconds); then
    /// `person`, `meters`, `hi`, `lo`, `excluded` and `previous` (the same summary figures for the period of
    /// the same length before, with `lowCount`; null when not computed). Figures other than percentages carry
    /// two decimals.
    public func json(_ context: ReportContext) -> JSONValue {
        let ranges = self.rangesJSON
        let byMeal = JSONObject(
            self.byMeal.map { ($0.tag.rawValue, ["count": .int(Int64($0.count)), "meanMgdL": number($0.meanMgdL)]) })
        let hourly: [JSONValue] = self.hourly.map { h in
            var object: JSONObject = ["hour": .int(Int64(h.hour)), "count": .int(Int64(h.count))]
            for (index, name) in ["p10", "p25", "p50", "p75", "p90"].enumerated() {
                object[name] = number(h.percentiles?[index])
            }
            return .object(object)
        }
        let lows: [JSONValue] = self.lows.map { r in
            [
                "id": .string(r.readingID), "time": .string(r.local.iso), "mgdL": number(r.result.mgdL), "meal": .string(r.meal.rawValue),
                "lo": .bool(r.result == .lo), "meter": .string(r.meter),
            ]
        }
        let meters: [JSONValue] = context.meters.map {
            ["id": .string($0.id), "name": .string($0.name), "serialNumber": .from($0.serialNumber)]
        }
        let object: JSONObject = [
            "period": [
                "from": .string(isoUTC(self.period.fromMillis)), "to": .string(isoUTC(self.period.toMillis)),
                "days": number(self.period.days),
            ],
            "unit": .string(context.unit.rawValue),
            "readings": .int(Int64(self.readingCount)),
            "readingsPerDay": number(self.readingsPerDay),
            "daysWithReadings": .int(Int64(self.daysWithReadings)),
            "meanMgdL": number(self.meanMgdL),
            "sdMgdL": number(self.sdMgdL),
            "cvPercent": number(self.cvPercent),
            "ranges": .object(ranges),
            "target": ["lowMgdL": number(self.target.lowMgdL), "highMgdL": number(self.target.highMgdL)],
            "mealTargets": self.mealTargetsJSON,
            "byMeal": .object(byMeal),
            "hourly": .array(hourly),
            "lows": .array(lows),
            "person": .from(context.person),
            "meters": .array(meters),
            "hi": .int(Int64(self.hiCount)),
            "lo": .int(Int64(self.loCount)),
            "excluded": [
                "controlSolution": .int(Int64(context.controlSolutionCount)), "notGlucose": .int(Int64(context.notGlucoseCount)),
            ],
            "previous": context.previous.map(\.summaryJSON) ?? .null,
        ]
        return .object(object)
    }

    /// Percent of readings per range, one decimal.
    var rangesJSON: JSONObject {
        JSONObject(GlucoseRange.allCases.map { ($0.rawValue, JSONValue.double(rounded(self.percent($0), 1))) })
    }

    /// The meal targets, the readings they apply to and how many met them (percent with one decimal).
    var mealTargetsJSON: JSONValue {
        func counts(_ figures: MealTargetFigures) -> [(String, JSONValue)] {
            [("readings", .int(Int64(figures.readings))), ("inTarget", .int(Int64(figures.met))),
             ("percent", .from(figures.percent.map { rounded($0, 1) }))]
        }
        let before = JSONObject(
            [("lowMgdL", number(self.mealTargets.beforeMeal.lowMgdL)), ("highMgdL", number(self.mealTargets.beforeMeal.highMgdL))]
                + counts(self.beforeMealTarget))
        let after = JSONObject([("belowMgdL", number(self.mealTargets.afterMealBelowMgdL))] + counts(self.afterMealTarget))
        return ["beforeMeal": .object(before), "afterMeal": .object(after)]
    }

    /// The figures compared with another period: `period`, `readings`, `readingsPerDay`, `daysWithReadings`,
    /// `meanMgdL`, `sdMgdL`, `cvPercent`, `ranges`, `mealTargets`, `lowCount`, `hi`, `lo`.
    public var summaryJSON: JSONValue {
        [
            "period": [
                "from": .string(isoUTC(self.period.fromMillis)), "to": .string(isoUTC(self.period.toMillis)),
                "days": number(self.period.days),
            ],
            "readings": .int(Int64(self.readingCount)),
            "readingsPerDay": number(self.readingsPerDay),
            "daysWithReadings": .int(Int64(self.daysWithReadings)),
            "meanMgdL": number(self.meanMgdL),
            "sdMgdL": number(self.sdMgdL),
            "cvPercent": number(self.cvPercent),
            "ranges": .object(self.rangesJSON),
            "mealTargets": self.mealTargetsJSON,
            "lowCount": .int(Int64(self.lows.count)),
            "hi": .int(Int64(self.hiCount)),
            "lo": .int(Int64(self.loCount)),
        ]
    }
}

/// A figure for JSON: two decimals, null for none.
func number(_ value: Double?) -> JSONValue { .from(value.map { rounded($0, 2) }) }

/// `2024-03-31T06:00:00Z` (seconds precision).
func isoUTC(_ millis: Int64) -> String {
    CivilCalendar.isoUTC(secondsSinceEpoch: millis >= 0 ? millis / 1000 : (millis - 999) / 1000)
}
