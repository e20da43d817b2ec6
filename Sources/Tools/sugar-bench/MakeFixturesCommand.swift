import JSON
import ReplayTransport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `sugar-bench make-fixtures DIR`: writes every fixture file (see `FixtureFiles`) into DIR.
enum MakeFixturesCommand {
    static func run(directory: String) -> Int32 {
        if mkdir(directory, 0o755) != 0 && errno != EEXIST {
            writeStderr("error: cannot create '\(directory)': \(String(cString: strerror(errno)))\n")
            return 1
        }
        var written: [JSONValue] = []
        for file in FixtureFiles.generate() {
            do {
                try writeFile(directory + "/" + file.name, file.bytes)
            } catch {
                writeStderr("error: \(error)\n")
                return 1
            }
            written.append(.object(["file": .string(file.name), "bytes": .from(file.bytes.count)]))
        }
        writeStdout(JSONValue.object(["directory": .string(directory), "files": .array(written)]).serialized() + "\n")
        return 0
    }
}
