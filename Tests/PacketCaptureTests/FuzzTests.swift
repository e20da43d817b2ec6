import Testing
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
}
