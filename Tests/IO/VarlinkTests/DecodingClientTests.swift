import JSON
import Testing
import Varlink

/// `VarlinkClient.callMore(_:_:decoding:)`: replies read straight from their bytes by the caller's
/// decoder, against the test server's `Counter` stream.
@Suite(.serialized) struct DecodingClientTests {
    /// Reads `{"n": int}`.
    static func number(_ reader: inout JSONReader) throws -> Int64 {
        var n: Int64?
        try reader.beginObject()
        while let key = try reader.nextKey() {
            if key == "n" { n = try reader.readInt() } else { _ = try reader.readValue() }
        }
        guard let n else { throw reader.error("no n") }
        return n
    }

    @Test func decodedRepliesStreamInOrderAndErrorsStayRemoteErrors() async throws {
        try await withServer { path in
            let client = try VarlinkClient(socketPath: path)
            var numbers: [Int64] = []
            for try await n in client.callMore("org.example.ping.Counter", ["count": 5], decoding: Self.number) {
                numbers.append(n)
            }
            #expect(numbers == [1, 2, 3, 4, 5])
            // An error reply is the service's error, not a decoding failure.
            do {
                for try await _ in client.callMore("org.example.ping.Nope", decoding: Self.number) {}
                Issue.record("stream of an unknown method did not throw")
            } catch let error as VarlinkClientError {
                #expect(error == .remote(.methodNotFound("org.example.ping.Nope")))
            }
            // The connection still works for ordinary calls.
            #expect(try await client.call("org.example.ping.Ping", ["text": "after"]) == ["text": "after"])
        }
    }

    @Test func parametersTheDecoderRejectsEndTheStreamWithItsReason() async throws {
        try await withServer { path in
            let client = try VarlinkClient(socketPath: path)
            let strings = client.callMore("org.example.ping.Counter", ["count": 3]) { reader -> String in
                try reader.beginObject()
                _ = try reader.nextKey()
                return try reader.readString()
            }
            do {
                for try await _ in strings {}
                Issue.record("a reply the decoder rejects did not end the stream")
            } catch let error as VarlinkClientError {
                guard case .protocolViolation(let reason) = error else {
                    Issue.record("expected a protocol violation, got \(error)")
                    return
                }
                #expect(reason.contains("expected a string, got a number"), "\(reason)")
            }
        }
    }

    /// The windowed form (issue 39's paged exports): every reply in order; while the consumer holds
    /// the window, the reader thread stops reading the socket; leaving early or closing the client
    /// opens the window, so the reader thread never stays stuck in it.
    @Test func windowedRepliesStreamInOrderAndLeavingEarlyUnblocks() async throws {
        let recorder = Recorder()
        try await withServer(recorder: recorder) { path in
            let client = try VarlinkClient(socketPath: path)
            var numbers: [Int64] = []
            for try await n in client.callMore("org.example.ping.Counter", ["count": 300], window: 2, decoding: Self.number) {
                numbers.append(n)
                if n % 50 == 0 { try await Task.sleep(for: .milliseconds(5)) }
            }
            #expect(numbers == Array(1...300))
            #expect(try await client.call("org.example.ping.Ping", ["text": "after"]) == ["text": "after"])

            // A consumer that takes two replies and stops: the stream's end closes the window and the
            // connection; the handler stops (its replies fail), nothing hangs.
            let flooded = try VarlinkClient(socketPath: path)
            var taken = 0
            for try await _ in flooded.callMore("org.example.ping.Flood", ["size": 1000], window: 1, decoding: { reader in
                _ = try reader.readValue()
                return 0
            }) {
                taken += 1
                if taken == 2 { break }
            }
            flooded.close()
            #expect(await eventually { recorder.with { $0.floodStopped } })

            // Closing the client while its reader waits in a full window ends the stream.
            let held = try VarlinkClient(socketPath: path)
            let replies = held.callMore("org.example.ping.Flood", ["size": 1000, "delayMs": 1], window: 1) { reader in
                _ = try reader.readValue()
                return 0
            }
            var iterator = replies.makeAsyncIterator()
            _ = try await iterator.next()
            try await Task.sleep(for: .milliseconds(50))  // the reader fills the window and waits
            held.close()
            var ended = false
            do {
                while try await iterator.next() != nil {}
                ended = true
            } catch {
                ended = true
            }
            #expect(ended)
        }
    }
}
