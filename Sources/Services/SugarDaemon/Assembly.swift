import BlueZTransport
import Glibc
import GlucoseProfile
import HealthDataSync
import PacketCapture
import ProcessKit
import ReplayTransport
import SugarAPI
import Varlink

/// The Varlink server is what the daemon serves: started with it, stopped at shutdown.
extension VarlinkServer: DaemonService {}

/// The standard parts: the transport for the configuration and the Varlink server.
public enum DaemonAssembly {
    /// Demo: a simulated Accu-Chek Guide (passkey pairing) from the fixtures that takes a new
    /// reading every `demo_interval` seconds. Replay: each capture plays as a meter. Otherwise
    /// BlueZ on the system bus.
    public static let transports: TransportFactory = { config, logger in
        if config.simulateMeters > 0 {
            return SimulatedFleet.parts(config: config, logger: logger)
        }
        if config.demo {
            return DaemonAssembly.demo(config: config, logger: logger)
        }
        if !config.replay.isEmpty {
            var meters: [MeterSimulator] = []
            for path in config.replay {
                do {
                    meters.append(try ReplayTransport.meter(fromCapture: path))
                } catch {
                    throw DaemonError("cannot replay \(path): \(error)")
                }
            }
            let transport = ReplayTransport(
                meters: meters, options: ReplayTransport.Options(operationDelay: .milliseconds(config.replayDelayMilliseconds)))
            logger.notice("replaying \(meters.count) capture(s) as meters instead of BlueZ")
            return DaemonParts(transport: transport, shutdown: { await transport.shutdown() })
        }
        let transport = BlueZTransport(
            configuration: BlueZTransportConfiguration(adapter: config.adapter), logger: logger)
        let background: @Sendable (DaemonRuntime) async -> Void = { runtime in
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await transport.run() }
                group.addTask {
                    // Meters are expected all the time: LE discovery filtered on the Glucose service stays
                    // on. When BlueZ or the adapter is not there yet, the transport starts it when they are.
                    do throws(TransportError) {
                        try await transport.setDiscovery(true)
                    } catch {
                        runtime.logger.notice("discovery starts when the adapter is available: \(error.message)")
                    }
                }
            }
        }
        return DaemonParts(transport: transport, background: background)
    }

    /// The demo's parts: one simulated Accu-Chek Guide on a replay transport (no Bluetooth), a helper
    /// that enters its passkey when it asks, and a new reading every `demo_interval` seconds
    /// (55...260 mg/dL, a random walk from 110).
    static func demo(config: DaemonConfig, logger: Logger) -> DaemonParts {
        let fixture = FixtureMeter.accuChekGuide
        let simulator = fixture.simulator
        let meter = MeterID(simulator.personality.address.description)
        let transport = ReplayTransport(
            meters: [simulator],
            options: ReplayTransport.Options(
                operationDelay: .milliseconds(120), adapterName: "demo", clock: { hostLocalDateTime() }))
        let interval = Duration.seconds(config.demoInterval)
        logger.notice("demo: a simulated \(fixture.personality.manufacturer ?? "") \(fixture.personality.model ?? "") (\(meter)); no Bluetooth used")
        let background: @Sendable (DaemonRuntime) async -> Void = { runtime in
            await withTaskGroup(of: Void.self) { group in
                // The person holding the meter: reads the PIN off its screen when asked.
                group.addTask {
                    await self.enterDemoPIN(meter: meter, pin: FixtureMeter.accuChekPasskey, runtime: runtime)
                }
                // The person testing: a new reading now and then, each announced like a meter
                // waking up, so the automatic sync picks it up.
                group.addTask {
                    var generator = SystemRandomNumberGenerator()
                    var value = 110
                    while !Task.isCancelled {
                        try? await Task.sleep(for: interval)
                        if Task.isCancelled { break }
                        value = max(55, min(260, value + Int.random(in: -25...25, using: &generator)))
                        if let seq = transport.addReading(mgdL: value, at: hostLocalDateTime(), to: meter) {
                            runtime.logger.info("demo: the meter took reading #\(seq)")
                        }
                    }
                }
            }
        }
        return DaemonParts(transport: transport, background: background, shutdown: { await transport.shutdown() })
    }

    /// Plays the person entering the PIN: waits for the meter's model, then submits `pin` each time
    /// its pairing state asks for a passkey; ends when the task is cancelled.
    static func enterDemoPIN(meter: MeterID, pin: UInt32, runtime: DaemonRuntime) async {
        // Wait for the meter model, then follow its pairing state.
        var model = runtime.models.model(for: meter)
        while model == nil, !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(100))
            model = runtime.models.model(for: meter)
        }
        guard let model else { return }
        let watcher = model.watch(fields: [.pairing])
        defer { watcher.cancel() }
        while let _ = await watcher.next() {
            guard model.state.pairing == .waitingForPasskey else { continue }
            runtime.logger.notice("demo: entering the PIN \(pin) the simulated meter shows")
            do {
                try await runtime.engine.submitPasskey(pin, for: meter)
            } catch {
                runtime.logger.warning("demo: the PIN was not accepted: \(error)")
            }
        }
    }

    /// The Varlink server: socket from systemd when activated, else the configured path; the
    /// configured group and admin group; the connection caps.
    public static let server: ServerFactory = { config, backend, logger in
        let socketGroup = try config.socketGroup.map { try groupID($0) }
        let adminGroup = try config.adminGroup.map { try groupID($0) }
        let access = AccessPolicy.currentProcess(socketGroup: socketGroup ?? getegid(), adminGroup: adminGroup)
        let service = HealthDataSyncService(backend: backend, access: access, unit: config.unit)
        let forwarderUID = config.forwarderUser.flatMap { Self.userID($0) }
        if let user = config.forwarderUser, forwarderUID == nil {
            logger.info("forwarder_user \(user) does not exist here: no forwarder's connections are exempt from the per-user cap")
        }
        let listen: VarlinkServerConfiguration.Listen =
            VarlinkServerConfiguration.systemdListeningSocket().map { .fileDescriptor($0) } ?? .path(config.socketPath)
        do {
            let server = try service.makeServer(listen: listen, version: sugardVersion) { configuration in
                configuration.socketMode = config.socketMode
                configuration.socketGroup = socketGroup
                configuration.maxConnections = config.maxSocketConnections
                configuration.maxConnectionsPerUID = config.maxConnectionsPerUID
                // One user may hold at most a quarter of what is left to unprivileged users; root,
                // sugard's own user and the forwarder's are not held to it and may use the reserve.
                configuration.maxConnectionsPerUIDShare = 0.25
                if let forwarder = forwarderUID { configuration.privilegedUIDs.insert(forwarder) }
                configuration.connectionCapAdvice =
                    "close connections you no longer need (each running sugarctl watch holds one), or raise "
                    + "max_socket_connections / max_connections_per_uid in sugard.conf (below the open-files limit, LimitNOFILE)"
                // A peer refused every method may send only small messages (it still gets its
                // PermissionDenied), so it cannot make the daemon parse big payloads.
                // sugard's calls are small (the largest, ListReadings with every filter, is under
                // 1 KiB): 64 KiB instead of the Varlink default of 1 MiB, so a hostile message costs
                // little to read and refuse.
                configuration.maxMessageBytes = 64 << 10
                configuration.isRestricted = { !access.allows($0, .read) && !access.allows($0, .admin) }
                configuration.log = { logger.warning($0) }
            }
            let caps = server.connectionCaps
            let exempt = server.configuration.privilegedUIDs.sorted().map { "uid \($0)" }.joined(separator: ", ")
            logger.info(
                "connections: at most \(caps.total), \(caps.perUID) per user; \(exempt) not held to the per-user cap"
                    + " (\(server.configuration.reservedConnections) kept for them)")
            return server
        } catch {
            throw DaemonError("cannot serve \(config.socketPath): \(error)")
        }
    }

    /// A user's uid from its name or number; nil when there is no such user.
    static func userID(_ name: String) -> UInt32? {
        if let uid = UInt32(name) { return uid }
        return getpwnam(name).map { $0.pointee.pw_uid }
    }

    /// A group's gid from its name or number; throws a `DaemonError` naming the config keys when
    /// there is no such group.
    static func groupID(_ name: String) throws -> UInt32 {
        if let gid = UInt32(name) { return gid }
        guard let entry = getgrnam(name) else { throw DaemonError("no group named \"\(name)\" (socket_group/admin_group)") }
        return entry.pointee.gr_gid
    }
}

/// The host's wall-clock time now (what a meter set from this host's clock would show).
func hostLocalDateTime() -> DateTime {
    var now = time(nil)
    var parts = tm()
    localtime_r(&now, &parts)
    return DateTime(
        year: UInt16(parts.tm_year + 1900), month: UInt8(parts.tm_mon + 1), day: UInt8(parts.tm_mday),
        hours: UInt8(parts.tm_hour), minutes: UInt8(parts.tm_min), seconds: UInt8(min(parts.tm_sec, 59)))
}
