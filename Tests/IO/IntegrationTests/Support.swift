import Foundation
import GlucoseStore
import HealthDataSync
import JSON
import ReplayTransport
import Testing
import Locking

/// The repository's `fixtures/` directory.
let fixturesDirectory: String = {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("fixtures").path
}()

func fixturePath(_ name: String, _ suffix: String = ".btsnoop") -> String { fixturesDirectory + "/" + name + suffix }

/// Europe/Berlin from the system's zoneinfo.
func berlin() throws -> TimeZoneRules {
    let data = try #require(FileManager.default.contents(atPath: "/usr/share/zoneinfo/Europe/Berlin"))
    return try TimeZoneRules(tzif: Array(data), identifier: "Europe/Berlin")
}

/// The `records` of a fixture's expected decode.
func expectedRecords(_ name: String) throws -> [JSONValue] {
    let data = try #require(FileManager.default.contents(atPath: fixturePath(name, ".expected.json")))
    let json = try JSONValue(parsing: String(decoding: data, as: UTF8.self))
    return try #require(json["records"]?.arrayValue)
}

/// A fresh temporary directory, removed when the value goes away.
final class TempDirectory: Sendable {
    let path: String

    init() throws {
        self.path = FileManager.default.temporaryDirectory.path + "/sugard-integration-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: self.path) }
}

/// Collects engine events and answers passkey requests with the next PIN in line.
final class Observer: SyncObserver, Sendable {
    let events = Lock<[SyncProgressEvent]>([])
    let requests: AsyncStream<MeterID>
    private let input: AsyncStream<MeterID>.Continuation

    init() {
        (self.requests, self.input) = AsyncStream.makeStream(of: MeterID.self)
    }

    func syncEvent(_ event: SyncProgressEvent) {
        self.events.withLock { $0.append(event) }
        if case .passkeyRequested(let id) = event { self.input.yield(id) }
    }

    func finish() { self.input.finish() }

    var all: [SyncProgressEvent] { self.events.withLock { $0 } }

    /// Anomaly kinds published for a meter, in order.
    func anomalyKinds(_ meter: MeterID) -> [SyncAnomaly.Kind] {
        self.all.flatMap { event -> [SyncAnomaly.Kind] in
            if case .anomalies(let id, let list) = event, id == meter { return list.samples.map(\.kind) }
            return []
        }
    }

    var passkeyRequests: Int {
        self.all.filter { if case .passkeyRequested = $0 { true } else { false } }.count
    }
}

/// 2025-11-24T16:05:00Z, shortly after the fixture meters' clocks.
let fixedNow = Instant(epochMillis: 1_764_000_300_000)

/// The transport's wall clock agrees with the engine's: capture meters' clocks run from `fixedNow`.
let testWallClock: @Sendable () -> Int64 = { fixedNow.epochMillis * 1000 }

let testConfiguration = SyncConfiguration(
    connectTimeout: 5, pairingTimeout: 5, operationTimeout: 5, racpTimeout: 3, retryDelay: 0.05)

/// A real engine over a ReplayTransport and a SQLite store in a temp dir, for the body's duration.
/// Passkey requests are answered with `pins` in order (then with the last one again).
func withSyncStack(
    _ meters: [MeterSimulator], pins: [UInt32] = [], automatic: Bool = false,
    options: ReplayTransport.Options = ReplayTransport.Options(wallClock: testWallClock),
    configuration: SyncConfiguration = testConfiguration,
    _ body: (SyncEngine, ReplayTransport, SQLiteReadingStore, Observer) async throws -> Void
) async throws {
    let directory = try TempDirectory()
    let store = try SQLiteReadingStore(path: directory.path + "/sugard.sqlite")
    let transport = ReplayTransport(meters: meters, options: options)
    let observer = Observer()
    let engine = SyncEngine(
        transport: transport, store: store, zone: try berlin(), configuration: configuration, cooldownSeconds: 0,
        automaticSync: automatic, observer: observer, now: { fixedNow })
    let runner = Task { await engine.run() }
    let responder = Task {
        var queue = pins[...]
        var last = pins.last
        for await id in observer.requests {
            let pin = queue.popFirst() ?? last
            last = pin
            try? await engine.submitPasskey(pin, for: id)
        }
    }
    func stop() async {
        await engine.shutdown()
        await transport.shutdown()
        observer.finish()
        await runner.value
        await responder.value
        await store.close()
    }
    do {
        try await body(engine, transport, store, observer)
    } catch {
        await stop()
        throw error
    }
    await stop()
}

/// Stored readings of a meter in the order they were stored.
func stored(_ store: SQLiteReadingStore, _ meter: MeterID) async throws -> [StoredReading] {
    try await store.readings(ReadingQuery(meter: meter)).sorted { $0.id < $1.id }
}
