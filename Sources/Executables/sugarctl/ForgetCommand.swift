import JSON

/// `sugarctl forget METER`: the daemon forgets a meter (its readings stay).
enum ForgetCommand {
    static let help = CommandHelp(
        name: "forget",
        abstract: "Forget a meter: it leaves the list and syncs from scratch when seen again; its readings are kept.",
        usage: "forget <meter> [--json] [--socket <path>]",
        arguments: [("<meter>", "The meter's id (Bluetooth address), as `sugarctl meters` shows it.")],
        options: [JSONOutput.help("{\"meter\", \"forgotten\": true}")] + DaemonOptions.help,
        discussion: """
            Needs root or the admin group. Exit status: 0 ok, 1 failure (e.g. unknown meter), 64 usage, \
            69 sugard not reachable, 77 permission denied.
            """
    )

    static let subcommand = Subcommand(help: help) { arguments in await run(arguments) }

    static func run(_ arguments: [String]) async -> Int32 {
        await runDaemonCommand(arguments, help: help, flags: [JSONOutput.flag], values: []) { parsed throws(CommandFailure) in
            guard let meter = parsed.positionals.first else { throw usage("Missing expected argument '<meter>'", help) }
            guard parsed.positionals.count == 1 else { throw usage("Unexpected argument '\(parsed.positionals[1])'", help) }
            _ = try await Daemon.connect(parsed).call("Forget", ["meter": .string(meter)])
            if JSONOutput.wanted(parsed) {
                writeStdout(JSONValue.object(["meter": .string(meter), "forgotten": true]).serialized() + "\n")
            } else {
                writeStdout("Forgot meter \(meter). Its readings are kept.\n")
            }
            return ExitCode.success
        }
    }
}
