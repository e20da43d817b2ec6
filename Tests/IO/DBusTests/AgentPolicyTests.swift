import Locking
import DBus
import Foundation
import Glibc
import Testing
import TestSupport

extension DBusIntegration {
    /// The shipped D-Bus policy (systemd/io.sugard.conf) in a real dbus-daemon: only the owner of
    /// org.bluez may call org.bluez.Agent1 methods on sugard's connection; everyone else gets
    /// AccessDenied from the bus before the call reaches sugard. The bus is otherwise permissive
    /// (any peer may call any method), the case the policy is there for. The policy's user is
    /// sugard; here it is root, the user every connection of the test has.
    @Suite("io.sugard.conf: the bus delivers Agent1 calls to sugard only from bluetoothd")
    struct AgentPolicyTests {
        static let policyFile: String = {
            let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            return here.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("systemd/io.sugard.conf").path
        }()

        @Test(.enabled(if: getuid() == 0, "the policy is for a user; the test applies it to root, the user it runs as"))
        func onlyTheOwnerOfOrgBluezReachesTheAgent() async throws {
            var template = Array("/tmp/sgp-XXXXXX".utf8CString)
            guard let made = mkdtemp(&template) else { throw FixtureError("mkdtemp failed") }
            let dir = String(cString: made)
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let policy = try String(contentsOfFile: Self.policyFile, encoding: .utf8)
            #expect(policy.contains(#"<policy user="sugard">"#))
            try policy.replacingOccurrences(of: #"user="sugard""#, with: #"user="root""#)
                .write(toFile: dir + "/io.sugard.conf", atomically: true, encoding: .utf8)
            let config = try String(contentsOfFile: PrivateBus.standInDir + "/bus.conf.in", encoding: .utf8)
                .replacingOccurrences(of: "@SOCKET@", with: dir + "/bus.sock")
                .replacingOccurrences(of: "</busconfig>", with: "  <include>\(dir)/io.sugard.conf</include>\n</busconfig>")
            try config.write(toFile: dir + "/bus.conf", atomically: true, encoding: .utf8)
            var fds: [Int32] = [-1, -1]
            guard pipe2(&fds, O_CLOEXEC) == 0 else { throw FixtureError("pipe2 failed") }
            let bus = try Child(
                "/usr/bin/dbus-daemon", ["--config-file=\(dir)/bus.conf", "--nofork", "--print-address=1"],
                environment: ["PATH": "/usr/bin:/bin"], stdout: fds[1], stderr: nil)
            close(fds[1])
            defer { bus.kill() }
            var line: [UInt8] = []
            var byte: UInt8 = 0
            while byte != UInt8(ascii: "\n") {
                guard read(fds[0], &byte, 1) == 1 else { throw FixtureError("dbus-daemon exited before printing its address") }
                line.append(byte)
            }
            close(fds[0])
            let address = String(decoding: line.dropLast(), as: UTF8.self)

            let sugard = try await DBusConnection.connect(to: .address(address))
            let bluetoothd = try await DBusConnection.connect(to: .address(address))
            let impostor = try await DBusConnection.connect(to: .address(address))
            defer {
                sugard.close()
                bluetoothd.close()
                impostor.close()
            }
            #expect(try await bluetoothd.requestName("org.bluez"))
            let agent = try await sugard.exportObject(at: "/io/sugard/agent")
            let answering = Task {
                var senders: [String] = []
                for await call in agent.calls {
                    if call.interface == "org.bluez.Agent1" { senders.append(call.sender ?? "") }
                    try? call.reply(call.member == "RequestPasskey" ? [.uint32(123_456)] : [])
                }
                return senders
            }
            func requestPasskey(from connection: DBusConnection) async throws -> [DBusValue] {
                try await connection.call(
                    destination: sugard.uniqueName, path: "/io/sugard/agent", interface: "org.bluez.Agent1",
                    method: "RequestPasskey", arguments: [.objectPath("/org/bluez/hci0/dev_C0_26_DA_01_02_03")],
                    timeout: .seconds(10))
            }

            let denied = await #expect(throws: DBusError.self) { _ = try await requestPasskey(from: impostor) }
            #expect(denied?.name == "org.freedesktop.DBus.Error.AccessDenied", "\(String(describing: denied))")
            #expect(try await requestPasskey(from: bluetoothd) == [.uint32(123_456)])
            // The policy is about Agent1 only: other interfaces on sugard's connection stay reachable.
            _ = try await impostor.call(
                destination: sugard.uniqueName, path: "/io/sugard/agent", interface: "org.freedesktop.DBus.Peer",
                method: "Ping", timeout: .seconds(10))

            agent.unexport()
            let senders = await answering.value
            #expect(!senders.contains(impostor.uniqueName), "the impostor's call reached sugard: \(senders)")
            #expect(senders.contains(bluetoothd.uniqueName))
        }
    }
}
