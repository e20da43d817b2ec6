import GlucoseProfile
import Testing

/// What a Verio record's value means (Tidepool uploader `oneTouchVerioBLE.js`: the meter measures
/// 20–600 mg/dL; above is HI, below LO; 0 is no reading) and the Glucose Measurement it becomes.
@Suite struct VerioHiLoTests {
    static let seconds: UInt32 = 817_300_000  // 2025-11-24 on the meter clock

    @Test(arguments: [
        (UInt16(0), VerioRecord.Meaning.noValue), (1, .lo), (19, .lo), (20, .glucose), (123, .glucose), (600, .glucose),
        (601, .hi), (612, .hi), (4095, .hi), (65535, .hi),
    ])
    func aValueMeansWhatTheMeasuringRangeSays(mgdL: UInt16, meaning: VerioRecord.Meaning) {
        #expect(VerioRecord(meterSeconds: Self.seconds, mgdL: mgdL).meaning == meaning)
    }

    @Test func aRecordThatIsNotBloodGlucoseStaysSoWhateverItsValue() {
        for value: UInt16 in [0, 12, 120, 700] {
            #expect(VerioRecord(meterSeconds: Self.seconds, mgdL: value, trailer: [1, 0, 0, 0, 0]).meaning == .notBloodGlucose)
        }
    }

    /// HI and LO become what a GLS meter sends for them: ±INF with the status bit; the value field
    /// itself stays in the record's 11 bytes.
    @Test func hiAndLoBecomeTheGlsEncodingOfHiAndLo() throws {
        let hi = VerioRecord(meterSeconds: Self.seconds, mgdL: 612).measurement(sequenceNumber: 38)
        #expect(hi.sequenceNumber == 38)
        #expect(hi.concentration == .positiveInfinity)
        #expect(hi.sensorStatus == .resultTooHigh)
        #expect(hi.mgdL == nil)
        let lo = VerioRecord(meterSeconds: Self.seconds, mgdL: 12).measurement(sequenceNumber: 39)
        #expect(lo.concentration == .negativeInfinity)
        #expect(lo.sensorStatus == .resultTooLow)
        let none = VerioRecord(meterSeconds: Self.seconds, mgdL: 0).measurement(sequenceNumber: 40)
        #expect(none.concentration?.special == .nan)
        #expect(none.sensorStatus == nil)
        let glucose = VerioRecord(meterSeconds: Self.seconds, mgdL: 123).measurement(sequenceNumber: 41)
        #expect(glucose.mgdL == 123)
        #expect(glucose.sensorStatus == nil)
        #expect(glucose.unit == .kilogramsPerLiter)
        #expect(glucose.baseTime == Verio.dateTime(meterSeconds: Self.seconds))
        #expect(glucose.timeOffsetMinutes == nil)
        // Round trip through the GLS codec: what the store keeps decodes to the same thing.
        for m in [hi, lo, none, glucose] {
            #expect(try GlucoseMeasurement(bytes: m.encoded()) == m)
        }
    }
}
