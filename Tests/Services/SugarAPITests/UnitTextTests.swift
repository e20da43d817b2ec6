import GlucoseProfile
import GlucoseReport
import SugarWire
import Testing

/// The one display unit (`Wire.Unit`) and the one way its text is read: `--unit`, the report, the
/// alert thresholds.
@Suite struct UnitTextTests {
    @Test func everySpellingPeopleWriteIsRead() {
        for text in ["mgdl", "mg/dL", "MG/DL", "mg", "Mgdl"] { #expect(Wire.Unit(text: text) == .mgdl, "\(text)") }
        for text in ["mmol", "mmol/L", "MMOL/L", "mmoll", "Mmol"] { #expect(Wire.Unit(text: text) == .mmol, "\(text)") }
        for text in ["", "none", "mg/l", "mmol/dl", " mgdl", "kg/L"] { #expect(Wire.Unit(text: text) == nil, "\(text)") }
    }

    @Test func glucoseValuesWithTheirUnit() {
        #expect(Wire.Unit.parseGlucose("70") == 70)
        #expect(Wire.Unit.parseGlucose("70 mg/dL") == 70)
        #expect(Wire.Unit.parseGlucose("70mgdl") == 70)
        #expect(Wire.Unit.parseGlucose(" 3.9 mmol/L ") == 3.9 * 18.0156)
        #expect(Wire.Unit.parseGlucose("3.9 MMOL") == 3.9 * 18.0156)
        // A bare number below 20 is almost certainly mmol/L without its unit: refused.
        #expect(Wire.Unit.parseGlucose("5") == nil)
        #expect(Wire.Unit.parseGlucose("1000 mg/dL") == nil)
        #expect(Wire.Unit.parseGlucose("-3 mmol/L") == nil)
        #expect(Wire.Unit.parseGlucose("high") == nil)
    }

    @Test func numbersAndTextInEachUnit() {
        #expect(Wire.Unit.mgdl.number(mgdL: 142.4) == "142")
        #expect(Wire.Unit.mmol.number(mgdL: 142.4) == "7.9")
        #expect(Wire.Unit.mgdl.text(mgdL: 62) == "62 mg/dL")
        #expect(Wire.Unit.mmol.text(mgdL: 62) == "3.4 mmol/L")
        // The report's text of a result: HI and LO as such.
        #expect(Wire.Unit.mmol.text(GlucoseResult.mgdL(90)) == "5.0")
        #expect(Wire.Unit.mgdl.text(GlucoseResult.hi) == "HI")
        #expect(Wire.Unit.mmol.text(GlucoseResult.lo) == "LO")
    }

    @Test func fixedPointTextRoundsHalfAwayFromZero() {
        #expect(ReadingExport.formatted(5.55, digits: 1) == "5.6")
        #expect(ReadingExport.formatted(-0.04, digits: 1) == "0.0")
        #expect(ReadingExport.formatted(-2.25, digits: 1) == "-2.3")
        #expect(ReadingExport.formatted(99.5, digits: 0) == "100")
        #expect(ReadingExport.formatted(4.005, digits: 2) == "4.01")
        #expect(ReadingExport.formatted(12, digits: 3) == "12.000")
    }
}
