#if canImport(Glibc)
import Glibc
#endif
import JSON
import SugarWire
import SystemIO
import Varlink

/// `sugarctl status [--json] [--unit U]`: the daemon's state at a glance (the default command).
enum StatusCommand {
    static let help = CommandHelp(
        name: "status",
        abstract: "Show the last reading, each meter's state, the adapter and recent errors (the default).",
        usage: "status [--json] [--unit mgdl|mmol] [--socket <path>]",
        options: [("--json", "Print the GetStatus reply as JSON."), DaemonOptions.unitHelp] + DaemonOptions.help,
        discussion: """
            With sugard-forward running, an Alerts line shows the alerts firing ("Alerts: none", \
            "Alerts: 1 firing: low for anna since 08:12"; "alerts" in --json; details: sugarctl alerts) and a Sinks block shows each sink (MQTT and every Nightscout site, with its \
            person): connected, retrying or failing (with the reason), readings pending and the last delivery (its socket: $SUGARD_FORWARD_SOCKET, else \
            /run/sugard-forward/io.sugard.Forward; "sinks" in --json).
            Exit status: 0 ok, 1 failure, 64 usage, 69 sugard not reachable, 77 permission denied.
            """
    )

    static let subcommand = Subcommand(help: help) { arguments in await run(arguments) }

    static func run(_ arguments: [String]) async -> Int32 {
        await runDaemonCommand(arguments, help: help, flags: [JSONOutput.flag], values: ["unit"]) { parsed throws(CommandFailure) in
            let daemon = try Daemon.connect(parsed)
            var reply = try await daemon.call("GetStatus")
            let sinks = await self.sinks()
            // Readings waiting for an attribution (a daemon without people records has no
            // GetPeopleStatus); the text counts them, --json stays GetStatus's reply (GetPeopleStatus has it).
            let unattributed = (try? await daemon.call("GetPeopleStatus", as: Wire.PeopleStatusReply.self))?.unattributed
            if JSONOutput.wanted(parsed) {
                if !sinks.json.isEmpty { reply["sinks"] = .array(sinks.json) }
                if let alerts = sinks.alerts { reply["alerts"] = alerts.json }
                writeStdout(JSONValue.object(reply).prettySerialized() + "\n")
                return ExitCode.success
            }
            let status = try Daemon.decode(Wire.StatusReply.self, reply, method: "GetStatus")
            let unit = try displayUnit(parsed, daemonDefault: status.unit, help: help)
            writeStdout(
                self.render(
                    status.state, unit: unit, color: Terminal.colorWanted(), people: status.people, unattributed: unattributed)
                    + self.renderSinks(sinks))
            return ExitCode.success
        }
    }

    /// The latest integrity check, one line: `ok 2 min ago (quick_check after an unclean stop, 1.20 s)`.
    static func checkText(_ check: Wire.StorageCheck?) -> String {
        guard let check else { return "none since sugard started (`sugarctl check` runs one)" }
        let pragma = check.kind == .quick ? "quick_check" : "integrity_check"
        let why: String
        switch check.reason {
        case .uncleanShutdown: why = "after an unclean stop"
        case .scheduled: why = "weekly"
        case .requested: why = "asked for"
        }
        let took = check.durationMillis.map { ", " + CheckCommand.seconds($0) } ?? ""
        let when = ageText(epochMillis: (check.finishedAt ?? check.startedAt).epochMillis)
        switch check.result {
        case .running: return "running since \(ageText(epochMillis: check.startedAt.epochMillis)) (\(pragma) \(why))"
        case .ok: return "ok \(when) (\(pragma) \(why)\(took))"
        case .damaged: return "DAMAGED \(when): \(check.problemCount) problem(s) (\(pragma) \(why)\(took)); see `sugarctl check`"
        case .failed: return "could not run \(when): \(check.message ?? "unknown reason")"
        }
    }

    /// The status screen for a `State` value.
    static func render(
        _ state: Wire.State, unit: Wire.Unit, color: Bool = false, people: WireMap<String>? = nil, unattributed: Int64? = nil
    ) -> String {
        let paint = Terminal(enabled: color)
        var out = ""
        let daemon = state.daemon
        var head = "sugard \(daemon.version)"
        head += ", up " + ageText(epochMillis: daemon.startedAt.epochMillis).replacingSuffix(" ago", with: "")
        let storage = daemon.storage.status
        head += ", storage \(storage.rawValue)"
        if storage != .ok, let message = daemon.storage.error?.message { head += ": \(message)" }
        if storage != .ok { head = paint.red(head) }
        out += head + "\n\n"

        // The newest reading: value with unit, age, when and from which meter.
        var last = "none yet"
        if let reading = state.lastReading {
            let flags = reading.flags
            var value =
                glucoseText(mgdL: reading.glucose?.mgdL, mmolL: reading.glucose?.mmolL, unit: unit)
                ?? (flags.contains("hi") ? paint.red("HI") + " (above the meter's range)"
                    : flags.contains("lo") ? paint.red("LO") + " (below the meter's range)" : nil)
                ?? reading.ketoneMmolL.map { "ketone \(ReadingExport.formatted($0, digits: 1)) mmol/L" }
                ?? "no value"
            if flags.contains("controlSolution") { value += " [control solution]" }
            let millis = reading.instant.epochMillis
            value += ", \(ageText(epochMillis: millis)) (\(localTimeText(epochMillis: millis)))"
            let meter = state.meters.first { $0.id == reading.meter }
            value += ", \(meter.map { meterLabel($0.identity) } ?? reading.meter)"
            if let person = people?[reading.meter] { value += ", \(person)" }
            last = value
        }
        let adapter = state.adapter
        var adapterText = "none (no Bluetooth adapter found; check `bluetoothctl show`)"
        if adapter.present {
            adapterText = (adapter.name ?? "present") + ": "
            adapterText += adapter.powered ? "powered" : "powered off (`bluetoothctl power on`)"
            if adapter.discovering { adapterText += ", scanning" }
        }
        var syncText = state.sync.phase.rawValue
        if !state.sync.activeMeters.isEmpty {
            syncText += " (" + state.sync.activeMeters.joined(separator: ", ") + ")"
        }
        if let result = state.sync.lastResult {
            syncText += "; last: \(result.result.rawValue) \(ageText(epochMillis: result.at.epochMillis))"
        }
        var readingsText = "\(state.readingCount) stored"
        if let unattributed, unattributed > 0 {
            readingsText += "; \(unattributed) of shared meters wait for a person (sugarctl readings --unattributed)"
        }
        out += table(
            ["Last reading", last],
            [
                ["Readings", readingsText],
                ["Database", "\(daemon.storage.databaseId ?? "none open") (\(daemon.storage.path))"],
                ["Storage check", Self.checkText(daemon.storage.check)],
                ["Adapter", adapterText], ["Sync", syncText],
            ])

        out += "\nMeters\n"
        if state.meters.isEmpty { out += "  none known yet: switch a paired meter on near the adapter (see `sugarctl pair`)\n" }
        for meter in state.meters {
            let person = people?[meter.id]
            out += "  " + meterLabel(meter.identity) + (person.map { ", person \($0)" } ?? "") + "\n"
            out += "    " + self.meterLine(meter) + "\n"
        }

        // The view model keeps its recent errors as they happened; one that a later successful sync
        // put right is shown as resolved (plain, no hint), not as a current problem.
        let errors = state.errors.suffix(5)
        let current = errors.filter { self.resolvingSync(of: $0, in: state) == nil }
        if !current.isEmpty {
            out += "\n" + paint.red("Recent errors") + "\n"
            for error in current {
                let when = ageText(epochMillis: error.at.epochMillis)
                let meter = error.meter.map { " \($0)" } ?? ""
                out += "  \(when)\(meter): " + paint.red(error.message) + " [\(error.code)]\n"
                if let hint = error.hint { out += "    Hint: \(hint)\n" }
            }
        }
        let resolved = errors.compactMap { error in self.resolvingSync(of: error, in: state).map { (error, $0) } }
        if !resolved.isEmpty {
            out += "\nResolved errors\n"
            for (error, sync) in resolved {
                let meter = error.meter.map { " \($0)" } ?? ""
                out += "  \(ageText(epochMillis: error.at.epochMillis))\(meter): \(error.message) [\(error.code)]; "
                out += "resolved: sync \(sync.result.rawValue) \(ageText(epochMillis: sync.at.epochMillis))\n"
            }
        }
        return out
    }

    /// The successful sync after `error` that resolved it: its meter's last sync (for an error
    /// without a meter, the last sync of any meter), when that succeeded or found nothing new after
    /// the error happened. Nil while the error still stands.
    static func resolvingSync(of error: Wire.ReportedError, in state: Wire.State) -> Wire.LastSync? {
        let last: Wire.LastSync?
        if let id = error.meter {
            last = state.meters.first { $0.id == id }?.lastSync
        } else {
            last = state.sync.lastResult
        }
        guard let last, SyncCommand.successfulResults.contains(last.result), last.at.epochMillis > error.at.epochMillis
        else { return nil }
        return last
    }

    /// What sugard-forward reports (`io.sugard.Forward.GetStatus`): its sinks; that it does not
    /// answer when its socket is there; nothing without a forwarder.
    struct Forwarder {
        var sinks: [Wire.ForwardSink] = []
        /// The sinks as sent, for `--json` (with an "unreachable" entry when it does not answer).
        var json: [JSONValue] = []
        /// Why the forwarder's socket does not answer.
        var unreachable: String?
        /// The alerts firing (nil: no forwarder, or one without alerts).
        var alerts: Wire.ForwardAlertsSummary?

        /// The entry `--json` shows for a forwarder that does not answer.
        static let unreachableName = "mqtt"
    }

    static func sinks() async -> Forwarder {
        guard let path = DefaultPaths.forwardStatusSocket(environment: environment()) else { return Forwarder() }
        do {
            let client = try VarlinkClient(socketPath: path)
            defer { client.close() }
            let reply = try await client.call("io.sugard.Forward.GetStatus")
            let status = try Wire.ForwardStatusReply(json: .object(reply))
            return Forwarder(sinks: status.sinks, json: reply["sinks"]?.arrayValue ?? [], alerts: status.alerts)
        } catch {
            let reason = "sugard-forward at \(path): \(error)"
            return Forwarder(
                json: [["name": .string(Forwarder.unreachableName), "state": "unreachable", "reason": .string(reason)]],
                unreachable: reason)
        }
    }

    /// "Sinks" with one line per sink: state (and why), pending readings, last delivery.
    static func renderSinks(_ forwarder: Forwarder) -> String {
        if let reason = forwarder.unreachable { return "\nSinks\n  \(Forwarder.unreachableName): unreachable (\(reason))\n" }
        let alerts = forwarder.alerts.map { "\n" + AlertsCommand.statusLine($0) } ?? ""
        guard !forwarder.sinks.isEmpty else { return alerts }
        var out = alerts + "\nSinks\n"
        for sink in forwarder.sinks {
            var line = "  \(sink.name)"
            if let address = sink.broker ?? sink.url { line += " \(address)" }
            if let person = sink.person { line += " for \(person)" }
            line += ": \(sink.state.rawValue)"
            if let reason = sink.reason { line += " (\(reason))" }
            line += ", \(sink.pending) pending"
            line += ", last delivery " + (sink.lastDeliveryMillis.map { ageText(epochMillis: $0) } ?? "never")
            if !sink.feedConnected, let reason = sink.feedReason {
                line += "\n    sugard's readings not reachable: \(reason)"
            }
            if let reset = sink.databaseReset {
                line += "\n    started over \(ageText(epochMillis: reset.atMillis)): sugard's database changed from "
                    + "\(reset.previousDatabaseId) to \(reset.databaseId) (every reading of the new one is delivered)"
            }
            out += line + "\n"
        }
        return out
    }

    /// "link disconnected, sync receiving 3/10, paired, last sync success 5 min ago (3 new)".
    static func meterLine(_ meter: Wire.Meter) -> String {
        var parts: [String] = []
        parts.append("link \(meter.link.rawValue)")
        var sync = "sync \(meter.sync.rawValue)"
        if meter.sync == .queued { sync += " (waiting for a connection slot, max_connections)" }
        if meter.sync != .idle, meter.progress.received > 0 {
            sync += " \(meter.progress.received)" + (meter.progress.expected.map { "/\($0)" } ?? "")
        }
        parts.append(sync)
        if meter.pairing != .unknown { parts.append(meter.pairing.rawValue) }
        if let last = meter.lastSync {
            var text = "last sync \(last.result.rawValue)"
            text += " \(ageText(epochMillis: last.at.epochMillis))"
            text += " (\(last.stored) new)"
            if last.reset { text += ", meter reset: its memory was read again into a new epoch" }
            if let clock = last.clockSet { text += ", " + clockSetText(clock) }
            parts.append(text)
        } else {
            parts.append("never synced")
        }
        if let next = meter.nextAttempt {
            parts.append("next attempt \(localTimeText(epochMillis: next.epochMillis))")
        }
        var line = parts.joined(separator: ", ")
        if let error = meter.lastError {
            line += "\n    last error: \(error.message)"
            if let hint = error.hint { line += "\n    Hint: \(hint)" }
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
