import Glibc
import GlucoseProfile
import HealthDataSync
import ProcessKit
import SugarAPI
import SugarWire
import SystemIO

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
    /// The minimum level logged (`log_level`, `--log-level`); a reload applies it.
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
    public var unit: GlucoseUnit = .mgdl
    /// Testing aid: run this many simulated meters (replay transport, no BlueZ) that gain a
    /// reading every `demo_interval` seconds; see ``SimulatedFleet``. 0: off.
    public var simulateMeters: Int = 0
    /// Testing aid: Unix time (seconds) the simulated meters' record clock starts at (default: start-up).
    public var simulateStart: Int64?
    /// Testing aid: Unix time (seconds) after which the simulated meters take no more readings.
    public var simulateStop: Int64?
    /// Testing aid: microseconds the simulated meters take per GATT operation and report packet
    /// (default 20 000: a sync of a few records takes a few hundred milliseconds).
    public var simulateDelayMicros: Int = 20_000
    /// The socket's connection cap (`max_socket_connections`).
    public var maxSocketConnections: Int = 4096
    /// Meters connected at once (`max_connections`): the adapter's connection slots; further
    /// meters wait (sync phase `queued`) and are served in order.
    public var maxMeterConnections: Int = 3
    /// The socket's connection cap per user (`max_connections_per_uid`).
    public var maxConnectionsPerUID: Int = 1024
    /// The user sugard-forward runs as (a name or a uid): its connections get in like root's. nil: none.
    public var forwarderUser: String? = "sugard-forward"
    /// Set a meter's clock after a download when it is off by more than ``clockToleranceSeconds``
    /// or unset, and the meter offers a way to set it (Current Time with write, i-SENS vendor time).
    public var setMeterClock: Bool = true
    /// How far a meter's clock may be off before sugard sets it (`clock_tolerance`, default 2 minutes).
    public var clockToleranceSeconds: Int = 120

    /// Every other setting at its default.
    public init(stateDirectory: String, socketPath: String) {
        self.stateDirectory = stateDirectory
        self.socketPath = socketPath
    }

    /// The database file inside the state directory.
    public var databasePath: String { self.stateDirectory + "/sugard.sqlite" }

    /// Every key accepted in the file, declared once: its flag, help, how it parses, how it reads
    /// back and whether `systemctl reload` applies it. The parser, the reload diff, the man page
    /// and the tests (`config/sugard.conf.example`) all read this table.
    public static let keys: [ConfigKey<DaemonConfig>] = [
        ConfigKey("state_dir", flag: "--state-dir", "directory for the database and state", { $0.stateDirectory }) {
            $0.stateDirectory = try $1.nonEmpty()
        },
        ConfigKey("socket", flag: "--socket", "path of the Varlink socket", { $0.socketPath }) {
            let path = try $1.nonEmpty()
            guard path.utf8.count < 108 else { throw ConfigError("socket path is longer than 107 bytes: \(path)") }
            $0.socketPath = path
        },
        ConfigKey("socket_mode", "octal mode of the socket file (default 0660)", { "0" + String($0.socketMode, radix: 8) }) {
            let value = $1.value
            guard let mode = UInt32(value.hasPrefix("0o") ? String(value.dropFirst(2)) : value, radix: 8), mode <= 0o777
            else { throw ConfigError("socket_mode must be an octal mode such as 0660, not \"\(value)\"") }
            $0.socketMode = mode
        },
        ConfigKey("socket_group", "group owning the socket; its members may read status and readings", example: "sugard", { $0.socketGroup ?? "" }) {
            $0.socketGroup = $1.value.isEmpty ? nil : try Self.checkedGroup($1.key, $1.value)
        },
        ConfigKey("admin_group", "group whose members may sync, forget and pair meters", example: "sugard-admin", { $0.adminGroup ?? "" }) {
            $0.adminGroup = $1.value.isEmpty ? nil : try Self.checkedGroup($1.key, $1.value)
        },
        ConfigKey(
            "log_level", flag: "--log-level", "error, warning, notice, info or debug (readings are logged only at debug)",
            appliesOnReload: true, { $0.logLevel.name }
        ) {
            guard let level = LogLevel(name: $1.value) else {
                throw ConfigError("log_level must be error, warning, notice, info or debug, not \"\($1.value)\"")
            }
            $0.logLevel = level
        },
        ConfigKey("replay", flag: "--replay", "a btsnoop capture to play as a meter instead of BlueZ (repeatable)", example: "/var/lib/sugard/captures/accu-chek.btsnoop", {
            $0.replay.joined(separator: "\n")
        }) { $0.replay.append(try $1.nonEmpty()) },
        ConfigKey("replay_delay_ms", "milliseconds a replayed meter takes per operation and per record (default 0)", {
            String($0.replayDelayMilliseconds)
        }) { $0.replayDelayMilliseconds = try $1.int(0...60_000) },
        ConfigKey("demo", flag: "--demo", "run the built-in simulated meter (true/false)", { String($0.demo) }) {
            $0.demo = try $1.bool()
        },
        ConfigKey("demo_interval", "seconds between new demo readings (default 40)", { String($0.demoInterval) }) {
            $0.demoInterval = try $1.int(1...86_400)
        },
        ConfigKey("adapter", "BlueZ adapter name such as hci0 (default: the first powered one)", example: "hci0", { $0.adapter ?? "" }) {
            $0.adapter = $1.value.isEmpty ? nil : $1.value
        },
        ConfigKey("cooldown_seconds", "defer automatic syncs to this long after the last successful one (default 30)", {
            String($0.cooldownSeconds)
        }) { $0.cooldownSeconds = try $1.int(0...86_400) },
        ConfigKey("timezone", "IANA zone the meters' clocks are set to (default: the host's zone)", example: "Europe/Berlin", { $0.timeZone ?? "" }) {
            $0.timeZone = $1.value.isEmpty ? nil : try Self.checkedZone($1.value)
        },
        ConfigKey("unit", "default display unit: mgdl or mmol", { $0.unit.rawValue }) {
            guard let unit = Wire.Unit(text: $1.value) else { throw ConfigError("unit must be mgdl or mmol, not \"\($1.value)\"") }
            $0.unit = unit
        },
        ConfigKey(
            "max_connections", "meters connected at once (default 3, what one adapter handles safely); further meters queue and are served in order",
            { String($0.maxMeterConnections) }
        ) {
            guard let count = Int($1.value), count > 64 else {
                $0.maxMeterConnections = try $1.int(1...64)
                return
            }
            throw ConfigError(
                "max_connections is the number of meters connected at once (1 to 64), not \(count); the socket's connection cap is max_socket_connections")
        },
        ConfigKey("max_socket_connections", "socket connection cap (default 4096)", { String($0.maxSocketConnections) }) {
            $0.maxSocketConnections = try $1.int(1...65_536)
        },
        ConfigKey("simulate_meters", "testing aid: run this many simulated meters instead of BlueZ (default 0)", {
            String($0.simulateMeters)
        }) { $0.simulateMeters = try $1.int(0...64) },
        ConfigKey("simulate_delay_us", "testing aid: microseconds per operation and report packet of simulated meters (default 20000)", {
            String($0.simulateDelayMicros)
        }) { $0.simulateDelayMicros = try $1.int(1...1_000_000) },
        ConfigKey("simulate_start", "testing aid: Unix time the simulated meters' readings start from", example: "1796000000", {
            $0.simulateStart.map { String($0) } ?? ""
        }) { $0.simulateStart = $1.value.isEmpty ? nil : Int64(try $1.int(0...4_102_444_800)) },
        ConfigKey("simulate_stop", "testing aid: Unix time after which simulated meters take no readings", example: "1796000600", {
            $0.simulateStop.map { String($0) } ?? ""
        }) { $0.simulateStop = $1.value.isEmpty ? nil : Int64(try $1.int(0...4_102_444_800)) },
        ConfigKey("max_connections_per_uid", "socket connection cap per user (default 1024; at most a quarter of the connections left to users other than root, sugard and forwarder_user)", {
            String($0.maxConnectionsPerUID)
        }) { $0.maxConnectionsPerUID = try $1.int(1...65_536) },
        ConfigKey(
            "forwarder_user", "the user sugard-forward runs as; like root, not held to the per-user cap (default sugard-forward; empty: none)",
            { $0.forwarderUser ?? "" }
        ) { $0.forwarderUser = $1.value.isEmpty ? nil : $1.value },
        ConfigKey(
            "set_meter_clock", "set a meter's clock after its download when it is off by more than clock_tolerance or unset (default true)",
            { String($0.setMeterClock) }
        ) { $0.setMeterClock = try $1.bool() },
        ConfigKey(
            "clock_tolerance", "how far a meter's clock may be off before it is set: seconds, or 120s, 2m, 1h (default 2m)",
            { "\($0.clockToleranceSeconds)s" }
        ) { $0.clockToleranceSeconds = try $1.seconds(0...86_400) },
    ]

    /// sugard.conf as its docs show it: the example file, the reference table and the man page's
    /// keys all come from ``keys`` (defaults read back from a configuration with no file).
    public static var reference: ConfigFileDoc {
        let defaults = DaemonConfig(stateDirectory: DefaultPaths.systemStateDirectory, socketPath: DefaultPaths.systemSocket)
        return ConfigFileDoc(
            name: "sugard.conf",
            header: """
                /etc/sugard/sugard.conf: configuration of the sugard daemon (generated by sugard --print-example-config \
                from the key table DaemonConfig.keys; man sugard.conf).

                Format: one "key = value" per line; lines starting with # or ; are comments; values may be double-quoted. \
                Every key is shown commented out with its default (or a sample where it has none): remove the # to change \
                one. Unknown keys and bad values stop the daemon at start-up with an error naming this file and the line. \
                Flags given to sugard (--state-dir, --socket, --replay, --log-level) override these. `systemctl reload \
                sugard` (SIGHUP) re-reads the file: log_level takes effect at once; the log names any other changed key, \
                which needs a restart. A broken file on reload is logged (file:line) and the running configuration is kept. \
                Drop-ins: the *.conf files in /etc/sugard/sugard.conf.d/ are read after this file, in lexical order.
                """,
            keys: Self.keys.map { $0.doc(defaults: defaults, table: "DaemonConfig.keys") })
    }

    /// Applies one `key = value` setting. `replay` appends; everything else replaces.
    public mutating func apply(key: String, value: String) throws(ConfigError) {
        guard let entry = Self.keys.key(key) else {
            throw ConfigError("unknown key \"\(key)\" (known keys: \(DaemonConfig.keys.map(\.key).joined(separator: ", ")))")
        }
        try entry.apply(value, to: &self)
    }

    /// The keys whose values differ between two configurations and that `systemctl reload` does
    /// not apply (a restart does), in table order.
    public static func keysNeedingRestart(from current: DaemonConfig, to fresh: DaemonConfig) -> [String] {
        Self.keys.filter { !$0.appliesOnReload && $0.value(current) != $0.value(fresh) }.map(\.key)
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
