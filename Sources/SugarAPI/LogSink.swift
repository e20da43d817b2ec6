import Glibc
import HealthDataSync
import Synchronization
import Locking

/// Writes log lines to stderr: with journald's `<N>` priority prefixes when stderr goes to the
/// journal (systemd sets `JOURNAL_STREAM`), as plain timestamped lines otherwise.
public final class StderrLogSink: Sendable {
    private let journal: Bool
    /// The line being written, reused from line to line; the lock also keeps lines whole when
    /// several threads log at once. (Not a `Lock<()>`: see `Lock` on empty values.)
    private let pending = Lock<[UInt8]>([])
    private let minimum: Atomic<Int>

    public init(environment: [String: String], level: LogLevel = .info) {
        self.journal = environment["JOURNAL_STREAM"].map { !$0.isEmpty } ?? false
        self.minimum = Atomic(level.rawValue)
    }

    /// The minimum level written; changing it affects every logger made here.
    public var level: LogLevel {
        get { LogLevel(rawValue: self.minimum.load(ordering: .relaxed)) ?? .info }
        set { self.minimum.store(newValue.rawValue, ordering: .relaxed) }
    }

    /// Changes the minimum level (config reload).
    public func setLevel(_ level: LogLevel) { self.minimum.store(level.rawValue, ordering: .relaxed) }

    /// A logger writing here, at this sink's current level.
    public func logger(label: String) -> Logger {
        Logger(label: label, levelSource: { self.level }, sink: { record in self.write(record) })
    }

    public func write(_ record: LogRecord) {
        var line = ""
        if self.journal {
            line = "<\(record.level.rawValue)>"
        } else {
            var now = timespec()
            clock_gettime(CLOCK_REALTIME, &now)
            let instant = Instant(epochMillis: Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec / 1_000_000))
            line = instant.isoString + " " + record.level.name.uppercased() + " "
        }
        line += record.label + ": " + record.message.replacingNewlines()
        for (key, value) in record.metadata { line += " \(key)=\(value.replacingNewlines())" }
        line += "\n"
        self.pending.withLock { bytes in
            bytes.removeAll(keepingCapacity: bytes.capacity <= 16_384)
            bytes.append(contentsOf: line.utf8)
            var offset = 0
            while offset < bytes.count {
                let n = bytes.withUnsafeBytes { raw in
                    Glibc.write(2, raw.baseAddress! + offset, raw.count - offset)
                }
                if n < 0 {
                    if errno == EINTR { continue }
                    return
                }
                offset += n
            }
        }
    }
}

extension String {
    fileprivate func replacingNewlines() -> String {
        guard self.contains("\n") else { return self }
        return String(self.map { $0 == "\n" ? " " : $0 })
    }
}
