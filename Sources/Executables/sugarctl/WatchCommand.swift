import JSON
import SugarWire
import SystemIO

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
        await runDaemonCommand(arguments, help: help, flags: [JSONOutput.flag, "follow-syncing"], values: ["field", "meter", "policy", "count", "unit"]) {
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
            let json = JSONOutput.wanted(parsed)
            let daemon = try Daemon.connect(parsed)
            var unit = try displayUnit(parsed, daemonDefault: nil, help: help)
            if parsed.values["unit"] == nil, !json {
                let status = try await daemon.reconnect().call("GetStatus", as: Wire.StatusReply.self)
                unit = try displayUnit(parsed, daemonDefault: status.unit, help: help)
            }
            var following: String?
            try await daemon.stream("Watch", parameters) { reply throws(CommandFailure) in
                if json {
                    writeStdout(JSONValue.object(reply).serialized() + "\n")
                } else {
                    let watch = try Daemon.decode(Wire.WatchReply.self, reply, method: "Watch")
                    if let meter = watch.meter, meter != following {
                        following = meter
                        writeStdout("following \(meter)\n")
                    }
                    writeStdout(try self.describe(watch, unit: unit))
                }
                remaining -= 1
                return remaining > 0
            }
            return ExitCode.success
        }
    }

    /// One line per field: "08:00 readingCount: 7".
    static func describe(_ reply: Wire.WatchReply, unit: Wire.Unit) throws(CommandFailure) -> String {
        let now = localTimeText(epochMillis: wallClockMilliseconds())
        let clock = String(now.split(separator: " ").last ?? "")
        let fields: [(name: String, value: Wire.WatchedField)]
        do throws(WireError) {
            fields = try reply.watchedFields()
        } catch {
            throw Daemon.unreadable(error, method: "Watch")
        }
        var out = ""
        for field in fields {
            out += "\(clock) \(reply.snapshot ? "=" : "~") \(field.name): \(self.summary(field.value, unit: unit))\n"
        }
        return out
    }

    static func summary(_ field: Wire.WatchedField, unit: Wire.Unit) -> String {
        switch field {
        case .readingCount(let count):
            return String(count)
        case .highWater(let mark):
            return mark.map { String($0) } ?? "none"
        case .link(let link):
            return link.rawValue
        case .syncPhase(let phase):
            return phase.rawValue
        case .lastReading(let reading):
            guard let reading else { return "none" }
            let text = glucoseText(mgdL: reading.glucose?.mgdL, mmolL: reading.glucose?.mmolL, unit: unit) ?? "no value"
            return "\(text) at \(instantText(reading.instant) ?? "?") from \(reading.meter)"
        case .meters(let meters):
            if meters.isEmpty { return "none" }
            return meters.map { "\($0.id) [\(StatusCommand.meterLine($0).split(separator: "\n").first ?? "")]" }
                .joined(separator: "; ")
        case .adapter(let adapter):
            return adapter.present ? "\(adapter.name ?? "present"), powered \(adapter.powered ? "on" : "off")" : "absent"
        case .syncOverview(let sync):
            return sync.phase.rawValue + (sync.lastResult.map { ", last \($0.result.rawValue)" } ?? "")
        case .errors(let errors):
            guard let last = errors.last else { return "none" }
            return "\(errors.count), latest: \(last.message)"
        case .progress(let progress):
            return "\(progress.received)" + (progress.expected.map { "/\($0)" } ?? "")
        case .pairing(let pairing):
            return pairing.rawValue
        case .daemon, .identity, .lastSync, .lastError, .nextAttempt:
            return field.json.serialized()
        }
    }
}
