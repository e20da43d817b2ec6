import CBenchYardsticks
import GlucoseStore
import GlucoseStoreFixtures
import JSON

#if canImport(Glibc)
import Glibc
#endif

/// `sugar-bench ingest N [--raw]`: the store's ingest benchmark as one JSON object. In store mode the C
/// yardstick (`Sources/CBenchYardsticks/ingest.c`) then loads the same rows into the same schema with one
/// reused `INSERT OR IGNORE` per row in one transaction (WAL, synchronous=FULL): `ratioToC` is the
/// store's readings per second over the C loop's.
enum IngestCommand {
    static func run(count: Int, raw: Bool, directory: String, batchSize: Int) async -> Int32 {
        do {
            let result = try await IngestBenchmark.run(count: count, raw: raw, directory: directory, batchSize: batchSize)
            var object = JSONObject()
            object["benchmark"] = "ingest"
            object["mode"] = .string(result.mode)
            object["batchSize"] = .from(batchSize)
            for field in result.fields {
                object[field.name] =
                    field.value == field.value.rounded() && abs(field.value) < 1e15
                    ? .int(Int64(field.value)) : .double(field.value)
            }
            if !raw {
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
                let cRate = Double(result.readings) / seconds
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
