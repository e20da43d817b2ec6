// A small hand-written argument helper in the style of swift-argument-parser (which we cannot depend on):
// `--help` on every command, OVERVIEW/USAGE/ARGUMENTS/OPTIONS help layout, and its exit codes.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SystemIO

/// Process exit statuses (sysexits.h values for usage and data errors).
enum ExitCode {
    static let success: Int32 = 0
    static let failure: Int32 = 1
    /// EX_USAGE: bad arguments.
    static let usage: Int32 = 64
    /// EX_DATAERR: the input data was malformed.
    static let dataError: Int32 = 65
}

/// Help text for one command, rendered like swift-argument-parser's.
struct CommandHelp: Sendable {
    /// Words after `sugarctl` that select the command (`decode`), empty for the root.
    var name: String
    var abstract: String
    /// Usage line without the program name: `decode <characteristic> <hex> [--json]`.
    var usage: String
    var arguments: [(String, String)] = []
    /// Subcommand names and abstracts (root command only).
    var subcommands: [(String, String)] = []
    var options: [(String, String)] = []
    var discussion: String? = nil

    var commandPath: String { self.name.isEmpty ? "sugarctl" : "sugarctl " + self.name }

    func render() -> String {
        var text = "OVERVIEW: \(self.abstract)\n"
        if let discussion = self.discussion { text += "\n" + discussion + "\n" }
        text += "\nUSAGE: sugarctl \(self.usage)\n"
        if !self.arguments.isEmpty { text += "\nARGUMENTS:\n" + Self.table(self.arguments) }
        if !self.subcommands.isEmpty { text += "\nSUBCOMMANDS:\n" + Self.table(self.subcommands) }
        text += "\nOPTIONS:\n" + Self.table(self.options + [("-h, --help", "Show help information.")])
        return text
    }

    /// The short form for errors: one usage line and a pointer to `--help`.
    func shortUsage() -> String {
        "Usage: sugarctl \(self.usage)\n  See '\(self.commandPath) --help' for more information.\n"
    }

    private static func table(_ rows: [(String, String)]) -> String {
        let width = max(rows.map(\.0.count).max() ?? 0, 20) + 2
        return rows.map { name, text in
            "  " + name + String(repeating: " ", count: width - name.count) + text + "\n"
        }.joined()
    }
}

/// Bad command-line arguments; reported with the usage and exit status 64.
struct UsageError: Error {
    var message: String
}

/// The result of splitting argv into positionals, flags and `--name value` options.
struct ParsedArguments {
    var positionals: [String] = []
    var flags: Set<String> = []
    var values: [String: String] = [:]
    /// Every value of each option, in order (for repeatable options such as `--field` and `--handle`).
    var lists: [String: [String]] = [:]
    var helpRequested = false

    /// Splits `arguments`. `flags` and `valueOptions` are long names without dashes (`json`).
    /// `repeatableOptions` take a value and may repeat (`--handle A --handle B`).
    /// `--` ends option parsing. Unknown options are usage errors.
    init(
        _ arguments: [String], flags: Set<String> = [], valueOptions: Set<String> = [],
        repeatableOptions: Set<String> = []
    ) throws(UsageError) {
        var index = 0
        var optionsEnded = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if optionsEnded || !argument.hasPrefix("-") || argument == "-" {
                self.positionals.append(argument)
                continue
            }
            if argument == "--" {
                optionsEnded = true
                continue
            }
            if argument == "-h" || argument == "--help" {
                self.helpRequested = true
                continue
            }
            guard argument.hasPrefix("--") else { throw UsageError(message: "Unknown option '\(argument)'") }
            var name = String(argument.dropFirst(2))
            var inlineValue: String? = nil
            if let equals = name.firstIndex(of: "=") {
                inlineValue = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            if flags.contains(name) {
                guard inlineValue == nil else { throw UsageError(message: "Option '--\(name)' takes no value") }
                self.flags.insert(name)
            } else if valueOptions.contains(name) || repeatableOptions.contains(name) {
                let value: String
                if let inlineValue {
                    value = inlineValue
                } else {
                    guard index < arguments.count else { throw UsageError(message: "Missing value for '--\(name)'") }
                    value = arguments[index]
                    index += 1
                }
                if !repeatableOptions.contains(name) { self.values[name] = value }
                self.lists[name, default: []].append(value)
            } else {
                throw UsageError(message: "Unknown option '--\(name)'")
            }
        }
    }
}

/// The one way to ask any command for JSON: `--json`. Every command that prints data takes it (the
/// table over all subcommands in SugarctlGrammarTests checks that); `--format json` stays a synonym where
/// a command has `--format` (readings, report). A new command adds ``flag`` to its parsed flags,
/// ``help(_:)`` to its options and prints one JSON document on stdout when ``wanted(_:)`` says so
/// (progress and prompts then go to stderr).
enum JSONOutput {
    /// The flag's name as ``ParsedArguments`` takes it.
    static let flag = "json"

    /// The `--json` row of a command's OPTIONS, saying what the JSON holds.
    static func help(_ what: String) -> (String, String) { ("--json", "Print " + what + " as JSON.") }

    /// Whether `--json` was given.
    static func wanted(_ parsed: ParsedArguments) -> Bool { parsed.flags.contains(self.flag) }

    /// The output format of a command with `--format`: `--json` means `json`; `--json` with another
    /// `--format` is a usage error.
    static func format(_ parsed: ParsedArguments, default fallback: String) throws(UsageError) -> String {
        let format = parsed.values["format"]
        if self.wanted(parsed) {
            guard format == nil || format == "json" else {
                throw UsageError(message: "--json and --format \(format ?? "") disagree: give one of them")
            }
            return "json"
        }
        return format ?? fallback
    }
}

/// A subcommand: its help and its entry point, which returns the exit status.
struct Subcommand: Sendable {
    var help: CommandHelp
    var run: @Sendable ([String]) async -> Int32
}

/// Writes `text` to standard output as is (unbuffered, so nothing is lost on `exit`).
func writeStdout(_ text: String) {
    writeAll(text, to: 1)
}

/// Writes `text` to standard error as is.
func writeStderr(_ text: String) {
    writeAll(text, to: 2)
}

/// Writes all of `text` to `descriptor` (SystemIO's `writeAll`); false when a write fails, e.g. stdout
/// closed (EPIPE): nothing useful is left to do then.
@discardableResult
func writeAll(_ text: String, to descriptor: Int32) -> Bool {
    writeAll(descriptor, Array(text.utf8)) == 0
}

/// Reports a usage error on stderr (message, then the short usage) and returns 64.
func usageFailure(_ error: UsageError, _ help: CommandHelp) -> Int32 {
    writeStderr("Error: \(error.message)\n" + help.shortUsage())
    return ExitCode.usage
}
