/// An IEEE 11073-20601 16-bit SFLOAT, kept as its bit pattern (GLS §3).
///
/// `exponent` is the high 4 bits and `mantissa` the low 12 bits, both two's complement. The five reserved
/// patterns are matched on the exact 16-bit value, as Nordic's library does: 0x07FF NaN, 0x0800 NRes,
/// 0x07FE +INF, 0x0802 −INF and 0x0801 reserved. Any other pattern is a finite number, even with a
/// mantissa of 0x7FF and a non-zero exponent (0xF7FF is 204.7). Specials never turn into numbers.
public struct SFloat: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// A reserved SFLOAT value.
    public enum Special: String, Hashable, Sendable, CaseIterable {
        /// 0x07FF, not a number.
        case nan
        /// 0x0800, not at this resolution.
        case nres
        /// 0x07FE, positive infinity (a meter's HI reading).
        case positiveInfinity
        /// 0x0802, negative infinity (a meter's LO reading).
        case negativeInfinity
        /// 0x0801, reserved for future use.
        case reserved

        /// The bit pattern of this special.
        public var rawValue16: UInt16 {
            switch self {
            case .nan: 0x07FF
            case .nres: 0x0800
            case .positiveInfinity: 0x07FE
            case .negativeInfinity: 0x0802
            case .reserved: 0x0801
            }
        }

        /// The name used in JSON: `nan`, `nres`, `+inf`, `-inf` or `reserved`.
        public var name: String {
            switch self {
            case .nan: "nan"
            case .nres: "nres"
            case .positiveInfinity: "+inf"
            case .negativeInfinity: "-inf"
            case .reserved: "reserved"
            }
        }
    }

    /// Largest mantissa magnitude the encoder produces, so that no number collides with a special.
    public static let maximumMantissa = 2045

    /// The 16-bit pattern as sent on the wire (little-endian there).
    public let rawValue: UInt16

    /// Wraps a bit pattern; every pattern is a valid SFLOAT.
    @inlinable public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// Builds a number from a decimal mantissa and exponent.
    /// - Throws: `.outOfRange` when |mantissa| > 2045 (field `mantissa`) or the exponent is outside −8…7
    ///   (field `exponent`). The error offset is 0.
    public init(mantissa: Int, exponent: Int) throws(GlucoseProfileError) {
        guard (-Self.maximumMantissa...Self.maximumMantissa).contains(mantissa) else {
            throw GlucoseProfileError(
                offset: 0, field: "mantissa", reason: .outOfRange(value: mantissa, expected: "-2045…2045"))
        }
        guard (-8...7).contains(exponent) else {
            throw GlucoseProfileError(offset: 0, field: "exponent", reason: .outOfRange(value: exponent, expected: "-8…7"))
        }
        let m = UInt16(bitPattern: Int16(mantissa)) & 0x0FFF
        let e = UInt16(bitPattern: Int16(exponent)) & 0x000F
        self.rawValue = e << 12 | m
    }

    /// The bit pattern of a special value.
    public init(special: Special) { self.rawValue = special.rawValue16 }

    /// The nearest SFLOAT to `value`, with as many significant digits as fit in a mantissa of ±2045.
    ///
    /// NaN becomes `.nan`, infinities and magnitudes above 2045 × 10⁷ become ±INF, and magnitudes
    /// below the smallest step round to zero.
    public init(_ value: Double) {
        if value.isNaN {
            self.init(special: .nan)
            return
        }
        if value.isInfinite || abs(value) > Double(Self.maximumMantissa) * 1e7 {
            self.init(special: value < 0 ? .negativeInfinity : .positiveInfinity)
            return
        }
        // Smallest exponent whose rounded mantissa still fits: most precision without colliding.
        for exponent in -8...7 {
            let scaled = (decimalValue(mantissa: 1, exponent: -exponent) * value).rounded()
            if abs(scaled) <= Double(Self.maximumMantissa) {
                let m = UInt16(bitPattern: Int16(scaled)) & 0x0FFF
                let e = UInt16(bitPattern: Int16(exponent)) & 0x000F
                self.init(rawValue: e << 12 | m)
                return
            }
        }
        self.init(special: .nan)  // unreachable: 7 covers every finite value accepted above
    }

    /// NaN (0x07FF).
    public static let nan = SFloat(special: .nan)
    /// NRes (0x0800).
    public static let nres = SFloat(special: .nres)
    /// +INFINITY (0x07FE).
    public static let positiveInfinity = SFloat(special: .positiveInfinity)
    /// −INFINITY (0x0802).
    public static let negativeInfinity = SFloat(special: .negativeInfinity)

    /// The 12-bit two's-complement mantissa, −2048…2047.
    public var mantissa: Int16 { Int16(bitPattern: self.rawValue << 4) >> 4 }

    /// The 4-bit two's-complement decimal exponent, −8…7.
    public var exponent: Int8 { Int8(truncatingIfNeeded: Int16(bitPattern: self.rawValue) >> 12) }

    /// The special this pattern encodes, or nil for a number.
    public var special: Special? {
        switch self.rawValue {
        case 0x07FF: .nan
        case 0x0800: .nres
        case 0x07FE: .positiveInfinity
        case 0x0802: .negativeInfinity
        case 0x0801: .reserved
        default: nil
        }
    }

    /// mantissa × 10^exponent, computed by dividing by a power of ten for negative exponents so that
    /// 0xF065 is exactly the Double nearest 10.1; nil for a special.
    public var value: Double? {
        guard self.special == nil else { return nil }
        return decimalValue(mantissa: Int(self.mantissa), exponent: Int(self.exponent))
    }

    /// mantissa × 10^(exponent + shift): the value in a unit `shift` decades smaller, rounded once.
    /// For example shift 5 turns kg/L into mg/dL. Nil for a special.
    public func value(shiftingExponentBy shift: Int) -> Double? {
        guard self.special == nil else { return nil }
        return decimalValue(mantissa: Int(self.mantissa), exponent: Int(self.exponent) + shift)
    }

    /// The special value's name, or `<mantissa>e<exponent>`.
    public var description: String {
        if let special = self.special { return special.name }
        return "\(self.mantissa)e\(self.exponent)"
    }
}

/// Powers of ten that a Double holds exactly (10^0 … 10^22).
private let exactPowersOfTen: [Double] = {
    var powers: [Double] = [1]
    for _ in 1...22 { powers.append(powers[powers.count - 1] * 10) }
    return powers
}()

/// mantissa × 10^exponent with a single rounding step.
func decimalValue(mantissa: Int, exponent: Int) -> Double {
    let m = Double(mantissa)
    if exponent >= 0 {
        return exponent <= 22 ? m * exactPowersOfTen[exponent] : m * pow10(exponent)
    } else {
        return -exponent <= 22 ? m / exactPowersOfTen[-exponent] : m / pow10(-exponent)
    }
}

private func pow10(_ n: Int) -> Double {
    var result = 1.0
    for _ in 0..<n { result *= 10 }
    return result
}
