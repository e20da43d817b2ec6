import GlucoseProfile

extension Wire.Unit {
    /// The unit for people: "mg/dL" or "mmol/L".
    public var symbol: String { self == .mgdl ? "mg/dL" : "mmol/L" }

    /// The ways people write a unit (lower case, longest first): `mg/dL`, `mgdl`, `mg`, `mmol/L`,
    /// `mmoll`, `mmol`.
    static let spellings: [(String, Wire.Unit)] = [
        ("mg/dl", .mgdl), ("mgdl", .mgdl), ("mg", .mgdl), ("mmol/l", .mmol), ("mmoll", .mmol), ("mmol", .mmol),
    ]

    /// The unit a person wrote (`--unit`, a configuration value), in any case: nil when it is none
    /// of ``spellings``.
    public init?(text: String) {
        let lowered = text.lowercased()
        guard let unit = Self.spellings.first(where: { $0.0 == lowered })?.1 else { return nil }
        self = unit
    }

    /// Text for a value in this unit: mg/dL without decimals, mmol/L with one.
    public func format(mgdL: Double?, mmolL: Double?) -> String? {
        switch self {
        case .mgdl: return mgdL.map { ReadingExport.formatted($0, digits: 0) }
        case .mmol: return mmolL.map { ReadingExport.formatted($0, digits: 1) }
        }
    }
}

/// People as the interface takes them (`AssignMeter`, `sugarctl meters assign`).
public enum Person {
    /// What a person's name may be, for error messages.
    public static let rule = "A person is named by 1 to 64 characters, without control characters."

    /// The name with surrounding white space removed, or nil when it breaks ``rule``.
    public static func validated(_ text: String) -> String? {
        let trimmed = String(text.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
        guard !trimmed.isEmpty, trimmed.count <= 64,
            !trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else { return nil }
        return trimmed
    }
}

extension Wire.Unit {
    /// A glucose value as people write it in a configuration: `70`, `70 mg/dL`, `3.9 mmol/L` (also
    /// `mgdl`, `mmol`, any case, with or without a space); a bare number is mg/dL. Returns mg/dL,
    /// or nil when the text is not a positive value below 1000 mg/dL (55.5 mmol/L). A bare number
    /// below 20 is refused (nil): it is almost certainly mmol/L written without its unit.
    public static func parseGlucose(_ text: String) -> Double? {
        var rest = Substring(text.lowercased())
        while rest.first == " " { rest.removeFirst() }
        while rest.last == " " { rest.removeLast() }
        var unit: Wire.Unit?
        for (suffix, meaning) in Self.spellings where rest.hasSuffix(suffix) {
            rest = rest.dropLast(suffix.count)
            unit = meaning
            break
        }
        while rest.last == " " { rest.removeLast() }
        guard let number = Double(rest), number.isFinite, number > 0 else { return nil }
        let mgdL = unit == .mmol ? number * glucoseMolarMass : number
        if unit == nil, number < 20 { return nil }
        return mgdL < 1000 ? mgdL : nil
    }
}

extension Wire.Unit {
    /// A mg/dL value as people read it in this unit, without the unit: "142", "7.9".
    public func number(mgdL: Double) -> String {
        self == .mgdl ? ReadingExport.formatted(mgdL, digits: 0) : ReadingExport.formatted(mgdL / glucoseMolarMass, digits: 1)
    }

    /// A mg/dL value as people read it in this unit, with the unit: "62 mg/dL", "3.4 mmol/L".
    public func text(mgdL: Double) -> String { self.number(mgdL: mgdL) + " " + self.symbol }
}
