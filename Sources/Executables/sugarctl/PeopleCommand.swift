import GlucoseProfile
import JSON
import SugarWire

/// `sugarctl people list|add|show|edit|remove`: the people whose readings sugard keeps.
enum PeopleCommand {
    static let help = CommandHelp(
        name: "people",
        abstract: "List, add, show, edit and remove the people readings belong to.",
        usage: """
            people [list] [--json] | people add <name> [--identifier SYSTEM|VALUE]... [--low <value>] [--high <value>] \
            [--unit mgdl|mmol] [--json] | people show <name> [--json] | people edit <name> [--name <new>] \
            [--identifier SYSTEM|VALUE]... [--remove-identifier SYSTEM|VALUE]... [--low <value>|none] [--high <value>|none] \
            [--unit mgdl|mmol|none] [--json] | people remove <name> [--force] [--json]
            """,
        arguments: [
            ("list", "Every person: name, identifiers, thresholds, unit, meters now and readings (the default)."),
            ("add <name>", "Add a person; the name is how commands, reports and sinks name them."),
            ("show <name>", "One person and every period a meter was assigned to them."),
            ("edit <name>", "Rename a person, add or remove identifiers, change thresholds or unit."),
            ("remove <name>", "Remove a person. With readings it needs --force: the readings stay, without a person."),
        ],
        options: [
            ("--identifier <SYSTEM|VALUE>", "An identifier in another system, e.g. a clinic's record number: "
                + "'urn:oid:1.2.3.4|12345' (repeat for several). FHIR exports carry it on the Patient."),
            ("--remove-identifier <SYSTEM|VALUE>", "edit: remove this identifier (repeatable)."),
            ("--name <new>", "edit: the new name (readings and meters follow; update nightscout_person in forward.conf)."),
            ("--low <value>", "The low threshold for reports and alerts, in --unit (else mg/dL); edit: none clears it."),
            ("--high <value>", "The high threshold (same unit); edit: none clears it."),
            ("--unit <unit>", "The unit the person prefers: mgdl or mmol (edit: none clears it)."),
            ("--force", "remove: remove a person who has readings."),
            JSONOutput.help("the daemon's reply"),
        ] + DaemonOptions.help,
        discussion: """
            A name has 1 to 64 characters without control characters (quote names with spaces) and is unique. An \
            identifier's SYSTEM is a URI naming the issuer (urn:oid:..., https://...), its VALUE the identifier; a \
            person without one gets an identifier scoped to this gateway in FHIR exports, never one made from the \
            name. add, edit and remove need root or the admin group.
            Exit status: 0 ok, 1 failure (e.g. unknown person), 64 usage (including a refused value), 69 sugard not \
            reachable, 77 permission denied.
            """
    )

    static let subcommand = Subcommand(help: help) { arguments in await run(arguments) }

    static func run(_ arguments: [String]) async -> Int32 {
        await runDaemonCommand(
            arguments, help: help, flags: [JSONOutput.flag, "force"],
            values: ["identifier", "remove-identifier", "name", "low", "high", "unit"]
        ) { parsed throws(CommandFailure) in
            let action = parsed.positionals.first ?? "list"
            let rest = Array(parsed.positionals.dropFirst())
            let json = JSONOutput.wanted(parsed)
            func name() throws(CommandFailure) -> String {
                guard let text = rest.first else { throw usage("Missing expected argument '<name>'", help) }
                guard rest.count == 1 else { throw usage("Unexpected argument '\(rest[1])'", help) }
                guard let name = Person.validated(text) else { throw usage(Person.rule, help) }
                return name
            }
            func allow(_ options: Set<String>) throws(CommandFailure) {
                for option in ["identifier", "remove-identifier", "name", "low", "high", "unit"]
                where parsed.lists[option] != nil && !options.contains(option) {
                    throw usage("--\(option) does not apply to people \(action)", help)
                }
                if parsed.flags.contains("force") && !options.contains("force") {
                    throw usage("--force applies to people remove only", help)
                }
            }
            let daemon = try Daemon.connect(parsed)
            switch action {
            case "list":
                try allow([])
                guard rest.isEmpty else { throw usage("Unexpected argument '\(rest[0])'", help) }
                let reply = try await daemon.call("ListPeople")
                if json { return self.print(reply) }
                let people = try Daemon.decode(Wire.PeopleReply.self, reply, method: "ListPeople").people
                if people.isEmpty {
                    writeStdout("No people yet. Add one: sugarctl people add <name>, then sugarctl meters assign <meter> <name>.\n")
                    return ExitCode.success
                }
                let rows = people.map { p in
                    [
                        p.name, p.identifiers.map(\.text).joined(separator: " "), self.thresholds(p), p.unit?.symbol ?? "",
                        p.meters.joined(separator: " "), String(p.readingCount),
                    ]
                }
                writeStdout(table(["Person", "Identifiers", "Low-high", "Unit", "Meters now", "Readings"], rows))
            case "add":
                try allow(["identifier", "low", "high", "unit"])
                let name = try name()
                var parameters: JSONObject = ["name": .string(name)]
                let unit = try self.unit(parsed.values["unit"], allowNone: false)
                let identifiers = try self.identifiers(parsed.lists["identifier"] ?? [])
                if !identifiers.isEmpty { parameters["identifiers"] = .wire(identifiers) }
                if let unit { parameters["unit"] = unit.json }
                let thresholdUnit = unit ?? .mgdl
                if let low = try self.threshold(parsed.values["low"], "low", thresholdUnit) { parameters["lowMgdL"] = low }
                if let high = try self.threshold(parsed.values["high"], "high", thresholdUnit) { parameters["highMgdL"] = high }
                let reply = try await daemon.call("AddPerson", parameters)
                if json { return self.print(reply) }
                writeStdout("Added \(name). Assign a meter: sugarctl meters assign <meter> '\(name)' [--from <time>].\n")
            case "show":
                try allow([])
                let reply = try await daemon.call("GetPerson", ["name": .string(try name())])
                if json { return self.print(reply) }
                let decoded = try Daemon.decode(Wire.PersonHistoryReply.self, reply, method: "GetPerson")
                writeStdout(self.render(decoded.person, decoded.assignments))
            case "edit":
                try allow(["identifier", "remove-identifier", "name", "low", "high", "unit"])
                let name = try name()
                var parameters: JSONObject = ["name": .string(name)]
                if let newName = parsed.values["name"] {
                    guard let valid = Person.validated(newName) else { throw usage(Person.rule, help) }
                    parameters["newName"] = .string(valid)
                }
                let add = try self.identifiers(parsed.lists["identifier"] ?? [])
                let remove = try self.identifiers(parsed.lists["remove-identifier"] ?? [])
                if !add.isEmpty { parameters["addIdentifiers"] = .wire(add) }
                if !remove.isEmpty { parameters["removeIdentifiers"] = .wire(remove) }
                var thresholdUnit = Wire.Unit.mgdl
                if let text = parsed.values["unit"] {
                    if let unit = try self.unit(text, allowNone: true) {
                        parameters["unit"] = unit.json
                        thresholdUnit = unit
                    } else {
                        parameters["clearUnit"] = true
                    }
                } else if parsed.values["low"] != nil || parsed.values["high"] != nil {
                    // Thresholds are given in the person's unit when they have one.
                    let current = try await daemon.call("GetPerson", ["name": .string(name)], as: Wire.PersonHistoryReply.self)
                    thresholdUnit = current.person.unit ?? .mgdl
                }
                for (option, key, clear) in [("low", "lowMgdL", "clearLow"), ("high", "highMgdL", "clearHigh")] {
                    guard let text = parsed.values[option] else { continue }
                    if text == "none" {
                        parameters[clear] = true
                    } else if let value = try self.threshold(text, option, thresholdUnit) {
                        parameters[key] = value
                    }
                }
                guard parameters.count > 1 else {
                    throw usage("Nothing to change: give --name, --identifier, --remove-identifier, --low, --high or --unit", help)
                }
                let reply = try await daemon.call("EditPerson", parameters)
                if json { return self.print(reply) }
                let edited = try Daemon.decode(Wire.PersonReply.self, reply, method: "EditPerson")
                writeStdout(self.render(edited.person, []))
            case "remove":
                try allow(["force"])
                let name = try name()
                let reply = try await daemon.call("RemovePerson", ["name": .string(name), "force": .bool(parsed.flags.contains("force"))])
                if json { return self.print(reply) }
                let removal = try Daemon.decode(Wire.RemovePersonReply.self, reply, method: "RemovePerson")
                var text = "Removed \(name)."
                if removal.releasedReadings > 0 {
                    text += " Their \(removal.releasedReadings) reading(s) stay (meter, values, times) and belong to no one now."
                }
                if removal.removedAssignments > 0 {
                    text += " \(removal.removedAssignments) assignment period(s) naming them were removed."
                }
                writeStdout(text + "\n")
            default:
                throw usage("Unknown action '\(action)': use list, add, show, edit or remove", help)
            }
            return ExitCode.success
        }
    }

    static func print(_ reply: JSONObject) -> Int32 {
        writeStdout(JSONValue.object(reply).prettySerialized() + "\n")
        return ExitCode.success
    }

    static func identifiers(_ texts: [String]) throws(CommandFailure) -> [Wire.PersonIdentifier] {
        var out: [Wire.PersonIdentifier] = []
        for text in texts {
            guard let identifier = Person.identifier(text) else {
                throw usage("'\(text)' is not an identifier. \(Person.identifierRule)", help)
            }
            out.append(identifier)
        }
        return out
    }

    static func unit(_ text: String?, allowNone: Bool) throws(CommandFailure) -> Wire.Unit? {
        guard let text else { return nil }
        if let unit = Wire.Unit(text: text) { return unit }
        guard allowNone, text.lowercased() == "none" else {
            throw usage("--unit must be mgdl or mmol\(allowNone ? " or none" : ""), not '\(text)'", help)
        }
        return nil
    }

    /// A threshold given in `unit`, as mg/dL.
    static func threshold(_ text: String?, _ option: String, _ unit: Wire.Unit) throws(CommandFailure) -> JSONValue? {
        guard let text else { return nil }
        guard let value = Double(text), value > 0, value.isFinite else {
            throw usage("--\(option) must be a glucose value in \(unit.symbol), not '\(text)'", help)
        }
        let mgdL = unit == .mgdl ? value : value * glucoseMolarMass
        return .double((mgdL * 10).rounded() / 10)
    }

    static func thresholds(_ p: Wire.Person) -> String {
        let unit = p.unit ?? .mgdl
        guard p.low != nil || p.high != nil else { return "" }
        let low = p.low.flatMap { unit.format(mgdL: $0.mgdL, mmolL: $0.mmolL) } ?? "-"
        let high = p.high.flatMap { unit.format(mgdL: $0.mgdL, mmolL: $0.mmolL) } ?? "-"
        return "\(low)-\(high) \(unit.symbol)"
    }

    static func render(_ p: Wire.Person, _ periods: [Wire.Assignment]) -> String {
        var text = "\(p.name)\n"
        text += "  Identifiers: \(p.identifiers.isEmpty ? "none (FHIR exports scope one to this gateway)" : p.identifiers.map(\.text).joined(separator: ", "))\n"
        let thresholds = self.thresholds(p)
        text += "  Thresholds:  \(thresholds.isEmpty ? "the defaults" : thresholds)\n"
        text += "  Unit:        \(p.unit?.symbol ?? "the configured one")\n"
        text += "  Meters now:  \(p.meters.isEmpty ? "none" : p.meters.joined(separator: ", "))\n"
        text += "  Readings:    \(p.readingCount)\n"
        if !periods.isEmpty {
            text += "  Assignments:\n"
            for period in periods {
                let until = period.until.map { localTimeText(epochMillis: $0.epochMillis) } ?? "now"
                text += "    \(period.meter)  \(localTimeText(epochMillis: period.from.epochMillis)) to \(until)  (\(period.readingCount) readings)\n"
            }
        }
        return text
    }
}
