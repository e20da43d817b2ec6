import GlucoseProfile
import HealthDataSync
import JSON
import SugarWire

/// The JSON object of one stored reading, as `ListReadings` and `sugarctl readings --format json`
/// show it.
///
/// It carries every key of `sugarctl decode measurement --json` (decoded again from the stored
/// raw packet, so the two can never disagree), with `mgdL`/`mmolL` replaced by the daemon's
/// conclusion (null for ketone, HI, LO and value-less records), plus:
/// `id`, `meter`, `epoch` (sequence-reset epoch), `ketoneMmolL`, `flags` (names),
/// `time` {`iso` (UTC), `epochMillis`, `local` (ISO 8601 with the zone offset used), `utcOffsetMinutes`,
/// `zone`, `method`, `meterClockSkewSeconds`, `quirks`}, `storedAt` {`iso`, `epochMillis`} and `context`
/// (the decoded context object or null) and `person` (the person the meter is assigned to, or null).
public enum ReadingJSON {
    public static func object(_ stored: StoredReading) -> JSONValue {
        let r = stored.reading
        var object: JSONObject
        if let measurement = try? GlucoseMeasurement(bytes: r.measurementBytes, options: .lenientDateTime),
            case .object(let decoded) = measurement.json
        {
            object = decoded
        } else {
            // Only reachable for a row written by a future version with a packet this one cannot
            // read: show the stored raw facts rather than nothing.
            object = [
                "characteristic": "2a18",
                "sequenceNumber": .int(Int64(r.sequenceNumber)),
                "baseTime": .string(r.baseTime.isoString),
                "timeOffsetMinutes": .from(r.timeOffsetMinutes),
            ]
        }
        object["mgdL"] = .from(r.mgdL)
        object["mmolL"] = .from(r.mmolL)
        object["id"] = .int(stored.id)
        object["meter"] = .string(r.meter.rawValue)
        object["epoch"] = .int(Int64(stored.epoch))
        object["ketoneMmolL"] = .from(r.ketoneMmolL)
        object["flags"] = .array(r.flags.names.map { .string($0) })
        object["time"] = self.time(r)
        object["storedAt"] = self.instant(stored.storedAt)
        object["person"] = .from(stored.person)
        if let bytes = r.contextBytes, let context = try? MeasurementContext(bytes: bytes) {
            object["context"] = context.json
        } else {
            object["context"] = .null
        }
        return .object(object)
    }

    /// The compact form `FollowReadings(compact: true)` sends: the keys of ``object(_:)`` that the
    /// sinks read, with the same values, built from the stored row without decoding the packets
    /// again. `id`, `meter`, `epoch`, `sequenceNumber`, `mgdL`, `mmolL`, `flags`, `person`, `time`
    /// {`iso`, `epochMillis`, `local`, `utcOffsetMinutes`}, `type` and `sampleLocation` {`code`,
    /// `name`} (null when the packet has no such field) and `context` ({`meal` {`code`, `name`}}, or
    /// null when no context carried a meal). Every export of ``ReadingExport`` that reads only these
    /// keys (the MQTT payload, Nightscout entries and treatments, the identifier) gives the same
    /// result for both forms.
    public static func compact(_ stored: StoredReading) -> JSONValue { Wire.CompactReading(stored).json }

    /// `{"iso": "...Z", "epochMillis": n}`: how every instant ships.
    public static func instant(_ instant: Instant) -> JSONValue {
        ["iso": .string(instant.isoString), "epochMillis": .int(instant.epochMillis)]
    }

    static func time(_ r: Reading) -> JSONValue {
        let t = r.time
        let object: JSONObject = [
            "iso": .string(r.instant.isoString),
            "epochMillis": .int(r.instant.epochMillis),
            "local": .string(r.instant.isoString(utcOffsetSeconds: t.utcOffsetSeconds)),
            "utcOffsetMinutes": .int(Int64(t.utcOffsetSeconds / 60)),
            "zone": .string(t.zone),
            "method": .string(t.method.rawValue),
            "meterLocalTime": .string(t.meterLocalTime.isoString),
            "meterClockSkewSeconds": .from(t.meterClockSkewSeconds),
            "quirks": .array(t.quirks.map { .string($0) }),
        ]
        return .object(object)
    }
}
