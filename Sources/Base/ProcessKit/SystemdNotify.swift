import Glibc
import SystemIO

/// The sd_notify protocol without libsystemd: datagrams of `KEY=VALUE` lines sent to the
/// `AF_UNIX` socket named by `NOTIFY_SOCKET` (a leading `@` means the abstract namespace).
///
/// When `NOTIFY_SOCKET` is unset every call is a silent no-op, as sd_notify(3) specifies.
public struct SystemdNotifier: Sendable {
    private let socket: NotifySocket?
    /// The watchdog interval systemd asked for (`WATCHDOG_USEC`, for this process), if any.
    public let watchdogInterval: Duration?

    /// Opens the notification socket now, once: later notifications never need a new descriptor, so
    /// a process out of descriptors (a flood of connections) still pings the watchdog.
    public init(environment: [String: String]) {
        let path = environment["NOTIFY_SOCKET"]
        self.socket = (path?.isEmpty ?? true) ? nil : NotifySocket(path: path!)
        if let usec = environment["WATCHDOG_USEC"].flatMap({ UInt64($0) }), usec > 0,
            environment["WATCHDOG_PID"].flatMap({ Int32($0) }).map({ $0 == getpid() }) ?? true
        {
            self.watchdogInterval = .microseconds(Int64(usec))
        } else {
            self.watchdogInterval = nil
        }
    }

    /// Whether `NOTIFY_SOCKET` named a usable socket (otherwise every notification is a no-op).
    public var isEnabled: Bool { self.socket != nil }

    /// Sends one notification; returns false when it could not be delivered (never throws: a
    /// missing supervisor must not stop the daemon).
    ///
    /// Never blocks for long: a supervisor that does not read (the kernel queues only
    /// `net.unix.max_dgram_qlen` datagrams, 10 by default) would otherwise wedge the calling thread,
    /// and with it the daemon, in `sendto`. A full queue drops `STATUS=` and `WATCHDOG=1` at once
    /// (the next one replaces them); state changes (`READY=1`, `STOPPING=1`, `RELOADING=1`) wait up
    /// to `patience` for room.
    @discardableResult
    public func notify(_ state: String, patience: Duration? = nil) -> Bool {
        guard let socket = self.socket else { return false }
        let wait = patience ?? (Self.isStateChange(state) ? .seconds(2) : .zero)
        return socket.send(Array(state.utf8), patience: wait)
    }

    /// Whether a message changes the service state (worth waiting for room in the queue).
    static func isStateChange(_ state: String) -> Bool {
        state.split(separator: "\n").contains { $0 == "READY=1" || $0 == "STOPPING=1" || $0 == "RELOADING=1" }
    }

    /// `READY=1`: start-up finished; also sends `status` and this process's `MAINPID`.
    public func ready(status: String) { self.notify("READY=1\nSTATUS=\(status)\nMAINPID=\(getpid())") }
    /// `STATUS=`: the one-line status `systemctl status` shows.
    public func status(_ status: String) { self.notify("STATUS=\(status)") }
    /// `WATCHDOG=1`: the keep-alive ping, due within `watchdogInterval`.
    public func watchdog() { self.notify("WATCHDOG=1") }
    /// `STOPPING=1`: shutdown began; `status` says why.
    public func stopping(status: String) { self.notify("STOPPING=1\nSTATUS=\(status)") }
    /// `RELOADING=1` with `MONOTONIC_USEC` (what `Type=notify-reload` expects); send `ready(status:)`
    /// when the reload is done.
    public func reloading() {
        let usec = monotonicNanoseconds() / 1000
        self.notify("RELOADING=1\nMONOTONIC_USEC=\(usec)")
    }
}

/// The datagram socket to the supervisor, opened and connected once and kept for the process's life.
private final class NotifySocket: Sendable {
    let fd: Int32
    private let address: sockaddr_un
    private let length: socklen_t

    init?(path: String) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(path.utf8)
        let abstract = pathBytes.first == UInt8(ascii: "@")
        if abstract { pathBytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard pathBytes.count < capacity else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
        }
        self.address = address
        self.length = socklen_t(MemoryLayout<sa_family_t>.size + pathBytes.count + (abstract ? 0 : 1))
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        self.fd = fd
        // Connected, so poll(POLLOUT) can wait for room in the supervisor's queue. A supervisor not
        // there yet is connected to on the first send.
        _ = self.connect()
    }

    deinit { close(self.fd) }

    /// (Re)connects the same descriptor: a datagram socket may connect again without a new fd.
    private func connect() -> Bool {
        var address = self.address
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(self.fd, $0, self.length) }
        } == 0
    }

    func send(_ payload: [UInt8], patience: Duration) -> Bool {
        var waitedMilliseconds: Int64 = 0
        let allowedMilliseconds = patience.components.seconds * 1000 + patience.components.attoseconds / 1_000_000_000_000_000
        var reconnected = false
        while true {
            let sent = payload.withUnsafeBytes { bytes in
                retryingInterrupted { Glibc.send(self.fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
            }
            if sent == payload.count { return true }
            let code = errno
            if sent < 0, !reconnected, code == ENOTCONN || code == ECONNREFUSED || code == EDESTADDRREQ {
                // The supervisor's socket was (re)created after ours connected.
                reconnected = true
                if self.connect() { continue }
                return false
            }
            guard sent < 0, code == EAGAIN || code == EWOULDBLOCK else { return false }
            guard waitedMilliseconds < allowedMilliseconds else { return false }
            var pollFD = pollfd(fd: self.fd, events: Int16(POLLOUT), revents: 0)
            let slice = Int32(min(100, allowedMilliseconds - waitedMilliseconds))
            _ = poll(&pollFD, 1, slice)
            waitedMilliseconds += Int64(slice)
        }
    }
}
