import Foundation
import GlucoseProfile
import PacketCapture
import ReplayTransport
import Testing

/// The repository's `fixtures/` directory: found by walking up from this file to `Package.swift`.
let fixturesDirectory: String = {
    var url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    while url.path != "/", !FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) {
        url.deleteLastPathComponent()
    }
    return url.appendingPathComponent("fixtures").path
}()

@Suite struct FixtureFilesTests {
    /// The generator and the committed fixtures never drift: regenerating gives the same bytes.
    @Test func regeneratedFixturesAreByteIdenticalToTheCommittedOnes() throws {
        let files = FixtureFiles.generate()
        #expect(files.count == FixtureMeter.allCases.count * 2 + 1)
        let committed = try FileManager.default.contentsOfDirectory(atPath: fixturesDirectory).sorted()
        #expect(committed == files.map(\.name).sorted(), "fixtures/ holds files the generator does not write, or misses some")
        for file in files {
            let data = try #require(FileManager.default.contents(atPath: fixturesDirectory + "/" + file.name), "\(file.name)")
            #expect(Array(data) == file.bytes, "\(file.name) differs from the generator; run `\(FixtureFiles.command)`")
        }
    }

    @Test func fixturesAreSmallAndEachHasANote() throws {
        for meter in FixtureMeter.allCases {
            let capture = meter.capture()
            #expect(capture.count < 8192, "\(meter.rawValue) is \(capture.count) bytes")
            #expect(!meter.note.isEmpty)
            #expect(FixtureFiles.readme().contains("## \(meter.rawValue)"))
        }
    }

    /// A capture-derived meter replays the recorded glucose packets byte for byte, malformed ones included.
    @Test(arguments: FixtureMeter.allCases)
    func captureMeterPlaysTheRecordedPacketsBack(meter: FixtureMeter) throws {
        let original = meter.simulator
        let replayed = try ReplayTransport.meter(fromCaptureBytes: meter.capture(), passkey: FixtureMeter.accuChekPasskey)
        #expect(replayed.id == original.id)
        #expect(replayed.personality.manufacturer == original.personality.manufacturer)
        #expect(replayed.personality.model == original.personality.model)
        #expect(replayed.personality.serialNumber == original.personality.serialNumber)
        #expect(replayed.personality.feature == original.personality.feature)
        #expect(replayed.personality.clock == original.personality.clock)
        #expect(replayed.personality.pairing.isRequired == original.personality.pairing.isRequired)
        #expect(replayed.personality.layout.characteristics.map(\.valueHandle)
            == original.personality.layout.characteristics.map(\.valueHandle))
        #expect(replayed.records.flatMap(\.packets) == original.records.flatMap(\.packets))
        #expect(replayed.personality.isVerio == original.personality.isVerio)
        #expect(replayed.verioRecords.map(\.number) == original.verioRecords.map(\.number))
        #expect(replayed.verioRecords.map(\.record) == original.verioRecords.map(\.record))
        #expect(replayed.verioHighest == original.verioHighest)

        // Recording a download from the replayed meter gives the same notifications again.
        var copy = replayed
        let again = SimulatedClient.download(&copy, passkeys: [FixtureMeter.accuChekPasskey])
        var fresh = original
        let first = SimulatedClient.download(&fresh, passkeys: [FixtureMeter.accuChekPasskey])
        #expect(again.notifications == first.notifications)
        #expect(again.indications == first.indications)
    }

    /// The Accu-Chek capture is two sync attempts, one passkey each: the wrong PIN ends the first
    /// connection as a failed pairing before any record; the second bonds and downloads records 4–8.
    @Test func accuChekCaptureIsTwoAttemptsOnePasskeyEach() throws {
        let inspection = try CaptureInspector.inspect(bytes: FixtureMeter.accuChekGuide.capture())
        try #require(inspection.sessions.count == 2)
        let failed = inspection.sessions[0], download = inspection.sessions[1]
        #expect(failed.capture.pairingFailed && !failed.capture.encrypted && failed.pairingFailures == [0x04])
        #expect(failed.recordCount == 0 && failed.racp.isEmpty)
        #expect(!download.capture.pairingFailed && download.capture.encrypted && download.pairingFailures.isEmpty)
        #expect(download.recordCount == 5 && download.racp.count == 2)
        #expect(inspection.records.allSatisfy { $0.session == 1 })
        #expect(inspection.records.map(\.measurement.sequenceNumber) == [4, 5, 6, 7, 8])

        // Out of passkeys after the wrong one: one attempt, no bond, no records.
        var meter = FixtureMeter.accuChekGuide.simulator
        meter.startRecording(format: .h4)
        let refused = SimulatedClient.download(&meter, passkeys: [123_456])
        #expect(!refused.bonded && refused.notifications.isEmpty && refused.errors == [.insufficientAuthentication])
        let only = try CaptureInspector.inspect(bytes: meter.stopRecording()?.image ?? [])
        #expect(only.sessions.count == 1 && only.sessions.first?.capture.pairingFailed == true)
    }
}
