import Testing
import TestSupport
@testable import PacketCapture

@Suite struct BTSnoopTests {
    @Test func writerAndReaderRoundTripThroughAFile() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/round.btsnoop"
            let writer = try BTSnoopWriter(path: path, datalink: .hciUART)
            var expected: [([UInt8], UInt32, Int64, UInt32)] = []
            for index in 0..<5000 {
                let payload = [UInt8(2)] + [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: index % 300)
                let flags = UInt32(index % 2)
                let time = 0x00E0_3AB4_4A67_6000 + Int64(index) * 1000
                let drops = UInt32(index / 1000)
                try writer.append(payload, flags: flags, timestamp: CaptureTimestamp(microsecondsSinceYear0: time),
                                  cumulativeDrops: drops)
                expected.append((payload, flags, time, drops))
            }
            try writer.close()

            let reader = try BTSnoopReader(path: path)
            #expect(reader.datalink == .hciUART)
            #expect(reader.version == 1)
            var count = 0
            while let frame = try reader.next() {
                let (payload, flags, time, drops) = expected[count]
                count += 1
                #expect(frame.record.frame == count)
                #expect(frame.payload == payload)
                #expect(frame.record.flags == flags)
                #expect(frame.record.timestamp.microsecondsSinceYear0 == time)
                #expect(frame.record.cumulativeDrops == drops)
                #expect(frame.record.originalLength == payload.count)
                #expect(!frame.record.isSnapped)
            }
            #expect(count == expected.count)
            #expect(reader.truncatedTail == nil)
        }
    }

    @Test func timestampEpochMatchesBlueZAndAndroid() {
        // BlueZ: 2000-01-01T00:00:00Z is 0x00E03AB44A676000; Unix time 946684800 s.
        let y2k = CaptureTimestamp(microsecondsSinceYear0: 0x00E0_3AB4_4A67_6000)
        #expect(y2k.unixMicroseconds == 946_684_800_000_000)
        #expect(y2k.description == "2000-01-01T00:00:00.000000Z")
        #expect(CaptureTimestamp(unixMicroseconds: 1_764_499_157_250_001).description == "2025-11-30T10:39:17.250001Z")
    }

    @Test func rejectsWhatIsNotBTSnoop() {
        #expect(throws: CaptureError.self) { try BTSnoopReader(bytes: Array("hello".utf8)) }
        #expect { try BTSnoopReader(bytes: [UInt8](repeating: 0, count: 40)) } throws: {
            ($0 as? CaptureError)?.code == .notBTSnoop
        }
        let version2 = Array("btsnoop".utf8) + [0, 0, 0, 0, 2, 0, 0, 0x03, 0xEA]
        #expect { try BTSnoopReader(bytes: version2) } throws: { ($0 as? CaptureError)?.code == .unsupportedVersion }
        let pcap = Array("btsnoop".utf8) + [0, 0, 0, 0, 1, 0, 0, 0x03, 0xF3]  // 1011
        #expect { try BTSnoopReader(bytes: pcap) } throws: { ($0 as? CaptureError)?.code == .unsupportedDatalink }
        #expect(throws: CaptureError.self) { try BTSnoopReader(path: "/nonexistent/file.btsnoop") }
    }

    @Test func truncatedLastRecordIsReportedNotFatal() throws {
        var builder = CaptureBuilder()
        builder.vendorEvent([1, 2, 3])
        builder.vendorEvent([4, 5, 6])
        let whole = builder.image
        // Cut inside the data of the second record, then inside the header of a third.
        for cut in [whole.count - 2, whole.count + 10] {
            var image = whole
            if cut > whole.count {
                image += [0, 0, 0, 9, 0, 0, 0, 9, 0, 0]
            } else {
                image.removeLast(whole.count - cut)
            }
            let reader = try BTSnoopReader(bytes: image)
            var frames = 0
            while try reader.next() != nil { frames += 1 }
            let tail = try #require(reader.truncatedTail)
            #expect(frames == (cut > whole.count ? 2 : 1))
            #expect(tail.frame == frames + 1)
            #expect(tail.availableBytes < tail.expectedBytes)
            #expect(try reader.next() == nil)
        }
    }

    @Test func absurdLengthIsAnErrorWithItsFrameNumber() throws {
        var builder = CaptureBuilder()
        builder.vendorEvent([1])
        builder.vendorEvent([2])
        builder.appendRawBytes([0, 0, 0, 1, 0x7F, 0xFF, 0xFF, 0xFF] + [UInt8](repeating: 0, count: 16))
        let reader = try BTSnoopReader(bytes: builder.image)
        _ = try reader.next()
        _ = try reader.next()
        #expect { try reader.next() } throws: { error in
            let error = error as? CaptureError
            return error?.code == .corruptRecord && error?.frame == 3
        }
    }

    @Test func snappedRecordKeepsBothLengths() throws {
        var builder = CaptureBuilder()
        builder.record(flags: 0, payload: [2, 0x40, 0x00, 0x1B, 0x00], originalLength: 31)
        let reader = try BTSnoopReader(bytes: builder.image)
        let frame = try #require(try reader.next())
        #expect(frame.record.isSnapped)
        #expect(frame.record.originalLength == 31)
        #expect(frame.record.includedLength == 5)
    }

    @Test func largeFileIsReadInChunksAcrossBufferBoundaries() throws {
        // Records of many sizes so that some straddle every 1 MiB refill.
        try withTemporaryDirectory { directory in
            let path = directory + "/large.btsnoop"
            let writer = try BTSnoopWriter(path: path, datalink: .monitor)
            var random = SeededRandom(seed: 7)
            var sizes: [Int] = []
            var total = 16
            while total < 3 << 20 {
                let size = Int(random.next() % 65_000)
                try writer.append([UInt8](repeating: UInt8(truncatingIfNeeded: size), count: size), flags: 5,
                                  timestamp: CaptureTimestamp(microsecondsSinceYear0: 0))
                sizes.append(size)
                total += 24 + size
            }
            try writer.close()
            let reader = try BTSnoopReader(path: path)
            var index = 0
            while let ok = try reader.withNextRecord({ record, payload in
                record.includedLength == sizes[index] && payload.count == sizes[index]
                    && payload.allSatisfy { $0 == UInt8(truncatingIfNeeded: sizes[index]) }
            }) {
                #expect(ok, "record \(index + 1)")
                index += 1
            }
            #expect(index == sizes.count)
            #expect(reader.bytesRead == total)
        }
    }
}
