// Temporary driver for the ingest benchmark until `sugar-bench ingest` calls IngestBenchmark.
//
//   store-bench ingest N [--raw] [--dir DIR]
import GlucoseStore
import HealthDataSync
import JSON

#if canImport(Glibc)
import Glibc
#endif

func printError(_ text: String) {
    var text = text
    text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

var arguments = Array(CommandLine.arguments.dropFirst())
func usage() -> Never {
    printError("usage: store-bench ingest N [--raw] [--dir DIR]\n")
    exit(64)
}
guard arguments.first == "ingest", arguments.count >= 2, let count = Int(arguments[1]), count > 0 else { usage() }
var raw = false
var directory = "/tmp"
var index = 2
while index < arguments.count {
    switch arguments[index] {
    case "--raw": raw = true
    case "--dir" where index + 1 < arguments.count:
        index += 1
        directory = arguments[index]
    default: usage()
    }
    index += 1
}
do {
    let result = try await IngestBenchmark.run(count: count, raw: raw, directory: directory)
    var object = JSONObject()
    object["benchmark"] = .string("ingest")
    object["mode"] = .string(result.mode)
    for field in result.fields {
        object[field.name] = field.value == field.value.rounded() && abs(field.value) < 1e15
            ? .int(Int64(field.value)) : .double(field.value)
    }
    print(JSONValue.object(object).serialized())
} catch {
    printError("store-bench: \(error)\n")
    exit(1)
}
