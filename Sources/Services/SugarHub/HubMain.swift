import Glibc
import GlucoseProfile
import HTTPServer
import HubStore
import Locking
import MQTT
import ProcessKit
import SystemIO

/// The MQTT side's database state: owned by the MQTT client's thread (the only caller of
/// `receive`), behind a lock only to satisfy Sendable.
final class Ingest: Sendable {
    /// What the lock guards: the connection and the lane's counters.
    struct State {
        /// The PostgreSQL connection; nil after it was lost, opened again on the next message.
        var store: HubStore?
        /// Failed attempts to store the current message in a row (0 once one is stored).
        var failures = 0
        /// Readings stored since start (reported when the hub stops).
        var stored = 0
        /// Readings that were already stored (a redelivery), since start.
        var duplicates = 0
    }
    let state: Lock<State>
    /// The libpq connection URI a lost connection is opened again with.
    let url: String
    /// The gateways' first topic level (`topic_prefix`), for parsing topics.
    let prefix: String
    let logger: Logger

    /// A lane's ingest, with its own connection (`store`, handed over to it).
    init(store: sending HubStore, url: String, prefix: String, logger: Logger) {
        self.state = Lock(State(store: store))
        self.url = url
        self.prefix = prefix
        self.logger = logger
    }

    /// Called inside libmosquitto's message callback, before its PUBACK (see
    /// `MQTTOptions.receive`): returns only after PostgreSQL committed the message, or false
    /// (no PUBACK; the broker sends it again) when it could not.
    func receive(topic: String, payload: [UInt8], retained: Bool) -> Bool {
        let message = HubMessage.parse(topic: topic, payload: payload, prefix: self.prefix)
        if case .ignored(let reason) = message {
            self.logger.warning("ignored a message on \(topic) (\(payload.count) bytes): \(reason)")
            return true
        }
        // Until PostgreSQL commits it, the message is not acknowledged: the callback waits here
        // (retrying with backoff) rather than dropping the connection, so an outage shorter than
        // the keep-alive costs no reconnect; a longer one ends the connection (no PING), and the
        // broker sends the message again to the session when it is back. On SIGTERM the process
        // ends with the callback still waiting (as a kill would: nothing acknowledged).
        while true {
            let (stored, delay) = self.state.withLock { s -> (Bool, Double) in
                do throws(PostgresError) {
                    if s.store == nil { s.store = try HubStore(url: self.url) }
                    guard let store = s.store else { return (false, 1) }
                    if case .reading(let r) = message {
                        if try store.store(r) { s.stored += 1 } else { s.duplicates += 1 }
                        self.logger.debug("reading \(r.id) of \(r.gateway): \(r.mgdl.map { "\($0) mg/dL" } ?? "no value")")
                    } else {
                        try message.apply(to: store)
                    }
                    if s.failures > 0 { self.logger.notice("PostgreSQL accepts writes again") }
                    s.failures = 0
                    return (true, 0)
                } catch {
                    // A lost connection is opened afresh next time; a refused statement is retried as is.
                    if error.sqlState == nil || error.sqlState?.hasPrefix("08") == true || error.sqlState?.hasPrefix("57") == true {
                        s.store = nil
                    }
                    s.failures += 1
                    if s.failures == 1 || s.failures % 20 == 0 {
                        self.logger.warning("cannot store a message from \(topic) (not acknowledged until it is stored; retrying): \(error)")
                    }
                    return (false, RetryBackoff.delay(failures: s.failures, initial: 0.2, max: 3.0))
                }
            }
            if stored { return true }
            sleepFully(seconds: delay)
        }
    }
}

/// The `sugard-hub` program. Returns the exit status.
public enum HubMain {
    /// Parses the command line, connects to PostgreSQL (migrating its tables), serves HTTP, and runs
    /// the MQTT lanes until SIGTERM or SIGINT; returns 0, an exit status the usage text lists (64
    /// bad flags, 78 bad config, 69 PostgreSQL, 71 the HTTP address), or 1 when MQTT cannot start.
    public static func run(arguments: [String], environment: [String: String]) async -> Int32 {
        let config: HubConfig
        do {
            switch try HubCommandLine.parse(arguments, environment: environment) {
            case .print(let text):
                print(text, terminator: "")
                return 0
            case .run(let parsed): config = parsed
            }
        } catch {
            Self.writeStderr("sugard-hub: \(error.description)\n")
            return error.file == nil ? 64 : 78
        }
        let sink = StderrLogSink(environment: environment, level: config.logLevel, timestamp: { CivilCalendar.isoUTC(epochMillis: $0) })
        let logger = sink.logger(label: "sugard-hub")
        let password: String?
        let token: String?
        do {
            password = try config.password()
            token = try config.authToken()
        } catch {
            Self.writeStderr("sugard-hub: \(error.description)\n")
            return 78
        }
        signal(SIGPIPE, SIG_IGN)
        guard let url = config.databaseURL else { return 78 }
        let ingestStore: HubStore
        let httpStore: HubStore
        do {
            ingestStore = try HubStore(url: url)
            let before = try HubSchema.migrate(ingestStore.db)
            if before != HubSchema.currentVersion {
                logger.notice("PostgreSQL schema migrated from version \(before) to \(HubSchema.currentVersion)")
            }
            httpStore = try HubStore(url: url)
        } catch {
            logger.error("\(error)")
            return 69
        }
        let service = HubService(
            store: httpStore, databaseURL: url, token: token, offlineAfter: config.offlineAfter, log: { logger.warning($0) })
        let server: HTTPServer
        do {
            server = try HTTPServer(host: config.listenHost, port: config.listenPort) { service.handle($0) }
        } catch {
            logger.error("\(error)")
            return 71
        }
        // ``HubConfig/lanes`` MQTT connections, each with its own PostgreSQL connection and
        // persistent session, all in the shared group: commits of one instance run in parallel
        // (PostgreSQL groups them), so one instance is not held to one commit at a time. Lane 0
        // (the configured client id) also takes the retained status and health topics.
        var ingests: [Ingest] = [Ingest(store: ingestStore, url: url, prefix: config.topicPrefix, logger: logger)]
        for _ in 1..<HubConfig.lanes {
            do {
                ingests.append(Ingest(store: try HubStore(url: url), url: url, prefix: config.topicPrefix, logger: logger))
            } catch {
                logger.error("\(error)")
                server.stop()
                return 69
            }
        }
        var clients: [MQTTClient] = []
        for (lane, ingest) in ingests.enumerated() {
            var options = MQTTOptions(host: config.mqttHost, port: config.mqttPort, clientID: config.laneClientID(lane))
            options.username = config.mqttUsername
            options.password = password
            options.caFile = config.mqttCAFile
            options.subscriptions = lane == 0 ? config.subscriptions : Array(config.subscriptions.prefix(2))
            // A persistent session: what the broker sent this connection and it did not acknowledge
            // (killed before the commit) comes again when it reconnects with the same id.
            options.cleanStart = false
            options.sessionExpirySeconds = 7 * 86_400
            options.receive = { topic, payload, retained in ingest.receive(topic: topic, payload: payload, retained: retained) }
            let id = config.laneClientID(lane)
            let client = MQTTClient(options: options) { event in
                switch event {
                case .connected:
                    logger.notice("connected to \(config.mqttURL) as \(id), sharing readings in group \(config.shareGroup)")
                case .disconnected(let reason, _, let retryIn):
                    logger.warning("MQTT (\(id)): \(reason); again in \(retryIn) s")
                default: break
                }
            }
            do {
                try client.start()
            } catch {
                logger.error("\(error)")
                for c in clients { c.stop() }
                server.stop()
                return 1
            }
            clients.append(client)
        }
        logger.notice("serving the fleet page on http://\(config.listen)/\(token == nil ? " (loopback, no token)" : "")")
        for await signal in unixSignals([.terminate, .interrupt]) {
            logger.notice("\(signal.name): stopping")
            break
        }
        for client in clients { client.stop() }
        server.stop()
        let counts = ingests.map { i in i.state.withLock { ($0.stored, $0.duplicates) } }.reduce((0, 0)) { ($0.0 + $1.0, $0.1 + $1.1) }
        logger.notice("stopped: \(counts.0) readings stored, \(counts.1) already there")
        return 0
    }

    /// Writes `text` to stderr as it is (errors before the logger exists).
    static func writeStderr(_ text: String) {
        var text = text
        text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }
}
