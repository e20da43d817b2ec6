import GlucoseProfile
import GlucoseStoreFixtures
import JSON

/// `sugar-bench make-corpus N FILE [--seed S]`: writes N valid Glucose Measurements of mixed shapes.
///
/// Record i uses flags byte i mod 256, so any N ≥ 256 covers every flag combination, reserved bits 5–7
/// included (both units come from bit 2). About one concentration in twelve is an SFLOAT special. The
/// other fields come from a SplitMix64 generator, so a seed always gives the same file.
struct CorpusBenchmark {
    var count: Int
    var path: String
    var seed: UInt64

    func run() -> Int32 {
        var random = SplitMix64(seed: self.seed)
        var out: [UInt8] = []
        out.reserveCapacity(self.count * 19)
        let specials: [SFloat] = [.nan, .nres, .positiveInfinity, .negativeInfinity, SFloat(special: .reserved)]
        for i in 0..<self.count {
            let flags = UInt8(truncatingIfNeeded: i)
            let molar = flags & GlucoseMeasurement.molesPerLiterFlag != 0
            var concentration: SFloat? = nil
            if flags & GlucoseMeasurement.concentrationPresentFlag != 0 {
                if random.next(below: 12) == 0 {
                    concentration = specials[random.next(below: specials.count)]
                } else if molar {
                    // 1.1–33.3 mmol/L as mol/L: mantissa in 0.1 mmol/L steps with exponent −4, or whole
                    // mmol/L with exponent −3.
                    let tenths = 11 + random.next(below: 323)
                    concentration = random.next(below: 2) == 0
                        ? try? SFloat(mantissa: tenths, exponent: -4) : try? SFloat(mantissa: tenths / 10, exponent: -3)
                } else {
                    concentration = try? SFloat(mantissa: 10 + random.next(below: 591), exponent: -5)  // 10–600 mg/dL
                }
            }
            let measurement = GlucoseMeasurement(
                sequenceNumber: UInt16(truncatingIfNeeded: i),
                baseTime: DateTime(
                    year: UInt16(2015 + random.next(below: 12)), month: UInt8(1 + random.next(below: 12)),
                    day: UInt8(1 + random.next(below: 28)), hours: UInt8(random.next(below: 24)),
                    minutes: UInt8(random.next(below: 60)), seconds: UInt8(random.next(below: 60))),
                timeOffsetMinutes: flags & GlucoseMeasurement.timeOffsetPresentFlag != 0
                    ? Int16(random.next(below: 1441) - 720) : nil,
                concentration: concentration,
                unit: molar ? .molesPerLiter : (concentration == nil ? nil : .kilogramsPerLiter),
                type: SampleType(code: UInt8(random.next(below: 16))),
                sampleLocation: SampleLocation(code: UInt8(random.next(below: 16))),
                sensorStatus: flags & GlucoseMeasurement.sensorStatusPresentFlag != 0
                    ? SensorStatus(rawValue: UInt16(truncatingIfNeeded: random.next(below: 1 << 16)) & 0x0FFF) : nil,
                contextFollows: flags & GlucoseMeasurement.contextFollowsFlag != 0,
                reservedFlags: flags)
            let bytes = measurement.encoded()
            precondition(bytes[0] == flags, "Internal inconsistency: corpus record \(i) encodes other flags")
            out.append(UInt8(bytes.count))
            out.append(0)
            out.append(contentsOf: bytes)
        }
        do {
            try writeFile(self.path, out)
        } catch {
            writeStderr("error: \(error)\n")
            return 1
        }
        let summary: JSONValue = .object([
            "packets": .from(self.count), "bytes": .from(out.count), "seed": .from(self.seed), "file": .string(self.path),
        ])
        writeStdout(summary.serialized() + "\n")
        return 0
    }
}
