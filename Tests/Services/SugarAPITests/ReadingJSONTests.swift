import GlucoseProfile
import HealthDataSync
import JSON
import SugarAPI
import SugarWire
import Testing

@Suite struct ReadingJSONTests {
    @Test func carriesDecodeKeysAndConclusions() throws {
        // Accu-Chek-shaped record: seq 4, 2019-02-27 11:10:30, +60 min, 88 mg/dL, capillary plasma, finger, LO bit.
        let bytes: [UInt8] = [0x1B, 0x04, 0x00, 0xE3, 0x07, 0x02, 0x1B, 0x0B, 0x0A, 0x1E, 0x3C, 0x00, 0x58, 0xB0, 0x12, 0x40, 0x00]
        let context: [UInt8] = [0x02, 0x04, 0x00, 0x01]
        let local = LocalDateTime(year: 2019, month: 2, day: 27, hour: 12, minute: 10, second: 30)
        let reading = Reading(
            meter: MeterID("c0:26:da:01:02:03"), sequenceNumber: 4, measurementBytes: bytes, contextBytes: context,
            baseTime: LocalDateTime(year: 2019, month: 2, day: 27, hour: 11, minute: 10, second: 30),
            timeOffsetMinutes: 60, concentrationRaw: 0xB058, unit: .kilogramsPerLiter, sampleType: 2,
            sampleLocation: 1, sensorStatus: 0x40, meal: 1,
            instant: Instant(epochSeconds: local.secondsSinceEpoch - 3600),
            time: TimeResolution(method: .meterClock, zone: "Europe/Berlin", utcOffsetSeconds: 3600,
                                 meterClockSkewSeconds: 12, meterLocalTime: local),
            mgdL: 88, mmolL: 88 / GlucoseUnit.molarMass, flags: [.lo])
        let json = ReadingJSON.object(StoredReading(id: 9, epoch: 0, storedAt: Instant(epochMillis: 5), reading: reading))
        let decoded = try GlucoseMeasurement(bytes: bytes).json
        for key in ["sequenceNumber", "baseTime", "timeOffsetMinutes", "concentration", "type", "sampleLocation", "sensorStatus"] {
            #expect(json[key] == decoded[key], "\(key)")
        }
        #expect(json["meter"] == "C0:26:DA:01:02:03")
        #expect(json["time"]?["iso"] == "2019-02-27T11:10:30Z")
        #expect(json["time"]?["epochMillis"] == .int(1_551_265_830_000))
        #expect(json["time"]?["local"] == "2019-02-27T12:10:30+01:00")
        #expect(json["flags"] == ["lo"])
        #expect(json["context"]?["meal"]?["name"] == "preprandial")
        #expect(json["mgdL"] == .double(88))
    }
}
