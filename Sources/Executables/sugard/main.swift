// sugard: the Bluetooth LE blood-glucose meter daemon. Parses the command line and runs the
// composition in SugarDaemon; everything worth testing lives there.
import Glibc
import ProcessKit
import SugarAPI
import SugarDaemon
import SystemIO

let environment = processEnvironment()

func fail(_ message: String, status: Int32) -> Never {
    var line = "sugard: " + message + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    exit(status)
}

let command: DaemonCommand
do {
    command = try DaemonCommandLine.parse(Array(CommandLine.arguments.dropFirst()), environment: environment)
} catch {
    // EX_CONFIG (78) for a bad config file, EX_USAGE (64) for bad flags.
    fail(error.description, status: error.file == nil ? 64 : 78)
}

switch command {
case .help:
    print(DaemonCommandLine.usage)
case .version:
    print("sugard \(sugardVersion)")
case .manPage(let page):
    guard let text = ManPages.page(page) else { fail("--generate-man: unknown page \"\(page)\" (\(ManPages.names.joined(separator: ", ")))", status: 64) }
    print(text, terminator: "")
case .exampleConfig:
    print(DaemonConfig.reference.exampleFile, terminator: "")
case .configReference:
    print(DaemonConfig.reference.referenceTable, terminator: "")
case .prepareRuntimeDirectory(let config):
    do {
        print("sugard: " + (try DaemonCommandLine.prepareRuntimeDirectory(config, environment: environment)))
    } catch {
        fail(error.description, status: 78)
    }
case .run(let config, let configFile):
    // SIGHUP parses the same command line again, so flags keep winning over the file.
    let arguments = Array(CommandLine.arguments.dropFirst())
    let reparse: ConfigReloader = { [environment] () throws(ConfigError) -> DaemonConfig in
        guard case .run(let fresh, _) = try DaemonCommandLine.parse(arguments, environment: environment) else {
            throw ConfigError("the command line no longer asks to run the daemon")
        }
        return fresh
    }
    let daemon = Daemon(config: config, configFile: configFile, environment: environment, reloadConfig: reparse)
    do {
        try await daemon.run(transportFactory: DaemonAssembly.transports, serverFactory: DaemonAssembly.server)
    } catch {
        fail("\(error)", status: 1)
    }
}
