/// The unit glucose values are shown in: mg/dL or mmol/L. One type for the daemon's display unit,
/// a person's unit, the interface's `Unit` (`Wire.Unit` is this type) and the config files' `unit`
/// keys; the raw values are the names they all use (`mgdl`, `mmol`).
public enum GlucoseUnit: String, Hashable, Sendable, CaseIterable {
    /// Milligrams per decilitre.
    case mgdl
    /// Millimoles per litre.
    case mmol

    /// Grams per mole of glucose, used for mg/dL ↔ mmol/L (the codec's constant).
    public static let molarMass = glucoseMolarMass
}
