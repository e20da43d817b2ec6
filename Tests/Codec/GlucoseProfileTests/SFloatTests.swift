import GlucoseProfile
import Testing

@Suite struct SFloatTests {
    @Test(arguments: [
        (UInt16(0xF065), 10.1), (0x0072, 114), (0xFF5E, -16.2), (0x2024, 3600), (0xB058, 0.00088),
        (0xF7FF, 204.7), (0x0000, 0), (0x87FD, 2045e-8),
    ])
    func decodesNumbersExactly(raw: UInt16, expected: Double) {
        let value = SFloat(rawValue: raw)
        #expect(value.special == nil)
        #expect(value.value == expected)
    }

    @Test func mantissaAndExponentAreTwosComplement() {
        let value = SFloat(rawValue: 0xFF5E)
        #expect(value.mantissa == -162)
        #expect(value.exponent == -1)
        #expect(SFloat(rawValue: 0xB058).exponent == -5)
        #expect(SFloat(rawValue: 0xB058).mantissa == 88)
        #expect(SFloat(rawValue: 0x7801).exponent == 7)
        #expect(SFloat(rawValue: 0x7801).mantissa == -2047)
    }

    @Test(arguments: [
        (UInt16(0x07FF), SFloat.Special.nan, "nan"), (0x0800, .nres, "nres"), (0x07FE, .positiveInfinity, "+inf"),
        (0x0802, .negativeInfinity, "-inf"), (0x0801, .reserved, "reserved"),
    ])
    func specialsStayDistinctAndNeverBecomeNumbers(raw: UInt16, special: SFloat.Special, name: String) {
        let value = SFloat(rawValue: raw)
        #expect(value.special == special)
        #expect(value.special?.name == name)
        #expect(value.value == nil)
        #expect(value.value(shiftingExponentBy: 5) == nil)
        #expect(SFloat(special: special).rawValue == raw)
    }

    @Test func specialsMatchTheExactBitPattern() {
        // Same low 12 bits as NaN but exponent −1: a number, not NaN (Nordic's exact-match rule).
        #expect(SFloat(rawValue: 0xF7FF).special == nil)
        #expect(SFloat(rawValue: 0x1800).special == nil)
        #expect(SFloat(rawValue: 0x1800).value == -20480)
    }

    @Test func encoderCapsTheMantissaAt2045() throws {
        #expect(try SFloat(mantissa: 2045, exponent: 0).rawValue == 0x07FD)
        #expect(try SFloat(mantissa: -2045, exponent: 0).rawValue == 0x0803)
        #expect(throws: GlucoseProfileError.self) { try SFloat(mantissa: 2046, exponent: 0) }
        #expect(throws: GlucoseProfileError.self) { try SFloat(mantissa: -2046, exponent: -1) }
        #expect(throws: GlucoseProfileError.self) { try SFloat(mantissa: 1, exponent: 8) }
        #expect(try SFloat(mantissa: 88, exponent: -5).rawValue == 0xB058)
        #expect(try SFloat(mantissa: 101, exponent: -1).rawValue == 0xF065)
    }

    @Test func doubleInitializerRoundTripsAndSaturates() {
        for value in [10.1, 114, -16.2, 3600, 0.00088, 5.5, 0] {
            #expect(SFloat(value).value == value, "value \(value)")
        }
        #expect(SFloat(Double.nan).special == .nan)
        #expect(SFloat(Double.infinity).special == .positiveInfinity)
        #expect(SFloat(-1e30).special == .negativeInfinity)
        #expect(abs(SFloat(2046).mantissa) <= 2045)
    }

    @Test func everyBitPatternIsEitherASpecialOrANumber() {
        for raw in UInt16.min...UInt16.max {
            let value = SFloat(rawValue: raw)
            #expect((value.special == nil) == (value.value != nil))
        }
    }
}
