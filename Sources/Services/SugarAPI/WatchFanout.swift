public import HealthDataSync
import JSON
import Locking
import SugarWire
public import Varlink

/// The coalesced `Watch` calls of a service, served in groups: the calls that watch the same
/// fields of one model (the view model, or one meter's model) share one group, and one task per
/// group serves every call in it.
///
/// At most once per `interval` while changes keep coming (at once after a quiet spell), and never
/// before the last round has left the server's queue (``VarlinkHandOff``: a round does not queue
/// behind the one before when the I/O thread writes slower than the interval), a group reads its
/// model once, encodes the fields that changed once, and queues the same bytes on every member's
/// connection in one batch for the server's I/O thread, which writes them in turns after the
/// replies to calls (a `GetStatus` does not wait behind a round). Per member and change there is
/// no task wake-up, no read of the model, no encoding and no copy. (Pacing by the hand-off alone,
/// without the interval, was measured: more rounds, 0.26 core instead of ~0.1, and more lag.)
///
/// A member whose last reply has not left sugard's buffer yet (a client that reads slowly, or not
/// at all) skips the reply; the group remembers which fields it missed (bounded by the number of
/// fields) and sends them, with their latest values, in the first reply after its buffer drained
/// (while a member is behind, the group looks every `interval`, or every 10 ms). A member that
/// misses more than its output cap of owner turns is dropped with ``WatchEnd/droppedSlowConsumer``.
///
/// What a member gets keeps the Watch contract of the view model (docs/architecture.md): first a
/// snapshot of its fields, then only the fields that changed since its last reply, with their
/// latest values, in revision order; the last write of every field always arrives.
public final class WatchFanout: Sendable {
    /// A group's identity: the model and the sorted names of the fields its members watch.
    struct Key: Hashable {
        var model: ObjectIdentifier
        var fields: [String]
    }

    /// A live group and how many calls it serves (the last to leave stops it).
    private struct Entry {
        /// A `WatchGroup<State>` for the model's state type.
        var group: any FanoutGroup
        var members: Int
    }

    private let registry = Lock<[Key: Entry]>([:])
    private let counters = Lock(Counters())

    /// What the groups did (for tests and benchmarks).
    public struct Counters: Sendable, Hashable {
        /// Rounds in which a group read its model and found a change.
        public var rounds = 0
        /// Replies encoded: one per round, one per snapshot revision, one per distinct catch-up.
        public var encodings = 0
        /// Replies queued on members' connections.
        public var replies = 0
        /// Times a member skipped a round because its last reply was still in sugard's buffer.
        public var skipped = 0
    }

    /// No groups yet: a group (and its task) starts with its first member and ends with its last.
    public init() {}

    /// Calls served now, in all groups.
    public var memberCount: Int { self.registry.withLock { $0.values.reduce(0) { $0 + $1.members } } }
    /// Groups (and their tasks) alive now.
    public var groupCount: Int { self.registry.withLock { $0.count } }
    /// A snapshot of the counters since this fan-out was made.
    public var counts: Counters { self.counters.withLock { $0 } }

    /// Updates the counters under their lock.
    func count(_ change: (inout Counters) -> Void) { self.counters.withLock { change(&$0) } }

    /// Serves `replier` as a coalesced watcher of `fields` (nil or empty: all) of `model` until the
    /// client goes away (the calling task is cancelled), the model closes or the member is dropped;
    /// returns why it ended. The first reply (a snapshot) is queued before this suspends.
    ///
    /// - Parameters:
    ///   - outputCap: owner turns a member may miss before it is dropped.
    ///   - interval: the least time between two rounds of a group while changes keep coming; it
    ///     applies to a group created by this call.
    public func serve<State: ObservableState>(
        _ model: ObservableModel<State>, fields: Set<State.Field>?, replier: VarlinkReplier, outputCap: Int, interval: Duration
    ) async -> WatchEnd where State.Value: WireFieldValue {
        let wanted = fields.flatMap { $0.isEmpty ? nil : $0 } ?? Set(State.Field.allCases)
        let key = Key(model: ObjectIdentifier(model), fields: wanted.map(\.rawValue).sorted())
        let group: WatchGroup<State> = self.registry.withLock { groups in
            if let entry = groups[key], let group = entry.group as? WatchGroup<State> {
                groups[key]?.members += 1
                return group
            }
            let group = WatchGroup(model: model, fields: wanted, interval: interval, fanout: self)
            groups[key] = Entry(group: group, members: 1)
            group.start()
            return group
        }
        let member = group.join(replier, outputCap: outputCap)
        defer {
            group.leave(member)
            let stop = self.registry.withLock { groups -> Bool in
                guard let entry = groups[key], entry.group === group else { return false }
                if entry.members > 1 {
                    groups[key]?.members -= 1
                    return false
                }
                groups[key] = nil
                return true
            }
            if stop { group.stop() }
        }
        _ = await member.ended.wait(after: 0)
        return member.end ?? .cancelled
    }
}

/// What the registry needs of a group, whatever its model's state type.
protocol FanoutGroup: AnyObject, Sendable {}

/// One call served by a group.
final class FanoutMember: Sendable {
    /// Where the member's replies are queued.
    let replier: VarlinkReplier
    /// Owner turns the member may miss before it is dropped (`droppedSlowConsumer`).
    let outputCap: Int
    /// Rung once, when the group ends the member (``end`` says why).
    let ended = FeedSignal()
    private let reason = Lock<WatchEnd?>(nil)

    /// A member not yet ended.
    init(replier: VarlinkReplier, outputCap: Int) {
        self.replier = replier
        self.outputCap = outputCap
    }

    /// Why the group ended the member; nil while it is served.
    var end: WatchEnd? { self.reason.withLock { $0 } }

    /// Ends the member with `end` and rings ``ended``; later calls change nothing (the first reason stays).
    func finish(_ end: WatchEnd) {
        let first = self.reason.withLock { reason -> Bool in
            guard reason == nil else { return false }
            reason = end
            return true
        }
        if first { self.ended.ring() }
    }
}

/// The members that watch the same fields of one model, and the task that serves them.
final class WatchGroup<State: ObservableState>: FanoutGroup where State.Value: WireFieldValue {
    /// A member as the group tracks it between rounds.
    struct Place {
        let member: FanoutMember
        /// The fields changed in rounds it skipped (nil: it got every round).
        var missed: Set<State.Field>?
        /// Owner turns of the rounds it skipped.
        var missedTurns = 0
        /// The reply size its connection's send buffer was fitted to.
        var fitted = 0
    }

    /// The group's state, under its lock.
    struct Core {
        /// The members, by identity.
        var members: [ObjectIdentifier: Place] = [:]
        /// Members with missed rounds.
        var behind = 0
        /// The latest values read, as a snapshot message (generation 1, like a first watch).
        var latest: WatchMessage<State>
        /// `latest` encoded, once someone joined at its revision.
        var snapshotReply: VarlinkSharedReply?
        /// Set when the model closed: a member joining later is ended with `modelClosed` at once.
        var closed = false
    }

    /// The model the group reads.
    let model: ObservableModel<State>
    /// The fields every member of the group watches.
    let fields: Set<State.Field>
    /// The least time between two rounds while changes keep coming.
    let interval: Duration
    private let fanout: WatchFanout
    private let watcher: Watcher<State>
    private let core: Lock<Core>
    private let task = Lock<Task<Void, Never>?>(nil)

    /// A group reading `fields` of `model`, with its latest values read now; ``start()`` runs it.
    init(model: ObservableModel<State>, fields: Set<State.Field>, interval: Duration, fanout: WatchFanout) {
        self.model = model
        self.fields = fields
        self.interval = interval
        self.fanout = fanout
        // The group's own lease: it only says that something changed (the group reads the model
        // itself), so it never drops (its memory is bounded by the fields).
        self.watcher = model.watch(fields: fields, policy: .coalesced, outputCap: .max)
        var latest = model.snapshot(fields: fields)
        latest.generation = 1
        self.core = Lock(Core(latest: latest, closed: self.watcher.endReason != nil))
    }

    /// Starts the group's task; ``stop()`` cancels it.
    func start() {
        self.task.withLock { task in
            guard task == nil else { return }
            task = Task { [self] in await self.run() }
        }
    }

    /// Ends the task (the last member left). Safe twice.
    func stop() {
        self.task.withLock { $0 }?.cancel()
        self.watcher.cancel()
    }

    /// Adds a member and queues its snapshot (the latest values the group read).
    func join(_ replier: VarlinkReplier, outputCap: Int) -> FanoutMember {
        let member = FanoutMember(replier: replier, outputCap: outputCap)
        let queued: Bool? = self.core.withLock { core in
            guard !core.closed else { return nil }
            let reply: VarlinkSharedReply
            if let encoded = core.snapshotReply {
                reply = encoded
            } else {
                reply = Self.encode(core.latest)
                core.snapshotReply = reply
                self.fanout.count { $0.encodings += 1 }
            }
            // One reply in one write (a whole state of 50 meters is ~20 KB).
            replier.fitSendBuffer(toReplies: reply.byteCount)
            // Queued under the group's lock: no round can reach the member before its snapshot.
            guard VarlinkReplier.reply(shared: reply, on: [replier]) == [true] else { return false }
            core.members[ObjectIdentifier(member)] = Place(member: member, fitted: reply.byteCount)
            return true
        }
        switch queued {
        case nil: member.finish(.modelClosed)
        case false?: member.finish(.cancelled)
        case true?: self.fanout.count { $0.replies += 1 }
        }
        return member
    }

    /// Removes a member (the call ended). Harmless for one the group already ended.
    func leave(_ member: FanoutMember) {
        self.core.withLock { core in
            if let place = core.members.removeValue(forKey: ObjectIdentifier(member)), place.missed != nil { core.behind -= 1 }
        }
        member.finish(.cancelled)
    }

    /// `message` as a Watch reply's parameters, encoded once for every member it goes to.
    static func encode(_ message: WatchMessage<State>) -> VarlinkSharedReply {
        VarlinkSharedReply { Wire.WatchReply(message).json.write(into: &$0) }
    }

    /// The group's task: waits for a change (or, while a member is behind, for the interval), runs a
    /// round at most once per interval and only once the last round left the server's queue, and
    /// ends the members when the model closes.
    private func run() async {
        var last: ContinuousClock.Instant?
        var behind = false
        var handOff: VarlinkHandOff?
        while !Task.isCancelled, self.watcher.endReason == nil {
            if behind {
                // Someone is catching up: look again soon, changes or not.
                try? await Task.sleep(for: max(self.interval, .milliseconds(10)))
            } else if await self.watcher.next() == nil {
                break
            }
            // At most one round per interval while changes keep coming.
            if let last, self.interval > .zero, last + self.interval > .now {
                try? await Task.sleep(until: last + self.interval, clock: .continuous)
            }
            // The last round left the server's queue: a round never queues behind the one before.
            await handOff?.wait()
            if Task.isCancelled { break }
            (behind, handOff) = self.round()
            last = .now
        }
        if self.watcher.endReason == .modelClosed {
            let members = self.core.withLock { core -> [FanoutMember] in
                core.closed = true
                defer {
                    core.members = [:]
                    core.behind = 0
                }
                return core.members.values.map(\.member)
            }
            for member in members { member.finish(.modelClosed) }
        }
        self.watcher.cancel()
    }

    /// One round: reads the model, sends what changed to the members that took their last reply,
    /// and catches up those that had missed rounds and have now drained. Returns whether a member
    /// is still behind, and what tells when the round's replies left the server's queue.
    private func round() -> (behind: Bool, handOff: VarlinkHandOff) {
        var current = self.model.snapshot(fields: self.fields)
        current.generation = 1
        // Only this task writes `latest`.
        let previous = self.core.withLock { $0.latest }
        var changed: [State.Field: FieldUpdate<State.Value>] = [:]
        for (field, update) in current.fields where update.revision != previous.fields[field]?.revision {
            changed[field] = update
        }
        let turns = Int(clamping: current.globalRevision &- previous.globalRevision)
        var encoded: VarlinkSharedReply?
        if !changed.isEmpty {
            encoded = Self.encode(
                WatchMessage(generation: 1, globalRevision: current.globalRevision, isSnapshot: false, fields: changed))
        }
        var dropped: [FanoutMember] = []
        var failed: [FanoutMember] = []
        var replies = 0
        var encodings = encoded == nil ? 0 : 1
        var skipped = 0
        let handOff = VarlinkHandOff()
        let behind = self.core.withLock { core -> Bool in
            if !changed.isEmpty {
                core.latest = current
                core.snapshotReply = nil
            }
            guard encoded != nil || core.behind > 0 else { return false }
            var inStep: [FanoutMember] = []
            var catchUps: [Set<State.Field>: (reply: VarlinkSharedReply, members: [FanoutMember])] = [:]
            for (id, var place) in core.members {
                if place.member.replier.pendingOutputBytes == 0 {
                    guard let missed = place.missed else {
                        guard let encoded else { continue }
                        if encoded.byteCount > place.fitted {
                            place.member.replier.fitSendBuffer(toReplies: encoded.byteCount)
                            place.fitted = encoded.byteCount
                            core.members[id] = place
                        }
                        inStep.append(place.member)
                        continue
                    }
                    // Caught up: the fields it missed and those of this round, with their latest values.
                    let wanted = missed.union(changed.keys)
                    if catchUps[wanted] == nil {
                        let message = WatchMessage<State>(
                            generation: 1, globalRevision: core.latest.globalRevision, isSnapshot: false,
                            fields: core.latest.fields.filter { wanted.contains($0.key) })
                        catchUps[wanted] = (Self.encode(message), [])
                        encodings += 1
                    }
                    catchUps[wanted]?.members.append(place.member)
                    place.missed = nil
                    place.missedTurns = 0
                    core.behind -= 1
                    core.members[id] = place
                } else if !changed.isEmpty {
                    skipped += 1
                    if place.missed == nil {
                        place.missed = []
                        core.behind += 1
                    }
                    place.missed?.formUnion(changed.keys)
                    place.missedTurns += turns
                    if place.missedTurns > place.member.outputCap {
                        core.members[id] = nil
                        core.behind -= 1
                        dropped.append(place.member)
                    } else {
                        core.members[id] = place
                    }
                }
            }
            // Queued under the group's lock, so a member joining meanwhile gets its snapshot first.
            var batches = catchUps.values.map { ($0.reply, $0.members) }
            if let encoded, !inStep.isEmpty { batches.append((encoded, inStep)) }
            for (reply, members) in batches {
                let queued = VarlinkReplier.reply(shared: reply, on: members.map(\.replier), handOff: handOff)
                for (member, ok) in zip(members, queued) {
                    if ok {
                        replies += 1
                    } else if let place = core.members.removeValue(forKey: ObjectIdentifier(member)) {
                        if place.missed != nil { core.behind -= 1 }
                        failed.append(member)
                    }
                }
            }
            return core.behind > 0
        }
        for member in dropped {
            self.model.stats.watcherDropped()
            member.finish(.droppedSlowConsumer)
        }
        for member in failed { member.finish(.cancelled) }
        if encoded != nil || replies > 0 {
            self.fanout.count {
                $0.rounds += encoded == nil ? 0 : 1
                $0.encodings += encodings
                $0.replies += replies
                $0.skipped += skipped
            }
        }
        return (behind, handOff)
    }
}
