import GlucoseProfile
public import JSON

// Bridge-friendly JSON for every state value:
// - instants: {"iso": "2019-02-27T10:10:30Z", "epochMillis": 1551262230000}
// - glucose:  {"mgdL": 101.0, "mmolL": 5.6}
// - enums:    their stable name ("transferring"); where the spec defines a code,
//             {"name": "capillaryWholeBlood", "code": 1}
// - absent optional values: null (keys are always present, so clients see one shape).

extension JSONValue {
    static func from(_ value: (some JSONRepresentable)?) -> JSONValue { value?.json ?? .null }
    static func u64(_ value: UInt64) -> JSONValue { .int(Int64(truncatingIfNeeded: value)) }
}

extension Instant: JSONRepresentable {
    public var json: JSONValue { ["iso": .string(self.isoString), "epochMillis": .int(self.epochMillis)] }
}

extension LocalDateTime: JSONRepresentable {
    /// Zone-less wall-clock time as `2019-02-27T11:10:30` (not an instant).
    public var json: JSONValue { .string(self.isoString) }
}

/// A glucose concentration in both units.
public struct GlucoseValue: Hashable, Sendable, JSONRepresentable {
    public var mgdL: Double
    public var mmolL: Double

    public init(mgdL: Double, mmolL: Double) {
        self.mgdL = mgdL
        self.mmolL = mmolL
    }

    public var json: JSONValue { ["mgdL": .from(self.mgdL), "mmolL": .from(self.mmolL)] }
}

/// Stable names for the Glucose Measurement sample type and location codes, from the codec's
/// one table (``SampleType/name``, ``SampleLocation/apiName``); codes above 15 are `reserved`.
public enum SampleNames {
    public static func type(_ code: UInt8) -> String { code <= 15 ? SampleType(code: code).name : "reserved" }

    public static func location(_ code: UInt8) -> String { code <= 15 ? SampleLocation(code: code).apiName : "reserved" }

    static func coded(_ name: String, _ code: UInt8) -> JSONValue { ["name": .string(name), "code": .int(Int64(code))] }
}

extension StoreError: JSONRepresentable {
    public var json: JSONValue { ["code": .string(self.code.rawValue), "message": .string(self.message)] }
}

extension StorageHealth: JSONRepresentable {
    public var json: JSONValue {
        ["status": .string(self.status.rawValue), "path": .string(self.path), "error": .from(self.error)]
    }
}

extension DaemonInfo: JSONRepresentable {
    /// `{"version", "startedAt": instant, "storage": {"status", "path", "error": null|{"code","message"}}}`
    public var json: JSONValue {
        ["version": .string(self.version), "startedAt": self.startedAt.json, "storage": self.storage.json]
    }
}

extension AdapterState: JSONRepresentable {
    public var json: JSONValue {
        [
            "present": .bool(self.present), "powered": .bool(self.powered), "discovering": .bool(self.discovering),
            "name": .from(self.name), "address": .from(self.address),
        ]
    }
}

extension MeterIdentity: JSONRepresentable {
    public var json: JSONValue {
        [
            "id": .string(self.id.rawValue), "name": .from(self.name), "manufacturer": .from(self.manufacturer),
            "model": .from(self.model), "serialNumber": .from(self.serialNumber), "firmware": .from(self.firmware),
            "displayName": .string(self.displayName),
        ]
    }
}

extension SyncProgress: JSONRepresentable {
    public var json: JSONValue { ["received": .from(self.received), "expected": .from(self.expected)] }
}

extension LastSync: JSONRepresentable {
    public var json: JSONValue {
        [
            "meter": .string(self.meter.rawValue), "at": self.at.json, "result": .string(self.result.rawValue),
            "stored": .from(self.stored), "duplicates": .from(self.duplicates), "reset": .bool(self.reset),
        ]
    }
}

extension ReportedError: JSONRepresentable {
    public var json: JSONValue {
        [
            "code": .string(self.code), "message": .string(self.message), "hint": .from(self.hint), "at": self.at.json,
            "meter": .from(self.meter?.rawValue), "specCode": .from(self.specCode),
        ]
    }
}

extension MeterState: JSONRepresentable {
    /// Every ``MeterField`` as a key, plus `id`.
    public var json: JSONValue {
        var object = JSONObject()
        object["id"] = .string(self.id.rawValue)
        for field in MeterField.allCases { object[field.rawValue] = self.value(of: field).json }
        return .object(object)
    }
}

extension MeterState.Value: JSONRepresentable {
    public var json: JSONValue {
        switch self {
        case .identity(let identity): return identity.json
        case .link(let link): return .string(link.rawValue)
        case .sync(let phase): return .string(phase.name)
        case .progress(let progress): return progress.json
        case .lastSync(let last): return .from(last)
        case .highWater(let mark): return .from(mark)
        case .pairing(let pairing): return .string(pairing.rawValue)
        case .lastError(let error): return .from(error)
        case .nextAttempt(let at): return .from(at)
        }
    }
}

extension ReadingSummary: JSONRepresentable {
    /// The glucose value in both units, or nil (ketone records, HI/LO, no value).
    public var glucose: GlucoseValue? {
        guard let mg = self.mgdL, let mmol = self.mmolL else { return nil }
        return GlucoseValue(mgdL: mg, mmolL: mmol)
    }

    public var json: JSONValue {
        [
            "meter": .string(self.meter.rawValue),
            "sequenceNumber": .from(self.sequenceNumber),
            "instant": self.instant.json,
            "glucose": .from(self.glucose),
            "ketoneMmolL": .from(self.ketoneMmolL),
            "flags": .array(self.flags.names.map { .string($0) }),
            "sampleType": self.sampleType.map { SampleNames.coded(SampleNames.type($0), $0) } ?? .null,
            "sampleLocation": self.sampleLocation.map { SampleNames.coded(SampleNames.location($0), $0) } ?? .null,
            "meterLocalTime": self.meterLocalTime.json,
            "utcOffsetSeconds": .from(self.utcOffsetSeconds),
            "timeMethod": .string(self.timeMethod.rawValue),
            "storeID": .from(self.storeID),
            "storedAt": .from(self.storedAt),
        ]
    }
}

extension SyncOverview: JSONRepresentable {
    public var json: JSONValue {
        [
            "phase": .string(self.phase.rawValue),
            "activeMeters": .array(self.activeMeters.map { .string($0.rawValue) }),
            "lastResult": .from(self.lastResult),
        ]
    }
}

extension ViewState.Value: JSONRepresentable {
    public var json: JSONValue {
        switch self {
        case .daemon(let daemon): return daemon.json
        case .adapter(let adapter): return adapter.json
        case .meters(let meters): return .array(meters.map(\.json))
        case .lastReading(let reading): return .from(reading)
        case .readingCount(let count): return .from(count)
        case .sync(let sync): return sync.json
        case .errors(let errors): return .array(errors.map(\.json))
        }
    }
}

extension ViewState: JSONRepresentable {
    /// Every ``StateField`` as a key, in declaration order.
    public var json: JSONValue {
        var object = JSONObject()
        for field in StateField.allCases { object[field.rawValue] = self.value(of: field).json }
        return .object(object)
    }
}
