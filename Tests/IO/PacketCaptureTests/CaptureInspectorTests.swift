import Glibc
import GlucoseProfile
import JSON
import Testing
import TestSupport
@testable import PacketCapture

/// The repository's `fixtures/` directory.
private let fixturesDirectory: String = {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(4)
    return parts.joined(separator: "/") + "/fixtures"
}()

private func readText(_ path: String) throws -> String {
    let bytes = try #require(try? BTSnoopTestIO.read(path))
    return String(decoding: bytes, as: UTF8.self)
}

/// Plain file reading without Foundation.
enum BTSnoopTestIO {
    static func read(_ path: String) throws -> [UInt8] {
        var result: [UInt8] = []
        guard let file = fopen(path, "rb") else { throw CaptureError(.io, "cannot open \(path)") }
        defer { fclose(file) }
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count <= 0 { break }
            result += buffer[0..<count]
        }
        return result
    }
}

private func measurement(_ seq: UInt16, contextFollows: Bool = false, mgdL: Int = 100) -> GlucoseMeasurement {
    GlucoseMeasurement(
        sequenceNumber: seq, baseTime: DateTime(year: 2025, month: 3, day: 1, hours: 8, minutes: UInt8(seq % 60)),
        timeOffsetMinutes: 0, concentration: SFloat(rawValue: 0xB000 | UInt16(mgdL)), unit: .kilogramsPerLiter,
        type: .capillaryPlasma, sampleLocation: .finger, contextFollows: contextFollows)
}

@Suite struct CaptureInspectorTests {
    static let fixtureNames = [
        "accu-chek-guide-mgdl-mtu23", "contour-mmol-large-mtu", "wrap-65535", "malformed-among-good", "isens-month13",
        "onetouch-verio-reflect", "cts-clock-fast",
    ]

    @Test(arguments: fixtureNames)
    func committedFixtureDecodesToItsExpectedJSON(name: String) throws {
        let inspection = try CaptureInspector.inspect(path: fixturesDirectory + "/" + name + ".btsnoop")
        let expected = try readText(fixturesDirectory + "/" + name + ".expected.json")
        // Byte for byte: the committed file is the pretty form of the inspection.
        let actual = inspection.jsonValue.prettySerialized() + "\n"
        #expect(actual == expected, "run `swift run sugar-bench make-fixtures fixtures` if the decoder changed on purpose")
        #expect(try JSONValue(parsing: expected)["records"]?.arrayValue?.count == inspection.records.count)
        // Every fixture holds records: GLS ones in `records`, a Verio's in its session's `verio`.
        #expect(!inspection.records.isEmpty || !inspection.verioRecords.isEmpty)
    }

    @Test func malformedFixtureKeepsTheGoodRecordsAroundTheBadPackets() throws {
        let inspection = try CaptureInspector.inspect(path: fixturesDirectory + "/malformed-among-good.btsnoop")
        #expect(inspection.records.map(\.measurement.sequenceNumber) == [20, 22, 23, 24, 25])
        let characteristics = inspection.anomalies.map { $0.characteristicText ?? "-" }
        #expect(characteristics == ["2a18", "2a34", "2a18", "2a52", "2a18"])
        #expect(inspection.anomalies.allSatisfy { $0.frame != nil && $0.session == 0 })
        #expect(inspection.anomalies[0].reason.contains("does not decode"))
        #expect(inspection.anomalies[1].reason.contains("orphan"))
        #expect(inspection.anomalies[2].reason.contains("reserved SFLOAT"))
    }

    /// Thousands of unrelated frames (classic ACL, vendor events, flow control, SCO, another LE link with
    /// its own GATT traffic) around a download do not change what is decoded.
    @Test func downloadAmongThousandsOfUnrelatedFrames() throws {
        var builder = CaptureBuilder(format: .h4, aclBufferSize: 27)
        let layout = GATTLayout.glucoseMeter(startHandle: 0x0030)
        let other = GATTLayout(startHandle: 1, services: [
            .init(BluetoothUUID(0x180D), [.init(BluetoothUUID(0x2A37), .notify)]),
        ])
        let meter: UInt16 = 0x0040
        let watch: UInt16 = 0x0041
        var random = SeededRandom(seed: 7)
        func noise(_ count: Int) {
            for _ in 0..<count {
                switch random.next() % 5 {
                case 0: builder.l2cap(handle: 0x0005, direction: .received, cid: 0x0041, payload: [UInt8](repeating: 0xA5, count: 40))
                case 1: builder.vendorEvent([0x01, 0x02, 0x03])
                case 2: builder.completedPackets(handle: meter, count: 1)
                case 3: builder.scoPacket(handle: 0x0006, direction: .sent, data: [1, 2, 3, 4])
                default: builder.notify(handle: watch, attribute: other.valueHandle(BluetoothUUID(0x2A37))!, value: [0x00, 72])
                }
            }
        }
        builder.classicConnect(handle: 0x0005, peer: meterB)
        builder.leConnect(handle: watch, peer: BluetoothAddress(rawValue: 0xAA_BB_CC_DD_EE_FF))
        builder.discover(handle: watch, layout: other)
        noise(500)
        builder.leConnect(handle: meter, peer: meterA)
        noise(200)
        builder.discover(handle: meter, layout: layout)
        builder.read(handle: meter, attribute: layout.valueHandle(.glucoseFeature)!, value: [0x03, 0x04])
        builder.write(handle: meter, attribute: layout.cccdHandle(.glucoseMeasurement)!, value: [1, 0])
        builder.write(handle: meter, attribute: layout.cccdHandle(.glucoseMeasurementContext)!, value: [1, 0])
        builder.write(handle: meter, attribute: layout.cccdHandle(.recordAccessControlPoint)!, value: [2, 0])
        builder.write(handle: meter, attribute: layout.valueHandle(.recordAccessControlPoint)!, RACPMessage.reportAll)
        var sent: [GlucoseMeasurement] = []
        for seq in UInt16(1)...200 {
            let m = measurement(seq, contextFollows: seq % 3 == 0, mgdL: 60 + Int(seq))
            sent.append(m)
            builder.notify(handle: meter, attribute: layout.valueHandle(.glucoseMeasurement)!, m)
            noise(Int(random.next() % 20))
            if seq % 3 == 0 {
                builder.notify(handle: meter, attribute: layout.valueHandle(.glucoseMeasurementContext)!,
                               MeasurementContext(sequenceNumber: seq, meal: .preprandial))
            }
        }
        builder.indicate(handle: meter, attribute: layout.valueHandle(.recordAccessControlPoint)!,
                         value: [0x06, 0x00, 0x01, 0x01])
        noise(300)
        builder.disconnect(handle: meter)
        noise(500)
        #expect(builder.frameCount > 3000)

        let inspection = try CaptureInspector.inspect(bytes: builder.image)
        #expect(inspection.anomalies.isEmpty, "\(inspection.anomalies.prefix(3))")
        #expect(inspection.records.map(\.measurement) == sent)
        #expect(inspection.records.allSatisfy { ($0.context != nil) == ($0.measurement.sequenceNumber % 3 == 0) })
        #expect(inspection.records.allSatisfy { $0.session == 1 })
        #expect(inspection.sessions.count == 2)
        let session = inspection.sessions[1]
        #expect(session.capture.peer == meterA)
        #expect(session.racp.count == 1)
        #expect(session.racp[0].measurements == 200)
        #expect(session.racp[0].response == RACPMessage.response(requestOpCode: .reportStoredRecords, responseCode: .success))
        #expect(session.feature == GlucoseFeature(rawValue: 0x0403))
        #expect(inspection.sessions[0].recordCount == 0)

        // Count-only mode sees the same number.
        let counted = try CaptureInspector.inspect(bytes: builder.image, options: CaptureInspector.Options(keepRecords: false))
        #expect(counted.records.isEmpty)
        #expect(counted.recordCount == 200)
    }

    @Test func contextsJoinBySequenceNumberInEitherOrderAndPerSession() throws {
        var builder = CaptureBuilder(format: .monitor)
        let layout = GATTLayout.glucoseMeter(startHandle: 0x0010)
        let value = layout.valueHandle(.glucoseMeasurement)!
        let context = layout.valueHandle(.glucoseMeasurementContext)!
        builder.leConnect(handle: 1, peer: meterA)
        builder.discover(handle: 1, layout: layout)
        builder.notify(handle: 1, attribute: context, MeasurementContext(sequenceNumber: 5, meal: .fasting))  // before
        builder.notify(handle: 1, attribute: value, measurement(5, contextFollows: true))
        builder.notify(handle: 1, attribute: value, measurement(6, contextFollows: true))
        builder.notify(handle: 1, attribute: value, measurement(7))
        builder.notify(handle: 1, attribute: context, MeasurementContext(sequenceNumber: 6, meal: .bedtime))  // late
        builder.notify(handle: 1, attribute: context, MeasurementContext(sequenceNumber: 6, meal: .casual))  // second
        builder.disconnect(handle: 1)
        // Session 2 on the same peer reuses the layout; a context for 7 here is an orphan (7 was session 1).
        builder.leConnect(handle: 1, peer: meterA)
        builder.notify(handle: 1, attribute: context, MeasurementContext(sequenceNumber: 7, meal: .casual))
        builder.notify(handle: 1, attribute: value, value: [0x03, 0x08])  // truncated
        builder.disconnect(handle: 1)

        let inspection = try CaptureInspector.inspect(bytes: builder.image)
        #expect(inspection.records.map(\.measurement.sequenceNumber) == [5, 6, 7])
        #expect(inspection.records.map { $0.context?.meal?.code } == [3, 5, nil])
        #expect(inspection.records[1].contextFrame! > inspection.records[2].frame)
        let reasons = inspection.anomalies.map(\.reason)
        #expect(inspection.anomalies.count == 3, "\(reasons)")
        #expect(reasons[0].contains("already has a context"))
        #expect(inspection.anomalies.map(\.session) == [0, 1, 1])
        #expect(inspection.anomalies.contains { $0.reason.contains("orphan") && $0.characteristic == .glucoseMeasurementContext })
        #expect(inspection.anomalies.contains { $0.reason.contains("does not decode") && $0.characteristic == .glucoseMeasurement })
        #expect(inspection.sessions.map(\.position) == [0, 1])
        #expect(inspection.sessions[1].capture.discovery == .reused(fromSession: 1))
    }

    @Test func racpExchangesPairRequestsWithResponses() throws {
        var builder = CaptureBuilder(format: .h4)
        let layout = GATTLayout.glucoseMeter(startHandle: 1, withContext: false)
        let racp = layout.valueHandle(.recordAccessControlPoint)!
        builder.leConnect(handle: 2, peer: meterA)
        builder.discover(handle: 2, layout: layout)
        builder.write(handle: 2, attribute: racp, value: [0x01, 0x01], error: .glucoseCCCDImproperlyConfigured)
        builder.write(handle: 2, attribute: layout.cccdHandle(.recordAccessControlPoint)!, value: [2, 0])
        builder.write(handle: 2, attribute: racp, value: [0x04, 0x01, 0x00])
        builder.indicate(handle: 2, attribute: racp, value: [0x06, 0x00, 0x04, 0x05])
        builder.write(handle: 2, attribute: racp, RACPMessage.countGreaterOrEqual(sequenceNumber: 9))
        builder.indicate(handle: 2, attribute: racp, value: [0x05, 0x00, 0x02, 0x00])
        builder.write(handle: 2, attribute: racp, RACPMessage.reportGreaterOrEqual(sequenceNumber: 9))
        builder.notify(handle: 2, attribute: layout.valueHandle(.glucoseMeasurement)!, measurement(9))
        builder.indicate(handle: 2, attribute: racp, value: [0x06, 0x00, 0x01, 0x0C])  // reserved code
        builder.indicate(handle: 2, attribute: racp, value: [0x06, 0x00, 0x03, 0x01])  // nobody asked
        builder.disconnect(handle: 2)

        let inspection = try CaptureInspector.inspect(bytes: builder.image)
        let exchanges = try #require(inspection.sessions.first?.racp)
        #expect(exchanges.count == 5)
        #expect(exchanges[0].writeError == .glucoseCCCDImproperlyConfigured && exchanges[0].response == nil)
        #expect(exchanges[1].request == nil && exchanges[1].requestBytes == [0x04, 0x01, 0x00])
        #expect(exchanges[1].response?.response?.responseCode == .invalidOperand)
        #expect(exchanges[2].response?.numberOfRecords == 2)
        #expect(exchanges[3].measurements == 1 && exchanges[3].response?.response?.responseCode.rawValue == 0x0C)
        #expect(exchanges[4].request == nil && exchanges[4].response != nil)
        let reasons = inspection.anomalies.map(\.reason)
        #expect(reasons.contains { $0.contains("RACP request does not decode") })
        #expect(reasons.contains { $0.contains("is reserved") })
        #expect(reasons.contains { $0.contains("no request waiting") })
        #expect(inspection.sessions[0].readableText.contains("ATT error 0x81"))
        #expect(inspection.readableText.contains("Records (1):"))
    }
}
