import GlucoseProfile
import HealthDataSync
import PacketCapture
import ReplayTransport
import Testing

/// The OneTouch Verio and the clock-setting fixtures as `sugarctl capture inspect` decodes them, and
/// the meters the replay transport makes of them.
@Suite struct VerioAndClockFixtureTests {
    static func at(_ d: UInt8, _ h: UInt8, _ mi: UInt8, _ s: UInt8 = 0) -> DateTime {
        DateTime(year: 2025, month: 11, day: d, hours: h, minutes: mi, seconds: s)
    }

    /// Commands and replies are paired in order; each record gets its number and meaning; the command
    /// refused before bonding is a refusal, not an anomaly.
    @Test func theVerioCaptureShowsTheDownloadAndWhatEachRecordMeans() throws {
        let inspection = try CaptureInspector.inspect(bytes: FixtureMeter.verioReflect.capture())
        try #require(inspection.sessions.count == 1)
        let session = inspection.sessions[0]
        let verio = try #require(session.verio)
        #expect(inspection.records.isEmpty)
        #expect(inspection.anomalies.isEmpty, "\(inspection.anomalies)")
        #expect(verio.records.map(\.number) == [37, 38, 39, 40, 41, 42])
        #expect(verio.records.map(\.record) == FixtureMeter.verioReflect.verioRecords.map(\.record))
        #expect(verio.records.map(\.record.meaning) == [.glucose, .hi, .lo, .notBloodGlucose, .noValue, .glucose])
        #expect(inspection.verioRecords == verio.records)
        #expect(verio.highestRecordNumber == 42 && verio.recordCount == 6)
        #expect(verio.clock.map { Verio.dateTime(meterSeconds: $0.meterSeconds) } == Self.at(24, 17, 0, 20))
        // Refused "not allowed" until bonded, then clock, highest, count and six records, each data reply
        // acknowledged by the host.
        #expect(verio.refusals.map(\.status) == [.notAllowed])
        #expect(verio.refusals.first?.command == "readClock")
        #expect(verio.commands == 1 + 3 + 6)
        #expect(verio.acknowledgements == 3 + 6)
        #expect(session.capture.encrypted)
        #expect(session.handles(Verio.commandCharacteristic) && session.handles(Verio.replyCharacteristic))

        let text = inspection.readableText
        #expect(text.contains("Verio records: 6"), "\(text)")
        #expect(text.contains("record 38  2025-11-22T12:30:00  HI (612 mg/dL sent)"), "\(text)")
        #expect(text.contains("record 39  2025-11-22T19:10:00  LO (12 mg/dL sent)"), "\(text)")
        #expect(text.contains("readClock refused: notAllowed"), "\(text)")
    }

    /// A capture cut inside the Verio download: the unanswered command is an anomaly, the records
    /// before it are still there.
    @Test func aVerioTransferCutOffIsAnAnomalyAndKeepsTheRecordsBeforeIt() throws {
        var meter = FixtureMeter.verioReflect.simulator
        meter.setFaults(SimulatorFaults(disconnectAfterRecords: 2))
        meter.startRecording(format: .h4)
        SimulatedClient.download(&meter)
        let inspection = try CaptureInspector.inspect(bytes: meter.stopRecording()?.image ?? [])
        let verio = try #require(inspection.sessions.first?.verio)
        #expect(verio.records.map(\.number) == [37, 38])
        #expect(inspection.anomalies.map(\.reason) == ["Verio record 39 got no reply before the session ended."])
    }

    /// Bad Verio packets are anomalies with their frame; the inspection goes on.
    @Test func undecodableVerioPacketsAreAnomalies() throws {
        var builder = CaptureBuilder(format: .h4)
        let handle: UInt16 = 0x0040
        let layout = FixtureMeter.verioReflect.personality.layout
        let command = try #require(layout.valueHandle(Verio.commandCharacteristic))
        let reply = try #require(layout.valueHandle(Verio.replyCharacteristic))
        builder.leConnect(handle: handle, peer: BluetoothAddress(rawValue: 0xC8_FD_19_3A_0E_07))
        builder.discover(handle: handle, layout: layout)
        builder.write(handle: handle, attribute: command, value: VerioCommand.highestRecordNumber.encoded())
        var broken = VerioReply.data([42, 0, 0, 0]).encoded()
        broken[broken.count - 1] ^= 0xFF  // CRC
        builder.notify(handle: handle, attribute: reply, value: broken)
        builder.notify(handle: handle, attribute: reply, value: VerioReply.data([1, 2, 3]).encoded())  // wrong size
        builder.write(handle: handle, attribute: command, value: [0x01, 0x02])
        builder.disconnect(handle: handle)
        let inspection = try CaptureInspector.inspect(bytes: builder.image)
        let reasons = inspection.anomalies.map(\.reason)
        #expect(reasons.count == 3, "\(reasons)")
        #expect(reasons.first?.hasPrefix("Verio reply of 13 bytes does not decode") == true, "\(reasons)")
        #expect(reasons.dropFirst().first?.hasPrefix("Verio reply to highestRecordNumber does not decode") == true, "\(reasons)")
        #expect(reasons.last?.hasPrefix("Verio command of 2 bytes does not decode") == true, "\(reasons)")
        #expect(inspection.sessions.first?.verio?.highestRecordNumber == nil)
    }

    /// The clock write comes after the download (after the report's response), never before, and is
    /// read back; the session's clock stays the one read before the download.
    @Test func theCTSCaptureSetsTheClockAfterTheDownload() throws {
        let inspection = try CaptureInspector.inspect(bytes: FixtureMeter.ctsClockFast.capture())
        try #require(inspection.sessions.count == 1)
        let session = inspection.sessions[0]
        #expect(inspection.anomalies.isEmpty, "\(inspection.anomalies)")
        #expect(inspection.records.map(\.measurement.sequenceNumber) == [11, 12, 13, 14])
        #expect(session.clock?.dateTime == Self.at(24, 17, 12, 30))
        try #require(session.clockWrites.count == 1)
        let write = session.clockWrites[0]
        #expect(write.characteristic == .currentTime)
        #expect(write.dateTime == Self.at(24, 17, 0))
        #expect(write.error == nil)
        #expect(write.readBack == Self.at(24, 17, 0))
        let report = try #require(session.racp.last)
        #expect(report.request?.opCode == .reportStoredRecords)
        #expect(report.response?.response?.1 == .success)
        #expect(write.frame > (report.responseFrame ?? Int.max))
        #expect((session.clock?.frame ?? Int.max) < (session.racp.first?.requestFrame ?? 0))
        // Adjust reason: manual update (12 min 30 s is no whole number of quarter hours).
        #expect(try CurrentTime(bytes: write.bytes).adjustReason == 0x01)
        #expect(inspection.readableText.contains(
            "Clock write (2a2b) frame \(write.frame): 2025-11-24T17:00:00, read back 2025-11-24T17:00:00"))
    }

    /// A replayed fixture is the captured meter: the Verio with its records by number, highest number
    /// and clock; the CTS meter with its clock as read before the write, and a Current Time that takes writes.
    @Test func theReplayTransportMakesTheCapturedMeters() throws {
        let verio = try ReplayTransport.meter(fromCaptureBytes: FixtureMeter.verioReflect.capture())
        #expect(verio.personality.isVerio)
        #expect(verio.personality.model == "OneTouch Verio Reflect")
        #expect(verio.personality.serialNumber == "C2MXD0G1")
        #expect(verio.verioRecords.map(\.number) == [37, 38, 39, 40, 41, 42])
        #expect(verio.verioRecords.map(\.record) == FixtureMeter.verioReflect.verioRecords.map(\.record))
        #expect(verio.verioHighest == 42)
        #expect(verio.personality.clock.value == Self.at(24, 17, 0, 20))
        #expect(verio.personality.clockReference != nil)

        let cts = try ReplayTransport.meter(fromCaptureBytes: FixtureMeter.ctsClockFast.capture())
        #expect(!cts.personality.isVerio)
        #expect(cts.personality.clock == .currentTime(Self.at(24, 17, 12, 30)))
        #expect(cts.services.characteristic(.currentTime)?.properties.contains(.write) == true)
        #expect(cts.records.map(\.sequenceNumber) == [11, 12, 13, 14])
    }
}

extension InspectedSession {
    /// Whether the session's handle table lists the characteristic.
    fileprivate func handles(_ uuid: BluetoothUUID) -> Bool { self.meterCharacteristics.contains { $0.uuid == uuid } }
}
