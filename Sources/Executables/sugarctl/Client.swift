// Talking to sugard: which socket, connecting, error → exit status, and formatting shared by the commands.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import GlucoseProfile
import JSON
import SugarWire
import SystemIO
import Varlink

extension ExitCode {
    /// EX_UNAVAILABLE: sugard is not running (nothing listens on the socket).
    static let unavailable: Int32 = 69
    /// EX_NOPERM: the socket or the method is not open to this user.
    static let noPermission: Int32 = 77

    /// Every status sugarctl exits with and what it means: `sugarctl --help` and sugarctl(1)'s EXIT
    /// STATUS come from this table.
    static let meanings: [(status: Int32, meaning: String)] = [
        (success, "ok"),
        (failure, "failure (a failed sync, an unknown meter, no readings for a report; stderr says why)"),
        (usage, "usage: bad arguments or options"),
        (dataError, "bad data: a malformed packet or an unreadable capture"),
        (unavailable, "sugard not reachable: not running, not answering within the timeout, or gone during a stream"),
        (noPermission, "permission denied (the socket's group, or the admin group for sync, pair, forget)"),
    ]

    /// "0 ok, 1 failure, 64 usage, ...": the short form of ``meanings``.
    static var summary: String {
        // Each meaning up to its explanation (after ':' or '(').
        self.meanings.map { "\($0.status) " + String($0.meaning.prefix { $0 != ":" && $0 != "(" }).trimmingSuffixSpaces }
            .joined(separator: ", ")
    }
}

/// A command that failed: the message for stderr and the exit status.
struct CommandFailure: Error {
    var status: Int32
    var message: String

    init(_ status: Int32, _ message: String) {
        self.status = status
        self.message = message
    }

    /// Prints the message and returns the status.
    func report() -> Int32 {
        writeStderr(self.message.hasSuffix("\n") ? self.message : self.message + "\n")
        return self.status
    }
}

/// Options every command that talks to the daemon takes.
enum DaemonOptions {
    static let values: Set<String> = ["socket", "timeout"]
    static let help: [(String, String)] = [
        ("--socket <path>", "The sugard socket (default: $SUGARD_SOCKET, else the system socket, else the demo's)."),
        ("--timeout <seconds>", "Give up (exit 69) when sugard does not answer within this long (default: $SUGARCTL_TIMEOUT, else 10)."),
    ]
    static let unitHelp = ("--unit <unit>", "Show values in mgdl or mmol (default: the daemon's configured unit).")
}

func environment() -> [String: String] { processEnvironment() }

/// A connection to sugard and the path it was opened on.
struct Daemon {
    let path: String
    let client: VarlinkClient
    /// How long connecting and each call may wait for the daemon.
    let timeout: Duration

    static let interface = "io.sugard.HealthDataSync."

    /// `--socket`, else `SUGARD_SOCKET`, else the system socket when it exists, else the demo's.
    static func socketPath(_ parsed: ParsedArguments) -> String {
        if let path = parsed.values["socket"], !path.isEmpty { return path }
        return DefaultPaths.clientSocket(environment: environment())
    }

    /// `--timeout`, else `SUGARCTL_TIMEOUT`, else 10 s.
    static func timeout(_ parsed: ParsedArguments) throws(CommandFailure) -> Duration {
        guard let text = parsed.values["timeout"] ?? environment()["SUGARCTL_TIMEOUT"] else { return .seconds(10) }
        guard let seconds = Double(text), seconds > 0, seconds <= 86_400 else {
            throw CommandFailure(ExitCode.usage, "Error: --timeout (or SUGARCTL_TIMEOUT) must be a number of seconds above 0, not '\(text)'")
        }
        return .milliseconds(Int64((seconds * 1000).rounded(.up)))
    }

    static func connect(_ parsed: ParsedArguments) throws(CommandFailure) -> Daemon {
        let path = self.socketPath(parsed)
        let timeout = try self.timeout(parsed)
        do throws(VarlinkClientError) {
            let client = try VarlinkClient(socketPath: path, maxMessageBytes: 256 << 20, timeout: timeout)
            return Daemon(path: path, client: client, timeout: timeout)
        } catch {
            throw Self.failure(error, path: path)
        }
    }

    /// A second connection to the same socket (a `more` call keeps the first one busy).
    func reconnect() throws(CommandFailure) -> Daemon {
        do throws(VarlinkClientError) {
            return Daemon(path: self.path, client: try VarlinkClient(socketPath: self.path, timeout: self.timeout), timeout: self.timeout)
        } catch {
            throw Self.failure(error, path: self.path)
        }
    }

    func call(_ method: String, _ parameters: JSONObject = [:]) async throws(CommandFailure) -> JSONObject {
        do throws(VarlinkClientError) {
            return try await self.client.call(Self.interface + method, parameters)
        } catch {
            throw Self.failure(error, path: self.path)
        }
    }

    /// Calls and reads the reply as the interface's reply type `R`.
    func call<R: WireValue>(_ method: String, _ parameters: JSONObject = [:], as type: R.Type) async throws(CommandFailure) -> R {
        try Self.decode(R.self, try await self.call(method, parameters), method: method)
    }

    /// A reply read as the interface's reply type `R`; one that does not have that shape fails the command.
    static func decode<R: WireValue>(_ type: R.Type, _ reply: JSONObject, method: String) throws(CommandFailure) -> R {
        do throws(WireError) {
            return try R(json: .object(reply))
        } catch {
            throw self.unreadable(error, method: method)
        }
    }

    /// Stored readings (`ListReadings`' objects) read as ``Wire/Reading``s; a malformed one fails the command.
    static func readings(_ objects: [JSONObject], method: String) throws(CommandFailure) -> [Wire.Reading] {
        do throws(WireError) {
            return try Wire.Reading.list(objects)
        } catch {
            throw self.unreadable(error.within("readings"), method: method)
        }
    }

    /// The failure for a reply that does not have the interface's shape.
    static func unreadable(_ error: WireError, method: String) -> CommandFailure {
        CommandFailure(ExitCode.failure, "Error: sugard sent a \(method) reply this sugarctl cannot read: \(error)")
    }

    /// Calls with `more` and hands each reply to `body` (which returns false to stop).
    ///
    /// A stream may stay quiet for long (`watch`), so it has no reply timeout. Instead a second
    /// connection asks for `GetStatus` every `timeout`: when that goes unanswered (a stopped or wedged
    /// daemon), the stream is closed and the command fails with the timeout.
    ///
    /// With `window`, at most that many replies wait in sugarctl while `body` works: the rest stay
    /// in the daemon, which reads the next page only once these are taken (a paged export stays
    /// flat in memory at any size). The connection is then busy until the stream ends.
    func stream(
        _ method: String, _ parameters: JSONObject = [:], window: Int? = nil,
        _ body: (JSONObject) async throws(CommandFailure) -> Bool
    ) async throws(CommandFailure) {
        if let window {
            try await self.stream(method, parameters, window: window, decoding: { reader in
                guard case .object(let object) = try reader.readValue() else { throw reader.error("reply parameters are not an object") }
                return object
            }, body)
            return
        }
        let monitor = Task { await self.livenessFailure() }
        defer { monitor.cancel() }
        do {
            for try await reply in self.client.callMore(Self.interface + method, parameters) {
                if try await body(reply) == false { return }
            }
        } catch let failure as CommandFailure {
            throw failure
        } catch let error as VarlinkClientError {
            monitor.cancel()
            if let dead = await monitor.value { throw dead }
            throw Self.failure(error, path: self.path)
        } catch {
            throw CommandFailure(ExitCode.failure, "Error: \(error)")
        }
    }

    /// ``stream(_:_:window:_:)`` with a window, each reply's parameters read by `decode` straight
    /// from the message bytes on the connection's reader thread (no ``JSONValue`` tree; the next
    /// reply is decoded while `body` works on this one). A reply `decode` cannot read fails the command.
    func stream<T: Sendable>(
        _ method: String, _ parameters: JSONObject, window: Int, decoding decode: @escaping @Sendable (inout JSONReader) throws -> T,
        _ body: (T) async throws(CommandFailure) -> Bool
    ) async throws(CommandFailure) {
        let monitor = Task { await self.livenessFailure() }
        defer { monitor.cancel() }
        do {
            for try await reply in self.client.callMore(Self.interface + method, parameters, window: window, decoding: decode) {
                if try await body(reply) == false { return }
            }
        } catch let failure as CommandFailure {
            throw failure
        } catch let error as VarlinkClientError {
            monitor.cancel()
            if let dead = await monitor.value { throw dead }
            throw Self.failure(error, path: self.path)
        } catch {
            throw CommandFailure(ExitCode.failure, "Error: \(error)")
        }
    }

    /// ``stream(_:_:_:)`` with each reply read as the interface's reply type `R`.
    func stream<R: WireValue>(
        _ method: String, _ parameters: JSONObject = [:], as type: R.Type, window: Int? = nil,
        _ body: (R) async throws(CommandFailure) -> Bool
    ) async throws(CommandFailure) {
        try await self.stream(method, parameters, window: window) { reply throws(CommandFailure) in
            try await body(try Self.decode(R.self, reply, method: method))
        }
    }

    /// Probes the daemon until cancelled (nil) or until a probe times out: then closes the stream's
    /// connection and returns the failure to report.
    private func livenessFailure() async -> CommandFailure? {
        while true {
            do {
                try await Task.sleep(for: self.timeout)
            } catch {
                return nil
            }
            do throws(VarlinkClientError) {
                let probe = try VarlinkClient(socketPath: self.path, timeout: self.timeout)
                defer { probe.close() }
                _ = try await probe.call(Self.interface + "GetStatus")
            } catch {
                if Task.isCancelled { return nil }
                guard case .timedOut = error else { continue }
                self.client.close()
                return Self.failure(error, path: self.path)
            }
        }
    }

    /// The exit status and message for a failed call.
    static func failure(_ error: VarlinkClientError, path: String) -> CommandFailure {
        switch error {
        case .cannotConnect(_, let code):
            let why = code == ENOENT ? "no socket at \(path)" : "nothing answers on \(path)"
            return CommandFailure(
                ExitCode.unavailable,
                """
                Error: sugard is not running (\(why)).
                Start the service with `systemctl start sugard` (or try the demo: `sugard --demo`).
                (Use --socket PATH or SUGARD_SOCKET to talk to a daemon elsewhere.)
                """)
        case .permissionDenied:
            return CommandFailure(
                ExitCode.noPermission,
                """
                Error: permission denied opening \(path).
                The socket is open to root and its group: add yourself to it (e.g. `sudo usermod -aG sugard $USER`, \
                then log in again), or run the command with sudo.
                """)
        case .remote(let remote):
            return self.failure(remote)
        case .disconnected:
            // The daemon went away mid-call or mid-stream (stopped, killed, restarting): it is not
            // reachable any more, as when it was not running at all.
            return CommandFailure(
                ExitCode.unavailable,
                """
                Error: sugard closed the connection on \(path) before it was done (it stopped, crashed or is restarting).
                Check `systemctl status sugard`, then run the command again.
                """)
        case .protocolViolation(let reason):
            return CommandFailure(ExitCode.failure, "Error: sugard sent something unexpected: \(reason)")
        case .closed:
            return CommandFailure(ExitCode.failure, "Error: the connection was closed.")
        case .timedOut(let limit):
            return CommandFailure(
                ExitCode.unavailable,
                """
                Error: sugard did not answer within \(VarlinkClientError.seconds(limit)) on \(path) (it may be stopped, wedged or overloaded).
                Check `systemctl status sugard`; use --timeout SECONDS to wait longer.
                """)
        }
    }

    static func failure(_ error: VarlinkError) -> CommandFailure {
        let failure: Wire.Failure
        do throws(WireError) {
            guard let known = try Wire.Failure(name: error.name, parameters: error.parameters) else {
                // Not an error of io.sugard.HealthDataSync (org.varlink.service.*, another interface's
                // parameters): its name says what happened, with its message when it has one.
                let message = error.parameters["message"]?.stringValue
                return CommandFailure(ExitCode.failure, "Error: sugard replied \(error.name)\(message.map { ": " + $0 } ?? "")")
            }
            failure = known
        } catch {
            return CommandFailure(ExitCode.failure, "Error: sugard sent an error reply this sugarctl cannot read: \(error)")
        }
        switch failure {
        case .permissionDenied(let method, let message):
            return CommandFailure(
                ExitCode.noPermission,
                """
                Error: permission denied to call \(method). \(message ?? "")
                Syncing, pairing and forgetting meters needs root or the admin group (admin_group in sugard.conf); \
                reading needs the socket group.
                """)
        case .invalidParameter(let parameter, let message):
            return CommandFailure(ExitCode.usage, "Error: invalid \(parameter): \(message ?? "the daemon refused the value.")")
        case .meterNotFound(let meter, _):
            return CommandFailure(ExitCode.failure, "Error: no meter \(meter) is known. See `sugarctl meters`.")
        case .personNotFound(let person, _):
            return CommandFailure(
                ExitCode.failure, "Error: no person named \(person) is known. See `sugarctl people list`, or add them with `sugarctl people add`.")
        case .adapterUnavailable(let message):
            return CommandFailure(
                ExitCode.failure,
                "Error: no Bluetooth adapter is available. \(message ?? "")\nCheck `bluetoothctl show` and `rfkill list`.")
        case .syncInProgress(_, let message):
            return CommandFailure(ExitCode.failure, "Error: a sync is already running. \(message ?? "") Try again when it is done.")
        case .pairingFailed(_, let message):
            return CommandFailure(
                ExitCode.failure, "Error: pairing failed: \(message ?? "the meter refused.")\nRun `sugarctl pair` again to retry.")
        case .syncFailed(_, let message):
            return CommandFailure(ExitCode.failure, "Error: the sync failed: \(message ?? "unknown reason").")
        case .storageError(_, let message):
            return CommandFailure(ExitCode.failure, "Error: sugard's database failed: \(message ?? "unknown reason").")
        case .slowConsumer:
            return CommandFailure(ExitCode.failure, "Error: this client fell too far behind and was dropped; run the command again.")
        case .shuttingDown:
            return CommandFailure(ExitCode.unavailable, "Error: sugard is shutting down.")
        case .invalidDatabase(let message):
            return CommandFailure(ExitCode.dataError, "Error: not a usable sugard database: \(message)\nNothing was changed.")
        }
    }
}

/// Runs a daemon command body, turning usage errors and failures into exit statuses.
func runDaemonCommand(
    _ arguments: [String], help: CommandHelp, flags: Set<String>, values: Set<String>,
    _ body: (ParsedArguments) async throws(CommandFailure) -> Int32
) async -> Int32 {
    let parsed: ParsedArguments
    do throws(UsageError) {
        parsed = try ParsedArguments(arguments, flags: flags, valueOptions: values.union(DaemonOptions.values))
    } catch {
        return usageFailure(error, help)
    }
    if parsed.helpRequested {
        writeStdout(help.render())
        return ExitCode.success
    }
    do throws(CommandFailure) {
        return try await body(parsed)
    } catch {
        if error.status == ExitCode.usage && error.message.hasPrefix("Usage:") {
            writeStderr(error.message)
            return error.status
        }
        return error.report()
    }
}

/// A usage failure from inside a command body.
func usage(_ message: String, _ help: CommandHelp) -> CommandFailure {
    CommandFailure(ExitCode.usage, "Error: \(message)\n" + help.shortUsage())
}

// MARK: Units and times

/// `--unit`, else the daemon's configured unit, else mg/dL.
func displayUnit(_ parsed: ParsedArguments, daemonDefault: Wire.Unit?, help: CommandHelp) throws(CommandFailure) -> Wire.Unit {
    if let text = parsed.values["unit"] {
        guard let unit = Wire.Unit(text: text) else { throw usage("--unit must be mgdl or mmol, not '\(text)'", help) }
        return unit
    }
    return daemonDefault ?? .mgdl
}

/// "151 mg/dL (8.4 mmol/L)": the chosen unit first, the other in brackets.
func glucoseText(mgdL: Double?, mmolL: Double?, unit: Wire.Unit) -> String? {
    guard let main = unit.format(mgdL: mgdL, mmolL: mmolL) else { return nil }
    let other: Wire.Unit = unit == .mgdl ? .mmol : .mgdl
    let second = other.format(mgdL: mgdL, mmolL: mmolL).map { " (\($0) \(other.symbol))" } ?? ""
    return "\(main) \(unit.symbol)\(second)"
}

/// "just now", "5 min ago", "3 h ago", "2 days ago".
func ageText(epochMillis: Int64, now: Int64 = wallClockMilliseconds()) -> String {
    let seconds = (now - epochMillis) / 1000
    if seconds < -60 { return "in the future (check the clocks)" }
    if seconds < 10 { return "just now" }
    if seconds < 60 { return "\(seconds) s ago" }
    if seconds < 3600 { return "\(seconds / 60) min ago" }
    if seconds < 48 * 3600 {
        let minutes = seconds % 3600 / 60
        return minutes == 0 || seconds >= 6 * 3600 ? "\(seconds / 3600) h ago" : "\(seconds / 3600) h \(minutes) min ago"
    }
    return "\(seconds / 86_400) days ago"
}

/// "2024-03-31 08:00" in this machine's local time zone.
func localTimeText(epochMillis: Int64) -> String {
    var seconds = time_t(epochMillis / 1000)
    var parts = tm()
    guard localtime_r(&seconds, &parts) != nil else { return CivilCalendar.isoUTC(epochMillis: epochMillis) }
    func pad(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
    return "\(parts.tm_year + 1900)-\(pad(parts.tm_mon + 1))-\(pad(parts.tm_mday)) \(pad(parts.tm_hour)):\(pad(parts.tm_min))"
}

extension String {
    fileprivate var trimmingSuffixSpaces: String {
        var text = self
        while text.last == " " { text.removeLast() }
        return text
    }
}

/// This machine's zone as `localtime` names it now ("CET", "UTC").
func localZoneName() -> String {
    var seconds = time_t(wallClockMilliseconds() / 1000)
    var parts = tm()
    guard localtime_r(&seconds, &parts) != nil, let name = parts.tm_zone else { return "local" }
    return String(cString: name)
}

/// An instant's local time and age: "2024-03-31 08:00 (5 min ago)".
func instantText(_ instant: Wire.Instant?) -> String? {
    guard let millis = instant?.epochMillis else { return nil }
    return "\(localTimeText(epochMillis: millis)) (\(ageText(epochMillis: millis)))"
}

/// A time argument: an ISO 8601 instant or date (passed on), `now`, or an age such as `30m`, `24h`, `7d`.
func timeArgument(_ text: String, option: String, help: CommandHelp) throws(CommandFailure) -> String {
    if text == "now" { return CivilCalendar.isoUTC(epochMillis: wallClockMilliseconds()) }
    if CivilCalendar.parseISOInstant(text) != nil { return text }
    let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800]
    if let last = text.last, let scale = units[last], let amount = Int64(text.dropLast()), amount >= 0 {
        return CivilCalendar.isoUTC(epochMillis: wallClockMilliseconds() - amount * scale * 1000)
    }
    throw usage(
        "--\(option) must be an ISO 8601 time with a zone (2024-03-31T06:00:00Z), a date (2024-03-31) or an age (30m, 24h, 7d), not '\(text)'",
        help)
}

/// Left-aligned columns separated by two spaces.
func table(_ header: [String], _ rows: [[String]]) -> String {
    var widths = header.map(\.count)
    for row in rows {
        for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) }
    }
    func line(_ cells: [String]) -> String {
        var text = ""
        for (i, cell) in cells.enumerated() {
            text += i == cells.count - 1 ? cell : cell + String(repeating: " ", count: widths[i] - cell.count + 2)
        }
        return text + "\n"
    }
    return line(header) + rows.map(line).joined()
}

/// A meter's short label: "Roche Accu-Chek Guide (C0:26:DA:01:02:03)".
func meterLabel(_ identity: Wire.MeterIdentity) -> String {
    identity.displayName == identity.id ? identity.id : "\(identity.displayName) (\(identity.id))"
}
