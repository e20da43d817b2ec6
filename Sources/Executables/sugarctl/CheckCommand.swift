import JSON
import SugarWire

/// `sugarctl check`: the daemon checks its whole database file now (`PRAGMA integrity_check`).
enum CheckCommand {
    static let help = CommandHelp(
        name: "check",
        abstract: "Check the whole database file now (SQLite integrity_check) and print what it found.",
        usage: "check [--json] [--socket <path>]",
        options: [JSONOutput.help("{\"check\": {kind, reason, result, startedAt, finishedAt, problemCount, problems, message}}")]
            + DaemonOptions.help,
        discussion: """
            sugard reads the file on a connection of its own while it goes on syncing and serving; on a \
            large store on an SD card this takes a while. The result also shows in `sugarctl status` and \
            `sugarctl doctor`. sugard runs the quicker quick_check by itself in the background after an \
            unclean stop and once a week, never before it is ready. A damaged file keeps working as far \
            as SQLite can read it: copy it away (`sugarctl backup FILE`) and restore a sound backup. \
            Needs root or the admin group. Exit status: 0 the file is sound, 65 damaged, 1 the check could \
            not run, 64 usage, 69 sugard not reachable, 77 permission denied.
            """
    )

    static let subcommand = Subcommand(help: help) { arguments in await run(arguments) }

    static func run(_ arguments: [String]) async -> Int32 {
        await runDaemonCommand(arguments, help: help, flags: [JSONOutput.flag], values: []) { parsed throws(CommandFailure) in
            guard parsed.positionals.isEmpty else { throw usage("Unexpected argument '\(parsed.positionals[0])'", help) }
            let reply = try await Daemon.connect(parsed).call("CheckStorage", as: Wire.CheckStorageReply.self)
            let check = reply.check
            if JSONOutput.wanted(parsed) {
                writeStdout(reply.json.serialized() + "\n")
            } else {
                writeStdout(Self.render(check))
            }
            switch check.result {
            case .ok: return ExitCode.success
            case .damaged: return ExitCode.dataError
            case .failed, .running: return ExitCode.failure
            }
        }
    }

    /// What the check found, for people.
    static func render(_ check: Wire.StorageCheck) -> String {
        let pragma = check.kind == .quick ? "quick_check" : "integrity_check"
        let took = check.durationMillis.map { " in \(Self.seconds($0))" } ?? ""
        switch check.result {
        case .ok:
            return "Database check (\(pragma)): ok\(took).\n"
        case .damaged:
            var text = "Database check (\(pragma)): DAMAGED, \(check.problemCount) problem(s)\(took):\n"
            for problem in check.problems { text += "  \(problem)\n" }
            if check.problemCount > Int64(check.problems.count) {
                text += "  … and \(check.problemCount - Int64(check.problems.count)) more\n"
            }
            text += "sugard goes on reading and storing what SQLite can still read. Copy the file away "
                + "(`sugarctl backup FILE`), then restore a sound backup (`sugarctl restore FILE`).\n"
            return text
        case .failed, .running:
            return "Database check (\(pragma)) could not run: \(check.message ?? "no reason given").\n"
        }
    }

    static func seconds(_ millis: Int64) -> String {
        "\(millis / 1000).\(String(millis % 1000 / 10).leftPadded(to: 2)) s"
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String { String(repeating: "0", count: Swift.max(0, width - self.count)) + self }
}
