import DBus
import Foundation
import GlucoseStore
import HealthDataSync
import JSON
import Testing
import TestSupport

private let meter = "C0:26:DA:01:02:03"

extension DaemonOverBlueZTests {
    @Test("a quiet bonded meter, bluetoothd SIGKILLed mid-transfer and back a second later: the engine retries by itself and stores all 120 once")
    func retryAfterBluetoothdRestart() async throws {
        let all = records(1...120)
        let quiet = SimulatedMeter(
            address: meter, records: all, options: #""record_interval_ms": 20, "bonded": true, "advertising": false"#)
        try await withRig(standIn: standIn([quiet])) { rig in
            try await rig.waitUntil("record 84 of 120 arrived") {
                try await rig.meter(meter)?["progress"]?["received"]?.intValue ?? 0 >= 84
            }
            rig.killStandIn()
            try await rig.waitForLastSync(meter, ["interrupted", "failed"])
            #expect(try await rig.readings(meter).count < all.count)
            try await Task.sleep(for: .seconds(1))
            try await rig.startStandIn(rig.standInParameters)
            let back = ContinuousClock.now
            // Nobody asks for a sync and the meter does not advertise: the engine's retry gets the rest.
            let stored = try await rig.waitForReadings(meter, count: all.count, seconds: 15)
            #expect(ContinuousClock.now - back < .seconds(15))
            expectStored(stored, match: all, meter: meter)
            let model = try await rig.waitForLastSync(meter, ["success"])
            #expect(model["highWater"]?.intValue == 120)
            #expect(model["nextAttempt"]?.isNull ?? false, "nothing scheduled after the success")
            let results = try await rig.sessions(meter).compactMap { $0["result"]?.stringValue }
            #expect(results.first == "success" && results.count >= 2, "sessions: \(results)")
            #expect(!rig.daemonLog.contains("reason=cooldown"), "an interrupted sync holds no cooldown")
            #expect(await rig.stopDaemon() == 0, "sugard's exit status; log:\n\(rig.daemonLog)")
            let database = try SQLiteReadingStore(path: rig.databasePath)
            #expect(try await database.readings(ReadingQuery(meter: MeterID(meter))).map(\.reading.sequenceNumber) == Array(1...120))
            await database.close()
        }
    }

    @Test("a meter whose link always drops after 3 of 20 records: every attempt resumes after what is stored; the engine's own retries get all 20 within 10 attempts, each once")
    func linkAlwaysDroppingAfterThreeRecords() async throws {
        let all = records(1...20)
        let dropping = SimulatedMeter(address: meter, records: all, options: #""disconnect_after_records": 3"#)
        try await withRig(standIn: standIn([dropping])) { rig in
            // Nobody asks: the automatic sync and the engine's retries (2 s apart while attempts
            // make progress) do it.
            let stored = try await rig.waitForReadings(meter, count: all.count, seconds: 30)
            expectStored(stored, match: all, meter: meter)
            try await rig.waitForLastSync(meter, ["success"])
            let sessions = try await rig.sessions(meter)
            print("attempts over the stand-in: \(sessions.reversed().map { "\($0["result"]?.stringValue ?? "?") +\($0["stored"]?.intValue ?? 0)" })")
            #expect(sessions.count <= 10, "attempts: \(sessions.compactMap { $0["result"]?.stringValue })")
            #expect(sessions.allSatisfy { ($0["duplicates"]?.intValue ?? 0) == 0 }, "no attempt asked again for stored records")
            #expect(sessions.compactMap { $0["stored"]?.intValue }.reduce(0, +) == all.count)
            #expect(try await rig.meter(meter)?["highWater"]?.intValue == 20)
            #expect(await rig.stopDaemon() == 0, "sugard's exit status; log:\n\(rig.daemonLog)")
            let database = try SQLiteReadingStore(path: rig.databasePath)
            #expect(try await database.readings(ReadingQuery(meter: MeterID(meter))).map(\.reading.sequenceNumber) == Array(1...20))
            await database.close()
        }
    }

    @Test("a transient failure shows waitingToRetry with the next attempt's time")
    func waitingToRetryIsVisible() async throws {
        let meterRecords = records(1...5)
        let dropping = SimulatedMeter(address: meter, records: meterRecords, options: #""disconnect_after_records": 2"#)
        try await withRig(standIn: standIn([dropping])) { rig in
            var model: JSONValue?
            try await rig.waitUntil("the meter waits to retry") {
                model = try await rig.meter(meter)
                return model?["sync"]?.stringValue == "waitingToRetry"
            }
            let next = model?["nextAttempt"]?["epochMillis"]?.intValue ?? 0
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            #expect(next > now - 1000 && next <= now + 11_000, "next attempt \(next), now \(now)")
            #expect(model?["nextAttempt"]?["iso"]?.stringValue?.hasSuffix("Z") == true)
            #expect(model?["lastSync"]?["result"]?.stringValue == "interrupted")
            let status = try await rig.sugarctl(["status"])
            #expect(status.stdout.contains("waitingToRetry") && status.stdout.contains("next attempt"), "\(status.stdout)")
            // Fixed meanwhile: the next retry completes it without anybody asking.
            try await rig.mock("SetGlucoseMeterOptions", [.string(meter), .string(#"{"disconnect_after_records": null}"#)])
            expectStored(try await rig.waitForReadings(meter, count: 5, seconds: 20), match: meterRecords, meter: meter)
        }
    }

    @Test("a meter reset with more records than before: all of them stored in a new epoch; the reset shows in sessions and status")
    func meterResetWithMoreRecords() async throws {
        let before = records(1...10)
        try await withRig(standIn: standIn([SimulatedMeter(address: meter, records: before)])) { rig in
            expectStored(try await rig.waitForReadings(meter, count: 10), match: before, meter: meter)
            try await rig.waitForLastSync(meter, ["success"])
            // Memory cleared: same address and serial, the counter restarts; now 1-12 with new values.
            let after = records(1...12).map { MeterRecord(sequenceNumber: $0.sequenceNumber, mgdL: $0.mgdL + 40, withContext: $0.withContext) }
            try await rig.mock("SetGlucoseMeterOptions", [.string(meter), .string(#"{"records": \#(recordsJSON(after))}"#)])
            let session = try await rig.syncToSuccess(meter)
            if let session {
                #expect(session["stored"]?.intValue == 12)
                #expect(session["reset"]?.boolValue == true)
            }
            let readings = try await rig.waitForReadings(meter, count: 22)
            let newEpoch = readings.filter { $0["epoch"]?.intValue == 1 }
            expectStored(newEpoch, match: after, meter: meter)
            #expect(readings.filter { $0["epoch"]?.intValue == 0 }.count == 10, "nothing of the old epoch lost")
            #expect(try await rig.meter(meter)?["highWater"]?.intValue == 12)
            let sessions = try await rig.sessions(meter)
            #expect(sessions.first?["reset"]?.boolValue == true && sessions.last?["reset"]?.boolValue == false)

            let text = try await rig.sugarctl(["sessions", meter])
            #expect(text.status == 0 && text.stdout.contains("success (meter reset)"), "\(text.stdout)")
            let json = try await rig.sugarctl(["sessions", meter, "--json"])
            let parsed = try JSONValue(parsing: json.stdout)
            #expect(parsed["sessions"]?.arrayValue?.first?["reset"]?.boolValue == true)
            let status = try await rig.sugarctl(["status"])
            #expect(status.stdout.contains("meter reset"), "\(status.stdout)")
            let statusJSON = try JSONValue(parsing: try await rig.sugarctl(["status", "--json"]).stdout)
            let live = statusJSON["state"]?["meters"]?.arrayValue?.first { $0["id"]?.stringValue == meter }
            #expect(live?["lastSync"]?["reset"]?.boolValue == true)

            // Three new records after another reset (fewer than before) are stored too.
            let three = records(1...3).map { MeterRecord(sequenceNumber: $0.sequenceNumber, mgdL: $0.mgdL + 90, withContext: $0.withContext) }
            try await rig.mock("SetGlucoseMeterOptions", [.string(meter), .string(#"{"records": \#(recordsJSON(three))}"#)])
            let again = try await rig.syncToSuccess(meter)
            if let again { #expect(again["stored"]?.intValue == 3 && again["reset"]?.boolValue == true) }
            let all = try await rig.waitForReadings(meter, count: 25)
            expectStored(all.filter { $0["epoch"]?.intValue == 2 }, match: three, meter: meter)
        }
    }
}
