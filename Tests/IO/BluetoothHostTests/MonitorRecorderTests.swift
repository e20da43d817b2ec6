import BluetoothHost
import Glibc
import PacketCapture
import Testing

/// The production frame loop fed through a socket pair with the frames the kernel's monitor channel
/// sends (built from a CaptureBuilder monitor capture: each record becomes one datagram).
@Suite struct MonitorRecorderTests {
    static let meter = BluetoothAddress(rawValue: 0x60_77_71_8A_0B_14)
    static let other = BluetoothAddress(rawValue: 0x5C_F3_70_A1_B2_C3)
    static let ltk: [UInt8] = (0..<16).map { 0xA0 | UInt8($0) }

    static func frames() throws -> [MonitorFrame] {
        var b = CaptureBuilder(format: .monitor)
        b.advertise(peer: other, data: CaptureBuilder.advertisingData(name: "Watch"))
        b.leConnect(handle: 0x0040, peer: meter)
        b.enableEncryption(handle: 0x0040, rand: [UInt8](repeating: 7, count: 8), ediv: 0x1234, ltk: ltk)
        b.encryptionChange(handle: 0x0040, enabled: true)
        b.smp(handle: 0x0040, direction: .received, [0x06] + ltk)
        b.notify(handle: 0x0040, attribute: 0x0012, value: [1, 2, 3])
        b.disconnect(handle: 0x0040)
        b.advertise(peer: other, data: CaptureBuilder.advertisingData(name: "after the sync"))
        let reader = try BTSnoopReader(bytes: b.image)
        var frames: [MonitorFrame] = []
        while let record = try reader.next() {
            frames.append(MonitorFrame(
                opcode: MonitorOpcode(rawValue: UInt16(truncatingIfNeeded: record.record.flags)),
                index: UInt16(truncatingIfNeeded: record.record.flags >> 16), payload: record.payload))
        }
        return frames
    }

    /// Sends every frame as one datagram, then optionally closes the sending end.
    static func feed(_ frames: [MonitorFrame], closeAfter: Bool) throws -> (reader: Int32, writer: Int32) {
        var fds: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &fds) == 0)
        for frame in frames {
            let bytes = frame.encoded
            let sent = bytes.withUnsafeBytes { send(fds[1], $0.baseAddress, $0.count, 0) }
            try #require(sent == bytes.count)
        }
        // A datagram that is not a monitor frame (length disagrees): skipped, counted.
        _ = [UInt8]([3, 0, 0, 0, 40, 0, 1]).withUnsafeBytes { send(fds[1], $0.baseAddress, $0.count, 0) }
        if closeAfter { close(fds[1]) }
        return (fds[0], fds[1])
    }

    @Test func recordsUntilTheMeterDisconnectsAndRedactsOnTheFly() throws {
        let frames = try Self.frames()
        let (reader, writer) = try Self.feed(frames, closeAfter: false)
        defer {
            close(reader)
            close(writer)
        }
        let output = BTSnoopWriter(datalink: .monitor)
        var tick: Int64 = 0
        let result = try MonitorRecorder.run(
            fd: reader, stopFD: nil, writer: output,
            redactor: CaptureRedactor(datalink: .monitor, options: RedactionOptions(meter: Self.meter)), meter: Self.meter,
            now: {
                tick += 1
                return CaptureTimestamp(unixMicroseconds: 1_764_000_000_000_000 + tick)
            })
        #expect(result.ending == .meterDisconnected)
        // Everything up to the Disconnection Complete; the advertising after it is not read.
        let disconnect = try #require(frames.firstIndex { $0.opcode == .eventPacket && $0.payload.first == 0x05 })
        #expect(result.frames == disconnect + 1)
        let image = output.bytes
        let summary = try GATTEventReader.readAll(bytes: image)
        #expect(summary.sessions.count == 1)
        #expect(summary.sessions.first?.peer == BluetoothAddress(rawValue: 0x40_00_00_00_00_02))  // 01 is the controller (New Index)
        #expect(summary.sessions.first?.encrypted == true)
        #expect(!Self.contains(image, Self.ltk))
        #expect(!Self.contains(image, Self.meter.littleEndianBytes))
        #expect(!Self.contains(image, Array("Watch".utf8)))
        // Timestamps come from the clock, one per frame, in order.
        let records = try BTSnoopReader(bytes: image)
        var times: [Int64] = []
        while let record = try records.next() { times.append(record.record.timestamp.unixMicroseconds) }
        #expect(times == (1...Int64(result.frames)).map { 1_764_000_000_000_000 + $0 })
    }

    @Test func unredactedRecordingKeepsEveryFrameUntilStopped() throws {
        let frames = try Self.frames()
        let (reader, _) = try Self.feed(frames, closeAfter: true)
        defer { close(reader) }
        let output = BTSnoopWriter(datalink: .monitor)
        let result = try MonitorRecorder.run(fd: reader, stopFD: nil, writer: output, redactor: nil, meter: nil)
        #expect(result.ending == .endOfStream)
        #expect(result.frames == frames.count)
        #expect(result.malformed == 1)
        #expect(Self.contains(output.bytes, Self.ltk))
        let copy = try BTSnoopReader(bytes: output.bytes)
        var payloads: [[UInt8]] = []
        while let record = try copy.next() { payloads.append(record.payload) }
        #expect(payloads == frames.map(\.payload))
    }

    @Test func stopDescriptorEndsTheRecording() throws {
        let (reader, writer) = try Self.feed([], closeAfter: false)
        defer {
            close(reader)
            close(writer)
        }
        var stop: [Int32] = [0, 0]
        try #require(pipe(&stop) == 0)
        defer {
            close(stop[0])
            close(stop[1])
        }
        var byte: UInt8 = 1
        _ = write(stop[1], &byte, 1)
        let result = try MonitorRecorder.run(fd: reader, stopFD: stop[0], writer: BTSnoopWriter(datalink: .monitor),
                                             redactor: nil, meter: nil)
        #expect(result.ending == .interrupted)
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        return (0...(haystack.count - needle.count)).contains { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }
}
