import Glibc

/// The sd_notify protocol without libsystemd: datagrams of `KEY=VALUE` lines sent to the
/// `AF_UNIX` socket named by `NOTIFY_SOCKET` (a leading `@` means the abstract namespace).
///
/// When `NOTIFY_SOCKET` is unset every call is a silent no-op, as sd_notify(3) specifies.
public struct SystemdNotifier: Sendable {
    private let socketPath: String?
    /// The watchdog interval systemd asked for (`WATCHDOG_USEC`, for this process), if any.
    public let watchdogInterval: Duration?

    public init(environment: [String: String]) {
        let path = environment["NOTIFY_SOCKET"]
        self.socketPath = (path?.isEmpty ?? true) ? nil : path
        if let usec = environment["WATCHDOG_USEC"].flatMap({ UInt64($0) }), usec > 0,
            environment["WATCHDOG_PID"].flatMap({ Int32($0) }).map({ $0 == getpid() }) ?? true
        {
            self.watchdogInterval = .microseconds(Int64(usec))
        } else {
            self.watchdogInterval = nil
        }
    }

    public var isEnabled: Bool { self.socketPath != nil }

    /// Sends one notification; returns false when it could not be delivered (never throws: a
    /// missing supervisor must not stop the daemon).
    @discardableResult
    public func notify(_ state: String) -> Bool {
        guard let path = self.socketPath else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(path.utf8)
        let abstract = pathBytes.first == UInt8(ascii: "@")
        if abstract { pathBytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard pathBytes.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + pathBytes.count + (abstract ? 0 : 1))
        let payload = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                payload.withUnsafeBytes { bytes in
                    sendto(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), sa, length)
                }
            }
        }
        return sent == payload.count
    }

    public func ready(status: String) { self.notify("READY=1\nSTATUS=\(status)\nMAINPID=\(getpid())") }
    public func status(_ status: String) { self.notify("STATUS=\(status)") }
    public func watchdog() { self.notify("WATCHDOG=1") }
    public func stopping(status: String) { self.notify("STOPPING=1\nSTATUS=\(status)") }
    public func reloading() {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let usec = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
        self.notify("RELOADING=1\nMONOTONIC_USEC=\(usec)")
    }
}
