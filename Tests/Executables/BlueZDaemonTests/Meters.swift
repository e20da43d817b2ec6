import JSON
import Testing
import TestSupport

/// Checks stored readings against the meter's records: each exactly once, values and contexts intact.
func expectStored(_ readings: [JSONValue], match records: [MeterRecord], meter: String, context: Bool = true) {
    let sequences = readings.compactMap { $0["sequenceNumber"]?.intValue }
    #expect(sequences == records.map { Int64($0.sequenceNumber) }, "stored sequence numbers of \(meter)")
    for (reading, record) in zip(readings, records) {
        #expect(reading["meter"]?.stringValue == meter)
        #expect(reading["mgdL"]?.doubleValue == Double(record.mgdL), "mg/dL of #\(record.sequenceNumber)")
        let stored = reading["context"].map { !$0.isNull } ?? false
        #expect(stored == (context && record.withContext), "context of #\(record.sequenceNumber)")
    }
}
