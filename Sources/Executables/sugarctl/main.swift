// sugarctl: command-line client for sugard. Each subcommand lives in its own file and adds one entry to
// `subcommands`; this file only dispatches.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let subcommands: [Subcommand] = [
    StatusCommand.subcommand,
    WatchCommand.subcommand,
    ReadingsCommand.subcommand,
    MetersCommand.subcommand,
    PeopleCommand.subcommand,
    SyncCommand.subcommand,
    ForgetCommand.subcommand,
    PairCommand.subcommand,
    SessionsCommand.subcommand,
    DecodeCommand.subcommand,
    CaptureCommand.subcommand,
    DoctorCommand.subcommand,
    BackupCommand.backup,
    BackupCommand.restore,
    CheckCommand.subcommand,
    ReportCommand.subcommand,
    AlertsCommand.subcommand,
]

let rootHelp = CommandHelp(
    name: "",
    abstract: "Talk to sugard, the blood-glucose meter daemon, and decode Glucose Profile packets.",
    usage: "[--socket <path>] [<subcommand>] [arguments] [--help]",
    subcommands: subcommands.map { ($0.help.name, $0.help.abstract) },
    options: [
        ("--socket <path>", "The sugard socket (also $SUGARD_SOCKET); default: the system socket if present, else the demo's."),
        ("--version", "Print sugarctl's version and, when it answers, the daemon's."),
    ],
    discussion: """
        Without a subcommand, sugarctl shows the status. See 'sugarctl <subcommand> --help' for details on each \
        subcommand.
        JSON: every command that prints data takes --json (readings and report also --format json).
        Exit status: \(ExitCode.summary).
        """
)

func runRoot(_ arguments: [String]) async -> Int32 {
    // Global options before the subcommand (`sugarctl --socket P readings`) go to the subcommand.
    var arguments = arguments
    var global: [String] = []
    while let first = arguments.first, first == "--socket" || first.hasPrefix("--socket=") {
        global.append(arguments.removeFirst())
        if first == "--socket", let value = arguments.first {
            global.append(value)
            arguments.removeFirst()
        }
    }
    // No subcommand, or only options: the status screen.
    guard let first = arguments.first, !first.hasPrefix("-") || first == "-h" || first == "--help" else {
        return await StatusCommand.run(global + arguments)
    }
    if first == "-h" || first == "--help" || first == "help" {
        if first == "help", arguments.count > 1, let command = subcommands.first(where: { $0.help.name == arguments[1] }) {
            writeStdout(command.help.render())
        } else {
            writeStdout(rootHelp.render())
        }
        return ExitCode.success
    }
    guard let command = subcommands.first(where: { $0.help.name == first }) else {
        writeStderr("Error: Unknown subcommand '\(first)'\n" + rootHelp.shortUsage())
        return ExitCode.usage
    }
    return await command.run(Array(arguments.dropFirst()) + global)
}

let arguments = Array(CommandLine.arguments.dropFirst())
let status: Int32
if let generated = Generate.run(arguments) {
    status = generated
} else if arguments.contains("--version"), !arguments.contains(where: { subcommands.map(\.help.name).contains($0) }) {
    status = await Generate.version(arguments)
} else {
    status = await runRoot(arguments)
}
exit(status)
