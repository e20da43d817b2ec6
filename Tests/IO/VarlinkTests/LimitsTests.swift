import Glibc
import JSON
import Testing
import TestSupport
import Varlink

@Suite(.serialized) struct ServerLimitTests {
    @Test func oversizedMessageIsCutOffWithoutBufferingIt() async throws {
        try await withServer { path in
            let connection = try RawConnection(path: path)
            let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 1 << 16)
            let total = 100 << 20
            var sent = 0
            while sent < total {
                let n = await connection.send(chunk, deadline: .now + .seconds(5))
                sent += n
                if n < chunk.count { break }
            }
            // The 1 MiB limit plus what the socket buffers hold: nowhere near the 100 MB offered. (No
            // wall-clock bound: a server that stalled instead of closing fails the error check below.)
            #expect(sent < 8 << 20, "sent \(sent) bytes before the server closed the connection")
            let messages = try await connection.readUntilClosed()
            #expect(messages.map(\.errorName) == [VarlinkError.ProtocolError.messageTooLarge])
            let other = try RawConnection(path: path)
            #expect(try await other.call(#"{"method":"org.example.ping.Ping","parameters":{"text":"ok"}}"#)
                == ["parameters": ["text": "ok"]])
        }
    }

    @Test func messageJustOverTheLimitGetsAnError() async throws {
        try await withServer(configure: { $0.maxMessageBytes = 1000 }) { path in
            let connection = try RawConnection(path: path)
            let text = String(repeating: "y", count: 1200)
            await connection.send(#"{"method":"org.example.ping.Ping","parameters":{"text":"\#(text)"}}"#)
            let messages = try await connection.readUntilClosed()
            #expect(messages.map(\.errorName) == [VarlinkError.ProtocolError.messageTooLarge])
            // Just under the limit is fine.
            let fits = try RawConnection(path: path)
            let short = String(repeating: "y", count: 900)
            #expect(try await fits.call(#"{"method":"org.example.ping.Ping","parameters":{"text":"\#(short)"}}"#)
                == ["parameters": ["text": .string(short)]])
        }
    }

    @Test func clientThatNeverReadsHitsTheHardOutputCap() async throws {
        let recorder = Recorder()
        try await withServer(recorder: recorder, configure: {
            $0.maxPendingOutputBytes = 256 << 10
            $0.hardMaxPendingOutputBytes = 2 << 20
            $0.slowClientTimeout = .seconds(600)
        }) { path in
            let stuck = try RawConnection(path: path)
            await stuck.send(#"{"method":"org.example.ping.Flood","parameters":{"size":65536},"more":true}"#)
            #expect(await eventually { recorder.with { $0.floodStopped } })
            let accepted = recorder.with { $0.floodAccepted }
            // What the server accepted is bounded by the hard cap plus what the kernel's socket buffers took.
            #expect(accepted * 65536 <= (2 << 20) + (1 << 20), "accepted \(accepted) blobs")
            let other = try RawConnection(path: path)
            #expect(try await other.call(#"{"method":"org.example.ping.Ping","parameters":{"text":"ok"}}"#)
                == ["parameters": ["text": "ok"]])
            let received = try await stuck.readUntilClosed()
            #expect(received.count < accepted + 1)
        }
    }

    /// Every connection starts with a small kernel send buffer (a client that never reads holds
    /// only a few KiB there); a streaming handler that widens it has its replies queued whole, for
    /// at most 16 connections at a time.
    @Test func aStreamingHandlerWidensTheSendBuffer() async throws {
        try await withServer { path in
            /// A Flood call whose first blob (40 KB) is replied at once; the next comes in a minute.
            func flood(wide: Bool) async throws -> RawConnection {
                let client = try RawConnection(path: path)
                await client.send(#"{"method":"org.example.ping.Flood","parameters":{"size":40000,"delayMs":60000,"wide":\#(wide)},"more":true}"#)
                return client
            }
            /// What the kernel has queued for the client once the server wrote what it could.
            func queued(_ client: RawConnection, expectWhole: Bool) async throws -> Int {
                var bytes: Int32 = 0
                let whole = await eventually(timeout: expectWhole ? .seconds(5) : .milliseconds(300)) {
                    _ = ioctl(client.fd, UInt(FIONREAD), &bytes)
                    return bytes >= 40000
                }
                try await Task.sleep(for: .milliseconds(100))
                _ = ioctl(client.fd, UInt(FIONREAD), &bytes)
                if expectWhole { #expect(whole) }
                return Int(bytes)
            }
            let narrow = try await flood(wide: false)
            let narrowBytes = try await queued(narrow, expectWhole: false)
            #expect(narrowBytes < 16 << 10, "\(narrowBytes) bytes queued on a default connection")
            narrow.close()
            var wide: [RawConnection] = []
            for _ in 0..<16 {
                wide.append(try await flood(wide: true))
                let bytes = try await queued(wide[wide.count - 1], expectWhole: true)
                #expect(bytes > 40000, "\(bytes) bytes queued on widened connection \(wide.count)")
            }
            // The 17th open stream keeps the small buffer; once one of the 16 closes, the next
            // stream is widened again.
            let seventeenth = try await flood(wide: true)
            let seventeenthBytes = try await queued(seventeenth, expectWhole: false)
            #expect(seventeenthBytes < 16 << 10, "\(seventeenthBytes) bytes queued on the 17th stream")
            wide.removeFirst().close()
            try await Task.sleep(for: .milliseconds(100))
            let after = try await flood(wide: true)
            let afterBytes = try await queued(after, expectWhole: true)
            #expect(afterBytes > 40000, "\(afterBytes) bytes queued once a widened stream closed")
            for client in wide + [seventeenth, after] { client.close() }
        }
    }

    @Test func clientThatStaysOverTheSoftCapIsDisconnected() async throws {
        let recorder = Recorder()
        try await withServer(recorder: recorder, configure: {
            $0.maxPendingOutputBytes = 256 << 10
            $0.hardMaxPendingOutputBytes = 512 << 20
            $0.slowClientTimeout = .milliseconds(300)
        }) { path in
            let stuck = try RawConnection(path: path)
            let started = ContinuousClock.now
            await stuck.send(#"{"method":"org.example.ping.Flood","parameters":{"size":16384,"delayMs":2},"more":true}"#)
            // Meanwhile another client is served promptly.
            let other = try RawConnection(path: path)
            #expect(try await other.call(#"{"method":"org.example.ping.Ping","parameters":{"text":"ok"}}"#)
                == ["parameters": ["text": "ok"]])
            #expect(await eventually { recorder.with { $0.floodStopped } })
            let elapsed = ContinuousClock.now - started
            #expect(elapsed >= .milliseconds(300))
            let accepted = recorder.with { $0.floodAccepted }
            #expect(accepted * 16384 < 64 << 20, "accepted \(accepted) blobs")
            _ = try await stuck.readUntilClosed()
        }
    }

    @Test func aThousandConcurrentClients() async throws {
        try await withServer { path in
            var connections: [RawConnection] = []
            for _ in 0..<1000 { connections.append(try RawConnection(path: path)) }
            for (index, connection) in connections.enumerated() {
                await connection.send(#"{"method":"org.example.ping.Ping","parameters":{"text":"\#(index)"}}"#)
            }
            for (index, connection) in connections.enumerated() {
                #expect(try await connection.readMessage() == ["parameters": ["text": .string("\(index)")]])
            }
        }
    }

    @Test func clientClosingMidCallCancelsTheHandler() async throws {
        let recorder = Recorder()
        try await withServer(recorder: recorder) { path in
            let hanging = try RawConnection(path: path)
            await hanging.send(#"{"method":"org.example.ping.Hang"}"#)
            let sleeping = try RawConnection(path: path)
            await sleeping.send(#"{"method":"org.example.ping.Flood","parameters":{"size":1,"delayMs":100000},"more":true}"#)
            #expect(try await sleeping.readMessage()?.parameters == ["blob": "x"])
            try await Task.sleep(for: .milliseconds(50))
            #expect(recorder.with { !$0.hangEnded && !$0.floodStopped })
            close(dup2(open("/dev/null", O_RDONLY), hanging.fd))  // drop our end without reusing the fd number
            close(dup2(open("/dev/null", O_RDONLY), sleeping.fd))
            #expect(await eventually { recorder.with { $0.hangEnded } })
            // Flood was asleep in Task.sleep: only cancellation of its task can wake it.
            #expect(await eventually { recorder.with { $0.floodStopped } })
        }
    }

    @Test func connectionCapsPerUserAndInTotal() async throws {
        try await withServer(configure: {
            $0.maxConnections = 10
            $0.maxConnectionsPerUID = 2
            $0.privilegedUIDs = []  // the tests run as root, whom the per-uid cap does not limit
            $0.reservedConnections = 0
        }) { path in
            var first: RawConnection? = try RawConnection(path: path)
            let second = try RawConnection(path: path)
            for connection in [first!, second] {
                #expect(try await connection.call(#"{"method":"org.example.ping.Ping","parameters":{"text":"a"}}"#)
                    == ["parameters": ["text": "a"]])
            }
            let third = try RawConnection(path: path)
            let refused = try await third.readUntilClosed()
            #expect(refused.map(\.errorName) == [VarlinkError.ProtocolError.tooManyConnections])
            let reason = refused.first?.parameters?["reason"]?.stringValue ?? ""
            #expect(reason.contains("uid \(getuid())"), "\(reason)")
            // A slot frees up when a connection closes.
            first = nil
            #expect(await eventually {
                guard let again = try? RawConnection(path: path) else { return false }
                var byte: UInt8 = 0
                usleep(20_000)
                return recv(again.fd, &byte, 1, Int32(MSG_DONTWAIT)) < 0 && errno == EAGAIN
            })
        }
        try await withServer(configure: { $0.maxConnections = 1 }) { path in
            let first = try RawConnection(path: path)
            #expect(try await first.call(#"{"method":"org.example.ping.Ping","parameters":{"text":"a"}}"#)
                == ["parameters": ["text": "a"]])
            let refused = try await RawConnection(path: path).readUntilClosed()
            #expect(refused.first?.parameters?["reason"]?.stringValue?.contains("limit of 1 connections") == true)
        }
    }

    @Test func idleConnectionsAreClosedButBusyOnesAreNot() async throws {
        let recorder = Recorder()
        try await withServer(recorder: recorder, configure: { $0.idleTimeout = .milliseconds(200) }) { path in
            let idle = try RawConnection(path: path)
            let used = try RawConnection(path: path)
            #expect(try await used.call(#"{"method":"org.example.ping.Ping","parameters":{"text":"a"}}"#)
                == ["parameters": ["text": "a"]])
            let busy = try RawConnection(path: path)
            await busy.send(#"{"method":"org.example.ping.Hang"}"#)
            let started = ContinuousClock.now
            #expect(try await idle.readUntilClosed(timeout: .seconds(5)) == [])
            #expect(try await used.readUntilClosed(timeout: .seconds(5)) == [])
            #expect(ContinuousClock.now - started >= .milliseconds(150))
            try await Task.sleep(for: .milliseconds(400))
            #expect(recorder.with { !$0.hangEnded })
        }
    }
}
