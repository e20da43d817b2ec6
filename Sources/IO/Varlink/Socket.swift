import Glibc
import Locking
import SystemIO

/// A failed system call: which call, on what, and the errno it set.
public struct VarlinkSystemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The C function that failed, e.g. `bind`.
    public var call: String
    /// What it was applied to, e.g. the socket path.
    public var subject: String
    /// The errno value the call set.
    public var errno: Int32

    /// `call(subject) failed: strerror text (errno N)`.
    public var description: String {
        "\(self.call)(\(self.subject)) failed: \(Self.message(for: self.errno)) (errno \(self.errno))"
    }

    /// `strerror` text for an errno value.
    static func message(for code: Int32) -> String {
        guard let text = strerror(code) else { return "unknown error" }
        return String(cString: text)
    }
}

/// The socket system calls this module makes, each returning an error value instead of
/// throwing so that the I/O loop can decide.
enum Sys {
    /// `errno` as it is right now (read before any other call can change it).
    static func currentErrno() -> Int32 { errno }

    /// Fills a `sockaddr_un` for `path`; nil when the path does not fit `sun_path` (108 bytes with NUL).
    static func unixAddress(_ path: String) -> sockaddr_un? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity, !bytes.contains(0) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        return address
    }

    /// Calls `body` with `address` as the `sockaddr` pointer and length that `bind` and `connect` take.
    static func withAddress<R>(_ address: sockaddr_un, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        var copy = address
        return withUnsafePointer(to: &copy) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    /// Sets `O_NONBLOCK` on `fd`; false when `fcntl` failed.
    static func setNonBlocking(_ fd: Int32) -> Bool {
        let flags = fcntl(fd, F_GETFL)
        return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0
    }

    /// Connects a new blocking `SOCK_STREAM` socket to `path`; returns the fd or the errno.
    static func connectUnix(_ path: String) -> Result<Int32, VarlinkSystemError> {
        guard let address = Self.unixAddress(path) else {
            return .failure(VarlinkSystemError(call: "connect", subject: path, errno: ENAMETOOLONG))
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure(VarlinkSystemError(call: "socket", subject: path, errno: errno)) }
        let rc = retryingInterrupted { Self.withAddress(address) { connect(fd, $0, $1) } }
        if rc == 0 { return .success(fd) }
        let code = errno
        close(fd)
        return .failure(VarlinkSystemError(call: "connect", subject: path, errno: code))
    }

    /// Like `connectUnix(_:)`, but gives up with `ETIMEDOUT` after `nanoseconds` when the server's backlog is
    /// full (a server that stopped accepting). The socket is blocking again when returned.
    static func connectUnix(_ path: String, within nanoseconds: Int64) -> Result<Int32, VarlinkSystemError> {
        guard let address = Self.unixAddress(path) else {
            return .failure(VarlinkSystemError(call: "connect", subject: path, errno: ENAMETOOLONG))
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return .failure(VarlinkSystemError(call: "socket", subject: path, errno: errno)) }
        let deadline = monotonicNanoseconds() + nanoseconds
        while true {
            let rc = retryingInterrupted { Self.withAddress(address) { connect(fd, $0, $1) } }
            let code = errno
            if rc == 0 || code == EINPROGRESS || code == EISCONN {
                // A Unix socket connects at once or not at all; clear O_NONBLOCK for the reader thread.
                let flags = fcntl(fd, F_GETFL)
                _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK)
                return .success(fd)
            }
            if code == EAGAIN && monotonicNanoseconds() < deadline {
                // The backlog is full: try again shortly.
                usleep(10_000)
                continue
            }
            close(fd)
            return .failure(VarlinkSystemError(call: "connect", subject: path, errno: code == EAGAIN ? ETIMEDOUT : code))
        }
    }

    /// Peer credentials and supplementary groups of a connected Unix socket.
    static func peer(of fd: Int32) -> VarlinkPeer? {
        // struct ucred (needs _GNU_SOURCE, which the Glibc module lacks): pid_t, uid_t, gid_t.
        struct Credentials { var pid: Int32 = 0; var uid: UInt32 = 0; var gid: UInt32 = 0 }
        var credentials = Credentials()
        var length = socklen_t(MemoryLayout<Credentials>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else { return nil }
        var peer = VarlinkPeer(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid, groups: [])
        if let groups = Self.peerGroups(of: fd) {
            peer.groups = groups
        } else if credentials.pid > 0 {
            peer.groups = Self.procGroups(pid: credentials.pid)
        }
        return peer
    }

    /// `SO_PEERGROUPS` (Linux 4.13+): the groups the peer had when it connected.
    private static func peerGroups(of fd: Int32) -> [UInt32]? {
        let soPeerGroups: Int32 = 59
        var groups = [gid_t](repeating: 0, count: 64)
        for _ in 0..<2 {
            var length = socklen_t(groups.count * MemoryLayout<gid_t>.size)
            let rc = groups.withUnsafeMutableBytes { getsockopt(fd, SOL_SOCKET, soPeerGroups, $0.baseAddress, &length) }
            if rc == 0 { return Array(groups.prefix(Int(length) / MemoryLayout<gid_t>.size)) }
            guard errno == ERANGE else { return nil }
            groups = [gid_t](repeating: 0, count: Int(length) / MemoryLayout<gid_t>.size + 1)
        }
        return nil
    }

    /// The `Groups:` line of `/proc/<pid>/status`; racy (the pid may be gone or reused), so best effort.
    static func procGroups(pid: Int32) -> [UInt32] {
        guard let content = try? readWholeFile("/proc/\(pid)/status", limit: 65536) else { return [] }
        let text = String(decoding: content, as: UTF8.self)
        for line in text.split(separator: "\n") where line.hasPrefix("Groups:") {
            return line.dropFirst("Groups:".count).split(whereSeparator: { $0 == " " || $0 == "\t" })
                .compactMap { UInt32($0) }
        }
        return []
    }
}

/// Starts a detached POSIX thread running `body`. Used for the server's I/O loop and the client's reader,
/// which block in the kernel and so must not occupy a thread of Swift's cooperative pool.
func startThread(_ body: @escaping @Sendable () -> Void) throws(VarlinkSystemError) {
    let rc = startDetachedThread(body)
    guard rc == 0 else { throw VarlinkSystemError(call: "pthread_create", subject: "varlink thread", errno: rc) }
}
