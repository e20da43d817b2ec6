// sugar-bench: parser benchmarks. Build with `swift build -c release --product sugar-bench`.
//   sugar-bench parse FILE [--with-json]        decode every record of FILE as a Glucose Measurement
//   sugar-bench make-corpus N FILE [--seed S]   write N valid measurements of mixed shapes
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let usage = """
    OVERVIEW: Benchmarks for the Glucose Profile parser.

    USAGE: sugar-bench parse <file> [--with-json]
           sugar-bench make-corpus <count> <file> [--seed <seed>]

    SUBCOMMANDS:
      parse          Decode every record of <file> as a Glucose Measurement; print one JSON object with
                     packets, seconds, nsPerPacket, bytesPerSecond and allocationsPerPacket.
      make-corpus    Write <count> valid measurements (all flag combinations, both units, SFLOAT specials)
                     to <file>; the same seed gives the same file. Default seed 20190227.

    OPTIONS:
      --with-json    (parse) Also build each record's JSON value. It allocates, which shows the counter works.
      --seed <seed>  (make-corpus) Seed for the generator (decimal or 0x hex).
      -h, --help     Show help information.

    FILE is a sequence of records, each a uint16 little-endian length followed by that many bytes.

    """

func usageError(_ message: String) -> Never {
    writeStderr("Error: \(message)\n\n" + usage)
    exit(64)
}

/// The process status of a benchmark run.
func runMain(_ arguments: [String]) -> Int32 {
    if arguments.contains("-h") || arguments.contains("--help") {
        writeStdout(usage)
        return 0
    }
    guard let command = arguments.first else { usageError("Missing subcommand") }
    var positionals: [String] = []
    var options: [String: String] = [:]
    var flags: Set<String> = []
    var index = 1
    while index < arguments.count {
        let argument = arguments[index]
        index += 1
        switch argument {
        case "--with-json": flags.insert(argument)
        case "--seed":
            guard index < arguments.count else { usageError("Missing value for '--seed'") }
            options[argument] = arguments[index]
            index += 1
        default:
            if argument.hasPrefix("-") && argument.count > 1 { usageError("Unknown option '\(argument)'") }
            positionals.append(argument)
        }
    }
    switch command {
    case "parse":
        guard positionals.count == 1, options.isEmpty else { usageError("parse takes exactly one FILE") }
        return ParseBenchmark(path: positionals[0], buildJSON: flags.contains("--with-json")).run()
    case "make-corpus":
        guard positionals.count == 2, flags.isEmpty else { usageError("make-corpus takes N and FILE") }
        guard let count = Int(positionals[0]), count >= 0 else { usageError("N must be a non-negative integer") }
        var seed: UInt64 = 20_190_227
        if let text = options["--seed"] {
            let parsed = text.hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : UInt64(text)
            guard let parsed else { usageError("Invalid seed '\(text)'") }
            seed = parsed
        }
        return CorpusBenchmark(count: count, path: positionals[1], seed: seed).run()
    default:
        usageError("Unknown subcommand '\(command)'")
    }
}

exit(runMain(Array(CommandLine.arguments.dropFirst())))
