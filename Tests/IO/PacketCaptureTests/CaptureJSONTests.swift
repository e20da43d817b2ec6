import JSON
import Testing
@testable import PacketCapture

@Suite struct CaptureJSONTests {
    @Test func eventsSessionsAndAnomaliesRenderStableKeys() throws {
        var builder = CaptureBuilder()
        let layout = GATTLayout.glucoseMeter(startHandle: 0x10)
        glucoseDownload(&builder, handle: 0x40, peer: meterA, layout: layout, records: 1)
        builder.leConnect(handle: 0x41, peer: meterB)
        builder.notify(handle: 0x41, attribute: 0x99, value: [0xAB])
        let summary = try GATTEventReader.readAll(bytes: builder.image)

        let notification = try #require(summary.events.first {
            if case .notification(let attribute, _) = $0.kind { attribute.uuid == glucoseMeasurement } else { false }
        })
        guard case .object(let object) = notification.jsonValue else { Issue.record("not an object"); return }
        #expect(object["kind"] == "notification")
        #expect(object["peer"] == .string(meterA.description))
        #expect(object["direction"] == "received")
        #expect(object["value"] == .string(hexBytes(fakeMeasurement(sequence: 1))))
        #expect(object["timeEpochMs"] == .int(notification.timestamp.unixMicroseconds / 1000))
        guard case .object(let attribute)? = object["attribute"] else { Issue.record("no attribute"); return }
        #expect(attribute["uuid"] == "2A18")
        #expect(attribute["service"] == "1808")
        #expect(attribute["handle"] == .int(Int64(layout.valueHandle(glucoseMeasurement)!)))

        let session = try #require(summary.sessions.first)
        guard case .object(let sessionObject) = session.jsonValue else { Issue.record("not an object"); return }
        #expect(sessionObject["discovery"] == "performed")
        #expect(sessionObject["ended"] == "disconnected")
        let text = session.jsonValue.serialized()
        #expect(text.contains("\"valueHandle\":\(layout.valueHandle(racp)!)"))

        let anomaly = try #require(summary.anomalies(.unknownHandle).first)
        guard case .object(let anomalyObject) = anomaly.jsonValue else { Issue.record("not an object"); return }
        #expect(anomalyObject["kind"] == "unknownHandle")
        #expect(anomalyObject["frame"] == .int(Int64(anomaly.frame!)))
    }
}
