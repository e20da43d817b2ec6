extension Wire.Unit {
    /// The unit for people: "mg/dL" or "mmol/L".
    public var symbol: String { self == .mgdl ? "mg/dL" : "mmol/L" }

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
