import Foundation
import Glibc
import HealthDataSync
import JSON
import SugarAPI
import SugarWire
import Testing
import Varlink

/// Meters assigned to people, through the real daemon: AssignMeter, and the person in ListMeters,
/// GetStatus, ListReadings and every `sugarctl` view of them.
@Suite struct PeopleTests {
    static func sugarctl(_ f: Fixture, _ arguments: [String]) async throws -> ProcessOutput {
        try await runProcess(try sugarctlPath(), ["--socket", f.path] + arguments, environment: ["HOME": "/nonexistent-home"])
    }

    @Test func assignedPersonShowsEverywhere() async throws {
        try await withAPIServer { f in
            let a = meterA.id.rawValue
            // From before its first reading: every stored reading of the meter is Mia's.
            let assigned = try await Self.sugarctl(f, ["meters", "assign", a, " Mia ", "--from", "2024-01-01"])
            #expect(assigned.status == 0, "\(assigned.stderr)")
            #expect(assigned.stdout.contains("Added person Mia"), "\(assigned.stdout)")
            #expect(assigned.stdout.contains("5 stored reading(s) measured since then now belong to Mia"), "\(assigned.stdout)")

            let meters = try await f.call(api + "ListMeters")
            expectValidReply("ListMeters", meters)
            let entries = meters["meters"]?.arrayValue ?? []
            let entryA = try #require(entries.first { $0["id"]?.stringValue == a })
            let entryB = try #require(entries.first { $0["id"]?.stringValue == meterB.id.rawValue })
            #expect(entryA["person"] == "Mia", "white space around the name is dropped")
            #expect(entryA["stored"]?["person"] == "Mia")
            #expect(entryB["person"]?.isNull == true)

            let status = try await f.call(api + "GetStatus")
            expectValidReply("GetStatus", status)
            #expect(status["people"] == .object([a: "Mia"]))

            let listed = try await f.call(api + "ListReadings")
            expectValidReply("ListReadings", listed)
            let readings = listed["readings"]?.arrayValue ?? []
            #expect(readings.count == 7)
            for reading in readings {
                let mine = reading["meter"]?.stringValue == a
                #expect(reading["person"] == (mine ? "Mia" : .null), "\(reading["meter"] ?? .null)")
            }

            // sugarctl: meters (text, JSON), status, readings as JSON and CSV.
            let table = try await Self.sugarctl(f, ["meters"])
            #expect(table.stdout.contains("Person"))
            let rowA = table.stdout.split(separator: "\n").first { $0.contains(a) } ?? ""
            #expect(rowA.hasSuffix("Mia"), "\(table.stdout)")
            let json = try JSONValue(parsing: try await Self.sugarctl(f, ["meters", "--json"]).stdout)
            #expect(json["meters"]?.arrayValue?.first { $0["id"]?.stringValue == a }?["person"] == "Mia")
            let screen = try await Self.sugarctl(f, ["status"]).stdout
            #expect(screen.contains("(\(a)), person Mia"), "\(screen)")
            let statusJSON = try JSONValue(parsing: try await Self.sugarctl(f, ["status", "--json"]).stdout)
            #expect(statusJSON["people"]?[a] == "Mia")
            let readingsJSON = try JSONValue(parsing: try await Self.sugarctl(f, ["readings", "--format", "json"]).stdout)
            #expect(readingsJSON.arrayValue?.filter { $0["person"] == "Mia" }.count == 5)
            let csv = try await Self.sugarctl(f, ["readings", "--format", "csv"]).stdout
            let lines = csv.split(separator: "\r\n").map(String.init)
            let header = lines.first?.split(separator: ",").map(String.init) ?? []
            #expect(header.last == "person")
            #expect(Array(header.dropLast()) == Array(ReadingExport.csvColumns.dropLast()), "earlier columns keep their positions")
            #expect(header.prefix(3) == ["reading_id", "meter", "sequence"])
            for line in lines.dropFirst() {
                let meter = line.split(separator: ",").dropFirst().first.map(String.init) ?? ""
                #expect(line.hasSuffix(meter == a ? ",Mia" : ","), "\(line)")
            }

            // A new reading of the meter carries the person too.
            f.queue([meterRecord(sequence: 6, mgdL: 123, at: Instant(epochMillis: seedStart.epochMillis + 9 * hour))], for: meterA.id)
            let synced = try await Self.sugarctl(f, ["sync", a, "--force"])
            #expect(synced.status == 0, "\(synced.stderr)")
            let newest = try await f.call(api + "ListReadings", ["meter": .string(a), "order": "desc", "limit": 1])
            #expect(newest["readings"]?.arrayValue?.first?["sequenceNumber"] == 6)
            #expect(newest["readings"]?.arrayValue?.first?["person"] == "Mia")

            // Reassigning and unassigning from now on: the meter changes hands, its readings keep their person.
            #expect(try await Self.sugarctl(f, ["meters", "assign", a, "Jonas Weber"]).status == 0)
            #expect(try await f.call(api + "GetStatus")["people"] == .object([a: "Jonas Weber"]))
            let unassigned = try await Self.sugarctl(f, ["meters", "unassign", a])
            #expect(unassigned.status == 0, "\(unassigned.stderr)")
            #expect(unassigned.stdout.contains("no stored reading changed hands"), "\(unassigned.stdout)")
            #expect(try await f.call(api + "GetStatus")["people"] == .object([:]))
            let after = try await f.call(api + "ListReadings", ["meter": .string(a)])
            #expect(after["readings"]?.arrayValue?.allSatisfy { $0["person"] == "Mia" } == true)
        }
    }

    @Test func badAssignmentsAreRefused() async throws {
        try await withAPIServer(seed: false) { f in
            let unknown = await remoteError {
                _ = try await f.call(api + "AssignMeter", ["meter": "00:11:22:33:44:55", "person": "Mia"])
            }
            #expect(unknown?.name == api + "MeterNotFound")
            if let unknown { expectValidError(unknown) }
            for bad in ["", "   ", "Mia\u{7}", String(repeating: "x", count: 65)] {
                let error = await remoteError {
                    _ = try await f.call(api + "AssignMeter", ["meter": .string(meterA.id.rawValue), "person": .string(bad)])
                }
                #expect(error?.name == api + "InvalidParameter", "\(bad)")
                #expect(error?.parameters["parameter"] == "person")
            }
            #expect(try await f.store.people().isEmpty)
            // sugarctl: usage errors are 64, an unknown meter is 1.
            #expect(try await Self.sugarctl(f, ["meters", "assign", meterA.id.rawValue]).status == 64)
            #expect(try await Self.sugarctl(f, ["meters", "assign", meterA.id.rawValue, ""]).status == 64)
            #expect(try await Self.sugarctl(f, ["meters", "frobnicate"]).status == 64)
            let missing = try await Self.sugarctl(f, ["meters", "unassign", "00:11:22:33:44:55"])
            #expect(missing.status == 1)
            #expect(missing.stderr.contains("00:11:22:33:44:55"))
            // A meter with a name of 64 characters is fine.
            let long = String(repeating: "ü", count: 64)
            #expect(try await Self.sugarctl(f, ["meters", "assign", meterA.id.rawValue, long]).status == 0)
            #expect(try await f.store.people() == [meterA.id: long])
        }
    }

    @Test(.enabled(if: getuid() == 0, "needs root to switch uid"))
    func assigningIsForAdminsOnly() async throws {
        try await withAPIServer(access: AccessPolicy(socketGroup: 4242, adminGroup: 4343, daemonUID: geteuid())) { f in
            func run(_ groups: String, _ arguments: [String]) async throws -> ProcessOutput {
                try await sugarctlAsNobody(f, groups: groups, arguments)
            }
            let reader = try await run("4242", ["meters", "assign", meterA.id.rawValue, "Mia"])
            #expect(reader.status == 77, "\(reader)")
            #expect(try await run("4242", ["meters", "unassign", meterA.id.rawValue]).status == 77)
            #expect(try await f.store.people().isEmpty)
            let admin = try await run("4242,4343", ["meters", "assign", meterA.id.rawValue, "Mia"])
            #expect(admin.status == 0, "\(admin)")
            #expect(try await f.store.people() == [meterA.id: "Mia"])
        }
    }
}
