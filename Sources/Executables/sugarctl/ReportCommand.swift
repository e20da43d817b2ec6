#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import GlucoseProfile
import GlucoseReport
import JSON
import SugarWire
import SystemIO

/// `sugarctl report`: the glucose report of a period as a self-contained HTML page, a PDF printed
/// by headless Chromium, or the figures as JSON. The readings come from `ListReadings`, the meter
/// names from `ListMeters`; the figures and the page are `GlucoseReport`'s.
enum ReportCommand {
    static let help = CommandHelp(
        name: "report",
        abstract: "Make a glucose report of a period (HTML, PDF or JSON): statistics, time in ranges, the day by time of day, lows, a logbook.",
        usage:
            "report [--since <time>] [--until <time>] [--days <n>] [--meter <id>]... [--person <name>] [--unit mgdl|mmol] [--target <low>-<high>] [--before-meal-target <low>-<high>] [--after-meal-target <high>] [--format html|pdf|json] [--json] [--output <file>]",
        options: [
            ("--since <time>", "Start of the period: ISO 8601 with a zone, a date (UTC midnight) or an age (24h, 7d)."),
            ("--until <time>", "End of the period, exclusive (same forms; default: now)."),
            ("--days <n>", "Length of the period in days (default 14), counted back from --until or on from --since."),
            ("--meter <id>", "Only this meter (its Bluetooth address); repeat for several (default: every meter)."),
            ("--person <name>", "The person the report is for: only their readings (those measured while a meter was theirs, and those "
                + "given to them); their thresholds and unit are the defaults of --target and --unit. Needed when the "
                + "period's readings belong to several people."),
            DaemonOptions.unitHelp,
            ("--target <low>-<high>", "Target range (default 70-180 mg/dL); in mmol/L when both are at most 35 (3.9-10)."),
            ("--before-meal-target <low>-<high>", "Target for readings tagged fasting or before a meal (default 70-130 mg/dL; 3.9-7.2 in mmol/L)."),
            ("--after-meal-target <high>", "Readings tagged after a meal meet their target below this (default 180 mg/dL; 10 in mmol/L)."),
            ("--format <format>", "html (default), pdf (printed by headless Chromium) or json (the figures)."),
            JSONOutput.help("the figures (the same as --format json)"),
            ("--output <file>", "Where to write it; - for standard output. Default: sugard-report-<from>-<to>.html (or .pdf) in this folder; json goes to standard output."),
        ] + DaemonOptions.help,
        discussion: """
            Every reading of the period except control-solution tests, beside the same figures for the period of \
            the same length just before: readings, days with readings, readings per day, mean, standard \
            deviation (n - 1) and coefficient of variation; time in ranges (very low < 54 mg/dL, low 54-69, target \
            70-180, high 181-250, very high > 250; HI counts as very high and LO as very low, and neither enters mean \
            or SD); the share of readings before meals (fasting and before-meal tags) in the before-meal target and \
            after meals below the after-meal target (HI and LO meet none); count and mean by meal tag; the readings by local time of day (the latest \(ReportFigures.drawnReadings) drawn) with hourly 10/25/50/75/90 \
            percentile bands (hours with at least 5 readings); one chart per day; every reading below 70 mg/dL \
            with its time to the second; a logbook by day and time slot. The HTML page fetches nothing and runs no script; \
            it prints on two A4 pages for any period up to 90 days: the daily charts and the logbook show the last 14 \
            days, the lows list the latest 30 (and says so); the JSON holds every one. The figures are computed in one \
            pass as the readings arrive, so a report of years of readings stays small in memory.
            json keys: period {from, to, days}, unit, readings, readingsPerDay, daysWithReadings, meanMgdL, sdMgdL, \
            cvPercent, ranges {veryLow, low, target, high, veryHigh} (percent, one decimal), target {lowMgdL, highMgdL}, \
            mealTargets {beforeMeal {lowMgdL, highMgdL, readings, inTarget, percent}, afterMeal {belowMgdL, readings, \
            inTarget, percent}}, byMeal {fasting, beforeMeal, afterMeal, bedtime, none: {count, meanMgdL}}, hourly \
            (24 x {hour, count, p10, p25, p50, p75, p90}), lows [{id (the reading id meter/epoch/sequence), time (with \
            seconds), mgdL, meal}], previous (the summary figures of the period before, with lowCount).
            Exit status: 0 ok, 1 no readings in the period (or another failure), 64 usage (bad dates), 69 sugard not \
            reachable, 77 permission denied.
            """
    )

    static let subcommand = Subcommand(help: help) { arguments in await run(arguments) }

    static let day: Int64 = 86_400_000

    static func run(_ arguments: [String]) async -> Int32 {
        await runDaemonCommand(
            arguments, help: help, flags: [JSONOutput.flag],
            values: [
                "since", "until", "days", "meter", "person", "unit", "target", "before-meal-target", "after-meal-target", "format",
                "output",
            ]
        ) { parsed throws(CommandFailure) in
            guard parsed.positionals.isEmpty else { throw usage("Unexpected argument '\(parsed.positionals[0])'", help) }
            let format: String
            do throws(UsageError) {
                format = try JSONOutput.format(parsed, default: "html")
            } catch {
                throw usage(error.message, help)
            }
            guard ["html", "pdf", "json"].contains(format) else {
                throw usage("--format must be html, pdf or json, not '\(format)'", help)
            }
            var target = TargetRange.standard
            // The person's record: their thresholds and unit when --target and --unit are not given.
            var person: String?
            var personUnit: Wire.Unit?
            if let text = parsed.values["person"] {
                guard let name = Person.validated(text) else { throw usage(Person.rule, help) }
                person = name
                if let record = try? await Daemon.connect(parsed).call(
                    "GetPerson", ["name": .string(name)], as: Wire.PersonHistoryReply.self
                ).person {
                    personUnit = record.unit
                    if let low = record.low?.mgdL, let high = record.high?.mgdL { target = TargetRange(lowMgdL: low, highMgdL: high) }
                }
            }
            if let text = parsed.values["target"] {
                guard let parsedTarget = TargetRange(parsing: text) else {
                    throw usage("--target must be LOW-HIGH with LOW below HIGH (70-180, or 3.9-10 in mmol/L), not '\(text)'", help)
                }
                target = parsedTarget
            }
            var mealTargets = MealTargets.standard
            if let text = parsed.values["before-meal-target"] {
                guard let parsedTarget = TargetRange(parsing: text) else {
                    throw usage("--before-meal-target must be LOW-HIGH with LOW below HIGH (70-130, or 3.9-7.2 in mmol/L), not '\(text)'", help)
                }
                mealTargets.beforeMeal = parsedTarget
            }
            if let text = parsed.values["after-meal-target"] {
                guard let bound = MealTargets.bound(parsing: text) else {
                    throw usage("--after-meal-target must be a number above 0 (180, or 10 in mmol/L), not '\(text)'", help)
                }
                mealTargets.afterMealBelowMgdL = bound
            }
            _ = try displayUnit(parsed, daemonDefault: nil, help: help)  // a bad --unit is a usage error before connecting
            let period = try self.period(parsed)

            let daemon = try Daemon.connect(parsed)
            let meters = parsed.lists["meter"] ?? []
            // The meter names first: a stream keeps the connection busy while it runs.
            let meterList = try await daemon.call("ListMeters", as: Wire.MetersReply.self)
            let fetched = try await self.readings(
                daemon, period: period, meters: meters, person: person, target: target, mealTargets: mealTargets)
            let unit = try displayUnit(parsed, daemonDefault: personUnit ?? fetched.unit, help: help)
            // Without --person: one person's readings say so; several people's need --person.
            var whose = person
            if person == nil {
                let named = fetched.people.sorted()
                let unnamed = fetched.unnamed
                if named.count > 1 {
                    throw usage(
                        "the readings of this period belong to \(named.joined(separator: ", "))"
                            + (unnamed > 0 ? " and \(unnamed) to no one" : "") + ": choose whose with --person",
                        help)
                }
                if let only = named.first {
                    whose = unnamed == 0 ? only : "\(only) (and \(unnamed) reading\(unnamed == 1 ? "" : "s") of no one)"
                }
            }
            let periodText = "\(CivilCalendar.isoUTC(epochMillis: period.fromMillis)) to \(CivilCalendar.isoUTC(epochMillis: period.toMillis))"
            guard fetched.count > 0 else {
                throw CommandFailure(
                    ExitCode.failure,
                    "Error: no readings from \(periodText)\(meters.isEmpty ? "" : " for \(meters.joined(separator: ", "))")"
                        + "\(person.map { " for \($0)" } ?? "") (control-solution tests do not count). Try a longer period, e.g. --days 90.")
            }
            let figures = fetched.figures.figures()
            // The period of the same length before, with the same meters, person and targets, to compare.
            let before = try await self.readings(
                daemon, period: period.previous, meters: meters, person: person, target: target, mealTargets: mealTargets)
            let context = ReportContext(
                unit: unit, person: whose,
                meters: self.meters(meterList, used: fetched.meters),
                madeAtMillis: wallClockMilliseconds(), madeAtUTCOffsetMinutes: self.localOffsetMinutes(),
                controlSolutionCount: fetched.controlSolution, notGlucoseCount: fetched.notGlucose,
                previous: before.figures.figures())

            let output = parsed.values["output"]
            let name = "sugard-report-\(CivilCalendar.isoUTC(epochMillis: period.fromMillis).prefix(10))-\(CivilCalendar.isoUTC(epochMillis: period.toMillis).prefix(10))"
            switch format {
            case "json":
                let text = figures.json(context).prettySerialized() + "\n"
                if let output, output != "-" {
                    try self.write(text, to: output)
                    writeStdout(output + "\n")
                } else {
                    writeStdout(text)
                }
            case "pdf":
                let path = output ?? name + ".pdf"
                try await PDFPrinter.print(html: figures.html(context), to: path)
                if path != "-" { writeStdout(path + "\n") }
            default:
                let text = figures.html(context)
                let path = output ?? name + ".html"
                if path == "-" {
                    writeStdout(text)
                } else {
                    try self.write(text, to: path)
                    writeStdout(path + "\n")
                }
            }
            return ExitCode.success
        }
    }

    /// The readings of a period as the report counts them, summed up as they arrive: the figures,
    /// the meters and people they come from, and what was left out.
    struct PeriodReadings {
        var figures: ReportFigures.Accumulator
        var count = 0
        var controlSolution = 0
        var notGlucose = 0
        var meters: Set<String> = []
        var people: Set<String> = []
        var unnamed = 0
        var unit: Wire.Unit?
    }

    /// Replies held while the figures take one (the rest wait in sugard).
    static let window = 2

    /// The period's readings, streamed once through the figures: control-solution tests and records
    /// without a glucose value counted and left out; with `person`, only the readings measured while a
    /// meter was theirs (the daemon filters). Meters are listed one after another, each in time order;
    /// several meters' readings are merged by time first (the figures take them in time order).
    static func readings(
        _ daemon: Daemon, period: ReportPeriod, meters: [String], person: String?, target: TargetRange, mealTargets: MealTargets
    ) async throws(CommandFailure) -> PeriodReadings {
        var result = PeriodReadings(figures: ReportFigures.Accumulator(period: period, target: target, mealTargets: mealTargets))
        var parameters: JSONObject = [
            "since": .string(CivilCalendar.isoUTC(epochMillis: period.fromMillis)),
            "until": .string(CivilCalendar.isoUTC(epochMillis: period.toMillis)), "all": true, "compact": true,
        ]
        if let person { parameters["person"] = .string(person) }
        // Several --meter: one stream each, merged by time (usually a few meters of one person).
        var perMeter: [[ReportReading]] = []
        for meter in meters.isEmpty ? [nil] : meters.map(Optional.some) {
            if let meter { parameters["meter"] = .string(meter) }
            var kept: [ReportReading] = []
            try await daemon.stream("ListReadings", parameters, window: Self.window, decoding: { try Wire.CompactPage(reading: &$0) }) {
                reply throws(CommandFailure) in
                result.unit = reply.unit
                for compact in reply.readings {
                    switch ReportReading.from(compact) {
                    case .success(let reading):
                        result.count += 1
                        result.meters.insert(reading.meter)
                        if let name = reading.person { result.people.insert(name) } else { result.unnamed += 1 }
                        if meters.count > 1 { kept.append(reading) } else { result.figures.add(reading) }
                    case .failure(let why):
                        if why.exclusion == .controlSolution { result.controlSolution += 1 } else { result.notGlucose += 1 }
                    }
                }
                return true
            }
            if meters.count > 1 { perMeter.append(kept) }
        }
        if meters.count > 1 {
            for reading in perMeter.joined().sorted(by: { ($0.epochMillis, $0.id) < ($1.epochMillis, $1.id) }) { result.figures.add(reading) }
        }
        return result
    }

    /// The period from --since, --until and --days: 14 days up to now unless told otherwise.
    static func period(_ parsed: ParsedArguments) throws(CommandFailure) -> ReportPeriod {
        func instant(_ option: String) throws(CommandFailure) -> Int64? {
            guard let text = parsed.values[option] else { return nil }
            let iso = try timeArgument(text, option: option, help: help)
            guard let millis = CivilCalendar.parseISOInstant(iso) else { throw usage("--\(option): cannot read '\(text)'", help) }
            return millis
        }
        var days: Int64?
        if let text = parsed.values["days"] {
            guard let n = Int64(text), n > 0, n <= 3660 else {
                throw usage("--days must be a whole number of days from 1 to 3660, not '\(text)'", help)
            }
            days = n
        }
        let since = try instant("since")
        let until = try instant("until")
        let from: Int64
        let to: Int64
        switch (since, until, days) {
        case (let s?, let u?, nil): (from, to) = (s, u)
        case (let s?, nil, let n?): (from, to) = (s, s + n * Self.day)
        case (let s?, nil, nil): (from, to) = (s, wallClockMilliseconds())
        case (nil, let u?, let n): (from, to) = (u - (n ?? 14) * Self.day, u)
        case (nil, nil, let n): (from, to) = (wallClockMilliseconds() - (n ?? 14) * Self.day, wallClockMilliseconds())
        case (_?, _?, _?): throw usage("give at most two of --since, --until and --days", help)
        }
        guard from < to else {
            throw usage("the period is empty: --since (\(CivilCalendar.isoUTC(epochMillis: from))) must be before --until (\(CivilCalendar.isoUTC(epochMillis: to)))", help)
        }
        return ReportPeriod(fromMillis: from, toMillis: to)
    }

    /// Name and serial number of the meters the readings come from (`ListMeters`).
    static func meters(_ reply: Wire.MetersReply, used: Set<String>) -> [ReportContext.Meter] {
        var result: [ReportContext.Meter] = []
        var seen: Set<String> = []
        for entry in reply.meters where used.contains(entry.id) {
            result.append(
                ReportContext.Meter(id: entry.id, name: entry.identity.displayName, serialNumber: entry.identity.serialNumber))
            seen.insert(entry.id)
        }
        for id in used.subtracting(seen).sorted() { result.append(ReportContext.Meter(id: id, name: id, serialNumber: nil)) }
        return result
    }

    /// This machine's UTC offset now, in minutes.
    static func localOffsetMinutes() -> Int {
        var seconds = time_t(wallClockMilliseconds() / 1000)
        var parts = tm()
        guard localtime_r(&seconds, &parts) != nil else { return 0 }
        return Int(parts.tm_gmtoff / 60)
    }

    static func write(_ text: String, to path: String) throws(CommandFailure) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw CommandFailure(ExitCode.failure, "Error: cannot write \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        let ok = writeAll(text, to: descriptor)
        guard ok else { throw CommandFailure(ExitCode.failure, "Error: cannot write \(path): \(String(cString: strerror(errno)))") }
    }
}
