import Glibc
import JSON
import Locking
import Testing
import TestSupport
import Varlink

/// Hostile clients against the in-process server (issue #22): the memory budget, backpressure, the
/// reserve for privileged peers, small caps for peers refused every method, and the parse limits.
@Suite struct AbuseTests {
    /// Log lines the server wrote.
    final class Lines: Sendable {
        let lines = Lock<[String]>([])
        var all: [String] { self.lines.withLock { $0 } }
        func append(_ line: String) { self.lines.withLock { $0.append(line) } }
    }

    static func ping(_ text: String) -> String { #"{"method":"org.example.ping.Ping","parameters":{"text":"\#(text)"}}"# }

    static func pipelined(_ count: Int, text: String) -> [UInt8] {
        let one = Array(Self.ping(text).utf8) + [0]
        var bytes: [UInt8] = []
        bytes.reserveCapacity(one.count * count)
        for _ in 0..<count { bytes += one }
        return bytes
    }

    @Test func aClientThatDoesNotReadIsNotReadEither() async throws {
        try await withServer { path in
            let greedy = try RawConnection(path: path)
            // 8 MiB of calls; the replies are never read. The server stops reading once the socket
            // holds unread replies, so the client's sends stall at about the kernel's buffers.
            let calls = Self.pipelined(8 << 20 / 80, text: String(repeating: "x", count: 20))
            let sent = await greedy.send(calls, deadline: .now + .seconds(2))
            #expect(sent < 4 << 20, "the server took \(sent) bytes from a client that reads nothing")
            let other = try RawConnection(path: path)
            #expect(try await other.call(Self.ping("ok")) == ["parameters": ["text": "ok"]])
        }
    }

    @Test func theMemoryBudgetDropsTheHeaviestConnectionsNotTheServer() async throws {
        let log = Lines()
        try await withServer(configure: {
            $0.memoryBudgetBytes = 256 << 10
            $0.log = { log.append($0) }
        }) { path in
            var flooders: [RawConnection] = []
            for _ in 0..<20 { flooders.append(try RawConnection(path: path)) }
            let calls = Self.pipelined(4000, text: String(repeating: "y", count: 200))
            for flooder in flooders { await flooder.send(calls, deadline: .now + .milliseconds(50)) }
            #expect(await eventually { log.all.contains { $0.contains("memory budget") } },
                "\(log.all)")
            var dropped = 0
            for flooder in flooders {
                var byte: UInt8 = 0
                // A dropped connection reads as closed (0) or reset once its replies are drained.
                while true {
                    let n = recv(flooder.fd, &byte, 1, Int32(MSG_DONTWAIT))
                    if n > 0 { continue }
                    if n == 0 || errno == ECONNRESET { dropped += 1 }
                    break
                }
            }
            #expect(dropped > 0, "no connection was dropped over the budget")
            let other = try RawConnection(path: path)
            #expect(try await other.call(Self.ping("still here")) == ["parameters": ["text": "still here"]])
        }
    }

    @Test func thePerUIDCapDoesNotApplyToRootOrTheServersOwnUser() async throws {
        // The test process is root or the server's own uid: privileged either way.
        try await withServer(configure: { $0.maxConnectionsPerUID = 1 }) { path in
            let first = try RawConnection(path: path)
            let second = try RawConnection(path: path)
            for connection in [first, second] {
                #expect(try await connection.call(Self.ping("a")) == ["parameters": ["text": "a"]])
            }
        }
    }

    @Test func connectionsAreKeptInReserveForPrivilegedPeers() async throws {
        let log = Lines()
        try await withServer(configure: {
            $0.maxConnections = 6
            $0.reservedConnections = 2
            $0.privilegedUIDs = []  // so the test process counts as anybody
            $0.log = { log.append($0) }
        }) { path in
            var open: [RawConnection] = []
            for _ in 0..<4 {
                let connection = try RawConnection(path: path)
                #expect(try await connection.call(Self.ping("a")) == ["parameters": ["text": "a"]])
                open.append(connection)
            }
            let refused = try await RawConnection(path: path).readUntilClosed()
            #expect(refused.map(\.errorName) == [VarlinkError.ProtocolError.tooManyConnections])
            #expect(refused.first?.parameters?["reason"]?.stringValue?.contains("kept for root") == true, "\(refused)")
            #expect(await eventually { log.all.contains { $0.contains("refused a connection from uid \(getuid())") } }, "\(log.all)")
        }
    }

    @Test func aPeerAllowedNoMethodMaySendOnlySmallMessages() async throws {
        let log = Lines()
        try await withServer(configure: {
            $0.isRestricted = { _ in true }
            $0.log = { log.append($0) }
        }) { path in
            let small = try RawConnection(path: path)
            // Small messages are routed as usual (the handler's own policy answers them).
            #expect(try await small.call(Self.ping("a")) == ["parameters": ["text": "a"]])
            let big = try RawConnection(path: path)
            await big.send(Self.ping(String(repeating: "z", count: 10_000)))
            let replies = try await big.readUntilClosed()
            #expect(replies.map(\.errorName) == ["org.varlink.service.PermissionDenied"])
            #expect(log.all.contains { $0.contains("allowed no method") }, "\(log.all)")
        }
    }

    @Test func theWorstCaseRequestIsRefusedByTheParseLimits() async throws {
        let log = Lines()
        try await withServer(configure: { $0.log = { log.append($0) } }) { path in
            let hostile = try RawConnection(path: path)
            await hostile.send(JSONWorstCase.request() + [0])
            let reply = try #require(try await hostile.readMessage())
            #expect(reply.errorName == VarlinkError.ProtocolError.invalidMessage)
            #expect(reply.parameters?["reason"]?.stringValue?.contains("values and keys") == true, "\(reply)")
            #expect(log.all.contains { $0.contains("over the parse limits") }, "\(log.all)")
            let other = try RawConnection(path: path)
            #expect(try await other.call(Self.ping("ok")) == ["parameters": ["text": "ok"]])
        }
    }
}
