import Glibc
public import HealthDataSync
public import JSON

/// A display unit as clients name it (`--unit mgdl|mmol`, the interface's `Unit` enum).
public enum DisplayUnit: String, Sendable, Hashable, CaseIterable {
    case mgdl
    case mmol

    /// The unit for people: "mg/dL" or "mmol/L".
    public var symbol: String { self == .mgdl ? "mg/dL" : "mmol/L" }

    public init(_ unit: GlucoseUnit) {
        self = unit == .mgdL ? .mgdl : .mmol
    }

    public var glucoseUnit: GlucoseUnit { self == .mgdl ? .mgdL : .mmolL }

    /// Text for a value in this unit: mg/dL without decimals, mmol/L with one.
    public func format(mgdL: Double?, mmolL: Double?) -> String? {
        switch self {
        case .mgdl: return mgdL.map { ReadingExport.formatted($0, digits: 0) }
        case .mmol: return mmolL.map { ReadingExport.formatted($0, digits: 1) }
        }
    }
}

extension ReadingExport {
    /// ``fhir(_:meters:unit:)`` for a client's display unit.
    public static func fhir(
        _ readings: [JSONValue], meters: [String: JSONValue], displayUnit: DisplayUnit
    ) -> (bundle: JSONValue, skipped: Int) {
        self.fhir(readings, meters: meters, unit: displayUnit.glucoseUnit)
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

/// Instants as the interface writes and reads them.
public enum APITime {
    /// The wall clock, in milliseconds since the epoch.
    public static func now() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }

    /// `2024-03-31T06:15:00Z` (milliseconds only when not zero).
    public static func iso(epochMillis: Int64) -> String { Instant(epochMillis: epochMillis).isoString }

    /// Milliseconds since the epoch for an ISO 8601 instant with a zone (`Z`, `+02:00`, `+0200`,
    /// `+02`), seconds and fractions optional, or a bare date (`2024-03-31`, midnight UTC).
    /// Nil for anything else, including a time without a zone (ambiguous).
    public static func parse(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        var i = 0
        func digits(_ count: Int) -> Int? {
            guard i + count <= b.count else { return nil }
            var value = 0
            for k in 0..<count {
                let c = b[i + k]
                guard c >= 48 && c <= 57 else { return nil }
                value = value * 10 + Int(c - 48)
            }
            i += count
            return value
        }
        func expect(_ c: UInt8) -> Bool {
            guard i < b.count, b[i] == c else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect(45), let month = digits(2), expect(45), let day = digits(2) else { return nil }
        var local = LocalDateTime(year: year, month: month, day: day)
        guard local.isValid else { return nil }
        if i == b.count { return local.secondsSinceEpoch * 1000 }
        guard i < b.count, b[i] == 84 || b[i] == 116 || b[i] == 32 else { return nil }  // T, t or space
        i += 1
        guard let hour = digits(2), expect(58), let minute = digits(2) else { return nil }
        var second = 0
        var millis = 0
        if expect(58) {
            guard let s = digits(2) else { return nil }
            second = s
            if i < b.count, b[i] == 46 || b[i] == 44 {  // . or ,
                i += 1
                var scale = 100
                var any = false
                while i < b.count, b[i] >= 48 && b[i] <= 57 {
                    millis += Int(b[i] - 48) * scale
                    scale /= 10
                    any = true
                    i += 1
                }
                guard any else { return nil }
            }
        }
        local = LocalDateTime(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        guard local.isValid else { return nil }
        guard i < b.count else { return nil }  // no zone
        var offsetSeconds = 0
        if b[i] == 90 || b[i] == 122 {  // Z or z
            i += 1
        } else if b[i] == 43 || b[i] == 45 {  // + or -
            let sign = b[i] == 45 ? -1 : 1
            i += 1
            guard let hh = digits(2), hh <= 23 else { return nil }
            var mm = 0
            if i < b.count {
                _ = expect(58)
                guard let m = digits(2), m <= 59 else { return nil }
                mm = m
            }
            offsetSeconds = sign * (hh * 3600 + mm * 60)
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        return (local.secondsSinceEpoch - Int64(offsetSeconds)) * 1000 + Int64(millis)
    }
}
