import JSON
import SugarWire
import SystemIO

// `sugarctl --version`, and the shell completions and man page generated from the same tables as
// `--help` (`subcommands` and each command's CommandHelp), so they cannot drift:
// `sugarctl --generate-completions bash|zsh|fish` and `sugarctl --generate-man` (hidden; used by
// scripts/package, checked by the tests).

/// What completion needs to know about a command, read from its CommandHelp.
struct CompletionSpec {
    enum Kind: Equatable { case plain, meter, file, words([String]) }

    struct Option {
        var name: String
        var help: String
        /// nil: a flag; otherwise what its value completes to.
        var value: Kind?
    }

    var name: String
    var abstract: String
    var options: [Option]
    /// What the first positional argument completes to.
    var positional: Kind

    init(_ help: CommandHelp) {
        self.name = help.name
        self.abstract = help.abstract
        let usageWords = help.usage.split(separator: " ").map(String.init)
        var options: [Option] = []
        for (term, text) in help.arguments + help.options + [("-h, --help", "Show help information.")] {
            guard let name = term.split(separator: " ").first(where: { $0.hasPrefix("--") }).map(String.init) else { continue }
            let name2 = name.split(separator: "=").first.map(String.init) ?? name
            guard !options.contains(where: { $0.name == name2 }) else { continue }
            let takesValue = term.split(separator: " ").count > 1 && !term.hasPrefix("-h")
            var value: Kind? = nil
            if takesValue {
                // Choices written in the usage line (`--unit mgdl|mmol`), else by the placeholder.
                let choices = usageWords.firstIndex(of: "[" + name2).map { usageWords[$0 + 1] }
                    ?? usageWords.firstIndex(of: name2).map { $0 + 1 < usageWords.count ? usageWords[$0 + 1] : "" }
                let cleaned = choices.map { $0.filter { $0 != "]" && $0 != "[" } } ?? ""
                if cleaned.contains("|"), !cleaned.contains("<") {
                    value = .words(cleaned.split(separator: "|").map(String.init))
                } else if term.contains("<id>") || term.contains("<meter>") {
                    value = .meter
                } else if term.contains("<path>") || term.contains("<file>") {
                    value = .file
                } else {
                    value = .plain
                }
            }
            options.append(Option(name: name2, help: text, value: value))
        }
        self.options = options
        // `capture inspect <file>`: a literal word after the command name is its first argument.
        let rest = usageWords.dropFirst(help.name.split(separator: " ").count)
        if let first = rest.first, !first.hasPrefix("[") && !first.hasPrefix("<") && !first.hasPrefix("-") {
            self.positional = .words([first])
        } else if help.arguments.contains(where: { $0.0 == "<meter>" }) {
            self.positional = .meter
        } else if help.arguments.contains(where: { $0.0 == "<file>" }) {
            self.positional = .file
        } else if let argument = help.arguments.first(where: { $0.0.hasPrefix("<") }),
            argument.0 == "<characteristic>"
        {
            // "measurement, context, feature or racp (or 2a18, ...)": the words before the parenthesis.
            let words = argument.1.split(separator: "(").first.map {
                $0.split(whereSeparator: { $0 == "," || $0 == " " }).filter { $0 != "or" }.map(String.init)
            }
            self.positional = .words(words ?? [])
        } else {
            self.positional = .plain
        }
    }
}

/// What sugarctl(1) says beyond the commands' help: the variables it reads, the files it uses and
/// examples. The variables and paths are the ones the code reads (``DefaultPaths``, ``Daemon``, ``Terminal``).
enum Manual {
    static let environment: [(String, String)] = [
        ("SUGARD_SOCKET", "The sugard socket when --socket is not given."),
        ("SUGARCTL_TIMEOUT", "Seconds to wait for sugard when --timeout is not given (default 10)."),
        ("SUGARD_FORWARD_SOCKET", "sugard-forward's status socket that status and doctor read (default \(forwardSocket))."),
        ("NO_COLOR", "When set and not empty, status prints no colour (no-color.org)."),
        ("TERM", "With TERM=dumb, status prints no colour."),
        ("TZ", "This machine's zone: readings --local and the time a report was made."),
        ("HOME", "The demo's folder, $HOME/.local/state/sugard-demo, holds the demo's socket."),
    ]

    static let forwardSocket = DefaultPaths.systemForwardSocket

    static let files: [(String, String)] = [
        (DefaultPaths.systemSocket, "sugard's Varlink socket (io.sugard.HealthDataSync), open to the sugard group."),
        (forwardSocket, "sugard-forward's status socket (io.sugard.Forward), when the forwarder runs."),
        ("$HOME/.local/state/sugard-demo/" + DefaultPaths.socketName, "The demo daemon's socket, used when the system socket does not exist."),
        (DefaultPaths.systemConfigFile, "sugard's configuration (sugard.conf(5)); sugarctl itself reads no file."),
    ]

    static let examples: [(String, String)] = [
        ("sugarctl", "The daemon at a glance: last reading, meters, adapter, sync, errors."),
        ("sugarctl readings --since 7d --format csv > week.csv", "The last week's readings as CSV."),
        ("sugarctl readings --since 24h --json", "The last day's readings as JSON (the same as --format json)."),
        ("sugarctl pair C0:26:DA:01:02:03", "Pair a meter in pairing mode; asks for the PIN it shows."),
        ("sugarctl sync --force", "Sync every known meter now and show the progress."),
        ("sugarctl report --days 42 --format pdf", "A six-week report to print (two A4 pages)."),
        ("sugarctl doctor", "Check the chain from the kernel to the meters, with a fix for each broken link."),
    ]
}

enum Generate {
    static var specs: [CompletionSpec] { subcommands.map { CompletionSpec($0.help) } }
    static var rootOptions: [CompletionSpec.Option] { CompletionSpec(rootHelp).options }

    /// Meter ids from the running daemon (`sugarctl meters --json`), for shells that can run it.
    static let meterCommand =
        #"sugarctl meters --json 2>/dev/null | sed -n 's/.*"id" *: *"\([0-9A-Fa-f:]\{17\}\)".*/\1/p' | sort -u"#

    static func bash() -> String {
        var out = "# bash completion for sugarctl (generated by `sugarctl --generate-completions bash`)\n"
        out += "_sugarctl_meters() { \(meterCommand); }\n"
        // bash splits the line at COMP_WORDBREAKS, which holds ':', so a meter address arrives as
        // several words (C0 : 26 : DA). The words are rebuilt from the line up to the cursor, and the
        // replies lose the part up to the word's last ':' that readline keeps (as bash-completion's
        // __ltrim_colon_completions does), so completing a meter address goes on past each ':'.
        out += "_sugarctl() {\n    local cur prev cmd i cword line k colon\n    local -a words\n"
        out += "    if [[ -n \"${COMP_LINE-}\" ]]; then\n        line=\"${COMP_LINE:0:${COMP_POINT:-${#COMP_LINE}}}\"\n"
        out += "        read -ra words <<< \"$line\"\n        [[ \"$line\" == *[[:space:]] ]] && words+=(\"\")\n"
        out += "    else\n        words=(\"${COMP_WORDS[@]}\")\n    fi\n    cword=$((${#words[@]} - 1))\n"
        out += "    cur=\"${words[cword]}\"\n    prev=\"\"\n    ((cword > 0)) && prev=\"${words[cword-1]}\"\n"
        out += "    cmd=\"\"\n    for ((i = 1; i < cword; i++)); do\n        case \"${words[i]}\" in\n"
        out += "            --socket) ((i++)) ;;\n            -*) ;;\n            *) cmd=\"${words[i]}\"; break ;;\n        esac\n    done\n"
        out += "    COMPREPLY=()\n    _sugarctl_reply\n"
        out += "    if [[ \"$cur\" == *:* && \"${COMP_WORDBREAKS-:}\" == *:* ]]; then\n"
        out += "        colon=\"${cur%\"${cur##*:}\"}\"\n"
        out += "        for k in \"${!COMPREPLY[@]}\"; do COMPREPLY[k]=\"${COMPREPLY[k]#\"$colon\"}\"; done\n    fi\n}\n"
        out += "_sugarctl_reply() {\n"
        out += "    case \"$cmd\" in\n"
        out += "        \"\")\n"
        out += "            case \"$prev\" in --socket) COMPREPLY=($(compgen -f -- \"$cur\")); return ;; esac\n"
        out += "            COMPREPLY=($(compgen -W \"\(specs.map(\.name).joined(separator: " ")) help \(rootOptions.map(\.name).joined(separator: " "))\" -- \"$cur\")) ;;\n"
        for spec in specs {
            out += "        \(spec.name))\n            case \"$prev\" in\n"
            for option in spec.options {
                guard let value = option.value else { continue }
                out += "                \(option.name)) \(bashReply(value)); return ;;\n"
            }
            out += "            esac\n"
            out += "            if [[ \"$cur\" == -* ]]; then COMPREPLY=($(compgen -W \"\(spec.options.map(\.name).joined(separator: " "))\" -- \"$cur\"))\n"
            out += "            else \(bashReply(spec.positional)); fi ;;\n"
        }
        out += "    esac\n}\ncomplete -F _sugarctl sugarctl\n"
        return out
    }

    private static func bashReply(_ kind: CompletionSpec.Kind) -> String {
        switch kind {
        case .plain: "COMPREPLY=()"
        case .meter: "COMPREPLY=($(compgen -W \"$(_sugarctl_meters)\" -- \"$cur\"))"
        case .file: "COMPREPLY=($(compgen -f -- \"$cur\"))"
        case .words(let words): "COMPREPLY=($(compgen -W \"\(words.joined(separator: " "))\" -- \"$cur\"))"
        }
    }

    static func zsh() -> String {
        var out = "#compdef sugarctl\n# zsh completion for sugarctl (generated by `sugarctl --generate-completions zsh`)\n"
        out += "_sugarctl_meters() { local -a m; m=(${(f)\"$(\(meterCommand))\"}); compadd -a m; }\n"
        out += "_sugarctl() {\n    local -a commands\n    commands=(\n"
        for spec in specs { out += "        '\(spec.name):\(zshQuote(spec.abstract))'\n" }
        out += "    )\n    local curcontext=\"$curcontext\" state line\n    _arguments -C \\\n"
        for option in rootOptions { out += "        '\(zshOption(option))' \\\n" }
        out += "        '1: :->command' '*:: :->args'\n"
        out += "    case $state in\n        command) _describe -t commands 'sugarctl command' commands ;;\n"
        out += "        args)\n            case $line[1] in\n"
        for spec in specs {
            out += "                \(spec.name)) _arguments \\\n"
            for option in spec.options { out += "                    '\(zshOption(option))' \\\n" }
            out += "                    '1:argument:\(zshAction(spec.positional))' ;;\n"
        }
        out += "            esac ;;\n    esac\n}\n_sugarctl \"$@\"\n"
        return out
    }

    private static func zshQuote(_ text: String) -> String {
        String(text.flatMap { $0 == "'" ? Array("'\\''") : $0 == ":" ? Array("\\:") : [$0] })
            .replacingBrackets()
    }

    private static func zshOption(_ option: CompletionSpec.Option) -> String {
        let help = "[" + zshQuote(option.help) + "]"
        guard let value = option.value else { return option.name + help }
        return option.name + help + ":value:" + zshAction(value)
    }

    private static func zshAction(_ kind: CompletionSpec.Kind) -> String {
        switch kind {
        case .plain: " "
        case .meter: "_sugarctl_meters"
        case .file: "_files"
        case .words(let words): "(" + words.joined(separator: " ") + ")"
        }
    }

    static func fish() -> String {
        var out = "# fish completion for sugarctl (generated by `sugarctl --generate-completions fish`)\n"
        out += "function __sugarctl_meters\n    \(meterCommand)\nend\n"
        let names = specs.map(\.name).joined(separator: " ")
        out += "complete -c sugarctl -f\n"
        for spec in specs {
            out += "complete -c sugarctl -n 'not __fish_seen_subcommand_from \(names)' -a \(spec.name) -d '\(fishQuote(spec.abstract))'\n"
        }
        for option in rootOptions {
            out += "complete -c sugarctl -n 'not __fish_seen_subcommand_from \(names)' \(fishOption(option))\n"
        }
        for spec in specs {
            let condition = "-n '__fish_seen_subcommand_from \(spec.name)'"
            switch spec.positional {
            case .plain: break
            case .meter: out += "complete -c sugarctl \(condition) -a '(__sugarctl_meters)'\n"
            case .file: out += "complete -c sugarctl \(condition) -F\n"
            case .words(let words): out += "complete -c sugarctl \(condition) -a '\(words.joined(separator: " "))'\n"
            }
            for option in spec.options { out += "complete -c sugarctl \(condition) \(fishOption(option))\n" }
        }
        return out
    }

    private static func fishQuote(_ text: String) -> String {
        String(text.flatMap { $0 == "'" ? Array("\\'") : $0 == "\\" ? Array("\\\\") : [$0] })
    }

    private static func fishOption(_ option: CompletionSpec.Option) -> String {
        var out = "-l " + option.name.dropFirst(2) + " -d '" + fishQuote(option.help) + "'"
        switch option.value {
        case nil: break
        case .plain?: out += " -r"
        case .meter?: out += " -x -a '(__sugarctl_meters)'"
        case .file?: out += " -r -F"
        case .words(let words)?: out += " -x -a '\(words.joined(separator: " "))'"
        }
        return out
    }

    /// sugarctl(1) from the root help and every subcommand's help.
    static func manPage() -> String {
        var page = ManPage(name: "sugarctl", section: 1, summary: "talk to sugard, the blood-glucose meter daemon")
        page.section("Synopsis")
        page.literal(["sugarctl " + rootHelp.usage] + subcommands.map { "sugarctl " + $0.help.usage })
        page.section("Description")
        page.paragraph(rootHelp.abstract)
        if let discussion = rootHelp.discussion { page.paragraph(discussion) }
        page.section("Options")
        for option in rootHelp.options { page.item(option.0, option.1) }
        page.item("-h, --help", "Show help information.")
        page.section("Commands")
        for command in subcommands {
            let help = command.help
            page.item("sugarctl " + help.usage, help.abstract)
            for row in help.arguments + help.options { page.item(row.0, row.1) }
            if let discussion = help.discussion { page.paragraph(discussion) }
        }
        page.section("Exit status")
        for (status, meaning) in ExitCode.meanings { page.item(String(status), meaning) }
        page.section("Environment")
        for (name, meaning) in Manual.environment { page.item(name, meaning) }
        page.section("Files")
        for (path, meaning) in Manual.files { page.item(path, meaning) }
        page.section("Examples")
        for (command, meaning) in Manual.examples {
            page.paragraph(meaning)
            page.literal(["$ " + command])
        }
        page.section("See also")
        page.paragraph("sugard(8), sugard.conf(5), sugard-forward(8)")
        return page.roff
    }

    /// `sugarctl --version`: ours, then the daemon's when it answers GetStatus.
    static func version(_ arguments: [String]) async -> Int32 {
        writeStdout("sugarctl \(sugarVersion)\n")
        let parsed: ParsedArguments
        do throws(UsageError) {
            parsed = try ParsedArguments(arguments.filter { $0 != "--version" }, valueOptions: DaemonOptions.values)
        } catch {
            return usageFailure(error, rootHelp)
        }
        do throws(CommandFailure) {
            let daemon = try Daemon.connect(parsed)
            let reply = try await daemon.call("GetStatus", as: Wire.StatusReply.self)
            writeStdout("sugard \(reply.state.daemon.version) (\(daemon.path))\n")
        } catch {
            writeStdout("sugard not reachable (\(Daemon.socketPath(parsed)))\n")
        }
        return ExitCode.success
    }

    /// Handles the hidden generation flags; nil when `arguments` asks for none.
    static func run(_ arguments: [String]) -> Int32? {
        guard let first = arguments.first else { return nil }
        switch first {
        case "--generate-man":
            writeStdout(manPage())
            return ExitCode.success
        case "--generate-completions":
            switch arguments.dropFirst().first {
            case "bash": writeStdout(bash())
            case "zsh": writeStdout(zsh())
            case "fish": writeStdout(fish())
            default:
                writeStderr("Error: --generate-completions needs bash, zsh or fish\n")
                return ExitCode.usage
            }
            return ExitCode.success
        default: return nil
        }
    }
}

extension String {
    /// zsh's _arguments treats [ and ] in descriptions as option syntax: use parentheses.
    fileprivate func replacingBrackets() -> String {
        String(self.map { $0 == "[" ? "(" : $0 == "]" ? ")" : $0 })
    }
}
