import Locking

/// A continuing reply (`"continues": true`) encoded once and sent on many calls: one change fanned
/// out to a thousand watchers costs one encoding, and every watcher's output holds the same bytes.
public struct VarlinkSharedReply: Sendable {
    /// The parameters object as JSON text.
    let parameters: [UInt8]
    /// The whole message, NUL-terminated.
    let message: [UInt8]

    /// - Parameter write: appends the parameters as JSON text (one object).
    public init(writingParameters write: (inout [UInt8]) -> Void) {
        var parameters: [UInt8] = []
        write(&parameters)
        self.parameters = parameters
        self.message = VarlinkWire.reply(continues: true) { $0.append(contentsOf: parameters) }
    }

    /// The size of the message on the wire.
    public var byteCount: Int { self.message.count }
}

/// Tells when shared replies queued with ``VarlinkReplier/reply(shared:on:handOff:)`` have left the
/// server's queue: each was written to its socket, or waits for a client whose socket is full (or
/// closed). A sender that fans out rounds waits for it before it queues the next round, so a round
/// never queues behind the last one.
public final class VarlinkHandOff: Sendable {
    /// One signal per batch handed to an I/O thread.
    private let signals = Lock<[OneShotSignal]>([])

    /// Nothing handed off yet (``isComplete`` holds).
    public init() {}

    /// A signal for one more batch, fired by the I/O thread once the batch left its queue.
    func add() -> OneShotSignal {
        let signal = OneShotSignal()
        self.signals.withLock { $0.append(signal) }
        return signal
    }

    /// Whether every batch left the server's queue.
    public var isComplete: Bool { self.signals.withLock { $0 }.allSatisfy(\.hasFired) }

    /// Returns once every batch left the server's queue (at once when none was handed off), or
    /// when the calling task is cancelled.
    public func wait() async {
        for signal in self.signals.withLock({ $0 }) {
            await signal.wait()
            if Task.isCancelled { return }
        }
    }
}
