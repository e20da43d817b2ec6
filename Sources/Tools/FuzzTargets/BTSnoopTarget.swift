import JSON
import PacketCapture

extension FuzzTargets {
    /// Feeds the bytes, as a btsnoop file image, to `BTSnoopReader(bytes:)` and to the whole capture pipeline
    /// (`GATTEventReader.readAll(bytes:)`: HCI, ACL reassembly, L2CAP, ATT, GATT discovery, Glucose values).
    ///
    /// Checks: nothing traps; the reader never claims to have read more bytes than it was given and numbers
    /// its frames 1, 2, 3, ...; a truncated tail reports fewer available than expected bytes; writing the
    /// records read back with `BTSnoopWriter` reproduces the bytes read exactly; both readers agree on the
    /// datalink; the pipeline's events, anomalies and sessions serialize to JSON that parses back.
    public static func btsnoop(_ bytes: [UInt8]) throws(FuzzFailure) {
        func fail(_ message: String) -> FuzzFailure {
            FuzzFailure(target: "btsnoop", "\(message); input \(hexString(Array(bytes.prefix(512))))\(bytes.count > 512 ? "…" : "")")
        }
        let reader: BTSnoopReader
        do {
            reader = try BTSnoopReader(bytes: bytes)
        } catch {
            if error.description.isEmpty { throw fail("header error with an empty description") }
            return
        }
        let writer = BTSnoopWriter(datalink: reader.datalink)
        var frames = 0
        var stoppedBy: CaptureError?
        while true {
            let frame: BTSnoopFrame?
            do { frame = try reader.next() } catch {
                stoppedBy = error
                break
            }
            guard let frame else { break }
            frames += 1
            if frame.record.frame != frames { throw fail("frame \(frames) is numbered \(frame.record.frame)") }
            if frame.payload.count != frame.record.includedLength {
                throw fail("frame \(frames) has \(frame.payload.count) bytes but an included length of \(frame.record.includedLength)")
            }
            do {
                try writer.append(
                    frame.payload, flags: frame.record.flags, timestamp: frame.record.timestamp,
                    cumulativeDrops: frame.record.cumulativeDrops, originalLength: frame.record.originalLength)
            } catch {
                throw fail("writing frame \(frames) back failed: \(error)")
            }
        }
        if reader.bytesRead > bytes.count { throw fail("the reader claims \(reader.bytesRead) of \(bytes.count) bytes") }
        if reader.framesRead != frames { throw fail("framesRead \(reader.framesRead) after \(frames) frames") }
        if let tail = reader.truncatedTail, tail.availableBytes >= tail.expectedBytes {
            throw fail("truncated tail with \(tail.availableBytes) of \(tail.expectedBytes) bytes")
        }
        if stoppedBy == nil, writer.bytes != Array(bytes.prefix(reader.bytesRead)) {
            throw fail("writing the \(frames) records back gives different bytes")
        }

        let summary: CaptureSummary
        do {
            summary = try GATTEventReader.readAll(bytes: bytes)
        } catch {
            return  // a corrupt record stops the pipeline too; the reader above already checked the framing
        }
        if summary.datalink != reader.datalink { throw fail("the pipeline read datalink \(summary.datalink)") }
        let json = JSONValue.array(
            summary.events.map(\.jsonValue) + summary.anomalies.map(\.jsonValue) + summary.sessions.map(\.jsonValue))
        do {
            _ = try JSONValue(parsing: json.serialized())
        } catch {
            throw fail("the capture's JSON does not parse back: \(error)")
        }
    }
}
