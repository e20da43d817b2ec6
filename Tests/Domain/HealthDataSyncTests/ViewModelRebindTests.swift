@testable import HealthDataSync
import Locking
import Synchronization
import Testing

/// Rebinding a watcher to another meter's model (semantic "Rebinding").
@Suite struct ViewModelRebindTests {
    @Test(arguments: [WatchPolicy.coalesced, .immediate])
    func rebindingRejectsLateEmissionsFromTheOldMeter(policy: WatchPolicy) async throws {
        let store = ModelStore(viewModel: VM.viewModel())
        let a = store.model(for: MeterIdentity(id: VM.meterA))
        let b = store.model(for: MeterIdentity(id: VM.meterB))
        b.update { $0.progress = SyncProgress(received: 5, expected: 7); $0.link = .connected }

        let watcher = a.watch(fields: [.progress, .link], policy: policy)
        let first = try #require(await VM.next(watcher))
        #expect(first.generation == 1)
        a.update { $0.progress = SyncProgress(received: 1, expected: 100) }
        let old = try #require(await VM.next(watcher))
        #expect(old[.progress] == .progress(SyncProgress(received: 1, expected: 100)))

        // A burst on A that is still being fanned out while we rebind.
        for i in 2...2_000 { a.update { $0.progress = SyncProgress(received: i, expected: 2_000) } }
        #expect(watcher.rebind(to: b))
        #expect(watcher.generation == 2)
        #expect(a.watcherCount == 0, "the old lease is released")
        #expect(b.watcherCount == 1)

        // An emission of the old binding arriving now (what a collector mid-fan-out would do).
        let late = Emission<MeterState>(
            revision: 1_000_000,
            fields: [.progress: FieldUpdate(revision: 1_000_000, value: .progress(SyncProgress(received: 999, expected: 999)))],
            at: .now)
        watcher.deliver(Batch([late]), generation: 1)

        // The replacement's fields invalidate once: a snapshot of B, whole, in generation 2.
        let snapshot = try #require(await VM.next(watcher))
        #expect(snapshot.isSnapshot)
        #expect(snapshot.generation == 2)
        #expect(snapshot[.progress] == .progress(SyncProgress(received: 5, expected: 7)))
        #expect(snapshot[.link] == .link(.connected))
        // Again after the snapshot: nothing may be buffered from the old binding.
        watcher.deliver(Batch([late]), generation: 1)
        #expect(watcher.bufferedCount == 0)

        // Writes to A no longer reach the watcher; the next message is B's change.
        for i in 1...100 { a.update { $0.progress = SyncProgress(received: i, expected: 1) } }
        b.update { $0.progress = SyncProgress(received: 6, expected: 7) }
        let next = try #require(await VM.next(watcher))
        #expect(!next.isSnapshot)
        #expect(next.generation == 2)
        #expect(Set(next.fields.keys) == [.progress])
        #expect(next[.progress] == .progress(SyncProgress(received: 6, expected: 7)))
        #expect(watcher.bufferedCount == 0)

        // Rebinding back works the same way, and an ended watcher cannot be rebound.
        #expect(watcher.rebind(to: a))
        let back = try #require(await VM.next(watcher))
        #expect(back.generation == 3 && back.isSnapshot)
        #expect(back[.progress] == .progress(SyncProgress(received: 100, expected: 1)))
        watcher.cancel()
        #expect(!watcher.rebind(to: b))
        #expect(a.watcherCount == 0 && b.watcherCount == 0)

        // Rebinding to a removed meter ends the watch.
        let other = b.watch(fields: [.progress], policy: policy)
        _ = try #require(await VM.next(other))
        store.remove(VM.meterA)
        #expect(!other.rebind(to: a))
        #expect(other.endReason == .modelClosed)
        #expect(b.watcherCount == 0)
        store.shutdown()
    }
}

/// "Never lose the last write", with the write placed exactly inside a delivery in flight.
@Suite struct ViewModelInFlightTests {
    @Test func aWriteDuringAnInFlightCoalescedDeliveryIsDeliveredNext() async throws {
        let model = VM.viewModel()
        let watcher = model.watch(fields: [.readingCount])
        _ = try #require(await VM.next(watcher))
        model.update { $0.readingCount = 1 }

        let fired = Counter()
        watcher.afterRead.withLock { hook in
            hook = {
                guard fired.value == 0 else { return }
                fired.add(1)
                // The write lands after the values were read and before the delivery completes;
                // wait (bounded) until the collector has marked it pending for this watcher.
                model.update { $0.readingCount = 2 }
                let clock = ContinuousClock()
                let deadline = clock.now.advanced(by: .seconds(2))
                while watcher.bufferedCount == 0 && clock.now < deadline {}
            }
        }
        let first = try #require(await VM.next(watcher))
        #expect(fired.value == 1)
        #expect(first[.readingCount] == .readingCount(1))
        let second = try #require(await VM.next(watcher, within: 5))
        #expect(second[.readingCount] == .readingCount(2))
        watcher.cancel()
    }
}
