import Foundation
import GlucoseProfile
import GlucoseReport
import JSON
import SugarWire
import Testing

/// The report's figures against numbers worked out by hand from `ReportSamples` (no production code
/// involved in the expectations), and the HTML's structure.
@Suite struct GlucoseReportTests {
    static func parsed(_ records: [ReportSamples.Record]) -> (readings: [ReportReading], control: Int, other: Int) {
        var readings: [ReportReading] = []
        var control = 0
        var other = 0
        for element in ReportSamples.json(records) {
            switch ReportReading.parse(element) {
            case .success(let r): readings.append(r)
            case .failure(let why): if why.exclusion == .controlSolution { control += 1 } else { other += 1 }
            }
        }
        return (readings, control, other)
    }

    static func spring(target: TargetRange = .standard) -> ReportFigures {
        ReportFigures(
            readings: self.parsed(ReportSamples.spring).readings,
            period: ReportPeriod(fromMillis: ReportSamples.springFrom, toMillis: ReportSamples.springTo), target: target)
    }

    static func approx(_ a: Double?, _ b: Double, _ tolerance: Double = 1e-6) -> Bool {
        guard let a else { return false }
        return abs(a - b) <= tolerance
    }

    @Test func readingsLeaveOutControlSolutionAndKeepHIAndLO() {
        let (readings, control, other) = Self.parsed(ReportSamples.spring)
        // 16 records: r5 is a control-solution test; the other 15 count, HI (r10) and LO (r14) among them.
        #expect(readings.count == 15)
        #expect(control == 1 && other == 0)
        #expect(readings.filter { $0.result == .hi }.map(\.id) == [10])
        #expect(readings.filter { $0.result == .lo }.map(\.id) == [14])
        // r7: the meter's 02:30 on 2024-03-31 never happened in Berlin; sugard moved it to 03:30 CEST.
        let r7 = readings.first { $0.id == 7 }
        #expect(r7?.local.hour == 3 && r7?.local.minute == 30 && r7?.local.utcOffsetMinutes == 120)
        // r6 at 01:30 is still CET.
        #expect(readings.first { $0.id == 6 }?.local.utcOffsetMinutes == 60)
        // r9: 8.3 mmol/L from the Contour = 8.3 x 18.0156 = 149.52948 mg/dL.
        #expect(Self.approx(readings.first { $0.id == 9 }?.result.mgdL, 149.52948, 1e-9))
        #expect(readings.first { $0.id == 9 }?.meal == .beforeMeal)
        #expect(readings.first { $0.id == 1 }?.meal == .fasting)
        #expect(readings.first { $0.id == 6 }?.meal == MealTag.none)
    }

    @Test func statisticsRangesAndMeals() throws {
        let f = Self.spring()
        // Period: 2024-03-29T23:00Z to 2024-04-01T22:00Z = 71 h = 2.958333 days; 15 / (71/24) = 360/71 = 5.070423 per day.
        #expect(Self.approx(f.period.days, 71.0 / 24))
        #expect(Self.approx(f.readingsPerDay, 5.070423, 1e-6))
        // Numbers (13, without HI and LO): 95 110 210 65 50 140 60 149.52948 252.2184 130 72.0624 180 181.
        // Sum = 1221 (the integers) + 149.52948 + 252.2184 + 72.0624 = 1694.81028; mean = 1694.81028 / 13 = 130.370022.
        #expect(Self.approx(f.meanMgdL, 130.370022, 1e-6))
        // Sum of squares 268377.176181; SS = 268377.176181 - 1694.81028^2 / 13 = 47424.723474; / 12 = 3952.060290;
        // sqrt = 62.865414.
        #expect(Self.approx(f.sdMgdL, 62.865414, 1e-6))
        // CV = 62.865414 / 130.370022 x 100 = 48.220759.
        #expect(Self.approx(f.cvPercent, 48.220759, 1e-5))
        // Ranges of the 15: very low r6 (50) r14 (LO) = 2; low r4 (65) r8 (60) = 2; target r1 r2 r7 r9 r12
        // r13 (72.06) r15 (180) = 7; high r3 (210) r16 (181) = 2; very high r10 (HI) r11 (252.2) = 2.
        #expect(f.rangeCounts == [.veryLow: 2, .low: 2, .target: 7, .high: 2, .veryHigh: 2])
        // By meal: fasting r1 r8 r12 r13 = (95 + 60 + 130 + 72.0624) / 4 = 89.2656; before meal r2 r9 =
        // (110 + 149.52948) / 2 = 129.76474; after meal r3 r10 (HI) r15: 3 readings, mean (210 + 180) / 2 = 195;
        // bedtime r4 r16 = (65 + 181) / 2 = 123; none r6 r7 r11 r14 (LO): 4, mean (50 + 140 + 252.2184) / 3 = 147.406133.
        let meals = Dictionary(uniqueKeysWithValues: f.byMeal.map { ($0.tag, $0) })
        #expect(meals[.fasting]?.count == 4 && Self.approx(meals[.fasting]?.meanMgdL, 89.2656))
        #expect(meals[.beforeMeal]?.count == 2 && Self.approx(meals[.beforeMeal]?.meanMgdL, 129.76474))
        #expect(meals[.afterMeal]?.count == 3 && Self.approx(meals[.afterMeal]?.meanMgdL, 195))
        #expect(meals[.bedtime]?.count == 2 && Self.approx(meals[.bedtime]?.meanMgdL, 123))
        #expect(meals[MealTag.none]?.count == 4 && Self.approx(meals[MealTag.none]?.meanMgdL, 147.406133, 1e-6))
        // Lows (< 70, LO included), in time order: r4 Sat 22:15, r6 Sun 01:30, r8 Sun 07:20, r14 Mon 03:10.
        #expect(f.lows.map(\.id) == [4, 6, 8, 14])
        #expect(f.hiCount == 1 && f.loCount == 1)
        // Days with readings: 30 Mar (r1-r4), 31 Mar (r6-r11), 1 Apr (r12-r16): 3 of the period's 2.96 days.
        #expect(f.daysWithReadings == 3)
        // Before meals (fasting and before-meal tags): r1 95, r2 110, r8 60, r9 149.53, r12 130, r13 72.06. In 70-130:
        // r1, r2, r12 (130: the bound counts), r13 (72 as whole mg/dL) = 4 of 6 = 66.666667 %.
        #expect(f.beforeMealTarget.readings == 6 && f.beforeMealTarget.met == 4)
        #expect(Self.approx(f.beforeMealTarget.percent, 66.666667, 1e-6))
        // After meals: r3 210, r10 HI, r15 180 (not below 180) = 0 of 3.
        #expect(f.afterMealTarget.readings == 3 && f.afterMealTarget.met == 0 && f.afterMealTarget.percent == 0)
        // Other targets: 80-150 before (r1 95, r2 110, r9 149.5 -> 150, r12 130 = 4 of 6), below 181 after (r15 180 = 1 of 3).
        let other = ReportFigures(
            readings: f.readings, period: f.period,
            mealTargets: MealTargets(beforeMeal: try #require(TargetRange(parsing: "80-150")), afterMealBelowMgdL: 181))
        #expect(other.beforeMealTarget.met == 4 && other.afterMealTarget.met == 1)
        #expect(MealTargets.bound(parsing: "10") == 180.16 && MealTargets.bound(parsing: "180") == 180 && MealTargets.bound(parsing: "x") == nil)
    }

    @Test func previousPeriodOfTheSameLength() throws {
        let readings = Self.parsed(ReportSamples.spring).readings
        // 1 April in Berlin (CEST): 2024-03-31T22:00Z to 2024-04-01T22:00Z; the day before: 2024-03-30T22:00Z to 2024-03-31T22:00Z.
        let period = ReportPeriod(fromMillis: 1_711_922_400_000, toMillis: 1_712_008_800_000)
        #expect(period.previous == ReportPeriod(fromMillis: 1_711_836_000_000, toMillis: 1_711_922_400_000))
        let this = ReportFigures(readings: readings.filter { $0.epochMillis >= period.fromMillis }, period: period)
        let before = ReportFigures(
            readings: readings.filter { $0.epochMillis >= period.previous.fromMillis && $0.epochMillis < period.fromMillis },
            period: period.previous)
        // This day: r12 130, r13 72.0624, r14 LO, r15 180, r16 181: 5 readings, mean (130 + 72.0624 + 180 + 181) / 4 = 140.7656.
        #expect(this.readings.count == 5 && Self.approx(this.meanMgdL, 140.7656) && this.lows.count == 1)
        // The day before: r6 50, r7 140, r8 60, r9 149.52948, r10 HI, r11 252.2184 (r4 at 21:15Z on the 30th is earlier):
        // 6 readings, mean 651.74788 / 5 = 130.349576; lows r6, r8; one local day; before meals r8 60, r9 149.5: 0 of 2.
        #expect(before.readings.count == 6 && Self.approx(before.meanMgdL, 130.349576, 1e-6))
        #expect(before.lows.count == 2 && before.daysWithReadings == 1 && before.hiCount == 1)
        #expect(before.beforeMealTarget.readings == 2 && before.beforeMealTarget.met == 0)
        let context = ReportContext(unit: .mgdl, madeAtMillis: 1_712_100_000_000, madeAtUTCOffsetMinutes: 120, previous: before)
        let json = this.json(context)
        #expect(json["previous"]?["readings"] == 6 && json["previous"]?["meanMgdL"] == 130.35 && json["previous"]?["lowCount"] == 2)
        #expect(json["previous"]?["daysWithReadings"] == 1 && json["previous"]?["period"]?["from"] == "2024-03-30T22:00:00Z")
        #expect(json["previous"]?["mealTargets"]?["beforeMeal"]?["inTarget"] == 0)
        #expect(json["previous"]?["ranges"]?["veryLow"] == 16.7)  // r6 (50) of 6
        #expect(this.json(ReportContext(unit: .mgdl, madeAtMillis: 0))["previous"] == .null)
        // The page shows both columns: 140.8 -> "141" this day, "130" the day before.
        let html = this.html(context)
        #expect(html.contains("Previous <span class=\"tag\">Sun 31 Mar – Sun 31 Mar</span>"), "the previous period's dates")
        #expect(html.contains("<td>Mean mg/dL</td><td class=\"num\"><b>141</b></td><td class=\"num\">130</td>"))
        #expect(html.contains("<td>Days with readings</td><td class=\"num\"><b>1 of 1</b></td><td class=\"num\">1 of 1</td>"))
    }

    @Test func lowsKeepTheSecondsAndTheReadingID() throws {
        let readings = Self.parsed(ReportSamples.spring + [ReportSamples.lateLow]).readings
        let late = try #require(readings.first { $0.local.second == 45 })
        // 22:37:45 on 1 April is CEST: 20:37:45Z.
        #expect(late.local.clockTextWithSeconds == "22:37:45" && late.epochMillis == 1_712_003_865_000)
        let f = ReportFigures(readings: readings, period: ReportPeriod(fromMillis: ReportSamples.springFrom, toMillis: ReportSamples.springTo))
        let json = f.json(ReportContext(unit: .mgdl, madeAtMillis: 1_712_100_000_000))
        let low = try #require(json["lows"]?.arrayValue?.last)
        #expect(low["time"] == "2024-04-01T22:37:45+02:00" && low["mgdL"]?.doubleValue == 55)
        // The reading's id as everywhere else: meter/epoch/sequence (the Roche's record 14, stored as row 17).
        #expect(low["id"] == "60:77:71:8A:0B:14/0/14" && late.id == 17)
        let html = f.html(ReportContext(unit: .mgdl, madeAtMillis: 1_712_100_000_000))
        #expect(html.contains("<td>22:37:45</td>") && html.contains("data-low=\"60:77:71:8A:0B:14/0/14\""))
    }

    @Test func hourlyPercentilesAreTypeSeven() throws {
        let f = Self.spring()
        // Hour 7 holds r1 95, r2 110, r8 60, r9 149.52948, r12 130, r13 72.0624. Sorted: 60, 72.0624, 95, 110, 130,
        // 149.52948; h = 5p. p10: h 0.5 -> 60 + 0.5 x 12.0624 = 66.0312; p25: h 1.25 -> 72.0624 + 0.25 x 22.9376 = 77.7968;
        // p50: h 2.5 -> 102.5; p75: h 3.75 -> 110 + 0.75 x 20 = 125; p90: h 4.5 -> 130 + 0.5 x 19.52948 = 139.76474.
        let seven = f.hourly[7]
        #expect(seven.count == 6)
        let p = try #require(seven.percentiles)
        for (got, want) in zip(p, [66.0312, 77.7968, 102.5, 125, 139.76474]) { #expect(Self.approx(got, want), "\(got) vs \(want)") }
        // Under 5 readings: no bands. Hour 2 of the spring day never existed: nothing in it; hour 3 holds r7 (140)
        // and r14 (LO, no number); hour 13 only the HI.
        #expect(f.hourly.filter { $0.percentiles != nil }.map(\.hour) == [7])
        #expect(f.hourly[2].count == 0 && f.hourly[3].count == 1 && f.hourly[13].count == 0 && f.hourly[1].count == 1)
        #expect(f.hourly.reduce(0) { $0 + $1.count } == 13)
        // NumPy's documented example values for 1...10: 1.9, 3.25, 5.5, 7.75, 9.1.
        let ten = (1...10).map(Double.init)
        for (level, want) in zip(ReportFigures.percentileLevels, [1.9, 3.25, 5.5, 7.75, 9.1]) {
            #expect(Self.approx(percentile(sorted: ten, level), want, 1e-12))
        }
        #expect(percentile(sorted: [42], 0.9) == 42)
    }

    @Test func targetOptionMovesTheRanges() throws {
        // 70-140: r9 (149.5) and r15 (180) leave target for high: target 5, high 4.
        let f = Self.spring(target: try #require(TargetRange(parsing: "70-140")))
        #expect(f.rangeCounts[.target] == 5 && f.rangeCounts[.high] == 4 && f.rangeCounts[.low] == 2)
        // mmol/L: 3.9-10 is 70.26-180.16 mg/dL.
        let mmol = try #require(TargetRange(parsing: "3.9-10"))
        #expect(Self.approx(mmol.lowMgdL, 70.26) && Self.approx(mmol.highMgdL, 180.16))
        #expect(TargetRange(parsing: "180-70") == nil && TargetRange(parsing: "abc") == nil && TargetRange(parsing: "70") == nil)
        // Whole mg/dL decide: 10.0 mmol/L (180.156) is in target, 3.0 mmol/L (54.05) low, 2.9 (52.2) very low.
        #expect(TargetRange.standard.range(of: .mgdL(180.156)) == .target)
        #expect(TargetRange.standard.range(of: .mgdL(54.0468)) == .low)
        #expect(TargetRange.standard.range(of: .mgdL(52.245)) == .veryLow)
        #expect(TargetRange.standard.range(of: .mgdL(250.4)) == .high)
    }

    @Test func autumnChangeKeepsEachHour() throws {
        let readings = Self.parsed(ReportSamples.autumn).readings
        // 01:30 CEST (23:30Z), 02:30 CEST (the first of the two, 00:30Z), 03:30 CET (02:30Z).
        #expect(readings.map(\.local.utcOffsetMinutes) == [120, 120, 60])
        #expect(readings.map(\.epochMillis) == [1_729_985_400_000, 1_729_989_000_000, 1_729_996_200_000])
        let f = ReportFigures(readings: readings, period: ReportPeriod(fromMillis: 1_729_980_000_000, toMillis: 1_730_070_000_000))
        #expect(f.hourly[1].count == 1 && f.hourly[2].count == 1 && f.hourly[3].count == 1)
        // 100, 120, 140: mean 120; SD sqrt((400 + 0 + 400) / 2) = 20; CV 16.666667.
        #expect(Self.approx(f.meanMgdL, 120) && Self.approx(f.sdMgdL, 20) && Self.approx(f.cvPercent, 16.666667, 1e-6))
        // 2024-10-26T22:00Z to 2024-10-27T23:00Z is Sunday 27 October in Berlin, midnight to midnight: 25 hours.
        #expect(f.days.map(\.date.description) == ["2024-10-27"])
        #expect(Self.approx(f.period.days, 25.0 / 24))
        #expect(f.days.first?.readings.count == 3)
    }

    @Test func daysAreLocalDaysOfThePeriod() throws {
        let readings = Self.parsed(ReportSamples.fortnight).readings
        // 2024-06-01T00:00Z to 2024-06-15T00:00Z is 02:00 on 1 June to 02:00 on 15 June in Berlin: the two hours
        // of 15 June hold nothing and are not a day of their own; 1 June (22 hours) is.
        let f = ReportFigures(readings: readings, period: ReportPeriod(fromMillis: 1_717_200_000_000, toMillis: 1_718_409_600_000))
        #expect(f.days.count == 14)
        #expect(f.days.first?.date.description == "2024-06-01" && f.days.last?.date.description == "2024-06-14")
        #expect(f.days.allSatisfy { $0.readings.count == 6 })
        #expect(f.html(ReportContext(unit: .mgdl, madeAtMillis: 1_718_409_600_000)).contains("1 Jun 2024 – 14 Jun 2024 (14 days)"))
        // From noon on: an empty first day is left out too; one with a reading is kept.
        let late = ReportFigures(readings: readings, period: ReportPeriod(fromMillis: 1_717_149_600_000, toMillis: 1_718_409_600_000))
        #expect(late.days.first?.date.description == "2024-06-01")  // 31 May 12:00 CEST: empty half day dropped
        #expect(CivilDate.before(CivilDate(year: 2024, month: 3, day: 1), from: CivilDate(year: 2024, month: 2, day: 20)).description == "2024-02-29")
    }

    /// Issue 39: the figures take the readings one at a time and keep what the page draws, not every
    /// reading: 6000 readings over 60 days give the same statistics as the values written out, the
    /// chart keeps the latest 2000, the daily view and logbook the latest 14 days, and the page says so.
    @Test func manyReadingsAreSummedNotKept() throws {
        let start: Int64 = 1_717_200_000_000  // 2024-06-01T00:00Z
        var readings: [ReportReading] = []
        for i in 0..<6000 {
            let millis = start + Int64(i) * 864_000  // 100 a day
            let value = Double(40 + (i * 37) % 300)
            readings.append(
                ReportReading(
                    id: Int64(i + 1), meter: "C0:26:DA:01:02:03", epochMillis: millis,
                    local: LocalStamp(epochMillis: millis, utcOffsetMinutes: 120), result: .mgdL(value), meal: .none))
        }
        let period = ReportPeriod(fromMillis: start, toMillis: start + 60 * 86_400_000)
        let f = ReportFigures(readings: readings.shuffled(), period: period)
        let values = readings.compactMap(\.result.mgdL)
        #expect(f.readingCount == 6000 && f.readings.count == ReportFigures.drawnReadings)
        #expect(f.readings.map(\.id) == Array(4001...6000).map { Int64($0) }, "the latest, in time order")
        #expect(Self.approx(f.meanMgdL, values.reduce(0, +) / 6000, 1e-9))
        let mean = values.reduce(0, +) / 6000
        let sd = (values.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / 5999).squareRoot()
        #expect(Self.approx(f.sdMgdL, sd, 1e-9))
        for hour in [0, 7, 23] {
            let sorted = readings.filter { $0.local.hour == hour }.compactMap(\.result.mgdL).sorted()
            #expect(f.hourly[hour].count == sorted.count)
            #expect(f.hourly[hour].percentiles == ReportFigures.percentileLevels.map { percentile(sorted: sorted, $0) })
        }
        #expect(f.lows.count == values.count { $0.rounded() < 70 })
        #expect(f.daysWithReadings == 61)
        let kept = f.days.filter { !$0.readings.isEmpty }
        #expect(kept.count == ReportFigures.printedDays && kept.last?.date == f.days.last?.date)
        let html = f.html(ReportContext(unit: .mgdl, madeAtMillis: period.toMillis))
        #expect(html.contains("the latest 2000 of 6000 readings by local time"))
        #expect(html.contains("of 61 days with readings ("))
        #expect(html.utf8.count < 600_000, "\(html.utf8.count) bytes")
    }

    @Test func jsonCarriesTheContractKeys() throws {
        let f = Self.spring()
        let json = f.json(ReportContext(unit: .mmol, madeAtMillis: 1_712_100_000_000, controlSolutionCount: 1))
        for key in [
            "period", "unit", "readings", "readingsPerDay", "meanMgdL", "sdMgdL", "cvPercent", "ranges", "target", "byMeal",
            "hourly", "lows",
        ] {
            #expect(json[key] != nil, "\(key)")
        }
        #expect(json["period"]?["from"] == "2024-03-29T23:00:00Z" && json["period"]?["to"] == "2024-04-01T22:00:00Z")
        #expect(json["period"]?["days"] == 2.96)
        #expect(json["unit"] == "mmol" && json["readings"] == 15 && json["readingsPerDay"] == 5.07 && json["daysWithReadings"] == 3)
        #expect(json["mealTargets"]?["beforeMeal"] == ["lowMgdL": 70.0, "highMgdL": 130.0, "readings": 6, "inTarget": 4, "percent": 66.7])
        #expect(json["mealTargets"]?["afterMeal"] == ["belowMgdL": 180.0, "readings": 3, "inTarget": 0, "percent": 0.0])
        #expect(json["meanMgdL"] == 130.37 && json["sdMgdL"] == 62.87 && json["cvPercent"] == 48.22)
        // 2/15 = 13.3 %, 7/15 = 46.7 %.
        #expect(json["ranges"] == ["veryLow": 13.3, "low": 13.3, "target": 46.7, "high": 13.3, "veryHigh": 13.3])
        #expect(json["target"]?["lowMgdL"]?.doubleValue == 70 && json["target"]?["highMgdL"]?.doubleValue == 180)
        #expect(json["byMeal"]?.objectValue?.keys == ["fasting", "beforeMeal", "afterMeal", "bedtime", "none"])
        #expect(json["byMeal"]?["fasting"] == ["count": 4, "meanMgdL": 89.27])
        #expect(json["byMeal"]?["afterMeal"]?["count"] == 3 && json["byMeal"]?["afterMeal"]?["meanMgdL"]?.doubleValue == 195)
        let hourly = try #require(json["hourly"]?.arrayValue)
        #expect(hourly.count == 24 && hourly.map { $0["hour"]?.intValue } == (0..<24).map { Int64($0) })
        #expect(hourly[7]["hour"] == 7 && hourly[7]["count"] == 6)
        #expect(["p10", "p25", "p50", "p75", "p90"].map { hourly[7][$0]?.doubleValue } == [66.03, 77.8, 102.5, 125, 139.76])
        #expect(hourly[3] == ["hour": 3, "count": 1, "p10": nil, "p25": nil, "p50": nil, "p75": nil, "p90": nil])
        let lows = try #require(json["lows"]?.arrayValue)
        // The reading ids (meter/epoch/sequence), not row numbers: r14 is the Roche's record 11.
        #expect(lows.map { $0["id"]?.stringValue } == ["60:77:71:8A:0B:14/0/4", "60:77:71:8A:0B:14/0/6", "60:77:71:8A:0B:14/0/8", "60:77:71:8A:0B:14/0/11"])
        #expect(lows[0]["time"] == "2024-03-30T22:15:00+01:00" && lows[0]["mgdL"]?.doubleValue == 65 && lows[0]["meal"] == "bedtime")
        #expect(lows[2]["time"] == "2024-03-31T07:20:00+02:00" && lows[2]["meal"] == "fasting")
        #expect(lows[3]["mgdL"] == .null && lows[3]["lo"] == true && lows[3]["meal"] == "none")
        #expect(json["excluded"]?["controlSolution"] == 1)
    }

    @Test func htmlIsSelfContainedWithOnePointPerReading() throws {
        let f = Self.spring()
        let context = ReportContext(
            unit: .mgdl, person: "Ada <Lovelace>",
            meters: [.init(id: "60:77:71:8A:0B:14", name: "Roche Accu-Chek Guide", serialNumber: "92500012345")],
            madeAtMillis: 1_712_100_000_000)
        let html = f.html(context)
        #expect(html.hasPrefix("<!DOCTYPE html>"))
        #expect(!html.contains("http://") && !html.contains("https://") && !html.contains("<script"))
        #expect(!html.contains("url(http") && !html.contains("@import") && !html.contains("<link") && !html.contains("<img"))
        #expect(html.contains("Ada &lt;Lovelace&gt;") && !html.contains("<Lovelace>"))
        #expect(html.contains("92500012345") && html.contains("@media print") && html.contains("size:A4"))
        // Time of day: one element of class pt per reading (15, HI and LO on the edges); the daily charts: dpt.
        #expect(html.components(separatedBy: "class=\"pt reading ").count - 1 == 15)
        #expect(html.components(separatedBy: "class=\"dpt ").count - 1 == 15)
        // data-id marks the time-of-day points only: one per reading.
        #expect(html.components(separatedBy: "data-id=").count - 1 == 15)
        #expect(html.components(separatedBy: "data-id=\"10\"").count - 1 == 1)
        #expect(html.components(separatedBy: "data-reading=\"10\"").count - 1 == 1)
        // Percentile bands only for hour 7; three days in the daily view; four lows listed.
        #expect(html.components(separatedBy: "class=\"b90\"").count - 1 == 1 && html.contains("data-hour=\"7\""))
        #expect(html.components(separatedBy: "data-date=").count - 1 == 3)
        #expect(html.components(separatedBy: "<tr class=\"low\"").count - 1 == 4)
        // In mmol/L the axis and ranges speak mmol/L: 3.0, 3.9, 10.0, 13.9.
        let mmol = f.html(ReportContext(unit: .mmol, madeAtMillis: 1_712_100_000_000))
        for tick in [">3.0<", ">3.9<", ">10.0<", ">13.9<", "mmol/L"] { #expect(mmol.contains(tick), "\(tick)") }
        // Every range in the bar has its pattern (not colour alone) and its label.
        for range in GlucoseRange.allCases {
            #expect(html.contains("id=\"pat-\(range.rawValue)\""))
            #expect(html.contains("seg-\(range.rawValue)"))
        }
    }
}
