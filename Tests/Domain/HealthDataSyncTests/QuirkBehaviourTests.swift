import GlucoseProfile
import HealthDataSync
import Testing

/// One test per quirk-table behaviour, through ReadingBuilder.
@Suite struct QuirkBehaviourTests {
    let meter = MeterID("C0:26:DA:01:02:03")

    func build(
        _ bytes: [UInt8], context: [UInt8]? = nil, manufacturer: String = "Acme", model: String? = nil, name: String? = nil,
        count: Int? = nil, skew: Int64? = 0
    ) throws -> Reading {
        let identity = MeterIdentity(id: self.meter, name: name, manufacturer: manufacturer, model: model)
        let profile = QuirkTable.builtIn.profile(for: identity)
        let builder = ReadingBuilder(meter: self.meter, profile: profile, resolver: TimeResolver(zone: .utc, skewSeconds: skew), recordCount: count)
        let m = try GlucoseMeasurement(bytes: bytes, options: .lenientDateTime)
        let c = try context.map { try MeasurementContext(bytes: $0) }
        return builder.reading(measurementBytes: bytes, measurement: m, contextBytes: context, context: c)
    }

    @Test func plainReadingKeepsRawFactsAndConvertsUnits() throws {
        let r = try self.build(measurementBytes(seq: 4, 2024, 6, 14, 8, 5, offset: 60, sfloat: 0xB058))
        #expect(r.mgdL == 88)
        #expect(abs((r.mmolL ?? 0) - 88 / 18.0156) < 1e-9)
        #expect(r.concentrationRaw == 0xB058 && r.unit == .kilogramsPerLiter)
        #expect(r.baseTime.isoString == "2024-06-14T08:05:00" && r.timeOffsetMinutes == 60)
        #expect(r.instant == Instant(epochSeconds: utc(2024, 6, 14, 9, 5)))
        #expect(r.flags.isEmpty && r.countsAsGlucose)
    }

    @Test func iSensMonthThirteenCarriesIntoTheNextYear() throws {
        let r = try self.build(measurementBytes(seq: 1, 2023, 13, 1, 0, 30, sfloat: mgdl(120)), manufacturer: "i-SENS")
        #expect(r.baseTime.month == 13)  // raw fact kept
        #expect(r.time.meterLocalTime.isoString == "2024-01-01T00:30:00")
        #expect(r.instant == Instant(epochSeconds: utc(2024, 1, 1, 0, 30)))
        #expect(r.flags == [.quirkApplied])
        #expect(r.time.quirks.contains("isens.month13"))
        // Another vendor's month 13 is not guessed at: the time is untrusted.
        let other = try self.build(measurementBytes(seq: 1, 2023, 13, 1, 0, 30, sfloat: mgdl(120)))
        #expect(other.flags.contains(.timeFault) && other.time.method == .untrusted)
    }

    @Test func iSensKetoneRecordsAreKeptApartFromGlucose() throws {
        let k = try self.build(
            measurementBytes(seq: 7, 2024, 6, 1, sfloat: mgdl(15), contextFollows: true), context: contextBytes(seq: 7, meal: 6),
            manufacturer: "i-SENS")
        #expect(k.flags.contains(.ketone) && k.flags.contains(.quirkApplied))
        #expect(k.mgdL == nil && k.mmolL == nil)
        #expect(k.ketoneMmolL == 1.5)
        #expect(!k.countsAsGlucose)
        #expect(k.meal == 6 && k.time.quirks.contains("isens.ketoneMeal6"))
        let high = try self.build(
            measurementBytes(seq: 8, 2024, 6, 1, sfloat: mgdl(95), contextFollows: true), context: contextBytes(seq: 8, meal: 6),
            manufacturer: "i-SENS")
        #expect(high.flags.contains(.hi) && high.ketoneMmolL == nil)
        // Meal 6 from a meter without the quirk is just a reserved meal code.
        let other = try self.build(measurementBytes(seq: 7, 2024, 6, 1, sfloat: mgdl(15)), context: contextBytes(seq: 7, meal: 6))
        #expect(!other.flags.contains(.ketone) && other.mgdL == 15)
    }

    @Test func iSensTimeOffsetIsNotAdded() throws {
        let r = try self.build(measurementBytes(seq: 1, 2024, 6, 1, 9, 0, offset: 120, sfloat: mgdl(100)), manufacturer: "i-SENS")
        #expect(r.instant == Instant(epochSeconds: utc(2024, 6, 1, 9)))
        #expect(r.time.quirks == ["isens.timeOffsetIgnored", "time.offsetIgnored"])
        let roche = try self.build(measurementBytes(seq: 1, 2024, 6, 1, 9, 0, offset: 120, sfloat: mgdl(100)), manufacturer: "Roche")
        #expect(roche.instant == Instant(epochSeconds: utc(2024, 6, 1, 11)))
    }

    @Test(arguments: [(UInt8(10), UInt8(1)), (UInt8(1), UInt8(4)), (UInt8(10), UInt8(4))])
    func controlSolutionIsFlaggedAndExcluded(type: UInt8, location: UInt8) throws {
        let r = try self.build(measurementBytes(seq: 2, 2024, 6, 1, sfloat: mgdl(110), type: type, location: location))
        #expect(r.flags.contains(.controlSolution))
        #expect(r.mgdL == 110)  // stored as measured
        #expect(!r.countsAsGlucose)
    }

    @Test func loAndHiStayLoAndHiNeverNumbersNeverDropped() throws {
        // Accu-Chek: LO as -INF (0x0802) with status bit 6.
        let lo = try self.build(measurementBytes(seq: 3, 2024, 6, 1, sfloat: 0x0802, status: 0x0040), manufacturer: "Roche")
        #expect(lo.flags.contains(.lo) && !lo.flags.contains(.hi))
        #expect(lo.mgdL == nil && lo.mmolL == nil)
        #expect(lo.concentrationRaw == 0x0802 && lo.sensorStatus == 0x0040)
        let hi = try self.build(measurementBytes(seq: 4, 2024, 6, 1, sfloat: 0x07FE, status: 0x0020))
        #expect(hi.flags.contains(.hi) && hi.mgdL == nil)
        // The status bit alone also means LO, whatever number came with it.
        let bitOnly = try self.build(measurementBytes(seq: 5, 2024, 6, 1, sfloat: mgdl(20), status: 0x0040))
        #expect(bitOnly.flags.contains(.lo) && bitOnly.mgdL == nil)
        let nan = try self.build(measurementBytes(seq: 6, 2024, 6, 1, sfloat: 0x07FF))
        #expect(nan.flags.contains(.noValue) && nan.mgdL == nil)
    }

    @Test func statusBitsBecomeDeviceAndTimeFaults() throws {
        let r = try self.build(measurementBytes(seq: 6, 2024, 6, 1, sfloat: mgdl(100), status: 0x0801 | 0x0004))
        #expect(r.flags.contains(.timeFault) && r.flags.contains(.deviceFault))
        #expect(r.time.method == .untrusted)
    }

    @Test func foraBogus2037RecordIsFlaggedWhenTheMeterIsFull() throws {
        let bogus = measurementBytes(seq: 451, 2037, 1, 1, sfloat: 0x07FE, status: 0x0020)
        let full = try self.build(bogus, manufacturer: "Manufacturer name", name: "FORA TNG", count: 451)
        #expect(full.flags.contains(.suspect) && full.flags.contains(.quirkApplied))
        #expect(!full.flags.contains(.hi) && full.mgdL == nil)
        #expect(full.time.quirks.contains("fora.bogus2037"))
        let notFull = try self.build(bogus, manufacturer: "Manufacturer name", name: "FORA TNG", count: 12)
        #expect(!notFull.flags.contains(.suspect) && notFull.flags.contains(.hi))
        // Other meters' 2037 dates are not touched.
        let other = try self.build(bogus, count: 451)
        #expect(!other.flags.contains(.suspect))
    }

    @Test func taiDocReversedSequencesAreRenumberedAndDeduplicatedByContent() throws {
        func r(_ seq: UInt16, _ day: Int) throws -> Reading {
            try self.build(measurementBytes(seq: seq, 2024, 6, day, sfloat: mgdl(100 + day)), manufacturer: "TaiDoc", model: "DM30b")
        }
        // First sync: seq 0 is the newest (June 3).
        let first = ReversedSequenceNormalizer.normalize(received: [try r(0, 3), try r(1, 2), try r(2, 1)], stored: [])
        #expect(first.readings.map(\.baseTime.day) == [1, 2, 3])
        #expect(first.readings.map(\.sequenceNumber) == [0, 1, 2])
        #expect(first.readings.allSatisfy { $0.time.quirks.contains("taidoc.reversedSequence") })
        // A new reading on June 4 renumbers everything on the meter.
        let second = ReversedSequenceNormalizer.normalize(
            received: [try r(0, 4), try r(1, 3), try r(2, 2), try r(3, 1)], stored: first.readings)
        #expect(second.alreadyStored == 3)
        #expect(second.readings.map(\.baseTime.day) == [4])
        #expect(second.readings.map(\.sequenceNumber) == [3])
        // The meter's own number stays in the raw bytes.
        #expect(second.readings[0].measurementBytes[1] == 0)
    }
}
