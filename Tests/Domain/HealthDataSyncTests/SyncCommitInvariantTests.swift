import GlucoseProfile
import HealthDataSync
import Testing
import TestSupport

/// The state machine under random event orders (records, contexts, RACP answers, write
/// completions and failures, timers, the link dropping, aborts, the store answering late or
/// failing): whatever comes, the two rules that keep readings from being lost hold.
/// 1. At most one batch is with the store at a time (the engine runs each commit as its own
///    task, so two in flight could be stored in either order, and a kill between them keeps the
///    later one only).
/// 2. A batch's high-water mark never covers a record the meter holds that is neither stored by
///    an earlier batch the store accepted nor in the batch itself.
/// The meter holds every number after the high-water mark. Once the machine writes a report
/// request, records come in order from the first the request asks for (each report write starts
/// over); before it, a record that comes is the rest of an earlier procedure (a killed gateway's
/// report still running on the meter): any number, ahead of the ones the report will send.
/// `SUGARD_SYNC_FUZZ_SEED` replays one seed; `SUGARD_SYNC_FUZZ_RUNS` sets how many.
@Suite struct SyncCommitInvariantTests {
    @Test func oneBatchAtATimeAndTheMarkNeverClaimsAMissingRecord() {
        let runs = environmentValue("SUGARD_SYNC_FUZZ_RUNS").flatMap { Int($0) } ?? 3_000
        let fixed = environmentValue("SUGARD_SYNC_FUZZ_SEED").flatMap { UInt64($0) }
        var seeds = SplitMix(seed: 0x5EED_C0DE)
        for _ in 0..<(fixed == nil ? runs : 1) {
            let seed = fixed ?? seeds.next()
            if let failure = Self.run(seed: seed) {
                Issue.record("seed \(seed) (SUGARD_SYNC_FUZZ_SEED=\(seed) replays it): \(failure)")
                return
            }
        }
    }

    /// The BlueZ soak's loss (seed 3913082735): a gateway killed mid-report left the meter sending;
    /// the next one got record 14 of that report while it subscribed, took it, and its first chunk
    /// (14, then 1) set the mark to 14 over records 2 to 13, which a kill then lost. A record
    /// before this attempt's report request is skipped now; the report brings it in order.
    @Test func aRecordLeftFromAnEarlierProcedureIsSkippedAndTheMarkFollowsTheReport() throws {
        var h = Harness(configuration: SyncConfiguration(chunkRecords: 2, chunkSeconds: 2))
        h.send(.start)
        h.send(.connected(Harness.bareServices))
        _ = h.record(14)
        h.send(.notificationsEnabled(.glucoseMeasurement))
        _ = h.record(15)
        h.send(.notificationsEnabled(.recordAccessControlPoint))
        #expect(h.sm.received == 0)
        #expect(h.sm.anomalySummary.count(of: .recordBeforeReport) == 2)
        #expect(h.racp([0x05, 0x00, 0x11, 0x00]) == ["write(01 01 report)", "startTimer(operation, 20.0)"])
        _ = h.record(1)
        h.now = Instant(epochMillis: h.now.epochMillis + 2_500)
        #expect(h.record(2).contains("commit(2, hw 2, running) chunk"))
        let chunk = try #require(h.committedBatch)
        #expect(chunk.readings.map(\.sequenceNumber) == [1, 2])
        #expect(chunk.newHighWater == 2)
    }

    /// One random attempt; the first broken rule, or nil.
    static func run(seed: UInt64) -> String? {
        var random = SplitMix(seed: seed)
        let highWater: UInt16? = random.below(3) == 0 ? nil : UInt16(random.below(5))
        var h = Harness(
            highWater: highWater,
            configuration: SyncConfiguration(chunkRecords: 1 + random.below(4), chunkSeconds: Double(1 + random.below(3))))
        var clockWritable = Harness.fullServices.characteristics.filter { $0.uuid != .currentTime }
        clockWritable.append(.init(uuid: .currentTime, service: .currentTimeService, properties: [.read, .write]))
        let services = [Harness.bareServices, Harness.fullServices, MeterServices(characteristics: clockWritable)][random.below(3)]
        // A clock an hour slow, so that a meter whose clock can be set gets it set after the download.
        let clock = currentTimeBytes(LocalDateTime(year: 2024, month: 6, day: 15, hour: 9, minute: 0))
        let floor = highWater ?? 0
        var reportCursor: UInt16?  // the next record of the report, once one was asked for
        var lastSent: UInt16?
        var stored: Set<UInt16> = []  // records in batches the store accepted
        var withStore: [SyncBatch] = []
        var log: [String] = []

        func step(_ event: SyncEvent) -> String? {
            let actions = h.send(event)
            log.append("\(event) -> \(actions)")
            for action in h.lastActions {
                if case .writeRACP(_, purpose: .report) = action {
                    reportCursor = floor &+ 1
                    lastSent = nil
                }
                if case .finished = action, !withStore.isEmpty {
                    return "the attempt finished while a batch was with the store\n" + log.suffix(30).joined(separator: "\n")
                }
                guard case .commit(let batch) = action else { continue }
                if !withStore.isEmpty {
                    return "a second batch went to the store while one was there\n" + log.suffix(30).joined(separator: "\n")
                }
                if let mark = batch.newHighWater {
                    let inBatch = Set(batch.readings.map(\.sequenceNumber))
                    let lost = mark > floor ? (floor + 1...mark).filter { !stored.contains($0) && !inBatch.contains($0) } : []
                    if !lost.isEmpty {
                        return "mark \(mark) covers \(lost.sorted()), neither stored nor in the batch\n"
                            + log.suffix(30).joined(separator: "\n")
                    }
                }
                withStore.append(batch)
            }
            return nil
        }

        func answer(ok: Bool) -> String? {
            guard !withStore.isEmpty else { return nil }
            let batch = withStore.removeFirst()
            guard ok else { return step(.commitFailed(StoreError(.busy, "database is locked"))) }
            stored.formUnion(batch.readings.map(\.sequenceNumber))
            var session = batch.session
            session.id = 7
            session.stored = batch.readings.count
            return step(
                .committed(
                    CommitResult(
                        inserted: [], duplicates: 0, sequenceResets: 0,
                        meter: StoredMeter(
                            identity: batch.meter, features: nil, firstSeen: h.now, lastSeen: h.now, highWater: batch.newHighWater,
                            epoch: 0, lastSync: nil, lastSyncResult: nil, readingCount: stored.count),
                        session: session, highestInCurrentEpoch: stored.max())))
        }

        if let failure = step(.start) { return failure }
        if let failure = step(.connected(services)) { return failure }
        let failure = TransportError(.timeout, "no answer")
        for _ in 0..<(20 + random.below(80)) {
            h.now = Instant(epochMillis: h.now.epochMillis + Int64(random.below(1_500)))
            var result: String?
            switch random.below(30) {
            case 0...6:
                // The report's next record (sometimes with a context to follow), now and then
                // repeated; before any report, a record of an earlier procedure.
                let seq: UInt16
                if let next = reportCursor {
                    seq = random.below(8) == 0 && lastSent != nil ? lastSent! : next
                    if seq == next { reportCursor = next &+ 1 }
                } else {
                    seq = floor &+ 1 &+ UInt16(random.below(12))
                }
                lastSent = seq
                result = step(.value(.glucoseMeasurement, measurementBytes(seq: seq, 2024, 6, 14, 8, Int(seq % 60), sfloat: mgdl(100), contextFollows: seq % 3 == 0)))
            case 7:
                result = step(.value(.glucoseMeasurementContext, contextBytes(seq: lastSent ?? floor &+ 1, meal: 1)))
            case 8:
                result = step(.value(.recordAccessControlPoint, [0x06, 0x00, 0x01, 0x01]))  // success
            case 9:
                result = step(.value(.recordAccessControlPoint, [0x06, 0x00, 0x01, 0x06]))  // no records found
            case 10:
                result = step(.value(.recordAccessControlPoint, [0x05, 0x00, UInt8(random.below(9)), 0x00]))  // count
            case 11:
                result = step(.writeCompleted([.count, .report, .abort, .verify][random.below(4)]))
            case 12:
                result = step(.writeFailed([.count, .report, .abort, .verify][random.below(4)], failure))
            case 13:
                result = step(.timerFired(random.below(2) == 0 ? .operation : .retry))
            case 14:
                result = step(.disconnected(reason: "link lost"))
            case 15:
                result = step(.abort(reason: "stopped"))
            case 16:
                result = step(.disconnectCompleted)
            case 17:
                result = step(.notificationsEnabled([.glucoseMeasurement, .glucoseMeasurementContext, .recordAccessControlPoint][random.below(3)]))
            case 18:
                result = step(.readCompleted([.glucoseFeature, .manufacturerName][random.below(2)], [0x00, 0x04]))
            case 24:
                result = step(.readCompleted(.currentTime, clock))
            case 25:
                result = step(.characteristicWritten(.currentTime))
            case 26:
                result = step(.characteristicWriteFailed(.currentTime, failure))
            case 27:
                let uuid: BluetoothUUID = [.glucoseFeature, .manufacturerName, .currentTime, .glucoseMeasurement][random.below(4)]
                result = random.below(2) == 0 ? step(.readFailed(uuid, failure)) : step(.notificationsFailed(uuid, failure))
            case 28:
                result = step(random.below(2) == 0 ? .paired : .pairingFailed(TransportError(.authenticationFailed, "no")))
            case 29:
                result = step(.writeFailed(.report, TransportError(.authenticationRequired, "bond first")))
            case 19, 20, 21:
                result = answer(ok: true)
            case 22, 23:
                result = answer(ok: random.below(3) != 0)
            default:
                result = nil
            }
            if let result { return result }
            if !h.sm.isActive, withStore.isEmpty { break }
        }
        return nil
    }
}
