public import JSON
import Synchronization
import Locking

/// Sends the replies to one call. Safe to use from any task; replies are queued for the server's I/O thread,
/// which writes them without ever blocking on the client.
///
/// A call ends with exactly one final reply: `reply(_:continues: false)` or `fail(_:)`. Calls made with
/// `more: true` may send any number of `continues: true` replies before it. For `oneway` calls every reply is
/// dropped.
public final class VarlinkReplier: Sendable {
    /// The connection the call arrived on; replies go to it.
    let connection: ConnectionHandle
    /// The server's I/O loop, which does the writing.
    let loop: EventLoop
    /// The client set `more: true`, so `continues: true` replies are allowed.
    public let more: Bool
    /// The client set `oneway: true`, so nothing is sent.
    public let oneway: Bool
    /// Unread output bytes past which the client is considered not reading and is dropped.
    private let hardOutputLimit: Int
    /// True once the final reply (or error) was claimed.
    private let finished = Lock(false)

    init(connection: ConnectionHandle, loop: EventLoop, more: Bool, oneway: Bool, hardOutputLimit: Int) {
        self.connection = connection
        self.loop = loop
        self.more = more
        self.oneway = oneway
        self.hardOutputLimit = hardOutputLimit
    }

    /// Sends a reply. With `continues: true` (only when the call has `more`) further replies follow; without,
    /// this is the final reply and the call is over.
    ///
    /// - Returns: false when the reply could not be queued: the connection is closed, the final reply was
    ///   already sent, or the client has so much unread output that the server dropped it. A streaming handler
    ///   should stop when this returns false.
    @discardableResult
    public func reply(_ parameters: JSONObject = [:], continues: Bool = false) -> Bool {
        let isFinal = !(continues && self.more)
        guard self.claim(final: isFinal) else { return false }
        if self.oneway { return !self.isClosed }
        return self.send(VarlinkWire.reply(parameters, continues: !isFinal))
    }

    /// ``reply(_:continues:)`` with parameters that `write` appends as JSON text (one object), for a
    /// streaming handler that writes its replies straight into bytes instead of a ``JSONObject``.
    @discardableResult
    public func reply(continues: Bool = false, writingParameters write: (inout [UInt8]) -> Void) -> Bool {
        let isFinal = !(continues && self.more)
        guard self.claim(final: isFinal) else { return false }
        if self.oneway { return !self.isClosed }
        return self.send(VarlinkWire.reply(continues: !isFinal, writingParameters: write))
    }

    /// Sends a continuing reply encoded once for many calls (``VarlinkSharedReply``): the bytes are
    /// shared, not encoded again. On a call without `more` it goes out as the final reply.
    @discardableResult
    public func reply(shared: VarlinkSharedReply) -> Bool {
        guard self.more else { return self.reply(continues: false) { $0.append(contentsOf: shared.parameters) } }
        guard self.claim(final: false) else { return false }
        if self.oneway { return !self.isClosed }
        return self.send(shared.message)
    }

    /// Sends `shared` as a continuing reply on each call of `repliers`, like ``reply(shared:)`` one
    /// by one, but queued for the I/O thread at once: a change fanned out to a thousand watchers
    /// costs one wake-up of the server, and every connection's output holds the same bytes. Those
    /// bytes count in each connection's pending output (a slow reader is still found) but not in
    /// the server's memory budget, which charges what a connection alone holds: the caller queues
    /// at most one such reply per call at a time (as `Watch`'s fan-out does), so what they hold is
    /// bounded by the distinct replies, not by the connections.
    ///
    /// The I/O thread writes such replies in turns after the replies to calls (a `GetStatus` does
    /// not wait behind a whole round of them); `handOff`, if given, learns when they left its queue.
    ///
    /// - Returns: for each replier, whether the reply was queued (false as ``reply(shared:)`` says).
    @discardableResult
    public static func reply(shared: VarlinkSharedReply, on repliers: [VarlinkReplier], handOff: VarlinkHandOff? = nil) -> [Bool] {
        var queued = [Bool](repeating: false, count: repliers.count)
        var batches: [ObjectIdentifier: (loop: EventLoop, indices: [Int], commands: [EventLoop.Command])] = [:]
        for (index, replier) in repliers.enumerated() {
            guard replier.more, !replier.oneway else {
                queued[index] = replier.reply(shared: shared)
                continue
            }
            guard replier.claim(final: false), let command = replier.output(shared.message, shared: true) else { continue }
            batches[ObjectIdentifier(replier.loop), default: (replier.loop, [], [])].indices.append(index)
            batches[ObjectIdentifier(replier.loop)]?.commands.append(command)
        }
        for batch in batches.values {
            var commands = batch.commands
            let signal = handOff?.add()
            if let signal { commands.append(.handOff(signal)) }
            guard batch.loop.submit(contentsOf: commands) else {
                signal?.fire()
                continue
            }
            for index in batch.indices { queued[index] = true }
        }
        return queued
    }

    /// Sends `error` as the final reply.
    ///
    /// - Returns: false when it could not be queued (closed connection or a final reply already sent).
    @discardableResult
    public func fail(_ error: VarlinkError) -> Bool {
        guard self.claim(final: true) else { return false }
        if self.oneway { return !self.isClosed }
        return self.send(VarlinkWire.error(error))
    }

    /// True once the client disconnected or the server dropped the connection.
    public var isClosed: Bool { self.connection.closed.hasFired }

    /// True once the final reply (or error) was sent.
    public var hasFinished: Bool { self.finished.withLock { $0 } }

    /// Returns when the connection closes, or when the calling task is cancelled.
    public func waitClosed() async {
        await self.connection.closed.wait()
    }

    /// Bytes replied on this connection that the client has not read yet. A streaming handler can use it to
    /// coalesce updates for a slow reader instead of queueing each one.
    public var pendingOutputBytes: Int { self.connection.pendingOutput.load(ordering: .relaxed) }

    /// For a handler that streams a long run of replies to a client that reads them as they come
    /// (`FollowReadings`): the connection's kernel send buffer grows from the small one every
    /// connection starts with (about 4.5 KiB, so a client that sends calls without reading the
    /// replies is held back after a few KiB) to 128 KiB, for the rest of the connection. A reply of
    /// 48 KiB then goes out in one write, not ten, each of which woke the server's I/O thread and
    /// the client's reader. What the server itself buffers is still bounded by the output caps and
    /// the handler's own pause (``pendingOutputBytes``); the kernel holds at most the larger buffer,
    /// for at most 16 connections at a time (beyond them a stream keeps the small buffer).
    public func widenSendBuffer() {
        _ = self.loop.submit(.widenSendBuffer(self.connection))
    }

    /// For a handler that sends replies of about `bytes` each to a client that reads them as they
    /// come (a `Watch` of a large state): the connection's kernel send buffer grows (from the
    /// small one every connection starts with) so that one such reply goes out in one write, not
    /// several that each wait for the client to read and wake the server's I/O thread. The kernel
    /// then holds about one reply for a client that does not read; the server keeps what all
    /// connections ask for this way within a fixed budget (beyond it, replies go out in pieces).
    public func fitSendBuffer(toReplies bytes: Int) {
        _ = self.loop.submit(.fitSendBuffer(self.connection, bytes))
    }

    /// The peer of the connection this call arrived on.
    public var peer: VarlinkPeer { self.connection.peer }

    /// Whether a reply may still go out; a final reply claims the call, so a second one gets false.
    private func claim(final isFinal: Bool) -> Bool {
        self.finished.withLock { finished in
            if finished { return false }
            if isFinal { finished = true }
            return true
        }
    }

    /// Queues `bytes` for the I/O thread and counts them as pending output; closes the connection
    /// instead when that would pass the hard output limit.
    private func send(_ bytes: [UInt8]) -> Bool {
        guard let command = self.output(bytes) else { return false }
        return self.loop.submit(command)
    }

    /// The I/O thread's command that queues `bytes`, counted in the connection's pending output;
    /// nil when the connection is closed or would go over the hard limit (it is closed then).
    private func output(_ bytes: [UInt8], shared: Bool = false) -> EventLoop.Command? {
        guard !self.isClosed else { return nil }
        let pending = self.connection.pendingOutput.add(bytes.count, ordering: .relaxed).newValue
        if pending > self.hardOutputLimit {
            // Far past the soft limit: the client is not reading. Stop buffering and drop it now.
            self.loop.submit(.close(self.connection))
            return nil
        }
        return shared ? .sharedOutput(self.connection, bytes) : .output(self.connection, bytes)
    }

    /// Ends the call from the server's side: sends `org.varlink.service.MethodNotImplemented` if the handler
    /// returned without a final reply, then lets the I/O thread read the next call.
    func complete(method: String) {
        if !self.hasFinished { self.fail(.methodNotImplemented(method)) }
        self.loop.submit(.finish(self.connection))
    }

    /// Rejects the message outright and closes the connection after sending `error`.
    func abort(_ error: VarlinkError) {
        _ = self.claim(final: true)
        let bytes = VarlinkWire.error(error)
        self.connection.pendingOutput.add(bytes.count, ordering: .relaxed)
        self.loop.submit(.fail(self.connection, bytes))
    }
}
