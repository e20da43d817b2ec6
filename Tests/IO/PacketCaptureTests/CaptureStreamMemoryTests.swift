import Glibc
import GlucoseProfile
import JSON
import Testing
@testable import PacketCapture

/// `capture inspect --json` (`CaptureInspector.writeJSON`) holds only what is still pending, however long a
/// session is, and writes the bytes of the in-memory inspection.
@Suite struct CaptureStreamMemoryTests {
    /// What `writeJSON` writes for `image`, and what it held at most.
    static func streamed(_ image: [UInt8]) throws -> (bytes: [UInt8], statistics: CaptureInspector.StreamStatistics) {
        try withTemporaryDirectory { directory in
            let path = directory + "/out.json"
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            try #require(fd >= 0)
            let statistics: CaptureInspector.StreamStatistics
            do {
                defer { close(fd) }
                statistics = try CaptureInspector.writeJSON(bytes: image, to: fd)
            }
            return (try BTSnoopTestIO.read(path), statistics)
        }
    }

    /// The in-memory inspection serialized: the bytes sugarctl printed before it streamed.
    static func tree(_ image: [UInt8]) throws -> [UInt8] {
        Array((try CaptureInspector.inspect(bytes: image).jsonValue.serialized() + "\n").utf8)
    }

    static func measurement(_ seq: UInt16, contextFollows: Bool = false) -> GlucoseMeasurement {
        GlucoseMeasurement(
            sequenceNumber: seq, baseTime: DateTime(year: 2026, month: 1 + UInt8(seq % 12), day: 1 + UInt8(seq % 28)),
            concentration: SFloat(rawValue: 0xB000 | (40 + seq % 300)), unit: .kilogramsPerLiter,
            type: .capillaryPlasma, sampleLocation: .finger, contextFollows: contextFollows)
    }

    /// One session: discovery, a RACP report and `records` measurements (sequence numbers wrap); every
    /// seventh announces a context, which comes right after it except for every 700th (never) and
    /// every 350th (three records later). `beforeRecord` runs before each measurement is added.
    static func oneSession(records: Int, beforeRecord: (inout CaptureBuilder, Int) -> Void = { _, _ in }) -> [UInt8] {
        var builder = CaptureBuilder(format: .h4)
        let layout = GATTLayout.glucoseMeter(startHandle: 0x20)
        builder.leConnect(handle: 0x40, peer: meterA)
        builder.discover(handle: 0x40, layout: layout)
        builder.write(handle: 0x40, attribute: layout.valueHandle(.recordAccessControlPoint)!, RACPMessage.reportAll)
        let value = layout.valueHandle(.glucoseMeasurement)!
        let context = layout.valueHandle(.glucoseMeasurementContext)!
        var late: [UInt16] = []
        for index in 0..<records {
            beforeRecord(&builder, index)
            let seq = UInt16(truncatingIfNeeded: index)
            builder.notify(handle: 0x40, attribute: value, measurement(seq, contextFollows: index % 7 == 0))
            if index % 7 == 0 && index % 700 != 0 {
                if index % 350 == 0 {
                    late.append(seq)
                } else {
                    builder.notify(handle: 0x40, attribute: context, MeasurementContext(sequenceNumber: seq, meal: .fasting))
                }
            }
            if index % 350 == 3, let seq = late.popLast() {
                builder.notify(handle: 0x40, attribute: context, MeasurementContext(sequenceNumber: seq, meal: .bedtime))
            }
        }
        builder.indicate(handle: 0x40, attribute: layout.valueHandle(.recordAccessControlPoint)!, value: [6, 0, 1, 1])
        builder.disconnect(handle: 0x40)
        return builder.image
    }

    /// Every committed fixture: the streamed document, pretty-printed, is its `.expected.json` byte for byte.
    @Test(arguments: CaptureInspectorTests.fixtureNames)
    func streamedFixtureIsItsExpectedJSON(name: String) throws {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(4)
        let base = parts.joined(separator: "/") + "/fixtures/" + name
        let (bytes, _) = try Self.streamed(try BTSnoopTestIO.read(base + ".btsnoop"))
        let expected = String(decoding: try BTSnoopTestIO.read(base + ".expected.json"), as: UTF8.self)
        let document = try JSONValue(parsing: String(decoding: bytes.dropLast(), as: UTF8.self))
        #expect(document.prettySerialized() + "\n" == expected)
        #expect(bytes == (try Self.tree(try BTSnoopTestIO.read(base + ".btsnoop"))))
    }

    /// Three context windows of records in one session: the bytes are the in-memory inspection's, and the
    /// records held at once are one window (plus the one that pushes the oldest out), not the session.
    @Test func longSingleSessionIsStreamedWithBoundedMemory() throws {
        let records = 3 * CaptureInspector.contextWindow
        let image = Self.oneSession(records: records)
        let (bytes, statistics) = try Self.streamed(image)
        #expect(bytes == (try Self.tree(image)))
        #expect(statistics.peakHeldRecords == CaptureInspector.contextWindow + 1, "\(statistics)")
        #expect(statistics.peakPendingItems <= 4096, "\(statistics)")
        #expect(statistics.peakHeldRecords + statistics.peakPendingItems < records / 2)

        let json = try JSONValue(parsing: String(decoding: bytes.dropLast(), as: UTF8.self))
        let decoded = try #require(json["records"]?.arrayValue)
        #expect(decoded.count == records)
        #expect(decoded.filter { $0["context"] != JSONValue.null }.count == records / 7 - records / 700)
        #expect(json["sessions"]?.arrayValue?.first?["records"]?.intValue == Int64(records))
        // The contexts never sent (every 700th record) and nothing else.
        let anomalies = try #require(json["anomalies"]?.arrayValue)
        #expect(anomalies.count == (records + 699) / 700)
        #expect(anomalies.allSatisfy { $0["reason"]?.stringValue?.contains("never came") == true })
    }

    /// A context that comes more than a window after its measurement joins nothing (an anomaly, in both
    /// the in-memory and the streamed inspection); one a window minus one later still joins.
    @Test func contextLaterThanTheWindowIsAnAnomaly() throws {
        let window = CaptureInspector.contextWindow
        var builder = CaptureBuilder(format: .h4)
        let layout = GATTLayout.glucoseMeter(startHandle: 0x20)
        builder.leConnect(handle: 0x40, peer: meterA)
        builder.discover(handle: 0x40, layout: layout)
        let value = layout.valueHandle(.glucoseMeasurement)!
        let context = layout.valueHandle(.glucoseMeasurementContext)!
        for index in 0...window {
            builder.notify(handle: 0x40, attribute: value, Self.measurement(UInt16(index), contextFollows: index < 2))
        }
        // Record 0 left the window when record `window` came; record 1 is the oldest still in it.
        builder.notify(handle: 0x40, attribute: context, MeasurementContext(sequenceNumber: 0, meal: .casual))
        builder.notify(handle: 0x40, attribute: context, MeasurementContext(sequenceNumber: 1, meal: .casual))
        builder.disconnect(handle: 0x40)

        let inspection = try CaptureInspector.inspect(bytes: builder.image)
        #expect(inspection.records.count == window + 1)
        #expect(inspection.records[0].context == nil)
        #expect(inspection.records[1].context != nil)
        let reasons = inspection.anomalies.map(\.reason)
        #expect(reasons.count == 2, "\(reasons)")
        #expect(reasons.contains { $0.contains("Record 0 announces a context that never came") })
        #expect(reasons.contains { $0.contains("Context for record 0 comes more than \(window) records after") })
        #expect(try Self.streamed(builder.image).bytes == (try Self.tree(builder.image)))
    }

    /// A damaged record header in the middle of a long session (two windows in): an anomaly with its frame;
    /// the records before and after it are reported, streamed as in memory.
    @Test func damagedRecordMidSessionKeepsTheRecordsAroundIt() throws {
        let records = 3 * CaptureInspector.contextWindow
        var damagedOffset = 0
        var damagedFrame = 0
        var image = Self.oneSession(records: records) { builder, index in
            if index == 2 * CaptureInspector.contextWindow {
                damagedOffset = builder.image.count
                damagedFrame = builder.frameCount + 1
            }
        }
        image.replaceSubrange((damagedOffset + 4)..<(damagedOffset + 8), with: [0x7F, 0xFF, 0xFF, 0xFF])

        let inspection = try CaptureInspector.inspect(bytes: image)
        let sequenceNumbers = inspection.records.map { Int($0.measurement.sequenceNumber) }
        #expect(sequenceNumbers.count == records - 1)
        #expect(!sequenceNumbers.contains(2 * CaptureInspector.contextWindow))
        #expect(sequenceNumbers.first == 0)
        #expect(sequenceNumbers.last == records - 1)
        let corrupt = inspection.anomalies.filter { $0.reason.contains("claims") }
        #expect(corrupt.map(\.frame) == [damagedFrame])
        let (bytes, statistics) = try Self.streamed(image)
        #expect(bytes == (try Self.tree(image)))
        #expect(statistics.peakHeldRecords + statistics.peakPendingItems < records / 2, "\(statistics)")
    }
}
