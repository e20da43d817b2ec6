import Glibc
import HealthDataSync
import SugarAPI
import Varlink

public let sugardForwardVersion = "0.1.0"

/// The `sugard-forward` program: parse, start the forwarder and its status socket, stop on
/// SIGTERM/SIGINT. Returns the exit status.
public enum ForwardMain {
    public static func run(arguments: [String], environment: [String: String]) async -> Int32 {
        let command: ForwardCommand
        do {
            command = try ForwardCommandLine.parse(arguments, environment: environment)
        } catch {
            // EX_CONFIG (78) for a bad config file, EX_USAGE (64) for bad flags.
            Self.writeStderr("sugard-forward: \(error.description)\n")
            return error.file == nil ? 64 : 78
        }
        let config: ForwardConfig
        switch command {
        case .help:
            print(ForwardCommandLine.usage)
            return 0
        case .version:
            print("sugard-forward \(sugardForwardVersion)")
            return 0
        case .manPage:
            print(ForwardCommandLine.manPage(), terminator: "")
            return 0
        case .run(let parsed):
            config = parsed
        }
        let sink = StderrLogSink(environment: environment, level: config.logLevel)
        let logger = sink.logger(label: "sugard-forward")
        let password: String?
        do {
            password = try config.password()
        } catch {
            Self.writeStderr("sugard-forward: \(error.description)\n")
            return 78
        }
        if mkdir(config.stateDirectory, 0o750) != 0 && errno != EEXIST {
            logger.error("cannot create the state directory \(config.stateDirectory): \(String(cString: strerror(errno)))")
            return 73
        }
        let forwarder = Forwarder(config: config, password: password, logger: logger)
        let runtime = environment["RUNTIME_DIRECTORY"].flatMap { $0.isEmpty ? nil : String($0.split(separator: ":").first ?? "") }
        let statusPath = (runtime ?? config.stateDirectory) + "/" + ForwardStatusService.socketName
        let server: VarlinkServer?
        do {
            server = try ForwardStatusService.makeServer(path: statusPath, status: forwarder.status, version: sugardForwardVersion)
        } catch {
            logger.warning("no status socket at \(statusPath): \(error)")
            server = nil
        }
        let signals = unixSignals([.terminate, .interrupt])
        let serverTask = Task { try? await server?.run() }
        let signalTask = Task {
            for await signal in signals {
                logger.notice("\(signal.name): stopping")
                forwarder.stop()
                break
            }
        }
        defer {
            signalTask.cancel()
            serverTask.cancel()
        }
        do {
            try await forwarder.run()
        } catch {
            logger.error("\(error)")
            serverTask.cancel()
            _ = await serverTask.value
            return 1
        }
        serverTask.cancel()
        _ = await serverTask.value
        return 0
    }

    static func writeStderr(_ text: String) {
        var text = text
        text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }
}
