import GlucoseReport
import JSON
import SugarWire
import Testing

/// The report reads readings as the typed compact reading (`Wire.CompactReading`), not by string
/// keys with defaults: what a reading means comes from its kind, a malformed object is left out.
@Suite struct ReportReadingTypedTests {
    static func reading(flags: [String] = [], mgdL: Double? = 104, meal: String? = nil, person: String? = nil) -> Wire.CompactReading {
        Wire.CompactReading(
            id: 42, meter: "AA:BB:CC:DD:EE:FF", epoch: 3, sequenceNumber: 17,
            time: .init(iso: "2024-04-02T06:30:00Z", epochMillis: 1_712_039_400_000, local: "2024-04-02T08:30:00+02:00", utcOffsetMinutes: 120),
            mgdL: mgdL, mmolL: mgdL.map { $0 / 18.0156 }, flags: flags, type: nil, sampleLocation: nil,
            meal: meal.map { Wire.Coded(name: $0, code: 1) }, person: person)
    }

    static func exclusion(_ result: Result<ReportReading, ReportReading.ExclusionError>) -> ReportReading.Exclusion? {
        if case .failure(let why) = result { return why.exclusion }
        return nil
    }

    @Test func aGlucoseReadingKeepsItsFacts() throws {
        let reading = try ReportReading.from(Self.reading(meal: "preprandial", person: "Ana")).get()
        #expect(reading.id == 42 && reading.meter == "AA:BB:CC:DD:EE:FF" && reading.epochMillis == 1_712_039_400_000)
        #expect(reading.readingID == "AA:BB:CC:DD:EE:FF/3/17")
        #expect(reading.result == .mgdL(104) && reading.meal == .beforeMeal && reading.person == "Ana")
        #expect(reading.local.hour == 8 && reading.local.minute == 30 && reading.local.utcOffsetMinutes == 120)
    }

    @Test func whatIsNotGlucoseIsLeftOutWithItsReason() {
        #expect(Self.exclusion(ReportReading.from(Self.reading(flags: ["controlSolution"]))) == .controlSolution)
        #expect(Self.exclusion(ReportReading.from(Self.reading(flags: ["ketone"]))) == .notGlucose)
        #expect(Self.exclusion(ReportReading.from(Self.reading(flags: ["noValue"], mgdL: nil))) == .notGlucose)
        #expect(Self.exclusion(ReportReading.from(Self.reading(flags: ["suspect"]))) == .notGlucose)
        #expect(Self.exclusion(ReportReading.from(Self.reading(mgdL: nil))) == .notGlucose)
    }

    @Test func hiAndLoStayHiAndLo() throws {
        #expect(try ReportReading.from(Self.reading(flags: ["hi"], mgdL: nil)).get().result == .hi)
        #expect(try ReportReading.from(Self.reading(flags: ["lo", "timeFault"], mgdL: nil)).get().result == .lo)
    }

    @Test func theJSONFormIsReadThroughTheTypedReading() throws {
        let typed = Self.reading(meal: "fasting")
        let parsed = try ReportReading.parse(typed.json).get()
        #expect(parsed == (try ReportReading.from(typed).get()))
        // What is not a reading (no id, no time) is unreadable, not a reading with made-up defaults.
        #expect(Self.exclusion(ReportReading.parse(["mgdL": 100, "flags": []])) == .unreadable)
        #expect(Self.exclusion(ReportReading.parse(.string("reading"))) == .unreadable)
    }
}
