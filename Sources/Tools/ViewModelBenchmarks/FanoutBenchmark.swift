#if canImport(Glibc)
import Glibc
#endif
import GlucoseProfile
import GlucoseStoreFixtures
import HealthDataSync
public import JSON
import Synchronization
import Locking

/// `sugar-bench fanout W E`: W watchers of the view model (half on `lastReading`, half on every
/// field) while E owner turns shaped like a real sync are written (progress ticks, then readings,
/// then phase changes).
///
/// Reports how many messages the watchers received against the naive design (the whole state to
/// every watcher on every change), the p99 latency from write to receipt, and peak RSS.
public enum FanoutBenchmark {
    /// How far one watcher has got, for the coordinator to see when everyone has converged.
    final class Consumer: Sendable {
        let allFields: Bool
        let watcher: Watcher<ViewState>
        let mark = Atomic<UInt64>(0)
        let delivered = Atomic<Int>(0)
        let latencies = Lock<[Int64]>([])

        init(allFields: Bool, watcher: Watcher<ViewState>) {
            self.allFields = allFields
            self.watcher = watcher
        }

        func run(clock: ContinuousClock) async {
            var latencies: [Int64] = []
            var delivered = 0
            for await message in self.watcher {
                let received = clock.now
                if !message.isSnapshot {
                    delivered += 1
                    if let at = message.changedAt { latencies.append(Self.micros(received - at)) }
                }
                let mark = self.allFields ? message.globalRevision : message.fields[.lastReading]?.revision ?? 0
                if mark > self.mark.load(ordering: .relaxed) { self.mark.store(mark, ordering: .releasing) }
            }
            self.delivered.store(delivered, ordering: .releasing)
            let collected = latencies
            self.latencies.withLock { $0 = collected }
        }

        static func micros(_ duration: Duration) -> Int64 {
            let (seconds, attoseconds) = duration.components
            return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
        }
    }

    /// Runs the benchmark and returns its figures as a JSON object.
    public static func run(watchers: Int, emissions: Int, policy: WatchPolicy = .coalesced) async -> JSONValue {
        let watchers = max(1, watchers)
        let emissions = max(1, emissions)
        let clock = ContinuousClock()
        let store = ModelStore(
            viewModel: ViewModel(
                ViewState(
                    daemon: DaemonInfo(
                        version: "bench", startedAt: Instant(epochMillis: 0),
                        storage: StorageHealth(status: .ok, path: ":memory:")))))
        let meterID = MeterID("C0:26:DA:00:BE:5C")
        let meter = store.model(for: MeterIdentity(id: meterID, manufacturer: "Bench", model: "Meter"))
        let consumers = (0..<watchers).map { i in
            let all = i % 2 == 1
            return Consumer(
                allFields: all,
                watcher: store.viewModel.watch(fields: all ? nil : [.lastReading], policy: policy, outputCap: 1 << 20))
        }

        let started = clock.now
        var writesDone = started
        // How long each owner write takes: it must not grow with watchers (writes never wait for them).
        var writeCosts: [Int64] = []
        writeCosts.reserveCapacity(emissions)
        func timed(_ write: () -> Void) {
            let before = clock.now
            write()
            writeCosts.append(Consumer.micros(clock.now - before))
        }
        await withTaskGroup(of: Void.self) { group in
            for consumer in consumers { group.addTask { await consumer.run(clock: clock) } }

            // Shape of a real sync: 60 % progress ticks, 30 % readings, 10 % phase changes.
            let ticks = emissions * 6 / 10
            let readings = emissions * 3 / 10
            let phases = emissions - ticks - readings
            let phaseCycle: [SyncPhase] = [.connecting, .readingDeviceInfo, .readingDeviceInfo, .subscribing, .counting,
                .receiving, .committing, .disconnecting, .idle]
            for i in 0..<ticks {
                timed { meter.update { $0.progress = SyncProgress(received: i + 1, expected: ticks) } }
                await Task.yield()
            }
            for i in 0..<readings {
                let summary = Self.reading(meter: meterID, sequence: i)
                timed {
                    store.viewModel.update {
                        $0.lastReading = summary
                        $0.readingCount = i + 1
                    }
                }
                await Task.yield()
            }
            for i in 0..<phases {
                timed {
                    meter.update {
                        $0.sync = phaseCycle[i % phaseCycle.count]
                        $0.link = $0.sync == .idle ? .disconnected : .connected
                    }
                }
                await Task.yield()
            }

            writesDone = clock.now
            // Wait until every watcher has seen the final value of what it watches, then end them.
            let finalAll = store.viewModel.revision
            let finalReading = store.viewModel.revision(of: .lastReading)
            while !consumers.allSatisfy({ $0.mark.load(ordering: .acquiring) >= ($0.allFields ? finalAll : finalReading) }) {
                try? await Task.sleep(for: .milliseconds(1))
            }
            for consumer in consumers { consumer.watcher.cancel() }
            await group.waitForAll()
        }
        let elapsed = clock.now - started

        let delivered = consumers.reduce(0) { $0 + $1.delivered.load(ordering: .acquiring) }
        var latencies = consumers.flatMap { consumer in consumer.latencies.withLock { $0 } }
        latencies.sort()
        let p99 = latencies.isEmpty ? 0 : latencies[max(0, Int((Double(latencies.count) * 0.99).rounded(.up)) - 1)]
        let p50 = latencies.isEmpty ? 0 : latencies[latencies.count / 2]
        writeCosts.sort()
        let writeP99 = writeCosts.isEmpty ? 0 : writeCosts[max(0, Int((Double(writeCosts.count) * 0.99).rounded(.up)) - 1)]
        let naive = watchers * emissions
        let reduction = (1 - Double(delivered) / Double(naive)) * 100
        let stats = store.stats
        store.shutdown()

        return [
            "watchers": .int(Int64(watchers)),
            "emissions": .int(Int64(emissions)),
            "policy": .string(policy.rawValue),
            "messagesDelivered": .int(Int64(delivered)),
            "messagesNaive": .int(Int64(naive)),
            "reductionPercent": .double((reduction * 10).rounded() / 10),
            "p50DeliveryMicros": .int(p50),
            "p99DeliveryMicros": .int(p99),
            "writeP99Micros": .int(writeP99),
            "elapsedMillis": .int(Consumer.micros(elapsed) / 1000),
            "writeMillis": .int(Consumer.micros(writesDone - started) / 1000),
            "collectorsStarted": .int(Int64(stats.collectorsStarted)),
            "droppedWatchers": .int(Int64(stats.droppedWatchers)),
            "peakRSSBytes": peakRSSBytes().map { .int($0) } ?? .null,
        ]
    }

    static func reading(meter: MeterID, sequence: Int) -> ReadingSummary {
        let mg = Double(80 + sequence % 120)
        let time = LocalDateTime(year: 2026, month: 11, day: 30).adding(seconds: Int64(sequence) * 3600)
        return ReadingSummary(
            Reading(
                meter: meter, sequenceNumber: UInt16(truncatingIfNeeded: sequence), measurementBytes: [],
                contextBytes: nil, baseTime: time, timeOffsetMinutes: 0, concentrationRaw: nil,
                unit: .kilogramsPerLiter, sampleType: 1, sampleLocation: 1, sensorStatus: nil, meal: nil,
                instant: Instant(epochSeconds: time.secondsSinceEpoch),
                time: TimeResolution(
                    method: .meterClock, zone: "UTC", utcOffsetSeconds: 0, meterClockSkewSeconds: 0, meterLocalTime: time),
                mgdL: mg, mmolL: nil, flags: []))
    }

    /// `VmHWM` from /proc/self/status, in bytes; nil where there is no procfs.
    public static func peakRSSBytes() -> Int64? { peakResidentSetBytes().map { Int64($0) } }
}
