import GlucoseProfile
import HealthDataSync
import JSON
import SugarAPI

/// The report's test data: records as two meters send them (a Roche in mg/dL, a Contour in mmol/L),
/// turned into readings by the production `ReadingBuilder` in Europe/Berlin, around the spring clock
/// change of 2024-03-31 (02:00 CET -> 03:00 CEST) and the autumn one of 2024-10-27 (03:00 CEST -> 02:00 CET).
enum ReportSamples {
    static let roche = MeterIdentity(
        id: MeterID("60:77:71:8A:0B:14"), name: "meter+06512345", manufacturer: "Roche", model: "Accu-Chek Guide",
        serialNumber: "92500012345")
    static let contour = MeterIdentity(
        id: MeterID("C0:26:DA:11:22:33"), name: "Contour7830H6123456", manufacturer: "Ascensia Diabetes Care",
        model: "Contour Next One", serialNumber: "7830H6123456789012")
    static let berlin: TimeZoneRules = {
        do {
            return try TimeZoneRules(posix: "CET-1CEST,M3.5.0,M10.5.0/3", identifier: "Europe/Berlin")
        } catch {
            fatalError("Berlin rules: \(error)")
        }
    }()

    enum Value {
        case mgdL(Int)
        /// Tenths of mmol/L, sent in mol/L.
        case mmolTenths(Int)
        case hi
        case lo
    }

    /// One record: meter wall-clock time as the meter shows it, value, meal code (GLS), control solution.
    struct Record {
        var meter: MeterIdentity
        var sequence: UInt16
        var local: (Int, Int, Int, Int, Int)
        var value: Value
        var meal: UInt8?
        var control = false
        /// The second of the meter's clock (most records are on the minute).
        var second = 0
    }

    /// The spring set. Local times are the meters' clocks (Berlin wall time); r7's 02:30 on 2024-03-31 never
    /// existed and sugard moves it on by the gap, to 03:30 CEST.
    static let spring: [Record] = [
        Record(meter: roche, sequence: 1, local: (2024, 3, 30, 7, 10), value: .mgdL(95), meal: 3),  // r1 fasting
        Record(meter: roche, sequence: 2, local: (2024, 3, 30, 7, 45), value: .mgdL(110), meal: 1),  // r2 before meal
        Record(meter: roche, sequence: 3, local: (2024, 3, 30, 12, 30), value: .mgdL(210), meal: 2),  // r3 after meal
        Record(meter: roche, sequence: 4, local: (2024, 3, 30, 22, 15), value: .mgdL(65), meal: 5),  // r4 bedtime
        Record(meter: roche, sequence: 5, local: (2024, 3, 30, 23, 50), value: .mgdL(105), control: true),  // r5 control
        Record(meter: roche, sequence: 6, local: (2024, 3, 31, 1, 30), value: .mgdL(50)),  // r6 no tag
        Record(meter: roche, sequence: 7, local: (2024, 3, 31, 2, 30), value: .mgdL(140)),  // r7 -> 03:30 CEST
        Record(meter: roche, sequence: 8, local: (2024, 3, 31, 7, 20), value: .mgdL(60), meal: 3),  // r8 fasting
        Record(meter: contour, sequence: 1, local: (2024, 3, 31, 7, 50), value: .mmolTenths(83), meal: 1),  // r9 8.3 mmol/L
        Record(meter: roche, sequence: 9, local: (2024, 3, 31, 13, 0), value: .hi, meal: 2),  // r10 HI after meal
        Record(meter: contour, sequence: 2, local: (2024, 3, 31, 19, 0), value: .mmolTenths(140)),  // r11 14.0 mmol/L
        Record(meter: roche, sequence: 10, local: (2024, 4, 1, 7, 5), value: .mgdL(130), meal: 3),  // r12 fasting
        Record(meter: contour, sequence: 3, local: (2024, 4, 1, 7, 30), value: .mmolTenths(40), meal: 3),  // r13 4.0 mmol/L
        Record(meter: roche, sequence: 11, local: (2024, 4, 1, 3, 10), value: .lo),  // r14 LO
        Record(meter: roche, sequence: 12, local: (2024, 4, 1, 18, 0), value: .mgdL(180), meal: 2),  // r15 after meal
        Record(meter: roche, sequence: 13, local: (2024, 4, 1, 21, 30), value: .mgdL(181), meal: 5),  // r16 bedtime
    ]

    /// 2024-03-30 00:00 CET to 2024-04-02 00:00 CEST: 71 hours (the night of the change is an hour short).
    static let springFrom: Int64 = 1_711_753_200_000  // 2024-03-29T23:00:00Z
    static let springTo: Int64 = 1_712_008_800_000  // 2024-04-01T22:00:00Z

    /// The autumn set: 01:30 CEST, 02:30 (happened twice; sugard takes the earlier, CEST) and 03:30 CET.
    static let autumn: [Record] = [
        Record(meter: roche, sequence: 20, local: (2024, 10, 27, 1, 30), value: .mgdL(100)),
        Record(meter: roche, sequence: 21, local: (2024, 10, 27, 2, 30), value: .mgdL(120)),
        Record(meter: roche, sequence: 22, local: (2024, 10, 27, 3, 30), value: .mgdL(140)),
    ]

    /// Two weeks of a busy meter (1-14 June 2024, CEST): six readings a day at fixed times, values
    /// spread over every range, meal tags in turn. For the print layout, not for hand-worked figures.
    static let fortnight: [Record] = (0..<14).flatMap { day in
        [(3, 0), (7, 30), (12, 15), (15, 40), (19, 10), (22, 45)].enumerated().map { k, time in
            Record(
                meter: roche, sequence: UInt16(100 + day * 6 + k), local: (2024, 6, 1 + day, time.0, time.1),
                value: .mgdL(45 + (day * 37 + k * 53) % 230), meal: [3, 1, 2, 1, 2, 5][k])
        }
    }

    /// A low taken at 22:37:45 (Berlin, CET): the lows list keeps its seconds.
    static let lateLow = Record(meter: roche, sequence: 14, local: (2024, 4, 1, 22, 37), value: .mgdL(55), meal: 5, second: 45)

    /// `days` busy days from 2024-01-01 (Berlin) for two meters: the Roche six times a day, the Contour
    /// (mmol/L) three times, at times with seconds, values over every range (lows every day), meal tags in
    /// turn. For the print layout of long periods, not for hand-worked figures.
    static func busy(days: Int) -> [Record] {
        var records: [Record] = []
        var date = DateTime(year: 2024, month: 1, day: 1)
        for day in 0..<days {
            let (y, m, d) = (Int(date.year), Int(date.month), Int(date.day))
            for (k, time) in [(6, 50, 12), (9, 15, 33), (12, 40, 5), (15, 20, 47), (18, 45, 10), (22, 37, 45)].enumerated() {
                records.append(
                    Record(
                        meter: roche, sequence: UInt16(1000 + day * 6 + k), local: (y, m, d, time.0, time.1),
                        value: .mgdL(45 + (day * 37 + k * 53) % 230), meal: [3, 2, 1, 2, 1, 5][k], second: time.2))
            }
            for (k, time) in [(7, 30, 0), (13, 10, 20), (20, 5, 55)].enumerated() {
                records.append(
                    Record(
                        meter: contour, sequence: UInt16(100 + day * 3 + k), local: (y, m, d, time.0, time.1),
                        value: .mmolTenths(25 + (day * 13 + k * 29) % 150), meal: [1, 2, 5][k], second: time.2))
            }
            date = date.adding(minutes: 1440) ?? date
        }
        return records
    }

    /// The reading sugard makes of a record.
    static func reading(_ record: Record) -> Reading {
        let (year, month, day, hour, minute) = record.local
        let concentration: SFloat
        var unit: ConcentrationUnit = .kilogramsPerLiter
        var status: SensorStatus = []
        do {
            switch record.value {
            case .mgdL(let v): concentration = try SFloat(mantissa: v, exponent: -5)
            case .mmolTenths(let t):
                concentration = try SFloat(mantissa: t, exponent: -4)
                unit = .molesPerLiter
            case .hi:
                concentration = .positiveInfinity
                status = .resultTooHigh
            case .lo:
                concentration = .negativeInfinity
                status = .resultTooLow
            }
        } catch {
            fatalError("SFLOAT: \(error)")
        }
        let measurement = GlucoseMeasurement(
            sequenceNumber: record.sequence,
            baseTime: DateTime(
                year: UInt16(year), month: UInt8(month), day: UInt8(day), hours: UInt8(hour), minutes: UInt8(minute),
                seconds: UInt8(record.second)),
            timeOffsetMinutes: 0, concentration: concentration, unit: unit, type: .capillaryWholeBlood,
            sampleLocation: record.control ? .controlSolution : .finger, sensorStatus: status,
            contextFollows: record.meal != nil)
        let context = record.meal.map { MeasurementContext(sequenceNumber: record.sequence, meal: Meal(code: $0)) }
        let builder = ReadingBuilder(
            meter: record.meter.id, profile: QuirkTable.builtIn.profile(for: record.meter),
            resolver: TimeResolver(zone: self.berlin, skewSeconds: 0), recordCount: nil)
        return builder.reading(
            measurementBytes: measurement.encoded(), measurement: measurement, contextBytes: context?.encoded(), context: context)
    }

    /// The readings as `ListReadings` shows them (ids 1, 2, … in order).
    static func json(_ records: [Record]) -> [JSONValue] {
        records.enumerated().map { index, record in
            ReadingJSON.object(
                StoredReading(id: Int64(index + 1), epoch: 0, storedAt: Instant(epochMillis: 1_712_100_000_000), reading: self.reading(record)))
        }
    }
}
