public import HealthDataSync
import JSON
public import SugarWire

extension Wire.Unit {
    /// The interface's name for the daemon's display unit.
    public init(_ unit: GlucoseUnit) {
        self = unit == .mgdL ? .mgdl : .mmol
    }

    public var glucoseUnit: GlucoseUnit { self == .mgdl ? .mgdL : .mmolL }
}

/// JSON forms of store records the interface returns.
enum APIJSON {
    static func session(_ s: SyncSessionRecord) -> JSONValue {
        [
            "id": .from(s.id), "meter": .string(s.meter.rawValue), "started": ReadingJSON.instant(s.started),
            "ended": s.ended.map(ReadingJSON.instant) ?? .null, "result": .string(s.result.rawValue),
            "expected": .from(s.expected), "received": .from(s.received), "stored": .from(s.stored),
            "duplicates": .from(s.duplicates), "error": .from(s.error),
            "reset": .bool(s.reset), "sequenceResets": .from(s.sequenceResets),
        ]
    }

    static func storedMeter(_ m: StoredMeter) -> JSONValue {
        [
            "firstSeen": ReadingJSON.instant(m.firstSeen), "lastSeen": ReadingJSON.instant(m.lastSeen),
            "highWater": .from(m.highWater), "epoch": .from(m.epoch),
            "lastSync": m.lastSync.map(ReadingJSON.instant) ?? .null,
            "lastSyncResult": .from(m.lastSyncResult?.rawValue), "readingCount": .from(m.readingCount),
            "features": .from(m.features), "person": .from(m.person),
        ]
    }
}
