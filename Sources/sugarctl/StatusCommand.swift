#if canImport(Glibc)
import Glibc
#endif
import JSON
import SugarAPI
import Varlink

/// `sugarctl status [--json] [--unit U]`: the daemon's state at a glance (the default command).
enum StatusCommand {
    static let help = CommandHelp(
        name: "status",
        abstract: "Show the last reading, each meter's state, the adapter and recent errors (the default).",
        usage: "status [--json] [--unit mgdl|mmol] [--socket <path>]",
        options: [("--json", "Print the GetStatus reply as JSON."), DaemonOptions.unitHelp] + DaemonOptions.help,
        discussion: """
            With sugard-forward running, a Sinks block shows each sink (MQTT and every Nightscout site, with its \
            person): connected, retrying or failing (with the reason), readings pending and the last delivery (its socket: $SUGARD_FORWARD_SOCKET, else \
            /run/sugard-forward/io.sugard.Forward; "sinks" in --json).
            Exit status: 0 ok, 1 failure, 64 usage, 69 sugard not reachable, 77 permission denied.
            """
    )

    static let subcommand = Subcommand(help: help) { arguments in await run(arguments) }

    static func run(_ arguments: [String]) async -> Int32 {
        await runDaemonCommand(arguments, help: help, flags: ["json"], values: ["unit"]) { parsed throws(CommandFailure) in
            let daemon = try Daemon.connect(parsed)
            var reply = try await daemon.call("GetStatus")
            let sinks = await self.sinks()
            if parsed.flags.contains("json") {
                if !sinks.isEmpty { reply["sinks"] = .array(sinks) }
                writeStdout(JSONValue.object(reply).prettySerialized() + "\n")
                return ExitCode.success
            }
            let unit = try displayUnit(parsed, daemonDefault: reply["unit"]?.stringValue, help: help)
            writeStdout(
                self.render(reply["state"] ?? .null, unit: unit, color: Terminal.colorWanted(), people: reply["people"])
                    + self.renderSinks(sinks))
            return ExitCode.success
        }
    }

    /// The status screen for a `State` value.
    static func render(_ state: JSONValue, unit: DisplayUnit, color: Bool = false, people: JSONValue? = nil) -> String {
        let paint = Terminal(enabled: color)
        var out = ""
        let daemon = state["daemon"]
        var head = "sugard \(daemon?["version"]?.stringValue ?? "?")"
        if let started = daemon?["startedAt"]?["epochMillis"]?.intValue {
            head += ", up " + ageText(epochMillis: started).replacingSuffix(" ago", with: "")
        }
        let storage = daemon?["storage"]?["status"]?.stringValue ?? "unknown"
        head += ", storage \(storage)"
        if storage != "ok", let message = daemon?["storage"]?["error"]?["message"]?.stringValue { head += ": \(message)" }
        if storage != "ok" { head = paint.red(head) }
        out += head + "\n\n"

        // The newest reading: value with unit, age, when and from which meter.
        var last = "none yet"
        if let reading = state["lastReading"], !reading.isNull {
            let flags = reading["flags"]?.arrayValue?.compactMap(\.stringValue) ?? []
            var value =
                glucoseText(mgdL: reading["glucose"]?["mgdL"]?.doubleValue, mmolL: reading["glucose"]?["mmolL"]?.doubleValue, unit: unit)
                ?? (flags.contains("hi") ? paint.red("HI") + " (above the meter's range)"
                    : flags.contains("lo") ? paint.red("LO") + " (below the meter's range)" : nil)
                ?? reading["ketoneMmolL"]?.doubleValue.map { "ketone \(ReadingExport.formatted($0, digits: 1)) mmol/L" }
                ?? "no value"
            if flags.contains("controlSolution") { value += " [control solution]" }
            if let millis = reading["instant"]?["epochMillis"]?.intValue {
                value += ", \(ageText(epochMillis: millis)) (\(localTimeText(epochMillis: millis)))"
            }
            let meterID = reading["meter"]?.stringValue ?? "?"
            let meter = state["meters"]?.arrayValue?.first { $0["id"]?.stringValue == meterID }
            value += ", \(meter.map(meterLabel) ?? meterID)"
            if let person = people?[meterID]?.stringValue { value += ", \(person)" }
            last = value
        }
        let count = state["readingCount"]?.intValue ?? 0
        let adapter = state["adapter"]
        var adapterText = "none (no Bluetooth adapter found; check `bluetoothctl show`)"
        if adapter?["present"] == true {
            adapterText = (adapter?["name"]?.stringValue ?? "present") + ": "
            adapterText += adapter?["powered"] == true ? "powered" : "powered off (`bluetoothctl power on`)"
            if adapter?["discovering"] == true { adapterText += ", scanning" }
        }
        var syncText = state["sync"]?["phase"]?.stringValue ?? "?"
        if let active = state["sync"]?["activeMeters"]?.arrayValue, !active.isEmpty {
            syncText += " (" + active.compactMap(\.stringValue).joined(separator: ", ") + ")"
        }
        if let result = state["sync"]?["lastResult"], !result.isNull {
            syncText += "; last: \(result["result"]?.stringValue ?? "?") \(result["at"]?["epochMillis"]?.intValue.map { ageText(epochMillis: $0) } ?? "")"
        }
        out += table(
            ["Last reading", last],
            [["Readings", "\(count) stored"], ["Adapter", adapterText], ["Sync", syncText]])

        out += "\nMeters\n"
        let meters = state["meters"]?.arrayValue ?? []
        if meters.isEmpty { out += "  none known yet: switch a paired meter on near the adapter (see `sugarctl pair`)\n" }
        for meter in meters {
            let person = (meter["id"]?.stringValue).flatMap { people?[$0]?.stringValue }
            out += "  " + meterLabel(meter) + (person.map { ", person \($0)" } ?? "") + "\n"
            out += "    " + self.meterLine(meter) + "\n"
        }

        let errors = state["errors"]?.arrayValue ?? []
        if !errors.isEmpty {
            out += "\n" + paint.red("Recent errors") + "\n"
            for error in errors.suffix(5) {
                let when = error["at"]?["epochMillis"]?.intValue.map { ageText(epochMillis: $0) } ?? ""
                let meter = error["meter"]?.stringValue.map { " \($0)" } ?? ""
                out += "  \(when)\(meter): " + paint.red(error["message"]?.stringValue ?? "") + " [\(error["code"]?.stringValue ?? "")]\n"
                if let hint = error["hint"]?.stringValue { out += "    Hint: \(hint)\n" }
            }
        }
        return out
    }

    /// The sinks sugard-forward reports (`io.sugard.Forward.GetStatus`); one "unreachable" entry
    /// when its socket is there but does not answer, none without a forwarder.
    static func sinks() async -> [JSONValue] {
        guard let path = DefaultPaths.forwardStatusSocket(environment: environment()) else { return [] }
        do {
            let client = try VarlinkClient(socketPath: path)
            defer { client.close() }
            return try await client.call("io.sugard.Forward.GetStatus")["sinks"]?.arrayValue ?? []
        } catch {
            return [["name": "mqtt", "state": "unreachable", "reason": .string("sugard-forward at \(path): \(error)")]]
        }
    }

    /// "Sinks" with one line per sink: state (and why), pending readings, last delivery.
    static func renderSinks(_ sinks: [JSONValue]) -> String {
        guard !sinks.isEmpty else { return "" }
        var out = "\nSinks\n"
        for sink in sinks {
            var line = "  \(sink["name"]?.stringValue ?? "sink")"
            if let address = sink["broker"]?.stringValue ?? sink["url"]?.stringValue { line += " \(address)" }
            if let person = sink["person"]?.stringValue { line += " for \(person)" }
            line += ": \(sink["state"]?.stringValue ?? "?")"
            if let reason = sink["reason"]?.stringValue { line += " (\(reason))" }
            if let pending = sink["pending"]?.intValue { line += ", \(pending) pending" }
            if sink["state"]?.stringValue != "unreachable" {
                line += ", last delivery " + (sink["lastDeliveryMillis"]?.intValue.map { ageText(epochMillis: $0) } ?? "never")
            }
            if sink["feedConnected"] == false, let reason = sink["feedReason"]?.stringValue {
                line += "\n    sugard's readings not reachable: \(reason)"
            }
            out += line + "\n"
        }
        return out
    }

    /// "link disconnected, sync receiving 3/10, paired, last sync success 5 min ago (3 new)".
    static func meterLine(_ meter: JSONValue) -> String {
        var parts: [String] = []
        parts.append("link \(meter["link"]?.stringValue ?? "?")")
        var sync = "sync \(meter["sync"]?.stringValue ?? "?")"
        if let received = meter["progress"]?["received"]?.intValue, meter["sync"]?.stringValue != "idle", received > 0 {
            sync += " \(received)" + (meter["progress"]?["expected"]?.intValue.map { "/\($0)" } ?? "")
        }
        parts.append(sync)
        if let pairing = meter["pairing"]?.stringValue, pairing != "unknown" { parts.append(pairing) }
        if let last = meter["lastSync"], !last.isNull {
            var text = "last sync \(last["result"]?.stringValue ?? "?")"
            if let millis = last["at"]?["epochMillis"]?.intValue { text += " \(ageText(epochMillis: millis))" }
            if let stored = last["stored"]?.intValue { text += " (\(stored) new)" }
            if last["reset"]?.boolValue == true { text += ", meter reset: its memory was read again into a new epoch" }
            parts.append(text)
        } else {
            parts.append("never synced")
        }
        if let millis = meter["nextAttempt"]?["epochMillis"]?.intValue {
            parts.append("next attempt \(localTimeText(epochMillis: millis))")
        }
        var line = parts.joined(separator: ", ")
        if let error = meter["lastError"], !error.isNull {
            line += "\n    last error: \(error["message"]?.stringValue ?? "")"
            if let hint = error["hint"]?.stringValue { line += "\n    Hint: \(hint)" }
        }
        return line
    }
}

extension String {
    func replacingSuffix(_ suffix: String, with replacement: String) -> String {
        self.hasSuffix(suffix) ? String(self.dropLast(suffix.count)) + replacement : self
    }
}

/// ANSI colour for a terminal: only when stdout is one, never with NO_COLOR (no-color.org) or TERM=dumb.
struct Terminal {
    var enabled: Bool

    static func colorWanted() -> Bool {
        let env = environment()
        if let noColor = env["NO_COLOR"], !noColor.isEmpty { return false }
        return isatty(1) == 1 && env["TERM"] != "dumb"
    }

    func red(_ text: String) -> String { self.enabled ? "\u{1B}[1;31m" + text + "\u{1B}[0m" : text }
}
