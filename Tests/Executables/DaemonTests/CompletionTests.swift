import Glibc
import Testing
import TestSupport

/// The shell completions and man pages the built programs generate (what scripts/package ships)
/// against what their `--help` says, run in the real shells; meter addresses come from a running
/// daemon through `sugarctl meters --json`.
@Suite struct CompletionTests {
    let env = ["PATH": "/usr/bin:/bin", "HOME": "/tmp", "TERM": "dumb"]

    private func run(_ program: String, _ arguments: [String], _ dir: TempDirectory, env extra: [String: String] = [:])
        async throws -> ProcessResult
    {
        try await runToEnd(program, arguments, environment: self.env.merging(extra) { $1 }, dir: dir.path, seconds: 60)
    }

    /// Words of a `--help` section (`SUBCOMMANDS:`, `OPTIONS:`, `ARGUMENTS:`): each row's first word.
    private func section(_ help: String, _ title: String) -> [String] {
        var rows: [String] = []
        var inside = false
        for line in help.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasSuffix(":") && !line.hasPrefix(" ") { inside = line == title + ":"; continue }
            guard inside, line.hasPrefix("  "), let first = line.split(separator: " ").first else { continue }
            rows.append(first.hasSuffix(",") ? String(line.split(separator: " ")[1]) : String(first))
        }
        return rows
    }

    /// What bash offers for `words` (the last one being completed).
    private func bashComplete(_ script: String, _ words: [String], _ dir: TempDirectory, env extra: [String: String] = [:])
        async throws -> Set<String>
    {
        let quoted = words.map { "'\($0)'" }.joined(separator: " ")
        let program = "source \(script); COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1); _sugarctl; printf '%s\\n' \"${COMPREPLY[@]}\""
        let result = try await self.run("/bin/bash", ["-c", program], dir, env: extra)
        #expect(result.status == 0, "\(result.stderr)")
        return Set(result.stdout.split(separator: "\n").map(String.init))
    }

    /// What bash offers for the command line `line` (the cursor at its end), with COMP_WORDS split the
    /// way bash splits them: at blanks and at each ':' of COMP_WORDBREAKS, which is a word of its own.
    private func bashCompleteLine(_ script: String, _ line: String, _ dir: TempDirectory, env extra: [String: String] = [:])
        async throws -> [String]
    {
        var words: [String] = []
        for blank in line.split(separator: " ", omittingEmptySubsequences: false) {
            var word = ""
            for character in blank {
                if character == ":" {
                    if !word.isEmpty { words.append(word) }
                    words.append(":")
                    word = ""
                } else {
                    word.append(character)
                }
            }
            if !word.isEmpty || blank.isEmpty { words.append(word) }
        }
        if line.hasSuffix(":") { words.append("") }
        let quoted = words.map { "'\($0)'" }.joined(separator: " ")
        let program = "source \(script); COMP_LINE='\(line)'; COMP_POINT=\(line.utf8.count); COMP_WORDS=(\(quoted)); "
            + "COMP_CWORD=\(words.count - 1); _sugarctl; printf '%s\\n' \"${COMPREPLY[@]}\""
        let result = try await self.run("/bin/bash", ["-c", program], dir, env: extra)
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout.split(separator: "\n").map(String.init)
    }

    @Test func bashCompletesEveryCommandAndOptionHelpLists() async throws {
        let dir = try TempDirectory()
        let sugarctl = try builtProduct("sugarctl")
        let generated = try await self.run(sugarctl, ["--generate-completions", "bash"], dir)
        #expect(generated.status == 0)
        try dir.write("sugarctl.bash", generated.stdout)
        let script = dir.file("sugarctl.bash")

        let root = try await self.run(sugarctl, ["--help"], dir).stdout
        let commands = self.section(root, "SUBCOMMANDS")
        #expect(commands.count >= 10)
        let offered = try await self.bashComplete(script, ["sugarctl", ""], dir)
        #expect(Set(commands).isSubset(of: offered), "missing: \(Set(commands).subtracting(offered))")
        #expect(offered.isSuperset(of: self.section(root, "OPTIONS")))

        for command in commands {
            let help = try await self.run(sugarctl, [command, "--help"], dir).stdout
            let options = (self.section(help, "OPTIONS") + self.section(help, "ARGUMENTS")).filter { $0.hasPrefix("--") }
                .map { String($0.split(separator: "=").first!) }
            let completed = try await self.bashComplete(script, ["sugarctl", command, "--"], dir)
            #expect(Set(options) == completed.subtracting(["-h"]), "sugarctl \(command): --help \(options), completion \(completed)")
        }
        // Enumerated values as the usage line gives them.
        #expect(try await self.bashComplete(script, ["sugarctl", "readings", "--format", ""], dir)
            == ["table", "json", "ndjson", "csv", "nightscout", "fhir"])
        #expect(try await self.bashComplete(script, ["sugarctl", "status", "--unit", "m"], dir) == ["mgdl", "mmol"])
    }

    @Test func zshAndFishScriptsParseAndFishCompletes() async throws {
        let dir = try TempDirectory()
        let sugarctl = try builtProduct("sugarctl")
        for shell in ["zsh", "fish"] {
            let generated = try await self.run(sugarctl, ["--generate-completions", shell], dir)
            try dir.write("completion.\(shell)", generated.stdout)
            let path = "/usr/bin/" + shell
            try #require(access(path, X_OK) == 0, "\(shell) is not installed (scripts/install-deps)")
            let parsed = try await self.run(path, ["-n", dir.file("completion.\(shell)")], dir)
            #expect(parsed.status == 0, "\(shell): \(parsed.stderr)")
        }
        let fish = try await self.run(
            "/usr/bin/fish", ["-c", "source \(dir.file("completion.fish")); complete -C 'sugarctl readings --order '"], dir)
        #expect(Set(fish.stdout.split(separator: "\n").map { String($0.split(separator: "\t")[0]) }) == ["asc", "desc"])
    }

    @Test func meterAddressesComeFromTheRunningDaemon() async throws {
        let dir = try TempDirectory()
        let sugarctl = try builtProduct("sugarctl"), sugard = try builtProduct("sugard")
        let socket = dir.file("s")
        let daemon = try Child(
            sugard, ["--state-dir", dir.path, "--socket", socket, "--replay", DaemonProcessTests.accuChek],
            environment: self.env, stdout: nil, stderr: nil)
        defer { daemon.kill() }
        let up = await eventually(within: 30) {
            (try? await self.run(sugarctl, ["meters", "--json", "--socket", socket], dir))?.stdout.contains("\"id\"") == true
        }
        try #require(up)
        let generated = try await self.run(sugarctl, ["--generate-completions", "bash"], dir)
        try dir.write("sugarctl.bash", generated.stdout)
        let path = String(sugarctl.split(separator: "/").dropLast().joined(separator: "/"))
        let extra = ["SUGARD_SOCKET": socket, "PATH": "/" + path + ":/usr/bin:/bin"]
        let meters = try await self.bashComplete(dir.file("sugarctl.bash"), ["sugarctl", "forget", ""], dir, env: extra)
        #expect(meters.count == 1 && meters.allSatisfy { $0.count == 17 && $0.split(separator: ":").count == 6 }, "\(meters)")
        let option = try await self.bashComplete(dir.file("sugarctl.bash"), ["sugarctl", "readings", "--meter", ""], dir, env: extra)
        #expect(option == meters)
        // Past each ':' of an address (COMP_WORDBREAKS splits there): bash replaces only the part after
        // the last ':', so that is what is offered, as bash-completion's __ltrim_colon_completions does.
        let address = try #require(meters.first)
        for typed in [String(address.prefix(2)), String(address.prefix(3)), String(address.prefix(7)), String(address.prefix(16))] {
            let rest = String(address.dropFirst(typed.lastIndex(of: ":").map { typed.distance(from: typed.startIndex, to: $0) + 1 } ?? 0))
            for line in ["sugarctl forget " + typed, "sugarctl readings --meter " + typed, "sugarctl --socket \(socket) sync " + typed] {
                let offered = try await self.bashCompleteLine(dir.file("sugarctl.bash"), line, dir, env: extra)
                #expect(offered == [rest], "\(line): \(offered), expected \(rest)")
            }
        }
        // Options and commands still complete from a whole line.
        #expect(try await self.bashCompleteLine(dir.file("sugarctl.bash"), "sugarctl rea", dir, env: extra) == ["readings"])
        #expect(Set(try await self.bashCompleteLine(dir.file("sugarctl.bash"), "sugarctl readings --format ", dir, env: extra))
            == ["table", "json", "ndjson", "csv", "nightscout", "fhir"])
        // sugarctl --version names the daemon's version too.
        let version = try await self.run(sugarctl, ["--version", "--socket", socket], dir)
        #expect(version.stdout.split(separator: "\n").count == 2 && version.stdout.contains("sugard "), "\(version.stdout)")
        // No colour in a pipe.
        #expect(!(try await self.run(sugarctl, ["status", "--socket", socket], dir, env: ["TERM": "xterm"])).stdout.contains("\u{1B}"))
    }

    @Test func manPagesFormatCleanlyAndCarryTheHelp() async throws {
        let dir = try TempDirectory()
        let sugarctl = try builtProduct("sugarctl"), sugard = try builtProduct("sugard")
        let pages: [(String, [String], [String])] = [
            ("sugarctl.1", [sugarctl, "--generate-man"], [sugarctl, "--help"]),
            ("sugard.8", [sugard, "--generate-man", "sugard"], [sugard, "--help"]),
        ]
        for (name, generate, help) in pages {
            let roff = try await self.run(generate[0], Array(generate.dropFirst()), dir)
            #expect(roff.status == 0)
            try dir.write(name, roff.stdout)
            let shown = try await self.run("/usr/bin/man", ["--warnings", "-l", "-Tutf8", dir.file(name)], dir, env: ["MANWIDTH": "200"])
            #expect(shown.status == 0 && shown.stderr.isEmpty, "\(name): \(shown.stderr)")
            let text = shown.stdout.replacingBackspaces()
            let helpText = try await self.run(help[0], Array(help.dropFirst()), dir).stdout
            for option in Set(self.section(helpText, "OPTIONS") + self.section(helpText, "SUBCOMMANDS")) {
                #expect(text.contains(option), "\(name) lacks \(option) from --help")
            }
        }
    }

    /// Every page sugard ships renders at 80 columns without a single warning and carries a real date;
    /// sugarctl(1) has the sections a Debian user looks for, generated from the tables --help uses.
    @Test func manPagesRenderAt80ColumnsWithDatesAndSugarctlSections() async throws {
        let dir = try TempDirectory()
        let sugarctl = try builtProduct("sugarctl"), sugard = try builtProduct("sugard"), forward = try builtProduct("sugard-forward")
        let pages: [(String, [String])] = [
            ("sugarctl.1", [sugarctl, "--generate-man"]), ("sugard.8", [sugard, "--generate-man", "sugard"]),
            ("sugard.conf.5", [sugard, "--generate-man", "sugard.conf"]), ("sugard-forward.8", [forward, "--generate-man"]),
        ]
        for (name, generate) in pages {
            let roff = try await self.run(generate[0], Array(generate.dropFirst()), dir)
            #expect(roff.status == 0)
            try dir.write(name, roff.stdout)
            // .TH NAME SECTION DATE: an ISO date, not "".
            let th = roff.stdout.split(separator: "\n").first { $0.hasPrefix(".TH ") }.map { $0.split(separator: " ") } ?? []
            #expect(th.count > 3 && th[3].count == 10 && th[3].split(separator: "-").count == 3, "\(name): \(th)")
            let shown = try await self.run("/usr/bin/man", ["--warnings", "-l", dir.file(name)], dir, env: ["MANWIDTH": "80"])
            #expect(shown.status == 0 && shown.stderr.isEmpty, "\(name): \(shown.stderr)")
            #expect(!shown.stdout.isEmpty)
        }
        let text = try await self.run("/usr/bin/man", ["-l", dir.file("sugarctl.1")], dir, env: ["MANWIDTH": "80"]).stdout
            .replacingBackspaces()
        let lines = text.split(separator: "\n").map(String.init)
        for section in ["EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES"] {
            #expect(lines.contains(section), "sugarctl(1) lacks \(section)")
        }
        // The same table as `sugarctl --help`'s exit statuses.
        let help = try await self.run(sugarctl, ["--help"], dir).stdout
        for status in ["0", "1", "64", "65", "69", "77"] {
            #expect(help.contains(" \(status) "), "--help lacks exit status \(status)")
            #expect(lines.contains { $0.drop(while: { $0 == " " }).hasPrefix(status + " ") }, "EXIT STATUS lacks \(status)")
        }
        for variable in ["SUGARD_SOCKET", "SUGARCTL_TIMEOUT", "NO_COLOR"] { #expect(text.contains(variable)) }
        #expect(text.contains("/run/sugard/io.sugard.HealthDataSync"))
        #expect(text.contains("$ sugarctl readings"))
    }
}

extension String {
    /// man's overstrike bold (`X\bX`) back to plain text.
    fileprivate func replacingBackspaces() -> String {
        var out: [Character] = []
        for character in self {
            if character == "\u{8}" { if !out.isEmpty { out.removeLast() }; continue }
            out.append(character)
        }
        // After removing "X\b", "X" remains once.
        return String(out)
    }
}
