import HealthDataSync
import Testing
import TestSupport
import Locking

/// Churn, scale and randomized convergence tests for the observation hub.
@Suite struct ViewModelStressTests {
    // MARK: Never lose the last write (randomized)

    /// What one consumer has seen, shared with the coordinator.
    final class Consumer: Sendable {
        struct Seen {
            var watcher: Watcher<ViewState>
            var view: [StateField: ViewState.Value] = [:]
            var stopped = false
            var rewatches = 0
        }
        let fields: Set<StateField>?
        let policy: WatchPolicy
        let cap: Int
        let slow: Bool
        let seen: Lock<Seen>

        init(model: ViewModel, fields: Set<StateField>?, policy: WatchPolicy, cap: Int, slow: Bool) {
            self.fields = fields
            self.policy = policy
            self.cap = cap
            self.slow = slow
            self.seen = Lock(Seen(watcher: model.watch(fields: fields, policy: policy, outputCap: cap)))
        }

        func run(model: ViewModel) async {
            var watcher = self.seen.withLock { $0.watcher }
            while true {
                while let message = await watcher.next() {
                    self.seen.withLock { seen in
                        if message.isSnapshot { seen.view = [:] }
                        for (field, update) in message.fields { seen.view[field] = update.value }
                    }
                    if self.slow { try? await Task.sleep(for: .microseconds(300)) }
                }
                // Dropped as a slow consumer: reconnect to a fresh snapshot, unless told to stop.
                let next: Watcher<ViewState>? = self.seen.withLock { seen in
                    guard !seen.stopped, watcher.endReason == .droppedSlowConsumer else { return nil }
                    seen.watcher = model.watch(fields: self.fields, policy: self.policy, outputCap: self.cap)
                    seen.rewatches += 1
                    return seen.watcher
                }
                guard let next else { return }
                watcher = next
            }
        }

        /// Stops the consumer when its view equals `state` on its fields.
        func stopIfConverged(to state: ViewState) -> Bool {
            self.seen.withLock { seen in
                if seen.stopped { return true }
                let wanted = self.fields ?? Set(StateField.allCases)
                for field in wanted where seen.view[field] != state.value(of: field) { return false }
                seen.stopped = true
                seen.watcher.cancel()
                return true
            }
        }
    }

    static let seeds: [UInt64] = [1, 0x5EED_F00D, 20_261_130, UInt64.random(in: 0...UInt64.max)]

    @Test(arguments: seeds)
    func everyWatcherConvergesOnTheFinalStateUnderRandomBursts(seed: UInt64) async throws {
        print("ViewModelStressTests.everyWatcherConverges seed: \(seed)")
        var random = SplitMix64(seed: seed)
        let stats = ObservationStats()
        let store = ModelStore(viewModel: VM.viewModel(stats: stats))
        let model = store.viewModel
        let meters = [VM.meterA, VM.meterB].map { store.model(for: MeterIdentity(id: $0)) }

        var consumers: [Consumer] = []
        for _ in 0..<16 {
            let fieldSets: [Set<StateField>?] = [nil, [.lastReading], [.meters], [.readingCount, .lastReading], [.adapter, .sync, .errors]]
            let fields = fieldSets[Int.random(in: 0..<fieldSets.count, using: &random)]
            let policy: WatchPolicy = Bool.random(using: &random) ? .coalesced : .immediate
            let slow = Bool.random(using: &random)
            // Small caps on some immediate watchers make drops and re-watches happen.
            let cap = policy == .immediate && Bool.random(using: &random) ? 4 : 64
            consumers.append(Consumer(model: model, fields: fields, policy: policy, cap: cap, slow: slow))
        }

        let outcome: Bool? = await withTaskGroup(of: Void.self) { group in
            for consumer in consumers { group.addTask { await consumer.run(model: model) } }

            var writer = SplitMix64(seed: seed ^ 0xA5A5)
            for _ in 0..<60 {
                let burst = Int.random(in: 1...40, using: &writer)
                for _ in 0..<burst {
                    switch Int.random(in: 0..<6, using: &writer) {
                    case 0:
                        let n = Int.random(in: 0...1_000, using: &writer)
                        model.update { $0.readingCount = n }
                    case 1:
                        let seq = UInt16.random(in: 0...500, using: &writer)
                        let mg = Double(Int.random(in: 20...600, using: &writer))
                        model.update { $0.lastReading = VM.summary(sequence: seq, mgdL: mg); $0.readingCount += 1 }
                    case 2:
                        let meter = meters[Int.random(in: 0..<2, using: &writer)]
                        let received = Int.random(in: 0...200, using: &writer)
                        meter.update { $0.sync = .receiving; $0.progress = SyncProgress(received: received, expected: 200) }
                    case 3:
                        let meter = meters[Int.random(in: 0..<2, using: &writer)]
                        let at = Int64.random(in: 0...1_000_000, using: &writer)
                        meter.update {
                            $0.sync = .idle
                            $0.lastSync = LastSync(meter: $0.id, at: Instant(epochMillis: at), result: .success)
                        }
                    case 4:
                        let powered = Bool.random(using: &writer)
                        let discovering = Bool.random(using: &writer)
                        model.update { $0.adapter = AdapterState(present: true, powered: powered, discovering: discovering) }
                    default:
                        let at = Int64.random(in: 0...1_000_000, using: &writer)
                        model.update { $0.record(ReportedError(code: "timeout", message: "t", at: Instant(epochMillis: at))) }
                    }
                }
                if Bool.random(using: &writer) {
                    try? await Task.sleep(for: .microseconds(Int.random(in: 0...500, using: &writer)))
                } else {
                    await Task.yield()
                }
            }
            let final = model.state
            let converged = await VM.eventually(within: 30) {
                consumers.map { $0.stopIfConverged(to: final) }.allSatisfy { $0 }
            }
            if !converged { for consumer in consumers { consumer.seen.withLock { $0.watcher.cancel() } } }
            await group.waitForAll()
            return converged
        }
        let rewatches = consumers.reduce(0) { $0 + $1.seen.withLock { $0.rewatches } }
        print("seed \(seed): \(rewatches) re-watches after drops, final revision \(model.revision)")
        #expect(outcome == true, "a watcher did not converge on the final state (seed \(seed))")
        for (index, consumer) in consumers.enumerated() {
            let final = model.state
            let wanted = consumer.fields ?? Set(StateField.allCases)
            consumer.seen.withLock { seen in
                for field in wanted {
                    #expect(seen.view[field] == final.value(of: field), "consumer \(index) field \(field) (seed \(seed))")
                }
            }
        }
        store.shutdown()
    }

    // MARK: One collector per model

    @Test func tenThousandWatchersOfOneModelShareOneCollector() async throws {
        let stats = ObservationStats()
        let model = VM.viewModel(stats: stats)
        var watchers: [Watcher<ViewState>] = []
        watchers.reserveCapacity(10_000)
        for i in 0..<10_000 {
            watchers.append(
                i % 2 == 0
                    ? model.watch(fields: [.lastReading]) : model.watch(fields: nil, policy: .immediate, outputCap: 16))
        }
        #expect(model.watcherCount == 10_000)
        #expect(stats.collectorsStarted == 1)
        #expect(stats.liveCollectorTasks == 1)
        #expect(stats.liveHubs == 1)

        model.update { $0.lastReading = VM.summary(sequence: 1, mgdL: 111) }
        let expected = ViewState.Value.lastReading(VM.summary(sequence: 1, mgdL: 111))
        for watcher in watchers {
            let snapshot = try #require(await VM.next(watcher))
            #expect(snapshot.isSnapshot)
            // A coalesced snapshot is read at delivery, so it may already carry the change.
            if watcher.policy == .coalesced && snapshot[.lastReading] == expected { continue }
            let change = try #require(await VM.next(watcher))
            #expect(change[.lastReading] == expected)
        }
        #expect(stats.collectorsStarted == 1)

        for watcher in watchers { watcher.cancel() }
        #expect(model.watcherCount == 0)
        watchers.removeAll()
        #expect(await VM.eventually { stats.isQuiescent })
    }

    // MARK: The hub does not outlive its last lease

    @Test func nothingRemainsAfterOneHundredThousandSubscribeCancelCycles() async throws {
        let stats = ObservationStats()
        let model = VM.viewModel(stats: stats)
        await withTaskGroup(of: Void.self) { group in
            for lane in 0..<2 {
                group.addTask {
                    for i in 0..<50_000 {
                        let policy: WatchPolicy = i % 2 == 0 ? .coalesced : .immediate
                        let watcher = model.watch(fields: lane == 0 ? [.readingCount] : nil, policy: policy)
                        if i % 1_000 == 0 {
                            model.update { $0.readingCount = i }
                            _ = await watcher.next()
                        }
                        if i % 3 == 0 {
                            watcher.cancel()
                        }  // otherwise released by dropping the last reference
                        if i % 7 == 0 { watcher.cancel() }
                    }
                }
            }
        }
        #expect(model.watcherCount == 0)
        #expect(stats.collectorsStarted >= 2)
        print("100 000 cycles: \(stats.collectorsStarted) collectors started and ended")
        #expect(await VM.eventually { stats.isQuiescent }, "hubs \(stats.liveHubs) collectors \(stats.liveCollectorTasks) watchers \(stats.liveWatchers)")

        // The model still works afterwards.
        let watcher = model.watch(fields: [.readingCount], policy: .immediate)
        _ = try #require(await VM.next(watcher))
        model.update { $0.readingCount = -1 }
        #expect(try #require(await VM.next(watcher))[.readingCount] == .readingCount(-1))
        watcher.cancel()
    }
}
