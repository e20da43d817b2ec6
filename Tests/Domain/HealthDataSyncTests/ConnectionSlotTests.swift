import HealthDataSync
import Testing

/// `max_connections`: at most N meters connected at once, the rest queued and served first come
/// first served (issue 39).
@Suite struct ConnectionSlotTests {
    static let a = MeterID("00:00:00:00:00:0A"), b = MeterID("00:00:00:00:00:0B"), c = MeterID("00:00:00:00:00:0C")
    static let d = MeterID("00:00:00:00:00:0D")

    @Test func slotsAreGrantedUpToTheLimitThenInOrder() {
        var slots = ConnectionSlots(limit: 2)
        #expect(slots.request(Self.a) == .granted)
        #expect(slots.request(Self.b) == .granted)
        #expect(slots.request(Self.c) == .queued(position: 1))
        #expect(slots.request(Self.d) == .queued(position: 2))
        #expect(slots.request(Self.c) == .queued(position: 1))  // asking again changes nothing
        #expect(slots.release(Self.b) == Self.c)
        #expect(slots.holders == [Self.a, Self.c])
        // A meter that comes back while others wait queues behind them: nobody starves.
        #expect(slots.request(Self.b) == .queued(position: 2))
        #expect(slots.release(Self.a) == Self.d)
        #expect(slots.release(Self.c) == Self.b)
        #expect(slots.release(Self.d) == nil)
        #expect(slots.release(Self.b) == nil)
        #expect(slots.holders.isEmpty && slots.queue.isEmpty)
    }

    @Test func leavingTheQueueFreesNoSlot() {
        var slots = ConnectionSlots(limit: 1)
        #expect(slots.request(Self.a) == .granted)
        #expect(slots.request(Self.b) == .queued(position: 1))
        #expect(slots.request(Self.c) == .queued(position: 2))
        #expect(slots.release(Self.b) == nil)
        #expect(slots.queue == [Self.c])
        #expect(slots.release(Self.a) == Self.c)
        var unlimited = ConnectionSlots(limit: nil)
        for meter in [Self.a, Self.b, Self.c, Self.d] { #expect(unlimited.request(meter) == .granted) }
    }

    /// Five meters, two slots, all asked at once: never more than two past `queued` at a time,
    /// every meter syncs, and they leave the queue in the order they entered it.
    @Test func theEngineConnectsAtMostTheLimitAndServesTheQueueInOrder() async throws {
        let fixtures: [FixtureMeter] = [.accuChekGuide, .careSens, .taiDoc, .foraFull, .contourNextOne]
        let scripts = fixtures.map { fixture -> MeterScript in
            var script = fixture.script
            script.requiresBond = false
            return script
        }
        try await withEngine(scripts, maxConnections: 2) { engine, transport, _, log in
            // Connects wait for a permit, so the first two hold their slots until the other three
            // have queued, and the meters then finish one at a time: each permit is given once the
            // meter granted the last freed slot has started (its `connecting`). The order seen is the
            // order of the grants, whatever the machine's timing.
            transport.holdConnects()
            func count(_ phase: SyncPhase) -> Int {
                log.all.filter { if case .phaseChanged(_, phase) = $0 { true } else { false } }.count
            }
            func finishedCount() -> Int { log.all.filter { if case .finished = $0 { true } else { false } }.count }
            let results = try await withThrowingTaskGroup(of: SyncSessionRecord.self) { group in
                for script in scripts { group.addTask { try await engine.sync(meter: script.id, force: true) } }
                for _ in 0..<2500 where await engine.connectionSlots.queue.count < 3 || count(.connecting) < 2 {
                    try await Task.sleep(for: .milliseconds(2))
                }
                #expect(await engine.connectionSlots.queue.count == 3)
                for done in 1...5 {
                    transport.permitConnects(1)
                    for _ in 0..<2500 where finishedCount() < done || count(.connecting) < min(5, done + 2) {
                        try await Task.sleep(for: .milliseconds(2))
                    }
                }
                var results: [SyncSessionRecord] = []
                for try await record in group { results.append(record) }
                return results
            }
            #expect(results.count == 5)
            #expect(results.allSatisfy { $0.result == .success }, "\(results.map(\.result))")
            var active: Set<MeterID> = []
            var most = 0
            var queued: [MeterID] = []
            var served: [MeterID] = []
            for event in log.all {
                switch event {
                case .phaseChanged(let meter, .queued):
                    queued.append(meter)
                case .phaseChanged(let meter, .connecting):
                    if queued.contains(meter) { served.append(meter) }
                    active.insert(meter)
                    most = max(most, active.count)
                case .finished(let meter, _):
                    active.remove(meter)
                default:
                    break
                }
            }
            #expect(most == 2)
            #expect(queued.count == 3)
            #expect(served == queued)
            #expect(await engine.connectionSlots.holders.isEmpty)
        }
    }

    @Test func aQueuedMeterThatIsAbortedLeavesTheQueue() async throws {
        var first = FixtureMeter.contourNextOne.script
        first.requiresBond = false
        first.stallAfter = 2  // holds its slot until its timeouts run out
        var second = FixtureMeter.careSens.script
        second.requiresBond = false
        let firstID = first.id, secondID = second.id
        try await withEngine([first, second], configuration: shortTimeouts, maxConnections: 1) { engine, _, _, _ in
            async let held = engine.sync(meter: firstID, force: true)
            for _ in 0..<500 where await !engine.connectionSlots.holders.contains(firstID) { try await Task.sleep(for: .milliseconds(2)) }
            async let waiting = engine.sync(meter: secondID, force: true)
            for _ in 0..<500 where await !engine.connectionSlots.queue.contains(secondID) { try await Task.sleep(for: .milliseconds(2)) }
            #expect(await engine.connectionSlots.queue == [secondID])
            await engine.abort(meter: secondID, reason: "test")
            let record = try await waiting
            #expect(record.result == .aborted)
            #expect(await engine.connectionSlots.queue.isEmpty)
            _ = try await held
        }
    }
}
