import JSON
import SugarWire

/// `sugarctl meters [--json]`: every meter the daemon or its database knows;
/// `sugarctl meters assign METER PERSON` and `sugarctl meters unassign METER`: whose meter it is.
enum MetersCommand {
    static let help = CommandHelp(
        name: "meters",
        abstract: "List the meters sugard knows (link, sync, pairing, last sync, readings, person); assign them to people.",
        usage: "meters [--json] [--socket <path>] | meters assign <meter> <person> [--json] | meters unassign <meter> [--json]",
        arguments: [
            ("assign <meter> <person>", "Assign the meter to a person: its readings, stored and future, carry the person."),
            ("unassign <meter>", "The meter belongs to no one (its readings then carry no person)."),
        ],
        options: [JSONOutput.help("the ListMeters reply (assign, unassign: {\"meter\", \"person\"})")] + DaemonOptions.help,
        discussion: """
            <meter> is the Bluetooth address `sugarctl meters` shows; <person> is 1 to 64 characters (quote names \
            with spaces). assign and unassign need root or the admin group.
            Exit status: 0 ok, 1 failure (e.g. unknown meter), 64 usage, 69 sugard not reachable, 77 permission denied.
            """
    )

    static let subcommand = Subcommand(help: help) { arguments in await run(arguments) }

    static func run(_ arguments: [String]) async -> Int32 {
        await runDaemonCommand(arguments, help: help, flags: [JSONOutput.flag], values: []) { parsed throws(CommandFailure) in
            if let action = parsed.positionals.first {
                return try await self.assign(action, Array(parsed.positionals.dropFirst()), parsed)
            }
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
                    m.person ?? "",
                ]
            }
            writeStdout(table(["Meter", "Name", "Link/Sync", "Pairing", "Last sync", "Readings", "Person"], rows))
            return ExitCode.success
        }
    }

    /// `assign METER PERSON` / `unassign METER`.
    static func assign(_ action: String, _ rest: [String], _ parsed: ParsedArguments) async throws(CommandFailure) -> Int32 {
        switch action {
        case "assign":
            guard let meter = rest.first else { throw usage("Missing expected argument '<meter>'", help) }
            guard rest.count >= 2 else { throw usage("Missing expected argument '<person>'", help) }
            guard rest.count == 2 else { throw usage("Unexpected argument '\(rest[2])'", help) }
            guard let person = Person.validated(rest[1]) else { throw usage(Person.rule, help) }
            _ = try await Daemon.connect(parsed).call("AssignMeter", ["meter": .string(meter), "person": .string(person)])
            if JSONOutput.wanted(parsed) {
                writeStdout(JSONValue.object(["meter": .string(meter), "person": .string(person)]).serialized() + "\n")
            } else {
                writeStdout("Meter \(meter) is \(person)'s now; its readings carry \(person).\n")
            }
        case "unassign":
            guard let meter = rest.first else { throw usage("Missing expected argument '<meter>'", help) }
            guard rest.count == 1 else { throw usage("Unexpected argument '\(rest[1])'", help) }
            _ = try await Daemon.connect(parsed).call("AssignMeter", ["meter": .string(meter)])
            if JSONOutput.wanted(parsed) {
                writeStdout(JSONValue.object(["meter": .string(meter), "person": .null]).serialized() + "\n")
            } else {
                writeStdout("Meter \(meter) is assigned to no one now.\n")
            }
        default:
            throw usage("Unknown action '\(action)': use assign or unassign", help)
        }
        return ExitCode.success
    }
}
