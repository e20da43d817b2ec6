import Foundation
import Glibc
import HealthDataSync
import JSON
import ReplayTransport
import Testing

/// One CLI grammar: every sugarctl command that prints data takes `--json` and then prints one JSON
/// document on stdout, run for real against the daemon hosted in the test (a real socket, store and
/// simulated meters). The table must cover every subcommand `sugarctl --help` lists, so a new command
/// (and every action of one) fails here until it has `--json` and a row.
@Suite struct SugarctlGrammarTests {
    /// How to run each command with `--json` and what its JSON must hold: `nil` for "runs here, any
    /// JSON"; the check gets the parsed output.
    struct Row: Sendable {
        var arguments: [String]
        /// The exit statuses that are fine (doctor fails checks on a machine without Bluetooth).
        var statuses: Set<Int32> = [0]
        var check: @Sendable (JSONValue) -> Bool = { _ in true }
    }

    static let measurementHex = "1b 04:00 e3 07 02 1b 0b 0a 1e 3c 00 58 b0 12 40 00"
    static let capture = packageRoot + "/fixtures/accu-chek-guide-mgdl-mtu23.btsnoop"

    /// Each subcommand (and each action of one) run with `--json`, in this order (pair before forget).
    static func table(_ directory: String) -> [(command: String, row: Row)] {
        let a = meterA.id.rawValue, b = meterB.id.rawValue
        return [
            ("status", Row(arguments: ["status", "--json"]) { $0["state"]?["readingCount"] != nil }),
            ("watch", Row(arguments: ["watch", "--json", "--field", "readingCount", "--count", "1"]) { $0["fields"] != nil }),
            ("readings", Row(arguments: ["readings", "--json"]) { $0.arrayValue?.count == 7 }),
            ("meters", Row(arguments: ["meters", "--json"]) { $0["meters"]?.arrayValue?.count == 2 }),
            ("meters", Row(arguments: ["meters", "assign", b, "Mia", "--json"]) { $0["meter"] == .string(b) && $0["person"] == "Mia" && $0["moved"] != nil }),
            ("meters", Row(arguments: ["meters", "unassign", b, "--json"]) { $0["meter"] == .string(b) && $0["person"] == .null && $0["moved"] != nil }),
            ("meters", Row(arguments: ["meters", "share", b, "--json"]) { $0["meter"] == .string(b) && $0["shared"] == true }),
            ("meters", Row(arguments: ["meters", "history", b, "--json"]) { ($0["assignments"]?.arrayValue?.count ?? 0) >= 2 }),
            ("people", Row(arguments: ["people", "add", "Noor", "--identifier", "urn:oid:1.2.3|42", "--json"]) { $0["person"]?["name"] == "Noor" }),
            ("people", Row(arguments: ["people", "--json"]) { $0["people"]?.arrayValue?.isEmpty == false }),
            ("people", Row(arguments: ["people", "show", "Noor", "--json"]) { $0["person"]?["name"] == "Noor" }),
            ("people", Row(arguments: ["people", "edit", "Noor", "--low", "75", "--json"]) { $0["person"] != nil }),
            ("people", Row(arguments: ["people", "remove", "Noor", "--json"]) { $0["releasedReadings"] != nil }),
            ("sync", Row(arguments: ["sync", b, "--force", "--json"]) { $0["sessions"]?.arrayValue?.count == 1 }),
            ("pair", Row(arguments: ["pair", a, "--pin", "123456", "--json"]) { $0["meter"] == .string(a) && $0["paired"] == true }),
            ("sessions", Row(arguments: ["sessions", "--json"]) { ($0["sessions"]?.arrayValue?.count ?? 0) >= 3 }),
            ("forget", Row(arguments: ["forget", a, "--json"]) { $0 == ["meter": .string(a), "forgotten": true] }),
            ("decode", Row(arguments: ["decode", "measurement", measurementHex, "--json"]) { $0["sequenceNumber"] == 4 }),
            ("capture", Row(arguments: ["capture", "inspect", capture, "--json"]) { $0["records"]?.arrayValue?.isEmpty == false }),
            ("capture", Row(arguments: ["capture", "redact", capture, directory + "/redacted.btsnoop", "--json"]) {
                $0["output"] == .string(directory + "/redacted.btsnoop") && ($0["connectionsKept"]?.intValue ?? 0) >= 1
            }),
            ("doctor", Row(arguments: ["doctor", "--json"], statuses: [0, 1]) { $0["checks"]?.arrayValue?.isEmpty == false }),
            ("report", Row(arguments: ["report", "--json", "--since", "2024-03-30", "--days", "3"]) { $0["readings"] != nil }),
            // No sugard-forward here: 69 and the reply's shape with the reason (ForwardTests run it with one).
            ("alerts", Row(arguments: ["alerts", "--json"], statuses: [0, 69]) { $0["active"]?.arrayValue != nil && $0["webhooks"] != nil }),

            ("check", Row(arguments: ["check", "--json"]) { $0["check"]?["result"] == "ok" && $0["check"]?["kind"] == "full" }),
            // Last: the restore swaps the database the rows above read.
            ("backup", Row(arguments: ["backup", directory + "/backup.sqlite", "--json"]) {
                $0["path"] == .string(directory + "/backup.sqlite") && ($0["size"]?.intValue ?? 0) > 0 && $0["databaseId"]?.stringValue != nil
            }),
            ("restore", Row(arguments: ["restore", directory + "/backup.sqlite", "--json"]) {
                $0["databaseId"]?.stringValue != nil && $0["previousDatabaseId"]?.stringValue != nil && $0["databaseId"] != $0["previousDatabaseId"]
            }),
        ]
    }

    /// Words of a `--help` section: each row's first word.
    static func section(_ help: String, _ title: String) -> [String] {
        var rows: [String] = []
        var inside = false
        for line in help.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasSuffix(":") && !line.hasPrefix(" ") { inside = line == title + ":"; continue }
            guard inside, line.hasPrefix("  "), let first = line.split(separator: " ").first else { continue }
            rows.append(String(first))
        }
        return rows
    }

    @Test func everyCommandThatPrintsDataTakesJSON() async throws {
        let root = try await SugarctlTests.run(nil, ["--help"])
        let commands = Self.section(root.stdout, "SUBCOMMANDS")
        #expect(commands.count >= 12, "\(root.stdout)")
        #expect(root.stdout.contains("--json"), "the root help names the grammar")
        // Every command's help (and every action's: capture redact/record) lists --json.
        for command in commands + ["capture redact", "capture record"] {
            let words = command.split(separator: " ").map(String.init)
            let help = try await SugarctlTests.run(nil, words + ["--help"])
            #expect(help.status == 0)
            #expect(Self.section(help.stdout, "OPTIONS").contains("--json"), "sugarctl \(command) --help lacks --json")
            #expect(help.stdout.contains("[--json]"), "sugarctl \(command)'s usage lacks [--json]")
        }
        let directory = makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let table = Self.table(directory)
        #expect(Set(commands).isSubset(of: Set(table.map(\.command))), "no --json row for \(Set(commands).subtracting(table.map(\.command)))")
        try await withAPIServer { f in
            f.removeBond(of: meterA.id)
            for (command, row) in table {
                let daemonless = ["decode", "capture"].contains(command)
                let result = try await SugarctlTests.run(daemonless ? nil : f, row.arguments)
                #expect(row.statuses.contains(result.status), "sugarctl \(row.arguments.joined(separator: " ")): \(result.status) \(result.stderr)")
                let json = try? JSONValue(parsing: result.stdout)
                #expect(json != nil, "sugarctl \(row.arguments.joined(separator: " ")) printed no JSON document: \(result.stdout.prefix(300))")
                if let json { #expect(row.check(json), "sugarctl \(row.arguments.joined(separator: " ")): \(result.stdout.prefix(400))") }
            }
        }
    }

    @Test func formatJSONStaysASynonym() async throws {
        try await withAPIServer { f in
            let json = try await SugarctlTests.run(f, ["readings", "--json"])
            let format = try await SugarctlTests.run(f, ["readings", "--format", "json"])
            #expect(json.status == 0 && json.stdout == format.stdout)
            let clash = try await SugarctlTests.run(f, ["readings", "--json", "--format", "csv"])
            #expect(clash.status == 64)
            #expect(clash.stderr.contains("--json and --format csv disagree"), "\(clash.stderr)")
            #expect(try await SugarctlTests.run(f, ["readings", "--json", "--format", "json"]).status == 0)

            let period = ["--since", "2024-03-30", "--days", "3"]
            let report = try await SugarctlTests.run(f, ["report", "--json"] + period)
            let reportFormat = try await SugarctlTests.run(f, ["report", "--format", "json"] + period)
            #expect(report.status == 0, "\(report.stderr)")
            // Equal but for the moment each was made.
            let a = try JSONValue(parsing: report.stdout), b = try JSONValue(parsing: reportFormat.stdout)
            #expect(a["readings"] == b["readings"] && a["lows"] == b["lows"] && a["period"] == b["period"])
            #expect(try await SugarctlTests.run(f, ["report", "--json", "--format", "html"] + period).status == 64)
        }
    }

    @Test func pairWithJSONKeepsStdoutForTheOutcome() async throws {
        try await withAPIServer(stepDelay: .milliseconds(5)) { f in
            f.removeBond(of: meterA.id)
            // A wrong PIN: exit 1, the prompt on stderr, stdout one JSON object saying it failed.
            let wrong = try await SugarctlTests.run(f, ["pair", meterA.id.rawValue, "--json"], stdin: "654321\n")
            #expect(wrong.status == 1)
            #expect(wrong.stderr.contains("Enter the PIN shown on the meter: "))
            let outcome = try JSONValue(parsing: wrong.stdout)
            #expect(outcome["paired"] == false && outcome["meter"] == .string(meterA.id.rawValue), "\(wrong.stdout)")
            #expect(outcome["message"]?.stringValue?.isEmpty == false)
        }
    }
}

/// What the readings table and the status screen show: times in the daemon's zone, resolved errors.
@Suite struct SugarctlDisplayTests {
    @Test func readingsTableFollowsTheDaemonsZoneUnlessLocal() async throws {
        try await withAPIServer { f in
            // The daemon resolves the meters' times in Etc/GMT-1 (UTC+1); this shell is in UTC.
            let table = try await SugarctlTests.run(f, ["readings", "--limit", "1"], environment: ["TZ": "UTC"])
            #expect(table.status == 0, "\(table.stderr)")
            let lines = table.stdout.split(separator: "\n")
            #expect(lines.first?.hasPrefix("Time (\(meterZone))") == true, "\(table.stdout)")
            #expect(lines.dropFirst().first?.hasPrefix("2024-03-31 07:00") == true, "06:00 UTC is 07:00 at UTC+1: \(table.stdout)")
            let local = try await SugarctlTests.run(f, ["readings", "--limit", "1", "--local"], environment: ["TZ": "UTC"])
            let localLines = local.stdout.split(separator: "\n")
            #expect(localLines.first?.hasPrefix("Time (this machine, UTC)") == true, "\(local.stdout)")
            #expect(localLines.dropFirst().first?.hasPrefix("2024-03-31 06:00") == true, "\(local.stdout)")
            // Another shell zone changes only --local.
            let tokyo = try await SugarctlTests.run(f, ["readings", "--limit", "1"], environment: ["TZ": "Asia/Tokyo"])
            #expect(tokyo.stdout == table.stdout)
            let tokyoLocal = try await SugarctlTests.run(f, ["readings", "--limit", "1", "--local"], environment: ["TZ": "Asia/Tokyo"])
            #expect(tokyoLocal.stdout.split(separator: "\n").dropFirst().first?.hasPrefix("2024-03-31 15:00") == true, "\(tokyoLocal.stdout)")
        }
    }

    @Test func statusShowsAnErrorAsResolvedAfterASuccessfulSync() async throws {
        try await withAPIServer { f in
            let id = meterA.id.rawValue
            f.failNextSync(of: meterA.id)
            let failed = try await SugarctlTests.run(f, ["sync", id, "--force"])
            #expect(failed.status == 1, "\(failed.stdout)")
            let broken = try await SugarctlTests.run(f, ["status"])
            #expect(broken.stdout.contains("Recent errors"), "\(broken.stdout)")
            #expect(!broken.stdout.contains("Resolved errors"))
            let errorLine = try #require(broken.stdout.split(separator: "\n").first { $0.contains(id) && $0.contains(" [") })

            // The meter syncs fine again: the error is shown as resolved, no longer as current.
            f.transport.updateMeter(meterA.id) { $0.setFaults(SimulatorFaults()) }
            let fixed = try await SugarctlTests.run(f, ["sync", id, "--force"])
            #expect(fixed.status == 0, "\(fixed.stdout) \(fixed.stderr)")
            let screen = try await SugarctlTests.run(f, ["status"])
            #expect(!screen.stdout.contains("Recent errors"), "\(screen.stdout)")
            #expect(screen.stdout.contains("Resolved errors"), "\(screen.stdout)")
            let resolved = screen.stdout.split(separator: "\n").first { $0.contains(id) && $0.contains("resolved: sync ") }
            #expect(resolved != nil, "\(screen.stdout)")
            #expect(resolved.map { $0.contains(errorLine.split(separator: ":").dropFirst().first ?? "") } == true, "\(errorLine) / \(screen.stdout)")
            // The view model still holds the error as it happened (its semantics unchanged).
            let json = try JSONValue(parsing: try await SugarctlTests.run(f, ["status", "--json"]).stdout)
            #expect((json["state"]?["errors"]?.arrayValue ?? []).contains { $0["meter"] == .string(id) })
        }
    }
}
