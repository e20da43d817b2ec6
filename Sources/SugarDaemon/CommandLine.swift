import Glibc
import HealthDataSync
import SugarAPI

/// What `sugard`'s command line asked for.
public enum DaemonCommand: Equatable, Sendable {
    case run(DaemonConfig, configFile: String?)
    case help
    case version
}

public enum DaemonCommandLine {
    public static let usage = """
        OVERVIEW: sugard - Bluetooth LE blood-glucose meter gateway

        Finds meters through BlueZ, downloads their records with the Glucose Profile, stores every
        reading once in SQLite and serves the status over a Varlink socket (see sugarctl).

        USAGE: sugard [--config FILE] [--state-dir DIR] [--socket PATH] [--replay CAPTURE]... [--demo]
                      [--log-level LEVEL]

        OPTIONS:
          --config FILE      Config file (default /etc/sugard/sugard.conf when it exists; with
                             --demo, none unless given).
          --state-dir DIR    Directory for the database (default $STATE_DIRECTORY or /var/lib/sugard;
                             with --demo, ~/.local/state/sugard-demo).
          --socket PATH      Varlink socket (default $RUNTIME_DIRECTORY/io.sugard.HealthDataSync or
                             /run/sugard/io.sugard.HealthDataSync; with --demo, in the demo folder).
          --replay CAPTURE   Play a btsnoop capture as a meter instead of using BlueZ (repeatable).
          --demo             Run a simulated meter that pairs, syncs and keeps taking readings; needs
                             no Bluetooth and no system service.
          --log-level LEVEL  error, warning, notice, info (default) or debug. Reading values are only
                             logged at debug.
          --version          Print the version.
          -h, --help         Show this help.

        SIGNALS: SIGTERM/SIGINT stop gracefully; SIGHUP reloads the config file.
        """

    /// Parses arguments (without the program name) over the environment's defaults and the config
    /// file. Precedence: built-in defaults, then the config file, then flags.
    public static func parse(_ arguments: [String], environment: [String: String]) throws(ConfigError) -> DaemonCommand {
        var flags: [(key: String, value: String)] = []
        var configFile: String?
        var demo = false
        var index = 0
        func value(for flag: String) throws(ConfigError) -> String {
            index += 1
            guard index < arguments.count, !arguments[index].hasPrefix("--") else {
                throw ConfigError("\(flag) needs a value")
            }
            return arguments[index]
        }
        while index < arguments.count {
            let arg = arguments[index]
            let (name, inline) = ConfigFile.splitFlag(arg)
            func flagValue() throws(ConfigError) -> String {
                if let inline { return inline }
                return try value(for: name)
            }
            switch name {
            case "-h", "--help": return .help
            case "--version": return .version
            case "--demo": demo = true
            case "--config": configFile = try flagValue()
            case "--state-dir": flags.append(("state_dir", try flagValue()))
            case "--socket": flags.append(("socket", try flagValue()))
            case "--replay": flags.append(("replay", try flagValue()))
            case "--log-level": flags.append(("log_level", try flagValue()))
            default: throw ConfigError("unknown option \"\(arg)\" (see sugard --help)")
            }
            index += 1
        }

        var config: DaemonConfig
        if demo {
            let dir = DefaultPaths.demoDirectory(environment: environment)
            config = DaemonConfig(stateDirectory: dir, socketPath: dir + "/" + DefaultPaths.socketName)
            config.demo = true
        } else {
            let state = environment["STATE_DIRECTORY"].flatMap { firstPath($0) } ?? DefaultPaths.systemStateDirectory
            let runtime = environment["RUNTIME_DIRECTORY"].flatMap { firstPath($0) } ?? DefaultPaths.systemRuntimeDirectory
            config = DaemonConfig(stateDirectory: state, socketPath: runtime + "/" + DefaultPaths.socketName)
            if configFile == nil, access(DefaultPaths.systemConfigFile, F_OK) == 0 {
                configFile = DefaultPaths.systemConfigFile
            }
        }
        if let file = configFile {
            guard let text = try ConfigFile.readText(file) else { throw ConfigError(file: file, "no such file") }
            try config.apply(fileText: text, file: file)
        }
        // Flags win over the file; --replay flags replace the file's list.
        if flags.contains(where: { $0.key == "replay" }) { config.replay = [] }
        for (key, value) in flags {
            do {
                try config.apply(key: key, value: value)
            } catch {
                throw ConfigError("--\(key.replacingUnderscores()): \(error.message)")
            }
        }
        return .run(config, configFile: configFile)
    }

    /// systemd passes colon-separated lists in STATE_DIRECTORY/RUNTIME_DIRECTORY; use the first.
    private static func firstPath(_ value: String) -> String? {
        let first = value.split(separator: ":").first.map(String.init)
        return (first?.isEmpty ?? true) ? nil : first
    }
}

extension String {
    fileprivate func replacingUnderscores() -> String { String(self.map { $0 == "_" ? "-" : $0 }) }
}
