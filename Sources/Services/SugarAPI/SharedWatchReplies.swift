public import HealthDataSync
import JSON
import Locking
import SugarWire
public import Varlink

/// Watch replies encoded once per change and shared by every watcher that gets the same message:
/// watchers of one model (the view model, or one meter) that ask for the same fields receive, after
/// each change, the same fields at the same revision, so the first one to send encodes it and the
/// others send the same bytes. A message is identified by its model, the watcher's binding
/// generation, whether it is a snapshot, the global revision it was read at and its field names
/// (values read at one revision are the same for everyone). A coalesced watcher that fell behind
/// gets a wider message, which is simply another entry.
///
/// Bounded: the last ``capacity`` messages are kept (a change makes a new one; older ones are only
/// asked for by watchers still catching up, which then encode their own).
public final class SharedWatchReplies: Sendable {
    /// What makes two watchers' messages the same bytes.
    struct Key: Hashable {
        var model: ObjectIdentifier
        var generation: UInt64
        var revision: UInt64
        var snapshot: Bool
        var fields: [String]
    }

    struct Entry {
        /// The model the key's identifier named (a freed model's address can be reused).
        weak var model: AnyObject?
        var reply: VarlinkSharedReply
    }

    /// The encoded messages, oldest first in `order`, and the counts ``counts`` reports.
    struct Cache {
        var entries: [Key: Entry] = [:]
        var order: [Key] = []
        var hits = 0
        var encodings = 0
    }

    /// How many encoded messages are kept; the oldest is dropped first.
    public static let capacity = 32
    private let cache = Lock(Cache())

    /// An empty cache; one per service, shared by all its watchers.
    public init() {}

    /// The encoded reply for `message` of `model`, encoding it (with `parameters`) only when no
    /// watcher did yet. The encoding happens under the cache's lock, so watchers arriving meanwhile
    /// wait for it instead of encoding the same message again.
    public func reply<State: ObservableState>(
        for message: WatchMessage<State>, of model: ObservableModel<State>, parameters: () -> JSONObject
    ) -> VarlinkSharedReply {
        let key = Key(
            model: ObjectIdentifier(model), generation: message.generation, revision: message.globalRevision,
            snapshot: message.isSnapshot, fields: message.fields.keys.map(\.rawValue).sorted())
        return self.cache.withLock { cache in
            if let entry = cache.entries[key], entry.model === model {
                cache.hits += 1
                return entry.reply
            }
            let encoded = parameters()
            let reply = VarlinkSharedReply { JSONValue.object(encoded).write(into: &$0) }
            if cache.entries.updateValue(Entry(model: model, reply: reply), forKey: key) == nil {
                cache.order.append(key)
            }
            if cache.order.count > Self.capacity {
                cache.entries[cache.order.removeFirst()] = nil
            }
            cache.encodings += 1
            return reply
        }
    }

    /// Messages encoded, and sends that reused an encoding (for tests and benchmarks).
    public var counts: (encodings: Int, hits: Int) { self.cache.withLock { ($0.encodings, $0.hits) } }
}
