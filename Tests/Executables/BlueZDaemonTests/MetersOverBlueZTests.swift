import DBus
import Foundation
import JSON
import Testing
import TestSupport

private let verioMeter = "C0:26:DA:0E:0E:01"
private let ctsMeter = "C0:26:DA:0C:0C:01"
private let isensMeter = "C0:26:DA:15:0E:01"
private let ctsResetMeter = "C0:26:DA:0C:0C:02"
private let verioHiLoMeter = "C0:26:DA:0E:0E:02"

/// Verio options for the stand-in: records `[number, seconds since 2000, mg/dL, trailer]`.
private func verioOptions(_ records: [(Int, Int)], highest: Int? = nil, extra: String = "") -> String {
    let list = records.map { "[\($0.0), \(800_000_000 + $0.0 * 3600), \($0.1), null]" }.joined(separator: ", ")
    let top = highest.map { #", "highest": \#($0)"# } ?? ""
    return #""manufacturer": "LifeScan", "model": "OneTouch Verio Flex", "requires_pairing": true, "bonded": true, "verio": {"clock": 800100000, "records": [\#(list)]\#(top)}\#(extra)"#
}

/// The real sugard against the BlueZ stand-in with a OneTouch Verio, a meter whose Current Time can be
/// written and an i-SENS meter with its vendor time (issue 36).
@Suite("meters over the BlueZ stand-in: Verio and clock setting", .serialized)
struct MetersOverBlueZTests {
    @Test("a Verio syncs over its vendor service exactly once, through a dropped link and a cleared memory")
    func verio() async throws {
        let options = verioOptions([(1, 120), (2, 95), (3, 200), (4, 130)], extra: #", "disconnect_after_records": 2"#)
        let meter = SimulatedMeter(address: verioMeter, name: "OneTouch Verio", records: [], options: options)
        try await withRig(standIn: standIn([meter])) { rig in
            // The first attempt drops after two records; the retry asks for the rest only.
            let readings: [JSONValue]
            do {
                readings = try await rig.waitForReadings(verioMeter, count: 4, seconds: 40)
            } catch {
                Issue.record("sugard's log:\n\(rig.daemonLog)")
                throw error
            }
            #expect(readings.compactMap { $0["sequenceNumber"]?.intValue } == [1, 2, 3, 4])
            #expect(readings.compactMap { $0["mgdL"]?.doubleValue } == [120, 95, 200, 130])
            #expect(readings.first?["characteristic"]?.stringValue == "af9df7a3-e595-11e3-96b4-0002a5d5c51b")
            try await rig.waitForLastSync(verioMeter, ["success"])
            let sessions = try await rig.sessions(verioMeter)
            #expect(sessions.contains { $0["result"]?.stringValue == "interrupted" })
            #expect(sessions.compactMap { $0["duplicates"]?.intValue }.reduce(0, +) == 0)
            let state = try await rig.meterState(verioMeter)
            #expect(state["paired"]?.boolValue == true)
            // Commands seen by the meter: clock, highest, count, records (acks are not commands).
            let commands = state["verio_commands"]?.arrayValue?.compactMap(\.stringValue) ?? []
            #expect(commands.prefix(1) == ["2002"])
            #expect(commands.contains("b30100") && commands.contains("b30400"))

            // sugarctl meters names the procedure; --json has procedure and clockSettable.
            let text = try await rig.sugarctl(["meters"])
            #expect(text.stdout.contains("Verio"), "\(text.stdout)")
            let json = try JSONValue(parsing: try await rig.sugarctl(["meters", "--json"]).stdout)
            let entry = json["meters"]?.arrayValue?.first { $0["id"]?.stringValue == verioMeter }
            #expect(entry?["procedure"]?.stringValue == "verio")
            #expect(entry?["clockSettable"]?.boolValue == false)

            // The memory is cleared and two new readings taken: numbering restarts, a new epoch.
            try await rig.mock(
                "SetGlucoseMeterOptions",
                [.string(verioMeter), .string("{" + verioOptions([(1, 180), (2, 181)]) + #", "disconnect_after_records": null}"#)])
            let session = try await rig.syncToSuccess(verioMeter)
            #expect(session?["reset"]?.boolValue == true)
            #expect(session?["stored"]?.intValue == 2)
            let all = try await rig.waitForReadings(verioMeter, count: 6)
            #expect(all.filter { $0["epoch"]?.intValue == 1 }.compactMap { $0["mgdL"]?.doubleValue } == [180, 181])
        }
    }

    @Test("a wrong Current Time is set after the download; sessions, status and meters show it")
    func currentTimeIsSet() async throws {
        // 2019-01-01 00:00:00, a Tuesday: far off whatever the host's clock says.
        let options = #""cts": "e3070101000000020000", "cts_writable": true"#
        let meter = SimulatedMeter(address: ctsMeter, records: records(1...2), options: options)
        try await withRig(standIn: standIn([meter])) { rig in
            _ = try await rig.waitForReadings(ctsMeter, count: 2)
            try await rig.waitForLastSync(ctsMeter, ["success"])
            let state = try await rig.meterState(ctsMeter)
            let writes = state["clock_writes"]?.arrayValue?.compactMap(\.stringValue) ?? []
            #expect(writes.count == 1)
            let sessions = try await rig.sessions(ctsMeter)
            let clock = sessions.compactMap { $0["clockSet"] }.first { !$0.isNull }
            #expect(clock?["method"]?.stringValue == "currentTime")
            #expect((clock?["skewBeforeSeconds"]?.intValue ?? 0) < -100_000_000)
            #expect(abs(clock?["skewAfterSeconds"]?.intValue ?? 99) <= 2)
            let text = try await rig.sugarctl(["sessions", ctsMeter])
            // Old and new skew: 2019 is years slow; the read-back is right.
            #expect(text.stdout.contains("clock set (was "), "\(text.stdout)")
            #expect(text.stdout.contains(" slow, now "), "\(text.stdout)")
            let status = try await rig.sugarctl(["status"])
            #expect(status.stdout.contains("clock set (was "), "\(status.stdout)")
            #expect(status.stdout.contains(" slow, now "), "\(status.stdout)")
            let json = try JSONValue(parsing: try await rig.sugarctl(["meters", "--json"]).stdout)
            let entry = json["meters"]?.arrayValue?.first { $0["id"]?.stringValue == ctsMeter }
            #expect(entry?["procedure"]?.stringValue == "gls")
            #expect(entry?["clockSettable"]?.boolValue == true)
            // Right now: the next sync does not write again.
            _ = try await rig.syncToSuccess(ctsMeter)
            #expect(try await rig.meterState(ctsMeter)["clock_writes"]?.arrayValue?.count == 1)
        }
    }

    @Test("an i-SENS meter gets the local time through 0xFFF1 after its download")
    func isensTimeIsSet() async throws {
        let options = #""manufacturer": "i-SENS", "model": "CareSens N Premier", "isens_time": true"#
        let meter = SimulatedMeter(address: isensMeter, name: "CareSens 1", records: records(1...2), options: options)
        try await withRig(standIn: standIn([meter])) { rig in
            _ = try await rig.waitForReadings(isensMeter, count: 2)
            try await rig.waitForLastSync(isensMeter, ["success"])
            let writes = try await rig.meterState(isensMeter)["clock_writes"]?.arrayValue?.compactMap(\.stringValue) ?? []
            #expect(writes.count == 1)
            #expect(writes.first?.hasPrefix("c0030100") == true && writes.first?.count == 22, "\(writes)")
            let sessions = try await rig.sessions(isensMeter)
            #expect(sessions.contains { $0["clockSet"]?["method"]?.stringValue == "isens" })
        }
    }

    @Test("a writable-CTS meter: a dropped link resumes without duplicates and sets the clock only after the complete download; a reset starts a new epoch")
    func currentTimeMeterThroughADroppedLinkAndAReset() async throws {
        // 2019-01-01 00:00:00: far off the host's clock, so the complete download sets it.
        let options = #""cts": "e3070101000000020000", "cts_writable": true, "disconnect_after_records": 2"#
        let meter = SimulatedMeter(address: ctsResetMeter, records: records(1...5), options: options)
        try await withRig(standIn: standIn([meter])) { rig in
            let readings: [JSONValue]
            do {
                readings = try await rig.waitForReadings(ctsResetMeter, count: 5, seconds: 40)
            } catch {
                Issue.record("sugard's log:\n\(rig.daemonLog)")
                throw error
            }
            #expect(readings.compactMap { $0["sequenceNumber"]?.intValue } == [1, 2, 3, 4, 5])
            try await rig.waitForLastSync(ctsResetMeter, ["success"])
            let sessions = try await rig.sessions(ctsResetMeter)
            let interrupted = sessions.filter { $0["result"]?.stringValue == "interrupted" }
            #expect(!interrupted.isEmpty, "\(sessions)")
            // Never after an interrupted download: the one write belongs to the complete one.
            #expect(interrupted.allSatisfy { $0["clockSet"]?.isNull ?? true })
            let set = sessions.filter { !($0["clockSet"]?.isNull ?? true) }
            #expect(set.count == 1 && set.first?["result"]?.stringValue == "success", "\(sessions)")
            #expect(try await rig.meterState(ctsResetMeter)["clock_writes"]?.arrayValue?.count == 1)
            #expect(sessions.compactMap { $0["stored"]?.intValue }.reduce(0, +) == 5)

            // Memory cleared, two new readings numbered from 1 again: a reset into a new epoch.
            let fresh = [MeterRecord(sequenceNumber: 1, mgdL: 201, withContext: false),
                         MeterRecord(sequenceNumber: 2, mgdL: 202, withContext: false)]
            try await rig.mock(
                "SetGlucoseMeterOptions",
                [.string(ctsResetMeter), .string(#"{"records": \#(recordsJSON(fresh)), "disconnect_after_records": null}"#)])
            let session = try await rig.syncToSuccess(ctsResetMeter)
            #expect(session?["reset"]?.boolValue == true, "\(String(describing: session))")
            #expect(session?["stored"]?.intValue == 2)
            let all = try await rig.waitForReadings(ctsResetMeter, count: 7)
            #expect(all.count == 7)
            #expect(all.filter { $0["epoch"]?.intValue == 1 }.compactMap { $0["mgdL"]?.doubleValue } == [201, 202])
            // The clock is right now: the reset download writes it no more.
            #expect(try await rig.meterState(ctsResetMeter)["clock_writes"]?.arrayValue?.count == 1)
        }
    }

    @Test("a Verio's HI (above 600 mg/dL), LO (below 20) and 0 are stored as HI, LO and no value, never as numbers")
    func verioHiAndLo() async throws {
        let options = verioOptions([(1, 612), (2, 12), (3, 0), (4, 600), (5, 20)])
        let meter = SimulatedMeter(address: verioHiLoMeter, name: "OneTouch Verio", records: [], options: options)
        try await withRig(standIn: standIn([meter])) { rig in
            let readings = try await rig.waitForReadings(verioHiLoMeter, count: 5, seconds: 40)
            func flags(_ n: Int64) -> Set<String> {
                let reading = readings.first { $0["sequenceNumber"]?.intValue == n }
                return Set(reading?["flags"]?.arrayValue?.compactMap(\.stringValue) ?? [])
            }
            #expect(flags(1).contains("hi") && !flags(1).contains("lo"))
            #expect(flags(2).contains("lo") && !flags(2).contains("hi"))
            #expect(flags(3).contains("noValue"))
            #expect(flags(4).isDisjoint(with: ["hi", "lo", "noValue"]) && flags(5).isDisjoint(with: ["hi", "lo", "noValue"]))
            #expect(readings.map { $0["mgdL"]?.doubleValue } == [nil, nil, nil, 600, 20])
            // The value as sent stays visible in the stored record.
            #expect(readings.first?["meterSeconds"]?.intValue != nil)
        }
    }
}
