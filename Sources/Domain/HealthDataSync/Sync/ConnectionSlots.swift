/// The adapter's connection slots: at most `limit` meters connected (or connecting) at once;
/// further meters wait in one queue and are served in the order they asked (FIFO), so none
/// starves. Pure bookkeeping: the ``SyncEngine`` asks before a sync connects and releases when it
/// ends, and carries out what the answers say.
public struct ConnectionSlots: Hashable, Sendable {
    /// What a request got.
    public enum Grant: Hashable, Sendable {
        /// A slot is the meter's now.
        case granted
        /// All slots are taken; the meter waits at `position` (1: next).
        case queued(position: Int)
    }

    /// The number of slots; nil: no limit.
    public let limit: Int?
    /// The meters holding a slot.
    public private(set) var holders: Set<MeterID> = []
    /// The meters waiting, first come first.
    public private(set) var queue: [MeterID] = []

    /// - Parameter limit: slots (at least 1); nil for no limit.
    public init(limit: Int?) {
        self.limit = limit.map { Swift.max(1, $0) }
    }

    /// A meter asks for a slot. Asking again while holding or waiting changes nothing.
    public mutating func request(_ meter: MeterID) -> Grant {
        if self.holders.contains(meter) { return .granted }
        if let index = self.queue.firstIndex(of: meter) { return .queued(position: index + 1) }
        if let limit = self.limit, self.holders.count >= limit || !self.queue.isEmpty {
            self.queue.append(meter)
            return .queued(position: self.queue.count)
        }
        self.holders.insert(meter)
        return .granted
    }

    /// A meter is done (its sync ended) or gives up waiting. Returns the meter that gets the freed
    /// slot, if one was waiting; that meter now holds it.
    public mutating func release(_ meter: MeterID) -> MeterID? {
        if let index = self.queue.firstIndex(of: meter) {
            self.queue.remove(at: index)
            return nil
        }
        guard self.holders.remove(meter) != nil, !self.queue.isEmpty else { return nil }
        let next = self.queue.removeFirst()
        self.holders.insert(next)
        return next
    }

    /// Whether the meter is waiting for a slot.
    public func isQueued(_ meter: MeterID) -> Bool { self.queue.contains(meter) }
}
