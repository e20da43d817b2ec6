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
}
