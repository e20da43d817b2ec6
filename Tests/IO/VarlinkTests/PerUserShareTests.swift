import Glibc
import JSON
import Testing
import TestSupport
import Varlink

/// `maxConnectionsPerUIDShare` lowers the per-uid cap to a share of the connections unprivileged
/// peers may use, and a refusal's `hint` says who holds the connections and what to do.
@Suite(.serialized) struct PerUserShareTests {
    static let ping = #"{"method":"org.example.ping.Ping","parameters":{"text":"a"}}"#

    @Test func aQuarterOfTheOrdinarySlotsPerUserAndAHintNamingTheHolder() async throws {
        try await withServer(configure: {
            $0.maxConnections = 20
            $0.reservedConnections = 4
            $0.maxConnectionsPerUIDShare = 0.25
            $0.privilegedUIDs = []  // so the test process (root) counts as anybody
            $0.connectionCapAdvice = "close some; raise max_connections_per_uid"
        }) { path in
            var held: [RawConnection] = []
            for _ in 0..<4 {
                let connection = try RawConnection(path: path)
                #expect(try await connection.call(Self.ping) == ["parameters": ["text": "a"]])
                held.append(connection)
            }
            let refused = try await RawConnection(path: path).readUntilClosed()
            #expect(refused.map(\.errorName) == [VarlinkError.ProtocolError.tooManyConnections])
            let parameters = refused.first?.parameters
            #expect(parameters?["reason"]?.stringValue?.contains("the limit of 4 connections for uid \(getuid())") == true, "\(refused)")
            #expect(parameters?["hint"]?.stringValue == "4 of 20 connections are open (uid \(getuid()) holds 4); close some; raise max_connections_per_uid",
                    "\(refused)")
        }
    }

    @Test func theCapsSayWhatRunWillEnforce() throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        var configuration = VarlinkServerConfiguration(listen: .path(directory + "/s"))
        configuration.maxConnections = 40
        configuration.reservedConnections = 16
        configuration.maxConnectionsPerUIDShare = 0.25
        configuration.reservedDescriptors = 0
        func caps() throws -> [Int] {
            let caps = try VarlinkServer(configuration: configuration, handlers: []).connectionCaps
            return [caps.total, caps.perUID]
        }
        // The open-files limit of this process is far above 40: a quarter of the 24 ordinary slots.
        #expect(try caps() == [40, 6])
        configuration.maxConnectionsPerUID = 5
        #expect(try caps() == [40, 5])
        configuration.maxConnectionsPerUIDShare = 1
        configuration.maxConnectionsPerUID = 1024
        #expect(try caps() == [40, 24])
    }
}
