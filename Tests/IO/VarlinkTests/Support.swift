import Foundation
import Glibc
import JSON
import Testing
import TestSupport
import Varlink
import Locking

/// The interface every server test serves.
let pingDescription = """
    # An interface for the Varlink module's tests.
    interface org.example.ping

    # A measurement with a unit.
    type Reading (
      value: float,
      unit: (mgdl, mmol),
      note: ?string
    )

    # Echoes its text.
    method Ping(text: string) -> (text: string)

    # Streams n = 1...count; needs 'more'.
    method Counter(count: int) -> (n: int)

    # Takes nested, optional and enum parameters and echoes the reading.
    method Store(reading: Reading, tags: []string, limits: [string]int, flag: ?bool, meta: ?object) -> (stored: int, reading: Reading)

    # Always fails with Failed.
    method Fail(reason: string) -> ()

    # Streams blobs of `size` bytes until the connection is dropped, pausing delayMs between them;
    # with wide, on a widened send buffer.
    method Flood(size: int, delayMs: ?int, wide: ?bool) -> (blob: string)

    # Records the text; meant for oneway calls.
    method Notify(text: string) -> ()

    # The caller's credentials as the server saw them.
    method WhoAmI() -> (pid: int, uid: int, gid: int, groups: []int)

    # Never replies; returns when the connection closes or the task is cancelled.
    method Hang() -> ()

    # Declared, but the handler returns without replying.
    method Unimplemented() -> ()

    error Failed (reason: string, code: ?int)

    """

/// What the test handler saw, for assertions from the test body.
final class Recorder: Sendable {
    struct State {
        var notes: [String] = []
        var floodAccepted = 0
        var floodStopped = false
        var hangEnded = false
        var hangCancelled = false
    }

    let state = Lock(State())

    func with<R>(_ body: (inout State) -> R) -> R { self.state.withLock { body(&$0) } }
}

struct PingInterface: VarlinkInterfaceHandler {
    let definition: VarlinkInterfaceDefinition
    let recorder: Recorder
    var methodsRequiringMore: Set<String> { ["Counter", "Flood"] }

    init(recorder: Recorder = Recorder()) {
        self.definition = try! VarlinkInterfaceDefinition(description: pingDescription)
        self.recorder = recorder
    }

    func handle(_ call: VarlinkCall, replier: VarlinkReplier) async throws(VarlinkError) {
        switch call.methodName {
        case "Ping":
            replier.reply(["text": call.parameters["text"] ?? .null])
        case "Counter":
            let count = call.parameters["count"]?.intValue ?? 0
            if count <= 0 {
                replier.reply(["n": 0])
                return
            }
            for n in 1...count {
                replier.reply(["n": .int(n)], continues: n < count)
            }
        case "Store":
            replier.reply(["stored": .int(Int64(call.parameters["tags"]?.arrayValue?.count ?? 0)),
                           "reading": call.parameters["reading"] ?? .null])
        case "Fail":
            throw VarlinkError("org.example.ping.Failed", ["reason": call.parameters["reason"] ?? .null, "code": 7])
        case "Flood":
            let size = Int(call.parameters["size"]?.intValue ?? 1)
            let delay = call.parameters["delayMs"]?.intValue ?? 0
            let blob = JSONValue.string(String(repeating: "x", count: size))
            if call.parameters["wide"]?.boolValue == true { replier.widenSendBuffer() }
            while replier.reply(["blob": blob], continues: true) {
                self.recorder.with { $0.floodAccepted += 1 }
                if delay > 0 {
                    do { try await Task.sleep(for: .milliseconds(delay)) } catch { break }
                } else {
                    await Task.yield()
                }
            }
            self.recorder.with { $0.floodStopped = true }
        case "Notify":
            self.recorder.with { $0.notes.append(call.parameters["text"]?.stringValue ?? "") }
        case "WhoAmI":
            replier.reply([
                "pid": .int(Int64(call.peer.pid)), "uid": .int(Int64(call.peer.uid)),
                "gid": .int(Int64(call.peer.gid)), "groups": .array(call.peer.groups.map { .int(Int64($0)) }),
            ])
        case "Hang":
            await replier.waitClosed()
            let cancelled = Task.isCancelled
            self.recorder.with {
                $0.hangEnded = true
                $0.hangCancelled = cancelled
            }
        default:
            return
        }
    }
}

struct TestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A short directory under /tmp (socket paths must fit 108 bytes).
func makeTemporaryDirectory() -> String {
    var template = Array("/tmp/vlt.XXXXXX".utf8CString)
    let result = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    precondition(result != nil, "mkdtemp failed")
    return String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

func removeDirectory(_ path: String) {
    try? FileManager.default.removeItem(atPath: path)
}

/// Runs a server with the ping interface (and `handlers`) on a fresh socket for the duration of `body`, then cancels it and
/// waits until it has stopped.
func withServer<R>(
    recorder: Recorder = Recorder(),
    also handlers: [any VarlinkInterfaceHandler] = [],
    configure: (inout VarlinkServerConfiguration) -> Void = { _ in },
    _ body: (String) async throws -> R
) async throws -> R {
    let directory = makeTemporaryDirectory()
    defer { removeDirectory(directory) }
    let path = directory + "/sock"
    var configuration = VarlinkServerConfiguration(listen: .path(path))
    configuration.vendor = "sugard tests"
    configuration.product = "VarlinkTests"
    configuration.version = "1"
    configuration.url = "https://example.org/sugard"
    configure(&configuration)
    let server = try VarlinkServer(configuration: configuration, handlers: [PingInterface(recorder: recorder)] + handlers)
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await server.run() }
        do {
            let result = try await body(path)
            group.cancelAll()
            try await group.waitForAll()
            return result
        } catch {
            group.cancelAll()
            try? await group.waitForAll()
            throw error
        }
    }
}

/// Polls `condition` until it holds or `timeout` passes.
func eventually(timeout: Duration = .seconds(10), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
}


extension JSONObject {
    var errorName: String? { self["error"]?.stringValue }
    var parameters: JSONObject? { self["parameters"]?.objectValue }
}
