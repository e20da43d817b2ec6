import Glibc
import HealthDataSync
import ProcessKit
import SugarAPI
import SystemIO

/// What `sugard`'s command line asked for.
public enum DaemonCommand: Equatable, Sendable {
    /// Run the daemon; `configFile` is the file read (nil: none), which SIGHUP reads again.
    case run(DaemonConfig, configFile: String?)
    /// `-h`, `--help`: print ``DaemonCommandLine/usage``.
    case help
    /// `--version`: print the version.
    case version
    /// `--prepare-runtime-dir`: hand the socket's directory to `socket_group` (run as root).
    case prepareRuntimeDirectory(DaemonConfig)
    /// `--generate-man sugard|sugard.conf`: print a man page (roff) built from the tables.
    case manPage(String)
    /// `--print-example-config`: the commented sugard.conf example, from ``DaemonConfig/keys``.
    case exampleConfig
    /// `--print-config-reference`: docs/configuration.md's table of sugard.conf's keys.
    case configReference
}

/// `sugard`'s command line: its options, `--help` text and parsing.
public enum DaemonCommandLine {
    /// The group a secret in sugard's configuration is readable by, besides root (the fix
    /// ``ConfigFile/checkSecrets(fileText:file:serviceGroup:)`` names).
    public static let serviceGroup = DefaultPaths.daemonSecretGroup

    /// sugard's options: the one table `--help`, the man page and the tests read.
    public static let options: [(flag: String, argument: String?, help: String)] = [
        ("--config", "FILE", "Config file (default /etc/sugard/sugard.conf when it exists; with --demo, none unless given). Drop-ins FILE.d/*.conf are read after it, in lexical order."),
        ("--state-dir", "DIR", "Directory for the database (default $STATE_DIRECTORY or /var/lib/sugard; with --demo, ~/.local/state/sugard-demo)."),
        ("--socket", "PATH", "Varlink socket (default $RUNTIME_DIRECTORY/io.sugard.HealthDataSync or /run/sugard/io.sugard.HealthDataSync; with --demo, in the demo folder)."),
        ("--replay", "CAPTURE", "Play a btsnoop capture as a meter instead of using BlueZ (repeatable)."),
        ("--demo", nil, "Run a simulated meter that pairs, syncs and keeps taking readings; needs no Bluetooth and no system service."),
        ("--log-level", "LEVEL", "error, warning, notice, info (default) or debug. Reading values are only logged at debug."),
        ("--prepare-runtime-dir", nil, "Run as root before the daemon (the unit's ExecStartPre=+): give the socket's directory ($RUNTIME_DIRECTORY) to socket_group, setgid, so the socket gets that group although the daemon's user is not a member."),
        ("--print-example-config", nil, "Print the commented example sugard.conf (every key with its default), made from the key table."),
        ("--print-config-reference", nil, "Print the key table of sugard.conf as Markdown (docs/configuration.md)."),
        ("--version", nil, "Print the version."),
        ("-h, --help", nil, "Show this help."),
    ]

    /// What sugard does, in two lines (`--help` and the man page).
    public static let overview = """
        Finds meters through BlueZ, downloads their records with the Glucose Profile, stores every
        reading once in SQLite and serves the status over a Varlink socket (see sugarctl).
        """

    /// The signals sugard handles and what each does.
    public static let signals = "SIGTERM/SIGINT stop gracefully; SIGHUP reloads the config file and its drop-ins."

    /// The `--help` text: overview, usage, every option wrapped to 98 columns, signals.
    public static var usage: String {
        var lines = ["OVERVIEW: sugard - Bluetooth LE blood-glucose meter gateway", "", overview, "",
            "USAGE: sugard [--config FILE] [--state-dir DIR] [--socket PATH] [--replay CAPTURE]... [--demo]",
            "              [--log-level LEVEL]", "", "OPTIONS:"]
        let width = 21
        for option in options {
            let head = "  " + option.flag + (option.argument.map { " " + $0 } ?? "")
            let wrapped = wrap(option.help, width: 98 - width)
            if head.count >= width - 1 { lines.append(head) }
            for (i, text) in wrapped.enumerated() {
                let left = i == 0 && head.count < width - 1 ? head : ""
                lines.append(left + String(repeating: " ", count: max(1, width - left.count)) + text)
            }
        }
        lines += ["", "SIGNALS: " + signals]
        return lines.joined(separator: "\n")
    }

    /// Greedy word wrap.
    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var current = ""
        for word in text.split(separator: " ") {
            if !current.isEmpty, current.count + 1 + word.count > width {
                lines.append(current)
                current = ""
            }
            current += (current.isEmpty ? "" : " ") + word
        }
        if !current.isEmpty { lines.append(current) }
        return lines
    }

    /// Parses arguments (without the program name) over the environment's defaults and the config
    /// file. Precedence: built-in defaults, then the config file, then flags.
    public static func parse(_ arguments: [String], environment: [String: String]) throws(ConfigError) -> DaemonCommand {
        var flags: [(key: String, value: String)] = []
        var configFile: String?
        var demo = false
        var prepare = false
        var index = 0
        /// The next argument as the value of `flag`; throws when there is none or it is another flag.
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
            /// The current flag's value: inline (`--flag=value`) or the next argument.
            func flagValue() throws(ConfigError) -> String {
                if let inline { return inline }
                return try value(for: name)
            }
            switch name {
            case "-h", "--help": return .help
            case "--version": return .version
            case "--generate-man": return .manPage(try flagValue())
            case "--print-example-config": return .exampleConfig
            case "--print-config-reference": return .configReference
            case "--prepare-runtime-dir": prepare = true
            case "--demo": demo = true
            case "--config": configFile = try flagValue()
            default:
                // The flags that set a config key, from the key table.
                guard let key = DaemonConfig.keys.first(where: { $0.flag == name }) else {
                    throw ConfigError("unknown option \"\(arg)\" (see sugard --help)")
                }
                flags.append((key.key, try flagValue()))
            }
            index += 1
        }

        var config: DaemonConfig
        var secretTexts: [(file: String, text: String)] = []
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
            secretTexts.append((file, text))
        }
        // Drop-ins (`<config>.d/*.conf`) after the main file, in lexical order; each may override it.
        if let base = configFile ?? (demo ? nil : DefaultPaths.systemConfigFile) {
            for file in try dropInFiles(base + ".d") {
                guard let text = try ConfigFile.readText(file) else { continue }
                try config.apply(fileText: text, file: file)
                secretTexts.append((file, text))
            }
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
        // After every key parsed, so a malformed file gets its own error first.
        for (file, text) in secretTexts {
            try ConfigFile.checkSecrets(fileText: text, file: file, serviceGroup: Self.serviceGroup)
        }
        return prepare ? .prepareRuntimeDirectory(config) : .run(config, configFile: configFile)
    }

    /// The `*.conf` files in a drop-in directory, sorted by name (bytewise); none when it is missing.
    public static func dropInFiles(_ directory: String) throws(ConfigError) -> [String] {
        guard let dir = opendir(directory) else {
            if errno == ENOENT || errno == ENOTDIR { return [] }
            throw ConfigError(file: directory, "cannot read the drop-in directory: \(String(cString: strerror(errno)))")
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard name.hasSuffix(".conf"), !name.hasPrefix(".") else { continue }
            var info = stat()
            guard stat(directory + "/" + name, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
            names.append(name)
        }
        return names.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }.map { directory + "/" + $0 }
    }

    /// systemd passes colon-separated lists in STATE_DIRECTORY/RUNTIME_DIRECTORY; use the first.
    static func firstPath(_ value: String) -> String? {
        let first = value.split(separator: ":").first.map(String.init)
        return (first?.isEmpty ?? true) ? nil : first
    }
}

extension String {
    /// A key as its flag spells it: `max_connections` is `max-connections`.
    fileprivate func replacingUnderscores() -> String { String(self.map { $0 == "_" ? "-" : $0 }) }
}

extension DaemonCommandLine {
    /// `sugard --prepare-runtime-dir`, run as root by the unit's `ExecStartPre=+` before the daemon:
    /// when `socket_group` is set, the socket's directory (only `$RUNTIME_DIRECTORY` itself) gets that
    /// group and mode 2750, so the socket the daemon binds there inherits the group (setgid directory)
    /// and the group's members can reach it, although the daemon's user is not a member and could
    /// not chown to it. Returns what it did, for the journal.
    public static func prepareRuntimeDirectory(_ config: DaemonConfig, environment: [String: String]) throws(ConfigError) -> String {
        guard let group = config.socketGroup else { return "socket_group not set: nothing to prepare" }
        let directory = String(config.socketPath.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/"))
        guard let runtime = environment["RUNTIME_DIRECTORY"].flatMap({ firstPath($0) }), runtime == directory else {
            return "the socket \(config.socketPath) is not in $RUNTIME_DIRECTORY: its directory is left as it is"
        }
        let gid: UInt32
        if let number = UInt32(group) {
            gid = number
        } else if let entry = getgrnam(group) {
            gid = entry.pointee.gr_gid
        } else {
            throw ConfigError("socket_group: no group named \"\(group)\"")
        }
        guard chown(directory, uid_t.max, gid_t(gid)) == 0, chmod(directory, 0o2750) == 0 else {
            throw ConfigError("cannot give \(directory) to group \(group): \(String(cString: strerror(errno)))")
        }
        return "\(directory) belongs to group \(group) (mode 2750)"
    }
}
