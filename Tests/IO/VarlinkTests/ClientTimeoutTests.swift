import Glibc
import JSON
import Testing
import Varlink

/// `VarlinkClient(timeout:)`: a call the server never answers, and a server that stopped accepting
/// (its backlog full), end with `.timedOut` instead of waiting forever; a stream has no reply timeout.
@Suite struct ClientTimeoutTests {
    @Test func aCallWithNoReplyTimesOutButAStreamDoesNot() async throws {
        try await withServer { path in
            let client = try VarlinkClient(socketPath: path, timeout: .milliseconds(300))
            #expect(try await client.call("org.example.ping.Ping", ["text": "a"]) == ["text": "a"])
            let started = ContinuousClock.now
            await #expect(throws: VarlinkClientError.timedOut(.milliseconds(300))) {
                try await client.call("org.example.ping.Hang")
            }
            #expect(ContinuousClock.now - started < .seconds(3))
            #expect(VarlinkClientError.timedOut(.milliseconds(1500)).description.contains("within 1.5 s"))

            // A stream may stay quiet longer than the timeout.
            let streaming = try VarlinkClient(socketPath: path, timeout: .milliseconds(200))
            var replies = streaming.callMore("org.example.ping.Flood", ["size": 1, "delayMs": 600]).makeAsyncIterator()
            _ = try await replies.next()
            #expect(try await replies.next() == ["blob": "x"])
            streaming.close()
        }
    }

    @Test func aServerThatStoppedAcceptingTimesOutTheConnect() throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/full"
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0 && listen(listener, 0) == 0)
        // Fill the backlog (never accepted) with non-blocking connects until one would block.
        var queued: [Int32] = []
        defer { for fd in queued { close(fd) } }
        while queued.count < 64 {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            let rc = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            if rc != 0 {
                close(fd)
                break
            }
            queued.append(fd)
        }
        let started = ContinuousClock.now
        #expect(throws: VarlinkClientError.timedOut(.milliseconds(300))) {
            _ = try VarlinkClient(socketPath: path, timeout: .milliseconds(300))
        }
        let took = ContinuousClock.now - started
        #expect(took >= .milliseconds(250) && took < .seconds(3), "\(took)")
    }
}
