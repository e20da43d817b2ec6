// sugarctl: command-line client for sugard. Each subcommand lives in its own file and adds one entry to
// `subcommands`; this file only dispatches.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let subcommands: [Subcommand] = [
    DecodeCommand.subcommand,
    CaptureCommand.subcommand,
]

let rootHelp = CommandHelp(
    name: "",
    abstract: "Talk to sugard, the blood-glucose meter daemon, and decode Glucose Profile packets.",
    usage: "<subcommand> [arguments] [--help]",
    subcommands: subcommands.map { ($0.help.name, $0.help.abstract) },
    discussion: "See 'sugarctl <subcommand> --help' for details on each subcommand."
)

func runRoot(_ arguments: [String]) async -> Int32 {
    guard let first = arguments.first else {
        writeStderr("Error: Missing subcommand\n" + rootHelp.shortUsage())
        return ExitCode.usage
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
    return await command.run(Array(arguments.dropFirst()))
}

let status = await runRoot(Array(CommandLine.arguments.dropFirst()))
exit(status)
