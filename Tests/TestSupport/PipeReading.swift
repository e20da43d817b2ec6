import Foundation
import Glibc

extension FileHandle {
    /// Everything until end of file. Foundation's `readDataToEndOfFile()` and `availableData` stop the
    /// test process (`try!`) when `read` returns EINTR, which happens when a child's SIGCHLD lands on the
    /// reading thread; this retries instead.
    public func readAllRetryingInterrupts() -> Data {
        var data = Data()
        while let chunk = self.readSomeRetryingInterrupts(), !chunk.isEmpty { data.append(chunk) }
        return data
    }

    /// What one `read` returns (empty at end of file), retried on EINTR; nil on another error.
    public func readSomeRetryingInterrupts(upTo count: Int = 1 << 16) -> Data? {
        var buffer = [UInt8](repeating: 0, count: count)
        while true {
            let got = buffer.withUnsafeMutableBytes { Glibc.read(self.fileDescriptor, $0.baseAddress, count) }
            if got >= 0 { return Data(buffer[0..<got]) }
            if errno != EINTR { return nil }
        }
    }
}
