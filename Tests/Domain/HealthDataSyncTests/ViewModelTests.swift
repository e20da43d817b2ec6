import HealthDataSync
import Synchronization
import Testing

/// One test (at least) per semantic of architecture.md "The view model and its observers".
@Suite struct ViewModelTests {
    // MARK: State

    @Test func aChangeBumpsItsFieldAndTheGlobalRevisionAndAnEqualWriteBumpsNothing() {
        let model = VM.viewModel()
        #expect(model.revision == 0)
        let changed = model.update { state in
            state.lastReading = VM.summary(sequence: 1, mgdL: 101)
            state.readingCount = 1
        }
        #expect(changed == [.lastReading, .readingCount])
        #expect(model.revision == 1)
        #expect(model.revision(of: .lastReading) == 1)
        #expect(model.revision(of: .readingCount) == 1)
        #expect(model.revision(of: .daemon) == 0)

        // Equal values: no field changes, no revision moves.
        let again = model.update { state in
            state.lastReading = VM.summary(sequence: 1, mgdL: 101)
            state.readingCount = 1
        }
        #expect(again.isEmpty)
        #expect(model.revision == 1)

        model.update { $0.adapter = AdapterState(present: true, powered: true, discovering: false, name: "hci0") }
        #expect(model.revision == 2)
        #expect(model.revision(of: .adapter) == 2)
        #expect(model.revision(of: .lastReading) == 1)
    }

    @Test func meterModelsDriveTheMetersSyncAndErrorsFields() {
        let store = ModelStore(viewModel: VM.viewModel())
        let a = store.model(for: MeterIdentity(id: VM.meterA, manufacturer: "Roche", model: "Guide"))
        store.model(for: MeterIdentity(id: VM.meterB))
        #expect(store.viewModel.state.meterList.map(\.id) == [VM.meterA, VM.meterB])
        #expect(store.viewModel.state.sync.phase == .idle)

        a.update { $0.sync = .receiving; $0.progress = SyncProgress(received: 3, expected: 10) }
        var view = store.viewModel.state
        #expect(view.meters[VM.meterA]?.progress == SyncProgress(received: 3, expected: 10))
        #expect(view.sync.phase == .syncing)
        #expect(view.sync.activeMeters == [VM.meterA])

        let done = LastSync(meter: VM.meterA, at: Instant(epochMillis: 5_000), result: .success, stored: 10)
        let error = ReportedError(code: "timeout", message: "The meter stopped answering.", at: Instant(epochMillis: 4_000))
        a.update { $0.sync = .idle; $0.lastSync = done; $0.lastError = error }
        view = store.viewModel.state
        #expect(view.sync.phase == .idle)
        #expect(view.sync.lastResult == done)
        #expect(view.errors.count == 1)
        #expect(view.errors.first?.meter == VM.meterA)
        // Equal write of the same error: recorded once.
        a.update { $0.lastError = error }
        #expect(store.viewModel.state.errors.count == 1)
    }

    @Test func theErrorListIsBounded() {
        let model = VM.viewModel()
        for i in 0..<(ViewState.errorLimit + 10) {
            model.update { $0.record(ReportedError(code: "io", message: "error \(i)", at: Instant(epochMillis: Int64(i)))) }
        }
        let errors = model.state.errors
        #expect(errors.count == ViewState.errorLimit)
        #expect(errors.last?.message == "error \(ViewState.errorLimit + 9)")
    }

    // MARK: Field dependencies

    @Test(arguments: [WatchPolicy.coalesced, .immediate])
    func aLastReadingWatcherGetsNothingWhenOnlyProgressChanges(policy: WatchPolicy) async throws {
        let store = ModelStore(viewModel: VM.viewModel())
        let meter = store.model(for: MeterIdentity(id: VM.meterA))
        let watcher = store.viewModel.watch(fields: [.lastReading], policy: policy)
        let snapshot = try #require(await VM.next(watcher))
        #expect(snapshot.isSnapshot)
        #expect(Set(snapshot.fields.keys) == [.lastReading])

        for i in 1...50 {
            meter.update { $0.sync = .receiving; $0.progress = SyncProgress(received: i, expected: 50) }
        }
        store.viewModel.update { $0.lastReading = VM.summary(sequence: 7, mgdL: 123) }

        // The first message after the snapshot is the reading, and only the reading.
        let message = try #require(await VM.next(watcher))
        #expect(!message.isSnapshot)
        #expect(Set(message.fields.keys) == [.lastReading])
        #expect(message[.lastReading] == .lastReading(VM.summary(sequence: 7, mgdL: 123)))
        #expect(message.globalRevision == store.viewModel.revision)
        watcher.cancel()
    }

    @Test func aWatcherThatNamesNoFieldDependsOnEverything() async throws {
        let model = VM.viewModel()
        let watcher = model.watch(fields: [], policy: .immediate)
        let snapshot = try #require(await VM.next(watcher))
        #expect(Set(snapshot.fields.keys) == Set(StateField.allCases))
        model.update { $0.adapter = AdapterState(present: true, powered: false, discovering: false) }
        let message = try #require(await VM.next(watcher))
        #expect(Set(message.fields.keys) == [.adapter])
        watcher.cancel()
    }

    // MARK: Coalescing

    @Test func coalescedDeliverySendsEachChangedFieldOncePerTurnWithItsLatestValue() async throws {
        let model = VM.viewModel()
        let watcher = model.watch()
        #expect(watcher.policy == .coalesced)
        _ = try #require(await VM.next(watcher))

        // One turn, two fields: one message carrying both.
        model.update { $0.readingCount = 1; $0.lastReading = VM.summary(sequence: 1, mgdL: 90) }
        let one = try #require(await VM.next(watcher))
        #expect(Set(one.fields.keys) == [.readingCount, .lastReading])
        #expect(one.globalRevision == 1)

        // Many turns while the watcher does not read: one delivery, latest values only.
        for i in 2...200 {
            model.update { $0.readingCount = i; $0.lastReading = VM.summary(sequence: UInt16(i), mgdL: Double(i)) }
        }
        let latest = try #require(await VM.next(watcher))
        #expect(latest[.readingCount] == .readingCount(200))
        #expect(latest[.lastReading] == .lastReading(VM.summary(sequence: 200, mgdL: 200)))
        #expect(latest.fields[.readingCount]?.revision == model.revision(of: .readingCount))

        // Nothing of those turns is delivered twice: the next message is the marker alone.
        model.update { $0.adapter = AdapterState(present: true, powered: true, discovering: true) }
        let marker = try #require(await VM.next(watcher))
        #expect(Set(marker.fields.keys) == [.adapter])
        watcher.cancel()
    }

    @Test func immediateDeliveryCarriesEveryEmissionInOrder() async throws {
        let model = VM.viewModel()
        let watcher = model.watch(fields: [.readingCount], policy: .immediate)
        _ = try #require(await VM.next(watcher))
        for i in 1...300 { model.update { $0.readingCount = i } }
        var seen: [Int] = []
        var revisions: [UInt64] = []
        while seen.count < 300, let message = await VM.next(watcher) {
            if case .readingCount(let n) = message[.readingCount] { seen.append(n) }
            revisions.append(message.globalRevision)
        }
        #expect(seen == Array(1...300))
        #expect(revisions == (1...300).map { UInt64($0) })
        watcher.cancel()
    }

    // MARK: Never lose the last write (deterministic part; the randomized test is in ViewModelStressTests)

    @Test func aWriteLandingWhileADeliveryIsInFlightStillArrives() async throws {
        let model = VM.viewModel()
        let watcher = model.watch(fields: [.readingCount])
        _ = try #require(await VM.next(watcher))
        // Writer and reader race; whatever interleaving happens, the reader must end on the last value.
        let final = 5_000
        async let writes: Void = {
            for i in 1...final {
                model.update { $0.readingCount = i }
                if i % 64 == 0 { await Task.yield() }
            }
        }()
        var last = 0
        var previousRevision: UInt64 = 0
        while last != final {
            guard let message = await VM.next(watcher) else { break }
            guard case .readingCount(let n) = message[.readingCount] else { continue }
            #expect(n > last, "coalesced values never go backwards")
            #expect(message.globalRevision > previousRevision)
            last = n
            previousRevision = message.globalRevision
        }
        await writes
        #expect(last == final)
        watcher.cancel()
    }

    // MARK: Idempotent cancellation

    @Test func cancellingTwiceIsHarmless() async throws {
        let stats = ObservationStats()
        let store = ModelStore(viewModel: VM.viewModel(stats: stats))
        let meter = store.model(for: MeterIdentity(id: VM.meterA))
        let first = store.viewModel.watch(fields: [.readingCount])
        let second = store.viewModel.watch(fields: [.readingCount])
        let onMeter = meter.watch(fields: [.progress])
        _ = try #require(await VM.next(first))
        _ = try #require(await VM.next(second))
        #expect(store.viewModel.watcherCount == 2)

        first.cancel()
        first.cancel()
        #expect(first.endReason == .cancelled)
        #expect(await first.next() == nil)
        // A double release must not release the other watcher's lease.
        #expect(store.viewModel.watcherCount == 1)
        #expect(stats.liveHubs >= 1)
        store.viewModel.update { $0.readingCount = 42 }
        let message = try #require(await VM.next(second))
        #expect(message[.readingCount] == .readingCount(42))

        // Model removal twice, then the watcher's own cancel: the first reason stays.
        #expect(store.remove(VM.meterA))
        #expect(!store.remove(VM.meterA))
        meter.close()
        onMeter.cancel()
        #expect(onMeter.endReason == .modelClosed)

        store.shutdown()
        store.shutdown()
        second.cancel()
        #expect(second.endReason == .modelClosed)
        #expect(await second.next() == nil)
        #expect(await VM.eventually { stats.liveHubs == 0 && stats.liveCollectorTasks == 0 })
    }

    // MARK: Slow consumers

    @Test func anImmediateWatcherThatStopsReadingIsBoundedAndDroppedPastItsCap() async throws {
        let stats = ObservationStats()
        let model = VM.viewModel(stats: stats)
        let slow = model.watch(fields: [.readingCount], policy: .immediate, outputCap: 8)
        let fast = model.watch(fields: [.readingCount], policy: .immediate, outputCap: 8)
        _ = try #require(await VM.next(fast))

        for i in 1...8 {
            model.update { $0.readingCount = i }
            let m = try #require(await VM.next(fast))
            #expect(m[.readingCount] == .readingCount(i))
        }
        // Snapshot plus 8 queued: at the cap, not over it.
        #expect(await VM.eventually { slow.bufferedCount == 9 })
        #expect(slow.endReason == nil)

        for i in 9...1_000 {
            model.update { $0.readingCount = i }
            _ = try #require(await VM.next(fast))
        }
        #expect(await VM.eventually { slow.endReason == .droppedSlowConsumer })
        #expect(slow.endReason?.reason == "dropped: slow consumer")
        #expect(slow.bufferedCount == 0)
        #expect(await slow.next() == nil)
        #expect(stats.droppedWatchers == 1)
        #expect(fast.endReason == nil)
        #expect(model.watcherCount == 1)

        // Reconnecting gives a fresh snapshot with the latest value.
        let again = model.watch(fields: [.readingCount], policy: .immediate, outputCap: 8)
        let snapshot = try #require(await VM.next(again))
        #expect(snapshot.isSnapshot)
        #expect(snapshot[.readingCount] == .readingCount(1_000))
        again.cancel()
        fast.cancel()
    }

    @Test func aCoalescedWatcherThatStopsReadingHoldsOneEntryPerFieldAndIsDroppedPastItsCap() async throws {
        let model = VM.viewModel()
        let slow = model.watch(fields: [.readingCount, .lastReading], policy: .coalesced, outputCap: 100)
        let probe = model.watch(fields: [.readingCount], policy: .immediate, outputCap: 10_000)
        _ = try #require(await VM.next(slow))
        _ = try #require(await VM.next(probe))

        for i in 1...90 {
            model.update { $0.readingCount = i; $0.lastReading = VM.summary(sequence: UInt16(i), mgdL: Double(i)) }
        }
        // The collector has fanned out every turn once the probe saw the last one.
        for _ in 1...90 { _ = try #require(await VM.next(probe)) }
        #expect(await VM.eventually { slow.bufferedCount == 2 })
        #expect(slow.bufferedCount <= 2, "memory is bounded by fields, not emissions")
        #expect(slow.endReason == nil)

        for i in 91...200 { model.update { $0.readingCount = i } }
        #expect(await VM.eventually { slow.endReason == .droppedSlowConsumer })
        #expect(await slow.next() == nil)
        probe.cancel()
    }

    // MARK: Model lifecycle

    @Test func clearingTheModelStoreCancelsEveryTaskItsModelsStarted() async throws {
        let stats = ObservationStats()
        let store = ModelStore(viewModel: VM.viewModel(stats: stats))
        let a = store.model(for: MeterIdentity(id: VM.meterA))
        let b = store.model(for: MeterIdentity(id: VM.meterB))
        a.activate()
        b.activate()
        let counter = Counter()
        for model in [a, b] {
            for _ in 0..<3 {
                #expect(model.spawn {
                    try? await Task.sleep(for: .seconds(3_600))
                    if Task.isCancelled { counter.add(1) }
                })
            }
        }
        #expect(a.taskCount == 3)
        let watcherA = a.watch(fields: [.progress])
        let viewWatcher = store.viewModel.watch(fields: [.meters])
        _ = try #require(await VM.next(watcherA))
        _ = try #require(await VM.next(viewWatcher))

        // Forget meter A.
        #expect(store.remove(VM.meterA))
        #expect(a.lifecycle == .closed)
        #expect(watcherA.endReason == .modelClosed)
        #expect(await watcherA.next() == nil)
        #expect(await VM.eventually { counter.value == 3 && a.taskCount == 0 })
        #expect(b.taskCount == 3)
        let meters = try #require(await VM.next(viewWatcher))
        if case .meters(let list) = meters[.meters] { #expect(list.map(\.id) == [VM.meterB]) } else { Issue.record("no meters") }
        // A closed model starts nothing.
        #expect(!a.spawn {})

        // Shutdown.
        store.shutdown()
        #expect(viewWatcher.endReason == .modelClosed)
        #expect(await VM.eventually { counter.value == 6 })
        #expect(await VM.eventually { stats.liveModelTasks == 0 && stats.liveHubs == 0 && stats.liveCollectorTasks == 0 })
    }

    // MARK: Side-effect-free construction

    @Test func constructingAModelPerformsNoIOAndActivationIsIdempotent() async throws {
        let stats = ObservationStats()
        let activations = Counter()
        let model = MeterModel(MeterState(identity: MeterIdentity(id: VM.meterA)), stats: stats) { _ in
            // Stands for the activation I/O (loading the stored meter).
            activations.add(1)
        }
        #expect(model.lifecycle == .inactive)
        #expect(activations.value == 0)
        #expect(stats.isQuiescent)
        #expect(stats.collectorsStarted == 0)
        #expect(!model.spawn {}, "an inactive model starts no task")

        // A store creating a model does not activate it either.
        let store = ModelStore(viewModel: VM.viewModel(stats: stats)) { _ in activations.add(100) }
        let fromStore = store.model(for: MeterIdentity(id: VM.meterB))
        #expect(fromStore.lifecycle == .inactive)
        #expect(stats.liveModelTasks == 0)

        #expect(model.activate())
        #expect(!model.activate())
        #expect(await VM.eventually { activations.value == 1 && stats.liveModelTasks == 0 })
        #expect(!model.activate())
        try await Task.sleep(for: .milliseconds(5))
        #expect(activations.value == 1)
        #expect(model.lifecycle == .active)
        model.close()
        #expect(!model.activate())
        store.shutdown()
        #expect(activations.value == 1)
    }

    // MARK: Per-instance state

    @Test func twoModelsShareNoState() async throws {
        let stats1 = ObservationStats()
        let stats2 = ObservationStats()
        let one = VM.viewModel(stats: stats1)
        let two = VM.viewModel(stats: stats2)
        let watcherOne = one.watch(fields: [.readingCount], policy: .immediate)
        let watcherTwo = two.watch(fields: [.readingCount], policy: .immediate)
        _ = try #require(await VM.next(watcherOne))
        _ = try #require(await VM.next(watcherTwo))
        for i in 1...10 { one.update { $0.readingCount = i } }
        two.update { $0.readingCount = 77 }
        #expect(two.revision == 1)
        #expect(two.revision(of: .readingCount) == 1)
        let message = try #require(await VM.next(watcherTwo))
        #expect(message[.readingCount] == .readingCount(77))
        #expect(message.globalRevision == 1)
        #expect(watcherTwo.bufferedCount == 0)
        #expect(stats1.collectorsStarted == 1 && stats2.collectorsStarted == 1)
        #expect(stats1.liveWatchers == 1 && stats2.liveWatchers == 1)
        watcherOne.cancel()
        #expect(await VM.eventually { stats1.liveHubs == 0 })
        #expect(stats2.liveHubs == 1)
        watcherTwo.cancel()
    }
}

/// A shared counter for closures.
final class Counter: Sendable {
    private let atomic = Atomic<Int>(0)
    init() {}
    func add(_ n: Int) { self.atomic.add(n, ordering: .relaxed) }
    var value: Int { self.atomic.load(ordering: .relaxed) }
}
