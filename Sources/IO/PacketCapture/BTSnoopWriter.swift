internal import Glibc
internal import SystemIO

/// Writes btsnoop files (any supported datalink) to a file or to memory, buffered.
///
/// Not thread-safe: one writer, one owner. Call `close()` to flush and learn about write errors;
/// `deinit` flushes and closes on a best-effort basis.
public final class BTSnoopWriter {
    /// The datalink written in the header.
    public let datalink: BTSnoopDatalink
    /// Records appended so far.
    public private(set) var recordCount = 0

    /// The file; nil for a memory writer and after `close()`.
    private var fd: Int32?
    /// The file's path, for error messages.
    private let path: String?
    /// Bytes not yet written to the file (or moved to `memory`).
    private var pending: [UInt8] = []
    /// A memory writer's flushed image.
    private var memory: [UInt8] = []
    /// Pending bytes that trigger a flush (64 KiB).
    private let flushThreshold = 1 << 16

    /// Creates (or truncates) a btsnoop file and writes its header.
    /// - Throws: `CaptureError` `.io` when the file cannot be created.
    public init(path: String, datalink: BTSnoopDatalink) throws(CaptureError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw CaptureError(.io, "Cannot create \(path): \(String(cString: strerror(errno))).")
        }
        self.fd = fd
        self.path = path
        self.datalink = datalink
        self.pending.reserveCapacity(self.flushThreshold + 1024)
        self.writeHeader()
    }

    /// Creates a writer that collects the file image in memory (see `bytes`).
    public init(datalink: BTSnoopDatalink) {
        self.fd = nil
        self.path = nil
        self.datalink = datalink
        self.writeHeader()
    }

    deinit {
        try? self.close()
    }

    /// The file image so far (memory writers only; file writers return what is not yet flushed).
    public var bytes: [UInt8] { self.memory + self.pending }

    /// The 16-byte file header: `btsnoop\0`, version 1, the datalink (big-endian).
    private func writeHeader() {
        self.pending.append(contentsOf: Array("btsnoop".utf8) + [0])
        self.appendBE32(1)
        self.appendBE32(self.datalink.rawValue)
    }

    /// Appends one record.
    /// - Parameters:
    ///   - payload: The stored bytes (for 1002 including the H4 type byte).
    ///   - flags: See `BTSnoopFlags`.
    ///   - timestamp: Record time.
    ///   - cumulativeDrops: Packets lost so far by the capturing tool.
    ///   - originalLength: The on-air length when `payload` was cut short; defaults to `payload.count`.
    /// - Throws: `CaptureError` `.io` when flushing to the file fails.
    public func append(
        _ payload: some Collection<UInt8>, flags: UInt32, timestamp: CaptureTimestamp, cumulativeDrops: UInt32 = 0,
        originalLength: Int? = nil
    ) throws(CaptureError) {
        self.appendBE32(UInt32(truncatingIfNeeded: originalLength ?? payload.count))
        self.appendBE32(UInt32(truncatingIfNeeded: payload.count))
        self.appendBE32(flags)
        self.appendBE32(cumulativeDrops)
        let time = UInt64(bitPattern: timestamp.microsecondsSinceYear0)
        self.appendBE32(UInt32(truncatingIfNeeded: time >> 32))
        self.appendBE32(UInt32(truncatingIfNeeded: time))
        self.pending.append(contentsOf: payload)
        self.recordCount += 1
        if self.pending.count >= self.flushThreshold { try self.flush() }
    }

    /// Appends raw bytes with no record framing (for building corrupt files in tests).
    public func appendRaw(_ bytes: some Collection<UInt8>) throws(CaptureError) {
        self.pending.append(contentsOf: bytes)
        if self.pending.count >= self.flushThreshold { try self.flush() }
    }

    /// Writes buffered records to the file (memory writers keep them in memory).
    /// - Throws: `CaptureError` `.io`.
    public func flush() throws(CaptureError) {
        guard let fd = self.fd else {
            self.memory.append(contentsOf: self.pending)
            self.pending.removeAll(keepingCapacity: true)
            return
        }
        let failure = self.pending.withUnsafeBytes { writeAll(fd, $0) }
        self.pending.removeAll(keepingCapacity: true)
        if failure != 0 {
            throw CaptureError(.io, "Writing \(self.path ?? "the capture") failed: \(String(cString: strerror(failure))).")
        }
    }

    /// Flushes and closes the file. Safe to call twice.
    /// - Throws: `CaptureError` `.io`.
    public func close() throws(CaptureError) {
        defer {
            if let fd = self.fd { _ = Glibc.close(fd) }
            self.fd = nil
        }
        if self.fd != nil || !self.pending.isEmpty { try self.flush() }
    }

    /// Appends a big-endian 32-bit field (btsnoop is big-endian throughout).
    private func appendBE32(_ value: UInt32) {
        self.pending.append(UInt8(truncatingIfNeeded: value >> 24))
        self.pending.append(UInt8(truncatingIfNeeded: value >> 16))
        self.pending.append(UInt8(truncatingIfNeeded: value >> 8))
        self.pending.append(UInt8(truncatingIfNeeded: value))
    }
}
