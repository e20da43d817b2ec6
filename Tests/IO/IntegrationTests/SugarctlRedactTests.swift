import Foundation
import JSON
import PacketCapture
import ReplayTransport
import Testing
import TestSupport

/// The built `sugarctl capture redact` and `capture record` from the outside: exit statuses, and the
/// redacted fixtures inspecting the same as the originals.
@Suite struct SugarctlRedactTests {
    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("redact-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test(arguments: FixtureMeter.allCases.map(\.rawValue))
    func redactedFixtureInspectsTheSame(name: String) throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let output = dir.appendingPathComponent("out.btsnoop").path
        let redacted = try SugarctlCaptureTests.run(["capture", "redact", fixturePath(name), output])
        #expect(redacted.status == 0, "\(redacted.stderr)")
        #expect(redacted.stdout.isEmpty)
        // Every connection is the meter's (the Accu-Chek one has two: a failed pairing, then the download).
        let expected = try JSONValue(parsing: String(
            decoding: try #require(FileManager.default.contents(atPath: fixturePath(name, ".expected.json"))), as: UTF8.self))
        let connections = try #require(expected["sessions"]?.arrayValue?.count)
        #expect(redacted.stderr.contains("\(connections) connection(s) kept, 0 removed"))
        let before = try SugarctlCaptureTests.run(["capture", "inspect", fixturePath(name), "--json"])
        let after = try SugarctlCaptureTests.run(["capture", "inspect", output, "--json"])
        var original = try JSONValue(parsing: before.stdout.trimmingCharacters(in: .newlines))
        var result = try JSONValue(parsing: after.stdout.trimmingCharacters(in: .newlines))
        let peer = original["sessions"]?.arrayValue?.first?["peer"]?.stringValue
        let fake = result["sessions"]?.arrayValue?.first?["peer"]?.stringValue
        #expect(peer != nil && fake != nil && peer != fake)
        #expect(fake?.hasSuffix(":00:00:00:00:01") == true)
        // Addresses aside, the same sessions, records (with their frame numbers) and anomalies.
        original = try JSONValue(parsing: before.stdout.replacingOccurrences(of: peer ?? "-", with: "PEER"))
        result = try JSONValue(parsing: after.stdout.replacingOccurrences(of: fake ?? "-", with: "PEER"))
        #expect(result == original)

        let kept = try SugarctlCaptureTests.run(["capture", "redact", fixturePath(name), output, "--keep-addresses",
                                                 "--meter", peer ?? "-"])
        #expect(kept.status == 0, "\(kept.stderr)")
        #expect(try SugarctlCaptureTests.run(["capture", "inspect", output, "--json"]).stdout == before.stdout)
    }

    @Test func exitStatuses() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let output = dir.appendingPathComponent("out.btsnoop").path
        #expect(try SugarctlCaptureTests.run(["capture", "redact", "--help"]).stdout.contains(
            "USAGE: sugarctl capture redact <in> <out> [--meter <addr>] [--keep-addresses]"))
        #expect(try SugarctlCaptureTests.run(["capture", "record", "--help"]).stdout.contains(
            "USAGE: sugarctl capture record <out> [--meter <addr>] [--redact]"))
        for arguments in [["capture", "redact"], ["capture", "redact", fixturePath("wrap-65535")],
                          ["capture", "redact", fixturePath("wrap-65535"), output, "--meter", "nonsense"],
                          ["capture", "redact", fixturePath("wrap-65535"), output, "extra"],
                          ["capture", "record"], ["capture", "record", output, "--bogus"]] {
            let result = try SugarctlCaptureTests.run(arguments)
            #expect(result.status == 64, "\(arguments): \(result.stderr)")
        }
        #expect(try SugarctlCaptureTests.run(["capture", "redact", "/nonexistent/in.btsnoop", output]).status == 65)
        let noMeter = try SugarctlCaptureTests.run(
            ["capture", "redact", fixturePath("wrap-65535"), output, "--meter", "11:22:33:44:55:66"])
        #expect(noMeter.status == 65)
        #expect(noMeter.stderr.contains("no connection to 11:22:33:44:55:66"))
        #expect(try SugarctlCaptureTests.run(["capture", "redact", fixturePath("wrap-65535"), "/nonexistent/dir/out"]).status == 1)
    }
}
