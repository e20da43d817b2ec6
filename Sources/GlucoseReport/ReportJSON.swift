import GlucoseProfile
public import JSON

/// Who and what a report is about, beyond the readings.
public struct ReportContext: Sendable {
    /// A meter as the header shows it.
    public struct Meter: Sendable, Hashable {
        public var id: String
        public var name: String
        public var serialNumber: String?
        public init(id: String, name: String, serialNumber: String?) {
            self.id = id
            self.name = name
            self.serialNumber = serialNumber
        }
    }

    public var unit: ReportUnit
    public var person: String?
    public var meters: [Meter]
    /// When the report was made (milliseconds since the epoch) and the offset to show it at.
    public var madeAtMillis: Int64
    public var madeAtUTCOffsetMinutes: Int
    /// Readings of the period left out: control-solution tests, and records that are not glucose values.
    public var controlSolutionCount: Int
    public var notGlucoseCount: Int

    public init(
        unit: ReportUnit, person: String? = nil, meters: [Meter] = [], madeAtMillis: Int64, madeAtUTCOffsetMinutes: Int = 0,
        controlSolutionCount: Int = 0, notGlucoseCount: Int = 0
    ) {
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
    /// `sugarctl report --format json`: `period` {`from`, `to`, `days`}, `unit`, `readings`, `readingsPerDay`,
    /// `meanMgdL`, `sdMgdL`, `cvPercent`, `ranges` (percent, one decimal), `target`, `byMeal`, `hourly` (24 hours,
    /// percentiles null under 5 readings), `lows`; then `person`, `meters`, `hi`, `lo` and `excluded`.
    /// Figures other than the range percentages carry two decimals.
    public func json(_ context: ReportContext) -> JSONValue {
        func number(_ value: Double?) -> JSONValue { .from(value.map { rounded($0, 2) }) }
        let ranges = JSONObject(GlucoseRange.allCases.map { ($0.rawValue, JSONValue.double(rounded(self.percent($0), 1))) })
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
                "id": .int(r.id), "time": .string(r.local.iso), "mgdL": number(r.result.mgdL), "meal": .string(r.meal.rawValue),
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
            "readings": .int(Int64(self.readings.count)),
            "readingsPerDay": number(self.readingsPerDay),
            "meanMgdL": number(self.meanMgdL),
            "sdMgdL": number(self.sdMgdL),
            "cvPercent": number(self.cvPercent),
            "ranges": .object(ranges),
            "target": ["lowMgdL": number(self.target.lowMgdL), "highMgdL": number(self.target.highMgdL)],
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
        ]
        return .object(object)
    }
}

/// `2024-03-31T06:00:00Z` (seconds precision).
func isoUTC(_ millis: Int64) -> String {
    CivilCalendar.isoUTC(secondsSinceEpoch: millis >= 0 ? millis / 1000 : (millis - 999) / 1000)
}
