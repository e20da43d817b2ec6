import Glibc
public import JSON
import Locking
import SystemIO

/// Why a client call failed.
public enum VarlinkClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Nobody listens at the path (`ENOENT`, `ECONNREFUSED`, ...): the service is not running.
    case cannotConnect(path: String, errno: Int32)
    /// The socket exists but this user may not open it (`EACCES`, `EPERM`).
    case permissionDenied(path: String)
    /// The service answered with an error.
    case remote(VarlinkError)
    /// The connection closed before the reply arrived.
    case disconnected
    /// The service sent something that is not a Varlink reply.
    case protocolViolation(String)
    /// `close()` was called, or the waiting task was cancelled.
    case closed
    /// The service did not accept the connection, or sent nothing while a call waited for its reply, for
    /// this long (it is stopped, wedged or overloaded).
    case timedOut(Duration)

    /// One sentence for the command line (`cannot connect to /run/sugard/socket: No such file or directory`).
    public var description: String {
        switch self {
        case .cannotConnect(let path, let code):
            return "cannot connect to \(path): \(VarlinkSystemError.message(for: code))"
        case .permissionDenied(let path): return "permission denied opening \(path)"
        case .remote(let error): return "the service replied with error \(error)"
        case .disconnected: return "the service closed the connection before replying"
        case .protocolViolation(let reason): return "the service broke the Varlink protocol: \(reason)"
        case .closed: return "the connection was closed by this client"
        case .timedOut(let limit): return "the service did not answer within \(VarlinkClientError.seconds(limit))"
        }
    }
}

extension VarlinkClientError {
    /// "10 s", "1.5 s".
    public static func seconds(_ duration: Duration) -> String {
        let (whole, attoseconds) = duration.components
        let tenths = attoseconds / 100_000_000_000_000_000
        return tenths == 0 ? "\(whole) s" : "\(whole).\(tenths) s"
    }
}

/// A connection to a Varlink service over a Unix socket.
///
/// Calls may be issued from several tasks; they are pipelined and answered in order. A reader thread (one per
/// client) blocks in `recv` so no task of the cooperative pool ever does. Closing the client (or cancelling a
/// waiting call or stream) closes the connection, which is how Varlink ends a `more` call.
public final class VarlinkClient: Sendable {
    /// The socket and the pending calls, shared with the reader thread.
    private let core: ClientCore

    /// Connects to `socketPath`.
    ///
    /// - Parameter timeout: nil waits as long as it takes. Otherwise connecting gives up after this long (a
    ///   server that stopped accepting, its backlog full), and so does a call (not a `more` stream) when the
    ///   server sends nothing for this long while the call waits for its reply; both throw `.timedOut`.
    /// - Throws: `.cannotConnect` when nothing listens there, `.permissionDenied` when the socket may not be
    ///   opened by this user.
    public init(socketPath: String, maxMessageBytes: Int = 64 << 20, timeout: Duration? = nil) throws(VarlinkClientError) {
        let fd: Int32
        let connected: Result<Int32, VarlinkSystemError>
        if let timeout {
            connected = Sys.connectUnix(socketPath, within: Self.nanoseconds(timeout))
        } else {
            connected = Sys.connectUnix(socketPath)
        }
        switch connected {
        case .success(let connected): fd = connected
        case .failure(let error) where error.errno == ETIMEDOUT && timeout != nil:
            throw .timedOut(timeout!)
        case .failure(let error) where error.errno == EACCES || error.errno == EPERM:
            throw .permissionDenied(path: socketPath)
        case .failure(let error):
            throw .cannotConnect(path: socketPath, errno: error.errno)
        }
        let core = ClientCore(fd: fd, maxMessageBytes: maxMessageBytes, timeout: timeout)
        do {
            try startThread { core.readLoop() }
        } catch {
            Glibc.close(fd)
            throw .cannotConnect(path: socketPath, errno: error.errno)
        }
        self.core = core
    }

    deinit {
        self.core.shutdown()
    }

    /// A duration in whole nanoseconds.
    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// Calls `method` (fully qualified) and returns the reply parameters.
    public func call(_ method: String, _ parameters: JSONObject = [:]) async throws(VarlinkClientError) -> JSONObject {
        let bytes = VarlinkWire.call(method, parameters, more: false, oneway: false)
        let core = self.core
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<JSONObject, VarlinkClientError>, Never>) in
                core.send(bytes, expecting: .single(continuation))
            }
        } onCancel: {
            core.shutdown()
        }
        return try result.get()
    }

    /// Calls `method` with `more: true`. The stream yields each reply's parameters and finishes after the
    /// last one; it throws `VarlinkClientError`. Stopping the iteration closes the connection.
    public func callMore(_ method: String, _ parameters: JSONObject = [:]) -> AsyncThrowingStream<JSONObject, any Error> {
        let bytes = VarlinkWire.call(method, parameters, more: true, oneway: false)
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: JSONObject.self, throwing: (any Error).self)
        let core = self.core
        continuation.onTermination = { termination in
            if case .cancelled = termination { core.shutdown() }
        }
        core.send(bytes, expecting: .stream(continuation))
        return stream
    }

    /// ``callMore(_:_:)`` whose replies' parameters `decode` reads straight from the message bytes
    /// (on the client's reader thread, without a ``JSONValue`` tree), for a streaming reply of a
    /// known shape. The reader is at the parameters object; `decode` reads exactly that value. A
    /// reply it cannot decode ends the stream with ``VarlinkClientError/protocolViolation(_:)``
    /// naming its error; an error reply ends it with ``VarlinkClientError/remote(_:)`` as usual.
    public func callMore<T: Sendable>(
        _ method: String, _ parameters: JSONObject = [:], decoding decode: @escaping @Sendable (inout JSONReader) throws -> T
    ) -> AsyncThrowingStream<T, any Error> {
        let bytes = VarlinkWire.call(method, parameters, more: true, oneway: false)
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: T.self, throwing: (any Error).self)
        let core = self.core
        continuation.onTermination = { termination in
            if case .cancelled = termination { core.shutdown() }
        }
        let decoding = DecodingStream(
            decode: { reader in
                let value = try decode(&reader)
                return { continuation.yield(value) }
            },
            finish: { error in
                if let error { continuation.finish(throwing: error) } else { continuation.finish() }
            })
        core.send(bytes, expecting: .decoding(decoding))
        return stream
    }

    /// ``callMore(_:_:decoding:)`` with flow control: once `window` decoded replies wait to be
    /// taken from the sequence, the reader thread stops reading the socket until one is taken. A
    /// consumer slower than the server then holds at most `window` replies, and the server, which
    /// sees its output go unread, waits too (what a paged export needs to stay flat in memory).
    /// Other calls on this client wait behind the stream meanwhile: give it its own connection.
    /// Dropping the iterator or cancelling the task ends the stream and closes the connection.
    public func callMore<T: Sendable>(
        _ method: String, _ parameters: JSONObject = [:], window: Int,
        decoding decode: @escaping @Sendable (inout JSONReader) throws -> T
    ) -> VarlinkWindowedReplies<T> {
        let bytes = VarlinkWire.call(method, parameters, more: true, oneway: false)
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: T.self, throwing: (any Error).self)
        let core = self.core
        let gate = ReplyWindow(size: max(1, window))
        core.register(gate)
        continuation.onTermination = { termination in
            gate.close()
            if case .cancelled = termination { core.shutdown() }
        }
        let decoding = DecodingStream(
            decode: { reader in
                let value = try decode(&reader)
                return {
                    gate.enter()
                    continuation.yield(value)
                }
            },
            finish: { error in
                if let error { continuation.finish(throwing: error) } else { continuation.finish() }
            })
        core.send(bytes, expecting: .decoding(decoding))
        return VarlinkWindowedReplies(stream: stream, gate: gate)
    }

    /// Calls `method` with `oneway: true`: the service sends no reply.
    public func callOneway(_ method: String, _ parameters: JSONObject = [:]) throws(VarlinkClientError) {
        try self.core.sendOneway(VarlinkWire.call(method, parameters, more: false, oneway: true))
    }

    /// Closes the connection; pending calls fail with `.closed`.
    public func close() {
        self.core.shutdown()
    }
}

/// The replies of ``VarlinkClient/callMore(_:_:window:decoding:)``: each one taken makes room for the next.
public struct VarlinkWindowedReplies<Element: Sendable>: AsyncSequence, Sendable {
    /// The decoded replies.
    let stream: AsyncThrowingStream<Element, any Error>
    /// The window the reader thread waits in.
    let gate: ReplyWindow

    /// An iterator whose end (or loss) closes the window, so the reader never waits for a consumer that left.
    public func makeAsyncIterator() -> Iterator {
        Iterator(base: self.stream.makeAsyncIterator(), holder: ReplyWindow.Holder(self.gate))
    }

    /// Takes replies one by one, each taken one freeing a place in the window.
    public struct Iterator: AsyncIteratorProtocol {
        /// The underlying stream's iterator.
        var base: AsyncThrowingStream<Element, any Error>.AsyncIterator
        /// Keeps the window open while the iterator lives.
        let holder: ReplyWindow.Holder

        /// The next reply; nil after the last one; throws ``VarlinkClientError`` when the stream failed.
        public mutating func next() async throws -> Element? {
            let value = try await self.base.next()
            if value != nil { self.holder.window.took() }
            return value
        }
    }
}

/// How many replies of a windowed stream are decoded and not yet taken; the client's reader thread
/// waits in ``enter()`` while the window is full. Closed (the reader never waits again) when the
/// consumer is gone or the connection shuts down.
final class ReplyWindow: Sendable {
    /// Decoded and not taken replies, and whether the window is closed.
    struct State {
        /// Replies decoded and not yet taken.
        var unread = 0
        /// The window never makes the reader wait again.
        var closed = false
    }

    /// Closes the window when the consumer's iterator goes away (the loop over it ended early).
    final class Holder: Sendable {
        let window: ReplyWindow
        init(_ window: ReplyWindow) { self.window = window }
        deinit { self.window.close() }
    }

    /// Unread count and closed flag.
    private let state = Lock(State())
    /// Wakes the reader thread when a reply is taken or the window closes.
    private let condition = Condition()
    /// How many replies may wait untaken.
    private let size: Int

    /// A window of `size` replies (at least 1).
    init(size: Int) {
        self.size = size
    }

    /// On the reader thread: waits for room, then counts one more unread reply.
    func enter() {
        self.state.wait(for: self.condition) { state in
            if state.closed { return true }
            guard state.unread < self.size else { return false }
            state.unread += 1
            return true
        }
    }

    /// The consumer took a reply.
    func took() {
        self.state.withLock { $0.unread -= 1 }
        self.condition.broadcast()
    }

    /// Stops all waiting for good and wakes a waiting reader.
    func close() {
        self.state.withLock { $0.closed = true }
        self.condition.broadcast()
    }
}

/// A `more` call whose replies are decoded from their bytes: `decode` reads one reply's parameters
/// and returns what hands the value on (called once the whole reply is read and is not an error).
private struct DecodingStream: Sendable {
    /// Reads one reply's parameters; the returned closure yields the value to the consumer.
    let decode: @Sendable (inout JSONReader) throws -> @Sendable () -> Void
    /// Ends the consumer's stream, with an error or normally (nil).
    let finish: @Sendable (VarlinkClientError?) -> Void
}

/// The client's shared state, owned jointly by the client object and its reader thread.
private final class ClientCore: Sendable {
    /// A call waiting for replies, in the order it was sent.
    enum Pending {
        /// A plain call: one reply resumes it.
        case single(CheckedContinuation<Result<JSONObject, VarlinkClientError>, Never>)
        /// A `more` call whose replies are parsed into trees.
        case stream(AsyncThrowingStream<JSONObject, any Error>.Continuation)
        /// A `more` call whose replies are decoded from their bytes.
        case decoding(DecodingStream)

        /// Ends the call with `error`.
        func fail(_ error: VarlinkClientError) {
            switch self {
            case .single(let continuation): continuation.resume(returning: .failure(error))
            case .stream(let continuation): continuation.finish(throwing: error)
            case .decoding(let stream): stream.finish(error)
            }
        }
    }

    struct State {
        /// Calls sent and not finished, oldest first (replies come in this order).
        var pending: [Pending] = []
        /// Set once the connection is over; later calls fail with it.
        var failure: VarlinkClientError?
        /// An error the server sent before any call (e.g. the connection limit), reported to the next call.
        var unsolicited: VarlinkError?
        /// `shutdown()` ran: the connection ends as `.closed`.
        var shutdownRequested = false
        /// Since when a call (not a stream) has waited with nothing received: the last reply, or the send
        /// when none was waiting. nil when no call waits.
        var singleWaitingSince: Int64?
    }

    /// The socket, guarded so that writers and the final close never race: -1 once closed.
    private let fd: Lock<Int32>
    /// The pending calls and how the connection ended.
    private let state = Lock(State())
    /// Largest reply accepted; a bigger one ends the connection with a protocol violation.
    private let maxMessageBytes: Int
    /// How long a plain call may wait with nothing received; nil: forever.
    private let timeout: Duration?

    /// Takes ownership of the connected socket `fd`.
    init(fd: Int32, maxMessageBytes: Int, timeout: Duration?) {
        self.fd = Lock(fd)
        self.maxMessageBytes = maxMessageBytes
        self.timeout = timeout
    }

    /// Writes a call and queues what waits for its replies; fails it at once when the connection is already over.
    func send(_ bytes: [UInt8], expecting pending: Pending) {
        self.fd.withLock { fd in
            let failure = self.state.withLock { state -> VarlinkClientError? in
                if let failure = state.failure { return failure }
                state.pending.append(pending)
                if case .single = pending, state.singleWaitingSince == nil { state.singleWaitingSince = monotonicNanoseconds() }
                return nil
            }
            if let failure {
                pending.fail(failure)
                return
            }
            // A failed write needs no handling here: the reader sees the connection end and fails the call.
            _ = Self.writeAll(fd, bytes)
        }
    }

    /// Writes a `oneway` call; throws how the connection ended when it is over or the write failed.
    func sendOneway(_ bytes: [UInt8]) throws(VarlinkClientError) {
        let ok = self.fd.withLock { fd -> Bool in
            if self.state.withLock({ $0.failure }) != nil { return false }
            return Self.writeAll(fd, bytes)
        }
        if !ok { throw self.state.withLock { $0.failure } ?? .disconnected }
    }

    /// Writes all of `bytes` (blocking); false when the socket is closed or a write failed.
    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        guard fd >= 0 else { return false }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { raw in
                retryingInterrupted { Glibc.send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL)) }
            }
            guard n > 0 else { return false }
            offset += n
        }
        return true
    }

    /// Windows of flow-controlled streams, opened for good when the connection shuts down (the
    /// reader thread may be waiting in one).
    private let windows = Lock<[ReplyWindow]>([])

    /// Tracks a windowed stream's window, so shutdown can open it; closes it at once after a shutdown.
    func register(_ window: ReplyWindow) {
        // Added first, checked after: shutdown sets its flag before it opens the windows, so either
        // it finds this one or this sees the flag.
        self.windows.withLock { $0.append(window) }
        if self.state.withLock({ $0.shutdownRequested }) { window.close() }
    }

    /// Wakes the reader thread; it fails pending calls with `.closed` and closes the socket.
    func shutdown() {
        let first = self.state.withLock { state -> Bool in
            defer { state.shutdownRequested = true }
            return !state.shutdownRequested
        }
        guard first else { return }
        let windows = self.windows.withLock { windows -> [ReplyWindow] in
            defer { windows = [] }
            return windows
        }
        for window in windows { window.close() }
        // shutdown(2), not close(2): the reader is blocked in recv on this fd and must see it end.
        self.fd.withLock { fd in
            if fd >= 0 { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    /// The reader thread: reads NUL-terminated replies and hands each to the oldest pending call, until
    /// the connection ends (EOF, shutdown, a malformed or oversized reply, or a call's timeout); then fails
    /// every pending call with the reason and closes the socket.
    func readLoop() {
        let fd = self.fd.withLock { $0 }
        var buffer: [UInt8] = []
        var start = 0
        var scanFrom = 0
        var chunk = [UInt8](repeating: 0, count: 65536)
        var ending: VarlinkClientError = .disconnected
        let limit = self.timeout.map { VarlinkClient.nanoseconds($0) }
        reading: while true {
            if let limit {
                // Wake up now and then to see whether a call has waited too long.
                var pollFD = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let ready = retryingInterrupted { poll(&pollFD, 1, Int32(clamping: min(250, max(1, limit / 1_000_000)))) }
                if ready == 0 {
                    let since = self.state.withLock { $0.singleWaitingSince }
                    if let since, monotonicNanoseconds() - since >= limit {
                        ending = .timedOut(self.timeout!)
                        break
                    }
                    continue
                }
            }
            let n = chunk.withUnsafeMutableBytes { raw in retryingInterrupted { recv(fd, raw.baseAddress, raw.count, 0) } }
            if n <= 0 { break }
            buffer.append(contentsOf: chunk[0..<n])
            while let nul = Self.nul(in: buffer, from: scanFrom) {
                let message = buffer[start..<nul]
                start = nul + 1
                scanFrom = start
                if let violation = self.deliver(message) {
                    ending = violation
                    break reading
                }
            }
            scanFrom = buffer.count
            if buffer.count - start > self.maxMessageBytes {
                ending = .protocolViolation("a reply exceeds \(self.maxMessageBytes) bytes")
                break
            }
            if start > 0 && start * 2 >= buffer.count {
                buffer.removeSubrange(0..<start)
                scanFrom -= start
                start = 0
            }
        }
        let pending = self.state.withLock { state -> [Pending] in
            if case .timedOut = ending {
                // Keep it: the reader gave up, nobody asked to close.
            } else if state.shutdownRequested {
                ending = .closed
            } else if let unsolicited = state.unsolicited, case .disconnected = ending {
                ending = .remote(unsolicited)
            }
            state.failure = ending
            defer { state.pending = [] }
            return state.pending
        }
        self.fd.withLock { fd in
            Glibc.close(fd)
            fd = -1
        }
        for call in pending { call.fail(ending) }
    }

    /// The index of the first NUL (a message's end) at or after `from`, nil when none has come yet.
    private static func nul(in buffer: [UInt8], from: Int) -> Int? {
        guard from < buffer.count else { return nil }
        return buffer.withUnsafeBytes { raw -> Int? in
            guard let found = memchr(raw.baseAddress! + from, 0, raw.count - from) else { return nil }
            return raw.baseAddress!.distance(to: UnsafeRawPointer(found))
        }
    }

    /// Hands one reply to the oldest pending call. Returns an error when the reply is malformed.
    private func deliver(_ message: ArraySlice<UInt8>) -> VarlinkClientError? {
        var decodeFailure: String?
        if case .decoding(let stream)? = self.state.withLock({ $0.pending.first }) {
            // Only this thread removes pending calls, so the head stays the head.
            switch Self.decode(message, stream) {
            case .decoded(let yield, let continues):
                let more = self.state.withLock { state -> Bool in
                    if !continues { state.pending.removeFirst() }
                    let singleWaits = state.pending.contains { if case .single = $0 { return true } else { return false } }
                    state.singleWaitingSince = singleWaits ? monotonicNanoseconds() : nil
                    return continues
                }
                yield()
                if !more { stream.finish(nil) }
                return nil
            case .failed(let reason):
                return .protocolViolation(reason)
            case .notDecoded(let failure):
                decodeFailure = failure  // an error reply (or one `decode` rejected): read it as a tree
            }
        }
        guard case .object(let reply)? = try? JSONValue(parsing: message) else {
            return .protocolViolation("a reply is not a JSON object")
        }
        var parameters = JSONObject()
        switch reply["parameters"] {
        case nil, .null?: break
        case .object(let given)?: parameters = given
        default: return .protocolViolation("reply parameters are not an object")
        }
        var remoteError: VarlinkError?
        switch reply["error"] {
        case nil, .null?: break
        case .string(let name)?: remoteError = VarlinkError(name, parameters)
        default: return .protocolViolation("a reply's error is not a string")
        }
        let continues = reply["continues"]?.boolValue ?? false
        let head = self.state.withLock { state -> Pending? in
            guard let head = state.pending.first else {
                if let remoteError { state.unsolicited = remoteError }
                return nil
            }
            if remoteError != nil || !continues { state.pending.removeFirst() }
            if case .single = head { if continues { state.pending.removeFirst() } }
            let singleWaits = state.pending.contains { if case .single = $0 { return true } else { return false } }
            state.singleWaitingSince = singleWaits ? monotonicNanoseconds() : nil
            return head
        }
        guard let head else {
            return remoteError == nil ? .protocolViolation("a reply arrived with no call pending") : nil
        }
        switch head {
        case .single(let continuation):
            if let remoteError {
                continuation.resume(returning: .failure(.remote(remoteError)))
            } else if continues {
                continuation.resume(returning: .failure(.protocolViolation("'continues' in the reply to a call without 'more'")))
            } else {
                continuation.resume(returning: .success(parameters))
            }
        case .stream(let continuation):
            if let remoteError {
                continuation.finish(throwing: VarlinkClientError.remote(remoteError))
            } else {
                continuation.yield(parameters)
                if !continues { continuation.finish() }
            }
        case .decoding(let stream):
            if let remoteError {
                stream.finish(.remote(remoteError))
            } else {
                let violation = VarlinkClientError.protocolViolation(decodeFailure ?? "a reply without parameters")
                stream.finish(violation)
                return violation
            }
        }
        return nil
    }

    /// What ``decode(_:_:)`` made of a reply.
    enum Decoded {
        /// Parameters decoded: call `yield` to hand on the value; `continues` as the reply said.
        case decoded(yield: @Sendable () -> Void, continues: Bool)
        /// Not a Varlink reply, or parameters `decode` rejected.
        case failed(String)
        /// An error reply, one without parameters, or one whose parameters `decode` rejected (why):
        /// read as a tree.
        case notDecoded(String?)
    }

    /// Reads a reply of a ``Pending/decoding(_:)`` call: its `continues` and its parameters through
    /// the stream's decoder, straight from the bytes.
    private static func decode(_ message: ArraySlice<UInt8>, _ stream: DecodingStream) -> Decoded {
        var reader = JSONReader(Array(message))
        var yield: (@Sendable () -> Void)?
        var continues = false
        do {
            try reader.beginObject()
            while let key = try reader.nextKey() {
                switch key {
                case "parameters":
                    guard yield == nil else { return .failed("a reply with two parameters") }
                    if try reader.readNull() { return .notDecoded(nil) }
                    do {
                        yield = try stream.decode(&reader)
                    } catch {
                        return .notDecoded("\(error)")  // an error reply's parameters, or a malformed reply
                    }
                case "continues":
                    if try !reader.readNull() { continues = try reader.readBool() }
                case "error":
                    return .notDecoded(nil)
                default:
                    _ = try reader.readValue()
                }
            }
            try reader.end()
        } catch {
            return .failed("a reply is not a JSON object (\(error))")
        }
        guard let yield else { return .notDecoded(nil) }
        return .decoded(yield: yield, continues: continues)
    }
}
