import Foundation
import JSON
import Testing
import TestSupport

/// Runs the built `sugarctl` binary as a subprocess and checks the `decode` contract: exit statuses,
/// JSON keys on stdout, one line on stderr and nothing on stdout for bad data.
@Suite struct SugarctlDecodeTests {
    typealias Output = ProcessResult

    /// The built sugarctl, run to its end.
    static func run(_ arguments: [String]) throws -> Output { try runBuilt("sugarctl", arguments) }

    @Test func measurementJSON() throws {
        let result = try Self.run(["decode", "measurement", "0x1b 04:00 e3 07 02 1b 0b 0a 1e 3c 00 58 b0 12 40 00", "--json"])
        #expect(result.status == 0)
        #expect(result.stderr.isEmpty)
        #expect(result.stdout.hasSuffix("}\n"))
        let json = try JSONValue(parsing: result.stdout.trimmingCharacters(in: .newlines))
        #expect(json.objectValue?.keys == [
            "characteristic", "flags", "reservedFlags", "sequenceNumber", "baseTime", "timeOffsetMinutes",
            "userFacingTime", "concentration", "mgdL", "mmolL", "type", "sampleLocation", "sensorStatus", "contextFollows",
        ])
        #expect(json["mgdL"]?.doubleValue == 88)
        #expect(json["baseTime"]?.stringValue == "2019-02-27T11:10:30")
        #expect(json["type"] == ["code": 2, "name": "capillaryPlasma"])
    }

    @Test(arguments: [
        ("2a34", "10 0200 01 5da0", "2a34"), ("context", "00 0100", "2a34"), ("feature", "0304", "2a51"),
        ("2A51", "ff07", "2a51"), ("racp", "06 00 01 06", "2a52"), ("2a52", "01 03 01 0f00", "2a52"),
        ("2a18", "00 0100 e307 02 1b 0b 0a 1e", "2a18"),
    ])
    func everyCharacteristicByNameOrUUID(characteristic: String, hex: String, expected: String) throws {
        let result = try Self.run(["decode", characteristic, hex, "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let json = try JSONValue(parsing: result.stdout.trimmingCharacters(in: .newlines))
        #expect(json["characteristic"]?.stringValue == expected)
    }

    @Test func readableOutputWithoutJSON() throws {
        let result = try Self.run(["decode", "racp", "06 00 01 06"])
        #expect(result.status == 0)
        #expect(result.stdout.contains("noRecordsFound"))
        #expect(!result.stdout.hasPrefix("{"))
    }

    @Test(arguments: [
        ("measurement", "02 0400 e307 02 1b 0b 0a 1e 58", "truncated at offset 10: concentration needs 3 bytes, 1 left"),
        ("measurement", "00 0100 e307 0d 1b 0b 0a 1e", "offset 5: baseTime.month"),
        ("racp", "04 01 00", "offset 2"),
        ("racp", "06 01 01 01", "non-null operator at offset 1"),
        ("feature", "01", "offset 0: feature"),
    ])
    func malformedInputExits65WithOneLineAndNoStdout(characteristic: String, hex: String, message: String) throws {
        let result = try Self.run(["decode", characteristic, hex, "--json"])
        #expect(result.status == 65)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.contains(message), "\(result.stderr)")
        #expect(result.stderr.filter { $0 == "\n" }.count == 1)
    }

    // (No arguments at all now means `sugarctl status`, which talks to the daemon.)
    @Test(arguments: [
        ["decode"], ["decode", "measurement"], ["decode", "glucose", "00"], ["decode", "racp", "0g"],
        ["decode", "racp", "010"], ["decode", "racp", "01 01", "--bogus"], ["frobnicate"],
    ])
    func badArgumentsExit64WithUsage(arguments: [String]) throws {
        let result = try Self.run(arguments)
        #expect(result.status == 64)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.contains("Usage: sugarctl"))
    }

    @Test func helpExitsZero() throws {
        let result = try Self.run(["decode", "--help"])
        #expect(result.status == 0)
        #expect(result.stdout.contains("OVERVIEW:") && result.stdout.contains("USAGE:") && result.stdout.contains("OPTIONS:"))
    }
}
