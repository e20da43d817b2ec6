internal import CLinuxIO
import Glibc
import JSON
import Synchronization
import Locking
import SystemIO

/// What the I/O thread and the handler side share about one connection. The I/O thread owns the socket
/// and its buffers; this object only carries what other threads may read or must learn.
final class ConnectionHandle: Sendable {
    /// The loop's key for the connection (its epoll token); unique for the server's lifetime.
    let id: UInt64
    /// The credentials read at accept.
    let peer: VarlinkPeer
    /// Output bytes accepted from repliers and not yet written to the socket.
    let pendingOutput = Atomic<Int>(0)
    /// Fires once when the loop closed the connection, for whatever reason.
    let closed = OneShotSignal()

    /// The handle of connection `id` from `peer`.
    init(id: UInt64, peer: VarlinkPeer) {
        self.id = id
        self.peer = peer
    }
}

/// A complete message read from a connection, handed to the handler side.
struct IncomingMessage: Sendable {
    /// The connection it came from, where its replies go.
    let connection: ConnectionHandle
    /// The message without its terminating NUL.
    let bytes: [UInt8]
}

/// Limits the I/O thread enforces, in bytes and nanoseconds.
struct LoopLimits: Sendable {
    /// Open connections in total (already lowered to the open-files limit).
    var maxConnections: Int
    /// Open connections per unprivileged uid.
    var maxConnectionsPerUID: Int
    /// Largest message, without its NUL.
    var maxMessageBytes: Int
    /// Unread reply bytes past which a connection counts as congested.
    var maxPendingOutputBytes: Int
    /// How long (ns) a connection may stay congested, or take to read a closing error, before it is closed.
    var slowClientTimeout: Int64
    /// How long (ns) a connection may sit without a call before it is closed; 0: never.
    var idleTimeout: Int64
    /// Buffered input, unsent output and messages in flight, summed over all connections.
    var memoryBudget: Int = 16 << 20
    /// Of `maxConnections`, how many only `privilegedUIDs` may use.
    var reservedConnections: Int = 0
    /// Peers exempt from the per-uid cap and allowed into the reserve (root, the server's own uid).
    var privilegedUIDs: Set<UInt32> = [0]
    /// Peers that may call nothing: their messages are capped at `restrictedMessageBytes`.
    var isRestricted: (@Sendable (VarlinkPeer) -> Bool)?
    /// Largest message from a restricted peer.
    var restrictedMessageBytes: Int = 4096
    /// What a refused peer can do about a cap: the end of the `hint` of `TooManyConnections`.
    var connectionCapAdvice = VarlinkServerConfiguration.defaultConnectionCapAdvice
    /// Where a line goes when a cap or the budget bites (rate-limited by the loop).
    var log: (@Sendable (String) -> Void)?
}

/// The server's I/O side: one thread runs an epoll loop over the listening socket, every connection and an
/// eventfd. Other threads talk to it only through `submit`, which queues a command and writes the eventfd.
///
/// Fields under "I/O thread only" are touched by the loop thread alone; that is why the class can be
/// `@unchecked Sendable`. The epoll fd and the eventfd live as long as this object, so a late `submit` from a
/// handler never writes to a closed (and possibly reused) descriptor.
final class EventLoop: @unchecked Sendable {
    /// What other threads ask of the loop through ``submit(_:)``.
    enum Command {
        /// Append bytes to the connection's output buffer.
        case output(ConnectionHandle, [UInt8])
        /// Append a reply queued on many connections at once (``VarlinkReplier/reply(shared:on:)``):
        /// held once, so it counts against the connection's pending output (a slow reader is still
        /// found) but not against the memory budget, which charges what a connection alone holds.
        /// It is written in the loop's streaming turns, after the replies to calls (see ``run(deliver:)``).
        case sharedOutput(ConnectionHandle, [UInt8])
        /// Fire the signal once every shared reply queued before this command has been offered to
        /// its socket: written, or waiting for a client whose socket is full (or closed).
        case handOff(OneShotSignal)
        /// The current call is over: read the next one.
        case finish(ConnectionHandle)
        /// Send these bytes (if possible), then close.
        case fail(ConnectionHandle, [UInt8])
        /// Close now, dropping unsent output.
        case close(ConnectionHandle)
        /// The connection's handler streams: its kernel send buffer grows to ``streamingSendBufferBytes``.
        case widenSendBuffer(ConnectionHandle)
        /// The connection's kernel send buffer grows so that one reply of this many bytes goes out
        /// in one write (within ``fittedSendBufferBudget``).
        case fitSendBuffer(ConnectionHandle, Int)
        /// Leave the loop: close everything and fire `stopped`.
        case stop
    }

    /// Commands waiting for the loop, whether an eventfd wake is already on its way, and whether the
    /// loop stopped (then commands are refused).
    private struct Inbox {
        /// Commands not yet taken by the loop, in order.
        var commands: [Command] = []
        /// An eventfd write is on its way: later submits need not write again.
        var wakePending = false
        /// The loop ended: submits are refused.
        var stopped = false
    }

    /// epoll token of the listening socket; connection ids start at 2.
    private static let listenerToken: UInt64 = 0
    /// epoll token of the eventfd.
    private static let wakeToken: UInt64 = 1

    /// The epoll instance; lives as long as this object.
    private let epollFD: Int32
    /// The eventfd other threads write to wake the loop.
    private let wakeFD: Int32
    /// Commands from other threads.
    private let inbox = Lock(Inbox())
    /// The limits this loop enforces.
    let limits: LoopLimits
    /// Fires when the loop has shut down and closed every connection.
    let stopped = OneShotSignal()
    /// Why the loop ended on its own, if it did (read after `stopped` fired).
    let failure = Lock<VarlinkSystemError?>(nil)

    // I/O thread only.
    /// The listening socket, closed at shutdown.
    private var listenFD: Int32
    /// The socket file to remove at shutdown, if it is still ours (same inode).
    private let unlinkPath: String?
    /// Inode of the socket file when the loop started, so shutdown never unlinks a successor's socket.
    private var listenerInode: ino_t = 0
    /// Open connections by id.
    private var connections: [UInt64: Connection] = [:]
    /// Open connections per peer uid (absent: none).
    private var perUID: [UInt32: Int] = [:]
    /// Open connections with a widened send buffer (at most ``maxWidenedConnections``).
    private var widenedCount = 0
    /// `SO_SNDBUF` bytes asked for by ``Command/fitSendBuffer(_:_:)``, summed over open connections.
    private var fittedBytes = 0
    /// The id of the next accepted connection.
    private var nextID: UInt64 = 2
    /// The buffer every `recv` reads into before bytes are appended to a connection's input.
    private var scratch = [UInt8](repeating: 0, count: 65536)
    /// The earliest deadline (monotonic ns) a connection may have reached: slow reader, idle, closing.
    private var nextTimerScan: Int64 = .max
    /// Set while accepting is paused after running out of descriptors.
    private var acceptPausedUntil: Int64?
    /// Where complete messages go, to `VarlinkServer.run()`.
    private var deliver: HandOffStream<IncomingMessage>.Continuation?
    /// Connections to service before the next `epoll_wait` (output to write, input to dispatch).
    private var dirty: [Connection] = []
    /// Shared replies to write (connections whose output holds one, in the order they were queued)
    /// and the hand-off signals between them: written in turns of at most ``streamingTurnBytes``,
    /// each after the loop has looked for new calls and written the replies to them.
    private var streaming: [StreamEntry] = []
    /// Index in `streaming` of the next entry.
    private var streamingHead = 0
    /// Sum of every connection's `charge`.
    private var charged = 0
    /// The highest `charged` since memory was last handed back to the system.
    private var chargedPeak = 0
    /// When each kind of log line was last written, and how many were held back since.
    private var lastLog: [String: (at: Int64, suppressed: Int)] = [:]

    /// An entry of the streaming queue.
    private enum StreamEntry {
        /// A connection with shared output to write.
        case connection(Connection)
        /// Fired once every entry before it was taken.
        case handOff(OneShotSignal)
    }

    /// The most bytes of shared replies one streaming turn writes before the loop looks for calls
    /// again (and writes their replies): a `GetStatus` waits behind at most this much of a
    /// fan-out round (1 000 watchers of a ~20 KB state: 20 MB), not the whole round.
    static let streamingTurnBytes = 64 << 10

    /// One client's socket and buffers; the I/O thread's alone.
    private final class Connection {
        /// What other threads know of the connection.
        let handle: ConnectionHandle
        /// The connected socket (non-blocking).
        let fd: Int32
        /// Bytes received; those before `inputStart` are already handed on.
        var input: [UInt8] = []
        /// Offset in `input` of the first byte not handed on.
        var inputStart = 0
        /// Where the search for the next NUL resumes (bytes before it hold none).
        var scanFrom = 0
        var output = OutputQueue()
        /// A message was handed on and its call has not finished: the next one waits (replies stay in order).
        var callInFlight = false
        /// The peer shut down its sending side.
        var readClosed = false
        /// Close as soon as the output is written (after an error that ends the connection).
        var closeAfterFlush = false
        /// The epoll events currently asked for, so unchanged interest costs no `epoll_ctl`.
        var registeredEvents: UInt32 = 0
        /// When the last call arrived or finished (monotonic ns), for the idle timeout.
        var lastActivity: Int64
        /// Since when unread output has been over the soft limit.
        var congestedSince: Int64?
        /// Set when the connection is to close once its output is flushed; it closes anyway at this time.
        var closeDeadline: Int64?
        /// Already in the loop's `dirty` list.
        var isDirty = false
        /// Already in the loop's streaming queue.
        var isStreaming = false
        /// Largest message this peer may send (smaller for a peer refused every method).
        let maxMessageBytes: Int
        /// Bytes of the message being handled, until its call finishes.
        var inFlightBytes = 0
        /// What this connection counts against the memory budget (see `recharge`).
        var charge = 0
        /// Its send buffer was widened (``streamingSendBufferBytes``).
        var widened = false
        /// `SO_SNDBUF` asked for by ``Command/fitSendBuffer(_:_:)`` (0: the accept-time size).
        var fittedSendBuffer = 0

        /// A connection accepted at `now` with its message cap.
        init(handle: ConnectionHandle, fd: Int32, now: Int64, maxMessageBytes: Int) {
            self.handle = handle
            self.fd = fd
            self.lastActivity = now
            self.maxMessageBytes = maxMessageBytes
        }

        /// Received bytes not yet handed on.
        var unprocessedInput: Int { self.input.count - self.inputStart }
        var unsentOutput: Int { self.output.count }
    }

    /// Takes ownership of `listenFD` (already listening). `unlinkPath` is removed at shutdown when it still
    /// names the socket we bound.
    init(listenFD: Int32, unlinkPath: String?, limits: LoopLimits) throws(VarlinkSystemError) {
        self.limits = limits
        self.listenFD = listenFD
        self.unlinkPath = unlinkPath
        let epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epollFD >= 0 else { throw VarlinkSystemError(call: "epoll_create1", subject: "server", errno: errno) }
        let wakeFD = eventfd(0, Int32(EFD_CLOEXEC) | Int32(EFD_NONBLOCK))
        guard wakeFD >= 0 else {
            let code = errno
            close(epollFD)
            throw VarlinkSystemError(call: "eventfd", subject: "server", errno: code)
        }
        self.epollFD = epollFD
        self.wakeFD = wakeFD
        if let unlinkPath {
            var info = stat()
            if stat(unlinkPath, &info) == 0 { self.listenerInode = info.st_ino }
        }
        _ = Sys.setNonBlocking(listenFD)
        guard self.control(EPOLL_CTL_ADD, listenFD, events: EPOLLIN.rawValue, token: Self.listenerToken),
            self.control(EPOLL_CTL_ADD, wakeFD, events: EPOLLIN.rawValue, token: Self.wakeToken)
        else {
            throw VarlinkSystemError(call: "epoll_ctl", subject: "server", errno: errno)
        }
    }

    deinit {
        close(self.wakeFD)
        close(self.epollFD)
    }

    // MARK: Any thread

    /// Queues a command for the I/O thread and wakes it (one eventfd write per batch). Returns false once the
    /// loop has stopped.
    @discardableResult
    func submit(_ command: Command) -> Bool {
        let needsWake = self.inbox.withLock { inbox -> Bool? in
            guard !inbox.stopped else { return nil }
            inbox.commands.append(command)
            defer { inbox.wakePending = true }
            return !inbox.wakePending
        }
        guard let needsWake else { return false }
        if needsWake {
            var one: UInt64 = 1
            _ = write(self.wakeFD, &one, 8)
        }
        return true
    }

    /// Queues several commands with one wake-up of the I/O thread (a reply fanned out to many
    /// connections). Returns false once the loop has stopped.
    @discardableResult
    func submit(contentsOf commands: [Command]) -> Bool {
        guard !commands.isEmpty else { return true }
        let needsWake = self.inbox.withLock { inbox -> Bool? in
            guard !inbox.stopped else { return nil }
            inbox.commands.append(contentsOf: commands)
            defer { inbox.wakePending = true }
            return !inbox.wakePending
        }
        guard let needsWake else { return false }
        if needsWake {
            var one: UInt64 = 1
            _ = write(self.wakeFD, &one, 8)
        }
        return true
    }

    /// Asks the loop to stop; the server's `run()` waits for ``stopped``.
    func requestStop() {
        self.submit(.stop)
    }

    // MARK: I/O thread

    /// Runs the loop until `.stop`; then closes every connection and the listening socket and fires `stopped`.
    func run(deliver: HandOffStream<IncomingMessage>.Continuation) {
        self.deliver = deliver
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        var running = true
        while running {
            // While shared replies wait to be written, only look (a streaming turn follows).
            let timeout = self.streamingHead < self.streaming.count ? 0 : self.timeoutMilliseconds()
            let count = events.withUnsafeMutableBufferPointer { buffer in
                retryingInterrupted { epoll_wait(self.epollFD, buffer.baseAddress, Int32(buffer.count), timeout) }
            }
            if count < 0 {
                let error = VarlinkSystemError(call: "epoll_wait", subject: "server", errno: errno)
                self.failure.withLock { $0 = error }
                break
            }
            for index in 0..<Int(count) {
                let event = events[index]
                switch event.data.u64 {
                case Self.listenerToken:
                    self.acceptConnections()
                case Self.wakeToken:
                    var value: UInt64 = 0
                    _ = read(self.wakeFD, &value, 8)
                    if !self.drainInbox() { running = false }
                default:
                    guard let connection = self.connections[event.data.u64] else { continue }
                    self.handleEvents(event.events, on: connection)
                }
            }
            if running, !self.drainInbox() { running = false }
            // Replies to calls first, then one turn of shared replies (watchers' rounds).
            self.flushDirty()
            if running {
                self.writeStreamingTurn()
                self.flushDirty()
                self.runTimersIfDue()
            }
        }
        self.shutdown()
    }

    /// Refuses further commands, closes every connection and the listening socket, removes the socket
    /// file if it is still ours, ends the message stream and fires ``stopped``.
    private func shutdown() {
        self.inbox.withLock { inbox in
            inbox.stopped = true
            inbox.commands = []
        }
        for connection in Array(self.connections.values) { self.closeConnection(connection) }
        for case .handOff(let signal) in self.streaming[self.streamingHead...] { signal.fire() }
        self.streaming = []
        self.streamingHead = 0
        close(self.listenFD)
        if let path = self.unlinkPath {
            var info = stat()
            if stat(path, &info) == 0, info.st_ino == self.listenerInode { unlink(path) }
        }
        self.deliver?.finish()
        self.deliver = nil
        self.stopped.fire()
    }

    /// `epoll_ctl` with `token` as the event's data; false when it failed.
    private func control(_ operation: Int32, _ fd: Int32, events: UInt32, token: UInt64) -> Bool {
        var event = epoll_event()
        event.events = events
        event.data.u64 = token
        return epoll_ctl(self.epollFD, operation, fd, &event) == 0
    }

    /// The `epoll_wait` timeout up to the next deadline, rounded up; -1 (no timeout) when none is pending.
    private func timeoutMilliseconds() -> Int32 {
        var deadline = self.nextTimerScan
        if let paused = self.acceptPausedUntil { deadline = min(deadline, paused) }
        guard deadline != .max else { return -1 }
        let remaining = deadline - monotonicNanoseconds()
        if remaining <= 0 { return 0 }
        return Int32(clamping: (remaining + 999_999) / 1_000_000)
    }

    /// Makes the loop wake by `deadline` (monotonic ns) to check the timers.
    private func schedule(_ deadline: Int64) {
        if deadline < self.nextTimerScan { self.nextTimerScan = deadline }
    }

    /// Returns false on `.stop`.
    private func drainInbox() -> Bool {
        let commands = self.inbox.withLock { inbox -> [Command] in
            inbox.wakePending = false
            defer { inbox.commands = [] }
            return inbox.commands
        }
        for command in commands {
            switch command {
            case .stop:
                return false
            case .output(let handle, let bytes):
                guard let connection = self.connections[handle.id] else { continue }
                connection.output.append(bytes)
                guard self.recharge(connection) else { continue }
                self.markDirty(connection)
            case .sharedOutput(let handle, let bytes):
                guard let connection = self.connections[handle.id] else { continue }
                connection.output.append(bytes, shared: true)
                guard self.recharge(connection) else { continue }
                self.queueStreaming(connection)
            case .handOff(let signal):
                if self.streamingHead < self.streaming.count {
                    self.streaming.append(.handOff(signal))
                } else {
                    signal.fire()
                }
            case .finish(let handle):
                guard let connection = self.connections[handle.id] else { continue }
                connection.callInFlight = false
                connection.inFlightBytes = 0
                _ = self.recharge(connection)
                connection.lastActivity = monotonicNanoseconds()
                self.markDirty(connection)
                if self.limits.idleTimeout > 0 { self.schedule(connection.lastActivity + self.limits.idleTimeout) }
            case .close(let handle):
                guard let connection = self.connections[handle.id] else { continue }
                self.closeConnection(connection)
            case .widenSendBuffer(let handle):
                // A few at a time: what the kernel holds for streams that are not read stays
                // bounded (beyond them a stream still works, in small writes).
                guard let connection = self.connections[handle.id], !connection.widened,
                    self.widenedCount < Self.maxWidenedConnections
                else { continue }
                var sendBuffer: Int32 = Self.streamingSendBufferBytes
                if setsockopt(connection.fd, SOL_SOCKET, SO_SNDBUF, &sendBuffer, socklen_t(MemoryLayout<Int32>.size)) == 0 {
                    connection.widened = true
                    self.widenedCount += 1
                }
            case .fitSendBuffer(let handle, let replyBytes):
                guard let connection = self.connections[handle.id], !connection.widened else { continue }
                self.fitSendBuffer(connection, replyBytes: replyBytes)
            case .fail(let handle, let bytes):
                guard let connection = self.connections[handle.id] else { continue }
                connection.output.append(bytes)
                self.closeAfterFlush(connection)
            }
        }
        return true
    }

    /// Grows the connection's kernel send buffer so that a reply of `replyBytes` goes out in one
    /// write: Linux doubles `SO_SNDBUF`, and a Unix stream socket takes a write in pieces of up to
    /// half the buffer while less than the buffer is in use, so half the reply (and some room for
    /// the pieces' overhead) is asked for; the kernel then holds about one reply for a client that
    /// does not read. Within ``fittedSendBufferBudget`` for all connections together; beyond it a
    /// reply still goes out, in several writes.
    private func fitSendBuffer(_ connection: Connection, replyBytes: Int) {
        let wanted = min(Self.maxFittedSendBuffer, (replyBytes / 2 + 2048 + 4095) / 4096 * 4096)
        guard wanted > Int(Self.sendBufferBytes), wanted > connection.fittedSendBuffer,
            self.fittedBytes - connection.fittedSendBuffer + wanted <= Self.fittedSendBufferBudget
        else { return }
        var size = Int32(wanted)
        guard setsockopt(connection.fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size)) == 0 else { return }
        self.fittedBytes += wanted - connection.fittedSendBuffer
        connection.fittedSendBuffer = wanted
    }

    /// Closes once the output is written, or after `slowClientTimeout` if the client does not read it.
    private func closeAfterFlush(_ connection: Connection) {
        guard !connection.closeAfterFlush else { return }
        connection.closeAfterFlush = true
        let deadline = monotonicNanoseconds() + self.limits.slowClientTimeout
        connection.closeDeadline = deadline
        self.schedule(deadline)
        self.markDirty(connection)
    }

    /// Queues the connection's shared output for a streaming turn, unless it is queued already or
    /// waits for its socket to take more (`EPOLLOUT` brings it back: `whenWritable`).
    private func queueStreaming(_ connection: Connection, whenWritable: Bool = false) {
        guard !connection.isStreaming, whenWritable || connection.registeredEvents & EPOLLOUT.rawValue == 0 else { return }
        connection.isStreaming = true
        self.streaming.append(.connection(connection))
    }

    /// One streaming turn: writes the queued connections' output, in order, until
    /// ``streamingTurnBytes`` went out or the queue is empty; fires the hand-off signals passed.
    /// A connection whose socket is full waits for `EPOLLOUT`.
    private func writeStreamingTurn() {
        var budget = Self.streamingTurnBytes
        while budget > 0, self.streamingHead < self.streaming.count {
            let entry = self.streaming[self.streamingHead]
            self.streaming[self.streamingHead] = .handOff(Self.spentSignal)
            self.streamingHead += 1
            switch entry {
            case .handOff(let signal):
                signal.fire()
            case .connection(let connection):
                connection.isStreaming = false
                guard self.connections[connection.handle.id] === connection, connection.unsentOutput > 0 else { continue }
                let before = connection.unsentOutput
                guard self.flush(connection) else { continue }
                budget -= before - connection.unsentOutput
                // Written out: its next call (if any) may be read, or it closes. (A streaming call
                // still runs: nothing to do, which spares a thousand watchers' turns a round.)
                if connection.unsentOutput == 0 && (!connection.callInFlight || connection.closeAfterFlush) { self.markDirty(connection) }
            }
        }
        if self.streamingHead == self.streaming.count {
            self.streaming.removeAll(keepingCapacity: self.streaming.capacity <= 4096)
            self.streamingHead = 0
        } else if self.streamingHead >= 1024, self.streamingHead * 2 >= self.streaming.count {
            self.streaming.removeFirst(self.streamingHead)
            self.streamingHead = 0
        }
    }

    /// Put in the place of a streaming entry already taken (it holds no connection).
    private static let spentSignal = OneShotSignal()

    /// Queues the connection for ``flushDirty()`` once per round.
    private func markDirty(_ connection: Connection) {
        guard !connection.isDirty else { return }
        connection.isDirty = true
        self.dirty.append(connection)
    }

    /// Writes what replies queued, dispatches the next buffered call, and updates epoll interest.
    private func flushDirty() {
        while !self.dirty.isEmpty {
            let batch = self.dirty
            self.dirty = []
            for connection in batch {
                connection.isDirty = false
                guard self.connections[connection.handle.id] === connection else { continue }
                self.service(connection)
            }
        }
    }

    /// One connection's turn: write its output, close it when it is done for, else hand on its next message.
    private func service(_ connection: Connection) {
        if connection.unsentOutput > 0 {
            guard self.flush(connection) else { return }
        }
        if connection.closeAfterFlush {
            if connection.unsentOutput == 0 { self.closeConnection(connection) } else { self.updateInterest(connection) }
            return
        }
        guard self.processInput(connection) else { return }
        if connection.readClosed && !connection.callInFlight && connection.unsentOutput == 0 {
            // The peer sent its last byte and got every reply: nothing more can happen here.
            self.closeConnection(connection)
            return
        }
        self.updateInterest(connection)
    }

    /// How much unprocessed input a connection may buffer now: a whole message while it waits for
    /// one; while a call runs or its replies sit unread, one read's worth (backpressure: a client
    /// that does not read its replies is not read either).
    private func inputAllowance(_ connection: Connection) -> Int {
        if connection.callInFlight || connection.unsentOutput > 0 { return min(self.scratch.count, connection.maxMessageBytes) }
        return connection.maxMessageBytes
    }

    /// Asks epoll for input only while the connection may buffer more, and for output only while some is queued.
    private func updateInterest(_ connection: Connection) {
        var events: UInt32 = 0
        if !connection.readClosed && !connection.closeAfterFlush
            && connection.unprocessedInput <= self.inputAllowance(connection)
        {
            events |= EPOLLIN.rawValue | EPOLLRDHUP.rawValue
        }
        // A connection in the streaming queue is written in its turn, not when epoll says so.
        if connection.unsentOutput > 0 && !connection.isStreaming { events |= EPOLLOUT.rawValue }
        if events != connection.registeredEvents {
            connection.registeredEvents = events
            _ = self.control(EPOLL_CTL_MOD, connection.fd, events: events, token: connection.handle.id)
        }
    }

    /// Accepts every waiting connection: refuses (with `TooManyConnections` and a hint of who holds
    /// the connections) those over the total, reserved or per-uid caps, pauses 100 ms when out of
    /// descriptors, and registers the rest with a small send buffer.
    private func acceptConnections() {
        if self.acceptPausedUntil != nil { return }
        while true {
            let fd = retryingInterrupted { accept4(self.listenFD, nil, nil, Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)) }
            if fd < 0 {
                switch errno {
                case ECONNABORTED: continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors: stop polling the listener for a moment instead of spinning on it.
                    self.log("descriptors", "cannot accept connections: \(VarlinkSystemError.message(for: errno)); pausing 100 ms")
                    let until = monotonicNanoseconds() + 100_000_000
                    self.acceptPausedUntil = until
                    _ = self.control(EPOLL_CTL_MOD, self.listenFD, events: 0, token: Self.listenerToken)
                    return
                default: return
                }
            }
            guard let peer = Sys.peer(of: fd) else {
                close(fd)
                continue
            }
            let uidCount = self.perUID[peer.uid, default: 0]
            let privileged = self.limits.privilegedUIDs.contains(peer.uid)
            let open = self.connections.count
            let refusal: String?
            var holders: String { self.connectionHolders(open: open) }
            if open >= self.limits.maxConnections {
                refusal = "the server's limit of \(self.limits.maxConnections) connections"
            } else if !privileged && open >= self.limits.maxConnections - self.limits.reservedConnections {
                refusal = "the server's limit of \(self.limits.maxConnections - self.limits.reservedConnections) connections (the rest are kept for root and the service's own user)"
            } else if !privileged && uidCount >= self.limits.maxConnectionsPerUID {
                refusal = "the limit of \(self.limits.maxConnectionsPerUID) connections for uid \(peer.uid)"
            } else {
                refusal = nil
            }
            if let which = refusal {
                self.log("cap", "refused a connection from uid \(peer.uid) (pid \(peer.pid)): \(which); \(holders)")
                let hint = "\(holders); \(self.limits.connectionCapAdvice)"
                var bytes = VarlinkWire.error(VarlinkError(
                    VarlinkError.ProtocolError.tooManyConnections,
                    ["reason": .string("too many connections: \(which)"), "hint": .string(hint)]))
                _ = bytes.withUnsafeMutableBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                close(fd)
                continue
            }
            let id = self.nextID
            self.nextID += 1
            let restricted = self.limits.isRestricted?(peer) ?? false
            // A small send buffer: a client that does not read its replies blocks our writes after
            // a few KiB (the kernel doubles it, to at least ~4.5 KiB), and then its next call waits
            // (backpressure): a flood of calls from a client that never reads costs a few replies.
            var sendBuffer: Int32 = Self.sendBufferBytes
            _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sendBuffer, socklen_t(MemoryLayout<Int32>.size))
            let connection = Connection(
                handle: ConnectionHandle(id: id, peer: peer), fd: fd, now: monotonicNanoseconds(),
                maxMessageBytes: restricted ? min(self.limits.restrictedMessageBytes, self.limits.maxMessageBytes) : self.limits.maxMessageBytes)
            connection.registeredEvents = EPOLLIN.rawValue | EPOLLRDHUP.rawValue
            guard self.control(EPOLL_CTL_ADD, fd, events: connection.registeredEvents, token: id) else {
                close(fd)
                continue
            }
            self.connections[id] = connection
            self.perUID[peer.uid] = uidCount + 1
            if self.limits.idleTimeout > 0 { self.schedule(connection.lastActivity + self.limits.idleTimeout) }
        }
    }

    /// Reacts to one epoll event: closes on error or hang-up, writes on `EPOLLOUT`, reads on input.
    private func handleEvents(_ events: UInt32, on connection: Connection) {
        if events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 {
            // Both directions are gone: no reply can be delivered any more.
            self.closeConnection(connection)
            return
        }
        if events & EPOLLOUT.rawValue != 0 {
            if connection.output.sharedCount == connection.unsentOutput {
                // Only shared replies: written in a streaming turn, after the replies to calls.
                self.queueStreaming(connection, whenWritable: true)
                self.updateInterest(connection)
            } else {
                guard self.flush(connection) else { return }
                if connection.unsentOutput == 0 { self.markDirty(connection) }
            }
        }
        if events & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue) != 0 {
            guard self.readAvailable(connection) else { return }
            self.markDirty(connection)
        }
    }

    /// Reads until the socket is drained, the peer half-closed, or the input cap is reached.
    /// Returns false when the connection was closed.
    private func readAvailable(_ connection: Connection) -> Bool {
        var rounds = 0
        let allowance = self.inputAllowance(connection)
        while rounds < 16 && connection.unprocessedInput <= allowance {
            rounds += 1
            let n = self.scratch.withUnsafeMutableBytes { raw in retryingInterrupted { recv(connection.fd, raw.baseAddress, raw.count, 0) } }
            if n > 0 {
                if connection.inputStart > 0 && connection.inputStart == connection.input.count {
                    connection.input.removeAll(keepingCapacity: connection.input.capacity <= Self.keptCapacity)
                    connection.inputStart = 0
                    connection.scanFrom = 0
                }
                connection.input.append(contentsOf: self.scratch[0..<n])
                guard self.recharge(connection) else { return false }
                continue
            }
            if n == 0 {
                connection.readClosed = true
                return true
            }
            switch errno {
            case EAGAIN, EWOULDBLOCK: return true
            default:
                self.closeConnection(connection)
                return false
            }
        }
        return true
    }

    /// Writes as much buffered output as the socket takes. Returns false when the connection was closed.
    private func flush(_ connection: Connection) -> Bool {
        var written = 0
        while true {
            let result = connection.output.withFirstChunk { chunk -> (sent: Int, wanted: Int) in
                (retryingInterrupted { send(connection.fd, chunk.baseAddress, chunk.count, Int32(MSG_NOSIGNAL)) }, chunk.count)
            }
            guard let (n, wanted) = result else { break }
            if n > 0 {
                connection.output.consume(n)
                written += n
                // A short write: the socket's buffer is full (the next send would say EAGAIN).
                if n < wanted { break }
                continue
            }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            self.closeConnection(connection)
            return false
        }
        if written > 0 { connection.handle.pendingOutput.subtract(written, ordering: .relaxed) }
        guard self.recharge(connection) else { return false }
        let pending = connection.handle.pendingOutput.load(ordering: .relaxed)
        if pending > self.limits.maxPendingOutputBytes {
            if connection.congestedSince == nil {
                let now = monotonicNanoseconds()
                connection.congestedSince = now
                self.schedule(now + self.limits.slowClientTimeout)
            }
        } else {
            connection.congestedSince = nil
        }
        self.updateInterest(connection)
        return true
    }

    /// Hands the next complete message to the handler side when no call is in flight.
    /// Returns false when the connection was closed.
    private func processInput(_ connection: Connection) -> Bool {
        // Backpressure: the next call waits until the client has read the replies to the last ones.
        guard !connection.callInFlight, connection.unsentOutput == 0 else { return true }
        let end = connection.input.count
        var nul: Int?
        if connection.scanFrom < end {
            let from = connection.scanFrom
            nul = connection.input.withUnsafeBytes { raw -> Int? in
                guard let found = memchr(raw.baseAddress! + from, 0, end - from) else { return nil }
                return raw.baseAddress!.distance(to: UnsafeRawPointer(found))
            }
        }
        guard let nul else {
            connection.scanFrom = end
            if connection.unprocessedInput > connection.maxMessageBytes {
                self.failTooLarge(connection)
                return false
            }
            return true
        }
        if nul - connection.inputStart > connection.maxMessageBytes {
            self.failTooLarge(connection)
            return false
        }
        let message = Array(connection.input[connection.inputStart..<nul])
        connection.inputStart = nul + 1
        connection.scanFrom = connection.inputStart
        if connection.inputStart >= 1 << 16 && connection.inputStart * 2 >= connection.input.count {
            connection.input.removeSubrange(0..<connection.inputStart)
            connection.inputStart = 0
            connection.scanFrom = 0
        }
        connection.callInFlight = true
        connection.inFlightBytes = message.count
        connection.lastActivity = monotonicNanoseconds()
        guard self.recharge(connection) else { return false }
        self.deliver?.yield(IncomingMessage(connection: connection.handle, bytes: message))
        return true
    }

    /// Refuses a message over the connection's cap: `MessageTooLarge`, or `PermissionDenied` for a peer
    /// that may call nothing (its cap is small, so it never makes the server parse a big payload).
    private func failTooLarge(_ connection: Connection) {
        let restricted = connection.maxMessageBytes < self.limits.maxMessageBytes
        let peer = connection.handle.peer
        self.log("message", "dropped a connection from uid \(peer.uid) (pid \(peer.pid)): a message over \(connection.maxMessageBytes) bytes\(restricted ? " from a peer allowed no method" : "")")
        if restricted {
            self.failConnection(connection, VarlinkError("org.varlink.service.PermissionDenied"))
        } else {
            self.failConnection(connection, VarlinkError(VarlinkError.ProtocolError.messageTooLarge, [
                "reason": .string("message exceeds the limit of \(connection.maxMessageBytes) bytes"),
            ]))
        }
    }

    /// `SO_SNDBUF` of accepted connections.
    private static let sendBufferBytes: Int32 = 2 << 10

    /// `SO_SNDBUF` of a connection whose handler streams a long run of replies to a client that
    /// reads them as they come (``VarlinkReplier/widenSendBuffer()``; the kernel doubles it).
    private static let streamingSendBufferBytes: Int32 = 64 << 10

    /// The most ``Command/fitSendBuffer(_:_:)`` asks for one connection (the kernel doubles it).
    static let maxFittedSendBuffer = 64 << 10

    /// What ``Command/fitSendBuffer(_:_:)`` may ask for all connections together: 16 MiB (the
    /// kernel holds up to twice that for clients that read nothing), e.g. a thousand watchers of a
    /// ~20 KB state.
    static let fittedSendBufferBudget = 16 << 20

    /// How many connections may have a widened send buffer at a time: 16 of 128 KiB, 2 MiB in all
    /// (`MemoryMax=96M` in sugard's unit counts the kernel's socket buffers too).
    static let maxWidenedConnections = 16

    /// Buffers keep at most this capacity once emptied, so idle connections hold little memory.
    private static let keptCapacity = 4096

    /// Updates the connection's share of the memory budget; when all connections together are over the
    /// budget, closes the one holding the most (if it is over its fair share, the budget divided by the
    /// open connections). Returns false when `connection` itself was closed.
    private func recharge(_ connection: Connection) -> Bool {
        guard self.connections[connection.handle.id] === connection else { return false }
        let charge = connection.unprocessedInput + connection.unsentOutput - connection.output.sharedCount + connection.inFlightBytes
        self.charged += charge - connection.charge
        connection.charge = charge
        if self.charged > self.chargedPeak { self.chargedPeak = self.charged }
        guard self.charged > self.limits.memoryBudget else { return true }
        let share = self.limits.memoryBudget / max(1, self.connections.count)
        var heaviest = connection
        for candidate in self.connections.values where candidate.charge > heaviest.charge { heaviest = candidate }
        guard heaviest.charge > share else { return true }
        let peer = heaviest.handle.peer
        self.log(
            "budget",
            "memory budget of \(self.limits.memoryBudget >> 20) MiB for all connections reached: dropped the connection of uid \(peer.uid) (pid \(peer.pid)) holding \(heaviest.charge) bytes (fair share \(share))")
        self.closeConnection(heaviest)
        return heaviest !== connection
    }

    /// Writes a log line for `kind` at most once a second, counting the ones held back.
    /// Who holds the open connections, for a refusal: the uids holding the most (at most three).
    private func connectionHolders(open: Int) -> String {
        let top = self.perUID.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }.prefix(3)
        let named = top.map { "uid \($0.key) holds \($0.value)" }.joined(separator: ", ")
        return "\(open) of \(self.limits.maxConnections) connections are open" + (named.isEmpty ? "" : " (\(named))")
    }

    /// Writes a log line for `kind` at most once a second, counting the ones held back.
    private func log(_ kind: String, _ line: String) {
        guard let log = self.limits.log else { return }
        let now = monotonicNanoseconds()
        if let last = self.lastLog[kind], now - last.at < 1_000_000_000 {
            self.lastLog[kind] = (last.at, last.suppressed + 1)
            return
        }
        let suppressed = self.lastLog[kind]?.suppressed ?? 0
        self.lastLog[kind] = (now, 0)
        log(suppressed > 0 ? "\(line) (and \(suppressed) more like it)" : line)
    }

    /// Sends `error` if the socket takes it right away, then closes.
    private func failConnection(_ connection: Connection, _ error: VarlinkError) {
        let bytes = VarlinkWire.error(error)
        connection.output.append(bytes)
        connection.handle.pendingOutput.add(bytes.count, ordering: .relaxed)
        connection.closeAfterFlush = true
        _ = self.flush(connection)
        if self.connections[connection.handle.id] === connection {
            self.closeConnection(connection)
        }
    }

    /// Removes the connection from epoll and the tables, closes its socket, releases its memory
    /// charge and fires its `closed` signal; a no-op for one already closed.
    private func closeConnection(_ connection: Connection) {
        guard self.connections.removeValue(forKey: connection.handle.id) != nil else { return }
        _ = epoll_ctl(self.epollFD, EPOLL_CTL_DEL, connection.fd, nil)
        close(connection.fd)
        let uid = connection.handle.peer.uid
        if let count = self.perUID[uid], count > 1 { self.perUID[uid] = count - 1 } else { self.perUID[uid] = nil }
        if connection.widened { self.widenedCount -= 1 }
        self.fittedBytes -= connection.fittedSendBuffer
        connection.fittedSendBuffer = 0
        self.charged -= connection.charge
        connection.charge = 0
        connection.input = []
        connection.output.removeAll()
        self.returnMemoryIfIdle()
        connection.handle.closed.fire()
    }

    /// Once the buffers shrank well below their peak (a flood is over), hands freed heap back to the
    /// system, so a burst does not leave the daemon's RSS high for good.
    private func returnMemoryIfIdle() {
        guard self.chargedPeak >= 4 << 20, self.charged <= self.chargedPeak / 8 else { return }
        self.chargedPeak = self.charged
        _ = malloc_trim(0)
    }

    /// Ends a paused accept, and closes connections past a deadline: a closing one whose error was not
    /// read, a slow reader, an idle one. Computes the next deadline.
    private func runTimersIfDue() {
        let now = monotonicNanoseconds()
        if let paused = self.acceptPausedUntil, paused <= now {
            self.acceptPausedUntil = nil
            _ = self.control(EPOLL_CTL_MOD, self.listenFD, events: EPOLLIN.rawValue, token: Self.listenerToken)
        }
        guard self.nextTimerScan <= now else { return }
        var next = Int64.max
        for connection in Array(self.connections.values) {
            if let deadline = connection.closeDeadline {
                if deadline <= now {
                    self.closeConnection(connection)
                    continue
                }
                next = min(next, deadline)
            }
            if let since = connection.congestedSince {
                let deadline = since + self.limits.slowClientTimeout
                if deadline <= now {
                    // The client has not read its replies for too long: drop it rather than buffer forever.
                    self.closeConnection(connection)
                    continue
                }
                next = min(next, deadline)
            }
            if self.limits.idleTimeout > 0 && !connection.callInFlight {
                let deadline = connection.lastActivity + self.limits.idleTimeout
                if deadline <= now {
                    self.closeConnection(connection)
                    continue
                }
                next = min(next, deadline)
            }
        }
        self.nextTimerScan = next
    }
}
