import CBenchYardsticks
import GlucoseStore
import GlucoseStoreFixtures
import JSON

#if canImport(Glibc)
import Glibc
#endif

/// `sugar-bench ingest N [--raw]`: the store's ingest benchmark as one JSON object. In store mode the C
/// yardstick (`Sources/Tools/CBenchYardsticks/ingest.c`) then loads the same rows into the same schema with one
/// reused `INSERT OR IGNORE` per row in one transaction (WAL, synchronous=FULL, foreign keys on):
/// `ratioToC` is the store's readings per second over the C loop's. The two take turns twice (store,
/// C, store, C, each into a fresh file in the same directory) and each side's faster round is
/// reported (`rounds`), so neither gets the quieter moment of a shared machine or a warmer cache.
enum IngestCommand {
    static func run(count: Int, raw: Bool, directory: String, batchSize: Int) async -> Int32 {
        do {
            let rounds = raw ? 1 : 2
            var best: IngestBenchmark.Result?
            var bestC: (seconds: Double, inserted: Int)?
            // The first round's peak, before a second round's data (perhaps in another malloc arena)
            // can add to it: the whole process's peak RSS for one ingest, as with one round.
            var firstPeakRSS: Int?
            for _ in 0..<rounds {
                let result = try await IngestBenchmark.run(count: count, raw: raw, directory: directory, batchSize: batchSize)
                if firstPeakRSS == nil { firstPeakRSS = result.peakRSSBytes }
                if best.map({ result.seconds < $0.seconds }) ?? true { best = result }
                if raw { continue }
                let source = directory + "/ingest-store.sqlite"
                let target = directory + "/ingest-c.sqlite"
                var inserted = 0
                var message = [CChar](repeating: 0, count: 512)
                let seconds = sugar_yardstick_ingest(source, target, result.readings, &inserted, &message, message.count)
                for suffix in ["", "-wal", "-shm"] { unlink(target + suffix) }
                guard seconds > 0 else {
                    writeStderr("sugar-bench ingest: C yardstick: \(String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))\n")
                    return 1
                }
                if bestC.map({ seconds < $0.seconds }) ?? true { bestC = (seconds, inserted) }
            }
            guard var result = best else { return 1 }
            result.peakRSSBytes = firstPeakRSS ?? result.peakRSSBytes
            var object = JSONObject()
            object["benchmark"] = "ingest"
            object["mode"] = .string(result.mode)
            object["batchSize"] = .from(batchSize)
            for field in result.fields {
                object[field.name] =
                    field.value == field.value.rounded() && abs(field.value) < 1e15
                    ? .int(Int64(field.value)) : .double(field.value)
            }
            if let (seconds, inserted) = bestC {
                let cRate = Double(result.readings) / seconds
                object["rounds"] = .from(rounds)
                object["cSeconds"] = .double(seconds)
                object["cReadingsPerSecond"] = .double(cRate)
                object["cStored"] = .from(inserted)
                object["ratioToC"] = .double(result.readingsPerSecond / cRate)
            }
            writeStdout(JSONValue.object(object).serialized() + "\n")
            return 0
        } catch {
            writeStderr("sugar-bench ingest: \(error)\n")
            return 1
        }
    }
}
