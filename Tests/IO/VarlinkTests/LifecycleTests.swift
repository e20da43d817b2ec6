import Foundation
import Glibc
import JSON
import Testing
import TestSupport
import Varlink

/// Binds a plain listening socket at `path`, as systemd would for socket activation.
func makeListeningSocket(_ path: String, listening: Bool = true) throws -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
    let rc = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard rc == 0, !listening || listen(fd, 16) == 0 else { throw TestError("bind/listen \(path): errno \(errno)") }
    return fd
}

func fileExists(_ path: String) -> Bool {
    var info = stat()
    return lstat(path, &info) == 0
}

@Suite(.serialized) struct ServerLifecycleTests {
    @Test func cancellingRunClosesEverythingAndRemovesTheSocket() async throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/sock"
        let recorder = Recorder()
        let server = try VarlinkServer(
            configuration: VarlinkServerConfiguration(listen: .path(path)), handlers: [PingInterface(recorder: recorder)])
        #expect(fileExists(path))
        let task = Task { try await server.run() }
        let hanging = try RawConnection(path: path)
        await hanging.send(#"{"method":"org.example.ping.Hang"}"#)
        let idle = try RawConnection(path: path)
        #expect(try await idle.call(#"{"method":"org.example.ping.Ping","parameters":{"text":"a"}}"#)
            == ["parameters": ["text": "a"]])
        task.cancel()
        try await task.value
        #expect(!fileExists(path))
        #expect(recorder.with { $0.hangEnded })
        #expect(try await hanging.readUntilClosed(timeout: .seconds(2)) == [])
        #expect(try await idle.readUntilClosed(timeout: .seconds(2)) == [])
        await #expect(throws: VarlinkServerError.self) { try await server.run() }
    }

    @Test func staleSocketFileIsReplacedButALiveServerIsNot() async throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/sock"
        // A socket file nobody listens on any more, as a crashed server leaves it.
        close(try makeListeningSocket(path, listening: false))
        #expect(fileExists(path))
        let server = try VarlinkServer(configuration: VarlinkServerConfiguration(listen: .path(path)), handlers: [PingInterface()])
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await server.run() }
            let connection = try RawConnection(path: path)
            #expect(try await connection.call(#"{"method":"org.example.ping.Ping","parameters":{"text":"a"}}"#)
                == ["parameters": ["text": "a"]])
            do throws(VarlinkServerError) {
                _ = try VarlinkServer(configuration: VarlinkServerConfiguration(listen: .path(path)), handlers: [])
                Issue.record("a second server started on a live socket")
            } catch {
                guard case .addressInUse(let busy) = error else { throw error }
                #expect(busy == path)
            }
            // The first server is unaffected.
            #expect(try await connection.call(#"{"method":"org.example.ping.Ping","parameters":{"text":"b"}}"#)
                == ["parameters": ["text": "b"]])
            group.cancelAll()
        }
    }

    @Test func socketModeAndGroup() async throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        var info = stat()
        do {
            let server = try VarlinkServer(
                configuration: VarlinkServerConfiguration(listen: .path(directory + "/a")), handlers: [])
            #expect(stat(directory + "/a", &info) == 0)
            #expect(info.st_mode & 0o7777 == 0o660)
            #expect(info.st_mode & S_IFMT == S_IFSOCK)
            _ = server
        }
        // A server that never ran still removes its socket when it goes away.
        #expect(!fileExists(directory + "/a"))
        var configuration = VarlinkServerConfiguration(listen: .path(directory + "/b"))
        configuration.socketMode = 0o600
        configuration.socketGroup = 12345
        let server = try VarlinkServer(configuration: configuration, handlers: [])
        #expect(stat(directory + "/b", &info) == 0)
        #expect(info.st_mode & 0o7777 == 0o600)
        #expect(info.st_gid == 12345)
        _ = server
    }

    @Test func servesAnInheritedListeningSocket() async throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/activated"
        let fd = try makeListeningSocket(path)
        let server = try VarlinkServer(
            configuration: VarlinkServerConfiguration(listen: .fileDescriptor(fd)), handlers: [PingInterface()])
        #expect(server.socketPath == nil)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await server.run() }
            let connection = try RawConnection(path: path)
            #expect(try await connection.call(#"{"method":"org.example.ping.Ping","parameters":{"text":"a"}}"#)
                == ["parameters": ["text": "a"]])
            group.cancelAll()
        }
        // The fd was closed (nobody listens any more: connecting is refused; checking the fd number
        // itself would race with parallel tests reusing it), the path (owned by whoever bound it) left alone.
        #expect(throws: (any Error).self) { _ = try RawConnection(path: path) }
        #expect(fileExists(path))
    }

    @Test func systemdActivationNeedsOurPid() {
        setenv("LISTEN_FDS", "1", 1)
        setenv("LISTEN_PID", "1", 1)
        #expect(VarlinkServerConfiguration.systemdListeningSocket() == nil)
        setenv("LISTEN_PID", String(getpid()), 1)
        #expect(VarlinkServerConfiguration.systemdListeningSocket() == 3)
        #expect(getenv("LISTEN_FDS") == nil)
        #expect(getenv("LISTEN_PID") == nil)
    }

    @Test func rejectsBadConfigurations() {
        #expect(throws: VarlinkServerError.self) {
            _ = try VarlinkServer(
                configuration: VarlinkServerConfiguration(listen: .path("/tmp/" + String(repeating: "x", count: 120))),
                handlers: [])
        }
        #expect(throws: VarlinkServerError.self) {
            _ = try VarlinkServer(
                configuration: VarlinkServerConfiguration(listen: .fileDescriptor(-1)),
                handlers: [PingInterface(), PingInterface()])
        }
        #expect(throws: VarlinkServerError.self) {
            let definition = try! VarlinkInterfaceDefinition(description: pingDescription)
            _ = try VarlinkServer(
                configuration: VarlinkServerConfiguration(listen: .fileDescriptor(-1)),
                handlers: [VarlinkInterface(definition, methodsRequiringMore: ["Nope"]) { _, _ in }])
        }
    }
}
