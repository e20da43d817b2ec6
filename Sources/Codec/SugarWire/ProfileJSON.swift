import GlucoseProfile
public import JSON

// The Glucose Profile's values in their JSON form: the objects of `sugarctl decode … --json`, which
// the capture inspector, the capture stream and every stored reading (`ListReadings`' `profile` keys)
// carry too. The codec itself stays free of JSON; its values are rendered here, where the wire is.

extension DateTime {
    /// The ISO string as JSON.
    public var json: JSONValue { .string(self.isoString) }
}

extension CurrentTime {
    /// `{"dateTime", "dayOfWeek", "fractions256", "adjustReason"}`.
    public var json: JSONValue {
        jsonObject([
            ("dateTime", self.dateTime.json), ("dayOfWeek", .from(self.dayOfWeek)),
            ("fractions256", .from(self.fractions256)), ("adjustReason", .from(self.adjustReason)),
        ])
    }
}

extension GlucoseFeature {
    /// The JSON object of `sugarctl decode feature --json`.
    public var json: JSONValue {
        jsonObject([
            ("characteristic", "2a51"), ("bits", .from(self.rawValue)), ("names", .array(self.names.map { .string($0) })),
        ])
    }
}

extension SampleType {
    /// `{"code", "name"}`.
    public var json: JSONValue { codeNameJSON(self.code, self.name) }
}

extension SampleLocation {
    /// `{"code", "name"}`.
    public var json: JSONValue { codeNameJSON(self.code, self.name) }
}

extension SensorStatus {
    /// `{"bits", "names"}`.
    public var json: JSONValue { bitsNamesJSON(UInt64(self.rawValue), self.names) }
}

extension GlucoseMeasurement {
    /// The JSON object of `sugarctl decode measurement --json`; absent fields are `null`.
    public var json: JSONValue {
        var concentrationJSON = JSONValue.null
        if let c = self.concentration {
            concentrationJSON = jsonObject([
                ("raw", .from(c.rawValue)), ("mantissa", .from(c.mantissa)), ("exponent", .from(c.exponent)),
                ("unit", .from(self.unit?.symbol)), ("value", .from(c.value)), ("special", .from(c.special?.name)),
            ])
        }
        return jsonObject([
            ("characteristic", "2a18"),
            ("flags", .from(self.flags)),
            ("reservedFlags", .from(self.reservedFlags)),
            ("sequenceNumber", .from(self.sequenceNumber)),
            ("baseTime", self.baseTime.json),
            ("timeOffsetMinutes", .from(self.timeOffsetMinutes)),
            ("userFacingTime", self.userFacingTime?.json ?? .null),
            ("concentration", concentrationJSON),
            ("mgdL", .from(self.mgdL)),
            ("mmolL", .from(self.mmolL)),
            ("type", self.type?.json ?? .null),
            ("sampleLocation", self.sampleLocation?.json ?? .null),
            ("sensorStatus", self.sensorStatus?.json ?? .null),
            ("contextFollows", .bool(self.contextFollows)),
        ])
    }
}

extension MeasurementContext {
    /// The JSON object of `sugarctl decode context --json`; absent fields are `null`.
    public var json: JSONValue {
        var carbohydrateJSON = JSONValue.null
        if let c = self.carbohydrate {
            carbohydrateJSON = jsonObject([("id", c.id.json), ("kg", .from(c.kilograms.value))])
        }
        var exerciseJSON = JSONValue.null
        if let e = self.exercise {
            exerciseJSON = jsonObject([
                ("durationSeconds", .from(e.durationSeconds)), ("intensityPercent", .from(e.intensityPercent)),
            ])
        }
        var medicationJSON = JSONValue.null
        if let m = self.medication {
            medicationJSON = jsonObject([("id", m.id.json), ("value", .from(m.amount.value)), ("unit", .string(m.unit.symbol))])
        }
        return jsonObject([
            ("characteristic", "2a34"),
            ("flags", .from(self.flags)),
            ("sequenceNumber", .from(self.sequenceNumber)),
            ("extendedFlags", .from(self.extendedFlags)),
            ("carbohydrate", carbohydrateJSON),
            ("meal", self.meal?.json ?? .null),
            ("tester", self.tester?.json ?? .null),
            ("health", self.health?.json ?? .null),
            ("exercise", exerciseJSON),
            ("medication", medicationJSON),
            ("hba1cPercent", .from(self.hba1cPercent?.value)),
        ])
    }
}

extension CarbohydrateID {
    /// `{"code", "name"}`.
    public var json: JSONValue { codeNameJSON(self.code, self.name) }
}

extension Meal {
    /// `{"code", "name"}`.
    public var json: JSONValue { codeNameJSON(self.code, self.name) }
}

extension Tester {
    /// `{"code", "name"}`.
    public var json: JSONValue { codeNameJSON(self.code, self.name) }
}

extension Health {
    /// `{"code", "name"}`.
    public var json: JSONValue { codeNameJSON(self.code, self.name) }
}

extension MedicationID {
    /// `{"code", "name"}`.
    public var json: JSONValue { codeNameJSON(self.code, self.name) }
}

extension RACPOpCode {
    /// `{"code", "name"}`.
    public var json: JSONValue { codeNameJSON(self.rawValue, self.name) }
}

extension RACPOperator {
    /// `{"code", "name"}`.
    public var json: JSONValue { codeNameJSON(self.rawValue, self.name) }
}

extension RACPFilterType {
    /// `{"code", "name"}`.
    public var json: JSONValue { codeNameJSON(self.rawValue, self.name) }
}

extension RACPResponseCode {
    /// `{"code", "name"}`.
    public var json: JSONValue { codeNameJSON(self.rawValue, self.name) }
}

extension RACPFilter {
    /// `{"type", "min", "max"}`; min and max are numbers or ISO strings, null when absent.
    public var json: JSONValue {
        switch self {
        case .sequenceNumber(let min, let max):
            jsonObject([("type", self.type.json), ("min", .from(min)), ("max", .from(max))])
        case .userFacingTime(let min, let max):
            jsonObject([("type", self.type.json), ("min", min?.json ?? .null), ("max", max?.json ?? .null)])
        }
    }
}

extension RACPMessage {
    /// The JSON object of `sugarctl decode racp --json`: `characteristic`, `opCode`, `operator`, then
    /// `filter` for requests (null without an operand), `numberOfRecords` for op 5, or `requestOpCode` and
    /// `responseCode` for op 6.
    public var json: JSONValue {
        var object: JSONObject = [
            "characteristic": "2a52", "opCode": self.opCode.json, "operator": self.operator.json,
        ]
        switch self.operand {
        case .none:
            if self.opCode.isRecordRequest { object["filter"] = .null }
        case .filter(let filter): object["filter"] = filter.json
        case .numberOfRecords(let count): object["numberOfRecords"] = .from(count)
        case .response(let request, let code):
            object["requestOpCode"] = request.json
            object["responseCode"] = code.json
        }
        return .object(object)
    }
}

/// `{"code", "name"}`.
func codeNameJSON(_ code: UInt8, _ name: String) -> JSONValue {
    jsonObject([("code", .from(code)), ("name", .string(name))])
}

/// `{"bits", "names"}`.
func bitsNamesJSON(_ bits: UInt64, _ names: [String]) -> JSONValue {
    jsonObject([("bits", .from(bits)), ("names", .array(names.map { .string($0) }))])
}

/// An ordered JSON object from key-value pairs.
func jsonObject(_ pairs: [(String, JSONValue)]) -> JSONValue { .object(JSONObject(pairs)) }
