import Glibc
import HTTPServer
import ProcessKit
import SystemIO

/// Everything `sugard-hub` can be told: the keys of `/etc/sugard/hub.conf` (the `key = value`
/// format and `file:line` errors of forward.conf) and the flags.
public struct HubConfig: Equatable, Sendable {
    public var mqttURL = "mqtt://localhost"
    public var mqttHost = "localhost"
    public var mqttPort: Int32 = 1883
    public var mqttTLS = false
    public var mqttCAFile: String?
    public var mqttUsername: String?
    public var mqttPasswordFile: String?
    /// nil: `sugard-hub-<host name>`. Each instance needs its own (its broker session).
    public var mqttClientIDSetting: String?
    public var topicPrefix = "sugard"
    public var shareGroup = "sugard-hub"
    public var databaseURL: String?
    public var listen = "127.0.0.1:8480"
    public var listenHost = "127.0.0.1"
    public var listenPort: UInt16 = 8480
    public var authTokenFile: String?
    /// How long after its last sign of life a gateway counts as offline even without its will
    /// (seconds; a health message comes at least every 5 minutes).
    public var offlineAfter = 900
    public var logLevel: LogLevel = .info

    public init() {}

    public var mqttClientID: String { self.mqttClientIDSetting ?? "sugard-hub-\(hubHostName())" }

    /// MQTT connections per instance (each its own persistent session and PostgreSQL connection).
    /// Fixed: a session the hub stopped using would keep what the broker queued for it.
    public static let lanes = 4

    /// Lane 0 is `mqtt_client_id` itself; the others add `-1`, `-2`, ...
    public func laneClientID(_ lane: Int) -> String { lane == 0 ? self.mqttClientID : "\(self.mqttClientID)-\(lane)" }
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

    public static let keys: [(key: String, help: String)] = [
        ("mqtt_url", "mqtt://HOST[:PORT] (default port 1883) or mqtts://HOST[:PORT] (default 8883, needs mqtt_ca_file); default mqtt://localhost"),
        ("mqtt_ca_file", "CA certificates (PEM) the broker's TLS certificate must chain to"),
        ("mqtt_username", "user name for the broker"),
        ("mqtt_password_file", "file holding the broker password (first line; not readable by others)"),
        ("mqtt_client_id", "this instance's MQTT client id, its persistent session (default sugard-hub-<host name>; unique per instance)"),
        ("topic_prefix", "the gateways' first topic level (default sugard)"),
        ("share_group", "the MQTT 5 shared-subscription group the instances split readings in (default sugard-hub)"),
        ("database_url", "PostgreSQL, a libpq connection URI postgresql://USER@HOST[:PORT]/DB[?...] (required)"),
        ("listen", "HOST:PORT of the fleet page and API (default 127.0.0.1:8480)"),
        ("auth_token_file", "file holding the bearer token every path but /healthz needs (required when listen is not loopback)"),
        ("offline_after", "seconds without a status or health message after which a gateway shows offline (default 900)"),
        ("log_level", "error, warning, notice, info (default) or debug"),
    ]

    public mutating func apply(key: String, value: String) throws(ConfigError) {
        switch key {
        case "mqtt_url":
            let broker = try ConfigFile.brokerURL(key, value)
            (self.mqttURL, self.mqttHost, self.mqttPort, self.mqttTLS) = (value, broker.host, broker.port, broker.tls)
        case "mqtt_ca_file": self.mqttCAFile = value.isEmpty ? nil : value
        case "mqtt_username": self.mqttUsername = value.isEmpty ? nil : value
        case "mqtt_password_file": self.mqttPasswordFile = value.isEmpty ? nil : value
        case "mqtt_client_id":
            guard !value.isEmpty, value.utf8.count <= 128 else { throw ConfigError("mqtt_client_id needs 1 to 128 bytes") }
            self.mqttClientIDSetting = value
        case "topic_prefix": self.topicPrefix = try ConfigFile.topicLevel(key, value, allowSlash: true)
        case "share_group": self.shareGroup = try ConfigFile.topicLevel(key, value, allowSlash: false)
        case "database_url":
            guard value.hasPrefix("postgresql://") || value.hasPrefix("postgres://") else {
                throw ConfigError("database_url must be a libpq connection URI, postgresql://..., not \"\(Self.redacted(value))\"")
            }
            self.databaseURL = value
        case "listen":
            guard let (host, port) = HTTPServer.parseListen(value) else {
                throw ConfigError("listen must be HOST:PORT with an IP address (or localhost), e.g. 127.0.0.1:8480, not \"\(value)\"")
            }
            (self.listen, self.listenHost, self.listenPort) = (value, host, port)
        case "auth_token_file": self.authTokenFile = value.isEmpty ? nil : value
        case "offline_after":
            guard let seconds = Int(value), (30...86_400).contains(seconds) else {
                throw ConfigError("offline_after must be seconds from 30 to 86400, not \"\(value)\"")
            }
            self.offlineAfter = seconds
        case "log_level":
            guard let level = LogLevel(name: value) else {
                throw ConfigError("log_level must be error, warning, notice, info or debug, not \"\(value)\"")
            }
            self.logLevel = level
        default:
            throw ConfigError("unknown key \"\(key)\" (known keys: \(Self.keys.map(\.key).joined(separator: ", ")))")
        }
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

/// The host name, lower-case (the default client id's last part).
func hubHostName() -> String {
    var buffer = [CChar](repeating: 0, count: 256)
    guard gethostname(&buffer, buffer.count - 1) == 0 else { return "hub" }
    let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self).lowercased()
    return name.isEmpty ? "hub" : name
}

/// What `sugard-hub`'s command line asked for.
public enum HubCommand: Equatable, Sendable {
    case run(HubConfig)
    case help
    case version
    case manPage
}

public enum HubCommandLine {
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

    public static let options: [(flag: String, help: String)] = [
        ("--config FILE", "Config file (default /etc/sugard/hub.conf)."),
        ("--log-level LEVEL", "error, warning, notice, info (default) or debug."),
        ("--version", "Print the version."),
        ("-h, --help", "Show this help."),
    ]

    public static let usage = """
        OVERVIEW: sugard-hub - \(summary)

        \(description)

        USAGE: \(synopsis)

        OPTIONS:
        \(options.map { "  \($0.flag.hubPadding(19))\($0.help)" }.joined(separator: "\n"))

        CONFIG KEYS (key = value):
        \(HubConfig.keys.map { "  \($0.key.hubPadding(19))\($0.help)" }.joined(separator: "\n"))

        Exit status: \(exitStatus)
        """

    /// sugard-hub(8), built from the tables behind `--help`.
    public static func manPage() -> String {
        var page = ManPage(name: "sugard-hub", section: 8, summary: summary)
        page.section("Synopsis")
        page.literal([synopsis])
        page.section("Description")
        page.paragraph(description)
        page.section("Options")
        for option in options { page.item(option.flag, option.help) }
        page.section("Configuration")
        page.paragraph("\(defaultConfigFile): one key = value per line, # comments; errors name the file and line.")
        for key in HubConfig.keys { page.item(key.key, key.help) }
        page.section("Exit status")
        page.paragraph(exitStatus)
        page.section("See also")
        page.paragraph("sugard-forward(8), sugard(8), sugarctl(1)")
        return page.roff
    }

    public static func parse(_ arguments: [String], environment: [String: String]) throws(ConfigError) -> HubCommand {
        var flags: [(String, String)] = []
        var configFile: String?
        var index = 0
        while index < arguments.count {
            let arg = arguments[index]
            let (name, inline) = ConfigFile.splitFlag(arg)
            func flagValue() throws(ConfigError) -> String {
                if let inline { return inline }
                index += 1
                guard index < arguments.count, !arguments[index].hasPrefix("--") else { throw ConfigError("\(name) needs a value") }
                return arguments[index]
            }
            switch name {
            case "-h", "--help": return .help
            case "--version": return .version
            case "--generate-man": return .manPage
            case "--config": configFile = try flagValue()
            case "--log-level": flags.append(("log_level", try flagValue()))
            default: throw ConfigError("unknown option \"\(arg)\" (see sugard-hub --help)")
            }
            index += 1
        }
        var config = HubConfig()
        let file = configFile ?? environment["SUGARD_HUB_CONFIG"].flatMap { $0.isEmpty ? nil : $0 } ?? Self.defaultConfigFile
        guard let text = try ConfigFile.readText(file) else {
            throw ConfigError(file: file, "no such file (sugard-hub needs at least database_url)")
        }
        try ConfigFile.parse(text, file: file) { (key, value) throws(ConfigError) in try config.apply(key: key, value: value) }
        for (key, value) in flags {
            do {
                try config.apply(key: key, value: value)
            } catch {
                throw ConfigError("--\(key.replacing("_", with: "-")): \(error.message)")
            }
        }
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

extension String {
    fileprivate func hubPadding(_ width: Int) -> String {
        self.count >= width ? self + " " : self + String(repeating: " ", count: width - self.count)
    }
}
