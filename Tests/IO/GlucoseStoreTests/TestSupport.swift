import Foundation
import GlucoseProfile
import HealthDataSync

@testable import GlucoseStore

/// A fresh temporary directory per test, removed when the value goes away.
final class TempDirectory {
    let path: String

    init() throws {
        let base = FileManager.default.temporaryDirectory.path
        self.path = base + "/sugard-store-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: self.path) }

    /// A database path inside the directory.
    var database: String { self.path + "/sugard.sqlite" }
}

let testMeter = MeterID("C0:26:DA:01:02:03")
let otherMeter = MeterID("C0:26:DA:0A:0B:0C")

func identity(_ id: MeterID = testMeter, serial: String? = "SN-1", name: String? = "meter") -> MeterIdentity {
    MeterIdentity(id: id, name: name, manufacturer: "Roche", model: "Accu-Chek Guide", serialNumber: serial, firmware: "1.0")
}

/// A reading whose measurement bytes are encoded from its fields (flags, seq, base time, offset,
/// SFLOAT in kg/L, type/location), so different content means different bytes.
/// `hour` defaults to one reading per hour by sequence number.
func makeReading(
    _ seq: UInt16, meter: MeterID = testMeter, base: LocalDateTime? = nil, mgdL: Int = 100,
    context: [UInt8]? = nil, flags: ReadingFlags = [], statusByte: UInt8 = 0x11
) -> Reading {
    let base = base ?? LocalDateTime(year: 2024, month: 3, day: 1).adding(seconds: Int64(seq) * 3600)
    let raw = UInt16(0xB000 | (mgdL & 0x0FFF))
    var bytes: [UInt8] = [0x03, UInt8(seq & 0xff), UInt8(seq >> 8), UInt8(base.year & 0xff), UInt8(base.year >> 8)]
    bytes += [UInt8(base.month), UInt8(base.day), UInt8(base.hour), UInt8(base.minute), UInt8(base.second), 0, 0]
    bytes += [UInt8(raw & 0xff), UInt8(raw >> 8), statusByte]
    return Reading(
        meter: meter, sequenceNumber: seq, measurementBytes: bytes, contextBytes: context, baseTime: base,
        timeOffsetMinutes: 0, concentrationRaw: raw, unit: .kilogramsPerLiter, sampleType: 1, sampleLocation: 1,
        sensorStatus: nil, meal: nil, instant: Instant(epochSeconds: base.secondsSinceEpoch - 3600),
        time: TimeResolution(
            method: .meterClock, zone: "Europe/Berlin", utcOffsetSeconds: 3600, meterClockSkewSeconds: 12,
            meterLocalTime: base),
        mgdL: Double(mgdL), mmolL: Double(mgdL) / GlucoseUnit.molarMass, flags: flags)
}

func makeBatch(
    _ readings: [Reading], meter: MeterIdentity = identity(), newHighWater: UInt16?, result: SyncResult = .success,
    started: Instant = Instant(epochSeconds: 1_710_000_000), error: String? = nil
) -> SyncBatch {
    SyncBatch(
        meter: meter, features: 0x0402, readings: readings, newHighWater: newHighWater,
        session: SyncSessionRecord(
            meter: meter.id, started: started, ended: Instant(epochMillis: started.epochMillis + 4000), result: result,
            expected: readings.count, received: readings.count, error: error))
}

/// A batch of consecutive readings whose high-water mark is the last sequence number.
func syncOf(_ seqs: ClosedRange<UInt16>, meter: MeterIdentity = identity(), started: Instant = Instant(epochSeconds: 1_710_000_000))
    -> SyncBatch
{
    makeBatch(seqs.map { makeReading($0, meter: meter.id) }, meter: meter, newHighWater: seqs.upperBound, started: started)
}

/// A store with a fixed clock, so `storedAt` and event times are predictable.
func openStore(_ path: String, busyMilliseconds: Int = 5000) throws -> SQLiteReadingStore {
    try SQLiteReadingStore(
        path: path,
        options: StoreOptions(busyTimeoutMilliseconds: busyMilliseconds, now: { Instant(epochSeconds: 1_720_000_000) }))
}

/// Runs one SQL query on the store's connection and returns its first column as integers.
func ints(_ store: SQLiteReadingStore, _ sql: String) async throws -> [Int] {
    try await store.textForTesting(sql).map { Int($0) ?? -1 }
}
