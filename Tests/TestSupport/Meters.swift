import DBus
import GlucoseProfile
import JSON
import Varlink

/// One stored record of a simulated meter, built with the GLS codec.
package struct MeterRecord: Sendable {
    package var sequenceNumber: UInt16
    package var mgdL: Int
    package var withContext: Bool

    package init(sequenceNumber: UInt16, mgdL: Int, withContext: Bool) {
        self.sequenceNumber = sequenceNumber
        self.mgdL = mgdL
        self.withContext = withContext
    }

    package var measurement: GlucoseMeasurement {
        GlucoseMeasurement(
            sequenceNumber: self.sequenceNumber,
            baseTime: DateTime(
                year: 2024, month: 3, day: 31, hours: 6 + UInt8(self.sequenceNumber / 60),
                minutes: UInt8(self.sequenceNumber % 60)),
            timeOffsetMinutes: 0, concentration: try? SFloat(mantissa: self.mgdL, exponent: -5),
            unit: .kilogramsPerLiter, type: SampleType(code: 1), sampleLocation: SampleLocation(code: 1),
            contextFollows: self.withContext)
    }

    package var context: MeasurementContext? {
        self.withContext ? MeasurementContext(sequenceNumber: self.sequenceNumber, meal: Meal(code: 1)) : nil
    }

    /// `["<measurement hex>", "<context hex>" or null]`, as the stand-in takes records.
    package var json: String {
        let context = self.context.map { "\"\(hex($0.encoded()))\"" } ?? "null"
        return "[\"\(hex(self.measurement.encoded()))\", \(context)]"
    }
}

/// Records `range` with distinct values; odd sequence numbers carry a context.
package func records(_ range: ClosedRange<UInt16>) -> [MeterRecord] {
    range.map { MeterRecord(sequenceNumber: $0, mgdL: 80 + Int($0) * 7, withContext: $0 % 2 == 1) }
}

package func recordsJSON(_ records: [MeterRecord]) -> String {
    "[" + records.map(\.json).joined(separator: ", ") + "]"
}

package struct SimulatedMeter: Sendable {
    package var address: String
    package var name: String = "Test Meter"
    package var records: [MeterRecord]
    /// Further stand-in options as JSON members (`"requires_pairing": true`).
    package var options: String = ""

    package init(address: String, name: String = "Test Meter", records: [MeterRecord], options: String = "") {
        self.address = address
        self.name = name
        self.records = records
        self.options = options
    }

    package var json: String {
        let extra = self.options.isEmpty ? "" : ", " + self.options
        return """
            {"address": "\(self.address)", "name": "\(self.name)", \
            "options": {"records": \(recordsJSON(self.records)), "serial": "SN-\(self.address.suffix(2))"\(extra)}}
            """
    }
}

/// Stand-in parameters: adapter hci0 with these meters.
package func standIn(_ meters: [SimulatedMeter]) -> String {
    "{\"adapter\": \"hci0\", \"meters\": [" + meters.map(\.json).joined(separator: ", ") + "]}"
}

package func hex(_ bytes: [UInt8]) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}

extension Rig {
    /// Waits until the meter's stored readings number `count`; returns them.
    @discardableResult
    package func waitForReadings(_ meter: String, count: Int, seconds: Int = 30) async throws -> [JSONValue] {
        var last: [JSONValue] = []
        try await self.waitUntil("\(count) readings of \(meter)", seconds: seconds) {
            last = try await self.readings(meter)
            return last.count >= count
        }
        return last
    }

    /// Waits until the meter's last finished sync has one of `results` and no attempt runs (the
    /// meter is idle, done, failed, or waiting for the engine's retry); returns the meter model.
    @discardableResult
    package func waitForLastSync(_ meter: String, _ results: Set<String>, seconds: Int = 30) async throws -> JSONValue {
        var model: JSONValue?
        try await self.waitUntil("a \(results.sorted()) sync of \(meter)", seconds: seconds) {
            model = try await self.meter(meter)
            guard let result = model?["lastSync"]?["result"]?.stringValue else { return false }
            return results.contains(result) && model?["sync"]?.stringValue.map { ["idle", "done", "failed", "waitingToRetry"].contains($0) } == true
        }
        guard let model else { throw RigError("no model of \(meter)") }
        return model
    }

    /// A forced sync through Varlink that ends successfully. When an automatic sync of the meter is
    /// running already (the daemon is free to start one), waits for that one instead.
    package func syncToSuccess(_ meter: String) async throws -> JSONValue? {
        do {
            let sessions = try await self.sync(meter, force: true)
            return sessions.first { $0["meter"]?.stringValue == meter }
        } catch let error as VarlinkClientError {
            guard case .remote(let remote) = error, remote.name.hasSuffix("SyncInProgress") else { throw error }
            try await self.waitForLastSync(meter, ["success", "noNewRecords"])
            return nil
        }
    }
}

