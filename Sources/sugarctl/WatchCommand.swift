import JSON
import SugarAPI

/// `sugarctl watch`: a live view of the daemon's state until Ctrl-C.
enum WatchCommand {
    static let help = CommandHelp(
        name: "watch",
        abstract: "Follow the daemon's state live until Ctrl-C: a snapshot first, then each change.",
        usage: "watch [--field <field>]... [--meter <id>] [--follow-syncing] [--policy coalesced|immediate] [--json] [--count <n>] [--unit mgdl|mmol]",
        options: [
            ("--field <field>", "Only this field (repeatable): daemon, adapter, meters, lastReading, readingCount, sync, errors; with --meter: identity, link, sync, progress, lastSync, highWater, pairing, lastError."),
            ("--meter <id>", "Watch one meter's model instead of the whole view model."),
            ("--follow-syncing", "Watch the model of whichever meter is syncing, switching to each meter as its sync starts (starts on --meter if given)."),
            ("--policy <policy>", "coalesced (default: each changed field once, latest value) or immediate (every change)."),
            ("--json", "Print each Watch reply as one JSON line."),
            ("--count <n>", "Stop after n updates (the snapshot counts)."),
            DaemonOptions.unitHelp,
        ] + DaemonOptions.help,
        discussion: "Exit status: 0 ok, 1 failure, 64 usage, 69 sugard not reachable, 77 permission denied."
    )

    static let subcommand = Subcommand(help: help) { arguments in await run(arguments) }

    static func run(_ arguments: [String]) async -> Int32 {
        await runDaemonCommand(arguments, help: help, flags: ["json", "follow-syncing"], values: ["field", "meter", "policy", "count", "unit"]) {
            parsed throws(CommandFailure) in
            guard parsed.positionals.isEmpty else { throw usage("Unexpected argument '\(parsed.positionals[0])'", help) }
            var parameters: JSONObject = [:]
            if let fields = parsed.lists["field"] { parameters["fields"] = .array(fields.map { .string($0) }) }
            if let meter = parsed.values["meter"] { parameters["meter"] = .string(meter) }
            if parsed.flags.contains("follow-syncing") { parameters["followSyncing"] = true }
            if let policy = parsed.values["policy"] {
                guard policy == "coalesced" || policy == "immediate" else {
                    throw usage("--policy must be coalesced or immediate, not '\(policy)'", help)
                }
                parameters["policy"] = .string(policy)
            }
            var remaining = Int.max
            if let text = parsed.values["count"] {
                guard let count = Int(text), count > 0 else { throw usage("--count must be a positive number", help) }
                remaining = count
            }
            let json = parsed.flags.contains("json")
            let daemon = try Daemon.connect(parsed)
            var unit = try displayUnit(parsed, daemonDefault: nil, help: help)
            if parsed.values["unit"] == nil, !json {
                unit = try displayUnit(parsed, daemonDefault: try await daemon.reconnect().call("GetStatus")["unit"]?.stringValue, help: help)
            }
            var following: String?
            try await daemon.stream("Watch", parameters) { reply throws(CommandFailure) in
                if json {
                    writeStdout(JSONValue.object(reply).serialized() + "\n")
                } else {
                    if let meter = reply["meter"]?.stringValue, meter != following {
                        following = meter
                        writeStdout("following \(meter)\n")
                    }
                    writeStdout(self.describe(reply, unit: unit))
                }
                remaining -= 1
                return remaining > 0
            }
            return ExitCode.success
        }
    }

    /// One line per field: "08:00 readingCount: 7".
    static func describe(_ reply: JSONObject, unit: DisplayUnit) -> String {
        let now = localTimeText(epochMillis: APITime.now())
        let clock = String(now.split(separator: " ").last ?? "")
        let snapshot = reply["snapshot"] == true
        var out = ""
        for entry in reply["fields"]?.objectValue?.entries ?? [] {
            out += "\(clock) \(snapshot ? "=" : "~") \(entry.key): \(self.summary(entry.key, entry.value, unit: unit))\n"
        }
        return out
    }

    static func summary(_ field: String, _ value: JSONValue, unit: DisplayUnit) -> String {
        switch field {
        case "readingCount", "highWater", "link":
            return value.stringValue ?? value.intValue.map { String($0) } ?? "none"
        case "sync" where value.stringValue != nil:
            return value.stringValue ?? "?"
        case "lastReading":
            guard !value.isNull else { return "none" }
            let text = glucoseText(mgdL: value["glucose"]?["mgdL"]?.doubleValue, mmolL: value["glucose"]?["mmolL"]?.doubleValue, unit: unit) ?? "no value"
            return "\(text) at \(instantText(value["instant"]) ?? "?") from \(value["meter"]?.stringValue ?? "?")"
        case "meters":
            let meters = value.arrayValue ?? []
            if meters.isEmpty { return "none" }
            return meters.map { "\($0["id"]?.stringValue ?? "?") [\(StatusCommand.meterLine($0).split(separator: "\n").first ?? "")]" }
                .joined(separator: "; ")
        case "adapter":
            return value["present"] == true ? "\(value["name"]?.stringValue ?? "present"), powered \(value["powered"] == true ? "on" : "off")" : "absent"
        case "sync":
            return "\(value["phase"]?.stringValue ?? "?")" + (value["lastResult"].flatMap { $0.isNull ? nil : ", last \($0["result"]?.stringValue ?? "?")" } ?? "")
        case "errors":
            guard let last = value.arrayValue?.last else { return "none" }
            return "\(value.arrayValue?.count ?? 0), latest: \(last["message"]?.stringValue ?? "")"
        case "progress":
            return "\(value["received"]?.intValue ?? 0)" + (value["expected"]?.intValue.map { "/\($0)" } ?? "")
        case "pairing":
            return value.stringValue ?? "?"
        default:
            return value.serialized()
        }
    }
}
