import HealthDataSync
import JSON
import Locking
import SugarDaemon

/// The daemon run in the bench's own process (store, models, engine, socket), on a transport the
/// bench controls, for as long as `body` measures.
enum HostedDaemon {
    /// Starts the daemon, waits (up to 10 s) until `ready` holds for its runtime, runs `body`, and
    /// stops the daemon cleanly whatever `body` did.
    static func run(
        config: DaemonConfig, transport: any MeterTransport, shutdown: @escaping @Sendable () async -> Void,
        ready: @escaping @Sendable (DaemonRuntime) -> Bool = { _ in true },
        _ body: (DaemonRuntime) async throws -> JSONObject
    ) async throws -> JSONObject {
        let runtimeBox = Lock<DaemonRuntime?>(nil)
        let parts = DaemonParts(
            transport: transport, background: { runtime in runtimeBox.withLock { $0 = runtime } }, shutdown: shutdown)
        let daemon = Daemon(config: config, configFile: nil, environment: [:])
        return try await withThrowingTaskGroup(of: JSONObject?.self) { group -> JSONObject in
            group.addTask {
                try await daemon.run(
                    transportFactory: { _, _ in parts }, serverFactory: DaemonAssembly.server, handleSignals: false)
                return nil
            }
            defer { daemon.stop() }
            var runtime: DaemonRuntime?
            for _ in 0..<2000 {
                runtime = runtimeBox.withLock { $0 }
                if let runtime, ready(runtime) { break }
                try await Task.sleep(for: .milliseconds(5))
            }
            guard let runtime, ready(runtime) else { throw DaemonError("the daemon did not start (and get ready) within 10 s") }
            let result = try await body(runtime)
            daemon.stop()
            try await group.waitForAll()
            return result
        }
    }
}
