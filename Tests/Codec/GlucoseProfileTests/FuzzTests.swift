import Foundation
import GlucoseProfile
import Testing
import TestSupport

/// Random bytes never trap any decoder; whatever decodes re-encodes to the same bytes; errors point inside
/// the input. The seed is printed so a failure can be replayed (set GLUCOSE_FUZZ_SEED=<hex> to reuse one).
@Suite struct FuzzTests {
    @Test func randomBytesNeverTrapAndRoundTrip() throws {
        let fromEnvironment = ProcessInfo.processInfo.environment["GLUCOSE_FUZZ_SEED"].flatMap { UInt64($0, radix: 16) }
        let seed = fromEnvironment ?? UInt64.random(in: 0...UInt64.max)
        print("GlucoseProfile fuzz seed: \(String(seed, radix: 16)) (replay with GLUCOSE_FUZZ_SEED=\(String(seed, radix: 16)))")
        var random = SplitMix64(seed: seed)
        var decoded = [0, 0, 0, 0]
        for _ in 0..<200_000 {
            let count = Int(random.next() % 22)
            var bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            // Plausible dates and RACP op codes keep more inputs on the success paths.
            if bytes.count >= 10, random.next() % 2 == 0 {
                bytes[3] = 0xE3
                bytes[4] = 0x07
                bytes[5] = bytes[5] % 13
                bytes[6] = bytes[6] % 29
                bytes[7] = bytes[7] % 24
                bytes[8] = bytes[8] % 60
                bytes[9] = bytes[9] % 60
            }
            try check(bytes, &decoded[0]) { b throws(GlucoseProfileError) in try GlucoseMeasurement(bytes: b).encoded() }
            try check(bytes, &decoded[1]) { b throws(GlucoseProfileError) in try MeasurementContext(bytes: b).encoded() }
            try check(bytes, &decoded[2]) { b throws(GlucoseProfileError) in try GlucoseFeature(bytes: b).encoded() }
            var racp = bytes
            if !racp.isEmpty { racp[0] = racp[0] % 8 }
            if racp.count > 1, racp[0] >= 5 { racp[1] = random.next() % 4 == 0 ? 1 : 0 } else if racp.count > 1 { racp[1] %= 8 }
            try check(racp, &decoded[3]) { b throws(GlucoseProfileError) in try RACPMessage(bytes: b).encoded() }
            let lenient = try? GlucoseMeasurement(bytes: bytes, options: .lenientDateTime)
            if let lenient { #expect(lenient.encoded() == bytes) }
        }
        print("GlucoseProfile fuzz: decoded measurement/context/feature/racp = \(decoded)")
        // The loop must reach the success paths, or it proves little.
        #expect(decoded.allSatisfy { $0 > 100 })
    }

    private func check(
        _ bytes: [UInt8], _ successes: inout Int, _ roundTrip: ([UInt8]) throws(GlucoseProfileError) -> [UInt8]
    ) throws {
        do {
            let encoded = try roundTrip(bytes)
            successes += 1
            #expect(encoded == bytes, "seed replay: input \(bytes)")
        } catch {
            #expect(error.offset >= 0 && error.offset <= bytes.count, "\(error) for \(bytes)")
            #expect(!error.description.isEmpty)
        }
    }
}
