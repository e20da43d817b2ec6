import Foundation
import Glibc
import HealthDataSync
import JSON
import ReplayTransport
import SugarAPI
import SugarWire
import Testing
import Varlink

/// The built `sugarctl` binary against an in-process server: output shapes and exit statuses.
@Suite struct SugarctlTests {
    static func run(_ f: Fixture?, _ arguments: [String], environment: [String: String] = [:], stdin: String? = nil)
        async throws -> ProcessOutput
    {
        var env = ["HOME": "/nonexistent-home", "PATH": "/usr/bin:/bin", "TZ": "UTC"]
        for (key, value) in environment { env[key] = value }
        let socket = f.map { ["--socket", $0.path] } ?? []
        return try await runProcess(try sugarctlPath(), arguments + socket, environment: env, stdin: stdin)
    }

    @Test func statusScreenAndJSON() async throws {
        try await withAPIServer { f in
            let screen = try await Self.run(f, ["status"])
            #expect(screen.status == 0, "\(screen.stderr)")
            #expect(screen.stdout.contains("Last reading"))
            #expect(screen.stdout.contains("151 mg/dL (8.4 mmol/L)"))
            #expect(screen.stdout.contains("ago"))
            #expect(screen.stdout.contains("Roche Accu-Chek Guide (C0:26:DA:01:02:03)"))
            #expect(screen.stdout.contains("7 stored"))
            #expect(screen.stdout.contains("hci0: powered"))
            let mmol = try await Self.run(f, ["status", "--unit", "mmol"])
            #expect(mmol.stdout.contains("8.4 mmol/L (151 mg/dL)"))
            let json = try await Self.run(f, ["status", "--json"])
            let reply = try JSONValue(parsing: json.stdout)
            #expect(reply["state"]?["readingCount"] == 7)
            expectValidReply("GetStatus", try #require(reply.objectValue))
            // No subcommand means status; SUGARD_SOCKET picks the socket.
            let bare = try await Self.run(nil, [], environment: ["SUGARD_SOCKET": f.path])
            #expect(bare.status == 0, "\(bare.stderr)")
            #expect(bare.stdout.contains("Last reading"))
            let global = try await runProcess(
                try sugarctlPath(), ["--socket", f.path, "meters"], environment: ["HOME": "/nonexistent-home"])
            #expect(global.status == 0)
            #expect(global.stdout.contains("C0:26:DA:0A:0B:0C"))
        }
    }

    @Test func readingsFormats() async throws {
        try await withAPIServer { f in
            let csv = try await Self.run(f, ["readings", "--format", "csv"])
            #expect(csv.status == 0, "\(csv.stderr)")
            let lines = csv.stdout.split(separator: "\r\n")
            #expect(lines.first.map(String.init) == ReadingExport.csvColumns.joined(separator: ","))
            #expect(lines.count == 8)

            let json = try await Self.run(f, ["readings", "--format", "json"])
            let array = try #require(try JSONValue(parsing: json.stdout).arrayValue)
            #expect(array.count == 7)
            for key in [
                "sequenceNumber", "baseTime", "timeOffsetMinutes", "concentration", "mgdL", "mmolL", "type",
                "sampleLocation", "sensorStatus", "meter", "time", "context", "flags",
            ] {
                #expect(array[0].objectValue?[key] != nil, "\(key)")
            }
            #expect(array[0]["time"]?["iso"] == "2024-03-31T06:00:00Z")
            #expect(array[0]["time"]?["epochMillis"] == .int(seedStart.epochMillis))
            let desc = try await Self.run(f, ["readings", "--format", "json", "--order", "desc", "--limit", "1"])
            #expect(try JSONValue(parsing: desc.stdout).arrayValue?.first?["meter"] == .string(meterB.id.rawValue))
            #expect(desc.stderr.contains("more match"))

            let nightscout = try await Self.run(f, ["readings", "--format", "nightscout", "--meter", meterA.id.rawValue])
            let entries = try #require(try JSONValue(parsing: nightscout.stdout).arrayValue)
            #expect(entries.count == 3)  // control solution and HI left out
            #expect(nightscout.stderr.contains("skipped 2"))
            #expect(entries[0]["type"] == "mbg")
            #expect(entries[0]["mbg"] == 90)
            #expect(entries[0]["date"] == .int(seedStart.epochMillis))
            #expect(entries[0]["dateString"] == "2024-03-31T07:00:00+01:00", "the meter's zone, UTC+1")
            #expect(entries[0]["utcOffset"] == 60)
            #expect(entries[0]["sysTime"] == entries[0]["dateString"])
            #expect(entries[0]["device"]?.stringValue?.contains(meterA.id.rawValue) == true)

            let fhir = try await Self.run(f, ["readings", "--format", "fhir", "--since", "2024-03-31T10:00:00Z"])
            let bundle = try JSONValue(parsing: fhir.stdout)
            #expect(bundle["resourceType"] == "Bundle")
            let observations = (bundle["entry"]?.arrayValue ?? []).compactMap { $0["resource"] }
                .filter { $0["resourceType"] == "Observation" }
            #expect(observations.count == 3)
            #expect(observations.first?["code"]?["coding"]?.arrayValue?.first?["code"] == "41653-7")
            #expect(observations.first?["effectiveDateTime"]?.stringValue?.hasSuffix("+01:00") == true)
            #expect(observations.first?["device"]?["reference"]?.stringValue?.hasPrefix("urn:uuid:") == true)
            let mmol = try await Self.run(f, ["readings", "--format", "fhir", "--unit", "mmol"])
            #expect(mmol.stdout.contains("14743-9"))

            // NDJSON: the same objects as the JSON array, one compact object per line.
            let ndjson = try await Self.run(f, ["readings", "--format", "ndjson"])
            #expect(ndjson.status == 0, "\(ndjson.stderr)")
            let objects = try ndjson.stdout.split(separator: "\n").map { try JSONValue(parsing: String($0)) }
            #expect(objects == array)
            #expect(ndjson.stdout.hasSuffix("}\n") && !ndjson.stdout.contains("\n  "))
            // FHIR: one transaction Bundle per --page-size readings, each complete on its own.
            let paged = try await Self.run(f, ["readings", "--format", "fhir", "--page-size", "3"])
            #expect(paged.status == 0, "\(paged.stderr)")
            let bundles = paged.stdout.components(separatedBy: "\n}\n").filter { !$0.isEmpty }.map { $0 + "\n}" }
            #expect(bundles.count == 3)  // 7 readings: 3, 3, 1
            for text in bundles {
                let bundle = try JSONValue(parsing: text)
                #expect(bundle["type"] == "transaction")
                let entries = bundle["entry"]?.arrayValue ?? []
                let urls = Set(entries.compactMap { $0["fullUrl"]?.stringValue })
                for entry in entries where entry["resource"]?["resourceType"] == "Observation" {
                    #expect(urls.contains(entry["resource"]?["device"]?["reference"]?.stringValue ?? "-"), "the meter's Device is in the same Bundle")
                }
            }
            #expect(try await Self.run(f, ["readings", "--format", "csv", "--page-size", "3"]).status == 64)
            #expect(try await Self.run(f, ["readings", "--format", "fhir", "--page-size", "0"]).status == 64)
            // The table keeps a page and says so in its last line.
            let page = try await Self.run(f, ["readings", "--limit", "2"])
            #expect(page.stdout.split(separator: "\n").last?.hasPrefix("Showing the first 2 readings; more match") == true, "\(page.stdout)")

            let table = try await Self.run(f, ["readings", "--since", "2024-03-31"])
            #expect(table.status == 0)
            #expect(table.stdout.contains("mg/dL"))
            #expect(table.stdout.contains("HI"))
        }
    }

    @Test func exitStatuses() async throws {
        let missing = try await Self.run(nil, ["status"], environment: ["SUGARD_SOCKET": "/tmp/no-such-dir/sock"])
        #expect(missing.status == 69)
        #expect(missing.stderr.contains("sugard is not running"))
        #expect(missing.stderr.contains("systemctl start sugard"))
        try await withAPIServer { f in
            #expect(try await Self.run(f, ["readings", "--format", "xml"]).status == 64)
            #expect(try await Self.run(f, ["readings", "--since", "last tuesday"]).status == 64)
            #expect(try await Self.run(f, ["status", "--bogus"]).status == 64)
            // No row cap: a limit above what one reply carries is paged, not refused.
            #expect(try await Self.run(f, ["readings", "--limit", "1000000"]).status == 0)
            #expect(try await Self.run(f, ["readings", "--limit", "0"]).status == 64)
            // The daemon's InvalidParameter is a usage error too.
            #expect(try await Self.run(f, ["readings", "--since", "2024-04-02", "--until", "2024-04-01"]).status == 64)
            let unknown = try await Self.run(f, ["forget", "C0:26:DA:99:99:99"])
            #expect(unknown.status == 1)
            #expect(unknown.stderr.contains("no meter C0:26:DA:99:99:99"))
            for command in ["status", "watch", "readings", "meters", "sync", "forget", "pair", "sessions", "decode"] {
                let help = try await Self.run(nil, [command, "--help"])
                #expect(help.status == 0)
                #expect(help.stdout.hasPrefix("OVERVIEW:"), "\(command)")
            }
        }
    }

    @Test(.enabled(if: getuid() == 0, "needs root to switch uid"))
    func permissionDeniedIs77() async throws {
        try await withAPIServer(access: AccessPolicy(socketGroup: 4242, adminGroup: 4343, daemonUID: geteuid())) { f in
            func run(_ groups: String, _ arguments: [String]) async throws -> ProcessOutput {
                try await sugarctlAsNobody(f, groups: groups, arguments)
            }
            let read = try await run("4242", ["meters"])
            #expect(read.status == 0, "\(read.stderr)")
            let sync = try await run("4242", ["sync", meterA.id.rawValue])
            #expect(sync.status == 77)
            #expect(sync.stderr.contains("admin group"))
            let outsider = try await run("100", ["status"])
            #expect(outsider.status == 77)
            #expect(outsider.stderr.contains("group"))
        }
    }

    @Test func syncPairForgetSessionsAndWatch() async throws {
        try await withAPIServer(stepDelay: .milliseconds(5)) { f in
            f.queue(
                [meterRecord(sequence: 3, mgdL: 120, at: Instant(epochMillis: seedStart.epochMillis + 9 * hour))],
                for: meterB.id)
            f.removeBond(of: meterA.id)
            let sync = try await Self.run(f, ["sync", meterB.id.rawValue, "--force"])
            #expect(sync.status == 0, "\(sync.stderr)")
            #expect(sync.stdout.contains("\(meterB.id.rawValue): connecting") || sync.stdout.contains("records"))
            #expect(sync.stdout.contains("\(meterB.id.rawValue): success, 1 new"))
            let again = try await Self.run(f, ["sync", meterB.id.rawValue])
            #expect(again.stdout.contains("--force"))

            let wrong = try await Self.run(f, ["pair", meterA.id.rawValue], stdin: "654321\n")
            #expect(wrong.status == 1)
            #expect(wrong.stdout.contains("Enter the PIN shown on the meter: "))
            #expect(wrong.stderr.contains("Run `sugarctl pair` again"))
            let paired = try await Self.run(f, ["pair", meterA.id.rawValue, "--pin", "123456"])
            #expect(paired.status == 0, "\(paired.stderr)")
            #expect(paired.stdout.contains("Paired with"))

            let sessions = try await Self.run(f, ["sessions", meterB.id.rawValue, "--json"])
            #expect(try JSONValue(parsing: sessions.stdout)["sessions"]?.arrayValue?.count == 2)
            let watch = try await Self.run(f, ["watch", "--json", "--field", "readingCount", "--count", "1"])
            #expect(watch.status == 0)
            #expect(try JSONValue(parsing: watch.stdout)["fields"] == ["readingCount": 8])
            let forget = try await Self.run(f, ["forget", meterA.id.rawValue])
            #expect(forget.status == 0)
            #expect(f.models.model(for: meterA.id) == nil)
        }
    }
    @Test func syncExitStatusFollowsTheSessions() async throws {
        try await withAPIServer { f in
            // Success and "no new records" exit 0; --json prints the sessions as one object.
            f.queue([meterRecord(sequence: 3, mgdL: 120, at: Instant(epochMillis: seedStart.epochMillis + 9 * hour))], for: meterB.id)
            let ok = try await Self.run(f, ["sync", meterB.id.rawValue, "--force", "--json"])
            #expect(ok.status == 0, "\(ok.stderr)")
            let okSessions = try #require(try JSONValue(parsing: ok.stdout)["sessions"]?.arrayValue)
            #expect(okSessions.map { $0["result"] } == ["success"])
            #expect(okSessions.first?["stored"] == 1)
            let none = try await Self.run(f, ["sync", meterB.id.rawValue, "--force"])
            #expect(none.status == 0, "\(none.stderr)")
            #expect(none.stdout.contains("\(meterB.id.rawValue): noNewRecords, 0 new"))

            // A meter that refuses the download: exit 1, and stderr names the meter and why.
            f.failNextSync(of: meterA.id)
            let failed = try await Self.run(f, ["sync", meterA.id.rawValue, "--force"])
            #expect(failed.status == 1, "\(failed.stdout)")
            #expect(failed.stdout.contains("\(meterA.id.rawValue): failed, 0 new"))
            #expect(failed.stderr.contains("the sync of \(meterA.id.rawValue) failed"), "\(failed.stderr)")
            #expect(failed.stderr.contains("ATT 0x81"), "\(failed.stderr)")

            // The link drops after 2 of 4 new records: interrupted, 2 new, exit 1.
            f.queue(
                (4...7).map { meterRecord(sequence: UInt16($0), mgdL: 100 + $0, at: Instant(epochMillis: seedStart.epochMillis + Int64(10 + $0) * hour)) },
                for: meterB.id)
            f.transport.updateMeter(meterB.id) { $0.setFaults(SimulatorFaults(disconnectAfterRecords: 2)) }
            let interrupted = try await Self.run(f, ["sync", meterB.id.rawValue, "--force", "--json"])
            #expect(interrupted.status == 1, "\(interrupted.stdout)")
            let sessions = try #require(try JSONValue(parsing: interrupted.stdout)["sessions"]?.arrayValue)
            #expect(sessions.first?["result"] == "interrupted")
            #expect(sessions.first?["stored"] == 2)
            #expect(interrupted.stderr.contains("the sync of \(meterB.id.rawValue) was interrupted"), "\(interrupted.stderr)")
        }
    }
}
