import Glibc
import JSON
import Synchronization
import Testing
import TestSupport
import Varlink

@Suite(.serialized) struct ServerProtocolTests {
    @Test func pingAllAtOnceAndByteByByte() async throws {
        try await withServer { path in
            let connection = try RawConnection(path: path)
            let reply = try await connection.call(#"{"method":"org.example.ping.Ping","parameters":{"text":"hi"}}"#)
            #expect(reply == ["parameters": ["text": "hi"]])

            let message = Array(#"{"method":"org.example.ping.Ping","parameters":{"text":"drip"}}"#.utf8) + [0]
            for byte in message {
                await connection.send([byte])
            }
            #expect(try await connection.readMessage() == ["parameters": ["text": "drip"]])
        }
    }

    @Test func pipelinedCallsAreAnsweredInOrder() async throws {
        try await withServer { path in
            let connection = try RawConnection(path: path)
            var batch: [UInt8] = []
            for index in 0..<50 {
                batch += Array(#"{"method":"org.example.ping.Ping","parameters":{"text":"\#(index)"}}"#.utf8) + [0]
            }
            await connection.send(batch)
            for index in 0..<50 {
                #expect(try await connection.readMessage() == ["parameters": ["text": .string("\(index)")]])
            }
        }
    }

    @Test func parametersMayBeMissingNullOrEmpty() async throws {
        try await withServer { path in
            let connection = try RawConnection(path: path)
            for call in [
                #"{"method":"org.example.ping.WhoAmI"}"#,
                #"{"method":"org.example.ping.WhoAmI","parameters":null}"#,
                #"{"method":"org.example.ping.WhoAmI","parameters":{}}"#,
            ] {
                let reply = try await connection.call(call)
                #expect(reply.parameters?["uid"]?.intValue == Int64(getuid()), "\(reply)")
            }
        }
    }

    @Test func serviceInterfaceDescribesTheServer() async throws {
        try await withServer { path in
            let connection = try RawConnection(path: path)
            let info = try await connection.call(#"{"method":"org.varlink.service.GetInfo"}"#)
            #expect(info == ["parameters": [
                "vendor": "sugard tests", "product": "VarlinkTests", "version": "1",
                "url": "https://example.org/sugard", "interfaces": ["org.varlink.service", "org.example.ping"],
            ]])
            let description = try await connection.call(
                #"{"method":"org.varlink.service.GetInterfaceDescription","parameters":{"interface":"org.example.ping"}}"#)
            #expect(description.parameters?["description"]?.stringValue == pingDescription)
            let service = try await connection.call(
                #"{"method":"org.varlink.service.GetInterfaceDescription","parameters":{"interface":"org.varlink.service"}}"#)
            let text = try #require(service.parameters?["description"]?.stringValue)
            #expect(try VarlinkInterfaceDefinition(description: text).name == "org.varlink.service")
            let missing = try await connection.call(
                #"{"method":"org.varlink.service.GetInterfaceDescription","parameters":{"interface":"org.example.nope"}}"#)
            #expect(missing == ["error": "org.varlink.service.InterfaceNotFound", "parameters": ["interface": "org.example.nope"]])
            let noArgument = try await connection.call(#"{"method":"org.varlink.service.GetInterfaceDescription"}"#)
            #expect(noArgument == ["error": "org.varlink.service.InvalidParameter", "parameters": ["parameter": "interface"]])
        }
    }

    static let rejected: [(call: String, error: String, parameters: JSONObject)] = [
        (#"{"method":"org.example.ping.Nope"}"#, "org.varlink.service.MethodNotFound", ["method": "org.example.ping.Nope"]),
        (#"{"method":"org.example.other.Ping"}"#, "org.varlink.service.InterfaceNotFound", ["interface": "org.example.other"]),
        (#"{"method":"Ping"}"#, "org.varlink.service.MethodNotFound", ["method": "Ping"]),
        (#"{"method":"org.example.ping.Ping"}"#, "org.varlink.service.InvalidParameter", ["parameter": "text"]),
        (#"{"method":"org.example.ping.Ping","parameters":{"text":5}}"#, "org.varlink.service.InvalidParameter", ["parameter": "text"]),
        (#"{"method":"org.example.ping.Ping","parameters":{"text":"a","b":1}}"#, "org.varlink.service.InvalidParameter", ["parameter": "b"]),
        (#"{"method":"org.example.ping.Store","parameters":{"reading":{"value":1,"unit":"kg"},"tags":[],"limits":{}}}"#,
         "org.varlink.service.InvalidParameter", ["parameter": "reading"]),
        (#"{"method":"org.example.ping.Counter","parameters":{"count":2}}"#, "org.varlink.service.ExpectedMore", [:]),
        (#"{"method":"org.example.ping.Unimplemented"}"#, "org.varlink.service.MethodNotImplemented", ["method": "org.example.ping.Unimplemented"]),
        (#"{"method":"org.example.ping.Fail","parameters":{"reason":"because"}}"#, "org.example.ping.Failed", ["reason": "because", "code": 7]),
        (#"{"method":"org.varlink.service.Nope"}"#, "org.varlink.service.MethodNotFound", ["method": "org.varlink.service.Nope"]),
    ]

    @Test(arguments: ServerProtocolTests.rejected.indices)
    func callsAreValidatedBeforeTheHandler(_ index: Int) async throws {
        let sample = Self.rejected[index]
        try await withServer { path in
            let connection = try RawConnection(path: path)
            let reply = try await connection.call(sample.call)
            #expect(reply == ["error": .string(sample.error), "parameters": .object(sample.parameters)])
            // The connection stays usable after an error reply.
            #expect(try await connection.call(#"{"method":"org.example.ping.Ping","parameters":{"text":"ok"}}"#)
                == ["parameters": ["text": "ok"]])
        }
    }

    @Test func nestedOptionalAndEnumParametersReachTheHandler() async throws {
        try await withServer { path in
            let connection = try RawConnection(path: path)
            let reply = try await connection.call(#"""
                {"method":"org.example.ping.Store","parameters":{"reading":{"value":5.4,"unit":"mmol"},
                "tags":["a","b","c"],"limits":{"low":4},"flag":null,"meta":{"x":[1,{"y":null}]}}}
                """#)
            #expect(reply == ["parameters": ["stored": 3, "reading": ["value": 5.4, "unit": "mmol"]]])
            let definition = try VarlinkInterfaceDefinition(description: pingDescription)
            try definition.validateReply(method: "Store", parameters: try #require(reply.parameters))
        }
    }

    @Test func moreCallsStreamUntilTheLastReply() async throws {
        try await withServer { path in
            let connection = try RawConnection(path: path)
            await connection.send(#"{"method":"org.example.ping.Counter","parameters":{"count":3},"more":true}"#)
            #expect(try await connection.readMessage() == ["parameters": ["n": 1], "continues": true])
            #expect(try await connection.readMessage() == ["parameters": ["n": 2], "continues": true])
            #expect(try await connection.readMessage() == ["parameters": ["n": 3]])
            // A method without streaming answers a 'more' call once, without 'continues'.
            #expect(try await connection.call(#"{"method":"org.example.ping.Ping","parameters":{"text":"x"},"more":true}"#)
                == ["parameters": ["text": "x"]])
        }
    }

    @Test func onewayCallsGetNoReply() async throws {
        let recorder = Recorder()
        try await withServer(recorder: recorder) { path in
            let connection = try RawConnection(path: path)
            await connection.send(#"{"method":"org.example.ping.Notify","parameters":{"text":"one"},"oneway":true}"#)
            // Errors are not sent for oneway calls either.
            await connection.send(#"{"method":"org.example.ping.Nope","oneway":true}"#)
            await connection.send(#"{"method":"org.example.ping.Notify","parameters":{"text":"two"},"oneway":true}"#)
            // The first message back is the reply to this call: nothing was sent for the oneway calls.
            #expect(try await connection.call(#"{"method":"org.example.ping.Ping","parameters":{"text":"after"}}"#)
                == ["parameters": ["text": "after"]])
            #expect(recorder.with { $0.notes } == ["one", "two"])
        }
    }

    static let garbage: [(bytes: [UInt8], reason: String)] = [
        (Array("hello".utf8) + [0], "not valid JSON"),
        ([0xFF, 0xFE, 0x80, 0], "not valid JSON"),
        (Array(#"{"method":"org.example.ping.Ping""#.utf8) + [0], "not valid JSON"),
        ([0], "not valid JSON"),
        (Array("[1,2]".utf8) + [0], "not a JSON object"),
        (Array(#"{"parameters":{}}"#.utf8) + [0], "no \"method\""),
        (Array(#"{"method":7}"#.utf8) + [0], "no \"method\""),
        (Array(#"{"method":"org.example.ping.Ping","parameters":[]}"#.utf8) + [0], "\"parameters\" must be an object"),
        (Array(#"{"method":"org.example.ping.Ping","more":"yes"}"#.utf8) + [0], "\"more\" must be a boolean"),
    ]

    @Test(arguments: ServerProtocolTests.garbage.indices)
    func garbageGetsAnErrorAndTheConnectionCloses(_ index: Int) async throws {
        let sample = Self.garbage[index]
        try await withServer { path in
            let connection = try RawConnection(path: path)
            await connection.send(sample.bytes)
            let messages = try await connection.readUntilClosed()
            #expect(messages.count == 1)
            #expect(messages.first?.errorName == VarlinkError.ProtocolError.invalidMessage)
            let reason = messages.first?.parameters?["reason"]?.stringValue ?? ""
            #expect(reason.contains(sample.reason), "\(reason)")
            // Others are still served.
            let other = try RawConnection(path: path)
            #expect(try await other.call(#"{"method":"org.example.ping.Ping","parameters":{"text":"ok"}}"#)
                == ["parameters": ["text": "ok"]])
        }
    }

    @Test func halfClosedClientStillGetsItsReplies() async throws {
        try await withServer { path in
            let connection = try RawConnection(path: path)
            await connection.send(
                Array(#"{"method":"org.example.ping.Ping","parameters":{"text":"a"}}"#.utf8) + [0]
                    + Array(#"{"method":"org.example.ping.Counter","parameters":{"count":2},"more":true}"#.utf8) + [0])
            connection.shutdownWrite()
            let messages = try await connection.readUntilClosed()
            #expect(messages == [
                ["parameters": ["text": "a"]], ["parameters": ["n": 1], "continues": true], ["parameters": ["n": 2]],
            ])
        }
    }

    @Test func peerCredentialsAreOurs() async throws {
        try await withServer { path in
            let connection = try RawConnection(path: path)
            let reply = try #require(try await connection.call(#"{"method":"org.example.ping.WhoAmI"}"#).parameters)
            #expect(reply["pid"]?.intValue == Int64(getpid()))
            #expect(reply["uid"]?.intValue == Int64(getuid()))
            #expect(reply["gid"]?.intValue == Int64(getgid()))
            var groups = [gid_t](repeating: 0, count: 256)
            let count = Int(getgroups(Int32(groups.count), &groups))
            let expected = Set(groups.prefix(max(count, 0)).map { Int64($0) })
            let got = Set(reply["groups"]?.arrayValue?.compactMap(\.intValue) ?? [])
            #expect(got == expected)
        }
    }
}
