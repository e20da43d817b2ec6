import GlucoseStore
import JSON

/// `sugar-bench ingest N [--raw]`: the store's ingest benchmark as one JSON object.
enum IngestCommand {
    static func run(count: Int, raw: Bool, directory: String) async -> Int32 {
        do {
            let result = try await IngestBenchmark.run(count: count, raw: raw, directory: directory)
            var object = JSONObject()
            object["benchmark"] = "ingest"
            object["mode"] = .string(result.mode)
            for field in result.fields {
                object[field.name] =
                    field.value == field.value.rounded() && abs(field.value) < 1e15
                    ? .int(Int64(field.value)) : .double(field.value)
            }
            writeStdout(JSONValue.object(object).serialized() + "\n")
            return 0
        } catch {
            writeStderr("sugar-bench ingest: \(error)\n")
            return 1
        }
    }
}
