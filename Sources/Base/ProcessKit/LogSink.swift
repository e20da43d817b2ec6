import Locking
import Synchronization
import SystemIO

/// Writes log lines to stderr: with journald's `<N>` priority prefixes when stderr goes to the
/// journal (systemd sets `JOURNAL_STREAM`), as plain timestamped lines otherwise.
public final class StderrLogSink: Sendable {
    private let journal: Bool
    /// The line being written, reused from line to line; the lock also keeps lines whole when
    /// several threads log at once. (Not a `Lock<()>`: see `Lock` on empty values.)
    private let pending = Lock<[UInt8]>([])
    private let minimum: Atomic<Int>
    private let timestamp: @Sendable (Int64) -> String

    /// - Parameter timestamp: writes a plain line's wall-clock time from epoch milliseconds; the
    ///   programs pass the one ISO 8601 formatter, `CivilCalendar.isoUTC(epochMillis:)`
    ///   (GlucoseProfile, a layer above this one).
    public init(environment: [String: String], level: LogLevel = .info, timestamp: @escaping @Sendable (Int64) -> String) {
        self.journal = environment["JOURNAL_STREAM"].map { !$0.isEmpty } ?? false
        self.minimum = Atomic(level.rawValue)
        self.timestamp = timestamp
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

    /// Writes one record as one line (newlines in the message and metadata values become spaces),
    /// under the lock so that lines from several threads never interleave. Does not filter by
    /// level: the loggers made by `logger(label:)` do.
    public func write(_ record: LogRecord) {
        var line = ""
        if self.journal {
            line = "<\(record.level.rawValue)>"
        } else {
            line = self.timestamp(wallClockMilliseconds()) + " " + record.level.name.uppercased() + " "
        }
        line += record.label + ": " + record.message.replacingNewlines()
        for (key, value) in record.metadata { line += " \(key)=\(value.replacingNewlines())" }
        line += "\n"
        self.pending.withLock { bytes in
            bytes.removeAll(keepingCapacity: bytes.capacity <= 16_384)
            bytes.append(contentsOf: line.utf8)
            writeAll(2, bytes)
        }
    }
}

extension String {
    fileprivate func replacingNewlines() -> String {
        guard self.contains("\n") else { return self }
        return String(self.map { $0 == "\n" ? " " : $0 })
    }
}
