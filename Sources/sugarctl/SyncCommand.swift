import JSON
import SugarAPI

/// `sugarctl sync [METER] [--force]`: syncs now and shows progress until done.
enum SyncCommand {
    static let help = CommandHelp(
        name: "sync",
        abstract: "Sync one meter, or every known meter, now; shows progress until done.",
        usage: "sync [<meter>] [--force] [--json] [--socket <path>]",
        arguments: [("<meter>", "The meter's id (Bluetooth address); all known meters when left out.")],
        options: [
            ("--force", "Sync even if the meter synced moments ago (skips the cooldown)."),
            ("--json", "Print each progress reply and the final one as a JSON line."),
        ] + DaemonOptions.help,
        discussion: """
            Needs root or the admin group. Exit status: 0 ok, 1 failure (sync failed, unknown meter, no adapter), \
            64 usage, 69 sugard not reachable, 77 permission denied.
            """
    )

    static let subcommand = Subcommand(help: help) { arguments in await run(arguments) }

    static func run(_ arguments: [String]) async -> Int32 {
        await runDaemonCommand(arguments, help: help, flags: ["force", "json"], values: []) { parsed throws(CommandFailure) in
            guard parsed.positionals.count <= 1 else { throw usage("Unexpected argument '\(parsed.positionals[1])'", help) }
            var parameters: JSONObject = [:]
            if let meter = parsed.positionals.first { parameters["meter"] = .string(meter) }
            if parsed.flags.contains("force") { parameters["force"] = true }
            let json = parsed.flags.contains("json")
            let daemon = try Daemon.connect(parsed)
            var sessions: [JSONValue] = []
            try await daemon.stream("Sync", parameters) { reply throws(CommandFailure) in
                if json {
                    writeStdout(JSONValue.object(reply).serialized() + "\n")
                } else if let phase = reply["phase"]?.stringValue {
                    var line = "\(reply["meter"]?.stringValue ?? "?"): \(phase)"
                    if phase == "receiving" || phase == "counting", let received = reply["received"]?.intValue {
                        line += " \(received)" + (reply["expected"]?.intValue.map { "/\($0)" } ?? "") + " records"
                    }
                    writeStdout(line + "\n")
                }
                if let final = reply["sessions"]?.arrayValue { sessions = final }
                return true
            }
            if json { return ExitCode.success }
            if sessions.isEmpty {
                writeStdout("Nothing synced: the meter synced moments ago (use --force to sync anyway).\n")
            }
            for session in sessions {
                let meter = session["meter"]?.stringValue ?? "?"
                let result = session["result"]?.stringValue ?? "?"
                var line = "\(meter): \(result), \(session["stored"]?.intValue ?? 0) new"
                if let duplicates = session["duplicates"]?.intValue, duplicates > 0 { line += ", \(duplicates) already stored" }
                if let error = session["error"]?.stringValue { line += " (\(error))" }
                writeStdout(line + "\n")
            }
            return ExitCode.success
        }
    }
}
