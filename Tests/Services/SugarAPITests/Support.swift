import Foundation
import Glibc
import GlucoseProfile
import GlucoseStore
import HealthDataSync
import JSON
import PacketCapture
import ProcessKit
import ReplayTransport
import SugarAPI
import SugarDaemon
import Testing
import TestSupport
import Varlink
import Locking

struct TestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

let meterA = MeterIdentity(
    id: MeterID("C0:26:DA:01:02:03"), name: "meter", manufacturer: "Roche", model: "Accu-Chek Guide",
    serialNumber: "92600001")
let meterB = MeterIdentity(id: MeterID("C0:26:DA:0A:0B:0C"), name: "Contour", serialNumber: "B0002")
/// 2024-03-31T06:00:00Z, the first seeded reading.
let seedStart = Instant(epochMillis: 1_711_864_800_000)
let hour: Int64 = 3_600_000
/// The PIN both simulated meters show when pairing.
let meterPasskey: UInt32 = 123_456
/// The zone the meters' clocks are set to: UTC+1 all year (POSIX sign: Etc/GMT-1).
let meterZone = "Etc/GMT-1"

/// A record a simulated meter stores: `mgdL` in kg/L units, capillary whole blood from a finger,
/// taken at `instant` (the meter's clock shows UTC+1). `hi`, `lo` and `controlSolution` in `flags`
/// change the record as a meter would send it (+INF, -INF, sample type 10).
func meterRecord(sequence: UInt16, mgdL: Int, at instant: Instant, flags: ReadingFlags = []) -> SimulatedRecord {
    let local = LocalDateTime(secondsSinceEpoch: instant.epochMillis / 1000 + 3600)
    var concentration = SFloat(rawValue: UInt16(0xB000 | (mgdL & 0x0FFF)))
    if flags.contains(.hi) { concentration = .positiveInfinity }
    if flags.contains(.lo) { concentration = .negativeInfinity }
    let measurement = GlucoseMeasurement(
        sequenceNumber: sequence,
        baseTime: DateTime(
            year: UInt16(local.year), month: UInt8(local.month), day: UInt8(local.day), hours: UInt8(local.hour),
            minutes: UInt8(local.minute), seconds: UInt8(local.second)),
        concentration: concentration, unit: .kilogramsPerLiter,
        type: SampleType(code: flags.contains(.controlSolution) ? 10 : 1), sampleLocation: SampleLocation(code: 1))
    return SimulatedRecord(measurement)
}

/// Seeded data: meter A has 5 readings an hour apart from `seedStart` (the 3rd a control-solution
/// test, the 4th HI), meter B 2 readings after them.
func seedRecords() -> [(MeterIdentity, [SimulatedRecord])] {
    let a: [SimulatedRecord] = (0..<5).map { i in
        let flags: ReadingFlags = i == 2 ? [.controlSolution] : i == 3 ? [.hi] : []
        return meterRecord(
            sequence: UInt16(i + 1), mgdL: 90 + i * 10, at: Instant(epochMillis: seedStart.epochMillis + Int64(i) * hour),
            flags: flags)
    }
    let b: [SimulatedRecord] = (0..<2).map { i in
        meterRecord(
            sequence: UInt16(i + 1), mgdL: 150 + i, at: Instant(epochMillis: seedStart.epochMillis + Int64(5 + i) * hour))
    }
    return [(meterA, a), (meterB, b)]
}

/// A simulated meter with this identity: passkey pairing (already bonded, as a meter paired
/// before), no readable clock, the records given.
func simulatedMeter(_ identity: MeterIdentity, records: [SimulatedRecord]) -> MeterSimulator {
    let address = try! BluetoothAddress(parsing: identity.id.rawValue)
    let personality = MeterPersonality(
        address: address, name: identity.name ?? "meter", manufacturer: identity.manufacturer, model: identity.model,
        serialNumber: identity.serialNumber, firmware: "1.0", feature: GlucoseFeature(rawValue: 0x0400), hasContext: false,
        clock: .none, pairing: .passkey(meterPasskey), mtu: 23)
    var simulator = MeterSimulator(personality: personality)
    for record in records { simulator.addRecord(record) }
    _ = simulator.pair(passkey: meterPasskey)
    return simulator
}

/// A short directory under /tmp (socket paths must fit 108 bytes).
func makeTemporaryDirectory() -> String {
    var template = Array("/tmp/sapi.XXXXXX".utf8CString)
    let result = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    precondition(result != nil, "mkdtemp failed")
    return String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// The daemon itself, hosted in the test process: its store (SQLite in a temp directory), models,
/// sync engine and socket, with two simulated meters on the replay transport instead of BlueZ.
struct Fixture: Sendable {
    let backend: any SugarBackend
    /// The interface's service, when the test gave limits, a policy or caps (nil: the daemon's own).
    let service: HealthDataSyncService?
    let transport: ReplayTransport
    let directory: String
    let path: String
    /// Watchers and hubs the daemon keeps for itself (its status line follows the view model),
    /// counted once the fixture is up: what the stats return to when every client has left.
    let baseline: (watchers: Int, hubs: Int, viewModelWatchers: Int)

    var models: ModelStore { self.backend.models }

    /// Watchers of clients (the daemon's own left out).
    var clientWatchers: Int { self.stats.liveWatchers - self.baseline.watchers }

    /// Whether the meter's sync is running (not idle, not ended).
    func isSyncing(_ meter: MeterID) -> Bool {
        guard let phase = self.models.model(for: meter)?.state.sync else { return false }
        return phase != .idle && !phase.isFinal
    }

    /// No client watcher or hub is left.
    var noClientWatchers: Bool {
        self.stats.liveWatchers == self.baseline.watchers && self.stats.liveHubs == self.baseline.hubs
            && self.models.viewModel.watcherCount == self.baseline.viewModelWatchers
    }
    var store: any ReadingStore { self.backend.store }
    var stats: ObservationStats { self.backend.models.stats }

    func client() throws -> VarlinkClient { try VarlinkClient(socketPath: self.path) }

    func raw() throws -> RawConnection { try RawConnection(path: self.path) }

    /// One call on a connection of its own (kept open until the reply is in).
    func call(_ method: String, _ parameters: JSONObject = [:]) async throws -> JSONObject {
        let client = try self.client()
        defer { client.close() }
        return try await client.call(method, parameters)
    }

    /// Commits readings straight into the daemon's store as one successful session, as if a meter
    /// had delivered them in an earlier run (the live models are not told).
    func commit(_ identity: MeterIdentity, readings: [Reading], at: Instant) async throws {
        let session = SyncSessionRecord(
            meter: identity.id, started: at, ended: at, result: .success, expected: readings.count, received: readings.count)
        _ = try await self.store.commit(
            SyncBatch(
                meter: identity, features: 0x0400, readings: readings, newHighWater: readings.map(\.sequenceNumber).max(),
                session: session))
    }

    /// The meter takes these readings without advertising: the next sync finds them.
    func queue(_ records: [SimulatedRecord], for meter: MeterID) {
        self.transport.updateMeter(meter) { simulator in
            for record in records { simulator.addRecord(record) }
        }
    }

    /// The meter forgets its bond (it was reset or paired with a phone): the next pairing asks for
    /// the PIN again.
    func removeBond(of meter: MeterID) {
        self.transport.updateMeter(meter) { $0.removeBond() }
    }

    /// The meter's next download fails: it answers every RACP request with "CCCD improperly
    /// configured" (ATT 0x81), also after sugard re-enabled indications.
    func failNextSync(of meter: MeterID) {
        self.transport.updateMeter(meter) { $0.setFaults(SimulatorFaults(racpWriteErrors: [0x81, 0x81, 0x81])) }
    }
}

func withAPIServer<R>(
    access: AccessPolicy? = nil,
    limits: HealthDataSyncService.Limits? = nil,
    unit: GlucoseUnit = .mgdl,
    stepDelay: Duration = .zero,
    seed: Bool = true,
    configure: (@Sendable (inout VarlinkServerConfiguration) -> Void)? = nil,
    _ body: (Fixture) async throws -> R
) async throws -> R {
    let directory = makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path = directory + "/io.sugard.HealthDataSync"
    var config = DaemonConfig(stateDirectory: directory, socketPath: path)
    config.logLevel = getenv("SUGARD_TEST_LOG").map { LogLevel(name: String(cString: $0)) ?? .warning } ?? .warning
    config.timeZone = meterZone
    config.unit = unit
    let seeded = seed ? seedRecords() : [(meterA, []), (meterB, [])]
    let transport = ReplayTransport(
        meters: seeded.map { simulatedMeter($0.0, records: $0.1) },
        options: ReplayTransport.Options(operationDelay: stepDelay, adapterName: "hci0"))
    let parts = DaemonParts(transport: transport, shutdown: { await transport.shutdown() })
    let backendBox = Lock<(any SugarBackend)?>(nil)
    let serviceBox = Lock<HealthDataSyncService?>(nil)
    let serverFactory: ServerFactory
    if access != nil || limits != nil || configure != nil {
        // The production server with the test's policy, limits or caps.
        serverFactory = { config, backend, _ in
            backendBox.withLock { $0 = backend }
            let service = HealthDataSyncService(
                backend: backend, access: access ?? .currentProcess(socketGroup: nil, adminGroup: nil), unit: config.unit,
                limits: limits ?? HealthDataSyncService.Limits())
            serviceBox.withLock { $0 = service }
            return try service.makeServer(listen: .path(config.socketPath), version: sugardVersion) { configuration in
                configure?(&configuration)
            }
        }
    } else {
        serverFactory = { config, backend, logger in
            backendBox.withLock { $0 = backend }
            return try DaemonAssembly.server(config, backend, logger)
        }
    }
    let daemon = Daemon(config: config, configFile: nil, environment: ["TZ": "UTC"])
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            try await daemon.run(transportFactory: { _, _ in parts }, serverFactory: serverFactory, handleSignals: false)
        }
        defer { daemon.stop() }
        do {
            var backend: (any SugarBackend)?
            let deadline = ContinuousClock.now + .seconds(30)
            while backend == nil, ContinuousClock.now < deadline {
                backend = backendBox.withLock { $0 }
                if backend == nil { try await Task.sleep(for: .milliseconds(5)) }
            }
            guard let backend else { throw TestError("the daemon did not start within 30 s") }
            // Both meters appeared and synced once by themselves (automatic sync): the seeded
            // records are stored, both syncs have ended.
            let expected = seeded.reduce(0) { $0 + $1.1.count }
            let settled = await eventually(timeout: .seconds(30)) {
                let sessions = (try? await backend.store.sessions(meter: nil, limit: 10)) ?? []
                return backend.models.viewModel.state.readingCount == expected
                    && Set(sessions.map(\.meter)) == [meterA.id, meterB.id]
                    && [meterA.id, meterB.id].allSatisfy { id in
                        backend.models.model(for: id).map { $0.state.sync == .idle || $0.state.sync.isFinal } == true
                    }
                    // The shared view model has taken both ends too (a Watch opened now sees no late
                    // change of the seeding syncs).
                    && backend.models.viewModel.state.sync.activeMeters.isEmpty
                    && [meterA.id, meterB.id].allSatisfy { backend.models.viewModel.state.meters[$0]?.lastSync != nil }
            }
            guard settled else {
                let sessions = (try? await backend.store.sessions(meter: nil, limit: 10)) ?? []
                let phases = [meterA.id, meterB.id].map { "\($0): \(backend.models.model(for: $0)?.state.sync.name ?? "no model")" }
                throw TestError(
                    "the seeded meters did not sync within 30 s: \(backend.models.viewModel.state.readingCount) of \(expected) readings, "
                        + "sessions \(sessions.map { "\($0.meter) \($0.result.rawValue) \($0.error ?? "")" }), \(phases)")
            }
            let stats = backend.models.stats
            let fixture = Fixture(
                backend: backend, service: serviceBox.withLock { $0 }, transport: transport, directory: directory, path: path,
                baseline: (stats.liveWatchers, stats.liveHubs, backend.models.viewModel.watcherCount))
            let result = try await body(fixture)
            daemon.stop()
            try await group.waitForAll()
            return result
        } catch {
            daemon.stop()
            try? await group.waitForAll()
            throw error
        }
    }
}

/// Polls `condition` until it holds or `timeout` passes.
func eventually(timeout: Duration = .seconds(10), _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return await condition()
}

/// Checks a reply against the interface description.
func expectValidReply(_ method: String, _ parameters: JSONObject, sourceLocation: SourceLocation = #_sourceLocation) {
    do {
        try HealthDataSyncService.parsedDefinition.validateReply(method: method, parameters: parameters)
    } catch {
        Issue.record("\(method) reply does not match the interface: \(error)", sourceLocation: sourceLocation)
    }
}

/// Checks an error reply against the interface description.
func expectValidError(_ error: VarlinkError, sourceLocation: SourceLocation = #_sourceLocation) {
    do {
        try HealthDataSyncService.parsedDefinition.validateError(name: error.name, parameters: error.parameters)
    } catch {
        Issue.record("error \(error) does not match the interface: \(error)", sourceLocation: sourceLocation)
    }
}

let api = "io.sugard.HealthDataSync."

/// The error a call fails with (records an issue and returns nil when it succeeds or fails otherwise).
func remoteError(
    _ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation
) async -> VarlinkError? {
    do {
        try await body()
        Issue.record("expected an error reply", sourceLocation: sourceLocation)
    } catch let VarlinkClientError.remote(error) {
        return error
    } catch {
        Issue.record("expected an error reply, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// Closes `client` after `timeout` unless cancelled first: a stream that never delivers what a test
/// waits for then fails the test instead of hanging the suite.
func closing(_ client: VarlinkClient, after timeout: Duration = .seconds(20)) -> Task<Void, Never> {
    Task {
        do {
            try await Task.sleep(for: timeout)
        } catch {
            return
        }
        Issue.record("a stream did not deliver within \(timeout); closing its connection")
        client.close()
    }
}

/// Collects a `more` stream's replies.
func collect(_ stream: AsyncThrowingStream<JSONObject, any Error>) async throws -> [JSONObject] {
    var replies: [JSONObject] = []
    for try await reply in stream { replies.append(reply) }
    return replies
}


extension JSONObject {
    var errorName: String? { self["error"]?.stringValue }
    var parameters: JSONObject? { self["parameters"]?.objectValue }
}

/// The result of a subprocess.
struct ProcessOutput: Sendable {
    var status: Int32
    var stdout: String
    var stderr: String
}

let processLaunchLock = NSLock()

/// Runs a program without blocking a cooperative thread: the wait happens on a thread of its own.
func runProcess(
    _ executable: String, _ arguments: [String], environment: [String: String]? = nil, stdin: String? = nil
) async throws -> ProcessOutput {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ProcessOutput, any Error>) in
        let thread = Thread {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
            if let environment { process.environment = environment }
            let out = Pipe()
            let err = Pipe()
            let input = Pipe()
            process.standardOutput = out
            process.standardError = err
            process.standardInput = input
            do {
                // Foundation's Process.run() is not safe to call from several threads at once (it crashed
                // in a memcpy when parallel tests started processes together), so starts take turns.
                try processLaunchLock.withLock { try process.run() }
            } catch {
                continuation.resume(throwing: error)
                return
            }
            if let stdin {
                // The child may exit before it reads (socat refused by the socket's mode): the write
                // then fails with EPIPE, and SIGPIPE (blocked on this thread only, after the child
                // started so it does not inherit the mask) stays pending instead of killing the
                // test process; it is dropped when this thread ends.
                var pipeSignal = sigset_t()
                sigemptyset(&pipeSignal)
                sigaddset(&pipeSignal, SIGPIPE)
                pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
                try? input.fileHandleForWriting.write(contentsOf: Data(stdin.utf8))
            }
            try? input.fileHandleForWriting.close()
            let stderrData = Lock(Data())
            let done = DispatchSemaphore(value: 0)
            let reader = Thread {
                let data = err.fileHandleForReading.readAllRetryingInterrupts()
                stderrData.withLock { $0 = data }
                done.signal()
            }
            reader.start()
            let stdoutData = out.fileHandleForReading.readAllRetryingInterrupts()
            process.waitUntilExit()
            done.wait()
            continuation.resume(
                returning: ProcessOutput(
                    status: process.terminationStatus, stdout: String(decoding: stdoutData, as: UTF8.self),
                    stderr: String(decoding: stderrData.withLock { $0 }, as: UTF8.self)))
        }
        thread.start()
    }
}

/// The built `sugarctl` next to the test bundle, else the package's .build/debug.
func sugarctlPath() throws -> String {
    var candidates: [String] = []
    let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    candidates.append(testBinary.deletingLastPathComponent().appendingPathComponent("sugarctl").path)
    let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    candidates.append(packageRoot.appendingPathComponent(".build/debug/sugarctl").path)
    guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
        throw TestError("sugarctl not built; run `swift build` first (looked in \(candidates))")
    }
    return found
}

/// The repository root (for files checked in next to the sources).
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path

/// A reading as the store keeps it, for tests that commit straight into the store (a meter known
/// only from an earlier run): `mgdL` in kg/L units, capillary whole blood from a finger, taken at
/// `instant` on a meter clock in UTC+1.
func storedReading(meter: MeterID, sequence: UInt16, mgdL: Int, at instant: Instant) -> Reading {
    let local = LocalDateTime(secondsSinceEpoch: instant.epochMillis / 1000 + 3600)
    let raw = UInt16(0xB000 | (mgdL & 0x0FFF))
    var bytes: [UInt8] = [0x03, UInt8(sequence & 0xff), UInt8(sequence >> 8)]
    bytes += [UInt8(local.year & 0xff), UInt8(local.year >> 8), UInt8(local.month), UInt8(local.day)]
    bytes += [UInt8(local.hour), UInt8(local.minute), UInt8(local.second), 0, 0]
    bytes += [UInt8(raw & 0xff), UInt8(raw >> 8), (1 << 4) | 1]
    let time = TimeResolution(
        method: .meterClock, zone: meterZone, utcOffsetSeconds: 3600, meterClockSkewSeconds: 0, meterLocalTime: local)
    return Reading(
        meter: meter, sequenceNumber: sequence, measurementBytes: bytes, contextBytes: nil, baseTime: local,
        timeOffsetMinutes: 0, concentrationRaw: raw, unit: .kilogramsPerLiter, sampleType: 1, sampleLocation: 1,
        sensorStatus: nil, meal: nil, instant: instant, time: time, mgdL: Double(mgdL),
        mmolL: Double(mgdL) / GlucoseUnit.molarMass, ketoneMmolL: nil, flags: [])
}

/// Runs the built `sugarctl` on the fixture's socket as uid/gid 65534 with these supplementary
/// groups (root only: setpriv switches users), for the tests of who may call what.
func sugarctlAsNobody(_ f: Fixture, groups: String, _ arguments: [String]) async throws -> ProcessOutput {
    chmod(f.directory, 0o755)
    return try await runProcess(
        "/usr/bin/setpriv",
        ["--reuid=65534", "--regid=65534", "--groups=\(groups)", try sugarctlPath(), "--socket", f.path] + arguments,
        environment: ["HOME": "/nonexistent-home"])
}
