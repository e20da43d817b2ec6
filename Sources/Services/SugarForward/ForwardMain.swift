import Glibc
import GlucoseProfile
import Locking
import NightscoutSink
import ProcessKit
import Varlink

/// The version `sugard-forward --version` prints.
public let sugardForwardVersion = "0.1.0"

/// The `sugard-forward` program: parse, start the forwarder and its status socket, stop on
/// SIGTERM/SIGINT. Returns the exit status.
public enum ForwardMain {
    /// Runs until SIGTERM or SIGINT and returns 0; or 64 for bad flags, 78 for a bad configuration
    /// (or a secret others may read), 73 when the state directory cannot be created, 1 when the
    /// MQTT forwarder fails.
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
        case .print(let text):
            print(text, terminator: "")
            return 0
        case .run(let parsed):
            config = parsed
        }
        let sink = StderrLogSink(environment: environment, level: config.logLevel, timestamp: { CivilCalendar.isoUTC(epochMillis: $0) })
        let logger = sink.logger(label: "sugard-forward")
        let password: String?
        let nightscout: NightscoutForwarding
        do {
            password = config.mqttEnabled ? try config.password() : nil
        } catch {
            Self.writeStderr("sugard-forward: \(error.description)\n")
            return 78
        }
        if mkdir(config.stateDirectory, 0o750) != 0 && errno != EEXIST {
            logger.error("cannot create the state directory \(config.stateDirectory): \(String(cString: strerror(errno)))")
            return 73
        }
        do {
            nightscout = try NightscoutForwarding(config: config, logger: logger)
        } catch {
            Self.writeStderr("sugard-forward: \(error.description)\n")
            return 78
        }
        let forwarder =
            config.mqttEnabled ? Forwarder(config: config, password: password, logger: logger, otherSinks: { nightscout.statusWire() }) : nil
        if forwarder == nil { logger.notice("no mqtt_url: Nightscout sinks only") }
        let alerter: Alerter
        do {
            alerter = try Alerter(config: config, logger: logger, mqtt: forwarder != nil)
        } catch {
            Self.writeStderr("sugard-forward: \(error.description)\n")
            return 78
        }
        if let forwarder { alerter.attachMQTT(forwarder) }
        let runtime = environment["RUNTIME_DIRECTORY"].flatMap { $0.isEmpty ? nil : String($0.split(separator: ":").first ?? "") }
        let statusPath = (runtime ?? config.stateDirectory) + "/" + ForwardStatusService.socketName
        let server: VarlinkServer?
        do {
            server = try ForwardStatusService.makeServer(
                path: statusPath,
                sinks: { (forwarder.map { [$0.status.withLock { $0.wire }] } ?? []) + nightscout.statusWire() },
                alerts: { alerter.reply }, version: sugardForwardVersion)
        } catch {
            logger.warning("no status socket at \(statusPath): \(error)")
            server = nil
        }
        let signals = unixSignals([.terminate, .interrupt, .hangup])
        let serverTask = Task { try? await server?.run() }
        let nightscoutTask = Task { await nightscout.run() }
        // An unusable alerts.json stops the forwarder (exit 1), as an unusable cursor file does:
        // alerts must not go silent while the process looks healthy.
        let alerterTask = Task { () -> Bool in
            do {
                try await alerter.run()
                return true
            } catch {
                logger.error("\(error)")
                forwarder?.stop()
                nightscoutTask.cancel()
                return false
            }
        }
        let signalTask = Task {
            for await signal in signals {
                if signal == .hangup {
                    logger.notice("SIGHUP: refused and paused Nightscout sinks and retrying webhooks try again now")
                    nightscout.resume()
                    alerter.retryNow()
                    continue
                }
                logger.notice("\(signal.name): stopping")
                forwarder?.stop()
                alerter.stop()
                nightscoutTask.cancel()
                break
            }
        }
        defer {
            signalTask.cancel()
            serverTask.cancel()
            nightscoutTask.cancel()
            alerterTask.cancel()
        }
        do {
            try await forwarder?.run()
        } catch {
            logger.error("\(error)")
            nightscoutTask.cancel()
            serverTask.cancel()
            alerter.stop()
            _ = await alerterTask.value
            _ = await nightscoutTask.value
            _ = await serverTask.value
            return 1
        }
        // Without an MQTT sink this waits for SIGTERM/SIGINT.
        _ = await nightscoutTask.value
        alerter.stop()
        let alertsRan = await alerterTask.value
        serverTask.cancel()
        _ = await serverTask.value
        return alertsRan ? 0 : 1
    }

    static func writeStderr(_ text: String) {
        var text = text
        text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }
}
