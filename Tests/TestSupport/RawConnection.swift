import Glibc
import JSON

/// A Varlink connection at the byte level (a raw, non-blocking client socket), for the tests that send
/// what a well-behaved client would not (garbage, split messages, oversized input) and read the raw
/// replies. Reads poll with short sleeps so no test blocks a cooperative thread.
package final class RawConnection: @unchecked Sendable {
    package private(set) var fd: Int32
    private var buffer: [UInt8] = []

    package init(path: String) throws {
        self.fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard self.fd >= 0 else { throw RigError("socket failed") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(self.fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard rc == 0 else {
            let code = errno
            Glibc.close(self.fd)
            throw RigError("connect(\(path)) failed: errno \(code)")
        }
        let flags = fcntl(self.fd, F_GETFL)
        _ = fcntl(self.fd, F_SETFL, flags | O_NONBLOCK)
    }

    deinit { self.close() }

    /// Closes the socket once (a second close could hit an fd number someone else reused).
    package func close() {
        if self.fd >= 0 { Glibc.close(self.fd) }
        self.fd = -1
    }

    /// Sends everything, waiting while the socket is full. Returns the bytes sent before an error.
    @discardableResult
    package func send(_ bytes: [UInt8], deadline: ContinuousClock.Instant = .now + .seconds(10)) async -> Int {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes {
                Glibc.send(self.fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n > 0 {
                offset += n
            } else if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                if ContinuousClock.now > deadline { return offset }
                try? await Task.sleep(for: .milliseconds(1))
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                return offset
            }
        }
        return offset
    }

    package func shutdownWrite() { _ = Glibc.shutdown(self.fd, Int32(SHUT_WR)) }

    package func send(_ text: String) async {
        await self.send(Array(text.utf8) + [0])
    }

    /// The next NUL-terminated message, or nil at end of stream (or on a connection reset).
    package func readMessage(timeout: Duration = .seconds(10)) async throws -> JSONObject? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let nul = self.buffer.firstIndex(of: 0) {
                let message = Array(self.buffer[..<nul])
                self.buffer.removeSubrange(...nul)
                guard case .object(let object) = try JSONValue(parsing: message) else {
                    throw RigError("message is not an object")
                }
                return object
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                self.buffer.append(contentsOf: chunk[0..<n])
                continue
            }
            if n == 0 { return nil }
            if errno == ECONNRESET { return nil }
            guard errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else {
                throw RigError("recv failed: errno \(errno)")
            }
            if ContinuousClock.now > deadline { throw RigError("timed out waiting for a message") }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Reads until end of stream; returns the messages that arrived first.
    package func readUntilClosed(timeout: Duration = .seconds(10)) async throws -> [JSONObject] {
        var messages: [JSONObject] = []
        while let message = try await self.readMessage(timeout: timeout) { messages.append(message) }
        return messages
    }

    package func call(_ text: String) async throws -> JSONObject {
        await self.send(text)
        guard let reply = try await self.readMessage() else { throw RigError("connection closed instead of a reply") }
        return reply
    }
}
