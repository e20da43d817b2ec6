import CLinuxIO
import Foundation
import Glibc
import JSON
import Testing
import TestSupport
import Varlink

@Suite(.serialized) struct ClientTests {
    @Test func callsStreamsErrorsAndOneway() async throws {
        let recorder = Recorder()
        try await withServer(recorder: recorder) { path in
            let client = try VarlinkClient(socketPath: path)
            #expect(try await client.call("org.example.ping.Ping", ["text": "hi"]) == ["text": "hi"])
            var numbers: [Int64] = []
            for try await reply in client.callMore("org.example.ping.Counter", ["count": 5]) {
                numbers.append(reply["n"]?.intValue ?? -1)
            }
            #expect(numbers == [1, 2, 3, 4, 5])
            await #expect(throws: VarlinkClientError.remote(VarlinkError("org.example.ping.Failed", ["reason": "no", "code": 7]))) {
                try await client.call("org.example.ping.Fail", ["reason": "no"])
            }
            await #expect(throws: VarlinkClientError.remote(.expectedMore)) {
                try await client.call("org.example.ping.Counter", ["count": 5])
            }
            do {
                for try await _ in client.callMore("org.example.ping.Nope") {}
                Issue.record("stream of an unknown method did not throw")
            } catch let error as VarlinkClientError {
                #expect(error == .remote(.methodNotFound("org.example.ping.Nope")))
            }
            try client.callOneway("org.example.ping.Notify", ["text": "quiet"])
            #expect(try await client.call("org.example.ping.Ping", ["text": "after"]) == ["text": "after"])
            #expect(recorder.with { $0.notes } == ["quiet"])
            let info = try await client.call("org.varlink.service.GetInfo")
            #expect(info["interfaces"] == ["org.varlink.service", "org.example.ping"])
        }
    }

    @Test func concurrentCallsOnOneClientArePipelined() async throws {
        try await withServer { path in
            let client = try VarlinkClient(socketPath: path)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<200 {
                    group.addTask {
                        let reply = try await client.call("org.example.ping.Ping", ["text": .string("\(index)")])
                        #expect(reply == ["text": .string("\(index)")])
                    }
                }
                try await group.waitForAll()
            }
        }
    }

    @Test func cannotConnectIsDistinguishedFromPermissionDenied() async throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        #expect(throws: VarlinkClientError.cannotConnect(path: directory + "/none", errno: ENOENT)) {
            _ = try VarlinkClient(socketPath: directory + "/none")
        }
        close(try makeListeningSocket(directory + "/stale", listening: false))
        #expect(throws: VarlinkClientError.cannotConnect(path: directory + "/stale", errno: ECONNREFUSED)) {
            _ = try VarlinkClient(socketPath: directory + "/stale")
        }
        try await withServer(configure: { $0.socketMode = 0o600 }) { path in
            // Connect as uid/gid 65534 from a thread of our own: setfsuid/setfsgid act per thread, and leaving
            // fsuid 0 drops CAP_DAC_OVERRIDE, so the kernel checks the socket's 0600 mode against "nobody".
            let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<String, Never>) in
                let thread = Thread {
                    setfsgid(65534)
                    setfsuid(65534)
                    defer {
                        setfsuid(0)
                        setfsgid(0)
                    }
                    do throws(VarlinkClientError) {
                        _ = try VarlinkClient(socketPath: path)
                        continuation.resume(returning: "connected")
                    } catch {
                        continuation.resume(returning: "\(error == .permissionDenied(path: path) ? "denied" : "\(error)")")
                    }
                }
                thread.start()
            }
            if getuid() == 0 {
                #expect(outcome == "denied")
            } else {
                // Unprivileged runs cannot change fsuid; the call simply connects as ourselves.
                #expect(outcome == "connected")
            }
        }
    }

    @Test func closingOrCancellingEndsCallsAndTellsTheServer() async throws {
        let recorder = Recorder()
        try await withServer(recorder: recorder) { path in
            let client = try VarlinkClient(socketPath: path)
            let waiting = Task { () async throws -> JSONObject in
                try await client.call("org.example.ping.Hang")
            }
            try await Task.sleep(for: .milliseconds(50))
            client.close()
            await #expect(throws: VarlinkClientError.closed) { try await waiting.value }
            #expect(await eventually { recorder.with { $0.hangEnded } })
            await #expect(throws: VarlinkClientError.closed) { try await client.call("org.example.ping.Ping", ["text": "x"]) }

            // Leaving a stream early closes that client's connection, which stops the handler.
            let streaming = try VarlinkClient(socketPath: path)
            for try await reply in streaming.callMore("org.example.ping.Flood", ["size": 3, "delayMs": 20]) {
                #expect(reply == ["blob": "xxx"])
                break
            }
            #expect(await eventually { recorder.with { $0.floodStopped } })

            // Cancelling the waiting task closes the connection too.
            let cancelled = try VarlinkClient(socketPath: path)
            let task = Task { () async throws -> JSONObject in
                try await cancelled.call("org.example.ping.Hang")
            }
            try await Task.sleep(for: .milliseconds(20))
            task.cancel()
            await #expect(throws: VarlinkClientError.closed) { try await task.value }
        }
    }

    @Test func serverGoingAwayAndConnectionLimitsReachTheCaller() async throws {
        try await withServer(configure: {
            $0.maxConnectionsPerUID = 1
            $0.privilegedUIDs = []  // the tests run as root, whom the per-uid cap does not limit
        }) { path in
            let first = try VarlinkClient(socketPath: path)
            #expect(try await first.call("org.example.ping.Ping", ["text": "a"]) == ["text": "a"])
            let second = try VarlinkClient(socketPath: path)
            do throws(VarlinkClientError) {
                _ = try await second.call("org.example.ping.Ping", ["text": "b"])
                Issue.record("a call over the connection limit succeeded")
            } catch {
                guard case .remote(let remote) = error else {
                    Issue.record("expected the server's error, got \(error)")
                    return
                }
                #expect(remote.name == VarlinkError.ProtocolError.tooManyConnections)
            }
        }
        var pending: Task<JSONObject, any Error>?
        try await withServer { path in
            let client = try VarlinkClient(socketPath: path)
            pending = Task { () async throws -> JSONObject in try await client.call("org.example.ping.Hang") }
            try await Task.sleep(for: .milliseconds(50))
        }
        let stopped = try #require(pending)
        await #expect(throws: VarlinkClientError.disconnected) { try await stopped.value }
    }
}

/// The independent client: the Python `varlink` package (PyPI varlink==31.0.0), run as a subprocess.
@Suite(.serialized) struct PythonInteropTests {
    static func run(_ arguments: [String]) async throws -> (status: Int32, output: String, errors: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3"] + arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        let status = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int32, any Error>) in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        let out = String(decoding: output.fileHandleForReading.readAllRetryingInterrupts(), as: UTF8.self)
        let err = String(decoding: errors.fileHandleForReading.readAllRetryingInterrupts(), as: UTF8.self)
        return (status, out, err)
    }

    static func requirePythonVarlink() async throws {
        let check = try await Self.run(["-c", "import varlink"])
        guard check.status == 0 else {
            throw TestError("""
                python3 with the 'varlink' package is required for the interoperability tests \
                (python3 -m pip install varlink==31.0.0): \(check.errors)
                """)
        }
    }

    static let script = #"""
        import json, sys, varlink
        out = {}
        with varlink.Client(address="unix:" + sys.argv[1]) as client:
            out["interfaces"] = client.get_interfaces()
            out["vendor"] = client.info["vendor"]
            with client.open("org.example.ping") as ping:
                out["ping"] = ping.Ping("hello")
                out["counter"] = [reply["n"] for reply in ping.Counter(4, _more=True)]
                out["store"] = ping.Store({"value": 5.5, "unit": "mmol"}, ["t"], {"low": 4})
                try:
                    ping.Fail("boom")
                    out["error"] = None
                except varlink.VarlinkError as error:
                    out["error"] = {"name": error.error(), "parameters": error.parameters()}
                try:
                    ping.Counter(2)
                except varlink.VarlinkError as error:
                    out["expectedMore"] = error.error()
                out["after"] = ping.Ping("still here")
        print(json.dumps(out))
        """#

    @Test func pythonClientTalksToOurServer() async throws {
        try await Self.requirePythonVarlink()
        try await withServer { path in
            let result = try await Self.run(["-c", Self.script, path])
            #expect(result.status == 0, "\(result.errors)")
            let parsed = try JSONValue(parsing: result.output.trimmingCharacters(in: .whitespacesAndNewlines))
            #expect(parsed == [
                "interfaces": ["org.varlink.service", "org.example.ping"],
                "vendor": "sugard tests",
                "ping": ["text": "hello"],
                "counter": [1, 2, 3, 4],
                "store": ["stored": 1, "reading": ["value": 5.5, "unit": "mmol"]],
                "error": ["name": "org.example.ping.Failed", "parameters": ["reason": "boom", "code": 7]],
                "expectedMore": "org.varlink.service.ExpectedMore",
                "after": ["text": "still here"],
            ])
        }
    }

    @Test func pythonCommandLineInfoHelpAndCall() async throws {
        try await Self.requirePythonVarlink()
        try await withServer { path in
            let info = try await Self.run(["-m", "varlink.cli", "info", "unix:" + path])
            #expect(info.status == 0, "\(info.errors)")
            #expect(info.output.contains("Vendor: sugard tests"))
            #expect(info.output.contains("org.example.ping"))
            let help = try await Self.run(["-m", "varlink.cli", "help", "unix:\(path)/org.example.ping"])
            #expect(help.status == 0, "\(help.errors)")
            #expect(help.output.contains("method Counter(count: int) -> (n: int)"))
            let call = try await Self.run(["-m", "varlink.cli", "call", "unix:\(path)/org.example.ping.Ping", #"{"text":"cli"}"#])
            #expect(call.status == 0, "\(call.errors)")
            #expect(try JSONValue(parsing: call.output.trimmingCharacters(in: .whitespacesAndNewlines)) == ["text": "cli"])
            let more = try await Self.run([
                "-m", "varlink.cli", "call", "--more", "unix:\(path)/org.example.ping.Counter", #"{"count":2}"#,
            ])
            #expect(more.status == 0, "\(more.errors)")
            #expect(more.output.contains("\"n\": 1") && more.output.contains("\"n\": 2"), "\(more.output)")
        }
    }
}
