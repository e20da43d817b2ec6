import GlucoseProfile
import JSON
import SugarWire

/// `sugarctl readings`: stored readings as a table, JSON, CSV, Nightscout entries or a FHIR Bundle.
enum ReadingsCommand {
    static let help = CommandHelp(
        name: "readings",
        abstract: "List stored readings as a table, JSON, CSV, Nightscout entries or a FHIR R4 Bundle.",
        usage:
            "readings [--since <time>] [--until <time>] [--meter <id>] [--person <name>] [--unattributed] [--limit <n>] [--order asc|desc] [--format table|json|csv|nightscout|fhir] [--json] [--local] [--unit mgdl|mmol] | readings attribute --person <name> (<id>... | --meter <id> --since <time> --until <time>) [--json]",
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
            ("--limit <n>", "At most n readings (default 1000, at most 100000)."),
            ("--order <order>", "asc (oldest first, default) or desc."),
            ("--format <format>", "table (default), json, csv, nightscout or fhir."),
            ("--local", "Show the table's times in this machine's zone (TZ) instead of the daemon's."),
            JSONOutput.help("the readings (the same as --format json)"),
            DaemonOptions.unitHelp,
        ] + DaemonOptions.help,
        discussion: """
            json: one array; each element has the keys of `sugarctl decode measurement --json` plus meter, time \
            {iso, epochMillis, ...}, context and flags. csv: RFC 4180 with a header row, both units. nightscout: \
            entries (type "mbg", mg/dL, date in epoch ms, dateString and sysTime with the reading's UTC offset, utcOffset, \
            device). fhir: a FHIR R4 transaction Bundle to POST to a FHIR server's base URL: a Patient per person (their \
            identifiers, and one scoped to this gateway), the gateway and each meter as Devices, Observations coded \
            as the HL7 PHD guide does (category phd, LOINC by sample type, in mg/dL or with --unit mmol, the meter \
            as device, the gateway in the gatewayDevice extension). Formats that cannot carry a reading (control \
            solution, ketone, HI/LO in Nightscout) leave it out and say how many on stderr.
            table: times in the zone sugard resolved each reading in (its `timezone`, e.g. Europe/Berlin), named in the \
            header; --local shows them in this machine's zone instead.
            Exit status: 0 ok, 1 failure, 64 usage, 69 sugard not reachable, 77 permission denied.
            """
    )

    static let subcommand = Subcommand(help: help) { arguments in await run(arguments) }

    static func run(_ arguments: [String]) async -> Int32 {
        await runDaemonCommand(
            arguments, help: help, flags: [JSONOutput.flag, "local", "unattributed"],
            values: ["since", "until", "meter", "limit", "order", "format", "unit", "person"]
        ) { parsed throws(CommandFailure) in
            if parsed.positionals.first == "attribute" { return try await self.attribute(Array(parsed.positionals.dropFirst()), parsed) }
            guard parsed.positionals.isEmpty else { throw usage("Unexpected argument '\(parsed.positionals[0])'", help) }
            let format: String
            do throws(UsageError) {
                format = try JSONOutput.format(parsed, default: "table")
            } catch {
                throw usage(error.message, help)
            }
            guard ["table", "json", "csv", "nightscout", "fhir"].contains(format) else {
                throw usage("--format must be table, json, csv, nightscout or fhir, not '\(format)'", help)
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
            }
            if let order = parsed.values["order"] {
                guard order == "asc" || order == "desc" else { throw usage("--order must be asc or desc, not '\(order)'", help) }
                parameters["order"] = .string(order)
            }
            let daemon = try Daemon.connect(parsed)
            var objects: [JSONObject] = []
            var truncated = false
            var daemonUnit: Wire.Unit?
            try await daemon.stream("ListReadings", parameters, as: Wire.ReadingsReply.self) { reply throws(CommandFailure) in
                objects += reply.readings
                if reply.truncated == true { truncated = true }
                daemonUnit = reply.unit
                return true
            }
            let readings = objects.map(JSONValue.object)
            let unit = try displayUnit(parsed, daemonDefault: daemonUnit, help: help)
            if truncated {
                writeStderr("sugarctl: showing the first \(readings.count) readings; more match (raise --limit).\n")
            }
            switch format {
            case "json":
                writeStdout(JSONValue.array(readings).prettySerialized() + "\n")
            case "csv":
                writeStdout(ReadingExport.csv(try Daemon.readings(objects, method: "ListReadings")))
            case "nightscout":
                let (entries, skipped) = ReadingExport.nightscout(try Daemon.readings(objects, method: "ListReadings"))
                writeStdout(entries.prettySerialized() + "\n")
                if skipped > 0 {
                    writeStderr("sugarctl: skipped \(skipped) of \(readings.count) readings Nightscout entries cannot carry (control solution, ketone, HI/LO or no value).\n")
                }
            case "fhir":
                // The Devices carry each meter's manufacturer, model and serial number.
                let listed = try await daemon.call("ListMeters", as: Wire.MetersReply.self)
                var meters: [String: Wire.MeterIdentity] = [:]
                for entry in listed.meters { meters[entry.id] = entry.identity }
                // Patients carry each person's identifiers and one scoped to this gateway.
                let people = try await daemon.call("ListPeople", as: Wire.PeopleReply.self).people
                let gateway = try await daemon.call("GetPeopleStatus", as: Wire.PeopleStatusReply.self).gateway
                let (bundle, skipped) = ReadingExport.fhir(
                    try Daemon.readings(objects, method: "ListReadings"), meters: meters, unit: unit,
                    people: Dictionary(people.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a }), gateway: gateway)
                writeStdout(bundle.prettySerialized() + "\n")
                if skipped > 0 {
                    writeStderr("sugarctl: skipped \(skipped) of \(readings.count) readings that are not glucose observations (control solution, ketone).\n")
                }
            default:
                let readings = try Daemon.readings(objects, method: "ListReadings")
                writeStdout(self.renderTable(readings, unit: unit, local: parsed.flags.contains("local")))
            }
            return ExitCode.success
        }
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
