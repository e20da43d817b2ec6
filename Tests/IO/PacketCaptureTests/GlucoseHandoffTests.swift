import GlucoseProfile
import Testing
@testable import PacketCapture

/// The next layer folds GATT events into readings; this checks the hand-off carries codec bytes intact.
@Suite struct GlucoseHandoffTests {
    @Test(arguments: [CaptureBuilder.Format.h4, .monitor])
    func encodedMeasurementsSurviveTheCaptureRoundTrip(format: CaptureBuilder.Format) throws {
        var builder = CaptureBuilder(format: format, aclBufferSize: 9)
        let layout = GATTLayout.glucoseMeter(startHandle: 0x0101)
        let connection: UInt16 = 0x0C41
        builder.leConnect(handle: connection, peer: meterA)
        builder.discover(handle: connection, layout: layout)
        builder.write(handle: connection, attribute: layout.cccdHandle(.glucoseMeasurement)!, value: [1, 0])
        builder.write(handle: connection, attribute: layout.cccdHandle(.recordAccessControlPoint)!, value: [2, 0])
        builder.write(handle: connection, attribute: layout.valueHandle(.recordAccessControlPoint)!,
                      RACPMessage.reportGreaterOrEqual(sequenceNumber: 4))
        let sent = try (UInt16(4)...UInt16(9)).map { sequence in
            GlucoseMeasurement(
                sequenceNumber: sequence, baseTime: DateTime(year: 2026, month: 11, day: 30, hours: 9, minutes: 30),
                timeOffsetMinutes: 60, concentration: try SFloat(mantissa: 80 + Int(sequence), exponent: -5),
                unit: .kilogramsPerLiter, type: SampleType(code: 1), sampleLocation: SampleLocation(code: 1))
        }
        for measurement in sent {
            builder.notify(handle: connection, attribute: layout.valueHandle(.glucoseMeasurement)!, measurement)
        }
        builder.indicate(handle: connection, attribute: layout.valueHandle(.recordAccessControlPoint)!,
                         value: [0x06, 0x00, 0x01, 0x01])
        builder.disconnect(handle: connection)

        let summary = try GATTEventReader.readAll(bytes: builder.image)
        #expect(summary.anomalies.isEmpty)
        let received = try summary.notifications(.glucoseMeasurement).map { try GlucoseMeasurement(bytes: $0) }
        #expect(received == sent)
        let racpWrites = try summary.events.compactMap { event -> RACPMessage? in
            guard case .write(let attribute, let value, true) = event.kind, attribute.uuid == .recordAccessControlPoint
            else { return nil }
            return try RACPMessage(bytes: value)
        }
        #expect(racpWrites == [RACPMessage.reportGreaterOrEqual(sequenceNumber: 4)])
        #expect(summary.sessions.first?.connectionHandle == connection)
    }
}
