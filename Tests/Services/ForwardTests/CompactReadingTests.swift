import GlucoseProfile
import HealthDataSync
import JSON
import SugarAPI
import SugarForward
import SugarWire
import Testing

/// `FollowReadings(compact: true)` (what sugard-forward's sinks ask for) against the full reading
/// object: the same MQTT payload bytes and the same Nightscout entry and treatments, for readings
/// made by the production `ReadingBuilder` (HI, LO, control solution, ketone, no value, meals,
/// mmol/L, a person, a zone with an offset).
@Suite struct CompactReadingTests {
    static let berlin: TimeZoneRules = {
        do {
            return try TimeZoneRules(posix: "CET-1CEST,M3.5.0,M10.5.0/3", identifier: "Europe/Berlin")
        } catch {
            fatalError("Berlin rules: \(error)")
        }
    }()

    static func stored(
        _ id: Int64, manufacturer: String = "Roche", sequence: UInt16, concentration: SFloat?, unit: ConcentrationUnit = .kilogramsPerLiter,
        status: SensorStatus? = nil, location: SampleLocation = .finger, meal: UInt8? = nil, person: String? = nil, epoch: Int = 0
    ) -> StoredReading {
        let meter = MeterID("60:77:71:8A:0B:\(10 + id % 3)")
        let measurement = GlucoseMeasurement(
            sequenceNumber: sequence, baseTime: DateTime(year: 2024, month: 7, day: 3, hours: 8, minutes: UInt8(id % 60)),
            timeOffsetMinutes: 0, concentration: concentration, unit: concentration == nil ? nil : unit,
            type: concentration == nil ? nil : .capillaryWholeBlood, sampleLocation: concentration == nil ? nil : location,
            sensorStatus: status, contextFollows: meal != nil)
        let context = meal.map { MeasurementContext(sequenceNumber: sequence, meal: Meal(code: $0)) }
        let builder = ReadingBuilder(
            meter: meter, profile: QuirkTable.builtIn.profile(for: MeterIdentity(id: meter, manufacturer: manufacturer)),
            resolver: TimeResolver(zone: Self.berlin, skewSeconds: 0), recordCount: nil)
        let reading = builder.reading(
            measurementBytes: measurement.encoded(), measurement: measurement, contextBytes: context?.encoded(), context: context)
        return StoredReading(id: id, epoch: epoch, storedAt: Instant(epochMillis: 1_720_000_000_000 + id), reading: reading, person: person)
    }

    static func samples() throws -> [StoredReading] {
        [
            Self.stored(1, sequence: 1, concentration: try SFloat(mantissa: 95, exponent: -5), meal: 3, person: "alice"),
            Self.stored(2, sequence: 2, concentration: try SFloat(mantissa: 83, exponent: -4), unit: .molesPerLiter),
            Self.stored(3, sequence: 3, concentration: .positiveInfinity, status: .resultTooHigh, meal: 2),
            Self.stored(4, sequence: 4, concentration: .negativeInfinity, status: .resultTooLow, person: "bob"),
            Self.stored(5, sequence: 5, concentration: try SFloat(mantissa: 105, exponent: -5), location: .controlSolution),
            Self.stored(6, manufacturer: "i-SENS", sequence: 6, concentration: try SFloat(mantissa: 12, exponent: -5), meal: 6),
            Self.stored(7, sequence: 7, concentration: nil),
            Self.stored(8, sequence: 8, concentration: .nan, meal: 5, epoch: 2),
            Self.stored(9, sequence: 9, concentration: try SFloat(mantissa: 181, exponent: -5), meal: 4, person: "alice"),
        ]
    }

    @Test func compactAndFullGiveTheSamePayloadAndNightscoutEntry() throws {
        let samples = try Self.samples()
        let flags = Set(samples.flatMap(\.reading.flags.names))
        #expect(flags.isSuperset(of: ["hi", "lo", "controlSolution", "ketone", "noValue"]), "the samples cover \(flags)")
        var entries = 0
        for stored in samples {
            // The daemon's compact reading (from the store) and the wire's projection of the full
            // object ListReadings sends are the same value, so payloads and entries agree.
            let full = try Wire.Reading(json: ReadingJSON.object(stored))
            let compact = Wire.CompactReading(stored)
            #expect(compact == Wire.CompactReading(full), "reading \(stored.id)")
            #expect(ReadingExport.identifier(compact) == ReadingExport.identifier(full))
            #expect(ReadingExport.identifier(full) == "\(stored.reading.meter.rawValue)/\(stored.epoch)/\(stored.reading.sequenceNumber)")
            // Every compact key is a key of the full object with the same value (nested objects:
            // the compact one's keys).
            for (key, value) in ReadingJSON.compact(stored).objectValue?.entries.map({ ($0.key, $0.value) }) ?? [] {
                Self.expectSubset(value, of: ReadingJSON.object(stored)[key], path: key)
            }
            if ReadingExport.nightscoutEntry(compact) != nil { entries += 1 }
        }
        #expect(entries == 3, "readings 1, 2 and 9 are Nightscout entries")
        // The sample cases show in the payload as they should.
        let payloads = try samples.map { try JSONValue(parsing: try ForwardTopics.payloadBytes(Wire.CompactReading($0))) }
        #expect(payloads[0]["meal"] == "fasting" && payloads[0]["person"] == "alice")
        #expect(payloads[2]["mgdL"] == .null && payloads[2]["flags"]?.arrayValue?.contains("hi") == true)
        #expect(payloads[4]["controlSolution"] == .bool(true))
        #expect(payloads[6]["sampleType"] == .null && payloads[6]["mgdL"] == .null)
        #expect(payloads[7]["id"] == .string("60:77:71:8A:0B:12/2/8"))
    }

    static func expectSubset(_ compact: JSONValue, of full: JSONValue?, path: String, sourceLocation: SourceLocation = #_sourceLocation) {
        if case .object(let object) = compact {
            for entry in object.entries {
                Self.expectSubset(entry.value, of: full?[entry.key], path: path + "." + entry.key, sourceLocation: sourceLocation)
            }
        } else {
            #expect(compact == full, "\(path)", sourceLocation: sourceLocation)
        }
    }
}
