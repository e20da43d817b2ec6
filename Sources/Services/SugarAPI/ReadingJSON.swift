import GlucoseProfile
import HealthDataSync
import JSON
import SugarWire

/// The JSON object of one stored reading, as `ListReadings` and `sugarctl readings --format json`
/// show it: ``Wire/Reading``'s form (see `Wire.Reading(_:)` for its keys), and the compact form.
public enum ReadingJSON {
    /// The full form: `Wire.Reading(stored).json`.
    public static func object(_ stored: StoredReading) -> JSONValue { Wire.Reading(stored).json }

    /// The compact form `FollowReadings(compact: true)` sends: the keys of ``object(_:)`` that the
    /// sinks read, with the same values, built from the stored row without decoding the packets
    /// again. `id`, `meter`, `epoch`, `sequenceNumber`, `mgdL`, `mmolL`, `flags`, `person`, `time`
    /// {`iso`, `epochMillis`, `local`, `utcOffsetMinutes`}, `type` and `sampleLocation` {`code`,
    /// `name`} (null when the packet has no such field) and `context` ({`meal` {`code`, `name`}}, or
    /// null when no context carried a meal). Every export of ``ReadingExport`` that reads only these
    /// keys (the MQTT payload, Nightscout entries and treatments, the identifier) gives the same
    /// result for both forms.
    public static func compact(_ stored: StoredReading) -> JSONValue { Wire.CompactReading(stored).json }
}
