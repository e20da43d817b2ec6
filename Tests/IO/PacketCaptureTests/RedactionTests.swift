import Glibc
import GlucoseProfile
import JSON
import Testing
import TestSupport
@testable import PacketCapture

private let fixturesDirectory: String = {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(4)
    return parts.joined(separator: "/") + "/fixtures"
}()

private let phone = BluetoothAddress(rawValue: 0x00_1A_7D_DA_71_13)
private let meter = BluetoothAddress(rawValue: 0x60_77_71_8A_0B_14)
private let neighbour = BluetoothAddress(rawValue: 0x5C_F3_70_A1_B2_C3)
private let headphones = BluetoothAddress(rawValue: 0xF4_4E_FD_01_02_03)

private func key(_ seed: UInt8) -> [UInt8] { (0..<16).map { UInt8(truncatingIfNeeded: Int(seed) &* 17 &+ $0 &* 7) | 0x80 } }

private func record(_ seq: UInt16, mgdL: Int) -> [UInt8] {
    GlucoseMeasurement(
        sequenceNumber: seq, baseTime: DateTime(year: 2025, month: 3, day: 1, hours: 8, minutes: UInt8(seq % 60)),
        timeOffsetMinutes: 0, concentration: SFloat(rawValue: 0xB000 | UInt16(mgdL)), unit: .kilogramsPerLiter,
        type: .capillaryPlasma, sampleLocation: .finger, contextFollows: false
    ).encoded()
}

/// A capture as a phone records it: other devices advertising and connecting, the meter advertising the
/// Glucose service, pairing with every key distributed, resolving-list and LTK commands, a download.
func pairedCaptureWithNeighbours(_ format: CaptureBuilder.Format, aclBufferSize: Int = 27) -> [UInt8] {
    var b = CaptureBuilder(format: format, aclBufferSize: aclBufferSize, controllerAddress: phone)
    b.readLocalAddress(phone)
    b.advertise(peer: neighbour, data: CaptureBuilder.advertisingData(name: "Anna's Watch"))
    b.advertise(peer: meter, data: CaptureBuilder.advertisingData(name: "meter+06123456", services: [0x1808]))
    b.advertise(peer: headphones, addressType: .random, data: CaptureBuilder.advertisingData(name: "Buds"))
    // Another device's connection, with its own pairing keys.
    b.leConnect(handle: 0x0041, peer: neighbour)
    b.att(handle: 0x0041, direction: .sent, ATTEncoder.readRequest(handle: 0x0003))
    b.att(handle: 0x0041, direction: .received, ATTEncoder.readResponse(Array("Anna's Watch".utf8)))
    b.distributeKeys(handle: 0x0041, direction: .received, CaptureBuilder.DistributedKeys(
        ltk: key(9), ediv: 0x9999, rand: Array(key(10).prefix(8)), irk: key(11), identity: neighbour, csrk: key(12)))
    b.disconnect(handle: 0x0041)
    // The meter.
    let layout = GATTLayout.glucoseMeter(startHandle: 0x0010)
    b.leConnect(handle: 0x0040, peer: meter)
    b.discover(handle: 0x0040, layout: layout)
    b.pair(handle: 0x0040, confirm: key(1), random: key(2), stk: key(3),
           peerKeys: CaptureBuilder.DistributedKeys(
            ltk: key(4), ediv: 0x4242, rand: Array(key(5).prefix(8)), irk: key(6), identity: meter, csrk: key(7)),
           localKeys: CaptureBuilder.DistributedKeys(
            ltk: key(14), ediv: 0x1414, rand: Array(key(15).prefix(8)), irk: key(16), identity: phone, csrk: key(17)))
    b.addToResolvingList(peer: meter, peerIRK: key(6), localIRK: key(16))
    b.read(handle: 0x0040, attribute: layout.valueHandle(BluetoothUUID(0x2A00))!, value: Array("meter+06123456".utf8))
    b.read(handle: 0x0040, attribute: layout.valueHandle(BluetoothUUID(0x2A29))!, value: Array("Roche".utf8))
    b.write(handle: 0x0040, attribute: layout.cccdHandle(.glucoseMeasurement)!, value: [1, 0])
    b.write(handle: 0x0040, attribute: layout.cccdHandle(.recordAccessControlPoint)!, value: [2, 0])
    b.write(handle: 0x0040, attribute: layout.valueHandle(.recordAccessControlPoint)!, value: [0x01, 0x01])
    for seq in UInt16(1)...3 {
        b.notify(handle: 0x0040, attribute: layout.valueHandle(.glucoseMeasurement)!, value: record(seq, mgdL: 90 + Int(seq)))
        b.advertise(peer: headphones, addressType: .random, data: CaptureBuilder.advertisingData(name: "Buds"))
    }
    b.indicate(handle: 0x0040, attribute: layout.valueHandle(.recordAccessControlPoint)!, value: [0x06, 0x00, 0x01, 0x01])
    b.disconnect(handle: 0x0040)
    // The meter reconnects later: re-encryption with the stored LTK.
    b.leConnect(handle: 0x0042, peer: meter)
    b.enableEncryption(handle: 0x0042, rand: Array(key(5).prefix(8)), ediv: 0x4242, ltk: key(4))
    b.encryptionChange(handle: 0x0042, enabled: true)
    b.longTermKeyRequest(handle: 0x0042, rand: Array(key(5).prefix(8)), ediv: 0x4242, ltk: key(4))
    b.disconnect(handle: 0x0042)
    return b.image
}

private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard needle.count <= haystack.count else { return false }
    for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
        if haystack[start..<(start + needle.count)].elementsEqual(needle) { return true }
    }
    return false
}

/// The inspection as JSON text with each fake address put back (`addresses`: original → fake).
private func inspectionText(_ image: [UInt8], restoring addresses: [BluetoothAddress: BluetoothAddress] = [:]) throws -> String {
    var text = try CaptureInspector.inspect(bytes: image).jsonValue.serialized()
    for (original, fake) in addresses {
        text = text.replacing("\"\(fake.description.lowercased())\"", with: "\"\(original.description.lowercased())\"")
    }
    return text
}

@Suite struct RedactionTests {
    @Test(arguments: CaptureInspectorTests.fixtureNames)
    func fixturesInspectTheSameAfterRedaction(name: String) throws {
        let original = try BTSnoopTestIO.read(fixturesDirectory + "/" + name + ".btsnoop")
        let (image, summary, addresses) = try CaptureRedaction.redact(bytes: original, options: RedactionOptions())
        #expect(summary.connectionsKept >= 1)
        #expect(!addresses.isEmpty)
        for address in addresses.keys { #expect(!contains(image, address.littleEndianBytes), "\(address) left in \(name)") }
        #expect(try inspectionText(image, restoring: addresses) == inspectionText(original))
        let kept = try CaptureRedaction.redact(bytes: original, options: RedactionOptions(keepAddresses: true))
        #expect(try inspectionText(kept.image) == inspectionText(original))
    }

    @Test(arguments: [CaptureBuilder.Format.h4, .monitor])
    func keysAndOtherDevicesAreGone(format: CaptureBuilder.Format) throws {
        let original = pairedCaptureWithNeighbours(format)
        let (image, summary, addresses) = try CaptureRedaction.redact(bytes: original, options: RedactionOptions())
        // Every key the original carries, and it does carry them.
        for seed: UInt8 in [1, 2, 3, 4, 6, 7, 9, 11, 12, 14, 16, 17] {
            #expect(contains(original, key(seed)))
            #expect(!contains(image, key(seed)), "key \(seed) survived")
        }
        for rand: UInt8 in [5, 10, 15] { #expect(!contains(image, Array(key(rand).prefix(8)))) }
        for address in [phone, meter, neighbour, headphones] {
            #expect(contains(original, address.littleEndianBytes))
            #expect(!contains(image, address.littleEndianBytes), "\(address) survived")
        }
        #expect(!contains(image, Array("Anna's Watch".utf8)))
        #expect(!contains(image, Array("Buds".utf8)))
        #expect(contains(image, Array("meter+06123456".utf8)))  // the meter's own advertising and name stay
        #expect(summary.connectionsKept == 2 && summary.connectionsRemoved == 1)
        #expect(summary.keyPDUsRemoved == 10)  // the meter's 5 + the phone's 5 (the neighbour's frames go whole)
        #expect(addresses[meter] != nil && addresses[meter] != meter)
        // Same sessions and records; frame numbers unchanged.
        let before = try CaptureInspector.inspect(bytes: original)
        let after = try CaptureInspector.inspect(bytes: image)
        #expect(after.sessions.count == 2)
        #expect(after.records.map(\.frame) == before.records.map(\.frame))
        #expect(after.records.map(\.measurementBytes) == before.records.map(\.measurementBytes))
        let meterSessions = before.sessions.filter { $0.capture.peer == meter }
        #expect(after.sessions.map(\.capture.firstFrame) == meterSessions.map(\.capture.firstFrame))
        #expect(after.sessions.map(\.capture.lastFrame) == meterSessions.map(\.capture.lastFrame))
        #expect(after.sessions.map(\.capture.encrypted) == meterSessions.map(\.capture.encrypted))
        #expect(after.sessions.map(\.deviceInformation) == meterSessions.map(\.deviceInformation))
        #expect(after.sessions.allSatisfy { $0.capture.peer == addresses[meter] })
        // The redacted capture redacts to itself (nothing more to remove).
        let again = try CaptureRedaction.redact(bytes: image, options: RedactionOptions(keepAddresses: true))
        #expect(again.image == image)
    }

    @Test func meterOptionKeepsOnlyThatPeer() throws {
        let original = pairedCaptureWithNeighbours(.h4)
        let only = try CaptureRedaction.redact(bytes: original, options: RedactionOptions(meter: neighbour, keepAddresses: true))
        let sessions = try CaptureInspector.inspect(bytes: only.image).sessions
        #expect(sessions.map(\.capture.peer) == [neighbour])
        #expect(!contains(only.image, key(9)))
        #expect(throws: CaptureError.self) {
            try CaptureRedaction.redact(bytes: original, options: RedactionOptions(meter: BluetoothAddress(rawValue: 1)))
        }
    }

    @Test func keyPDUSplitOverFragmentsIsZeroFilled() throws {
        // 8-byte ACL buffers split every SMP key PDU (17 + 4 bytes) over three fragments.
        let original = pairedCaptureWithNeighbours(.h4, aclBufferSize: 8)
        let (image, summary, _) = try CaptureRedaction.redact(bytes: original, options: RedactionOptions())
        #expect(summary.keyPDUsRemoved == 0)
        for seed: UInt8 in [1, 2, 4, 6, 7, 14, 16, 17] {
            #expect(!contains(image, Array(key(seed).prefix(4))), "part of key \(seed) survived")
        }
        #expect(try CaptureInspector.inspect(bytes: image).records.count == 3)
    }

    /// Random and mutated records never crash the redactor, and nothing it writes grows past the input
    /// record or a placeholder.
    @Test(arguments: [BTSnoopDatalink.hciUART, .hciUnencapsulated, .monitor])
    func arbitraryRecordsAreSafe(datalink: BTSnoopDatalink) {
        var random = SplitMix(seed: UInt64(datalink.rawValue))
        let real = pairedCaptureWithNeighbours(datalink == .monitor ? .monitor : .h4)
        var samples: [[UInt8]] = []
        if let reader = try? BTSnoopReader(bytes: real) {
            while let frame = try? reader.next() { samples.append(frame.payload) }
        }
        var redactor = CaptureRedactor(datalink: datalink, options: RedactionOptions(), glucosePeers: [meter])
        for round in 0..<3000 {
            var bytes = samples[random.below(samples.count)]
            if datalink == .hciUnencapsulated, !bytes.isEmpty { bytes.removeFirst() }
            switch round % 3 {
            case 0: bytes = (0..<random.below(40)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            case 1: if !bytes.isEmpty { bytes[random.below(bytes.count)] = UInt8(truncatingIfNeeded: random.next()) }
            default: bytes = Array(bytes.prefix(random.below(bytes.count + 1)))
            }
            let flags = UInt32(truncatingIfNeeded: random.next()) & (datalink == .monitor ? 0x0001_001F : 3)
            let (_, out) = bytes.withUnsafeBytes { redactor.redact(flags: flags, payload: $0) }
            #expect(out.count <= max(bytes.count, 9))
        }
        #expect(redactor.summary.frames == 3000)
    }

    /// tshark (Wireshark's dissectors, independent of this code) finds no key distribution PDU, no
    /// non-zero key and none of the original addresses in the redacted file, and does in the original.
    @Test(arguments: [CaptureBuilder.Format.h4, .monitor])
    func tsharkFindsNoKeyAndNoAddress(format: CaptureBuilder.Format) async throws {
        let tshark = "/usr/bin/tshark"
        try #require(access(tshark, X_OK) == 0, "tshark is missing: run scripts/install-deps")
        var template = Array("/tmp/redaction-XXXXXX".utf8CString)
        let dir = String(cString: try #require(mkdtemp(&template)))
        defer {
            for name in ["in.btsnoop", "out.btsnoop"] { unlink(dir + "/" + name) }
            rmdir(dir)
        }
        let original = pairedCaptureWithNeighbours(format)
        let writer = try BTSnoopWriter(path: dir + "/in.btsnoop", datalink: format == .h4 ? .hciUART : .monitor)
        try writer.appendRaw(original[16...])
        try writer.close()
        _ = try CaptureRedaction.redact(input: dir + "/in.btsnoop", output: dir + "/out.btsnoop", options: RedactionOptions())
        let env = ["HOME": dir, "PATH": "/usr/bin:/bin"]
        func run(_ file: String, _ arguments: [String]) async throws -> String {
            let result = try await runToEnd(tshark, ["-n", "-r", dir + "/" + file] + arguments, environment: env, dir: dir, seconds: 60)
            #expect(result.status == 0, "tshark \(arguments): \(result.stderr)")
            return result.stdout
        }
        let keyPDUs = ["-Y", "btsmp.opcode >= 0x06 && btsmp.opcode <= 0x0a"]
        #expect(try await run("in.btsnoop", keyPDUs).split(separator: "\n").count == 15)
        #expect(try await run("out.btsnoop", keyPDUs).isEmpty)
        let keyFields = ["-T", "fields", "-e", "bthci_cmd.le_long_term_key", "-e", "bthci_cmd.le_peer_irk",
                         "-e", "bthci_cmd.le_local_irk", "-e", "btsmp.cfm_value", "-e", "btsmp.random_value",
                         "-e", "bthci_evt.le_random_number", "-e", "bthci_cmd.le_random_number",
                         "-Y", "bthci_cmd.le_long_term_key || bthci_cmd.le_peer_irk || btsmp.cfm_value || btsmp.random_value "
                            + "|| bthci_evt.le_random_number || bthci_cmd.le_random_number"]
        let fieldsBefore = try await run("in.btsnoop", keyFields)
        let fieldsAfter = try await run("out.btsnoop", keyFields)
        #expect(fieldsBefore.contains { $0.isHexDigit && $0 != "0" })
        let values = fieldsAfter.split(whereSeparator: { $0 == "\t" || $0 == "\n" || $0 == "," })
        #expect(!values.isEmpty)
        for value in values {
            #expect(value.allSatisfy { $0 == "0" || $0 == ":" || $0 == "x" }, "a key field is not zero: \(value)")
        }
        let verboseBefore = try await run("in.btsnoop", ["-V"]).lowercased()
        let verboseAfter = try await run("out.btsnoop", ["-V"]).lowercased()
        for address in [phone, meter, neighbour, headphones] {
            let text = address.description.lowercased()
            #expect(verboseBefore.contains(text), "tshark does not show \(text) in the original")
            #expect(!verboseAfter.contains(text), "tshark shows \(text) in the redacted capture")
        }
        #expect(verboseAfter.contains("00:00:00:00:00:01") || verboseAfter.contains("40:00:00:00:00:01"))
    }
}
