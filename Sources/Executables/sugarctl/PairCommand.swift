import JSON
import SugarWire

/// `sugarctl pair METER [--pin N]`: pairs with a meter, asking for the PIN it shows.
enum PairCommand {
    static let help = CommandHelp(
        name: "pair",
        abstract: "Pair with a meter; asks for the PIN the meter shows.",
        usage: "pair <meter> [--pin <6 digits>] [--json] [--socket <path>]",
        arguments: [("<meter>", "The meter's id (Bluetooth address).")],
        options: [
            ("--pin <pin>", "The PIN, for scripts (otherwise you are asked when the meter shows it)."),
            JSONOutput.help("the outcome, {\"meter\", \"paired\", \"message\"} (progress and the PIN prompt go to stderr)"),
        ] + DaemonOptions.help,
        discussion: """
            Put the meter in pairing mode first. Needs root or the admin group. Exit status: 0 paired, 1 failed \
            (wrong PIN, timeout, unknown meter: run it again to retry), 64 usage, 69 sugard not reachable, \
            77 permission denied.
            """
    )

    static let subcommand = Subcommand(help: help) { arguments in await run(arguments) }

    static func isPIN(_ text: String) -> Bool { text.utf8.count == 6 && text.utf8.allSatisfy { $0 >= 48 && $0 <= 57 } }

    static func run(_ arguments: [String]) async -> Int32 {
        await runDaemonCommand(arguments, help: help, flags: [JSONOutput.flag], values: ["pin"]) { parsed throws(CommandFailure) in
            guard let meter = parsed.positionals.first else { throw usage("Missing expected argument '<meter>'", help) }
            guard parsed.positionals.count == 1 else { throw usage("Unexpected argument '\(parsed.positionals[1])'", help) }
            if let pin = parsed.values["pin"], !isPIN(pin) { throw usage("--pin must be 6 digits", help) }
            let daemon = try Daemon.connect(parsed)
            let json = JSONOutput.wanted(parsed)
            // With --json, stdout carries only the outcome.
            func say(_ text: String) { if json { writeStderr(text) } else { writeStdout(text) } }
            say("Pairing with \(meter)...\n")
            var paired = false
            var failure: String?
            /// With --json, the outcome on stdout however pairing ends.
            func outcome(_ paired: Bool, _ message: String?) {
                guard json else { return }
                let object: JSONObject = ["meter": .string(meter), "paired": .bool(paired), "message": .from(paired ? nil : message)]
                writeStdout(JSONValue.object(object).serialized() + "\n")
            }
            do throws(CommandFailure) {
                try await daemon.stream("Pair", ["meter": .string(meter)], as: Wire.PairReply.self) { reply throws(CommandFailure) in
                    switch reply.state {
                    case .waitingForPasskey:
                        var pin = parsed.values["pin"]
                        var attempts = 0
                        while pin == nil {
                            say("Enter the PIN shown on the meter: ")
                            guard let line = readLine() else {
                                throw CommandFailure(ExitCode.failure, "\nError: no PIN entered; pairing abandoned.")
                            }
                            let text = line.filter { !$0.isWhitespace }
                            if isPIN(text) {
                                pin = text
                            } else {
                                attempts += 1
                                writeStderr("The PIN is the 6 digits on the meter's display.\n")
                                if attempts >= 3 { throw CommandFailure(ExitCode.failure, "Error: no valid PIN entered; pairing abandoned.") }
                            }
                        }
                        _ = try await daemon.reconnect().call("SubmitPasskey", ["meter": .string(meter), "passkey": .string(pin ?? "")])
                    case .paired:
                        paired = true
                    case .failed:
                        failure = reply.message ?? "the meter refused"
                        writeStderr("Pairing failed\(reply.message.map { ": " + $0 } ?? ".")\n")
                    case .pairing:
                        break
                    }
                    return true
                }
            } catch {
                outcome(false, error.message.split(separator: "\n").first.map { String($0.trimmingPrefix("Error: ")) })
                throw error
            }
            outcome(paired, failure ?? "pairing did not finish")
            guard paired else { throw CommandFailure(ExitCode.failure, "Error: pairing did not finish.") }
            if !json { writeStdout("Paired with \(meter).\n") }
            return ExitCode.success
        }
    }
}
