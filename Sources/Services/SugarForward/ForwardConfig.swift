import Glibc
import GlucoseProfile
public import NightscoutSink
import ProcessKit
public import SugarWire
import SystemIO

/// Everything `sugard-forward` can be told: the keys of `/etc/sugard/forward.conf` (same
/// `key = value` format and `file:line` errors as `sugard.conf`) and the flags.
public struct ForwardConfig: Equatable, Sendable {
    /// The display unit: the wire's (one unit type for every program).
    public typealias Unit = Wire.Unit

    /// The broker as written (`mqtt_url`); `mqttHost`, `mqttPort` and `mqttTLS` are parsed from it.
    public var mqttURL: String = "mqtt://localhost"
    /// Whether the file or a flag set `mqtt_url` (see ``mqttEnabled``).
    public var mqttURLSet = false
    /// The broker's host name or address, from `mqtt_url`.
    public var mqttHost: String = "localhost"
    /// The broker's TCP port, from `mqtt_url` (1883, or 8883 for `mqtts://`, when it names none).
    public var mqttPort: Int32 = 1883
    /// Whether `mqtt_url` is `mqtts://`.
    public var mqttTLS = false
    /// PEM CA certificates the broker's certificate must chain to (`mqtt_ca_file`).
    public var mqttCAFile: String?
    /// The broker user name (`mqtt_username`); nil: connect without one.
    public var mqttUsername: String?
    /// The file whose first line is the broker password (`mqtt_password_file`).
    public var mqttPasswordFile: String?
    /// nil: `sugard-<gateway_id>`.
    public var mqttClientIDSetting: String?
    /// The first topic level (`topic_prefix`); may contain `/`.
    public var topicPrefix = "sugard"
    /// This gateway's topic level (`gateway_id`); the host name, lower-case, by default.
    public var gatewayID: String
    /// Whether Home Assistant discovery configs are published (`homeassistant_discovery`).
    public var homeAssistantDiscovery = true
    /// The topic prefix Home Assistant watches for discovery configs (`homeassistant_prefix`).
    public var homeAssistantPrefix = "homeassistant"
    /// The unit the Home Assistant glucose entity shows (`unit`): mg/dL or mmol/L.
    public var unit: Unit = .mgdl
    /// Home Assistant's "Glucose low" is on for a LO or a glucose value below this (mg/dL).
    public var glucoseLowMgdL: Double = 70
    /// "Glucose high" is on for a HI or a glucose value above this (mg/dL).
    public var glucoseHighMgdL: Double = 250
    /// "Sync overdue" is on when a meter has not synced for this long (hours).
    public var syncOverdueHours: Double = 24
    /// The minimum level logged (`log_level`, `--log-level`).
    public var logLevel: LogLevel = .info
    /// sugard's socket.
    public var socketPath: String
    /// Where the delivery cursor (and the status socket) live.
    public var stateDirectory: String

    /// The Nightscout sinks: the `nightscout_*` keys before any section (the sink `nightscout`) and
    /// each `[nightscout NAME]` section.
    public var nightscout: [NightscoutSinkConfig] = []
    /// The alert rules (top-level `alert_*` keys, `[person NAME]` and `[meter ADDRESS]` sections).
    public var alerts = AlertConfig()
    /// The `[webhook NAME]` sections: where alert events are POSTed.
    public var webhooks: [WebhookConfig] = []

    /// The MQTT client id: `mqtt_client_id`, else `sugard-<gateway_id>`.
    public var mqttClientID: String { self.mqttClientIDSetting ?? "sugard-\(self.gatewayID)" }

    /// The MQTT sink runs when `mqtt_url` is set, or when no Nightscout sink is configured (then
    /// with the default `mqtt://localhost`, as before there were Nightscout sinks).
    public var mqttEnabled: Bool { self.mqttURLSet || self.nightscout.isEmpty }

    /// Every key at its default, with the given gateway id, sugard socket and state directory.
    public init(gatewayID: String, socketPath: String, stateDirectory: String) {
        self.gatewayID = gatewayID
        self.socketPath = socketPath
        self.stateDirectory = stateDirectory
    }

    /// Every top-level key of forward.conf, declared once (the alert keys are ``AlertSettings/keys``
    /// setting ``alerts``' top level; the Nightscout keys are ``NightscoutSinkConfig/keys``, the
    /// `[webhook NAME]` keys ``WebhookConfig/keys``). ``apply(key:value:)``, `--help`, the man page,
    /// config/forward.conf.example and docs/configuration.md read these tables.
    public static let keys: [ConfigKey<ForwardConfig>] = [
        ConfigKey(
            "mqtt_url",
            "mqtt://HOST[:PORT] (default port 1883) or mqtts://HOST[:PORT] (default 8883, needs mqtt_ca_file); default mqtt://localhost, but without it and with a Nightscout sink there is no MQTT sink",
            intro: "The MQTT broker. Without mqtt_url: mqtt://localhost, unless a Nightscout sink is configured (then no MQTT sink).",
            { $0.mqttURL }
        ) {
            let broker = try ConfigFile.brokerURL($1.key, $1.value)
            ($0.mqttURL, $0.mqttURLSet, $0.mqttHost, $0.mqttPort, $0.mqttTLS) = ($1.value, true, broker.host, broker.port, broker.tls)
        },
        ConfigKey("mqtt_ca_file", "CA certificates (PEM) the broker's TLS certificate must chain to", example: "/etc/ssl/certs/ca-certificates.crt", {
            $0.mqttCAFile ?? ""
        }) { $0.mqttCAFile = $1.optional },
        ConfigKey("mqtt_username", "user name for the broker", example: "gateway", { $0.mqttUsername ?? "" }) { $0.mqttUsername = $1.optional },
        ConfigKey("mqtt_password_file", "file holding the broker password (first line)", example: "/etc/sugard/mqtt-password", {
            $0.mqttPasswordFile ?? ""
        }) { $0.mqttPasswordFile = $1.optional },
        ConfigKey("mqtt_client_id", "MQTT client id (default sugard-<gateway_id>)", example: "sugard-gateway", { $0.mqttClientIDSetting ?? "" }) {
            $0.mqttClientIDSetting = $1.optional
        },
        ConfigKey(
            "topic_prefix", "first topic level (default sugard)",
            intro: "Topics: <topic_prefix>/<gateway_id>/status and <topic_prefix>/<gateway_id>/<meter>/{reading,state} (and, with Home Assistant discovery, .../{event,low,high,last_synced,sync_overdue} and .../adapter).",
            { $0.topicPrefix }
        ) { $0.topicPrefix = try ConfigFile.topicLevel($1.key, $1.value, allowSlash: true) },
        ConfigKey("gateway_id", "this gateway's topic level (default: the host name, lower-case)", example: "gateway", { $0.gatewayID }) {
            $0.gatewayID = try ConfigFile.topicLevel($1.key, $1.value)
        },
        ConfigKey(
            "homeassistant_discovery", "publish Home Assistant discovery configs (default true)",
            intro: "Home Assistant MQTT discovery: per meter \"Glucose\", \"Glucose low\", \"Glucose high\", a \"Reading\" event, \"Last synced\" and \"Sync overdue\"; per gateway \"Bluetooth adapter\" (docs/home-assistant.md).",
            { String($0.homeAssistantDiscovery) }
        ) {
            guard let on = try? $1.bool() else { throw ConfigError("homeassistant_discovery must be true or false, not \"\($1.value)\"") }
            $0.homeAssistantDiscovery = on
        },
        ConfigKey("homeassistant_prefix", "Home Assistant's discovery prefix (default homeassistant)", { $0.homeAssistantPrefix }) {
            $0.homeAssistantPrefix = try ConfigFile.topicLevel($1.key, $1.value, allowSlash: true)
        },
        ConfigKey("unit", "the Home Assistant entity's unit: mgdl (default) or mmol", { $0.unit.rawValue }) {
            guard let unit = Wire.Unit(text: $1.value) else { throw ConfigError("unit must be mgdl or mmol, not \"\($1.value)\"") }
            $0.unit = unit
        },
        ConfigKey(
            "glucose_low_mgdl", "Home Assistant's \"Glucose low\" turns on for a LO or a glucose value below this, in mg/dL (default 70)",
            { Self.number($0.glucoseLowMgdL) }
        ) { $0.glucoseLowMgdL = try Self.threshold($1) },
        ConfigKey(
            "glucose_high_mgdl", "\"Glucose high\" turns on for a HI or a glucose value above this, in mg/dL (default 250)",
            { Self.number($0.glucoseHighMgdL) }
        ) { $0.glucoseHighMgdL = try Self.threshold($1) },
        ConfigKey(
            "sync_overdue_hours",
            "\"Sync overdue\" (and a meter's overdue in the health topic) turns on when a meter has not synced for this many hours (default 24)",
            { Self.number($0.syncOverdueHours) }
        ) {
            guard let number = Double($1.value), number.isFinite, number > 0, number <= 24 * 365 else {
                throw ConfigError("sync_overdue_hours must be a number of hours above 0, not \"\($1.value)\"")
            }
            $0.syncOverdueHours = number
        },
        ConfigKey("log_level", flag: "--log-level", "error, warning, notice, info (default) or debug", { $0.logLevel.name }) {
            $0.logLevel = try $1.logLevel()
        },
        ConfigKey("socket", flag: "--socket", "sugard's socket (like sugarctl: $SUGARD_SOCKET, the system socket, the demo's)", { $0.socketPath }) {
            guard !$1.value.isEmpty, $1.value.utf8.count < 108 else { throw ConfigError("socket must be a path shorter than 108 bytes") }
            $0.socketPath = $1.value
        },
        ConfigKey("state_dir", flag: "--state-dir", "directory for the delivery cursors and the status socket", { $0.stateDirectory }) {
            $0.stateDirectory = try $1.nonEmpty()
        },
    ] + AlertSettings.keys.map { $0.lifted(to: \ForwardConfig.alerts.top) }

    /// The keys a file may set before any section: the forwarder's and the Nightscout sink's.
    static var topLevelKeyNames: [String] { Self.keys.map(\.key) + NightscoutSinkConfig.keys.map(\.key) }

    static func threshold(_ setting: ConfigSetting) throws(ConfigError) -> Double {
        guard let number = Double(setting.value), number.isFinite, number > 0, number < 1000 else {
            throw ConfigError("\(setting.key) must be a number of mg/dL between 0 and 1000, not \"\(setting.value)\"")
        }
        return number
    }

    /// Sets one top-level key (the forwarder's or an alert key) from forward.conf or a flag; throws
    /// ``ConfigError`` for an unknown key (listing the known ones) or a bad value.
    public mutating func apply(key: String, value: String) throws(ConfigError) {
        guard let entry = Self.keys.key(key) else {
            throw ConfigError("unknown key \"\(key)\" (known keys: \(Self.topLevelKeyNames.joined(separator: ", ")))")
        }
        try entry.apply(value, to: &self)
    }

    /// forward.conf as its docs show it: the example file, the reference table, `--help` and the man
    /// page's keys, from the tables.
    public static var reference: ConfigFileDoc {
        // The gateway id defaults to the host name: the docs show no default for it, only a sample.
        let defaults = ForwardConfig(
            gatewayID: "", socketPath: DefaultPaths.systemSocket, stateDirectory: ForwardCommandLine.defaultStateDirectory)
        return ConfigFileDoc(
            name: "forward.conf",
            header: """
                /etc/sugard/forward.conf: configuration of sugard-forward, which sends every reading sugard stores to an \
                MQTT broker (and Home Assistant) and to Nightscout sites (generated by sugard-forward --print-example-config \
                from its key tables; man sugard-forward).

                Format: one "key = value" per line; lines starting with # or ; are comments. Every key is shown commented \
                out with its default (or a sample where it has none): remove the # to change one. Unknown keys and bad \
                values stop sugard-forward at start-up with an error naming this file and the line; restart it after a \
                change (`systemctl restart sugard-forward`). The package installs this file readable only by root and the \
                sugard-forward user (0640 root:sugard-forward): keep it so, it may hold tokens.
                """,
            keys: Self.keys.map { $0.doc(defaults: defaults, table: AlertSettings.keyNames.contains($0.key) ? "AlertSettings.keys" : "ForwardConfig.keys") }
                + NightscoutSinkConfig.keys.map { $0.doc(defaults: NightscoutSinkConfig(), table: "NightscoutSinkConfig.keys") }
                + WebhookConfig.keys.map { $0.doc(defaults: WebhookConfig(name: "NAME"), section: "[webhook NAME]", table: "WebhookConfig.keys") },
            trailer: """
                # Sections. The alert keys in a [person NAME] or [meter ADDRESS] section apply to that person or
                # meter only (a meter's section first, then its person's, then the top level); each
                # [nightscout NAME] section starts another Nightscout sink (until the next section); each
                # [webhook NAME] section gets every alert event, in order, retried until it answers 2xx.
                #
                # [person Mia]
                # alert_low = 4.4 mmol/L
                # [meter C0:26:DA:01:3A:7F]
                # alert_sync_overdue = 3d
                #
                #[nightscout mia]
                #nightscout_url = https://mia.example.net
                #nightscout_api_secret_file = /etc/sugard/mia.secret
                #nightscout_person = Mia
                """)
    }

    /// Checks what only makes sense together (after the file and the flags).
    public func validate(file: String?) throws(ConfigError) {
        if !self.mqttEnabled,
            self.mqttUsername != nil || self.mqttPasswordFile != nil || self.mqttClientIDSetting != nil || self.mqttCAFile != nil
        {
            throw ConfigError(file: file, "mqtt_* keys are set but mqtt_url is not (with Nightscout sinks, MQTT needs mqtt_url)")
        }
        if self.nightscout.contains(where: { $0.name == "mqtt" }) {
            throw ConfigError(file: file, "a Nightscout sink cannot be named mqtt (the MQTT sink's name)")
        }
        if self.glucoseLowMgdL >= self.glucoseHighMgdL {
            throw ConfigError(
                file: file,
                "glucose_low_mgdl (\(Self.number(self.glucoseLowMgdL))) must be below glucose_high_mgdl (\(Self.number(self.glucoseHighMgdL)))")
        }
        try self.alerts.validate(file: file, defaultLow: self.glucoseLowMgdL, defaultHigh: self.glucoseHighMgdL)
        if self.mqttTLS, self.mqttCAFile == nil {
            throw ConfigError(file: file, "mqtts:// needs mqtt_ca_file (the CA that signed the broker's certificate)")
        }
        if !self.mqttTLS, self.mqttCAFile != nil {
            throw ConfigError(file: file, "mqtt_ca_file is set but mqtt_url is not mqtts://")
        }
    }

    /// `70`, `70.5`: a threshold as it was written.
    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }

    /// The broker password (first line of `mqtt_password_file`), nil when none is configured.
    public func password() throws(ConfigError) -> String? {
        guard let file = self.mqttPasswordFile else { return nil }
        guard let text = try ConfigFile.readText(file) else { throw ConfigError(file: file, "no such file (mqtt_password_file)") }
        let line = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }).first ?? ""
        return String(line)
    }

    /// The host name, lower-case: the default gateway id.
    public static func hostName() -> String {
        guard let name = processHostName() else { return "gateway" }
        return String(name.map { $0 == "/" || $0 == "+" || $0 == "#" ? "-" : $0 })
    }
}

/// What `sugard-forward`'s command line asked for.
public enum ForwardCommand: Equatable, Sendable {
    /// Run with this configuration.
    case run(ForwardConfig)
    /// `--help`, `--version`, `--generate-man`, `--print-example-config` or `--print-config-reference`:
    /// the text to print (``ServiceManual/text(for:version:)``), then exit 0.
    case print(String)
}

/// `sugard-forward`'s command line: flags, `--help`, the man page, and reading forward.conf.
public enum ForwardCommandLine {
    /// Where forward.conf is read from without `--config`; a missing default file means every default.
    public static let defaultConfigFile = DefaultPaths.forwardConfigFile
    /// The state directory without `--state-dir`, `state_dir` or `STATE_DIRECTORY`.
    public static let defaultStateDirectory = "/var/lib/sugard-forward"
    /// The group that may read forward.conf and the secret files it names (besides root): the
    /// service's user is its only member (systemd/sugard-forward.sysusers).
    public static let serviceGroup = DefaultPaths.forwardSecretGroup

    static let summary = "every stored reading to an MQTT 5 broker, Home Assistant and Nightscout"
    static let description = """
        Follows sugard's readings in commit order (FollowReadings) and publishes each one once \
        (QoS 1) to <topic_prefix>/<gateway_id>/<meter>/reading (with its kind: glucose, lo, hi, \
        controlSolution, ketone or noValue), keeps the retained state topic (glucose values only) and \
        Home Assistant's entities up to date (Glucose, Glucose low, Glucose high, a Reading event, Last \
        synced, Sync overdue, Bluetooth adapter), and resumes after the last reading the broker \
        acknowledged when restarted. Nightscout sinks (the nightscout_* keys before any section form \
        the sink "nightscout"; each [nightscout NAME] section another) post the readings as entries \
        (and BG Check treatments; LO and HI as Note treatments) to a Nightscout site, each from its own feed and cursor \
        (nightscout-NAME.cursor in the state directory), so a slow or failing site holds back no other \
        sink; with nightscout_person a sink gets only that person's readings, and readings of an \
        unassigned meter go only to sinks without a person. SIGHUP retries refused and paused \
        Nightscout sinks and retrying webhooks now. \
        Alerts: the rules low (below alert_low, default 70 mg/dL), urgent_low (a LO or below alert_urgent_low, \
        54), high (a HI or above alert_high, 250), sync_overdue (a meter not synced for alert_sync_overdue, 24h) \
        and gateway_failed (the Bluetooth adapter or the storage failed for alert_gateway_failed, 10m) fire once \
        per episode and resolve once; the alert_* keys and alerts = off also go in [person NAME] and \
        [meter ADDRESS] sections. Each alert event is published to <topic_prefix>/<gateway_id>/alert (QoS 1, \
        JSON id, rule, state firing/resolved, person, meter, reading, time, value, message) and POSTed to each \
        [webhook NAME] (url, format json/ntfy/gotify, secret_file for an X-Sugard-Signature HMAC, token_file, \
        ca_file), in order and retried; the state lives in alerts.json in the state directory; sugarctl alerts \
        shows it. \
        The gateway's health (adapter, storage, database, meters with their last sync and overdue \
        flag, active alerts, sinks) goes to the retained <topic_prefix>/<gateway_id>/health topic \
        on each change and at least every 5 minutes, for sugard-hub.
        """
    static let synopsis = "sugard-forward [--config FILE] [--socket PATH] [--state-dir DIR] [--log-level LEVEL]"
    static let exitStatus = "0 stopped by SIGTERM/SIGINT, 64 bad flags, 78 bad config file (also: a password, API secret or token that other users may read: the config file holding it inline, or a *_file it names, with mode o+r)."

    /// The flags, for `--help` and the man page.
    public static let options: [(flag: String, help: String)] = [
        ("--config FILE", "Config file (default /etc/sugard/forward.conf; it must exist when given)."),
        ("--socket PATH", "sugard's socket (default $SUGARD_SOCKET, else the system socket /run/sugard/io.sugard.HealthDataSync if it exists, else the demo's)."),
        ("--state-dir DIR", "Delivery cursors and status socket io.sugard.Forward (default $STATE_DIRECTORY or /var/lib/sugard-forward)."),
        ("--log-level LEVEL", "error, warning, notice, info (default) or debug."),
        ("--print-example-config", "Print the commented example forward.conf (every key with its default), made from the key tables."),
        ("--print-config-reference", "Print the key tables of forward.conf as Markdown (docs/configuration.md)."),
        ("--version", "Print the version."),
        ("-h, --help", "Show this help."),
    ]

    /// `--help` and sugard-forward(8), from one description and the key tables.
    static var manual: ServiceManual {
        ServiceManual(
            name: "sugard-forward", summary: summary, description: description, synopsis: synopsis, options: options,
            keyBlocks: [
                .init(
                    title: "CONFIG KEYS (key = value; a [nightscout NAME] line starts a Nightscout sink's section, [webhook NAME] a "
                        + "webhook's, [person NAME] and [meter ADDRESS] a section of alert_* keys for that person or meter):",
                    lines: ForwardConfig.reference.helpLines()),
                .init(
                    title: "WEBHOOK KEYS (in a [webhook NAME] section; alert events are POSTed there in order, retried until accepted):",
                    lines: ForwardConfig.reference.helpLines(section: "[webhook NAME]")),
            ],
            configuration: "\(defaultConfigFile): one key = value per line, # comments; errors name the file and line. "
                + "A [nightscout NAME] line starts a Nightscout sink's section (nightscout_* keys only) until the next one; "
                + "[webhook NAME] a webhook's (url, format, secret_file, token_file, ca_file); [person NAME] and "
                + "[meter ADDRESS] the alert keys (alerts, alert_*) of that person or meter.",
            reference: ForwardConfig.reference, exitStatus: exitStatus, seeAlso: "sugard(8), sugarctl(1), sugard.conf(5)")
    }

    /// The `--help` text: overview, usage, options, every forward.conf key and the exit statuses.
    public static var usage: String { Self.manual.usage }

    /// sugard-forward(8), built from the tables behind `--help`.
    public static func manPage() -> String { Self.manual.manPage() }

    /// Parses arguments (without the program name): defaults, then the file, then the flags.
    public static func parse(_ arguments: [String], environment: [String: String]) throws(ConfigError) -> ForwardCommand {
        let request = try ServiceArguments.parse(
            arguments, program: "sugard-forward", key: { flag in ForwardConfig.keys.first(where: { $0.flag == flag })?.key })
        guard case .run(let configFile, let flags) = request else {
            return .print(Self.manual.text(for: request, version: sugardForwardVersion) ?? "")
        }
        let state = environment["STATE_DIRECTORY"].flatMap { $0.isEmpty ? nil : String($0.split(separator: ":").first ?? "") }
        var config = ForwardConfig(
            gatewayID: ForwardConfig.hostName(), socketPath: DefaultPaths.clientSocket(environment: environment),
            stateDirectory: state ?? Self.defaultStateDirectory)
        let file = configFile ?? Self.defaultConfigFile
        let text = try ConfigFile.readText(file)
        if let text {
            try config.apply(fileText: text, file: file)
        } else if configFile != nil {
            throw ConfigError(file: file, "no such file")
        }
        try ServiceArguments.apply(flags) { (key, value) throws(ConfigError) in try config.apply(key: key, value: value) }
        try config.validate(file: configFile ?? (ConfigFile.exists(file) ? file : nil))
        if let text { try ConfigFile.checkSecrets(fileText: text, file: file, serviceGroup: Self.serviceGroup) }
        return .run(config)
    }
}

extension ForwardConfig {
    /// The file's keys: the forwarder's own (before any section), its Nightscout sinks, its
    /// webhooks (`[webhook NAME]`) and the alert rules of people and meters (`[person NAME]`,
    /// `[meter ADDRESS]`).
    public mutating func apply(fileText text: String, file: String) throws(ConfigError) {
        let sections = NightscoutSinkConfig.sections(of: text)
        let top = sections.first?.text ?? ""
        try ConfigFile.parse(top, file: file) { (key, value) throws(ConfigError) in
            if NightscoutSinkConfig.keyNames.contains(key) { return }
            if WebhookConfig.keys.key(key) != nil {
                throw ConfigError("\(key) belongs in a [webhook NAME] section")
            }
            try self.apply(key: key, value: value)
        }
        let others = AlertConfig.sectionKinds.union(["webhook"])
        self.nightscout = try NightscoutSinkConfig.sinks(in: text, file: file, otherSections: others)
        for section in sections.dropFirst() {
            guard let header = section.header else { continue }
            let inner = header.text.dropFirst().dropLast()
            let space = inner.firstIndex(of: " ") ?? inner.endIndex
            let kind = String(inner[..<space])
            let name = space == inner.endIndex ? "" : inner[inner.index(after: space)...].trimmingSpaces()
            guard header.text.hasSuffix("]"), others.contains(kind) else { continue }
            guard !name.isEmpty else { throw ConfigError(file: file, line: header.line, "[\(kind)] needs a name: [\(kind) NAME]") }
            if kind == "webhook" {
                guard name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else {
                    throw ConfigError(file: file, line: header.line, "a section is [webhook NAME] (NAME: letters, digits, - or _)")
                }
                guard !self.webhooks.contains(where: { $0.name == name }) else {
                    throw ConfigError(file: file, line: header.line, "webhook \(name) is defined twice")
                }
                var webhook = WebhookConfig(name: name)
                try ConfigFile.parse(section.text, file: file) { (key, value) throws(ConfigError) in try webhook.apply(key: key, value: value) }
                guard !webhook.url.isEmpty else { throw ConfigError(file: file, line: header.line, "webhook \(name) needs url") }
                self.webhooks.append(webhook)
            } else {
                try self.alerts.apply(section: kind, name: name, text: section.text, file: file, line: header.line)
            }
        }
    }
}

extension ConfigFile {
    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }
}

