import Glibc
import HealthDataSync
import SugarAPI

/// Everything the daemon can be told. Each setting is a config-file key and most are flags.
///
/// File format (`/etc/sugard/sugard.conf`, see `config/sugard.conf.example`): one `key = value`
/// per line, `#` or `;` starts a comment line, blank lines are ignored, values may be quoted with
/// double quotes. `replay` may repeat. Unknown keys and bad values are errors naming file and line.
public struct DaemonConfig: Equatable, Sendable {
    /// Where the database and state live.
    public var stateDirectory: String
    /// The Varlink socket path.
    public var socketPath: String
    /// Mode of the socket file (default 0660).
    public var socketMode: UInt32 = 0o660
    /// Group that owns the socket file and may call read methods (nil: the daemon's group).
    public var socketGroup: String?
    /// Group whose members may call mutating methods (Sync, Forget, Pair, SubmitPasskey) besides
    /// root and the daemon's own user.
    public var adminGroup: String?
    public var logLevel: LogLevel = .info
    /// Captures to replay as meters instead of BlueZ.
    public var replay: [String] = []
    /// How long replayed meters wait before each operation and between records (slow-meter tests).
    public var replayDelayMilliseconds: Int = 0
    /// Run the built-in demo meter (replay transport, no BlueZ).
    public var demo: Bool = false
    /// Seconds between demo readings.
    public var demoInterval: Int = 40
    /// BlueZ adapter to use (`hci0`); nil: the first powered one.
    public var adapter: String?
    /// Automatic syncs of a meter are skipped within this many seconds of its last sync.
    public var cooldownSeconds: Int = 30
    /// IANA zone the meters' clocks are read in; nil: the host's zone.
    public var timeZone: String?
    /// Default display unit for clients that ask.
    public var unit: GlucoseUnit = .mgdL
    /// Testing aid: run this many simulated meters (replay transport, no BlueZ) that gain a
    /// reading every `demo_interval` seconds; see ``SimulatedFleet``. 0: off.
    public var simulateMeters: Int = 0
    /// Testing aid: Unix time (seconds) the simulated meters' record clock starts at (default: start-up).
    public var simulateStart: Int64?
    /// Testing aid: Unix time (seconds) after which the simulated meters take no more readings.
    public var simulateStop: Int64?
    public var maxConnections: Int = 4096
    public var maxConnectionsPerUID: Int = 1024

    public init(stateDirectory: String, socketPath: String) {
        self.stateDirectory = stateDirectory
        self.socketPath = socketPath
    }

    /// The database file inside the state directory.
    public var databasePath: String { self.stateDirectory + "/sugard.sqlite" }

    /// Keys accepted in the file, with the flag that sets the same value.
    public static let keys: [(key: String, flag: String?, help: String)] = [
        ("state_dir", "--state-dir", "directory for the database and state"),
        ("socket", "--socket", "path of the Varlink socket"),
        ("socket_mode", nil, "octal mode of the socket file (default 0660)"),
        ("socket_group", nil, "group owning the socket; its members may read status and readings"),
        ("admin_group", nil, "group whose members may sync, forget and pair meters"),
        ("log_level", "--log-level", "error, warning, notice, info or debug (readings are logged only at debug)"),
        ("replay", "--replay", "a btsnoop capture to play as a meter instead of BlueZ (repeatable)"),
        ("replay_delay_ms", nil, "milliseconds a replayed meter takes per operation and per record (default 0)"),
        ("demo", "--demo", "run the built-in simulated meter (true/false)"),
        ("demo_interval", nil, "seconds between new demo readings (default 40)"),
        ("adapter", nil, "BlueZ adapter name such as hci0 (default: the first powered one)"),
        ("cooldown_seconds", nil, "defer automatic syncs to this long after the last successful one (default 30)"),
        ("timezone", nil, "IANA zone the meters' clocks are set to (default: the host's zone)"),
        ("unit", nil, "default display unit: mgdl or mmol"),
        ("max_connections", nil, "socket connection cap (default 4096)"),
        ("simulate_meters", nil, "testing aid: run this many simulated meters instead of BlueZ (default 0)"),
        ("simulate_start", nil, "testing aid: Unix time the simulated meters' readings start from"),
        ("simulate_stop", nil, "testing aid: Unix time after which simulated meters take no readings"),
        ("max_connections_per_uid", nil, "socket connection cap per user (default 1024)"),
    ]

    /// Applies one `key = value` setting. `replay` appends; everything else replaces.
    public mutating func apply(key: String, value: String) throws(ConfigError) {
        func int(_ range: ClosedRange<Int>) throws(ConfigError) -> Int {
            guard let v = Int(value), range.contains(v) else {
                throw ConfigError("\(key) must be a whole number from \(range.lowerBound) to \(range.upperBound), not \"\(value)\"")
            }
            return v
        }
        func bool() throws(ConfigError) -> Bool {
            switch value.lowercased() {
            case "true", "yes", "on", "1": return true
            case "false", "no", "off", "0": return false
            default: throw ConfigError("\(key) must be true or false, not \"\(value)\"")
            }
        }
        func nonEmpty() throws(ConfigError) -> String {
            guard !value.isEmpty else { throw ConfigError("\(key) needs a value") }
            return value
        }
        switch key {
        case "state_dir": self.stateDirectory = try nonEmpty()
        case "socket":
            let path = try nonEmpty()
            guard path.utf8.count < 108 else { throw ConfigError("socket path is longer than 107 bytes: \(path)") }
            self.socketPath = path
        case "socket_mode":
            guard let mode = UInt32(value.hasPrefix("0o") ? String(value.dropFirst(2)) : value, radix: 8), mode <= 0o777
            else { throw ConfigError("socket_mode must be an octal mode such as 0660, not \"\(value)\"") }
            self.socketMode = mode
        case "socket_group": self.socketGroup = value.isEmpty ? nil : try Self.checkedGroup(key, value)
        case "admin_group": self.adminGroup = value.isEmpty ? nil : try Self.checkedGroup(key, value)
        case "log_level":
            guard let level = LogLevel(name: value) else {
                throw ConfigError("log_level must be error, warning, notice, info or debug, not \"\(value)\"")
            }
            self.logLevel = level
        case "replay": self.replay.append(try nonEmpty())
        case "replay_delay_ms": self.replayDelayMilliseconds = try int(0...60_000)
        case "demo": self.demo = try bool()
        case "demo_interval": self.demoInterval = try int(1...86_400)
        case "adapter": self.adapter = value.isEmpty ? nil : value
        case "cooldown_seconds": self.cooldownSeconds = try int(0...86_400)
        case "timezone": self.timeZone = value.isEmpty ? nil : try Self.checkedZone(value)
        case "unit":
            switch value.lowercased() {
            case "mgdl", "mg/dl": self.unit = .mgdL
            case "mmol", "mmol/l", "mmoll": self.unit = .mmolL
            default: throw ConfigError("unit must be mgdl or mmol, not \"\(value)\"")
            }
        case "max_connections": self.maxConnections = try int(1...65_536)
        case "simulate_meters": self.simulateMeters = try int(0...64)
        case "simulate_start": self.simulateStart = value.isEmpty ? nil : Int64(try int(0...4_102_444_800))
        case "simulate_stop": self.simulateStop = value.isEmpty ? nil : Int64(try int(0...4_102_444_800))
        case "max_connections_per_uid": self.maxConnectionsPerUID = try int(1...65_536)
        default:
            throw ConfigError("unknown key \"\(key)\" (known keys: \(DaemonConfig.keys.map(\.key).joined(separator: ", ")))")
        }
    }

    /// Keys that may appear more than once in one file (each adds to a list).
    public static let repeatableKeys: Set<String> = ["replay"]

    /// A group name (or number) that exists on this host; `socket_group`/`admin_group` naming a
    /// missing group would otherwise only fail once the socket is made, without the line.
    static func checkedGroup(_ key: String, _ value: String) throws(ConfigError) -> String {
        if UInt32(value) != nil || getgrnam(value) != nil { return value }
        throw ConfigError("\(key): no group named \"\(value)\" on this host (create it, e.g. groupadd \(value))")
    }

    /// An IANA zone name whose TZif file exists and parses; otherwise every reading's time would
    /// silently be resolved in UTC.
    static func checkedZone(_ value: String) throws(ConfigError) -> String {
        let allowed = value.utf8.allSatisfy {
            ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39)
                || $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "+")
        }
        guard allowed, !value.hasPrefix("/"), !value.split(separator: "/").contains(where: { $0 == ".." || $0 == "." }),
            let bytes = readBinaryFile(DaemonConfig.zoneDirectory + "/" + value),
            (try? TimeZoneRules(tzif: bytes, identifier: value)) != nil
        else {
            throw ConfigError("timezone: \"\(value)\" is not an IANA time zone (see \(DaemonConfig.zoneDirectory), e.g. Europe/Berlin or UTC)")
        }
        return value
    }

    /// Where IANA zone files are looked up.
    public static let zoneDirectory = "/usr/share/zoneinfo"

    /// Parses config-file text, applying each setting in order. Errors name `file` and the line: a
    /// key set twice in one file (other than `replay`), and a value with a stray or unterminated
    /// double quote, are errors too.
    public mutating func apply(fileText text: String, file: String) throws(ConfigError) {
        try ConfigFile.parse(text, file: file, repeatable: Self.repeatableKeys) { (key, value) throws(ConfigError) in
            try self.apply(key: key, value: value)
        }
    }
}

/// Reads a whole binary file (zone files); nil when unreadable.
package func readBinaryFile(_ path: String) -> [UInt8]? {
    (try? ConfigFile.readBytes(path, limit: 4 << 20)) ?? nil
}
