#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The small POSIX helpers every I/O module needs, written once: retrying a call interrupted by a
// signal, writing a whole buffer, reading a whole file, and the wall clock.

/// Calls `body` again while it fails with `EINTR` (returns a negative value with `errno == EINTR`);
/// returns its first other result, with `errno` as that call left it.
@inlinable
public func retryingInterrupted<Result: BinaryInteger>(_ body: () -> Result) -> Result {
    while true {
        let result = body()
        if result < 0 && errno == EINTR { continue }
        return result
    }
}

/// Writes all of `bytes` to `fd`, retrying interrupted and short writes.
/// - Returns: 0, or the `errno` of the write that failed (`EPIPE`, `ENOSPC`…; `EIO` for a write of 0).
@discardableResult
public func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32 {
    var offset = 0
    while offset < bytes.count {
        let wrote = retryingInterrupted { write(fd, bytes.baseAddress! + offset, bytes.count - offset) }
        if wrote < 0 { return errno }
        if wrote == 0 { return EIO }
        offset += wrote
    }
    return 0
}

/// Writes all of `bytes` to `fd` (see ``writeAll(_:_:)-(_,UnsafeRawBufferPointer)``).
@discardableResult
public func writeAll(_ fd: Int32, _ bytes: some Collection<UInt8>) -> Int32 {
    if let code = bytes.withContiguousStorageIfAvailable({ writeAll(fd, UnsafeRawBufferPointer($0)) }) { return code }
    return Array(bytes).withUnsafeBytes { writeAll(fd, $0) }
}

/// Flushes the directory holding `path`, so a file created or renamed there survives power loss
/// (fsync of a file does not make its directory entry durable). Best effort: some file systems
/// refuse fsync on directories.
///
/// The corresponding C functions are `open(O_RDONLY | O_DIRECTORY)` and `fsync`.
public func syncDirectory(containing path: String) {
    let directory: String
    if let slash = path.lastIndex(of: "/") {
        directory = slash == path.startIndex ? "/" : String(path[..<slash])
    } else {
        directory = "."
    }
    let fd = retryingInterrupted { open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
    guard fd >= 0 else { return }
    _ = fsync(fd)
    _ = close(fd)
}

/// Why ``readWholeFile(_:limit:)`` failed: the `errno` of `open` or `read`, or `EFBIG` when the file
/// holds more than the limit.
public struct FileReadError: Error, Hashable, Sendable, CustomStringConvertible {
    public let code: Int32
    public init(code: Int32) { self.code = code }
    /// `strerror` text.
    public var description: String { String(cString: strerror(self.code)) }
}

/// The whole content of the file at `path`, read until end of file.
/// - Throws: ``FileReadError`` with the `errno` of `open`/`read` (`ENOENT` when it does not exist), or
///   `EFBIG` when it holds more than `limit` bytes.
public func readWholeFile(_ path: String, limit: Int = Int.max) throws(FileReadError) -> [UInt8] {
    let fd = retryingInterrupted { open(path, O_RDONLY | O_CLOEXEC) }
    guard fd >= 0 else { throw FileReadError(code: errno) }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while true {
        let got = chunk.withUnsafeMutableBytes { buffer in retryingInterrupted { read(fd, buffer.baseAddress, buffer.count) } }
        if got < 0 { throw FileReadError(code: errno) }
        if got == 0 { return bytes }
        if bytes.count + got > limit { throw FileReadError(code: EFBIG) }
        bytes.append(contentsOf: chunk[0..<got])
    }
}

/// The wall clock (`CLOCK_REALTIME`) in microseconds since the Unix epoch.
public func wallClockMicroseconds() -> Int64 {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return Int64(spec.tv_sec) * 1_000_000 + Int64(spec.tv_nsec) / 1000
}

/// The wall clock (`CLOCK_REALTIME`) in milliseconds since the Unix epoch.
public func wallClockMilliseconds() -> Int64 {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
}

/// The open-files limit (`RLIMIT_NOFILE`) after ``raiseOpenFilesLimit()``.
public struct OpenFilesLimit: Sendable, Equatable {
    /// The soft limit before and after, and the hard limit (nil: unlimited).
    public var before: UInt64
    public var now: UInt64
    public var hard: UInt64?
    /// Why it could not be raised, if it was not (`strerror`).
    public var failure: String?
}

/// Raises this process's soft open-files limit to its hard limit (a hard limit of "unlimited" to
/// the kernel's `fs.nr_open`), so descriptors are only capped where the administrator capped them.
/// Children inherit it. nil when the limit cannot be read.
/// The corresponding C functions are `getrlimit` and `setrlimit`.
public func raiseOpenFilesLimit() -> OpenFilesLimit? {
    let resource = Int32(RLIMIT_NOFILE.rawValue)
    var limit = rlimit()
    guard getrlimit(resource, &limit) == 0 else { return nil }
    let before = UInt64(limit.rlim_cur)
    let hard: UInt64? = limit.rlim_max == rlim_t.max ? nil : UInt64(limit.rlim_max)
    var target = limit.rlim_max
    if limit.rlim_max == rlim_t.max {
        // An unlimited soft limit is refused for descriptors: fs.nr_open is the real ceiling.
        let text = (try? readWholeFile("/proc/sys/fs/nr_open", limit: 64)).map { String(decoding: $0, as: UTF8.self) }
        guard let ceiling = text.flatMap({ UInt64($0.filter(\.isNumber)) }) else {
            return OpenFilesLimit(before: before, now: before, hard: nil, failure: "fs.nr_open cannot be read")
        }
        target = rlim_t(ceiling)
    }
    guard target > limit.rlim_cur else { return OpenFilesLimit(before: before, now: before, hard: hard) }
    var raised = limit
    raised.rlim_cur = target
    guard setrlimit(resource, &raised) == 0 else {
        return OpenFilesLimit(before: before, now: before, hard: hard, failure: String(cString: strerror(errno)))
    }
    return OpenFilesLimit(before: before, now: UInt64(target), hard: hard)
}
