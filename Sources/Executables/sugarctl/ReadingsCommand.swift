#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import GlucoseProfile
import JSON
import SugarWire

/// `sugarctl readings`: stored readings as a table, JSON, NDJSON, CSV, Nightscout entries or FHIR Bundles.
enum ReadingsCommand {
    static let help = CommandHelp(
        name: "readings",
        abstract: "List stored readings as a table, JSON, NDJSON, CSV, Nightscout entries or FHIR R4 Bundles.",
        usage:
            "readings [--since <time>] [--until <time>] [--meter <id>] [--person <name>] [--unattributed] [--limit <n>] [--order asc|desc] [--format table|json|ndjson|csv|nightscout|fhir] [--page-size <n>] [--json] [--local] [--unit mgdl|mmol] | readings attribute --person <name> (<id>... | --meter <id> --since <time> --until <time>) [--json]",
        arguments: [
            ("attribute", "Give readings of a shared meter to a person: the reading ids `readings --unattributed` shows, "
                + "or the meter's readings measured from --since until --until. Needs root or the admin group."),
        ],
        options: [
            ("--since <time>", "Readings at or after this time: ISO 8601 with a zone, a date (UTC midnight), or an age (24h, 7d)."),
            ("--until <time>", "Readings before this time (same forms)."),
            ("--meter <id>", "Only this meter (its Bluetooth address)."),
            ("--person <name>", "Only this person's readings: those measured while one of their meters was theirs, and those given to them."),
            ("--unattributed", "Only readings of shared meters that wait for `readings attribute`."),
            ("--json", "attribute: print the daemon's reply as JSON."),
            ("--limit <n>", "At most n readings. Exports (json, ndjson, csv, nightscout, fhir) write every reading in the range "
                + "without it; the table shows the first \(Self.tablePage) and says so in its last line."),
            ("--order <order>", "asc (oldest first, default) or desc."),
            ("--format <format>", "table (default), json, ndjson, csv, nightscout or fhir."),
            ("--page-size <n>", "fhir: readings per Bundle (default \(Self.defaultFHIRPage)); each Bundle is a transaction of its own."),
            ("--local", "Show the table's times in this machine's zone (TZ) instead of the daemon's."),
            JSONOutput.help("the readings (the same as --format json)"),
            DaemonOptions.unitHelp,
        ] + DaemonOptions.help,
        discussion: """
            Exports stream: sugard reads the readings page by page as sugarctl writes them, so memory stays \
            flat at any number of readings. \
            json: one array; each element has the keys of `sugarctl decode measurement --json` plus meter, time \
            {iso, epochMillis, ...}, context and flags. ndjson: the same objects, one per line. csv: RFC 4180 \
            with a header row, both units (mmol/L exact, as stored). nightscout: \
            entries (type "mbg", mg/dL, date in epoch ms, dateString and sysTime with the reading's UTC offset, utcOffset, \
            device). fhir: FHIR R4 transaction Bundles to POST to a FHIR server's base URL, one per --page-size \
            readings, one after another: a Patient per person (their \
            identifiers, and one scoped to this gateway), the gateway and each meter as Devices, Observations coded \
            as the HL7 PHD guide does (category phd, LOINC by sample type, in mg/dL or with --unit mmol, the meter \
            as device, the gateway in the gatewayDevice extension). Formats that cannot carry a reading (control \
            solution, ketone, HI/LO in Nightscout) leave it out and say how many on stderr.
            table: times in the zone sugard resolved each reading in (its `timezone`, e.g. Europe/Berlin), named in the \
            header; --local shows them in this machine's zone instead.
            Exit status: 0 ok, 1 failure, 64 usage, 69 sugard not reachable, 77 permission denied.
            """
    )

    /// Readings the table shows without --limit.
    static let tablePage = 1000
    /// Readings per FHIR Bundle without --page-size: what one call exported before exports streamed,
    /// so such an export is still one Bundle.
    static let defaultFHIRPage = 1000
    /// Replies (pages) sugarctl holds while it writes: the rest wait in sugard.
    static let window = 2
    static let formats = ["table", "json", "ndjson", "csv", "nightscout", "fhir"]

    static let subcommand = Subcommand(help: help) { arguments in await run(arguments) }

    static func run(_ arguments: [String]) async -> Int32 {
        await runDaemonCommand(
            arguments, help: help, flags: [JSONOutput.flag, "local", "unattributed"],
            values: ["since", "until", "meter", "limit", "order", "format", "unit", "person", "page-size"]
        ) { parsed throws(CommandFailure) in
            if parsed.positionals.first == "attribute" { return try await self.attribute(Array(parsed.positionals.dropFirst()), parsed) }
            guard parsed.positionals.isEmpty else { throw usage("Unexpected argument '\(parsed.positionals[0])'", help) }
            let format: String
            do throws(UsageError) {
                format = try JSONOutput.format(parsed, default: "table")
            } catch {
                throw usage(error.message, help)
            }
            guard Self.formats.contains(format) else {
                throw usage("--format must be table, json, ndjson, csv, nightscout or fhir, not '\(format)'", help)
            }
            var pageSize = Self.defaultFHIRPage
            if let text = parsed.values["page-size"] {
                guard format == "fhir" else { throw usage("--page-size goes with --format fhir", help) }
                guard let n = Int(text), n > 0 else { throw usage("--page-size must be a positive number, not '\(text)'", help) }
                pageSize = n
            }
            var parameters: JSONObject = [:]
            if let since = parsed.values["since"] { parameters["since"] = .string(try timeArgument(since, option: "since", help: help)) }
            if let until = parsed.values["until"] { parameters["until"] = .string(try timeArgument(until, option: "until", help: help)) }
            if let meter = parsed.values["meter"] { parameters["meter"] = .string(meter) }
            if let text = parsed.values["person"] {
                guard let person = Person.validated(text) else { throw usage(Person.rule, help) }
                parameters["person"] = .string(person)
            }
            if parsed.flags.contains("unattributed") { parameters["unattributed"] = true }
            if let text = parsed.values["limit"] {
                guard let limit = Int64(text), limit > 0 else { throw usage("--limit must be a positive number, not '\(text)'", help) }
                parameters["limit"] = .int(limit)
            } else if format == "table" {
                parameters["limit"] = .int(Int64(Self.tablePage))
            } else {
                parameters["all"] = true
            }
            if let order = parsed.values["order"] {
                guard order == "asc" || order == "desc" else { throw usage("--order must be asc or desc, not '\(order)'", help) }
                parameters["order"] = .string(order)
            }
            // Nightscout entries need only the compact form, which sugard writes without decoding the packets
            // again; CSV rows sugard writes itself (the same bytes, through the same writer).
            if format == "nightscout" { parameters["compact"] = true }
            if format == "csv" { parameters["csv"] = true }
            let daemon = try Daemon.connect(parsed)
            if format == "table" { return try await self.listTable(daemon, parameters, parsed) }
            var writer = ReadingsWriter(format: format, fhirPageSize: pageSize)
            if format == "fhir" {
                // The Devices carry each meter's manufacturer, model and serial number; Patients each
                // person's identifiers and one scoped to this gateway. Asked first: the stream then
                // keeps the connection busy.
                let listed = try await daemon.call("ListMeters", as: Wire.MetersReply.self)
                for entry in listed.meters { writer.meters[entry.id] = entry.identity }
                let people = try await daemon.call("ListPeople", as: Wire.PeopleReply.self).people
                writer.people = Dictionary(people.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
                writer.gateway = try await daemon.call("GetPeopleStatus", as: Wire.PeopleStatusReply.self).gateway
            }
            var truncated = false
            try Self.emit(writer.begin())
            /// What every reply says besides its readings.
            func took(truncated replyTruncated: Bool?, unit: Wire.Unit) throws(CommandFailure) {
                if replyTruncated == true { truncated = true }
                if writer.unit == nil { writer.unit = try displayUnit(parsed, daemonDefault: unit, help: help) }
            }
            switch format {
            case "csv":
                try await daemon.stream("ListReadings", parameters, window: Self.window, decoding: { try Wire.CSVPage(reading: &$0) }) {
                    page throws(CommandFailure) in
                    try took(truncated: page.truncated, unit: page.unit)
                    try Self.emit(writer.page(csv: page))
                    return true
                }
            case "nightscout":
                try await daemon.stream("ListReadings", parameters, window: Self.window, decoding: { try Wire.CompactPage(reading: &$0) }) {
                    page throws(CommandFailure) in
                    try took(truncated: page.truncated, unit: page.unit)
                    try Self.emit(writer.page(compact: page.readings))
                    return true
                }
            case "json", "ndjson":
                try await daemon.stream("ListReadings", parameters, window: Self.window, decoding: { try Wire.ReadingTextPage(reading: &$0) }) {
                    page throws(CommandFailure) in
                    try took(truncated: page.truncated, unit: page.unit)
                    try Self.emit(writer.page(texts: page))
                    return true
                }
            default:  // fhir
                try await daemon.stream("ListReadings", parameters, as: Wire.ReadingsReply.self, window: Self.window) {
                    reply throws(CommandFailure) in
                    try took(truncated: reply.truncated, unit: reply.unit)
                    try Self.emit(writer.page(fhir: reply.readings))
                    return true
                }
            }
            if writer.unit == nil { writer.unit = try displayUnit(parsed, daemonDefault: nil, help: help) }
            try Self.emit(writer.end())
            if truncated {
                writeStderr("sugarctl: wrote the first \(writer.count) readings; more match (raise --limit, or leave it out for all).\n")
            }
            if writer.skipped > 0 {
                let what =
                    format == "fhir"
                    ? "that are not glucose observations (control solution, ketone)"
                    : "Nightscout entries cannot carry (control solution, ketone, HI/LO or no value)"
                writeStderr("sugarctl: skipped \(writer.skipped) of \(writer.count) readings \(what).\n")
            }
            return ExitCode.success
        }
    }

    /// Writes a piece of the export to standard output; a failed write (a closed pipe, a full
    /// disk) ends the export.
    static func emit(_ text: String) throws(CommandFailure) {
        guard text.isEmpty || writeAll(text, to: 1) else {
            throw CommandFailure(ExitCode.failure, "Error: cannot write standard output: \(String(cString: strerror(errno)))")
        }
    }

    /// The table: one page (the first ``tablePage`` readings unless --limit says otherwise), its
    /// widths and zones known only once all of it is read; the last line says when more match.
    static func listTable(_ daemon: Daemon, _ parameters: JSONObject, _ parsed: ParsedArguments) async throws(CommandFailure) -> Int32 {
        var objects: [JSONObject] = []
        var truncated = false
        var daemonUnit: Wire.Unit?
        try await daemon.stream("ListReadings", parameters, as: Wire.ReadingsReply.self, window: Self.window) { reply throws(CommandFailure) in
            objects += reply.readings
            if reply.truncated == true { truncated = true }
            daemonUnit = reply.unit
            return true
        }
        let unit = try displayUnit(parsed, daemonDefault: daemonUnit, help: help)
        let readings = try Daemon.readings(objects, method: "ListReadings")
        var text = self.renderTable(readings, unit: unit, local: parsed.flags.contains("local"))
        if truncated {
            text += "Showing the first \(readings.count) readings; more match (raise --limit, or export them all with --format csv).\n"
        }
        try Self.emit(text)
        return ExitCode.success
    }

    /// The table. Times are the reading's wall clock in the zone the daemon resolved it in (`time.local`),
    /// the zone named in the header ("Time (Europe/Berlin)"; with readings of several zones each time
    /// carries its offset); `local` shows this machine's time instead.
    static func renderTable(_ readings: [Wire.Reading], unit: Wire.Unit, local: Bool = false) -> String {
        if readings.isEmpty { return "No readings match.\n" }
        let zones = Set(readings.map(\.time.zone))
        let timeHeader = local ? "Time (this machine, \(localZoneName()))" : zones.count == 1 ? "Time (\(zones.first ?? ""))" : "Time (each reading's zone)"
        func timeText(_ r: Wire.Reading) -> String {
            if local { return localTimeText(epochMillis: r.time.epochMillis) }
            // `2024-03-31T07:00:00+01:00`: date and minute, and the offset when zones differ.
            let stamp = r.time.local
            guard stamp.utf8.count >= 16 else { return stamp }
            let text = stamp.prefix(10) + " " + stamp.dropFirst(11).prefix(5)
            return zones.count == 1 ? String(text) : text + " " + CivilCalendar.isoOffset(seconds: Int(r.time.utcOffsetMinutes) * 60)
        }
        let rows: [[String]] = readings.map { r in
            let value =
                unit.format(mgdL: r.mgdL, mmolL: r.mmolL)
                ?? (r.flags.contains("hi") ? "HI" : r.flags.contains("lo") ? "LO" : r.ketoneMmolL.map {
                    "ketone " + ReadingExport.formatted($0, digits: 1)
                } ?? "-")
            return [
                timeText(r),
                value,
                r.meter,
                String(r.sequenceNumber),
                r.mealName ?? "",
                r.flags.joined(separator: " "),
                r.person ?? (r.awaitingAttribution ? "(waiting: id \(r.id))" : ""),
            ]
        }
        return table([timeHeader, unit.symbol, "Meter", "Seq", "Meal", "Flags", "Person"], rows)
    }

    /// `readings attribute --person P ID...` or `--meter M --since T --until T`.
    static func attribute(_ ids: [String], _ parsed: ParsedArguments) async throws(CommandFailure) -> Int32 {
        guard let text = parsed.values["person"] else { throw usage("attribute needs --person <name>", help) }
        guard let person = Person.validated(text) else { throw usage(Person.rule, help) }
        for option in ["limit", "order", "format", "unit"] where parsed.values[option] != nil {
            throw usage("--\(option) does not apply to readings attribute", help)
        }
        if parsed.flags.contains("unattributed") { throw usage("--unattributed does not apply to readings attribute", help) }
        if parsed.flags.contains("local") { throw usage("--local does not apply to readings attribute", help) }
        var parameters: JSONObject = ["person": .string(person)]
        if let meter = parsed.values["meter"] {
            guard ids.isEmpty else { throw usage("Give reading ids or --meter with --since and --until, not both", help) }
            guard let since = parsed.values["since"], let until = parsed.values["until"] else {
                throw usage("attribute --meter needs --since and --until", help)
            }
            parameters["meter"] = .string(meter)
            parameters["since"] = .string(try timeArgument(since, option: "since", help: help))
            parameters["until"] = .string(try timeArgument(until, option: "until", help: help))
        } else {
            guard !ids.isEmpty else {
                throw usage("attribute needs reading ids (see `sugarctl readings --unattributed`) or --meter with --since and --until", help)
            }
            guard parsed.values["since"] == nil, parsed.values["until"] == nil else {
                throw usage("--since and --until go with --meter", help)
            }
            var list: [JSONValue] = []
            for id in ids {
                guard let n = Int64(id), n > 0 else { throw usage("'\(id)' is not a reading id", help) }
                list.append(.int(n))
            }
            parameters["ids"] = .array(list)
        }
        let reply = try await Daemon.connect(parsed).call("AttributeReadings", parameters)
        if JSONOutput.wanted(parsed) {
            writeStdout(JSONValue.object(reply).prettySerialized() + "\n")
            return ExitCode.success
        }
        let result = try Daemon.decode(Wire.AttributionReply.self, reply, method: "AttributeReadings")
        var line = "Gave \(result.moved) reading(s) to \(person)"
        if result.unchanged > 0 { line += "; \(result.unchanged) were \(person)'s already" }
        writeStdout(line + ".\n")
        return ExitCode.success
    }
}
