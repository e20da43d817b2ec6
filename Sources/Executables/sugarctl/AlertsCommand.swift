import JSON
import SugarWire
import SystemIO
import Varlink

/// `sugarctl alerts [--json]`: sugard-forward's alerts, firing and recent, and its webhooks
/// (`io.sugard.Forward.GetAlerts`).
enum AlertsCommand {
    static let help = CommandHelp(
        name: "alerts",
        abstract: "Show the alerts sugard-forward has firing, the recent alert events and its webhooks.",
        usage: "alerts [--json]",
        options: [JSONOutput.help("GetAlerts' reply ({\"enabled\", \"active\", \"recent\", \"webhooks\"})")],
        discussion: """
            Read from sugard-forward's status socket ($SUGARD_FORWARD_SOCKET, else \
            /run/sugard-forward/io.sugard.Forward). The rules (low, urgent_low, high, sync_overdue, gateway_failed) \
            and their limits are set in forward.conf (see sugard-forward --help and docs/alerts.md). \
            Exit status: 0 ok, 64 usage, 69 sugard-forward not reachable (with --json: {"reason", "active": [], ...}).
            """
    )

    static let subcommand = Subcommand(help: help) { arguments in await run(arguments) }

    static func run(_ arguments: [String]) async -> Int32 {
        await runDaemonCommand(arguments, help: help, flags: [JSONOutput.flag], values: []) { parsed throws(CommandFailure) in
            guard parsed.positionals.isEmpty else { throw usage("Unexpected argument '\(parsed.positionals[0])'", help) }
            let json = JSONOutput.wanted(parsed)
            let reply: JSONObject
            do {
                reply = try await self.fetch()
            } catch {
                let reason = "\(error)"
                if json {
                    let empty: JSONValue = ["reason": .string(reason), "enabled": false, "active": [], "recent": [], "webhooks": []]
                    writeStdout(empty.prettySerialized() + "\n")
                    return 69
                }
                throw CommandFailure(69, "Error: \(reason)\n")
            }
            if json {
                writeStdout(JSONValue.object(reply).prettySerialized() + "\n")
                return ExitCode.success
            }
            do throws(WireError) {
                writeStdout(self.render(try Wire.ForwardAlertsReply(json: .object(reply))))
            } catch {
                throw CommandFailure(ExitCode.failure, "Error: sugard-forward sent an unexpected GetAlerts reply: \(error)\n")
            }
            return ExitCode.success
        }
    }

    struct Unreachable: Error, CustomStringConvertible {
        var description: String
    }

    static func fetch() async throws -> JSONObject {
        guard let path = DefaultPaths.forwardStatusSocket(environment: environment()) else {
            throw Unreachable(
                description: "sugard-forward is not running here (no \(DefaultPaths.systemForwardSocket); set SUGARD_FORWARD_SOCKET to its io.sugard.Forward socket)")
        }
        do {
            let client = try VarlinkClient(socketPath: path)
            defer { client.close() }
            return try await client.call("io.sugard.Forward.GetAlerts")
        } catch {
            throw Unreachable(description: "sugard-forward at \(path): \(error)")
        }
    }

    static func render(_ reply: Wire.ForwardAlertsReply) -> String {
        var out = reply.enabled ? "" : "Alerts are off (alerts = off in forward.conf).\n"
        if reply.active.isEmpty {
            out += "Firing: none\n"
        } else {
            out += "Firing\n"
            out += self.indent(table(
                ["RULE", "FOR", "SINCE", "MESSAGE"],
                reply.active.map { [$0.rule.rawValue, $0.subject, "\(localTimeText(epochMillis: $0.timeMillis)) (\(ageText(epochMillis: $0.timeMillis)))", $0.message] }))
        }
        if !reply.recent.isEmpty {
            out += "\nRecent\n"
            out += self.indent(table(
                ["TIME", "STATE", "RULE", "FOR", "MESSAGE"],
                reply.recent.suffix(20).map { [localTimeText(epochMillis: $0.timeMillis), $0.state.rawValue, $0.rule.rawValue, $0.subject, $0.message] }))
        }
        if !reply.webhooks.isEmpty {
            out += "\nWebhooks\n"
            for hook in reply.webhooks {
                var line = "  \(hook.name) \(hook.url) (\(hook.format)): \(hook.state.rawValue)"
                if let reason = hook.reason { line += " (\(reason))" }
                line += ", \(hook.pending) pending, last delivery " + (hook.lastDeliveryMillis.map { ageText(epochMillis: $0) } ?? "never")
                out += line + "\n"
            }
        }
        return out
    }

    private static func indent(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.isEmpty ? "" : "  " + $0 }.joined(separator: "\n")
    }

    /// The `sugarctl status` line: "Alerts: none" / "Alerts: 1 firing: low for anna since 08:12".
    static func statusLine(_ summary: Wire.ForwardAlertsSummary) -> String {
        guard summary.enabled else { return "Alerts: off\n" }
        guard !summary.active.isEmpty else { return "Alerts: none\n" }
        let parts = summary.active.map { "\($0.rule.rawValue) for \($0.subject) since \(self.clock($0.timeMillis))" }
        return "Alerts: \(summary.active.count) firing: \(parts.joined(separator: ", "))\n"
    }

    /// "08:12" today, else the local date and time.
    static func clock(_ millis: Int64) -> String {
        let text = localTimeText(epochMillis: millis)
        let today = localTimeText(epochMillis: wallClockMilliseconds())
        return text.prefix(10) == today.prefix(10) ? String(text.dropFirst(11)) : text
    }
}
