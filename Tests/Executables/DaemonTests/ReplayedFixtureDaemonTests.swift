import Glibc
import HealthDataSync
import JSON
import ReplayTransport
import Testing
import TestSupport
import Varlink

/// The built sugard replaying the OneTouch Verio and the clock-setting fixtures as meters (issue 36):
/// each syncs exactly once; the Verio's HI and LO carry the flags a Glucose Profile meter's HI and LO
/// carry (the Accu-Chek fixture's LO, replayed beside them), and the CTS meter's clock is set.
@Suite struct ReplayedFixtureDaemonTests {
    static let interface = "io.sugard.HealthDataSync"

    /// The repository's `fixtures/` directory: found by walking up from this file to `Package.swift`.
    static let fixtures: String = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false).dropLast()
        while parts.count > 1, access(parts.joined(separator: "/") + "/Package.swift", F_OK) != 0 { parts = parts.dropLast() }
        return parts.joined(separator: "/") + "/fixtures"
    }()

    static func path(_ fixture: FixtureMeter) -> String { Self.fixtures + "/" + fixture.rawValue + ".btsnoop" }

    @Test func verioAndCTSCapturesReplayThroughTheDaemonExactlyOnce() async throws {
        let dir = try TempDirectory()
        try dir.write("sugard.conf", "cooldown_seconds = 0\ntimezone = Europe/Berlin\n")
        let run = try SugardRun(in: dir, arguments: [
            "--config", dir.file("sugard.conf"), "--replay", Self.path(.verioReflect), "--replay", Self.path(.ctsClockFast),
            "--replay", Self.path(.accuChekGuide),
        ])
        try await run.waitUntilReady()
        let client = try VarlinkClient(socketPath: run.socketPath)
        let verio = FixtureMeter.verioReflect.personality.id.rawValue
        let cts = FixtureMeter.ctsClockFast.personality.id.rawValue
        let accuChek = FixtureMeter.accuChekGuide.personality.id.rawValue
        func readings(_ meter: String) async throws -> [JSONValue] {
            let reply = try await client.call(Self.interface + ".ListReadings", ["limit": 1000])
            return (reply["readings"]?.arrayValue ?? []).filter { $0["meter"]?.stringValue == meter }
        }
        // Verio: records 37–42 less the one that is not blood glucose; CTS: 11–14; Accu-Chek: 4–8.
        var complete = false
        _ = await eventually(within: 60) {
            let counts = [
                (try? await readings(verio).count) ?? 0, (try? await readings(cts).count) ?? 0,
                (try? await readings(accuChek).count) ?? 0,
            ]
            complete = counts == [5, 4, 5]
            return complete
        }
        #expect(complete, "stderr:\n\(run.stderr)")

        // A forced sync of everything afterwards stores nothing (retry while an automatic one still runs).
        var forced: JSONObject?
        _ = await eventually(within: 30) {
            forced = try? await client.call(Self.interface + ".Sync", ["force": true])
            return forced != nil
        }
        #expect(forced != nil, "forced Sync never succeeded; stderr:\n\(run.stderr)")
        let verioReadings = try await readings(verio)
        #expect(verioReadings.compactMap { $0["sequenceNumber"]?.intValue } == [37, 38, 39, 41, 42])
        #expect(try await readings(cts).compactMap { $0["sequenceNumber"]?.intValue } == [11, 12, 13, 14])

        // HI and LO: flags named as for a GLS meter, no number; the GLS LO (Accu-Chek record 5) alike.
        func flags(_ reading: JSONValue?) -> Set<String> { Set(reading?["flags"]?.arrayValue?.compactMap(\.stringValue) ?? []) }
        let hi = verioReadings.first { $0["sequenceNumber"]?.intValue == 38 }
        let lo = verioReadings.first { $0["sequenceNumber"]?.intValue == 39 }
        let glsLo = try await readings(accuChek).first { $0["sequenceNumber"]?.intValue == 5 }
        #expect(flags(hi).contains("hi") && !flags(hi).contains("lo"))
        #expect(flags(lo).contains("lo") && !flags(lo).contains("hi"))
        #expect(flags(lo).intersection(["hi", "lo", "noValue"]) == flags(glsLo).intersection(["hi", "lo", "noValue"]))
        for reading in [hi, lo, glsLo] {
            #expect(reading?["mgdL"]?.isNull == true && reading?["mmolL"]?.isNull == true, "\(String(describing: reading))")
        }
        #expect(hi?["procedure"]?.stringValue == "verio")
        #expect(hi?["meterSeconds"]?.intValue != nil)

        // The CTS meter's clock was set once (12 min 30 s fast in the capture, so still fast in the replay).
        let sessions = try await client.call(Self.interface + ".ListSyncSessions", ["meter": .string(cts)])
        let clockSets = (sessions["sessions"]?.arrayValue ?? []).compactMap { $0["clockSet"] }.filter { !$0.isNull }
        #expect(clockSets.count == 1, "\(sessions)")
        #expect(clockSets.first?["method"]?.stringValue == "currentTime")
        client.close()
        #expect(await run.stop() == .exited(0), "stderr:\n\(run.stderr)")
    }
}
