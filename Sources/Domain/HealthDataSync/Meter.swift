/// A meter's stable identifier: its Bluetooth address in canonical form (`C0:26:DA:01:02:03`).
///
/// BlueZ reports a bonded LE meter under its identity address, so the address survives reconnects
/// and re-pairing. Device Information strings (serial number) are kept beside it in
/// ``MeterIdentity`` to tell a replaced meter from the same one.
public struct MeterID: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The canonical address, or the name as given for a meter that has no address (replay).
    public var rawValue: String

    /// Creates an identifier from any spelling of a Bluetooth address (`c0:26:da:01:02:03`,
    /// `C0-26-DA-01-02-03`, `c026da010203`, or a BlueZ object path ending in `dev_C0_26_DA_01_02_03`).
    /// Anything that is not a 48-bit address is kept verbatim, so replay meters can use names.
    public init(rawValue: String) {
        self.rawValue = MeterID.canonical(rawValue) ?? rawValue
    }

    /// Same as ``init(rawValue:)``.
    public init(_ value: String) { self.init(rawValue: value) }

    /// The raw value.
    public var description: String { self.rawValue }

    /// Ordered by raw value (addresses sort by their hex text).
    public static func < (lhs: MeterID, rhs: MeterID) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The canonical `XX:XX:XX:XX:XX:XX` form of an address, or nil when `text` is not one.
    public static func canonical(_ text: String) -> String? {
        var candidate = Substring(text)
        // A BlueZ object path: keep what follows the last "dev_".
        let bytes = Array(text.utf8)
        if bytes.count >= 4 {
            for start in stride(from: bytes.count - 4, through: 0, by: -1)
            where bytes[start..<start + 4].elementsEqual("dev_".utf8) {
                candidate = Substring(String(decoding: bytes[(start + 4)...], as: UTF8.self))
                break
            }
        }
        var digits: [Character] = []
        for ch in candidate {
            if ch.isHexDigit {
                digits.append(Character(ch.uppercased()))
            } else if ch == ":" || ch == "-" || ch == "_" {
                continue
            } else {
                return nil
            }
        }
        guard digits.count == 12 else { return nil }
        var out = ""
        for (i, d) in digits.enumerated() {
            if i > 0 && i % 2 == 0 { out.append(":") }
            out.append(d)
        }
        return out
    }
}

/// Who a meter is: its address plus what it says about itself in Device Information (0x180A).
public struct MeterIdentity: Hashable, Sendable {
    /// The meter's address.
    public var id: MeterID
    /// The name the meter advertises (BlueZ `Alias`/`Name`), when known.
    public var name: String?
    /// Device Information's Manufacturer Name String (0x2A29).
    public var manufacturer: String?
    /// Device Information's Model Number String (0x2A24).
    public var model: String?
    /// Device Information's Serial Number String (0x2A25): tells a replaced meter from the same one.
    public var serialNumber: String?
    /// Device Information's Firmware Revision String (0x2A26).
    public var firmware: String?

    /// An identity; what the meter did not say stays nil.
    public init(
        id: MeterID, name: String? = nil, manufacturer: String? = nil, model: String? = nil,
        serialNumber: String? = nil, firmware: String? = nil
    ) {
        self.id = id
        self.name = name
        self.manufacturer = manufacturer
        self.model = model
        self.serialNumber = serialNumber
        self.firmware = firmware
    }

    /// A short label for people: "Roche Accu-Chek Guide", falling back to the name or address.
    public var displayName: String {
        let parts = [self.manufacturer, self.model].compactMap { $0 }.filter { !$0.isEmpty }
        if !parts.isEmpty { return parts.joined(separator: " ") }
        if let name = self.name, !name.isEmpty { return name }
        return self.id.rawValue
    }
}
