#if canImport(Glibc)
import Glibc
#endif

/// The peak resident set size in bytes of this process, or of `pid` (`VmHWM` in /proc/…/status), or nil where
/// that file does not exist.
public func peakResidentSetBytes(pid: Int32? = nil) -> Int? {
    guard let file = fopen(pid.map { "/proc/\($0)/status" } ?? "/proc/self/status", "r") else { return nil }
    defer { fclose(file) }
    var buffer = [CChar](repeating: 0, count: 512)
    while fgets(&buffer, CInt(buffer.count), file) != nil {
        let line = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard line.hasPrefix("VmHWM:") else { continue }
        let digits = line.dropFirst(6).filter { $0.isNumber }
        return Int(digits).map { $0 * 1024 }  // the value is in kB
    }
    return nil
}
