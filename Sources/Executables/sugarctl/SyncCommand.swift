import JSON
import SugarWire

/// `sugarctl sync [METER] [--force]`: syncs now and shows progress until done.
enum SyncCommand {
    static let help = CommandHelp(
        name: "sync",
        abstract: "Sync one meter, or every known meter, now; shows progress until done.",
        usage: "sync [<meter>] [--force] [--json] [--socket <path>]",
        arguments: [("<meter>", "The meter's id (Bluetooth address); all known meters when left out.")],
        options: [
            ("--force", "Sync even if the meter synced moments ago (skips the cooldown)."),
            ("--json", "Print the sessions the sync ended with as one JSON object ({\"sessions\": [...]}), no progress."),
        ] + DaemonOptions.help,
        discussion: """
            Needs root or the admin group. Exit status: 0 every sync succeeded or found no new records (or was \
            skipped in the cooldown), 1 a sync failed, was interrupted or aborted (stderr names the meter and why), \
            unknown meter or no adapter; 64 usage, 69 sugard not reachable, 77 permission denied.
            """
    )

    static let subcommand = Subcommand(help: help) { arguments in await run(arguments) }

    /// Session results that mean the meter's records were all fetched.
    static let successfulResults: Set<Wire.SyncResult> = [.success, .noNewRecords]

    static func run(_ arguments: [String]) async -> Int32 {
        await runDaemonCommand(arguments, help: help, flags: ["force", JSONOutput.flag], values: []) { parsed throws(CommandFailure) in
            guard parsed.positionals.count <= 1 else { throw usage("Unexpected argument '\(parsed.positionals[1])'", help) }
            var parameters: JSONObject = [:]
            if let meter = parsed.positionals.first { parameters["meter"] = .string(meter) }
            if parsed.flags.contains("force") { parameters["force"] = true }
            let json = JSONOutput.wanted(parsed)
            let daemon = try Daemon.connect(parsed)
            var sessions: [Wire.Session] = []
            try await daemon.stream("Sync", parameters, as: Wire.SyncReply.self) { reply throws(CommandFailure) in
                if !json, let phase = reply.phase {
                    var line = "\(reply.meter ?? "?"): \(phase.rawValue)"
                    if phase == .receiving || phase == .counting, let received = reply.received {
                        line += " \(received)" + (reply.expected.map { "/\($0)" } ?? "") + " records"
                    }
                    writeStdout(line + "\n")
                }
                if let final = reply.sessions { sessions = final }
                return true
            }
            let unsuccessful = sessions.filter { !successfulResults.contains($0.result) }
            if json {
                writeStdout(JSONValue.object(["sessions": .wire(sessions)]).serialized() + "\n")
            } else {
                if sessions.isEmpty {
                    writeStdout("Nothing synced: the meter synced moments ago (use --force to sync anyway).\n")
                }
                for session in sessions {
                    var line = "\(session.meter): \(session.result.rawValue), \(session.stored) new"
                    if session.duplicates > 0 { line += ", \(session.duplicates) already stored" }
                    if let error = session.error { line += " (\(error))" }
                    writeStdout(line + "\n")
                }
            }
            for session in unsuccessful {
                let result = session.result.rawValue
                let why = session.error ?? "no reason was reported"
                writeStderr("Error: the sync of \(session.meter) \(result == "failed" ? "failed" : "was \(result)"): \(why)\n")
            }
            return unsuccessful.isEmpty ? ExitCode.success : ExitCode.failure
        }
    }
}
