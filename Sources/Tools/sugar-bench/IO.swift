#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SystemIO

/// A failed file operation, with the path and errno text.
struct FileError: Error, CustomStringConvertible {
    var path: String
    var operation: String
    var code: Int32
    var description: String { "cannot \(self.operation) '\(self.path)': \(String(cString: strerror(self.code)))" }
}

/// Reads a whole file.
func readFile(_ path: String) throws(FileError) -> [UInt8] {
    do throws(FileReadError) {
        return try readWholeFile(path)
    } catch {
        throw FileError(path: path, operation: "read", code: error.code)
    }
}

/// Writes `bytes` to `path`, replacing it.
func writeFile(_ path: String, _ bytes: [UInt8]) throws(FileError) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw FileError(path: path, operation: "create", code: errno) }
    defer { close(fd) }
    let code = writeAll(fd, bytes)
    if code != 0 { throw FileError(path: path, operation: "write", code: code) }
}

func writeStdout(_ text: String) { writeAll(1, Array(text.utf8)) }
func writeStderr(_ text: String) { writeAll(2, Array(text.utf8)) }

/// A fresh directory under /tmp for one benchmark's files (socket paths must stay short), or nil
/// after telling stderr why not. `removeScratchDirectory` deletes it with the named files.
func makeScratchDirectory(_ prefix: String, for command: String) -> String? {
    var template = Array("/tmp/\(prefix).XXXXXX".utf8CString)
    guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
        writeStderr("sugar-bench \(command): cannot create a scratch directory in /tmp\n")
        return nil
    }
    return String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

func removeScratchDirectory(_ directory: String, files: [String]) {
    for name in files { unlink(directory + "/" + name) }
    rmdir(directory)
}
