import GlucoseProfile
import TestSupport

/// Bytes from a hex string; spaces are ignored. Test-only, traps on bad input.
func hex(_ text: String) -> [UInt8] {
    let digits = text.filter { !$0.isWhitespace }
    precondition(digits.count % 2 == 0, "odd hex in fixture: \(text)")
    var bytes: [UInt8] = []
    var index = digits.startIndex
    while index < digits.endIndex {
        let next = digits.index(index, offsetBy: 2)
        bytes.append(UInt8(digits[index..<next], radix: 16)!)
        index = next
    }
    return bytes
}

/// SplitMix64: a seeded generator so a failing fuzz run can be replayed from its printed seed.
typealias SplitMix64 = SplitMix

/// Packets from the spec tables and public test suites (glucose-profile.md, parser-anchors.md).
enum SpecExamples {
    /// GLS §2, Accu-Chek capture shape: flags 0x1B (offset, concentration kg/L, status, context follows),
    /// seq 4, 2019-02-27 11:10:30, +60 min, 0xB058 = 88 mg/dL, type 2 / location 1 (0x12), status bit 6 (LO).
    static let accuChekStyle = hex("1b 0400 e307 02 1b 0b 0a 1e 3c00 58b0 12 4000")
    /// Minimal record: flags 0, seq 1, base time only.
    static let minimal = hex("00 0100 e307 02 1b 0b 0a 1e")
    /// mol/L record: flags 0x06, 5.5 mmol/L as 55 × 10⁻⁴ mol/L (0xC037), type 8 / location 15 (0xF8).
    static let molar = hex("06 0a00 e307 0c 1f 17 3b 3b 37c0 f8")
    /// Accu-Chek LO: −INF concentration (0x0802) with status bit 6.
    static let negativeInfinity = hex("0a 0500 e307 02 1b 0b 0a 1e 0208 11 4000")
    /// Context with every field (JDRF-style): flags 0xFF incl. extended flags and liters, carbs 0xD072 =
    /// 0.114 kg breakfast, meal postprandial, tester 2 / health 1 (0x12), exercise 60 s at 50 %, medication
    /// rapid-acting 0xA05D, HbA1c 0xF02A = 4.2 %.
    static let fullContext = hex("ff 0100 00 01 72d0 02 12 3c00 32 01 5da0 2af0")
    /// Context with medication in kg: flags 0x10, medication 0xA05D = 9.3 × 10⁻⁵ kg.
    static let medicationKilograms = hex("10 0200 01 5da0")
}
