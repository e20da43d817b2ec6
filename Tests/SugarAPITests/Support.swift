import Foundation
import Glibc
import GlucoseStore
import HealthDataSync
import JSON
import SugarAPI
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

/// Seeded data: meter A has 5 readings an hour apart from `seedStart` (the 3rd a control-solution
/// test, the 4th HI), meter B 2 readings after them.
func seedReadings() -> [(MeterIdentity, [Reading])] {
    let a: [Reading] = (0..<5).map { i in
        let flags: ReadingFlags = i == 2 ? [.controlSolution] : i == 3 ? [.hi] : []
        return InterfaceTestBackend.reading(
            meter: meterA.id, sequence: UInt16(i + 1), mgdL: 90 + i * 10,
            at: Instant(epochMillis: seedStart.epochMillis + Int64(i) * hour), flags: flags)
    }
    let b: [Reading] = (0..<2).map { i in
        InterfaceTestBackend.reading(
            meter: meterB.id, sequence: UInt16(i + 1), mgdL: 150 + i,
            at: Instant(epochMillis: seedStart.epochMillis + Int64(5 + i) * hour))
    }
    return [(meterA, a), (meterB, b)]
}

/// A short directory under /tmp (socket paths must fit 108 bytes).
func makeTemporaryDirectory() -> String {
    var template = Array("/tmp/sapi.XXXXXX".utf8CString)
    let result = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    precondition(result != nil, "mkdtemp failed")
    return String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// A live server with the interface's test backend over a real SQLite store in a temp directory.
struct Fixture: Sendable {
    let backend: InterfaceTestBackend
    let store: SQLiteReadingStore
    let directory: String
    let path: String

    var models: ModelStore { self.backend.models }
    var stats: ObservationStats { self.backend.models.stats }

    func client() throws -> VarlinkClient { try VarlinkClient(socketPath: self.path) }

    func raw() throws -> RawConnection { try RawConnection(path: self.path) }

    /// One call on a connection of its own (kept open until the reply is in).
    func call(_ method: String, _ parameters: JSONObject = [:]) async throws -> JSONObject {
        let client = try self.client()
        defer { client.close() }
        return try await client.call(method, parameters)
    }
}

func withAPIServer<R>(
    access: AccessPolicy? = nil,
    limits: HealthDataSyncService.Limits = HealthDataSyncService.Limits(),
    unit: GlucoseUnit = .mgdL,
    stepDelay: Duration = .milliseconds(1),
    seed: Bool = true,
    configure: (inout VarlinkServerConfiguration) -> Void = { _ in },
    _ body: (Fixture) async throws -> R
) async throws -> R {
    let directory = makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = try SQLiteReadingStore(path: directory + "/readings.db")
    let backend = InterfaceTestBackend(store: store, stepDelay: stepDelay)
    backend.addMeter(meterA)
    backend.addMeter(meterB)
    if seed {
        for (meter, readings) in seedReadings() { try await backend.seed(meter, readings: readings, at: seedStart) }
    }
    let service = HealthDataSyncService(
        backend: backend, access: access ?? .currentProcess(socketGroup: nil, adminGroup: nil), unit: unit,
        limits: limits)
    let path = directory + "/io.sugard.HealthDataSync"
    let server = try service.makeServer(listen: .path(path), version: "test", configure: configure)
    let fixture = Fixture(backend: backend, store: store, directory: directory, path: path)
    let result: R = try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await server.run() }
        do {
            let result = try await body(fixture)
            group.cancelAll()
            try await group.waitForAll()
            return result
        } catch {
            group.cancelAll()
            try? await group.waitForAll()
            throw error
        }
    }
    backend.models.shutdown()
    await store.close()
    return result
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
                let data = err.fileHandleForReading.readDataToEndOfFile()
                stderrData.withLock { $0 = data }
                done.signal()
            }
            reader.start()
            let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
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
    let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    candidates.append(packageRoot.appendingPathComponent(".build/debug/sugarctl").path)
    guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
        throw TestError("sugarctl not built; run `swift build` first (looked in \(candidates))")
    }
    return found
}

/// The repository root (for files checked in next to the sources).
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path
