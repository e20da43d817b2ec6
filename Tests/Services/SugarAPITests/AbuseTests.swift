import Foundation
import Glibc
import HealthDataSync
import JSON
import SugarAPI
import Testing
import TestSupport
import Varlink

/// Hostile and broken clients against io.sugard.HealthDataSync: the daemon keeps serving everyone else.
@Suite struct AbuseTests {
    /// A well-behaved client still gets its status.
    static func stillServed(_ f: Fixture) async throws {
        let reply = try await f.call(api + "GetStatus")
        #expect(reply["state"]?["readingCount"]?.intValue != nil)
    }

    @Test func garbageAndInvalidJSONCloseOnlyThatConnection() async throws {
        try await withAPIServer { f in
            let bystander = try f.raw()
            await bystander.send(#"{"method":"io.sugard.HealthDataSync.Watch","parameters":{"fields":["readingCount"]},"more":true}"#)
            #expect(try await bystander.readMessage()?.parameters?["snapshot"] == true)
            var garbage: [UInt8] = []
            var seed: UInt64 = 0x5EED
            for _ in 0..<4096 {
                seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                garbage.append(UInt8(truncatingIfNeeded: seed >> 33))
            }
            for payload in [garbage + [0], Array(#"{"method":"io.sugard.HealthDataSync.GetStatus""#.utf8) + [0],
                            Array("[1,2,3]".utf8) + [0], Array(#"{"method":42}"#.utf8) + [0]] {
                let raw = try f.raw()
                await raw.send(payload)
                let replies = try await raw.readUntilClosed()
                #expect(replies.last?.errorName == VarlinkError.ProtocolError.invalidMessage)
            }
            f.models.viewModel.update { $0.readingCount = 8 }
            #expect(try await bystander.readMessage()?.parameters?["fields"] == ["readingCount": 8])
            let reply = try await f.call(api + "GetStatus")
            #expect(reply["state"]?["readingCount"] == 8)
        }
    }

    @Test func aHundredMegabyteMessageIsRefusedWithoutBufferingIt() async throws {
        try await withAPIServer { f in
            let raw = try f.raw()
            let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 1 << 20)
            var sent = 0
            // {"method":"io.sugard.HealthDataSync.GetStatus","parameters":{"x":"aaaa... (100 MiB)
            sent += await raw.send(Array(#"{"method":"io.sugard.HealthDataSync.GetStatus","parameters":{"x":""#.utf8))
            for _ in 0..<100 {
                let n = await raw.send(chunk, deadline: .now + .seconds(5))
                sent += n
                if n < chunk.count { break }
            }
            #expect(sent < 100 << 20, "the server kept reading past its limit")
            let replies = try await raw.readUntilClosed()
            #expect(replies.last?.errorName == VarlinkError.ProtocolError.messageTooLarge)
            try await Self.stillServed(f)
        }
    }

    @Test func aThousandConcurrentClients() async throws {
        try await withAPIServer { f in
            var connections: [RawConnection] = []
            for _ in 0..<1000 { connections.append(try f.raw()) }
            for (i, connection) in connections.enumerated() {
                await connection.send(
                    i % 10 == 0
                        ? #"{"method":"io.sugard.HealthDataSync.Watch","parameters":{"fields":["readingCount"]},"more":true}"#
                        : #"{"method":"io.sugard.HealthDataSync.GetStatus"}"#)
            }
            for (i, connection) in connections.enumerated() {
                let reply = try #require(try await connection.readMessage(timeout: .seconds(30)))
                #expect(reply.errorName == nil)
                if i % 10 == 0 {
                    #expect(reply.parameters?["snapshot"] == true)
                } else {
                    #expect(reply.parameters?["state"]?["readingCount"] == 7)
                }
            }
            f.models.viewModel.update { $0.readingCount = 1000 }
            for connection in stride(from: 0, to: 1000, by: 10).map({ connections[$0] }) {
                #expect(try await connection.readMessage(timeout: .seconds(30))?.parameters?["fields"] == ["readingCount": 1000])
            }
            connections.removeAll()
            #expect(await eventually(timeout: .seconds(20)) { f.clientWatchers == 0 })
            try await Self.stillServed(f)
        }
    }

    @Test func aClientKilledMidCallLeavesNothingBehind() async throws {
        try await withAPIServer(stepDelay: .milliseconds(20)) { f in
            // A Python client watching, killed with SIGKILL while its call is open.
            let directory = f.directory
            let script = directory + "/watch.py"
            try """
                import sys, varlink
                with varlink.Client(address="unix:" + sys.argv[1]) as client:
                    with client.open("io.sugard.HealthDataSync", namespaced=False) as conn:
                        for reply in conn.Watch(None, None, None, _more=True):
                            print("reply", flush=True)
                """.write(toFile: script, atomically: true, encoding: .utf8)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", script, f.path]
            let out = Pipe()
            process.standardOutput = out
            try processLaunchLock.withLock { try process.run() }
            #expect(await eventually { f.clientWatchers == 1 })
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            #expect(await eventually { f.noClientWatchers })
            // A client that drops its connection in the middle of a streamed Sync.
            let raw = try f.raw()
            await raw.send(#"{"method":"io.sugard.HealthDataSync.Sync","parameters":{"meter":"C0:26:DA:01:02:03","force":true},"more":true}"#)
            #expect(try await raw.readMessage()?.parameters?["phase"] != nil)
            raw.close()
            // The sync itself is the daemon's business; the next one is not blocked by the dead client.
            #expect(await eventually(timeout: .seconds(10)) { !f.isSyncing(meterA.id) })
            let sessions = try await f.call(api + "Sync", ["meter": .string(meterA.id.rawValue), "force": true])
            #expect(sessions["sessions"]?.arrayValue?.count == 1)
            try await Self.stillServed(f)
        }
    }
}
