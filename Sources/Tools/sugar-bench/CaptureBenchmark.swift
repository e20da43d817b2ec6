import CMallocCounter
import GlucoseProfile
import JSON
import PacketCapture

/// `sugar-bench make-capture MEGABYTES FILE [--large]`: writes a synthetic btsnoop (H4) capture.
///
/// Default workload: glucose downloads (encoded measurements) over 27-byte ACL buffers, surrounded by classic
/// ACL traffic, vendor events and flow-control events, i.e. mostly small frames. `--large`: 500-byte
/// notifications at MTU 512 over 251-byte ACL buffers.
struct MakeCaptureBenchmark {
    var megabytes: Int
    var path: String
    var large: Bool
    /// One measurement notification and one small noise frame per record (about 1M records per 100 MB).
    var dense = false

    func run() -> Int32 {
        do {
            let writer = try BTSnoopWriter(path: self.path, datalink: .hciUART)
            var written = 16
            var session: UInt16 = 0
            var frames = 0
            let layout = GATTLayout.glucoseMeter(startHandle: 0x20)
            let measurementHandle = layout.valueHandle(.glucoseMeasurement)!
            while written < self.megabytes << 20 {
                var builder = CaptureBuilder(format: .h4, aclBufferSize: self.large ? 251 : 27)
                let handle = 0x40 + session % 8
                builder.leConnect(handle: handle, peer: BluetoothAddress(rawValue: 0xC000_0000_0000 | UInt64(session % 4)))
                builder.exchangeMTU(handle: handle, client: self.large ? 517 : 23, server: self.large ? 512 : 23)
                if session < 4 { builder.discover(handle: handle, layout: layout) }  // later sessions reuse it
                builder.write(handle: handle, attribute: layout.cccdHandle(.glucoseMeasurement)!, value: [1, 0])
                builder.write(handle: handle, attribute: layout.valueHandle(.recordAccessControlPoint)!, RACPMessage.reportAll)
                for sequence in 0..<500 {
                    if self.dense {
                        let measurement = GlucoseMeasurement(
                            sequenceNumber: UInt16(sequence), baseTime: DateTime(year: 2026, month: 11, day: 30, hours: 10),
                            timeOffsetMinutes: 60, concentration: SFloat(rawValue: 0xB058), unit: .kilogramsPerLiter,
                            type: SampleType(code: 1), sampleLocation: SampleLocation(code: 1))
                        builder.notify(handle: handle, attribute: measurementHandle, measurement)
                        if sequence % 2 == 0 {
                            builder.vendorEvent([0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08])
                        } else {
                            builder.completedPackets(handle: handle, count: 1)
                        }
                        continue
                    }
                    if self.large {
                        builder.notify(handle: handle, attribute: measurementHandle,
                                       value: [UInt8](repeating: UInt8(truncatingIfNeeded: sequence), count: 500))
                        continue
                    }
                    let measurement = GlucoseMeasurement(
                        sequenceNumber: UInt16(sequence), baseTime: DateTime(year: 2026, month: 11, day: 30, hours: 10),
                        timeOffsetMinutes: 60, concentration: SFloat(rawValue: 0xB058), unit: .kilogramsPerLiter)
                    builder.notify(handle: handle, attribute: measurementHandle, measurement)
                    builder.completedPackets(handle: handle, count: 1)
                    builder.l2cap(handle: 0x0005, direction: .received, cid: 0x0041,
                                  payload: [UInt8](repeating: 0xA5, count: 60))
                    builder.vendorEvent([0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08])
                }
                builder.indicate(handle: handle, attribute: layout.valueHandle(.recordAccessControlPoint)!,
                                 value: [0x06, 0x00, 0x01, 0x01])
                builder.disconnect(handle: handle)
                try writer.appendRaw(builder.image[16...])
                written += builder.image.count - 16
                frames += builder.frameCount
                session &+= 1
            }
            try writer.close()
            let result: JSONValue = .object([
                "bytes": .from(written), "frames": .from(frames), "sessions": .from(Int(session)),
                "workload": .string(self.large ? "large" : self.dense ? "dense" : "small"), "file": .string(self.path),
            ])
            writeStdout(result.serialized() + "\n")
            return 0
        } catch {
            writeStderr("error: \(error)\n")
            return 1
        }
    }
}

/// `sugar-bench capture FILE`: streams GATT events out of a btsnoop file and folds them through the
/// `CaptureInspector` (records counted, not kept, so memory stays flat). One untimed warm-up pass, then
/// one timed pass; also times the bare record reader.
struct CaptureBenchmark {
    var path: String

    func run() -> Int32 {
        do {
            _ = try self.pass()  // warm-up: page cache, lazy globals
            let clock = ContinuousClock()
            let allocationsBefore = sugar_malloc_count()
            let start = clock.now
            let totals = try self.pass()
            let elapsed = clock.now - start
            let allocations = sugar_malloc_count() - allocationsBefore

            let recordsStart = clock.now
            let reader = try BTSnoopReader(path: self.path)
            var recordBytes = 0
            while let length = try reader.withNextRecord({ record, _ in record.includedLength }) { recordBytes &+= length }
            let recordsElapsed = clock.now - recordsStart

            let seconds = Self.seconds(elapsed)
            let recordSeconds = Self.seconds(recordsElapsed)
            let frames = Double(max(totals.statistics.frames, 1))
            let bytes = Double(totals.statistics.bytes + 16)
            let result: JSONValue = .object([
                "frames": .from(totals.statistics.frames),
                "records": .from(totals.records),
                "seconds": .double(seconds),
                "megabytesPerSecond": .double(seconds > 0 ? bytes / 1_000_000 / seconds : 0),
                "bytes": .from(totals.statistics.bytes + 16),
                "inspectionAnomalies": .from(totals.inspectionAnomalies),
                "events": .from(totals.events),
                "anomalies": .from(totals.anomalies),
                "sessions": .from(totals.sessions),
                "bytesPerSecond": .double(seconds > 0 ? bytes / seconds : 0),
                "nsPerFrame": .double(seconds * 1e9 / frames),
                "allocationsPerFrame": .double(Double(allocations) / frames),
                "allocationsPerEvent": .double(Double(allocations) / Double(max(totals.events, 1))),
                "recordsOnlySeconds": .double(recordSeconds),
                "recordsOnlyBytesPerSecond": .double(recordSeconds > 0 ? bytes / recordSeconds : 0),
            ])
            writeStdout(result.serialized() + "\n")
            if totals.checksum == 0x5EED_5EED_5EED_5EED && recordBytes == 0 { writeStderr("(checksum collision)\n") }
            return 0
        } catch {
            writeStderr("error: \(error)\n")
            return 65
        }
    }

    struct Totals {
        var events = 0
        var anomalies = 0
        var sessions = 0
        /// Glucose measurements the inspector decoded.
        var records = 0
        var inspectionAnomalies = 0
        var statistics = CaptureStatistics()
        /// Folded from every event so the optimizer cannot drop the work.
        var checksum = 0
    }

    private func pass() throws(CaptureError) -> Totals {
        var totals = Totals()
        let reader = try GATTEventReader(path: self.path)
        var inspector = CaptureInspector(options: CaptureInspector.Options(keepRecords: false))
        while let item = try reader.next() {
            inspector.consume(item)
            switch item {
            case .event(let event):
                totals.events += 1
                totals.checksum &+= event.frame
            case .anomaly: totals.anomalies += 1
            case .sessionEnded: totals.sessions += 1
            }
        }
        totals.statistics = reader.statistics
        let inspection = inspector.finish()
        totals.records = inspection.recordCount
        totals.inspectionAnomalies = inspection.anomalies.count
        return totals
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
    }
}
