import Foundation
import GlucoseProfile
import JSON
import PacketCapture
import ReplayTransport
import TestSupport
import Testing

/// `capture inspect --json` streams (`CaptureInspector.writeJSON`) and a damaged record does not hide the
/// records around it.
@Suite struct CaptureStreamTests {
    /// What `writeJSON` writes to a file descriptor.
    static func streamed(_ image: [UInt8], handleOverrides: [HandleOverride] = []) throws -> [UInt8] {
        let directory = try TempDirectory()
        let path = directory.path + "/out.json"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        try #require(fd >= 0)
        defer { close(fd) }
        try CaptureInspector.writeJSON(bytes: image, handleOverrides: handleOverrides, to: fd)
        return Array(try #require(FileManager.default.contents(atPath: path)))
    }

    /// The document as the in-memory inspection serializes it (the bytes sugarctl printed before).
    static func tree(_ image: [UInt8], handleOverrides: [HandleOverride] = []) throws -> [UInt8] {
        Array((try CaptureInspector.inspect(bytes: image, handleOverrides: handleOverrides).jsonValue.serialized() + "\n").utf8)
    }

    @Test(arguments: FixtureMeter.allCases.map(\.rawValue) + ["malformed-among-good"])
    func streamedBytesEqualTheTreeForEveryFixture(name: String) throws {
        let image = Array(try #require(FileManager.default.contents(atPath: fixturePath(name))))
        let streamed = try Self.streamed(image)
        #expect(streamed == (try Self.tree(image)))
        #expect(streamed.count > 100)
    }

    /// Two meters' sessions interleaved frame by frame, random measurement packets (every flag combination,
    /// short and long ones, specials, reserved values, repeats) and contexts, handles named by overrides.
    @Test func streamedBytesEqualTheTreeForInterleavedRandomSessions() throws {
        var random = SplitMix(seed: 0x5EED_0019)
        var builder = CaptureBuilder()
        let peers = [BluetoothAddress(rawValue: 0xC0_26_DA_01_02_03), BluetoothAddress(rawValue: 0xC0_26_DA_01_02_04)]
        let connections: [UInt16] = [0x0041, 0x0042]
        for round in 0..<3 {
            for (handle, peer) in zip(connections, peers) { builder.leConnect(handle: handle, peer: peer) }
            for i in 0..<400 {
                let handle = connections[Int(random.next() % 2)]
                var packet: [UInt8] = [UInt8(truncatingIfNeeded: random.next())]
                packet += withUnsafeBytes(of: UInt16(truncatingIfNeeded: i).littleEndian, Array.init)
                packet += withUnsafeBytes(of: UInt16(2015 + random.next() % 12).littleEndian, Array.init)
                packet += [UInt8(random.next() % 14), UInt8(random.next() % 32), UInt8(random.next() % 25),
                           UInt8(random.next() % 61), UInt8(random.next() % 61)]
                for _ in 0..<(random.next() % 9) { packet.append(UInt8(truncatingIfNeeded: random.next())) }
                if random.next() % 50 == 0 { packet.removeLast(Int(random.next() % 5)) }
                builder.notify(handle: handle, attribute: 0x0012, value: packet)
                if random.next() % 4 == 0 {
                    // A context for this record (or, now and then, for another one).
                    let seq = random.next() % 10 == 0 ? UInt16(truncatingIfNeeded: random.next()) : UInt16(truncatingIfNeeded: i)
                    var context: [UInt8] = [UInt8(random.next() % 4) | 0x02]
                    context += withUnsafeBytes(of: seq.littleEndian, Array.init)
                    context += [UInt8(random.next() % 8), 0x50, 0xF0, UInt8(random.next() % 6)]
                    builder.notify(handle: handle, attribute: 0x0015, value: context)
                }
            }
            builder.disconnect(handle: connections[round % 2])
            builder.disconnect(handle: connections[(round + 1) % 2])
        }
        let overrides = [try HandleOverride(parsing: "0x0012=2a18"), try HandleOverride(parsing: "0x0015=2a34")]
        let streamed = try Self.streamed(builder.image, handleOverrides: overrides)
        #expect(streamed == (try Self.tree(builder.image, handleOverrides: overrides)))
        let json = try JSONValue(parsing: String(decoding: streamed.dropLast(), as: UTF8.self))
        #expect(json["records"]?.arrayValue?.count ?? 0 > 500)
        #expect(json["anomalies"]?.arrayValue?.count ?? 0 > 100)
    }

    /// Byte offset of each record header of a btsnoop image.
    static func recordOffsets(_ image: [UInt8]) -> [Int] {
        var offsets: [Int] = []
        var at = 16
        while at + 24 <= image.count {
            offsets.append(at)
            let included = image[(at + 4)..<(at + 8)].reduce(0) { $0 << 8 | Int($1) }
            at += 24 + included
        }
        return offsets
    }

    @Test(arguments: ["accu-chek-guide-mgdl-mtu23", "contour-mmol-large-mtu"])
    func damagedRecordInTheMiddleIsAnAnomalyAndTheRestIsReported(name: String) throws {
        let original = Array(try #require(FileManager.default.contents(atPath: fixturePath(name))))
        let before = try CaptureInspector.inspect(bytes: original)
        try #require(before.records.count >= 3)
        let damagedFrame = before.records[before.records.count / 2].frame
        var image = original
        let header = Self.recordOffsets(image)[damagedFrame - 1]
        image.replaceSubrange((header + 4)..<(header + 8), with: [0x7F, 0xFF, 0xFF, 0xFF])  // absurd included length

        let after = try CaptureInspector.inspect(bytes: image)
        #expect(after.records.map(\.frame) == before.records.map(\.frame).filter { $0 != damagedFrame })
        let corrupt = after.anomalies.filter { $0.reason.contains("claims") }
        #expect(corrupt.map(\.frame) == [damagedFrame])
        #expect(try Self.streamed(image) == (try Self.tree(image)))

        let directory = try TempDirectory()
        let path = directory.path + "/damaged.btsnoop"
        try Data(image).write(to: URL(fileURLWithPath: path))
        let result = try SugarctlCaptureTests.run(["capture", "inspect", path, "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let json = try JSONValue(parsing: result.stdout.trimmingCharacters(in: .newlines))
        #expect(json["records"]?.arrayValue?.compactMap { $0["frame"]?.intValue } == after.records.map { Int64($0.frame) })
        #expect(json["anomalies"]?.arrayValue?.contains { $0["frame"]?.intValue == Int64(damagedFrame) } == true)
        let text = try SugarctlCaptureTests.run(["capture", "inspect", path])
        #expect(text.status == 0)
        #expect(text.stdout.contains("frame \(damagedFrame): Frame \(damagedFrame) claims"))
    }

    @Test func garbageAfterTheLastRecordKeepsEveryRecord() throws {
        let original = Array(try #require(FileManager.default.contents(atPath: fixturePath("wrap-65535"))))
        let before = try CaptureInspector.inspect(bytes: original)
        let image = original + [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF] + [UInt8](repeating: 0xEE, count: 40)
        let after = try CaptureInspector.inspect(bytes: image)
        #expect(after.records == before.records)
        #expect(after.anomalies.contains { $0.reason.contains("no plausible record follows") })
    }

    /// Random damage anywhere in fixture captures (bytes overwritten, bytes cut): the inspection ends, and
    /// when it yields a document, streaming gives the same bytes.
    @Test func randomDamageEndsAndStreamsTheSameBytes() throws {
        var random = SplitMix(seed: 0x5EED_0022_0008)
        for name in FixtureMeter.allCases.map(\.rawValue) {
            let original = Array(try #require(FileManager.default.contents(atPath: fixturePath(name))))
            for _ in 0..<12 {
                var image = original
                for _ in 0..<(1 + random.below(12)) {
                    image[16 + random.below(image.count - 16)] = UInt8(truncatingIfNeeded: random.next())
                }
                if random.below(3) == 0 { image.removeSubrange((16 + random.below(image.count - 16))...) }
                guard let tree = try? Self.tree(image) else {
                    #expect(throws: CaptureError.self) { try Self.streamed(image) }
                    continue
                }
                #expect(try Self.streamed(image) == tree)
            }
        }
    }

    @Test func nothingReadableExits65() throws {
        var builder = CaptureBuilder()
        builder.appendRawBytes([0, 0, 0, 1, 0x7F, 0xFF, 0xFF, 0xFF] + [UInt8](repeating: 0, count: 16) + [1, 2, 3])
        #expect(throws: CaptureError.self) { try CaptureInspector.inspect(bytes: builder.image) }
        let directory = try TempDirectory()
        let path = directory.path + "/unreadable.btsnoop"
        try builder.write(to: path)
        for arguments in [["capture", "inspect", path, "--json"], ["capture", "inspect", path]] {
            let result = try SugarctlCaptureTests.run(arguments)
            #expect(result.status == 65)
            #expect(result.stdout.isEmpty)
            #expect(result.stderr.split(separator: "\n").count == 1)
        }
    }
}
