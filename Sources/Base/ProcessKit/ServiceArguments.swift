/// What the command line of a service program (`sugard-forward`, `sugard-hub`) asks for: one of
/// the informational flags every such program has, or to run with an optional config file and the
/// flags that set config keys, in the order given (they override the file).
public enum ServiceArguments: Equatable, Sendable {
    /// `-h`, `--help`.
    case help
    /// `--version`.
    case version
    /// `--generate-man`: the man page in roff.
    case manPage
    /// `--print-example-config`: the commented example config file, from the key tables.
    case exampleConfig
    /// `--print-config-reference`: docs/configuration.md's table of the file's keys.
    case configReference
    /// Run: `--config FILE` (nil: the default file) and each key flag as (key, value).
    case run(configFile: String?, keyFlags: [KeyFlag])

    /// A flag that sets a config key: the key's name and the value given.
    public struct KeyFlag: Equatable, Sendable {
        /// The config key the flag sets (`gateway_id` for `--gateway-id`).
        public var key: String
        /// The value as given on the command line.
        public var value: String

        /// A key flag with its value.
        public init(key: String, value: String) {
            self.key = key
            self.value = value
        }
    }

    /// Parses `arguments` (without the program name). A flag takes its value as `--flag VALUE` or
    /// `--flag=VALUE`; `key(flag)` names the config key a flag sets (from the program's key table),
    /// nil when the flag is none of them.
    /// - Throws: ``ConfigError`` naming an unknown option (and `program --help`), or a flag
    ///   without its value.
    public static func parse(
        _ arguments: [String], program: String, key: (String) -> String?
    ) throws(ConfigError) -> ServiceArguments {
        var flags: [KeyFlag] = []
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
            case "--print-example-config": return .exampleConfig
            case "--print-config-reference": return .configReference
            case "--config": configFile = try flagValue()
            default:
                guard let key = key(name) else { throw ConfigError("unknown option \"\(arg)\" (see \(program) --help)") }
                flags.append(KeyFlag(key: key, value: try flagValue()))
            }
            index += 1
        }
        return .run(configFile: configFile, keyFlags: flags)
    }

    /// Sets each key flag through `apply` (after the file, so the command line wins).
    /// - Throws: ``ConfigError`` `--flag-name: why` for the first value `apply` refuses.
    public static func apply(_ flags: [KeyFlag], _ apply: (String, String) throws(ConfigError) -> Void) throws(ConfigError) {
        for flag in flags {
            do {
                try apply(flag.key, flag.value)
            } catch {
                throw ConfigError("--\(flag.key.replacing("_", with: "-")): \(error.message)")
            }
        }
    }
}
