import Foundation
import GlucoseProfile
import JSON
import PacketCapture
import ReplayTransport
import Testing
import TestSupport

/// Runs the built `sugarctl` and checks the `capture inspect` contract.
@Suite struct SugarctlCaptureTests {
    typealias Output = ProcessResult

    /// The built sugarctl, run to its end.
    static func run(_ arguments: [String]) throws -> Output { try runBuilt("sugarctl", arguments) }

    @Test(arguments: FixtureMeter.allCases.map(\.rawValue))
    func jsonMatchesTheExpectedDecode(name: String) throws {
        let result = try Self.run(["capture", "inspect", fixturePath(name), "--json"])
        #expect(result.status == 0)
        #expect(result.stderr.isEmpty)
        let json = try JSONValue(parsing: result.stdout.trimmingCharacters(in: .newlines))
        let expected = try JSONValue(parsing: String(
            decoding: try #require(FileManager.default.contents(atPath: fixturePath(name, ".expected.json"))), as: UTF8.self))
        #expect(json == expected)
        #expect(json.objectValue?.keys == ["sessions", "records", "anomalies"])
        let decodeKeys = [
            "characteristic", "flags", "reservedFlags", "sequenceNumber", "baseTime", "timeOffsetMinutes",
            "userFacingTime", "concentration", "mgdL", "mmolL", "type", "sampleLocation", "sensorStatus", "contextFollows",
        ]
        // Every record comes from the last connection (the Accu-Chek capture's first one only fails pairing).
        let lastSession = Int64((json["sessions"]?.arrayValue?.count ?? 0) - 1)
        #expect(lastSession == (name == FixtureMeter.accuChekGuide.rawValue ? 1 : 0))
        for record in json["records"]?.arrayValue ?? [] {
            #expect(record.objectValue?.keys == decodeKeys + ["frame", "session", "context"])
            #expect(record["session"]?.intValue == lastSession)
        }
        for anomaly in json["anomalies"]?.arrayValue ?? [] {
            #expect(anomaly.objectValue?.keys == ["frame", "characteristic", "reason"])
        }
    }

    @Test func recordsMatchDecodeMeasurementOutput() throws {
        let inspected = try Self.run(["capture", "inspect", fixturePath("accu-chek-guide-mgdl-mtu23"), "--json"])
        let json = try JSONValue(parsing: inspected.stdout.trimmingCharacters(in: .newlines))
        let first = try #require(json["records"]?.arrayValue?.first)
        // The same packet through `decode measurement --json`.
        let bytes = FixtureMeter.accuChekGuide.records[0].packets[0].bytes
        let hex = bytes.map { String($0, radix: 16) }.map { $0.count == 1 ? "0" + $0 : $0 }.joined()
        let decoded = try Self.run(["decode", "measurement", hex, "--json"])
        guard case .object(var record) = first, case .object(let alone) = try JSONValue(
            parsing: decoded.stdout.trimmingCharacters(in: .newlines))
        else { Issue.record("not objects"); return }
        #expect(record["frame"]?.intValue ?? 0 > 0)
        #expect(record["context"]?["meal"]?["code"]?.intValue == 1)
        record = JSONObject(record.entries.filter { !["frame", "session", "context"].contains($0.key) }.map { ($0.key, $0.value) })
        #expect(record == alone)
    }

    @Test func readableTextListsSessionsRecordsAndAnomalies() throws {
        let result = try Self.run(["capture", "inspect", fixturePath("malformed-among-good")])
        #expect(result.status == 0)
        #expect(result.stdout.contains("Session 0: peer d4:a0:02:00:00:ba"))
        #expect(result.stdout.contains("Records (5):"))
        #expect(result.stdout.contains("Anomalies (5):"))
        #expect(result.stdout.contains("frame 73 [2a34]"))
        #expect(result.stdout.contains("RACP frame"))
    }

    @Test func handleOverridesNameUndiscoveredHandles() throws {
        // A download without discovery: values are on handles nobody named.
        var meter = FixtureMeter.wrap.simulator
        var builder = CaptureBuilder(format: .monitor)
        builder.leConnect(handle: 0x0041, peer: meter.personality.address)
        let measurementHandle = try #require(meter.valueHandle(.glucoseMeasurement))
        for record in meter.records {
            builder.notify(handle: 0x0041, attribute: measurementHandle, value: record.packets[0].bytes)
        }
        builder.disconnect(handle: 0x0041)
        meter.disconnect()
        let directory = try TempDirectory()
        let path = directory.path + "/nodiscovery.btsnoop"
        try builder.write(to: path)

        let bare = try Self.run(["capture", "inspect", path, "--json"])
        #expect(bare.status == 0)
        let bareJSON = try JSONValue(parsing: bare.stdout.trimmingCharacters(in: .newlines))
        #expect(bareJSON["records"]?.arrayValue?.isEmpty == true)
        #expect(bareJSON["anomalies"]?.arrayValue?.isEmpty == false)

        let hex = "0x" + String(measurementHandle, radix: 16)
        let named = try Self.run(["capture", "inspect", path, "--json", "--handle", "\(hex)=2a18", "--handle", "0x0001=2a00"])
        #expect(named.status == 0, "\(named.stderr)")
        let namedJSON = try JSONValue(parsing: named.stdout.trimmingCharacters(in: .newlines))
        #expect(namedJSON["records"]?.arrayValue?.map { $0["sequenceNumber"]?.intValue ?? -1 } == [65533, 65534, 65535, 65535, 0, 1])
    }

    @Test func exitStatuses() throws {
        let help = try Self.run(["capture", "--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("USAGE: sugarctl capture inspect <file>"))
        #expect(try Self.run(["capture", "inspect", "--help"]).status == 0)

        for arguments in [["capture"], ["capture", "list", "x"], ["capture", "inspect"],
                          ["capture", "inspect", fixturePath("wrap-65535"), "--handle", "zz"],
                          ["capture", "inspect", fixturePath("wrap-65535"), "--bogus"]] {
            let result = try Self.run(arguments)
            #expect(result.status == 64, "\(arguments)")
            #expect(result.stdout.isEmpty)
        }

        let missing = try Self.run(["capture", "inspect", "/nonexistent/capture.btsnoop"])
        #expect(missing.status == 65)
        #expect(missing.stdout.isEmpty)
        #expect(missing.stderr.split(separator: "\n").count == 1)

        let directory = try TempDirectory()
        let garbage = directory.path + "/garbage.btsnoop"
        try Data("this is not a capture at all".utf8).write(to: URL(fileURLWithPath: garbage))
        let corrupt = try Self.run(["capture", "inspect", garbage, "--json"])
        #expect(corrupt.status == 65)
        #expect(corrupt.stdout.isEmpty)
        #expect(corrupt.stderr.split(separator: "\n").count == 1)
    }
}
