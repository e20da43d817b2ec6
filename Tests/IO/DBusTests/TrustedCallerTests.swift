import Locking
import DBus
import Testing
import TestSupport

extension DBusIntegration {
    /// `exportObject(at:trustedCaller:)`: a call is from the trusted caller only when its sender is
    /// the current owner of the name, followed across owners (bluetoothd restarting under a new
    /// unique name, or another peer taking the name over).
    @Suite("exported objects know whether a call comes from a name's current owner")
    struct TrustedCallerTests {
        static let name = "io.sugard.TestOwner"

        /// Calls Who on the server; it answers whether the call was from the trusted caller.
        static func isTrusted(_ from: DBusConnection, _ server: DBusConnection) async throws -> Bool? {
            try await from.call(
                destination: server.uniqueName, path: "/agent", interface: "io.sugard.Test", method: "Who",
                timeout: .seconds(10)
            ).first?.bool
        }

        @Test("the owner is trusted, others are not; a new owner is trusted and the old one no longer")
        func followsTheOwner() async throws {
            try await withBus { fixture in
                let server = try await fixture.connect()
                let first = try await fixture.connect()
                let second = try await fixture.connect()
                defer {
                    server.close()
                    second.close()
                }
                let object = try await server.exportObject(at: "/agent", trustedCaller: Self.name)
                let answering = Task {
                    for await call in object.calls { try? call.reply([.bool(call.isFromTrustedCaller)]) }
                }
                defer { answering.cancel() }
                // Nobody owns the name yet: nobody is trusted.
                #expect(try await Self.isTrusted(first, server) == false)
                #expect(try await first.requestName(Self.name))
                #expect(try await Self.isTrusted(first, server) == true)
                #expect(try await Self.isTrusted(second, server) == false)
                // The owner leaves (bluetoothd stops) and another peer takes the name (it restarts).
                first.close()
                await first.waitUntilDisconnected()
                var taken = false
                for _ in 0..<100 where !taken {
                    taken = try await second.requestName(Self.name)
                    if !taken { try await Task.sleep(for: .milliseconds(20)) }
                }
                #expect(taken)
                #expect(try await Self.isTrusted(second, server) == true)
                // A connection that exports without a trusted caller trusts everyone, as before.
                let plain = try await second.exportObject(at: "/agent")
                let plainAnswering = Task {
                    for await call in plain.calls { try? call.reply([.bool(call.isFromTrustedCaller)]) }
                }
                defer { plainAnswering.cancel() }
                #expect(try await Self.isTrusted(server, second) == true)
                await #expect(throws: DBusError.self) { _ = try await server.exportObject(at: "/agent2", trustedCaller: ":1.5") }
            }
        }
    }
}
