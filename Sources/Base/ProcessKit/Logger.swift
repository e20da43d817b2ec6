/// How important a log line is. The raw values are syslog priorities (what journald's `<N>`
/// prefixes use).
public enum LogLevel: Int, Comparable, Sendable, CaseIterable {
    case error = 3
    case warning = 4
    case notice = 5
    case info = 6
    case debug = 7

    /// Ordered by verbosity: `error < warning < notice < info < debug`; a logger at `info` writes
    /// everything `<= .info`.
    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }

    /// `error`, `warning`, `notice`, `info`, `debug`.
    public var name: String {
        switch self {
        case .error: "error"
        case .warning: "warning"
        case .notice: "notice"
        case .info: "info"
        case .debug: "debug"
        }
    }

    /// The level named `error`, `warning`, `notice`, `info` or `debug` (any case); nil otherwise.
    public init?(name: String) {
        guard let level = LogLevel.allCases.first(where: { $0.name == name.lowercased() }) else { return nil }
        self = level
    }
}

/// One log line before formatting.
public struct LogRecord: Sendable {
    /// How important the line is.
    public var level: LogLevel
    /// The logger's label: the part of the program that wrote the line (`sugard`, `sync`, `storage`).
    public var label: String
    /// The message, not yet escaped; it may contain newlines.
    public var message: String
    /// `key=value` pairs written after the message, in order.
    public var metadata: [(String, String)]
}

/// A small logger with swift-log's shape: a label, a minimum level and metadata.
///
/// Library code takes a logger from its caller and never chooses where lines go; the daemon
/// decides the sink (stderr with journald priorities). Health data rule: reading values are only
/// ever logged at ``LogLevel/debug``.
public struct Logger: Sendable {
    /// The part of the program the lines come from; written before each message.
    public var label: String
    private let fixedLevel: LogLevel
    private let levelSource: (@Sendable () -> LogLevel)?
    private let sink: @Sendable (LogRecord) -> Void

    /// A logger with a fixed minimum `level`, handing each enabled record to `sink`.
    public init(label: String, level: LogLevel = .info, sink: @escaping @Sendable (LogRecord) -> Void) {
        self.label = label
        self.fixedLevel = level
        self.levelSource = nil
        self.sink = sink
    }

    /// A logger whose minimum level is read at each call (the daemon changes it on reload).
    public init(label: String, levelSource: @escaping @Sendable () -> LogLevel, sink: @escaping @Sendable (LogRecord) -> Void) {
        self.label = label
        self.fixedLevel = .info
        self.levelSource = levelSource
        self.sink = sink
    }

    /// The minimum level logged.
    public var level: LogLevel { self.levelSource?() ?? self.fixedLevel }

    /// A logger that drops everything (tests, benchmarks).
    public static let disabled = Logger(label: "disabled", level: .error, sink: { _ in })

    /// The same sink under another label.
    public func named(_ label: String) -> Logger {
        var copy = self
        copy.label = label
        return copy
    }

    /// Whether a line at `level` would be written (for skipping costly metadata).
    public func isEnabled(_ level: LogLevel) -> Bool { level <= self.level }

    /// Writes `message` at `level`; the message is only built when the level is enabled.
    public func log(_ level: LogLevel, _ message: @autoclosure () -> String, _ metadata: [(String, String)] = []) {
        guard self.isEnabled(level) else { return }
        self.sink(LogRecord(level: level, label: self.label, message: message(), metadata: metadata))
    }

    /// Logs at `error`: something failed and was not retried.
    public func error(_ message: @autoclosure () -> String, _ metadata: [(String, String)] = []) {
        self.log(.error, message(), metadata)
    }
    /// Logs at `warning`: something failed and is retried or worked around.
    public func warning(_ message: @autoclosure () -> String, _ metadata: [(String, String)] = []) {
        self.log(.warning, message(), metadata)
    }
    /// Logs at `notice`: a normal but significant event (start, stop, reload).
    public func notice(_ message: @autoclosure () -> String, _ metadata: [(String, String)] = []) {
        self.log(.notice, message(), metadata)
    }
    /// Logs at `info`.
    public func info(_ message: @autoclosure () -> String, _ metadata: [(String, String)] = []) {
        self.log(.info, message(), metadata)
    }
    /// Logs at `debug`, the only level that may carry reading values.
    public func debug(_ message: @autoclosure () -> String, _ metadata: [(String, String)] = []) {
        self.log(.debug, message(), metadata)
    }
}
