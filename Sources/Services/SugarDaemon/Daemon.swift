import Glibc
import GlucoseProfile
import GlucoseStore
import HealthDataSync
import ProcessKit
import SugarAPI
import Locking
import SystemIO

/// The daemon's version, shown by `sugard --version` and in the status.
public let sugardVersion = sugarVersion

/// Something the daemon runs until its task is cancelled (the socket server).
public protocol DaemonService: Sendable {
    /// Serves until cancelled; throws when it cannot go on (the daemon logs it and keeps syncing).
    func run() async throws
}

/// What a transport's background work may use once the daemon is assembled.
public struct DaemonRuntime: Sendable {
    /// Every meter's view model and the daemon's.
    public let models: ModelStore
    /// The sync engine (to sync, pair and submit passkeys).
    public let engine: SyncEngine
    /// The daemon's logger.
    public let logger: Logger
}

/// What the daemon was built from: the parts that differ between the demo, replay and BlueZ.
public struct DaemonParts: Sendable {
    /// Where meters come from.
    public var transport: any MeterTransport
    /// Work the transport needs running for the daemon's lifetime (BlueZ's bus loop, the demo's
    /// new readings); cancelled at shutdown.
    public var background: (@Sendable (DaemonRuntime) async -> Void)?
    /// Called after the engine stopped, to release the transport.
    public var shutdown: (@Sendable () async -> Void)?

    /// Parts with a transport and, when it needs them, background work and a shutdown.
    public init(
        transport: any MeterTransport, background: (@Sendable (DaemonRuntime) async -> Void)? = nil,
        shutdown: (@Sendable () async -> Void)? = nil
    ) {
        self.transport = transport
        self.background = background
        self.shutdown = shutdown
    }
}

/// Builds the transport for a configuration (demo, replay captures, or BlueZ).
public typealias TransportFactory = @Sendable (DaemonConfig, Logger) async throws -> DaemonParts
/// Builds the socket server for the backend (binds the socket before returning).
public typealias ServerFactory = @Sendable (DaemonConfig, any SugarBackend, Logger) throws -> any DaemonService

/// Re-reads the configuration on SIGHUP the way start-up read it (file, then flags).
public typealias ConfigReloader = @Sendable () throws(ConfigError) -> DaemonConfig

/// Why the daemon could not start.
public struct DaemonError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, in words for the log and stderr.
    public var message: String
    /// An error saying `message`.
    public init(_ message: String) { self.message = message }
    /// The message.
    public var description: String { self.message }
}

/// Composition root: opens the store, builds the models, the engine and the socket, and runs
/// them under one task group until SIGTERM/SIGINT. The order of shutdown is the reverse of
/// start: stop syncing (RACP abort, commit or roll back the open batch), close the socket,
/// clear the models, close the database last.
public final class Daemon: Sendable {
    /// The running configuration (SIGHUP changes its log level).
    let config: Lock<DaemonConfig>
    /// The config file SIGHUP re-reads; nil when none was given.
    let configFile: String?
    /// The process environment (`TZ`, systemd's `NOTIFY_SOCKET` and `WATCHDOG_USEC`, logging).
    let environment: [String: String]
    /// How SIGHUP re-reads the configuration; nil reads ``configFile``.
    let reloadConfig: ConfigReloader?
    let sink: StderrLogSink
    let notifier: SystemdNotifier
    /// ``stop()`` requests: the running `run`'s request stream (nil outside `run`), and whether
    /// `stop()` was called (so a request made before `run` starts is not lost).
    let stopState = Lock<(requests: AsyncStream<UnixSignal?>.Continuation?, requested: Bool)>((nil, false))

    /// - Parameter reloadConfig: how SIGHUP re-reads the configuration (normally the command line
    ///   parsed again, so flags keep winning over the file); nil reads `configFile` over the
    ///   running paths.
    public init(
        config: DaemonConfig, configFile: String?, environment: [String: String], reloadConfig: ConfigReloader? = nil
    ) {
        self.config = Lock(config)
        self.configFile = configFile
        self.environment = environment
        self.reloadConfig = reloadConfig
        self.sink = StderrLogSink(environment: environment, level: config.logLevel, timestamp: { CivilCalendar.isoUTC(epochMillis: $0) })
        self.notifier = SystemdNotifier(environment: environment)
    }

    /// Asks a running ``run(transportFactory:serverFactory:handleSignals:)`` to shut down as SIGTERM
    /// would (for benchmarks and tests that host the daemon in-process). Before `run` starts, the
    /// request is kept and `run` stops right after start-up.
    public func stop() {
        self.stopState.withLock { state in
            state.requested = true
            _ = state.requests?.yield(nil)
        }
    }

    /// Runs until a stop signal (or ``stop()``); returns normally after a clean shutdown.
    /// - Parameter handleSignals: take over SIGTERM/SIGINT/SIGHUP (the executable); off when the
    ///   daemon is hosted in another program, which then stops it with ``stop()``.
    /// - Throws: a ``DaemonError`` when the state or socket directory cannot be made, or what the
    ///   transport or server factory throws (a socket that cannot be bound); nothing after start-up.
    public func run(transportFactory: TransportFactory, serverFactory: ServerFactory, handleSignals: Bool = true) async throws {
        let config = self.config.withLock { $0 }
        let logger = self.sink.logger(label: "sugard")
        Self.raiseDescriptorLimit(logger: logger)

        try Self.makeDirectory(config.stateDirectory)
        Self.tighten(directory: config.stateDirectory, logger: logger)
        let socketDirectory = String(config.socketPath.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/"))
        if !socketDirectory.isEmpty { try Self.makeDirectory(socketDirectory) }

        // Store first: everything else reports into or reads from it.
        DaemonBackend.removeLeftovers(databasePath: config.databasePath, logger: logger)
        // No whole-file check on the way to ready (it grew with the store: 1.3-1.7 s at a million
        // readings); after an unclean stop one runs in the background (StorageChecks).
        let uncleanStop = StorageChecks.lastStopWasUnclean(databasePath: config.databasePath)
        let store = SQLiteReadingStore(retryingOpenAt: config.databasePath, options: StoreOptions(quickCheckOnOpen: false))
        StorageChecks.writeMarker(databasePath: config.databasePath, logger: logger)
        let health = await store.health()
        if health.status != .ok {
            logger.error("storage: \(health.error?.message ?? health.status.rawValue)")
        }

        let zone = Self.loadZone(config.timeZone, environment: self.environment, logger: logger)
        let startedAt = systemNow()
        let viewModel = ViewModel(ViewState(daemon: DaemonInfo(version: sugardVersion, startedAt: startedAt, storage: health)))
        let models = ModelStore(viewModel: viewModel)
        await Self.restore(models: models, from: store, logger: logger)
        viewModel.activate()

        let bridge = ModelBridge(models: models, logger: logger.named("sync"), now: { systemNow() })
        let parts = try await transportFactory(config, logger)
        let engine = SyncEngine(
            transport: parts.transport, store: store, zone: zone,
            configuration: SyncConfiguration(
                setMeterClock: config.setMeterClock, clockToleranceSeconds: Double(config.clockToleranceSeconds)),
            cooldownSeconds: Double(config.cooldownSeconds),
            observer: bridge, logger: logger.named("sync"), now: { systemNow() }, maxConnections: config.maxMeterConnections)
        let backend = DaemonBackend(models: models, store: store, engine: engine, logger: logger.named("storage"))
        let server = try serverFactory(config, backend, logger.named("socket"))

        // Take over the signals before READY=1: a supervisor may send SIGHUP or SIGTERM the moment
        // it sees READY, and a signal in between would find the default action (or be ignored).
        let signals = handleSignals ? unixSignals([.terminate, .interrupt, .hangup]) : nil
        logger.notice(
            "sugard \(sugardVersion) ready", [("socket", config.socketPath), ("database", config.databasePath), ("zone", zone.identifier)])
        self.notifier.ready(status: Self.statusLine(viewModel.state))

        // Signals and stop() requests (nil) arrive on one stream.
        let (requests, requestInput) = AsyncStream.makeStream(of: UnixSignal?.self, bufferingPolicy: .bufferingNewest(16))
        self.stopState.withLock { state in
            state.requests = requestInput
            if state.requested { requestInput.yield(nil) }
        }
        defer { self.stopState.withLock { $0.requests = nil } }
        await withTaskGroup(of: Void.self) { group in
            if let signals {
                group.addTask {
                    for await signal in signals { requestInput.yield(signal) }
                }
            }
            group.addTask { await engine.run() }
            group.addTask {
                do {
                    try await server.run()
                } catch {
                    logger.error("socket server stopped: \(error)")
                }
            }
            group.addTask { await self.followState(viewModel: viewModel, store: store) }
            group.addTask { await Self.superviseStorage(models: models, store: store, logger: logger) }
            group.addTask { await Self.watchDatabaseFile(models: models, store: store, logger: logger) }
            group.addTask {
                await StorageChecks.background(uncleanStop: uncleanStop, store: store, models: models, logger: logger.named("storage"))
            }
            if let interval = self.notifier.watchdogInterval {
                // A quarter of the interval: a late ping (a busy machine) still lands well inside it.
                group.addTask { await self.watchdog(every: interval / 4) }
            }
            if let background = parts.background {
                let runtime = DaemonRuntime(models: models, engine: engine, logger: logger)
                group.addTask { await background(runtime) }
            }
            for await request in requests {
                if request == .hangup {
                    self.reload(logger: logger)
                    continue
                }
                logger.notice("\(request?.name ?? "stop requested"): shutting down")
                self.notifier.stopping(status: "stopping")
                break
            }
            // Stop syncing first: aborts RACP in flight and commits or discards the open batch.
            await engine.shutdown(deadlineSeconds: 10)
            group.cancelAll()
        }
        await parts.shutdown?()
        models.shutdown()
        await store.close()
        StorageChecks.removeMarker(databasePath: config.databasePath)
        logger.notice("stopped")
    }

    /// Re-reads the config file on SIGHUP. The log level applies at once; other changes need a
    /// restart and are named in the log.
    func reload(logger: Logger) {
        self.notifier.reloading()
        defer { self.notifier.notify("READY=1") }
        guard let file = self.configFile else {
            logger.notice("SIGHUP: no config file to reload")
            return
        }
        do {
            let current = self.config.withLock { $0 }
            let fresh: DaemonConfig
            if let reloadConfig = self.reloadConfig {
                fresh = try reloadConfig()
            } else {
                guard let text = try ConfigFile.readText(file) else { throw ConfigError(file: file, "no such file") }
                var parsed = DaemonConfig(stateDirectory: current.stateDirectory, socketPath: current.socketPath)
                parsed.demo = current.demo
                parsed.replay = current.replay
                try parsed.apply(fileText: text, file: file)
                fresh = parsed
            }
            self.sink.setLevel(fresh.logLevel)
            let needsRestart = DaemonConfig.keysNeedingRestart(from: current, to: fresh)
            self.config.withLock { $0.logLevel = fresh.logLevel }
            logger.notice(
                "SIGHUP: reloaded \(file): log_level=\(fresh.logLevel.name)"
                    + (needsRestart.isEmpty ? "" : "; restart to apply \(needsRestart.joined(separator: ", "))"))
        } catch {
            logger.error("SIGHUP: keeping the running configuration: \(error)")
        }
    }

    /// Keeps the STATUS= line and the storage health in step with the view model.
    func followState(viewModel: ViewModel, store: SQLiteReadingStore) async {
        let watcher = viewModel.watch(fields: [.meters, .sync, .lastReading, .adapter], policy: .coalesced)
        defer { watcher.cancel() }
        var lastStatus = ""
        while let message = await watcher.next() {
            if message.fields[.sync] != nil || message.fields[.meters] != nil {
                let health = await store.health()
                if viewModel.state.daemon.storage != health {
                    viewModel.update { $0.daemon.storage = health }
                }
            }
            let status = Self.statusLine(viewModel.state)
            if status != lastStatus {
                self.notifier.status(status)
                lastStatus = status
            }
        }
    }

    /// While storage is not ok, tries it every 2 s (a read reopens the database); when it answers
    /// again, the counts, the latest reading and the meters are read back into the view model, so
    /// `status` and the readings are right again without a restart. Sleeps while storage is ok.
    static func superviseStorage(models: ModelStore, store: SQLiteReadingStore, logger: Logger) async {
        let viewModel = models.viewModel
        let watcher = viewModel.watch(fields: [.daemon], policy: .coalesced)
        defer { watcher.cancel() }
        while !Task.isCancelled {
            let storage = viewModel.state.daemon.storage
            // Damage found by an integrity check is shown, not retried: reads and writes still work.
            // (The store reports `degraded` with code `corrupt` only for that; a failing write with it is `failed`.)
            let onlyDamageFound = storage.status == .degraded && storage.error?.code == .corrupt
            if storage.status == .ok || onlyDamageFound {
                guard await watcher.next() != nil else { return }
                continue
            }
            try? await Task.sleep(for: .seconds(2))
            if Task.isCancelled { return }
            let before = viewModel.state.daemon.storage
            guard (try? await store.readingCount(meter: nil)) != nil else { continue }
            await Self.restore(models: models, from: store, logger: logger)
            let health = await store.health()
            if health != before {
                viewModel.update { $0.daemon.storage = health }
                if health.status == .ok { logger.notice("storage: \(health.path) works again") }
            }
        }
    }

    /// Every 2 s: does the configured path still name the open database file? When it was
    /// deleted, renamed or replaced, the store reopens (or recreates) the file at the path under a
    /// new identity (it also checks before every operation, so nothing is committed to the old
    /// file meanwhile); here the change is logged and shown in the view model (`storage`: degraded,
    /// error `replaced`), and the counts and meters are read from the new file.
    static func watchDatabaseFile(models: ModelStore, store: SQLiteReadingStore, logger: Logger) async {
        var seen = await store.replacements
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(2))
            if Task.isCancelled { return }
            let health = await store.checkFile()
            let replacements = await store.replacements
            // Only a replacement is this task's to show: other changes of health are the
            // supervisor's (superviseStorage) and the sync's to report.
            guard replacements != seen else { continue }
            seen = replacements
            logger.error("storage: \(health.error?.message ?? "the database file was replaced")")
            await Self.restore(models: models, from: store, logger: logger)
            let current = await store.health()
            if models.viewModel.state.daemon.storage != current {
                models.viewModel.update { $0.daemon.storage = current }
            }
        }
    }

    /// Pings systemd's watchdog every `interval` until cancelled.
    func watchdog(every interval: Duration) async {
        while !Task.isCancelled {
            self.notifier.watchdog()
            try? await Task.sleep(for: interval)
        }
    }

    /// One line a person can read in `systemctl status`: `syncing Accu-Chek Guide 12/40`.
    public static func statusLine(_ state: ViewState) -> String {
        // Meters waiting for a connection slot come after the ones connected.
        let syncing = state.meterList.filter { !$0.sync.isFinal && $0.sync != .idle }.sorted { ($0.sync == .queued ? 1 : 0) < ($1.sync == .queued ? 1 : 0) }
        if let meter = syncing.first {
            var text = "syncing \(meter.identity.displayName)"
            if meter.progress.received > 0 || meter.progress.expected != nil {
                text += " \(meter.progress.received)/\(meter.progress.expected.map(String.init) ?? "?")"
            }
            let queued = syncing.filter { $0.sync == .queued }.count
            let others = syncing.count - 1 - queued
            if others > 0 { text += " (+\(others) more)" }
            if queued > 0 { text += " (\(queued) queued)" }
            return text
        }
        if state.daemon.storage.status != .ok {
            return "storage \(state.daemon.storage.status.rawValue): \(state.daemon.storage.error?.message ?? "")"
        }
        if !state.adapter.present { return "waiting for a Bluetooth adapter" }
        let meters = state.meters.count
        var text = "\(meters) meter\(meters == 1 ? "" : "s"), \(state.readingCount) readings"
        if let last = state.sync.lastResult {
            text += ", last sync \(last.at.isoString) \(last.result.rawValue)"
        }
        return text
    }

    /// Meters and counts known from earlier runs, so status is right before the first sync.
    static func restore(models: ModelStore, from store: SQLiteReadingStore, logger: Logger) async {
        do {
            let count = try await store.readingCount(meter: nil)
            let latest = try await store.readings(ReadingQuery(limit: 1, order: .descending)).first
            models.viewModel.update { state in
                state.readingCount = count
                state.lastReading = latest.map { ReadingSummary($0) }
            }
            // Meters already live (storage came back while the daemon ran) keep their live state.
            for meter in try await store.meters() where models.model(for: meter.identity.id) == nil {
                let model = models.model(
                    for: meter.identity,
                    initial: MeterState(
                        identity: meter.identity, highWater: meter.highWater,
                        pairing: .unknown))
                if let at = meter.lastSync, let result = meter.lastSyncResult {
                    model.update { $0.lastSync = LastSync(meter: meter.identity.id, at: at, result: result) }
                }
                model.activate()
            }
        } catch {
            logger.error("could not read the stored state: \(error.message)")
        }
    }

    /// The meters' zone: the configured one, else `TZ`, else /etc/localtime, else UTC.
    static func loadZone(_ configured: String?, environment: [String: String], logger: Logger) -> TimeZoneRules {
        var candidates: [(path: String, name: String)] = []
        if let configured { candidates.append(("/usr/share/zoneinfo/" + configured, configured)) }
        if configured == nil, let tz = environment["TZ"], !tz.isEmpty {
            let name = tz.hasPrefix(":") ? String(tz.dropFirst()) : tz
            candidates.append((name.hasPrefix("/") ? name : "/usr/share/zoneinfo/" + name, name))
        }
        if configured == nil {
            candidates.append(("/etc/localtime", Self.localZoneName() ?? "localtime"))
        }
        for candidate in candidates {
            if let bytes = readBinaryFile(candidate.path),
                let rules = try? TimeZoneRules(tzif: bytes, identifier: candidate.name)
            {
                return rules
            }
            logger.warning("time zone \(candidate.name) could not be read from \(candidate.path)")
        }
        logger.warning("using UTC for the meters' clocks; set `timezone` in the config file")
        return .utc
    }

    /// `Europe/Berlin` from the /etc/localtime symlink, when it is one.
    static func localZoneName() -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/etc/localtime", &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        let target = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let range = target.firstRange(of: "zoneinfo/") else { return nil }
        return String(target[range.upperBound...])
    }

    /// Makes the state directory 0750 whatever it was (another user must not read the readings),
    /// leaving it alone when it is shared with others (not owned by this user).
    static func tighten(directory path: String, logger: Logger) {
        var info = stat()
        guard stat(path, &info) == 0, info.st_uid == geteuid(), info.st_mode & 0o027 != 0 else { return }
        let tightened = info.st_mode & 0o7777 & ~0o027
        if chmod(path, tightened) == 0 {
            logger.notice("state directory \(path) was mode \(String(info.st_mode & 0o7777, radix: 8)); now \(String(tightened, radix: 8))")
        } else {
            logger.warning("cannot tighten the mode of \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Creates the directory and its missing parents (0750), like `mkdir -p`; throws a `DaemonError`
    /// naming the part that could not be created.
    static func makeDirectory(_ path: String) throws {
        var prefix = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            prefix += "/" + part
            if mkdir(prefix, 0o750) != 0 && errno != EEXIST {
                throw DaemonError("cannot create \(prefix): \(String(cString: strerror(errno)))")
            }
        }
    }
}
