#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failed file operation, with the path and errno text.
struct FileError: Error, CustomStringConvertible {
    var path: String
    var operation: String
    var code: Int32
    var description: String { "cannot \(self.operation) '\(self.path)': \(String(cString: strerror(self.code)))" }
}

/// Reads a whole file.
func readFile(_ path: String) throws(FileError) -> [UInt8] {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw FileError(path: path, operation: "open", code: errno) }
    defer { close(fd) }
    var result: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 20)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if count < 0 {
            if errno == EINTR { continue }
            throw FileError(path: path, operation: "read", code: errno)
        }
        if count == 0 { return result }
        result.append(contentsOf: chunk[0..<count])
    }
}

/// Writes `bytes` to `path`, replacing it.
func writeFile(_ path: String, _ bytes: [UInt8]) throws(FileError) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw FileError(path: path, operation: "create", code: errno) }
    defer { close(fd) }
    var start = 0
    while start < bytes.count {
        let count = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + start, $0.count - start) }
        if count < 0 {
            if errno == EINTR { continue }
            throw FileError(path: path, operation: "write", code: errno)
        }
        start += count
    }
}

func writeStdout(_ text: String) { writeAll(text, to: 1) }
func writeStderr(_ text: String) { writeAll(text, to: 2) }

private func writeAll(_ text: String, to descriptor: Int32) {
    let bytes = Array(text.utf8)
    var start = 0
    while start < bytes.count {
        let count = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + start, $0.count - start) }
        if count < 0 {
            if errno == EINTR { continue }
            return
        }
        start += count
    }
}

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
