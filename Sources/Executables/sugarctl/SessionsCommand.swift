import JSON
import SugarWire

/// `sugarctl sessions [METER] [--limit N] [--json]`: recorded sync attempts, newest first.
enum SessionsCommand {
    static let help = CommandHelp(
        name: "sessions",
        abstract: "List recorded sync sessions, newest first.",
        usage: "sessions [<meter>] [--limit <n>] [--json] [--socket <path>]",
        arguments: [("<meter>", "Only this meter's sessions.")],
        options: [("--limit <n>", "At most n sessions (default 50)."), ("--json", "Print the ListSyncSessions reply as JSON.")]
            + DaemonOptions.help,
        discussion: """
            A result marked "(meter reset)" found the meter's memory cleared or its counter restarted: the
            whole memory was downloaded into a new epoch (--json: "reset": true).
            The Clock column shows a meter clock the sync set after its download (set_meter_clock in
            sugard.conf): how far off it was before and after (--json: "clockSet" with skewBeforeSeconds
            and skewAfterSeconds, meter minus host).
            Exit status: 0 ok, 1 failure, 64 usage, 69 sugard not reachable, 77 permission denied.
            """
    )

    static let subcommand = Subcommand(help: help) { arguments in await run(arguments) }

    static func run(_ arguments: [String]) async -> Int32 {
        await runDaemonCommand(arguments, help: help, flags: [JSONOutput.flag], values: ["limit"]) { parsed throws(CommandFailure) in
            guard parsed.positionals.count <= 1 else { throw usage("Unexpected argument '\(parsed.positionals[1])'", help) }
            var parameters: JSONObject = [:]
            if let meter = parsed.positionals.first { parameters["meter"] = .string(meter) }
            if let text = parsed.values["limit"] {
                guard let limit = Int64(text), limit > 0 else { throw usage("--limit must be a positive number, not '\(text)'", help) }
                parameters["limit"] = .int(limit)
            }
            let reply = try await Daemon.connect(parsed).call("ListSyncSessions", parameters)
            if JSONOutput.wanted(parsed) {
                writeStdout(JSONValue.object(reply).prettySerialized() + "\n")
                return ExitCode.success
            }
            let sessions = try Daemon.decode(Wire.SessionsReply.self, reply, method: "ListSyncSessions").sessions
            if sessions.isEmpty {
                writeStdout("No sync sessions recorded yet.\n")
                return ExitCode.success
            }
            let rows: [[String]] = sessions.map { s in
                let started = s.started.epochMillis
                let duration = s.ended.map { "\(max(0, $0.epochMillis - started) / 1000) s" } ?? "-"
                return [
                    localTimeText(epochMillis: started), s.meter,
                    s.result.rawValue + (s.reset ? " (meter reset)" : ""), duration,
                    "\(s.received)" + (s.expected.map { "/\($0)" } ?? ""),
                    "\(s.stored)", "\(s.duplicates)", s.clockSet.map(clockSetText) ?? "", s.error ?? "",
                ]
            }
            writeStdout(table(["Started", "Meter", "Result", "Took", "Received", "New", "Dup", "Clock", "Error"], rows))
            return ExitCode.success
        }
    }
}

/// "clock set (was 10 min 5 s fast, now 0 s)": a meter clock a sync set, for sessions and status.
func clockSetText(_ clock: Wire.ClockSet) -> String {
    func skew(_ seconds: Int64) -> String {
        let size = abs(seconds)
        let text = size >= 3600 ? "\(size / 3600) h \(size % 3600 / 60) min" : size >= 60 ? "\(size / 60) min \(size % 60) s" : "\(size) s"
        return seconds == 0 ? "0 s" : text + (seconds > 0 ? " fast" : " slow")
    }
    let before = clock.skewBeforeSeconds.map { "was " + skew($0) } ?? "was unset"
    let after = clock.skewAfterSeconds.map { ", now " + skew($0) } ?? ""
    return "clock set (\(before)\(after))"
}
