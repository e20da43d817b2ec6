/// A connection's unsent output: its replies in order, as byte arrays.
///
/// A big reply is queued as the array it came in, so a reply sent on many connections (a
/// ``VarlinkSharedReply``) is held once in memory, not copied into each connection's buffer; small
/// replies are copied into one buffer of the queue's own, so that a run of them goes out in one
/// write.
struct OutputQueue {
    private var segments: [[UInt8]] = []
    /// Whether each segment is a reply shared with other connections (``append(_:shared:)``).
    private var sharedFlags: [Bool] = []
    private var head = 0
    /// Bytes of `segments[head]` already written.
    private var offset = 0
    /// Whether the last segment is the queue's own buffer (small replies are appended to it).
    private var tailIsOwned = false
    /// Bytes not written yet.
    private(set) var count = 0
    /// Of ``count``, the bytes of shared replies (held once for every connection that queues them).
    private(set) var sharedCount = 0

    /// Replies at least this big are queued as they are (not copied).
    static let shareThreshold = 4096
    /// An own buffer takes small replies up to this size; then a new one starts.
    static let ownedLimit = 1 << 16

    var isEmpty: Bool { self.count == 0 }

    /// Queues `bytes`; `shared` says that the same array is queued on other connections too (it is
    /// then never copied, whatever its size).
    mutating func append(_ bytes: [UInt8], shared: Bool = false) {
        guard !bytes.isEmpty else { return }
        self.count += bytes.count
        if shared {
            self.sharedCount += bytes.count
            self.segments.append(bytes)
            self.sharedFlags.append(true)
            self.tailIsOwned = false
            return
        }
        if bytes.count < Self.shareThreshold, self.tailIsOwned, self.head < self.segments.count,
            self.segments[self.segments.count - 1].count + bytes.count <= Self.ownedLimit
        {
            self.segments[self.segments.count - 1].append(contentsOf: bytes)
            return
        }
        if bytes.count < Self.shareThreshold {
            // Our own copy, with room for the replies that may follow.
            var own: [UInt8] = []
            own.reserveCapacity(Self.shareThreshold)
            own.append(contentsOf: bytes)
            self.segments.append(own)
            self.tailIsOwned = true
        } else {
            self.segments.append(bytes)
            self.tailIsOwned = false
        }
        self.sharedFlags.append(false)
    }

    /// Calls `body` with the unwritten bytes of the oldest reply (nil when empty).
    func withFirstChunk<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R? {
        guard self.head < self.segments.count else { return nil }
        let offset = self.offset
        return self.segments[self.head].withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[offset...])) }
    }

    /// Drops `n` written bytes from the front (at most the first chunk's).
    mutating func consume(_ n: Int) {
        guard n > 0, self.head < self.segments.count else { return }
        self.count -= n
        if self.sharedFlags[self.head] { self.sharedCount -= n }
        self.offset += n
        guard self.offset >= self.segments[self.head].count else { return }
        self.segments[self.head] = []
        self.head += 1
        self.offset = 0
        if self.head == self.segments.count {
            self.segments.removeAll(keepingCapacity: self.segments.capacity <= 16)
            self.sharedFlags.removeAll(keepingCapacity: self.sharedFlags.capacity <= 16)
            self.head = 0
            self.tailIsOwned = false
        } else if self.head >= 32 && self.head * 2 >= self.segments.count {
            self.segments.removeFirst(self.head)
            self.sharedFlags.removeFirst(self.head)
            self.head = 0
        }
    }

    /// Drops everything.
    mutating func removeAll() {
        self = OutputQueue()
    }
}
