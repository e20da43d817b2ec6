import JSON
import PacketCapture

/// `sugarctl capture inspect FILE [--json] [--handle H=UUID ...]`: decodes the meter sessions of a
/// btsnoop capture offline.
enum CaptureCommand {
    static let help = CommandHelp(
        name: "capture",
        abstract: "Inspect a Bluetooth capture (btsnoop) of a glucose meter (offline, no daemon needed).",
        usage: "capture inspect <file> [--json] [--handle <handle>=<uuid> ...]\n"
            + "       sugarctl capture redact <in> <out> [--meter <addr>] [--keep-addresses]\n"
            + "       sugarctl capture record <out> [--meter <addr>] [--redact]",
        arguments: [
            ("inspect", "The action: decode the meter sessions found in <file>."),
            ("redact", "Make a capture safe to share (see 'sugarctl capture redact --help')."),
            ("record", "Record live Bluetooth traffic (see 'sugarctl capture record --help')."),
            ("<file>", "A btsnoop capture: Android btsnoop_hci.log (H4) or btmon -w (monitor)."),
        ],
        options: [
            ("--json", "Print one JSON object {\"sessions\", \"records\", \"anomalies\"} instead of text."),
            ("--handle <h>=<uuid>", "Name a handle the capture never discovered, e.g. 0x0012=2a18 "
                + "(repeatable; AA:BB:CC:DD:EE:FF/0x0012=2a18 for one peer)."),
        ],
        discussion: """
            Prints every LE connection (session): the peer, the glucose service handles, Device Information \
            strings, the Glucose Feature, the meter clock and every RACP exchange (request and response \
            decoded); then the records, each Glucose Measurement joined with its context by sequence number (a context \
            more than 4096 measurements after its record joins nothing and is an anomaly); \
            then anomalies (truncated or undecodable packets, orphan contexts, missing contexts, reserved \
            values) with their frame number. Anomalies never hide the records around them. Writes to a \
            meter's clock (Current Time 0x2A2B, i-SENS 0xFFF1) are listed per session with the time written \
            and its read-back. A OneTouch Verio session (LifeScan's vendor service, no Glucose service) \
            shows its commands and replies paired in order: the clock, highest record number, count, any \
            refused command, and each record with its number, meter time, mg/dL and meaning (glucose, \
            hi above 600, lo below 20, noValue for 0, notBloodGlucose).

            With --json each session also has clockWrites [{characteristic, frame, bytes, dateTime, \
            writeError, readBack}] and verio (null, or {commands, acknowledgements, clock, \
            highestRecordNumber, recordCount, records, refusals}); each record is the `sugarctl decode measurement --json` object plus frame (1-based \
            frame number), session (index into sessions) and context (the decoded context or null); each \
            anomaly is {frame, characteristic, reason}.

            A damaged record (impossible header) is an anomaly with its frame number; reading goes on at the \
            next plausible record, so the records before and after it are still reported.

            Exit status: 0 inspected (anomalies included), 64 bad arguments, 65 unreadable capture: not a \
            btsnoop file, or no record readable (one line on stderr, nothing on stdout), 1 other failure.
            """
    )

    static let subcommand = Subcommand(help: help) { arguments in run(arguments) }

    static func run(_ arguments: [String]) -> Int32 {
        if arguments.first == "redact" { return CaptureShareCommand.redact(Array(arguments.dropFirst())) }
        if arguments.first == "record" { return CaptureShareCommand.record(Array(arguments.dropFirst())) }
        let parsed: ParsedArguments
        var overrides: [HandleOverride] = []
        do throws(UsageError) {
            parsed = try ParsedArguments(arguments, flags: [JSONOutput.flag], repeatableOptions: ["handle"])
            if parsed.helpRequested {
                writeStdout(help.render())
                return ExitCode.success
            }
            guard let action = parsed.positionals.first else { throw UsageError(message: "Missing expected argument 'inspect'") }
            guard action == "inspect" else { throw UsageError(message: "Unknown action '\(action)'; use inspect, redact or record") }
            guard parsed.positionals.count >= 2 else { throw UsageError(message: "Missing expected argument '<file>'") }
            guard parsed.positionals.count == 2 else {
                throw UsageError(message: "Unexpected argument '\(parsed.positionals[2])'")
            }
            for text in parsed.lists["handle"] ?? [] {
                do throws(CaptureError) {
                    overrides.append(try HandleOverride(parsing: text))
                } catch {
                    throw UsageError(message: "Invalid --handle: \(error.message)")
                }
            }
        } catch {
            return usageFailure(error, help)
        }

        let path = parsed.positionals[1]
        do throws(CaptureError) {
            if JSONOutput.wanted(parsed) {
                // Streams: memory stays flat in the capture's size; nothing is printed unless it was all read.
                try CaptureInspector.writeJSON(path: path, handleOverrides: overrides, to: 1)
            } else {
                writeStdout(try CaptureInspector.inspect(path: path, handleOverrides: overrides).readableText)
            }
        } catch {
            let message = error.message.hasSuffix(".") ? String(error.message.dropLast()) : error.message
            writeStderr("error: \(message)\n")
            return error.code == .invalidArgument ? ExitCode.failure : ExitCode.dataError
        }
        return ExitCode.success
    }
}
