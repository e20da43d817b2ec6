import Glibc
import HTTPServer
import ProcessKit
import SystemIO

/// Everything `sugard-hub` can be told: the keys of `/etc/sugard/hub.conf` (the `key = value`
/// format and `file:line` errors of forward.conf) and the flags.
public struct HubConfig: Equatable, Sendable {
    /// The broker as written (`mqtt_url`); `mqttHost`, `mqttPort` and `mqttTLS` are parsed from it.
    public var mqttURL = "mqtt://localhost"
    /// The broker's host name or address, from `mqtt_url`.
    public var mqttHost = "localhost"
    /// The broker's TCP port, from `mqtt_url` (1883, or 8883 for `mqtts://`, when it names none).
    public var mqttPort: Int32 = 1883
    /// Whether `mqtt_url` is `mqtts://`; then `mqtt_ca_file` is required.
    public var mqttTLS = false
    /// PEM CA certificates the broker's certificate must chain to (`mqtt_ca_file`); only with TLS.
    public var mqttCAFile: String?
    /// The broker user name (`mqtt_username`); nil: connect without one.
    public var mqttUsername: String?
    /// The file whose first line is the broker password (`mqtt_password_file`); must not be
    /// readable by others.
    public var mqttPasswordFile: String?
    /// nil: `sugard-hub-<host name>`. Each instance needs its own (its broker session).
    public var mqttClientIDSetting: String?
    /// The gateways' first topic level (`topic_prefix`); may contain `/`.
    public var topicPrefix = "sugard"
    /// The MQTT 5 shared-subscription group the instances split readings and alerts in (`share_group`).
    public var shareGroup = "sugard-hub"
    /// The PostgreSQL connection URI (`database_url`, required); may hold a password, so shown redacted.
    public var databaseURL: String?
    /// The HTTP address as written (`listen`, `HOST:PORT`); `listenHost` and `listenPort` are parsed from it.
    public var listen = "127.0.0.1:8480"
    /// The IP address (or `localhost`) the fleet page and API listen on.
    public var listenHost = "127.0.0.1"
    /// The TCP port the fleet page and API listen on.
    public var listenPort: UInt16 = 8480
    /// The file whose first line is the bearer token (`auth_token_file`); required unless listening
    /// on loopback.
    public var authTokenFile: String?
    /// How long after its last sign of life a gateway counts as offline even without its will
    /// (seconds; a health message comes at least every 5 minutes).
    public var offlineAfter = 900
    /// The minimum level logged (`log_level`, `--log-level`).
    public var logLevel: LogLevel = .info

    /// Every key at its default; `database_url` is still missing, so ``validate(file:)`` refuses it.
    public init() {}

    /// This instance's MQTT client id: `mqtt_client_id`, else `sugard-hub-<host name>`; lane 0's id.
    public var mqttClientID: String { self.mqttClientIDSetting ?? "sugard-hub-\(processHostName() ?? "hub")" }

    /// MQTT connections per instance (each its own persistent session and PostgreSQL connection).
    /// Fixed: a session the hub stopped using would keep what the broker queued for it.
    public static let lanes = 4

    /// Lane 0 is `mqtt_client_id` itself; the others add `-1`, `-2`, ...
    public func laneClientID(_ lane: Int) -> String { lane == 0 ? self.mqttClientID : "\(self.mqttClientID)-\(lane)" }
    /// Whether `listen` is a loopback address (then no bearer token is needed).
    public var listensOnLoopback: Bool { HTTPServer.isLoopback(self.listenHost) }

    /// The topics: readings and alerts shared by the instances of the group, the retained
    /// status and health topics to every instance.
    public var subscriptions: [String] {
        [
            "$share/\(self.shareGroup)/\(self.topicPrefix)/+/+/reading",
            "$share/\(self.shareGroup)/\(self.topicPrefix)/+/+/alert",
            "\(self.topicPrefix)/+/status",
            "\(self.topicPrefix)/+/health",
        ]
    }

    /// Every key of hub.conf, declared once: ``apply(key:value:)``, `--help`, the man page,
    /// config/hub.conf.example and docs/configuration.md read this table.
    public static let keys: [ConfigKey<HubConfig>] = [
        ConfigKey(
            "mqtt_url", "mqtt://HOST[:PORT] (default port 1883) or mqtts://HOST[:PORT] (default 8883, needs mqtt_ca_file); default mqtt://localhost",
            intro: "The broker the gateways' sugard-forward publish to (an MQTT 5 broker or cluster).", setInExample: true, { $0.mqttURL }
        ) {
            let broker = try ConfigFile.brokerURL($1.key, $1.value)
            ($0.mqttURL, $0.mqttHost, $0.mqttPort, $0.mqttTLS) = ($1.value, broker.host, broker.port, broker.tls)
        },
        ConfigKey("mqtt_ca_file", "CA certificates (PEM) the broker's TLS certificate must chain to", example: "/etc/ssl/certs/clinic-ca.pem", {
            $0.mqttCAFile ?? ""
        }) { $0.mqttCAFile = $1.optional },
        ConfigKey("mqtt_username", "user name for the broker", example: "sugard-hub", { $0.mqttUsername ?? "" }) { $0.mqttUsername = $1.optional },
        ConfigKey(
            "mqtt_password_file", "file holding the broker password (first line; not readable by others)", example: "/etc/sugard/hub-mqtt-password",
            { $0.mqttPasswordFile ?? "" }
        ) { $0.mqttPasswordFile = $1.optional },
        ConfigKey(
            "mqtt_client_id", "this instance's MQTT client id, its persistent session (default sugard-hub-<host name>; unique per instance)",
            example: "sugard-hub-1", { $0.mqttClientIDSetting ?? "" }
        ) {
            guard !$1.value.isEmpty, $1.value.utf8.count <= 128 else { throw ConfigError("mqtt_client_id needs 1 to 128 bytes") }
            $0.mqttClientIDSetting = $1.value
        },
        ConfigKey("topic_prefix", "the gateways' first topic level (default sugard)", { $0.topicPrefix }) {
            $0.topicPrefix = try ConfigFile.topicLevel($1.key, $1.value, allowSlash: true)
        },
        ConfigKey("share_group", "the MQTT 5 shared-subscription group the instances split readings in (default sugard-hub)", { $0.shareGroup }) {
            $0.shareGroup = try ConfigFile.topicLevel($1.key, $1.value, allowSlash: false)
        },
        ConfigKey(
            "database_url", "PostgreSQL, a libpq connection URI postgresql://USER@HOST[:PORT]/DB[?...] (required)",
            example: "postgresql://sugard_hub@localhost/sugard_hub", intro: "PostgreSQL (libpq URI); the hub creates and migrates its tables.",
            setInExample: true, { $0.databaseURL.map(Self.redacted) ?? "" }
        ) {
            guard $1.value.hasPrefix("postgresql://") || $1.value.hasPrefix("postgres://") else {
                throw ConfigError("database_url must be a libpq connection URI, postgresql://..., not \"\(Self.redacted($1.value))\"")
            }
            $0.databaseURL = $1.value
        },
        ConfigKey(
            "listen", "HOST:PORT of the fleet page and API (default 127.0.0.1:8480)",
            intro: "The fleet page and API. Anything but loopback needs auth_token_file.", { $0.listen }
        ) {
            guard let (host, port) = HTTPServer.parseListen($1.value) else {
                throw ConfigError("listen must be HOST:PORT with an IP address (or localhost), e.g. 127.0.0.1:8480, not \"\($1.value)\"")
            }
            ($0.listen, $0.listenHost, $0.listenPort) = ($1.value, host, port)
        },
        ConfigKey(
            "auth_token_file", "file holding the bearer token every path but /healthz needs (required when listen is not loopback)",
            example: "/etc/sugard/hub-token", { $0.authTokenFile ?? "" }
        ) { $0.authTokenFile = $1.optional },
        ConfigKey(
            "offline_after", "seconds without a status or health message after which a gateway shows offline (default 900)", { String($0.offlineAfter) }
        ) {
            guard let seconds = Int($1.value), (30...86_400).contains(seconds) else {
                throw ConfigError("offline_after must be seconds from 30 to 86400, not \"\($1.value)\"")
            }
            $0.offlineAfter = seconds
        },
        ConfigKey("log_level", flag: "--log-level", "error, warning, notice, info (default) or debug", { $0.logLevel.name }) {
            $0.logLevel = try $1.logLevel()
        },
    ]

    /// Sets one key from hub.conf or a flag; throws ``ConfigError`` for an unknown key (listing the
    /// known ones) or a bad value.
    public mutating func apply(key: String, value: String) throws(ConfigError) {
        guard let entry = Self.keys.key(key) else {
            throw ConfigError("unknown key \"\(key)\" (known keys: \(Self.keys.map(\.key).joined(separator: ", ")))")
        }
        try entry.apply(value, to: &self)
    }

    /// hub.conf as its docs show it: the example file, the reference table, `--help` and the man
    /// page's keys, from ``keys``.
    public static var reference: ConfigFileDoc {
        ConfigFileDoc(
            name: "hub.conf",
            header: """
                /etc/sugard/hub.conf: sugard-hub's settings (see sugard-hub --help, man sugard-hub; generated by \
                sugard-hub --print-example-config from the key table HubConfig.keys). One "key = value" per line; lines \
                starting with # or ; are comments. The keys a hub needs are set; every other key is shown commented out \
                with its default (or a sample where it has none). Keep it 0640 root:sugard-hub: it names secret files \
                (and database_url may hold a password).
                """,
            keys: Self.keys.map { $0.doc(defaults: HubConfig(), table: "HubConfig.keys") })
    }

    /// A connection URI without its password (for messages).
    static func redacted(_ url: String) -> String {
        let parts = url.split(separator: "@", maxSplits: 1)
        guard parts.count == 2, let slashes = parts[0].firstRange(of: "://") else { return url }
        let credentials = parts[0][slashes.upperBound...]
        guard let colon = credentials.firstIndex(of: ":") else { return url }
        return String(parts[0][..<colon]) + ":***@" + String(parts[1])
    }

    /// Checks what only makes sense together (after the file and the flags).
    public func validate(file: String?) throws(ConfigError) {
        if self.databaseURL == nil { throw ConfigError(file: file, "database_url is required (postgresql://...)") }
        if self.mqttTLS, self.mqttCAFile == nil {
            throw ConfigError(file: file, "mqtts:// needs mqtt_ca_file (the CA that signed the broker's certificate)")
        }
        if !self.mqttTLS, self.mqttCAFile != nil { throw ConfigError(file: file, "mqtt_ca_file is set but mqtt_url is not mqtts://") }
        if !self.listensOnLoopback, self.authTokenFile == nil {
            throw ConfigError(file: file, "listen = \(self.listen) is not loopback: auth_token_file is required (a bearer token for every path but /healthz)")
        }
    }

    /// The first line of a secret file (`mqtt_password_file`, `auth_token_file`).
    static func firstLine(_ file: String, key: String) throws(ConfigError) -> String {
        guard let text = try ConfigFile.readText(file) else { throw ConfigError(file: file, "no such file (\(key))") }
        return String(text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }).first ?? "")
    }

    /// The broker password: the first line of `mqtt_password_file`, nil when none is configured;
    /// throws ``ConfigError`` when the file is missing.
    public func password() throws(ConfigError) -> String? {
        try self.mqttPasswordFile.map { f throws(ConfigError) in try Self.firstLine(f, key: "mqtt_password_file") }
    }

    /// The bearer token, nil when none is configured; an empty one is refused.
    public func authToken() throws(ConfigError) -> String? {
        guard let file = self.authTokenFile else { return nil }
        let token = try Self.firstLine(file, key: "auth_token_file").trimmingSpaces()
        guard token.count >= 16 else { throw ConfigError(file: file, "the token (first line) must have at least 16 characters") }
        return token
    }
}

/// What `sugard-hub`'s command line asked for.
public enum HubCommand: Equatable, Sendable {
    /// Run with this configuration.
    case run(HubConfig)
    /// `--help`, `--version`, `--generate-man`, `--print-example-config` or `--print-config-reference`:
    /// the text to print (``ServiceManual/text(for:version:)``), then exit 0.
    case print(String)
}

/// `sugard-hub`'s command line: flags, `--help`, the man page, and reading hub.conf.
public enum HubCommandLine {
    /// Where hub.conf is read from without `--config` or `SUGARD_HUB_CONFIG`.
    public static let defaultConfigFile = "/etc/sugard/hub.conf"
    /// The group that may read hub.conf and its secret files (the service's user is its only member).
    public static let serviceGroup = "sugard-hub"

    static let summary = "a clinic's gateways on one page: their MQTT streams into PostgreSQL"
    static let description = """
        Subscribes to the gateways' readings and alerts with MQTT 5 shared subscriptions \
        ($share/<share_group>/<topic_prefix>/+/+/reading and .../alert, so several instances split them) \
        and to their retained status and health topics, and stores them in PostgreSQL (tables gateway, \
        meter, person, reading, alert; migrated at start). A reading is committed before the broker \
        gets its acknowledgement, on a persistent session, so a hub killed at any moment loses none and \
        stores none twice. Serves the fleet page (/), each person's report (/person/<id>/report), \
        /api/gateways, /api/readings, /api/alerts and /healthz over HTTP; every path but /healthz needs \
        Authorization: Bearer <token> unless it listens on loopback.
        """
    static let synopsis = "sugard-hub [--config FILE] [--log-level LEVEL]"
    static let exitStatus = "0 stopped by SIGTERM/SIGINT, 64 bad flags, 78 bad config file (also: a password or token file that other users may read), 69 PostgreSQL unreachable or its schema newer than this hub, 71 the HTTP address cannot be listened on."

    /// The flags as `--help` and the man page list them.
    public static let options: [(flag: String, help: String)] = [
        ("--config FILE", "Config file (default /etc/sugard/hub.conf)."),
        ("--log-level LEVEL", "error, warning, notice, info (default) or debug."),
        ("--print-example-config", "Print the example hub.conf (every key with its default), made from the key table."),
        ("--print-config-reference", "Print the key table of hub.conf as Markdown (docs/configuration.md)."),
        ("--version", "Print the version."),
        ("-h, --help", "Show this help."),
    ]

    /// `--help` and sugard-hub(8), from one description and the key table.
    static var manual: ServiceManual {
        ServiceManual(
            name: "sugard-hub", summary: summary, description: description, synopsis: synopsis, options: options,
            keyBlocks: [.init(title: "CONFIG KEYS (key = value):", lines: HubConfig.reference.helpLines())],
            configuration: "\(defaultConfigFile): one key = value per line, # comments; errors name the file and line.",
            reference: HubConfig.reference, exitStatus: exitStatus, seeAlso: "sugard-forward(8), sugard(8), sugarctl(1)")
    }

    /// The `--help` text: overview, usage, options, every hub.conf key and the exit statuses.
    public static var usage: String { Self.manual.usage }

    /// sugard-hub(8), built from the tables behind `--help`.
    public static func manPage() -> String { Self.manual.manPage() }

    /// Reads the flags, then the config file (`--config`, `SUGARD_HUB_CONFIG` or the default), then
    /// applies the flags that set keys over the file's values and validates the result. Throws
    /// ``ConfigError``: without a file for a bad flag (exit 64), naming the file for a bad, missing or
    /// too widely readable config (exit 78).
    public static func parse(_ arguments: [String], environment: [String: String]) throws(ConfigError) -> HubCommand {
        let request = try ServiceArguments.parse(
            arguments, program: "sugard-hub", key: { flag in HubConfig.keys.first(where: { $0.flag == flag })?.key })
        guard case .run(let configFile, let flags) = request else {
            return .print(Self.manual.text(for: request, version: sugarVersion) ?? "")
        }
        var config = HubConfig()
        let file = configFile ?? environment["SUGARD_HUB_CONFIG"].flatMap { $0.isEmpty ? nil : $0 } ?? Self.defaultConfigFile
        guard let text = try ConfigFile.readText(file) else {
            throw ConfigError(file: file, "no such file (sugard-hub needs at least database_url)")
        }
        try ConfigFile.parse(text, file: file) { (key, value) throws(ConfigError) in try config.apply(key: key, value: value) }
        try ServiceArguments.apply(flags) { (key, value) throws(ConfigError) in try config.apply(key: key, value: value) }
        try config.validate(file: file)
        try ConfigFile.checkSecrets(fileText: text, file: file, serviceGroup: Self.serviceGroup)
        // A password inside database_url makes the file itself a secret (the key has no secret suffix).
        if let url = config.databaseURL, HubConfig.redacted(url) != url,
            let finding = SecretFiles.examine(file, holds: "a password in database_url", serviceGroup: Self.serviceGroup),
            finding.readableByOthers
        {
            throw ConfigError(file: file, "\(finding.problem); refusing to start, fix: \(finding.fix)")
        }
        return .run(config)
    }
}
