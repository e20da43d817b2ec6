import JSON
import SugarAPI

/// `sugarctl meters [--json]`: every meter the daemon or its database knows.
enum MetersCommand {
    static let help = CommandHelp(
        name: "meters",
        abstract: "List the meters sugard knows: link and sync state, pairing, last sync, readings stored.",
        usage: "meters [--json] [--socket <path>]",
        options: [("--json", "Print the ListMeters reply as JSON.")] + DaemonOptions.help,
        discussion: "Exit status: 0 ok, 1 failure, 64 usage, 69 sugard not reachable, 77 permission denied."
    )

    static let subcommand = Subcommand(help: help) { arguments in await run(arguments) }

    static func run(_ arguments: [String]) async -> Int32 {
        await runDaemonCommand(arguments, help: help, flags: ["json"], values: []) { parsed throws(CommandFailure) in
            let daemon = try Daemon.connect(parsed)
            let reply = try await daemon.call("ListMeters")
            if parsed.flags.contains("json") {
                writeStdout(JSONValue.object(reply).prettySerialized() + "\n")
                return ExitCode.success
            }
            let meters = reply["meters"]?.arrayValue ?? []
            if meters.isEmpty {
                writeStdout("No meters known yet. Switch a meter on near the adapter, or pair one: sugarctl pair <address>\n")
                return ExitCode.success
            }
            let rows: [[String]] = meters.map { m in
                let live = m["live"]
                let stored = m["stored"]
                let lastSync =
                    instantText(live?["lastSync"]?["at"]) ?? instantText(stored?["lastSync"]) ?? "never"
                let result = live?["lastSync"]?["result"]?.stringValue ?? stored?["lastSyncResult"]?.stringValue ?? ""
                return [
                    m["id"]?.stringValue ?? "?",
                    m["identity"]?["displayName"]?.stringValue ?? "",
                    live.flatMap { $0.isNull ? nil : "\($0["link"]?.stringValue ?? "?")/\($0["sync"]?.stringValue ?? "?")" } ?? "not in range",
                    live?["pairing"]?.stringValue ?? "",
                    result.isEmpty ? lastSync : "\(result) \(lastSync)",
                    stored?["readingCount"]?.intValue.map { String($0) } ?? "0",
                ]
            }
            writeStdout(table(["Meter", "Name", "Link/Sync", "Pairing", "Last sync", "Readings"], rows))
            return ExitCode.success
        }
    }
}
