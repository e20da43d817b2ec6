import GlucoseProfile
import HealthDataSync

/// A deterministic synthetic ingest: several meters' sync batches with re-sent records and one
/// sequence reset. Used by the ingest benchmark, the crash test's writer and tests; it is not
/// health data and never reaches a real database of the daemon.
public struct SyntheticIngest: Sendable {
    /// Readings handed to the store in total, duplicates included.
    public var readings: Int
    public var meters: Int
    public var batchSize: Int
    /// Share of `readings` that are re-sends of earlier records of the same meter.
    public var duplicateFraction: Double
    /// Every n-th batch is an interrupted attempt (readings stored, no high-water mark); 0 = never.
    public var interruptedEvery: Int
    public var seed: UInt64

    /// One record the store must end up holding exactly once, with the epoch it belongs in.
    public struct Expected: Hashable, Sendable {
        public var reading: Reading
        public var epoch: Int
    }

    public init(
        readings: Int, meters: Int = 4, batchSize: Int = 500, duplicateFraction: Double = 0.1,
        interruptedEvery: Int = 0, seed: UInt64 = 1
    ) {
        self.readings = max(0, readings)
        // Sequence numbers are 16-bit: add meters rather than wrap.
        let unique = self.readings - Int(Double(self.readings) * duplicateFraction)
        self.meters = max(max(1, meters), (unique + 59_999) / 60_000)
        self.batchSize = max(1, batchSize)
        self.duplicateFraction = duplicateFraction
        self.interruptedEvery = interruptedEvery
        self.seed = seed
    }

    /// The meter the sequence reset happens on (the first one), half-way through its records.
    public var resetMeter: MeterID { Self.meterID(0) }
    /// Sequence resets the store should detect.
    public var expectedResets: Int { self.uniqueCounts()[0] >= 2 ? 1 : 0 }
    public var duplicateCount: Int { Int(Double(self.readings) * self.duplicateFraction) }

    public static func meterID(_ index: Int) -> MeterID {
        func byte(_ value: Int) -> String {
            let hex = String(value & 0xff, radix: 16, uppercase: true)
            return hex.count == 1 ? "0" + hex : hex
        }
        return MeterID("C0:26:DA:00:" + byte(index >> 8) + ":" + byte(index))
    }

    private func uniqueCounts() -> [Int] {
        let unique = self.readings - self.duplicateCount
        return (0..<self.meters).map { unique / self.meters + ($0 < unique % self.meters ? 1 : 0) }
    }

    /// The distinct records of every meter, in the order the meter produced them.
    public func expected() -> [[Expected]] {
        self.uniqueCounts().enumerated().map { meterIndex, count in
            let half = meterIndex == 0 && count >= 2 ? count / 2 : count
            return (0..<count).map { i in
                let epoch = i < half ? 0 : 1
                let seq = UInt16(epoch == 0 ? i + 1 : i - half + 1)
                return Expected(reading: Self.reading(meter: meterIndex, index: i, seq: seq, seed: self.seed), epoch: epoch)
            }
        }
    }

    /// The sync batches in commit order (meters take turns).
    public func batches(startedAt start: Instant = Instant(epochSeconds: 1_735_689_600)) -> [SyncBatch] {
        var random = SplitMix(seed: self.seed)
        let expected = self.expected()
        var perMeterBatches: [[SyncBatch]] = []
        for (meterIndex, records) in expected.enumerated() {
            let dups = records.isEmpty ? 0 : self.duplicateCount / self.meters + (meterIndex < self.duplicateCount % self.meters ? 1 : 0)
            // Submission stream: each record once, plus `dups` re-sends of earlier ones spread evenly.
            var stream: [Expected] = []
            stream.reserveCapacity(records.count + dups)
            let every = dups > 0 ? max(1, records.count / dups) : Int.max
            var sent = 0
            for (i, record) in records.enumerated() {
                stream.append(record)
                if (i + 1) % every == 0 && sent < dups {
                    stream.append(records[Int(random.next() % UInt64(i + 1))])
                    sent += 1
                }
            }
            while sent < dups, !records.isEmpty {
                stream.append(records[Int(random.next() % UInt64(records.count))])
                sent += 1
            }
            let identity = MeterIdentity(
                id: Self.meterID(meterIndex), name: "Synthetic \(meterIndex)", manufacturer: "sugard", model: "synthetic",
                serialNumber: "SYN\(meterIndex)", firmware: "1.0")
            var batches: [SyncBatch] = []
            var offset = 0
            while offset < stream.count {
                let chunk = Array(stream[offset..<min(stream.count, offset + self.batchSize)])
                offset += chunk.count
                // What a meter reports: the highest sequence number of its current epoch.
                let topEpoch = chunk.map(\.epoch).max() ?? 0
                let mark = chunk.filter { $0.epoch == topEpoch }.map(\.reading.sequenceNumber).max()
                let started = Instant(epochMillis: start.epochMillis + Int64(batches.count) * 60_000)
                batches.append(
                    SyncBatch(
                        meter: identity, features: 0x0400, readings: chunk.map(\.reading), newHighWater: mark,
                        session: SyncSessionRecord(
                            meter: identity.id, started: started, ended: Instant(epochMillis: started.epochMillis + 5000),
                            result: .success, expected: chunk.count, received: chunk.count)))
            }
            perMeterBatches.append(batches)
        }
        var out: [SyncBatch] = []
        var round = 0
        while out.count < perMeterBatches.reduce(0, { $0 + $1.count }) {
            for batches in perMeterBatches where round < batches.count {
                var batch = batches[round]
                if self.interruptedEvery > 0 && (out.count + 1) % self.interruptedEvery == 0 {
                    batch.newHighWater = nil
                    batch.session.result = .interrupted
                    batch.session.error = "The meter disconnected (synthetic)."
                }
                out.append(batch)
            }
            round += 1
        }
        return out
    }

    /// A plausible record: a Glucose Measurement packet (time offset, kg/L concentration,
    /// capillary blood from a finger) with its decoded facts. Three hours apart per record.
    static func reading(meter: Int, index: Int, seq: UInt16, seed: UInt64) -> Reading {
        var random = SplitMix(seed: seed &+ UInt64(meter) &* 1_000_003 &+ UInt64(index))
        let mgdL = 40 + Int(random.next() % 361)
        let concentrationRaw = UInt16(0xB000 | mgdL)  // exponent −5, mantissa mg/dL
        let base = LocalDateTime(year: 2020, month: 1, day: 1).adding(
            seconds: Int64(index) * 10_800 + Int64(meter) * 60 + Int64(random.next() % 60))
        var bytes: [UInt8] = [0x03, UInt8(seq & 0xff), UInt8(seq >> 8)]
        bytes += [UInt8(base.year & 0xff), UInt8(base.year >> 8), UInt8(base.month), UInt8(base.day)]
        bytes += [UInt8(base.hour), UInt8(base.minute), UInt8(base.second), 0, 0]
        bytes += [UInt8(concentrationRaw & 0xff), UInt8(concentrationRaw >> 8), 0x11]
        let time = TimeResolution(
            method: .meterClock, zone: "Europe/Berlin", utcOffsetSeconds: 3600, meterClockSkewSeconds: 0,
            meterLocalTime: base)
        return Reading(
            meter: Self.meterID(meter), sequenceNumber: seq, measurementBytes: bytes, contextBytes: nil, baseTime: base,
            timeOffsetMinutes: 0, concentrationRaw: concentrationRaw, unit: .kilogramsPerLiter, sampleType: 1,
            sampleLocation: 1, sensorStatus: nil, meal: nil,
            instant: Instant(epochSeconds: base.secondsSinceEpoch - 3600), time: time, mgdL: Double(mgdL),
            mmolL: Double(mgdL) / GlucoseUnit.molarMass, flags: [])
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): a small seeded generator, the same sequence on every
/// platform, so synthetic data and benchmark corpora are the same on every run.
public struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    public init(seed: UInt64) { self.state = seed }

    public mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A value in 0..<bound, from the high bits (bias is negligible for small bounds).
    public mutating func next(below bound: Int) -> Int {
        Int(truncatingIfNeeded: (self.next() >> 11) % UInt64(bound))
    }
}

/// The name the synthetic ingest and its tests use.
typealias SplitMix = SplitMix64
