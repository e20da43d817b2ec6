/// A state value with named fields that can be observed field by field. (Its wire form is
/// SugarAPI's business: `Wire.State(_:)`, `Wire.WatchReply(_:)`.)
public protocol ObservableState: Hashable, Sendable {
    /// The field names; `rawValue` is the stable wire name.
    associatedtype Field: RawRepresentable, Hashable, CaseIterable, Sendable where Field.RawValue == String
    /// A typed value of one field.
    associatedtype Value: Hashable, Sendable

    /// The current value of `field`.
    func value(of field: Field) -> Value
    /// Whether a field differs between two states (change detection; defaults to comparing values).
    func differs(from other: Self, in field: Field) -> Bool
}

/// The default change detection: compare the field's values.
extension ObservableState {
    /// Compares the two states' values of `field`.
    public func differs(from other: Self, in field: Field) -> Bool {
        self.value(of: field) != other.value(of: field)
    }
}

/// How a watcher receives changes.
public enum WatchPolicy: String, Hashable, Sendable {
    /// Changes within and across owner turns are unioned per field; each delivery carries every
    /// changed watched field once, with its latest value. Memory is bounded by the number of fields.
    case coalesced
    /// Every accepted emission, in order, each with the values of that turn; bounded by the cap.
    case immediate

    /// Default output cap: queued messages (immediate) or unread owner turns (coalesced).
    public static let defaultOutputCap = 4096
}

/// A field's value at a revision.
public struct FieldUpdate<Value: Hashable & Sendable>: Hashable, Sendable {
    /// The global revision at which the field last changed.
    public var revision: UInt64
    /// The field's value.
    public var value: Value

    /// A value at a revision.
    public init(revision: UInt64, value: Value) {
        self.revision = revision
        self.value = value
    }
}

/// One message to a watcher: first a snapshot of the watched fields, then changes only.
public struct WatchMessage<State: ObservableState>: Sendable {
    /// The watcher's binding generation; advances on every ``Watcher/rebind(to:)``.
    public var generation: UInt64
    /// The model's global revision the values were read at.
    public var globalRevision: UInt64
    /// True for the first message after a watch or a rebind: every watched field is present.
    public var isSnapshot: Bool
    /// The fields carried, with their values and revisions: every watched field in a snapshot, the
    /// changed ones otherwise.
    public var fields: [State.Field: FieldUpdate<State.Value>]
    /// When the oldest write carried by this message happened (nil for snapshots); for latency.
    public var changedAt: ContinuousClock.Instant?

    /// A message.
    public init(
        generation: UInt64, globalRevision: UInt64, isSnapshot: Bool,
        fields: [State.Field: FieldUpdate<State.Value>], changedAt: ContinuousClock.Instant? = nil
    ) {
        self.generation = generation
        self.globalRevision = globalRevision
        self.isSnapshot = isSnapshot
        self.fields = fields
        self.changedAt = changedAt
    }

    /// The value of `field` when the message carries it.
    public subscript(field: State.Field) -> State.Value? { self.fields[field]?.value }
}

/// Why a watcher's sequence ended.
public enum WatchEnd: String, Hashable, Sendable {
    /// ``Watcher/cancel()``, the consuming task was cancelled, or the watcher was released.
    case cancelled
    /// It stayed over its output cap; re-watch to get a fresh snapshot.
    case droppedSlowConsumer
    /// The model was removed (meter forgotten) or the daemon shut down.
    case modelClosed

    /// One phrase for people and for the socket layer's final reply.
    public var reason: String {
        switch self {
        case .cancelled: return "cancelled"
        case .droppedSlowConsumer: return "dropped: slow consumer"
        case .modelClosed: return "model closed"
        }
    }
}

/// One owner turn as the collector sees it: the changed fields with their values of that turn.
struct Emission<State: ObservableState>: Sendable {
    /// The model's global revision after the turn.
    var revision: UInt64
    /// The fields the turn changed, with their new values.
    var fields: [State.Field: FieldUpdate<State.Value>]
    /// When the turn happened.
    var at: ContinuousClock.Instant
}

/// What the collector drained in one wake-up: the turns in order (for immediate watchers) and a
/// summary computed once (for coalesced watchers), so fan-out costs O(watchers × distinct field
/// sets) rather than O(watchers × turns).
struct Batch<State: ObservableState>: Sendable {
    /// Owner turns that changed the same set of fields.
    struct Group: Sendable {
        /// The fields changed.
        var fields: Set<State.Field>
        /// How many turns changed exactly these fields.
        var turns: Int
        /// When the first of them happened.
        var firstAt: ContinuousClock.Instant
    }

    /// The turns, oldest first.
    var emissions: [Emission<State>]
    /// The newest revision of each field changed in the batch.
    var latest: [State.Field: UInt64] = [:]
    /// Turns grouped by the set of fields they changed.
    var groups: [Group] = []

    /// Drains `emissions` into a batch, grouping the turns and noting each field's newest revision.
    init(_ emissions: [Emission<State>]) {
        self.emissions = emissions
        var index: [Set<State.Field>: Int] = [:]
        for emission in emissions {
            var fields = Set<State.Field>()
            for (field, update) in emission.fields {
                fields.insert(field)
                if update.revision > self.latest[field, default: 0] { self.latest[field] = update.revision }
            }
            if let i = index[fields] {
                self.groups[i].turns += 1
            } else {
                index[fields] = self.groups.count
                self.groups.append(Group(fields: fields, turns: 1, firstAt: emission.at))
            }
        }
    }
}

/// A FIFO with amortised O(1) pop, for immediate watchers.
struct MessageQueue<Element> {
    /// The elements; those before ``head`` are already popped.
    private var items: [Element] = []
    /// The index of the first element not popped.
    private var head = 0

    /// How many elements are queued.
    var count: Int { self.items.count - self.head }

    /// Queues an element at the end.
    mutating func append(_ element: Element) { self.items.append(element) }

    /// The oldest element, removed; nil when empty. The popped front is dropped once it is 64 elements
    /// and half the storage, or everything is popped.
    mutating func popFirst() -> Element? {
        guard self.head < self.items.count else { return nil }
        let element = self.items[self.head]
        self.head += 1
        if self.head == self.items.count {
            self.items.removeAll(keepingCapacity: true)
            self.head = 0
        } else if self.head >= 64 && self.head * 2 >= self.items.count {
            self.items.removeFirst(self.head)
            self.head = 0
        }
        return element
    }

    /// Drops every element and the storage.
    mutating func removeAll() {
        self.items = []
        self.head = 0
    }
}
