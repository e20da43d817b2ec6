import Testing
import TestSupport
@testable import PacketCapture

@Suite struct FuzzTests {
    /// Random bytes after a valid header, and random mutations of a real session, never trap.
    @Test func randomInputNeverTraps() throws {
        let seed: UInt64 = 0x5EED_0000_0000_0001  // Fuzzing seed; change to explore, keep failures.
        print("PacketCapture fuzz seed: 0x\(String(seed, radix: 16))")
        var random = SeededRandom(seed: seed)
        var base = CaptureBuilder(aclBufferSize: 11)
        glucoseDownload(&base, handle: 0x40, peer: meterA, layout: .glucoseMeter(), records: 5, mtu: (185, 158))
        var monitor = CaptureBuilder(format: .monitor, aclBufferSize: 11)
        glucoseDownload(&monitor, handle: 0x40, peer: meterA, layout: .glucoseMeter(), records: 5)
        var items = 0
        for round in 0..<600 {
            var image: [UInt8]
            switch round % 3 {
            case 0:
                image = Array(base.image[..<16])
                if round % 2 == 0 { (image[14], image[15]) = (0x07, 0xD1) }  // 2001 header half the time
                image += (0..<Int(random.next() % 4000)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            case 1:
                image = base.image
                for _ in 0..<(1 + random.next() % 20) {
                    let index = 16 + Int(random.next() % UInt64(image.count - 16))
                    image[index] = UInt8(truncatingIfNeeded: random.next())
                }
            default:
                image = monitor.image
                for _ in 0..<(1 + random.next() % 20) {
                    let index = 16 + Int(random.next() % UInt64(image.count - 16))
                    image[index] = UInt8(truncatingIfNeeded: random.next())
                }
                image.removeLast(Int(random.next() % 64))
            }
            let reader = try GATTEventReader(bytes: image)
            while true {
                do {
                    guard try reader.next() != nil else { break }
                    items += 1
                } catch {
                    #expect(error.code == .corruptRecord && error.frame != nil)
                }
            }
        }
        #expect(items > 0)
    }

    /// Random ATT PDUs (any opcode, any length) inside a discovered session, both directions, random ACL
    /// fragmentation: decoding never traps and the session still ends cleanly.
    @Test func randomATTNeverTraps() throws {
        let seed: UInt64 = 0x5EED_0000_0000_0002  // Fuzzing seed
        print("PacketCapture ATT fuzz seed: 0x\(String(seed, radix: 16))")
        var random = SeededRandom(seed: seed)
        let opcodes: [UInt8] = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E,
                                0x0F, 0x10, 0x11, 0x12, 0x13, 0x16, 0x17, 0x18, 0x19, 0x1B, 0x1D, 0x1E, 0x20, 0x21,
                                0x23, 0x52, 0xD2, 0xFF]
        for _ in 0..<40 {
            var builder = CaptureBuilder(aclBufferSize: 1 + Int(random.next() % 30))
            let layout = GATTLayout.glucoseMeter(startHandle: UInt16(1 + random.next() % 200))
            builder.leConnect(handle: 0x40, peer: meterA)
            builder.discover(handle: 0x40, layout: layout)
            for _ in 0..<300 {
                let length = Int(random.next() % 40)
                let pdu = [opcodes[Int(random.next() % UInt64(opcodes.count))]]
                    + (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next() % 4 == 0 ? 0 : random.next()) }
                builder.att(handle: 0x40, direction: random.next() % 2 == 0 ? .sent : .received, pdu)
            }
            builder.disconnect(handle: 0x40)
            let summary = try GATTEventReader.readAll(bytes: builder.image)
            #expect(summary.sessions.count == 1)
            #expect(summary.sessions.first?.ended == .disconnected(reason: 0x16))
        }
    }
}
