import GlucoseProfile
import JSON
import SugarWire

/// `sugarctl meters [--json]`: every meter the daemon or its database knows;
/// `sugarctl meters assign|unassign|share|history`: whose meter it is, and since when.
enum MetersCommand {
    static let help = CommandHelp(
        name: "meters",
        abstract: "List the meters sugard knows (link, sync, pairing, last sync, readings, person, procedure, clock); assign them to people.",
        usage: """
            meters [--json] [--socket <path>] | meters assign <meter> <person> [--from <time>] [--json] | \
            meters unassign <meter> [--from <time>] [--json] | meters share <meter> [--from <time>] [--json] | \
            meters history <meter> [--json]
            """,
        arguments: [
            ("assign <meter> <person>", "The meter is the person's from --from (default now) on; the period that covered that time ends."),
            ("unassign <meter>", "End the meter's assignment at --from (default now): its readings from then on belong to no one."),
            ("share <meter>", "The meter is shared from --from (default now): its readings wait until `sugarctl readings attribute` gives them to someone."),
            ("history <meter>", "The meter's assignment periods: who had it when, and how many readings each period holds."),
        ],
        options: [
            ("--from <time>", "When the change starts: ISO 8601 with a zone, a date, or an age (2h, 3d); default now. "
                + "A time in the past moves only the readings measured from then until the next later change."),
            JSONOutput.help("the ListMeters reply (assign, unassign, share: the daemon's reply; history: the ListAssignments reply)"),
        ] + DaemonOptions.help,
        discussion: """
            Procedure is how the meter is downloaded: GLS (the Bluetooth Glucose Profile) or Verio (OneTouch Verio's \
            vendor service); Clock is "settable" when sugard can set the meter's clock (Current Time Service with \
            write, or an i-SENS meter), else "read only"; both show "?" until a sync connected to the meter \
            (--json: "procedure": "gls"/"verio" and "clockSettable": true/false, null until then).
            A reading belongs to the person whose assignment of its meter covers the time it was measured, so giving \
            a meter to someone else never changes whose earlier readings are. <meter> is the Bluetooth address \
            `sugarctl meters` shows; <person> is 1 to 64 characters (quote names with spaces); a person not known yet \
            is added (see `sugarctl people`). assign, unassign and share need root or the admin group.
            Exit status: 0 ok, 1 failure (e.g. unknown meter), 64 usage (including a change the daemon refuses), 69 sugard \
            not reachable, 77 permission denied.
            """
    )

    static let subcommand = Subcommand(help: help) { arguments in await run(arguments) }

    static func run(_ arguments: [String]) async -> Int32 {
        await runDaemonCommand(arguments, help: help, flags: [JSONOutput.flag], values: ["from"]) { parsed throws(CommandFailure) in
            if let action = parsed.positionals.first {
                return try await self.assign(action, Array(parsed.positionals.dropFirst()), parsed)
            }
            if parsed.values["from"] != nil { throw usage("--from applies to assign, unassign and share", help) }
            let daemon = try Daemon.connect(parsed)
            let reply = try await daemon.call("ListMeters")
            if JSONOutput.wanted(parsed) {
                writeStdout(JSONValue.object(reply).prettySerialized() + "\n")
                return ExitCode.success
            }
            let meters = try Daemon.decode(Wire.MetersReply.self, reply, method: "ListMeters").meters
            if meters.isEmpty {
                writeStdout("No meters known yet. Switch a meter on near the adapter, or pair one: sugarctl pair <address>\n")
                return ExitCode.success
            }
            let rows: [[String]] = meters.map { m in
                let live = m.live
                let stored = m.stored
                let lastSync = instantText(live?.lastSync?.at) ?? instantText(stored?.lastSync) ?? "never"
                let result = live?.lastSync?.result.rawValue ?? stored?.lastSyncResult?.rawValue ?? ""
                return [
                    m.id,
                    m.identity.displayName,
                    live.map { "\($0.link.rawValue)/\($0.sync.rawValue)" } ?? "not in range",
                    live?.pairing.rawValue ?? "",
                    result.isEmpty ? lastSync : "\(result) \(lastSync)",
                    stored.map { String($0.readingCount) } ?? "0",
                    m.procedure.map { $0 == .verio ? "Verio" : "GLS" } ?? "?",
                    m.clockSettable.map { $0 ? "settable" : "read only" } ?? "?",
                    m.person ?? (stored?.shared == true ? "(shared)" : ""),
                ]
            }
            writeStdout(table(["Meter", "Name", "Link/Sync", "Pairing", "Last sync", "Readings", "Procedure", "Clock", "Person"], rows))
            return ExitCode.success
        }
    }

    /// `assign METER PERSON`, `unassign METER`, `share METER` (each `[--from TIME]`), `history METER`.
    static func assign(_ action: String, _ rest: [String], _ parsed: ParsedArguments) async throws(CommandFailure) -> Int32 {
        let expected = action == "assign" ? 2 : 1
        guard ["assign", "unassign", "share", "history"].contains(action) else {
            throw usage("Unknown action '\(action)': use assign, unassign, share or history", help)
        }
        guard let meter = rest.first else { throw usage("Missing expected argument '<meter>'", help) }
        guard rest.count >= expected else { throw usage("Missing expected argument '<person>'", help) }
        guard rest.count == expected else { throw usage("Unexpected argument '\(rest[expected])'", help) }
        var parameters: JSONObject = ["meter": .string(meter)]
        var fromText = "now"
        if let from = parsed.values["from"] {
            guard action != "history" else { throw usage("--from applies to assign, unassign and share", help) }
            parameters["from"] = .string(try timeArgument(from, option: "from", help: help))
            fromText = "from " + (CivilCalendar.parseISOInstant(parameters["from"]?.stringValue ?? "").map {
                localTimeText(epochMillis: $0)
            } ?? from)
        }
        let json = JSONOutput.wanted(parsed)
        let daemon = try Daemon.connect(parsed)
        let reply: JSONObject
        var text: String
        switch action {
        case "history":
            reply = try await daemon.call("ListAssignments", parameters)
            let periods = try Daemon.decode(Wire.AssignmentsReply.self, reply, method: "ListAssignments").assignments
            text = periods.isEmpty ? "Meter \(meter) has never been assigned: its readings belong to no one.\n" : ""
            if !periods.isEmpty {
                text = table(
                    ["From", "Until", "Person", "Readings"],
                    periods.map { period in
                        [
                            localTimeText(epochMillis: period.from.epochMillis),
                            period.until.map { localTimeText(epochMillis: $0.epochMillis) } ?? "(now)",
                            period.person ?? "(shared)", String(period.readingCount),
                        ]
                    })
            }
        case "assign":
            guard let person = Person.validated(rest[1]) else { throw usage(Person.rule, help) }
            parameters["person"] = .string(person)
            reply = try await daemon.call("AssignMeter", parameters)
            let result = try Daemon.decode(Wire.AssignReply.self, reply, method: "AssignMeter")
            text = result.addedPerson == true ? "Added person \(person). " : ""
            text += "Meter \(meter) is \(person)'s \(fromText) on\(self.moved(result, to: person))\n"
        case "unassign":
            reply = try await daemon.call("AssignMeter", parameters)
            let result = try Daemon.decode(Wire.AssignReply.self, reply, method: "AssignMeter")
            text = "Meter \(meter) is assigned to no one \(fromText) on\(self.moved(result, to: nil))\n"
        default:  // share
            reply = try await daemon.call("ShareMeter", parameters)
            let result = try Daemon.decode(Wire.AttributionReply.self, reply, method: "ShareMeter")
            text = "Meter \(meter) is shared \(fromText) on: its readings wait until `sugarctl readings attribute` gives them to "
                + "someone (`sugarctl readings --unattributed` lists them)\(self.moved(result, to: nil))\n"
        }
        if json {
            // assign, unassign and share say whose the meter is now, then the daemon's counts; history is the reply.
            var document: JSONObject = action == "history" ? [:] : ["meter": .string(meter), "person": parameters["person"] ?? .null]
            if action == "share" { document["shared"] = true }
            for entry in reply.entries { document[entry.key] = entry.value }
            writeStdout(JSONValue.object(document).prettySerialized() + "\n")
        } else {
            writeStdout(text)
        }
        return ExitCode.success
    }

    /// What a change did to stored readings, as the end of a sentence.
    static func moved(_ result: Wire.AssignReply, to person: String?) -> String {
        self.moved(result.moved ?? 0, to: person)
    }

    static func moved(_ result: Wire.AttributionReply, to person: String?) -> String { self.moved(result.moved, to: person) }

    static func moved(_ count: Int64, to person: String?) -> String {
        if count == 0 { return "; no stored reading changed hands." }
        let whom = person.map { "now belong to \($0)" } ?? "now belong to no one"
        return "; \(count) stored reading(s) measured since then \(whom)."
    }
}
