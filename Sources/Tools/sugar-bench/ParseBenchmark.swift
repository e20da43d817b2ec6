import CBenchYardsticks
import CMallocCounter
import GlucoseProfile
import JSON
import SugarWire

/// `sugar-bench parse FILE`: decodes every record as a Glucose Measurement and reports speed and
/// allocations. One untimed warm-up pass, then the best of three timed passes over the whole file
/// (allocations counted in the first), and the same for the C yardstick (`ratioToC` = Swift / C).
struct ParseBenchmark {
    var path: String
    /// Also build each record's JSON (allocating), to check that the allocation counter counts.
    var buildJSON: Bool

    struct Totals {
        var packets = 0
        var payloadBytes = 0
        /// Folded from every decoded record so the optimizer cannot drop the work.
        var checksum: UInt64 = 0
    }

    func run() -> Int32 {
        let corpus: [UInt8]
        do {
            corpus = try readFile(self.path)
        } catch {
            writeStderr("error: \(error)\n")
            return 1
        }
        do throws(BenchmarkError) {
            _ = try self.pass(corpus)  // warm-up: caches, page faults, lazy globals
            let clock = ContinuousClock()
            let allocationsBefore = sugar_malloc_count()
            let start = clock.now
            let totals = try self.pass(corpus)
            let elapsed = clock.now - start
            let allocations = sugar_malloc_count() - allocationsBefore

            var seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
            if !self.buildJSON {
                // Best of three, like the C yardstick below: the machine is shared.
                for _ in 0..<2 {
                    let again = clock.now
                    _ = try self.pass(corpus)
                    let took = clock.now - again
                    seconds = min(seconds, Double(took.components.seconds) + Double(took.components.attoseconds) * 1e-18)
                }
            }
            let packets = Double(max(totals.packets, 1))
            var object: JSONObject = [
                "packets": .from(totals.packets),
                "seconds": .double(seconds),
                "nsPerPacket": .double(seconds * 1e9 / packets),
                "bytesPerSecond": .double(seconds > 0 ? Double(totals.payloadBytes) / seconds : 0),
                "allocationsPerPacket": .double(Double(allocations) / packets),
            ]
            if !self.buildJSON, let c = try self.yardstick(corpus, expecting: totals) {
                object["cSeconds"] = .double(c)
                object["cNsPerPacket"] = .double(c * 1e9 / packets)
                object["ratioToC"] = .double(c > 0 ? seconds / c : 0)
            }
            let result: JSONValue = .object(object)
            writeStdout(result.serialized() + "\n")
            if totals.checksum == 0x5EED_5EED_5EED_5EED { writeStderr("(checksum collision)\n") }
            return 0
        } catch {
            writeStderr("error: \(error.description)\n")
            return 65
        }
    }

    /// The C parser of `Sources/Tools/CBenchYardsticks` over the same corpus (warm-up, then the best of three
    /// timed passes, so a preempted pass does not flatter the ratio). Seconds, or nil for an empty corpus.
    private func yardstick(_ corpus: [UInt8], expecting totals: Totals) throws(BenchmarkError) -> Double? {
        guard totals.packets > 0 else { return nil }
        let clock = ContinuousClock()
        var best = Double.infinity
        for pass in 0..<4 {
            var checksum: UInt64 = 0
            let start = clock.now
            let packets = corpus.withUnsafeBufferPointer { sugar_yardstick_parse($0.baseAddress, $0.count, &checksum) }
            let elapsed = clock.now - start
            guard packets == totals.packets, checksum == totals.checksum else {
                throw BenchmarkError(record: max(0, -1 - packets), message: "the C yardstick disagrees with the Swift parser")
            }
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
            if pass > 0 { best = min(best, seconds) }
        }
        return best
    }

    /// Decodes every record of `corpus`; stops at the first malformed record or frame.
    /// One `ByteReader` walks the whole corpus (a reader per packet would retain and release the corpus
    /// for every packet, which costs as much as the decoding); a record must decode to exactly its length.
    private func pass(_ corpus: [UInt8]) throws(BenchmarkError) -> Totals {
        var totals = Totals()
        var reader = ByteReader(corpus)
        while reader.readableBytes > 0 {
            let index = reader.offset
            guard let length = try? Int(reader.readUInt16LE(field: "length")) else {
                throw BenchmarkError(record: totals.packets, message: "file ends inside a length prefix at byte \(index)")
            }
            let start = index + 2
            guard length <= reader.readableBytes else {
                throw BenchmarkError(record: totals.packets, message: "record of \(length) bytes runs past the end of the file")
            }
            do throws(GlucoseProfileError) {
                let measurement = try GlucoseMeasurement(parsing: &reader)
                guard reader.offset == start + length else { throw self.exactError(corpus, start..<(start + length)) }
                totals.checksum &+= UInt64(measurement.sequenceNumber) &+ UInt64(measurement.concentration?.rawValue ?? 1)
                    &+ UInt64(measurement.baseTime.minutes) &+ UInt64(measurement.sensorStatus?.rawValue ?? 0)
                if self.buildJSON, let count = measurement.json.objectValue?.count { totals.checksum &+= UInt64(count) }
            } catch {
                throw BenchmarkError(record: totals.packets, message: self.exactError(corpus, start..<(start + length)).description)
            }
            totals.packets += 1
            totals.payloadBytes += length
        }
        return totals
    }

    /// The parser's own error for a packet that did not decode to exactly its length (the bad path).
    private func exactError(_ corpus: [UInt8], _ range: Range<Int>) -> GlucoseProfileError {
        do throws(GlucoseProfileError) {
            var reader = ByteReader(corpus, range: range)
            _ = try GlucoseMeasurement(parsing: &reader)
            try reader.expectEnd(of: "measurement")
            return GlucoseProfileError(offset: 0, field: "measurement", reason: .invalidValue(value: 0, expected: "a packet"))
        } catch {
            return error
        }
    }
}

/// A malformed corpus: which record and why.
struct BenchmarkError: Error, CustomStringConvertible {
    var record: Int
    var message: String
    var description: String { "record \(self.record): \(self.message)" }
}
