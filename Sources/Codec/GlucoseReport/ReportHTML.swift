import GlucoseProfile
import SugarWire

/// The HTML report: one self-contained page (inline CSS and SVG, no script, nothing fetched), readable
/// on a phone and printing to two A4 pages for any period up to 90 days: the summaries on page one (figures
/// beside the previous period's, time in ranges, meal tags, the latest lows), the time-of-day chart, the
/// latest days and a logbook of the latest days on page two. What is bounded says so; the JSON has it all.
/// Every reading drawn in the time-of-day chart is an element with classes `pt reading` and `data-id` (its
/// row id), the only elements carrying `data-id`; in the daily charts class `dpt` and `data-reading`.
extension ReportFigures {
    /// At most this many days in the daily view and the logbook (the latest ones), so page two holds them.
    public static let printedDays = 14
    /// How much of page two the logbook may fill, in lines of its cells (a day takes as many lines as its
    /// fullest time slot, plus ``logbookLinesPerRow`` for the row itself): the latest days that fit.
    static let logbookLines = 26.0
    static let logbookLinesPerRow = 0.6
    /// At most this many lows in the list (the latest), in columns of ``lowsPerColumn``.
    public static let printedLows = 30
    static let lowsPerColumn = 10

    /// The page for these figures and `context`.
    public func html(_ context: ReportContext) -> String {
        let unit = context.unit
        let days = self.days
        let fromDate = days.first?.date ?? CivilDate(epochMillis: self.period.fromMillis, utcOffsetMinutes: context.madeAtUTCOffsetMinutes)
        let toDate = days.last?.date ?? CivilDate(epochMillis: self.period.toMillis - 1, utcOffsetMinutes: context.madeAtUTCOffsetMinutes)
        let made = LocalStamp(epochMillis: context.madeAtMillis, utcOffsetMinutes: context.madeAtUTCOffsetMinutes)
        let periodText = "\(fromDate.longText) – \(toDate.longText) (\(fixed(self.period.days, digits: self.period.days.rounded() == self.period.days ? 0 : 1)) days)"
        let scale = GlucoseScale(highestMgdL: self.highestMgdL, target: self.target)

        var h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        h += "<title>Glucose report \(htmlEscaped(context.person.map { $0 + ", " } ?? ""))\(fromDate) to \(toDate)</title>"
        h += "<style>\(reportStyle)</style></head><body>\n\(reportPatterns)<main>\n"

        // Page 1: who, the figures, the day overlaid.
        h += "<section class=\"page page1\">\n<header><h1>Blood glucose report</h1>"
        if let person = context.person { h += "<p class=\"who\"><b>\(htmlEscaped(person))</b></p>" }
        h += "<dl class=\"meta\"><dt>Period</dt><dd>\(periodText)</dd>"
        h += "<dt>Unit</dt><dd>\(unit.symbol)</dd>"
        h += "<dt>Meters</dt><dd>"
        h += context.meters.isEmpty ? "–" : context.meters.map { m in
            htmlEscaped(m.name) + (m.serialNumber.map { ", serial " + htmlEscaped($0) } ?? "") + " <span class=\"tag\">(\(htmlEscaped(m.id)))</span>"
        }.joined(separator: "<br>")
        h += "</dd><dt>Made</dt><dd>\(made.date.longText) \(made.clockText) by sugard</dd></dl></header>\n"

        h += "<div class=\"summary\">" + self.statisticsHTML(context) + self.rangesHTML(unit) + "</div>\n"
        h += self.mealHTML(unit)
        h += self.lowsHTML(unit)
        h += "</section>\n"

        // Page 2: the day by time of day, the latest days one by one, the logbook.
        h += "<section class=\"page page2\">\n"
        let drawn = self.readings.count < self.readingCount ? "the latest \(self.readings.count) of \(self.readingCount) readings" : "every reading"
        h += "<section><h2>Time of day <small>\(drawn) by local time; bands: 10–90 % and 25–75 % of readings "
        h += "per hour (hours with at least \(Self.minimumForPercentiles)), line: median</small></h2>\n"
        h += "<div class=\"scroll\">" + self.overlaySVG(scale: scale, unit: unit) + "</div>"
        h += "<p class=\"note\">● in target · ▼ below target · ▲ above target · HI/LO: beyond the meter's range "
        h += "(drawn at the edge). Shaded: target \(unit.text(self.target.lowMgdL))–\(unit.text(self.target.highMgdL)) \(unit.symbol).</p></section>\n"
        let shownDays = Array(days.suffix(Self.printedDays))
        let bounded = shownDays.count < days.count ? ", the last \(shownDays.count) of \(days.count) days" : ""
        h += "<section><h2>Daily view <small>one chart per day, 0–24 h\(bounded); lows ▼ ringed</small></h2><div class=\"days\">\n"
        let lowIDs = Set(self.lows.map(\.id))
        for (date, readings) in shownDays { h += self.dayHTML(date, readings, lowIDs: lowIDs, scale: scale, unit: unit) }
        h += "</div></section>\n"
        h += self.logbookHTML(days, unit: unit)
        h += "<footer>Ranges after the International Consensus on Time in Range (Battelino et al., Diabetes Care 2019): "
        h += "very low &lt; \(unit.text(54)), low \(unit.text(54)) to under \(unit.text(self.target.lowMgdL)), "
        h += "target \(unit.text(self.target.lowMgdL))–\(unit.text(self.target.highMgdL)), high up to \(unit.text(250)), "
        h += "very high &gt; \(unit.text(250)) \(unit.symbol). HI counts as very high and LO as very low; neither enters "
        h += "mean or SD. Control-solution tests are left out. SD is the sample standard deviation; CV = SD ÷ mean × 100.</footer>\n"
        h += "</section>\n</main></body></html>\n"
        return h
    }

    /// The summary figures beside the previous period's, when there are those.
    private func statisticsHTML(_ context: ReportContext) -> String {
        let unit = context.unit
        let previous = context.previous
        func percentText(_ value: Double?) -> String { value.map { fixed($0, digits: 1) + " %" } ?? "–" }
        func mealText(_ figures: MealTargetFigures) -> String {
            figures.readings == 0 ? "–" : "\(percentText(figures.percent)) <span class=\"tag\">(\(figures.met) of \(figures.readings))</span>"
        }
        let targets = self.mealTargets
        let rows: [(String, (ReportFigures) -> String)] = [
            ("Readings", { String($0.readingCount) }),
            ("Days with readings", { "\($0.daysWithReadings) of \(fixed($0.period.days, digits: $0.period.days.rounded() == $0.period.days ? 0 : 1))" }),
            ("Readings per day", { fixed($0.readingsPerDay, digits: 1) }),
            ("Mean \(unit.symbol)", { $0.meanMgdL.map { unit.text($0) } ?? "–" }),
            ("SD \(unit.symbol)", { $0.sdMgdL.map { unit.text($0) } ?? "–" }),
            ("CV (goal ≤ 36 %)", { percentText($0.cvPercent) }),
            ("In target \(unit.text(self.target.lowMgdL))–\(unit.text(self.target.highMgdL))", { percentText($0.percent(.target)) }),
            ("Before meals in \(unit.text(targets.beforeMeal.lowMgdL))–\(unit.text(targets.beforeMeal.highMgdL))", { mealText($0.beforeMealTarget) }),
            ("After meals below \(unit.text(targets.afterMealBelowMgdL))", { mealText($0.afterMealTarget) }),
            ("Lows (below \(unit.text(TargetRange.lowListBelow)))", { "\($0.lows.count)" }),
            ("HI · LO", { "\($0.hiCount) · \($0.loCount)" }),
        ]
        var h = "<section class=\"stats\"><h2>Statistics</h2><table class=\"compare\"><tr><th></th><th class=\"num\">This period</th>"
        if let previous {
            let from = CivilDate(epochMillis: previous.period.fromMillis, utcOffsetMinutes: context.madeAtUTCOffsetMinutes)
            let to = CivilDate(epochMillis: previous.period.toMillis - 1, utcOffsetMinutes: context.madeAtUTCOffsetMinutes)
            h += "<th class=\"num\">Previous <span class=\"tag\">\(from.shortText) – \(to.shortText)</span></th>"
        }
        h += "</tr>"
        for (label, value) in rows {
            h += "<tr><td>\(label)</td><td class=\"num\"><b>\(value(self))</b></td>"
            if let previous { h += "<td class=\"num\">\(previous.readingCount == 0 ? "–" : value(previous))</td>" }
            h += "</tr>"
        }
        h += "</table>"
        var left: [String] = []
        if context.controlSolutionCount > 0 { left.append("\(context.controlSolutionCount) control-solution test(s)") }
        if context.notGlucoseCount > 0 { left.append("\(context.notGlucoseCount) record(s) without a glucose value") }
        if !left.isEmpty { h += "<p class=\"note\">Left out: \(left.joined(separator: ", ")).</p>" }
        h += "<p class=\"note\">Before meals: readings tagged fasting or before a meal; after meals: tagged after a meal; "
        h += "HI and LO meet no target.</p>"
        return h + "</section>\n"
    }

    /// Time in ranges as a stacked bar with each range's percent.
    private func rangesHTML(_ unit: Wire.Unit) -> String {
        let bounds: [GlucoseRange: String] = [
            .veryLow: "&lt; \(unit.text(54))",
            .low: "\(unit.text(54))–&lt;\(unit.text(self.target.lowMgdL))",
            .target: "\(unit.text(self.target.lowMgdL))–\(unit.text(self.target.highMgdL))",
            .high: "&gt;\(unit.text(self.target.highMgdL))–\(unit.text(250))",
            .veryHigh: "&gt; \(unit.text(250)) or HI",
        ]
        // A vertical stacked bar, very high on top as in the AGP report; each part labelled.
        var bar = "<svg class=\"tirbar\" viewBox=\"0 0 300 190\" role=\"img\" aria-label=\"Time in ranges\">"
        var y = 5.0
        let height = 180.0
        for range in GlucoseRange.allCases.reversed() {
            let share = self.percent(range)
            let part = height * share / 100
            if part > 0 {
                bar += "<rect class=\"seg seg-\(range.rawValue)\" data-range=\"\(range.rawValue)\" x=\"10\" y=\"\(fixed(y, digits: 2))\" "
                bar += "width=\"56\" height=\"\(fixed(part, digits: 2))\" fill=\"url(#pat-\(range.rawValue))\" stroke=\"#1b1b1b\" stroke-width=\".8\"/>"
            }
            y += part
        }
        // Labels beside the bar, spaced evenly so none overlaps.
        for (index, range) in GlucoseRange.allCases.reversed().enumerated() {
            let ty = 22.0 + Double(index) * 36
            bar += "<rect x=\"80\" y=\"\(fixed(ty - 11, digits: 1))\" width=\"13\" height=\"13\" fill=\"url(#pat-\(range.rawValue))\" stroke=\"#1b1b1b\"/>"
            bar += "<text x=\"99\" y=\"\(fixed(ty, digits: 1))\" font-size=\"13\"><tspan font-weight=\"bold\">\(fixed(self.percent(range), digits: 1)) %</tspan> \(range.label)</text>"
        }
        bar += "</svg>"
        var table = "<table><tr><th>Range</th><th>\(unit.symbol)</th><th class=\"num\">Readings</th><th class=\"num\">%</th></tr>"
        for range in GlucoseRange.allCases.reversed() {
            table += "<tr><td><span class=\"swatch\"><svg viewBox=\"0 0 14 14\"><rect width=\"14\" height=\"14\" fill=\"url(#pat-\(range.rawValue))\"/></svg></span>\(range.label)</td>"
            table += "<td>\(bounds[range] ?? "")</td><td class=\"num\">\(self.rangeCounts[range] ?? 0)</td>"
            table += "<td class=\"num\">\(fixed(self.percent(range), digits: 1))</td></tr>"
        }
        table += "</table>"
        return "<section class=\"ranges\"><h2>Time in ranges <small>share of readings</small></h2><div class=\"tir\">\(bar)\(table)</div></section>\n"
    }

    /// Readings and mean per meal tag, with the meal targets met.
    private func mealHTML(_ unit: Wire.Unit) -> String {
        var h = "<section><h2>By meal tag</h2><table><tr><th>Tag</th><th class=\"num\">Readings</th><th class=\"num\">Mean \(unit.symbol)</th>"
        h += "<th class=\"num\">Lows</th></tr>"
        for meal in self.byMeal {
            let lows = self.lows.count(where: { $0.meal == meal.tag })
            h += "<tr><td>\(meal.tag.label)</td><td class=\"num\">\(meal.count)</td>"
            h += "<td class=\"num\">\(meal.meanMgdL.map { unit.text($0) } ?? "–")</td><td class=\"num\">\(lows)</td></tr>"
        }
        return h + "</table></section>\n"
    }

    /// The 24-hour overlay: target band, hourly percentile bands, median line and every reading.
    private func overlaySVG(scale: GlucoseScale, unit: Wire.Unit) -> String {
        let frame = ChartFrame(left: 40, top: 14, width: 668, height: 250)
        var s = "<svg class=\"agp\" viewBox=\"0 0 720 300\" role=\"img\" aria-label=\"Readings by time of day\">"
        s += scale.background(frame, unit: unit, labels: true)
        // Percentile bands, one step per hour.
        let hourWidth = frame.width / 24
        var medians: [[(Double, Double)]] = [[]]
        for hour in self.hourly {
            guard let p = hour.percentiles else {
                if !(medians.last?.isEmpty ?? true) { medians.append([]) }
                continue
            }
            let x = frame.left + Double(hour.hour) * hourWidth
            s += "<rect class=\"b90\" data-hour=\"\(hour.hour)\" x=\"\(fixed(x, digits: 2))\" y=\"\(fixed(scale.y(p[4], frame), digits: 2))\" "
            s += "width=\"\(fixed(hourWidth, digits: 2))\" height=\"\(fixed(scale.y(p[0], frame) - scale.y(p[4], frame), digits: 2))\"/>"
            s += "<rect class=\"b75\" x=\"\(fixed(x + 2, digits: 2))\" y=\"\(fixed(scale.y(p[3], frame), digits: 2))\" "
            s += "width=\"\(fixed(hourWidth - 4, digits: 2))\" height=\"\(fixed(scale.y(p[1], frame) - scale.y(p[3], frame), digits: 2))\"/>"
            medians[medians.count - 1].append((x + hourWidth / 2, scale.y(p[2], frame)))
        }
        for run in medians where !run.isEmpty {
            if run.count == 1 {
                s += "<path class=\"med\" d=\"M\(fixed(run[0].0 - hourWidth / 2, digits: 1)) \(fixed(run[0].1, digits: 1))h\(fixed(hourWidth, digits: 1))\"/>"
            } else {
                s += "<polyline class=\"med\" points=\"" + run.map { "\(fixed($0.0, digits: 1)),\(fixed($0.1, digits: 1))" }.joined(separator: " ") + "\"/>"
            }
        }
        for r in self.readings {
            s += scale.marker(r, frame, target: self.target, size: 3.6, cssClass: "pt")
        }
        // Hours on the x axis.
        for hour in stride(from: 0, through: 24, by: 3) {
            let x = frame.left + Double(hour) * hourWidth
            let anchor = hour == 0 ? "start" : hour == 24 ? "end" : "middle"
            s += "<text x=\"\(fixed(x, digits: 1))\" y=\"\(fixed(frame.bottom + 16, digits: 1))\" font-size=\"11\" text-anchor=\"\(anchor)\">\(CivilCalendar.pad(hour, 2)):00</text>"
        }
        s += "<text x=\"6\" y=\"10\" font-size=\"10\">\(unit.symbol)</text>"
        return s + "</svg>\n"
    }

    /// One day's small chart: its readings drawn by time of day (lows ringed), with the day's count
    /// and how many were drawn when not all were kept.
    private func dayHTML(
        _ date: CivilDate, _ readings: [ReportReading], lowIDs: Set<Int64>, scale: GlucoseScale, unit: Wire.Unit
    ) -> String {
        let lows = readings.count(where: { lowIDs.contains($0.id) })
        // A day of a period so dense that its readings were not kept (ReportFigures.keptDayReadings) says so.
        let count = self.readingCount(on: date)
        let notDrawn = count > readings.count ? " (\(readings.count) drawn)" : ""
        var h = "<div class=\"day\(count == 0 ? " empty" : "")\" data-date=\"\(date)\"><header><b>\(date.shortText)</b>"
        h += "<span class=\"n\">\(count)\(notDrawn)\(lows > 0 ? " · <span class=\"lowflag\">\(lows) low\(lows == 1 ? "" : "s")</span>" : "")</span></header>"
        let frame = ChartFrame(left: 2, top: 4, width: 116, height: 62)
        h += "<svg viewBox=\"0 0 120 70\" role=\"img\" aria-label=\"\(date.shortText)\">"
        h += scale.background(frame, unit: unit, labels: false)
        for r in readings {
            // A low gets a ring, so it stands out without colour.
            if lowIDs.contains(r.id) {
                let x = frame.left + r.local.hourOfDay / 24 * frame.width
                let y = r.result == .lo ? frame.bottom - 2.6 : scale.y(r.result.mgdL ?? 0, frame)
                h += "<circle class=\"lowring\" cx=\"\(fixed(x, digits: 2))\" cy=\"\(fixed(y, digits: 2))\" r=\"5\"/>"
            }
            h += scale.marker(r, frame, target: self.target, size: 2.6, cssClass: "dpt")
        }
        return h + "</svg></div>\n"
    }

    /// The latest lows (at most ``printedLows``), with the time as measured.
    private func lowsHTML(_ unit: Wire.Unit) -> String {
        let shown = Array(self.lows.suffix(Self.printedLows))
        let bounded = shown.count < self.lows.count ? "; the latest \(shown.count) of \(self.lows.count), every one is in the JSON" : ""
        var h = "<section><h2>Lows <small>every reading below \(unit.text(TargetRange.lowListBelow)) \(unit.symbol), LO included "
        h += "(\(self.lows.count))\(bounded)</small></h2>"
        guard !shown.isEmpty else { return h + "<p>No readings below \(unit.text(TargetRange.lowListBelow)) \(unit.symbol).</p></section>\n" }
        // Side by side columns, each a table with its own header, so header and rows share the columns.
        h += "<div class=\"lows\">"
        for start in stride(from: 0, to: shown.count, by: Self.lowsPerColumn) {
            h += "<table><tr><th>Date</th><th>Time</th><th class=\"num\">\(unit.symbol)</th><th>Meal tag</th></tr>"
            for r in shown[start..<min(start + Self.lowsPerColumn, shown.count)] {
                h += "<tr class=\"low\" data-low=\"\(htmlEscaped(r.readingID))\"><td>\(r.local.date.shortText)</td>"
                h += "<td>\(r.local.clockTextWithSeconds)</td>"
                h += "<td class=\"num\"><b>\(unit.text(r.result))</b>\(TargetRange.standard.range(of: r.result) == .veryLow ? " ▼▼" : " ▼")</td>"
                h += "<td>\(r.meal.label)</td></tr>"
            }
            h += "</table>"
        }
        return h + "</div></section>\n"
    }

    /// The logbook: a row per day (the latest that fit page two), a cell per ``LogbookSlot``.
    private func logbookHTML(_ days: [(date: CivilDate, readings: [ReportReading])], unit: Wire.Unit) -> String {
        let withReadings = days.filter { !$0.readings.isEmpty }
        // The latest days, as many as fit the logbook's share of page two (at least one, at most printedDays).
        var shown: [(date: CivilDate, readings: [ReportReading])] = []
        var lines = 0.0
        for day in withReadings.reversed() where shown.count < Self.printedDays {
            let fullest = LogbookSlot.allCases.map { slot in day.readings.count { LogbookSlot(hour: $0.local.hour) == slot } }.max() ?? 1
            lines += Double(max(fullest, 1)) + Self.logbookLinesPerRow
            if lines > Self.logbookLines, !shown.isEmpty { break }
            shown.insert(day, at: 0)
        }
        // Only the latest days keep their readings (ReportFigures.dayReadings): the count of all days is daysWithReadings.
        let entries = shown.reduce(0) { $0 + $1.readings.count }
        let bounded =
            shown.count < self.daysWithReadings
            ? "; the last \(shown.count) of \(self.daysWithReadings) days with readings (\(entries) of \(self.readingCount) readings)" : ""
        var h = "<section><h2>Logbook <small>\(unit.symbol) by local time\(bounded); <b><u>underlined</u></b>: below target, <i>italic</i>: "
        h += "above; tags: fast, pre, post, bed</small></h2><table class=\"logbook\"><colgroup><col class=\"day\">"
        for _ in LogbookSlot.allCases { h += "<col>" }
        h += "</colgroup><tr><th>Day</th>"
        for slot in LogbookSlot.allCases { h += "<th>\(slot.label)</th>" }
        h += "</tr>"
        let tags: [MealTag: String] = [.fasting: "fast", .beforeMeal: "pre", .afterMeal: "post", .bedtime: "bed"]
        for (date, readings) in shown {
            h += "<tr><td class=\"date\">\(date.shortText)</td>"
            for slot in LogbookSlot.allCases {
                h += "<td>"
                for r in readings where LogbookSlot(hour: r.local.hour) == slot {
                    let range = self.target.range(of: r.result)
                    let kind = range == .low || range == .veryLow ? " low" : range == .high || range == .veryHigh ? " high" : ""
                    h += "<span class=\"v\(kind)\"><span class=\"tag\">\(r.local.clockText)</span> \(unit.text(r.result))"
                    if let tag = tags[r.meal] { h += " <span class=\"tag\">\(tag)</span>" }
                    h += "</span>"
                }
                h += "</td>"
            }
            h += "</tr>"
        }
        return h + "</table></section>\n"
    }
}

/// Where a chart's plot area lies in its viewBox.
struct ChartFrame {
    /// X of the plot area's left edge.
    var left: Double
    /// Y of its top edge.
    var top: Double
    /// Its width.
    var width: Double
    /// Its height.
    var height: Double
    /// Y of its bottom edge.
    var bottom: Double { self.top + self.height }
    /// X of its right edge.
    var right: Double { self.left + self.width }
}

/// The glucose axis every chart of a report shares: 40 mg/dL up to the highest reading (at least 300),
/// HI drawn at the top edge and LO at the bottom edge.
struct GlucoseScale {
    /// The axis' lowest value, mg/dL.
    var minimum = 40.0
    /// The axis' highest value: the highest reading rounded up to 50, between 300 and 600 mg/dL.
    var maximum: Double
    /// The target band drawn.
    var target: TargetRange

    /// The scale for a period whose highest numeric reading is `highest`.
    init(highestMgdL highest: Double, target: TargetRange) {
        self.maximum = min(600, max(300, (highest / 50).rounded(.up) * 50))
        self.target = target
    }

    /// The y of a value in `frame`, clamped to the axis.
    func y(_ mgdL: Double, _ frame: ChartFrame) -> Double {
        let clamped = min(self.maximum, max(self.minimum, mgdL))
        return frame.bottom - (clamped - self.minimum) / (self.maximum - self.minimum) * frame.height
    }

    /// Target band, range lines and (with labels) the glucose ticks.
    func background(_ frame: ChartFrame, unit: Wire.Unit, labels: Bool) -> String {
        let top = self.y(self.target.highMgdL, frame)
        var s = "<rect class=\"tband\" x=\"\(fixed(frame.left, digits: 1))\" y=\"\(fixed(top, digits: 2))\" width=\"\(fixed(frame.width, digits: 1))\" "
        s += "height=\"\(fixed(self.y(self.target.lowMgdL, frame) - top, digits: 2))\"/>"
        var ticks = [TargetRange.veryLowBelow, self.target.lowMgdL, self.target.highMgdL, TargetRange.veryHighAbove]
        if labels {
            for extra in stride(from: 350.0, through: self.maximum, by: 100) { ticks.append(extra) }
        }
        for tick in ticks where tick > self.minimum && tick < self.maximum {
            let y = fixed(self.y(tick, frame), digits: 2)
            s += "<line class=\"grid\" x1=\"\(fixed(frame.left, digits: 1))\" x2=\"\(fixed(frame.right, digits: 1))\" y1=\"\(y)\" y2=\"\(y)\"/>"
            if labels {
                s += "<text x=\"\(fixed(frame.left - 4, digits: 1))\" y=\"\(y)\" dy=\"3.5\" font-size=\"10.5\" text-anchor=\"end\">\(unit.text(tick))</text>"
            }
        }
        if labels {
            for hour in stride(from: 3, to: 24, by: 3) {
                let x = fixed(frame.left + Double(hour) * frame.width / 24, digits: 1)
                s += "<line class=\"grid\" x1=\"\(x)\" x2=\"\(x)\" y1=\"\(fixed(frame.top, digits: 1))\" y2=\"\(fixed(frame.bottom, digits: 1))\"/>"
            }
        } else {
            for hour in [6, 12, 18] {
                let x = fixed(frame.left + Double(hour) * frame.width / 24, digits: 1)
                s += "<line class=\"grid\" x1=\"\(x)\" x2=\"\(x)\" y1=\"\(fixed(frame.top, digits: 1))\" y2=\"\(fixed(frame.bottom, digits: 1))\"/>"
            }
        }
        s += "<rect x=\"\(fixed(frame.left, digits: 1))\" y=\"\(fixed(frame.top, digits: 1))\" width=\"\(fixed(frame.width, digits: 1))\" "
        s += "height=\"\(fixed(frame.height, digits: 1))\" fill=\"none\" class=\"axis\"/>"
        return s
    }

    /// One reading: a circle in target, a triangle pointing down below it and up above it; HI and LO
    /// as filled triangles on the edge with their label.
    func marker(_ r: ReportReading, _ frame: ChartFrame, target: TargetRange, size: Double, cssClass: String) -> String {
        let x = frame.left + r.local.hourOfDay / 24 * frame.width
        let range = target.range(of: r.result)
        let (classes, idAttribute) = cssClass == "pt" ? ("pt reading", "data-id") : (cssClass, "data-reading")
        let attributes = "class=\"\(classes) r-\(range.rawValue)\" \(idAttribute)=\"\(r.id)\" data-mgdl=\"\(r.result.mgdL.map { fixed($0, digits: 1) } ?? (r.result == .hi ? "HI" : "LO"))\""
        let xs = fixed(x, digits: 2)
        switch r.result {
        case .hi, .lo:
            let up = r.result == .hi
            let y = up ? frame.top + size : frame.bottom - size
            let d = up
                ? "M\(fixed(x - size * 1.2, digits: 2)) \(fixed(y + size, digits: 2))L\(xs) \(fixed(y - size, digits: 2))L\(fixed(x + size * 1.2, digits: 2)) \(fixed(y + size, digits: 2))Z"
                : "M\(fixed(x - size * 1.2, digits: 2)) \(fixed(y - size, digits: 2))L\(xs) \(fixed(y + size, digits: 2))L\(fixed(x + size * 1.2, digits: 2)) \(fixed(y - size, digits: 2))Z"
            var s = "<path \(attributes) d=\"\(d)\"/>"
            if cssClass == "pt" {
                s += "<text class=\"hilo\" x=\"\(fixed(x + size * 1.6, digits: 2))\" y=\"\(fixed(up ? y + 3 : y + 2, digits: 2))\">\(up ? "HI" : "LO")</text>"
            }
            return s
        case .mgdL(let value):
            let y = self.y(value, frame)
            let ys = fixed(y, digits: 2)
            switch range {
            case .target:
                return "<circle \(attributes) cx=\"\(xs)\" cy=\"\(ys)\" r=\"\(fixed(size * 0.85, digits: 2))\"/>"
            case .low, .veryLow:
                return "<path \(attributes) d=\"M\(fixed(x - size, digits: 2)) \(fixed(y - size * 0.8, digits: 2))H\(fixed(x + size, digits: 2))L\(xs) \(fixed(y + size, digits: 2))Z\"/>"
            case .high, .veryHigh:
                return "<path \(attributes) d=\"M\(fixed(x - size, digits: 2)) \(fixed(y + size * 0.8, digits: 2))H\(fixed(x + size, digits: 2))L\(xs) \(fixed(y - size, digits: 2))Z\"/>"
            }
        }
    }
}

/// Text safe inside HTML elements and attribute values (`&`, `<`, `>`, `"` and `'` escaped): the
/// report's page and the hub's fleet page.
public func htmlEscaped(_ text: String) -> String {
    var out = ""
    out.reserveCapacity(text.utf8.count)
    for c in text.unicodeScalars {
        switch c {
        case "&": out += "&amp;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        case "\"": out += "&quot;"
        case "'": out += "&#39;"
        default: out.unicodeScalars.append(c)
        }
    }
    return out
}
