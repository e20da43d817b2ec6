import SystemIO

/// One key of a configuration file, declared once: its name, the flag that sets the same value,
/// the section it belongs in, its one-line help, how it parses and how it reads back.
///
/// A program's table of these (`DaemonConfig.keys`, `ForwardConfig.keys`, `HubConfig.keys`, ...)
/// is the only place a key is defined: the parser looks keys up in it (no separate switch over key
/// names), and `--help`, the man page, the commented example file (`--print-example-config`) and
/// docs/configuration.md (`--print-config-reference`) are written from it through ``ConfigKeyDoc``.
public struct ConfigKey<Settings>: Sendable {
    /// The key's name as written in the file (`mqtt_url`).
    public let key: String
    /// The command-line flag that sets the same value, if any.
    public let flag: String?
    /// One line for `--help`, the man page, the example file and the reference table.
    public let help: String
    /// Whether `systemctl reload` applies a change at once (sugard); otherwise a restart is needed.
    public let appliesOnReload: Bool
    /// The value the example file shows when the default reads back empty (a sample, not a default).
    public let example: String?
    /// A comment paragraph the example file shows before this key (the start of a group of keys).
    public let intro: String?
    /// Whether the example file sets the key (a required key) instead of showing it commented out.
    public let setInExample: Bool
    /// The key's value in a configuration, as text (for comparing configurations and for showing
    /// the default).
    public let value: @Sendable (Settings) -> String
    /// Parses the value into the configuration; throws ``ConfigError`` (anything else is wrapped).
    let set: @Sendable (inout Settings, ConfigSetting) throws -> Void

    /// Declares a key: `value` reads it back from a configuration, `set` parses a setting into one
    /// (throwing `ConfigError`, or any error, which `apply(_:to:)` wraps with the key's name).
    public init(
        _ key: String, flag: String? = nil, _ help: String, appliesOnReload: Bool = false, example: String? = nil,
        intro: String? = nil, setInExample: Bool = false, _ value: @escaping @Sendable (Settings) -> String,
        set: @escaping @Sendable (inout Settings, ConfigSetting) throws -> Void
    ) {
        self.key = key
        self.flag = flag
        self.help = help
        self.appliesOnReload = appliesOnReload
        self.example = example
        self.intro = intro
        self.setInExample = setInExample
        self.value = value
        self.set = set
    }

    /// Parses `value` into `settings`; the error's message names the key where the parser's does not.
    public func apply(_ value: String, to settings: inout Settings) throws(ConfigError) {
        do {
            try self.set(&settings, ConfigSetting(key: self.key, value: value))
        } catch let error as ConfigError {
            throw error
        } catch {
            throw ConfigError("\(self.key): \(error)")
        }
    }

    /// The same key setting a part of a larger configuration (the alert keys of forward.conf's top
    /// level, kept in `ForwardConfig.alerts.top`).
    public func lifted<Outer>(to path: WritableKeyPath<Outer, Settings> & Sendable) -> ConfigKey<Outer> {
        let (value, set) = (self.value, self.set)
        return ConfigKey<Outer>(
            self.key, flag: self.flag, self.help, appliesOnReload: self.appliesOnReload, example: self.example, intro: self.intro,
            setInExample: self.setInExample, { value($0[keyPath: path]) }
        ) { outer, setting in try set(&outer[keyPath: path], setting) }
    }

    /// How the docs show this key: its default read back from `defaults` (else the sample).
    public func doc(defaults: Settings, section: String? = nil, table: String) -> ConfigKeyDoc {
        let shown = self.value(defaults)
        return ConfigKeyDoc(
            key: self.key, flag: self.flag, section: section, help: self.help, table: table,
            defaultValue: shown.isEmpty ? nil : shown, example: shown.isEmpty ? (self.example ?? "") : shown, intro: self.intro,
            setInExample: self.setInExample)
    }
}

extension Array {
    /// The key named `name` in a table of ``ConfigKey``s.
    public func key<Settings>(_ name: String) -> ConfigKey<Settings>? where Element == ConfigKey<Settings> {
        self.first { $0.key == name }
    }
}

/// One `key = value` being applied, with the checks the keys share (their messages name the key).
public struct ConfigSetting: Sendable {
    /// The key being set, which the checks' messages name.
    public let key: String
    /// The value as written, surrounding spaces and enclosing double quotes removed.
    public let value: String

    /// A setting of `key` to `value`.
    public init(key: String, value: String) {
        self.key = key
        self.value = value
    }

    /// A whole number inside `range`; throws `ConfigError` naming the key and the range otherwise.
    public func int(_ range: ClosedRange<Int>) throws(ConfigError) -> Int {
        guard let v = Int(self.value), range.contains(v) else {
            throw ConfigError("\(self.key) must be a whole number from \(range.lowerBound) to \(range.upperBound), not \"\(self.value)\"")
        }
        return v
    }

    /// `true`/`yes`/`on`/`1` or `false`/`no`/`off`/`0`.
    public func bool() throws(ConfigError) -> Bool {
        switch self.value.lowercased() {
        case "true", "yes", "on", "1": return true
        case "false", "no", "off", "0": return false
        default: throw ConfigError("\(self.key) must be true or false, not \"\(self.value)\"")
        }
    }

    /// A duration: whole seconds, or a number with `s`, `m` or `h` (`120`, `120s`, `2m`, `1h`).
    public func seconds(_ range: ClosedRange<Int>) throws(ConfigError) -> Int {
        let text = self.value.lowercased()
        let scales: [Character: Int] = ["s": 1, "m": 60, "h": 3600]
        var number = Substring(text)
        var scale = 1
        if let last = text.last, let unit = scales[last] {
            number = text.dropLast()
            scale = unit
        }
        guard let amount = Int(number), amount >= 0, amount <= range.upperBound / scale, range.contains(amount * scale) else {
            throw ConfigError(
                "\(self.key) must be a duration from \(range.lowerBound) to \(range.upperBound) seconds, such as 120, 120s, 2m or 1h, not \"\(self.value)\"")
        }
        return amount * scale
    }

    /// The value; throws `ConfigError` when it is empty.
    public func nonEmpty() throws(ConfigError) -> String {
        guard !self.value.isEmpty else { throw ConfigError("\(self.key) needs a value") }
        return self.value
    }

    /// The value, or nil when it is empty (an optional file or name).
    public var optional: String? { self.value.isEmpty ? nil : self.value }

    /// `error`, `warning`, `notice`, `info` or `debug`.
    public func logLevel() throws(ConfigError) -> LogLevel {
        guard let level = LogLevel(name: self.value) else {
            throw ConfigError("\(self.key) must be error, warning, notice, info or debug, not \"\(self.value)\"")
        }
        return level
    }
}

/// A key as the docs show it, whatever configuration it sets.
public struct ConfigKeyDoc: Sendable, Equatable {
    /// The key's name as written in the file.
    public var key: String
    /// The command-line flag that sets the same value, if any (`--socket`).
    public var flag: String?
    /// Where the key goes: nil for the top of the file, else the section (`[webhook NAME]`).
    public var section: String?
    /// The key's one-line help.
    public var help: String
    /// The table that declares it (`ForwardConfig.keys`): where to look for the parser.
    public var table: String
    /// The default as text; nil when there is none (the example then shows a sample).
    public var defaultValue: String?
    /// The value the example file shows: the default, or the key's sample when the default is empty.
    public var example: String
    /// A comment paragraph shown before the key in the example file (the start of a group of keys).
    public var intro: String?
    /// Whether the example file sets the key instead of showing it commented out.
    public var setInExample: Bool
}

/// A configuration file as its docs show it: the keys of its tables in order, and the prose around
/// them. Renders `--help` lines, the man page's keys, the commented example file and the Markdown
/// reference table, so that none of them lists a key by hand.
public struct ConfigFileDoc: Sendable {
    /// `forward.conf`.
    public var name: String
    /// The comment paragraphs at the top of the example file.
    public var header: String
    /// The keys in the order the docs show them; a section's keys follow one another.
    public var keys: [ConfigKeyDoc]
    /// Commented lines at the end of the example file (sample sections), written as they are.
    public var trailer: String

    /// A file's docs: `trailer` is appended to the example file as it is.
    public init(name: String, header: String, keys: [ConfigKeyDoc], trailer: String = "") {
        self.name = name
        self.header = header
        self.keys = keys
        self.trailer = trailer
    }

    /// `  key                help` lines for `--help`, keys of `section` only (nil: the top level).
    public func helpLines(section: String? = nil, width: Int = 19) -> [String] {
        self.keys.filter { $0.section == section }.map { Self.helpLine($0.key, $0.help, width: width) }
    }

    /// One `--help` line: two spaces, the term padded to `width` (or followed by one space), the help.
    public static func helpLine(_ term: String, _ help: String, width: Int = 19) -> String {
        "  " + (term.count >= width ? term + " " : term + String(repeating: " ", count: width - term.count)) + help
    }

    /// Every key as a man-page item (`key (flag --x)` in bold, then its help and default).
    public func manItems(into page: inout ManPage, flags: Bool = false) {
        for doc in self.keys {
            var term = doc.key
            if flags, let flag = doc.flag { term += " (flag " + flag + ")" }
            page.item(term, doc.help)
        }
    }

    /// The commented example file: every key with its help, commented out with its default (or a
    /// sample), the ones a file needs set.
    public var exampleFile: String {
        var out = Self.comment(self.header)
        var section: String?
        for doc in self.keys {
            if doc.section != section {
                section = doc.section
                // A section's keys are shown as a commented-out section: "# [webhook NAME]", "# url = ...".
                if let section { out += "\n" + Self.comment("The keys of a \(section) section:") + "# \(section)\n" }
            }
            if section != nil {
                out += Self.comment(doc.help) + "# " + doc.key + " = " + doc.example + "\n"
                continue
            }
            out += "\n" + (doc.intro.map { Self.comment($0) + "#\n" } ?? "") + Self.comment(doc.help)
            out += (doc.setInExample ? "" : "#") + doc.key + " = " + doc.example + "\n"
        }
        if !self.trailer.isEmpty { out += "\n" + self.trailer + (self.trailer.hasSuffix("\n") ? "" : "\n") }
        return out
    }

    /// The Markdown table of docs/configuration.md.
    public var referenceTable: String {
        let flags = self.keys.contains { $0.flag != nil }
        let sections = self.keys.contains { $0.section != nil }
        var header = ["key"]
        if flags { header.append("flag") }
        if sections { header.append("section") }
        header += ["default", "meaning", "declared in"]
        var lines = ["| " + header.joined(separator: " | ") + " |", "|" + String(repeating: "---|", count: header.count)]
        for doc in self.keys {
            var cells = ["`\(doc.key)`"]
            if flags { cells.append(doc.flag.map { "`\($0)`" } ?? "") }
            if sections { cells.append(doc.section.map { "`\($0)`" } ?? "top") }
            cells.append(doc.defaultValue.map { "`\($0)`" } ?? "")
            cells.append(String(doc.help.flatMap { $0 == "|" ? ["\\", "|"] : [$0] }))
            cells.append("`\(doc.table)`")
            lines.append("| " + cells.joined(separator: " | ") + " |")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// `# ` lines of at most 100 columns.
    static func comment(_ text: String) -> String {
        var out = ""
        for paragraph in text.split(separator: "\n", omittingEmptySubsequences: false) {
            var line = "#"
            for word in paragraph.split(separator: " ") {
                if line.count + 1 + word.count > 100, line != "#" {
                    out += line + "\n"
                    line = "#"
                }
                line += " " + word
            }
            out += line + "\n"
        }
        return out
    }
}
