import GlucoseProfile
import HealthDataSync
import ProcessKit
import SugarAPI
import SugarConfig

extension FuzzTargets {
    /// Feeds the config-file parser and the command-line parser.
    ///
    /// Input layout: the bytes before the first NUL are the config-file text (must be UTF-8, as the daemon
    /// requires); the rest, split at NULs, are command-line arguments (`--config` is dropped so the fuzzer
    /// never opens files).
    ///
    /// Checks: neither parser traps; a file error names the file and a line that exists; an accepted file
    /// rendered back to `key = "value"` lines parses to the same settings.
    public static func config(_ bytes: [UInt8]) throws(FuzzFailure) {
        func fail(_ message: String) -> FuzzFailure {
            FuzzFailure(target: "config", "\(message); input \(hexString(bytes))")
        }
        let split = bytes.split(separator: 0, maxSplits: 1, omittingEmptySubsequences: false)
        let fileBytes = split.first.map(Array.init) ?? []
        if let text = String(validating: fileBytes, as: UTF8.self) {
            var config = DaemonConfig(stateDirectory: "/var/lib/sugard", socketPath: "/run/sugard/io.sugard.HealthDataSync")
            do {
                try config.apply(fileText: text, file: "fuzz.conf")
                let rendered = render(config)
                var again = DaemonConfig(stateDirectory: "/unset", socketPath: "/unset")
                // Only plain values must survive quoting (see isPlain).
                let plain = isPlain(config)
                do {
                    try again.apply(fileText: rendered, file: "rendered.conf")
                } catch {
                    if plain { throw fail("accepted settings rendered as \(rendered.debugDescription) are rejected: \(error)") }
                }
                if again != config, plain {
                    throw fail("accepted settings rendered as \(rendered.debugDescription) read back differently")
                }
            } catch let error as ConfigError {
                // Count lines as the parser does: "\r\n" is one Character in Swift, so name it.
                let lines = text.split(
                    omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }
                ).count
                guard error.file == "fuzz.conf", let line = error.line, (1...lines).contains(line) else {
                    throw fail("file error \(error) does not name fuzz.conf and a line from 1 to \(lines)")
                }
                if error.message.isEmpty { throw fail("file error with an empty message") }
            } catch let error as FuzzFailure {
                throw error
            } catch {
                throw fail("unexpected error \(error)")
            }
        }

        if split.count == 2 {
            var arguments = split[1].split(separator: 0, omittingEmptySubsequences: false).map {
                String(decoding: $0, as: UTF8.self)
            }
            arguments.removeAll { $0 == "--config" || $0.hasPrefix("--config=") }
            let environment = ["STATE_DIRECTORY": "/var/lib/sugard:/x", "RUNTIME_DIRECTORY": "/run/sugard", "HOME": "/home/fuzz"]
            do {
                _ = try DaemonCommandLine.parse(arguments, environment: environment)
            } catch {
                if error.description.isEmpty { throw fail("command-line error with an empty message") }
            }
        }
    }

    /// The settings as a config file, every value quoted.
    private static func render(_ config: DaemonConfig) -> String {
        var lines: [String] = []
        func add(_ key: String, _ value: String?) {
            if let value { lines.append("\(key) = \"\(value)\"") }
        }
        add("state_dir", config.stateDirectory)
        add("socket", config.socketPath)
        add("socket_mode", String(config.socketMode, radix: 8))
        add("socket_group", config.socketGroup)
        add("admin_group", config.adminGroup)
        add("log_level", config.logLevel.name)
        for replay in config.replay { add("replay", replay) }
        add("demo", config.demo ? "true" : "false")
        add("demo_interval", String(config.demoInterval))
        add("adapter", config.adapter)
        add("cooldown_seconds", String(config.cooldownSeconds))
        add("timezone", config.timeZone)
        add("unit", config.unit.rawValue)
        add("max_connections", String(config.maxMeterConnections))
        add("max_socket_connections", String(config.maxSocketConnections))
        add("max_connections_per_uid", String(config.maxConnectionsPerUID))
        add("forwarder_user", config.forwarderUser ?? "")
        return lines.joined(separator: "\n")
    }

    /// True when every string setting is printable ASCII, so quoting it cannot merge with a neighbouring
    /// character into one grapheme (a combining mark after the quote would hide the quote from the parser).
    private static func isPlain(_ config: DaemonConfig) -> Bool {
        let strings = [config.stateDirectory, config.socketPath, config.socketGroup, config.adminGroup, config.adapter,
                       config.timeZone, config.forwarderUser].compactMap { $0 } + config.replay
        return strings.allSatisfy { $0.utf8.allSatisfy { (0x20...0x7E).contains($0) } }
    }
}
