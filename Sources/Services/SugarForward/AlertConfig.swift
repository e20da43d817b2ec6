import ProcessKit
import SugarWire

/// The alert rules' settings at one level of forward.conf: the top (before any section), a
/// `[person NAME]` section or a `[meter ADDRESS]` section. nil: not set here (the next level
/// decides). A rule set to `off` is `.off`.
public struct AlertSettings: Sendable, Equatable {
    /// A rule's setting: a limit (mg/dL, or milliseconds for the time rules) or off.
    public enum Setting: Sendable, Equatable {
        case value(Double)
        case off
    }

    /// `alerts = on|off`.
    public var enabled: Bool?
    /// `alert_low`: `low` fires below this many mg/dL.
    public var low: Setting?
    /// `alert_urgent_low`: `urgent_low` fires for a LO or below this many mg/dL.
    public var urgentLow: Setting?
    /// `alert_high`: `high` fires for a HI or above this many mg/dL.
    public var high: Setting?
    /// `alert_sync_overdue`: `sync_overdue` fires when a meter has not synced for this many milliseconds.
    public var syncOverdue: Setting?
    /// `alert_gateway_failed`: `gateway_failed` fires when the adapter or the storage has failed this
    /// many milliseconds.
    public var gatewayFailed: Setting?
    /// `alert_max_age`: readings measured more than this many milliseconds ago fire no glucose alert.
    public var maxAge: Setting?

    /// Nothing set at this level.
    public init() {}

    /// The alert keys of every level (the top of forward.conf, `[person NAME]`, `[meter ADDRESS]`),
    /// declared once: parsing, `--help`, the man page, the example file and the docs read this table.
    public static let keys: [ConfigKey<AlertSettings>] = [
        ConfigKey(
            "alerts", "on (default) or off: every alert rule (at the top), or this person's or meter's (in a [person NAME] or [meter ADDRESS] section)",
            example: "on",
            intro: "Alerts (docs/alerts.md). Each rule fires once per episode and resolves once: published to <topic_prefix>/<gateway_id>/alert and POSTed to every [webhook NAME]; sugarctl alerts shows them. Glucose limits in mg/dL (70) or with a unit (\"3.9 mmol/L\"); times with a unit (90m, 24h, 2d); any rule, or all of them with alerts, can be off. The same keys go in [person NAME] and [meter ADDRESS] sections (see the end of this file).",
            { $0.enabled.map { $0 ? "on" : "off" } ?? "" }
        ) {
            switch $1.value.lowercased() {
            case "on", "true", "yes", "1": $0.enabled = true
            case "off", "false", "no", "0": $0.enabled = false
            default: throw ConfigError("alerts must be on or off, not \"\($1.value)\"")
            }
        },
        ConfigKey(
            "alert_low", "low fires for a glucose value below this: 70 (mg/dL), \"3.9 mmol/L\", or off (default: glucose_low_mgdl, 70)", example: "70",
            { $0.low.text }
        ) { $0.low = try Self.glucose($1.key, $1.value) },
        ConfigKey(
            "alert_urgent_low", "urgent_low fires for a LO or a glucose value below this (default 54 mg/dL; off turns it off)", example: "54",
            { $0.urgentLow.text }
        ) { $0.urgentLow = try Self.glucose($1.key, $1.value) },
        ConfigKey(
            "alert_high", "high fires for a HI or a glucose value above this (default: glucose_high_mgdl, 250 mg/dL; or off)", example: "250",
            { $0.high.text }
        ) { $0.high = try Self.glucose($1.key, $1.value) },
        ConfigKey(
            "alert_sync_overdue", "sync_overdue fires when a meter has not synced for this long: 90m, 2d, or off (default: sync_overdue_hours, 24h)",
            example: "24h", { $0.syncOverdue.text }
        ) { $0.syncOverdue = try Self.duration($1.key, $1.value) },
        ConfigKey(
            "alert_gateway_failed", "gateway_failed fires when the Bluetooth adapter or sugard's storage has failed this long (default 10m; or off)",
            example: "10m", { $0.gatewayFailed.text }
        ) { $0.gatewayFailed = try Self.duration($1.key, $1.value) },
        ConfigKey(
            "alert_max_age",
            "a reading measured longer ago than this fires no glucose alert (it may still resolve one): a meter synced late, or the history at the first start (default 24h; off: any age)",
            example: "24h", { $0.maxAge.text }
        ) { $0.maxAge = try Self.duration($1.key, $1.value) },
    ]

    static let keyNames: Set<String> = Set(Self.keys.map(\.key))

    /// Sets one key (one of ``keys``).
    mutating func apply(key: String, value: String) throws(ConfigError) {
        guard let entry = Self.keys.key(key) else { throw ConfigError("unknown alert key \"\(key)\"") }
        try entry.apply(value, to: &self)
    }

    static func glucose(_ key: String, _ value: String) throws(ConfigError) -> Setting {
        if value.lowercased() == "off" { return .off }
        guard let mgdL = Wire.Unit.parseGlucose(value) else {
            throw ConfigError(
                "\(key) must be a glucose value: mg/dL (70, \"70 mg/dL\") or mmol/L with its unit (\"3.9 mmol/L\"), or off; not \"\(value)\"")
        }
        return .value(mgdL)
    }

    /// `30s`, `10m`, `24h`, `2d` (a number and a unit), or `off`.
    static func duration(_ key: String, _ value: String) throws(ConfigError) -> Setting {
        let text = value.lowercased()
        if text == "off" { return .off }
        let units: [Character: Double] = ["s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000]
        guard let last = text.last, let scale = units[last], let number = Double(text.dropLast().trimmingSpaces()), number.isFinite,
            number > 0, number * scale <= 365 * 86_400_000
        else {
            throw ConfigError("\(key) must be a time with its unit (30s, 10m, 24h, 2d) up to a year, or off; not \"\(value)\"")
        }
        return .value(number * scale)
    }
}

/// The alert rules of one reading's or meter's subject, every level applied: mg/dL limits and
/// millisecond times, nil when the rule is off.
struct AlertLimits: Sendable, Equatable {
    var low: Double?
    var urgentLow: Double?
    var high: Double?
    var syncOverdueMillis: Int64?
    var gatewayFailedMillis: Int64?
    var maxAgeMillis: Int64?
}

/// Every alert setting of forward.conf: the top level, `[person NAME]` and `[meter ADDRESS]`
/// sections. What applies to a reading: its meter's section, else its person's section, else the
/// person's own thresholds in sugard (`sugarctl people edit NAME --low/--high`, low and high only),
/// else the top level, else the defaults (low: `glucose_low_mgdl`, high: `glucose_high_mgdl`,
/// urgent low 54 mg/dL, sync overdue: `sync_overdue_hours`, gateway failed 10 min, max age 24 h).
public struct AlertConfig: Sendable, Equatable {
    /// The top-level `alert_*` keys and `alerts`.
    public var top = AlertSettings()
    /// By the person's name as sugard names it.
    public var people: [String: AlertSettings] = [:]
    /// By the meter's address, upper-case.
    public var meters: [String: AlertSettings] = [:]

    /// No rule set anywhere: the defaults apply.
    public init() {}

    /// Whether any rule can fire at all (`alerts = off` at the top turns every one off).
    public var enabled: Bool { self.top.enabled != false }

    /// The limits for `meter` (its reading's `person`), with sugard's thresholds of that person
    /// (`personThresholds`, mg/dL) and the forwarder's `glucose_low_mgdl`/`glucose_high_mgdl`.
    func limits(
        meter: String?, person: String?, personThresholds: (low: Double?, high: Double?)? = nil, defaultLow: Double = 70,
        defaultHigh: Double = 250, defaultSyncOverdueMillis: Double = 24 * 3_600_000
    ) -> AlertLimits {
        let meterLevel = meter.flatMap { self.meters[$0.uppercased()] }
        let personLevel = person.flatMap { self.people[$0] }
        let levels = [meterLevel, personLevel].compactMap { $0 }
        if !self.enabled || levels.contains(where: { $0.enabled == false }) { return AlertLimits() }
        func pick(_ path: KeyPath<AlertSettings, AlertSettings.Setting?>, sugard: Double?, fallback: Double) -> Double? {
            for level in levels {
                if let setting = level[keyPath: path] { return setting.number }
            }
            if let sugard { return sugard }
            if let setting = self.top[keyPath: path] { return setting.number }
            return fallback
        }
        return AlertLimits(
            low: pick(\.low, sugard: personThresholds?.low, fallback: defaultLow),
            urgentLow: pick(\.urgentLow, sugard: nil, fallback: 54),
            high: pick(\.high, sugard: personThresholds?.high, fallback: defaultHigh),
            syncOverdueMillis: pick(\.syncOverdue, sugard: nil, fallback: defaultSyncOverdueMillis).map { Int64($0) },
            gatewayFailedMillis: pick(\.gatewayFailed, sugard: nil, fallback: 10 * 60_000).map { Int64($0) },
            maxAgeMillis: pick(\.maxAge, sugard: nil, fallback: 24 * 3_600_000).map { Int64($0) })
    }

    /// The section kinds this configuration owns (besides `[nightscout NAME]` and `[webhook NAME]`).
    static let sectionKinds: Set<String> = ["person", "meter"]

    /// Takes a `[person NAME]` or `[meter ADDRESS]` section's text (alert keys only).
    mutating func apply(section kind: String, name: String, text: String, file: String, line: Int) throws(ConfigError) {
        var settings = AlertSettings()
        try ConfigFile.parse(text, file: file) { (key, value) throws(ConfigError) in
            guard AlertSettings.keyNames.contains(key) else {
                throw ConfigError("a [\(kind) \(name)] section takes the alert keys only (\(AlertSettings.keys.map(\.key).joined(separator: ", "))), not \(key)")
            }
            try settings.apply(key: key, value: value)
        }
        if kind == "person" {
            guard let person = Person.validated(name) else { throw ConfigError(file: file, line: line, Person.rule) }
            guard self.people[person] == nil else { throw ConfigError(file: file, line: line, "[person \(person)] is there twice") }
            self.people[person] = settings
        } else {
            let meter = name.uppercased()
            guard !meter.isEmpty, !meter.contains(" ") else { throw ConfigError(file: file, line: line, "a meter section is [meter ADDRESS]") }
            guard self.meters[meter] == nil else { throw ConfigError(file: file, line: line, "[meter \(meter)] is there twice") }
            self.meters[meter] = settings
        }
    }

    /// Checks that each level's limits are in order (urgent low below low below high).
    func validate(file: String?, defaultLow: Double, defaultHigh: Double) throws(ConfigError) {
        var checks: [(String, String?, String?)] = [("the top level", nil, nil)]
        checks += self.people.keys.sorted().map { ("[person \($0)]", nil, $0) }
        checks += self.meters.keys.sorted().map { ("[meter \($0)]", $0, nil) }
        for (place, meter, person) in checks {
            let limits = self.limits(meter: meter, person: person, defaultLow: defaultLow, defaultHigh: defaultHigh)
            if let urgent = limits.urgentLow, let low = limits.low, urgent > low {
                throw ConfigError(file: file, "alert_urgent_low (\(ForwardConfig.number(urgent))) must not be above alert_low (\(ForwardConfig.number(low))) in \(place)")
            }
            if let low = limits.low ?? limits.urgentLow, let high = limits.high, low >= high {
                throw ConfigError(file: file, "alert_low (\(ForwardConfig.number(low))) must be below alert_high (\(ForwardConfig.number(high))) in \(place)")
            }
        }
    }
}

extension AlertSettings.Setting {
    var number: Double? {
        if case .value(let number) = self { number } else { nil }
    }
}

extension AlertSettings.Setting? {
    /// The setting as the reload diff and the docs compare it: empty when unset, `off`, or the
    /// number as stored (mg/dL, milliseconds).
    var text: String {
        switch self {
        case nil: ""
        case .off?: "off"
        case .value(let number)?: ForwardConfig.number(number)
        }
    }
}
