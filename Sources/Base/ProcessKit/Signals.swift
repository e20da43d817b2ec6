import Dispatch
import Glibc

/// The signals the daemons (sugard, sugard-forward) handle.
public enum UnixSignal: Int32, Sendable, CaseIterable {
    case hangup = 1
    case interrupt = 2
    case terminate = 15

    /// The signal's C name (`SIGHUP`), for log lines.
    public var name: String {
        switch self {
        case .hangup: "SIGHUP"
        case .interrupt: "SIGINT"
        case .terminate: "SIGTERM"
        }
    }
}

/// Delivers Unix signals as an `AsyncStream`, bridged from Dispatch signal sources (the shape of
/// swift-service-lifecycle's `UnixSignalsSequence`).
///
/// The default action of each signal is replaced by "ignore" so the process survives until the
/// stream's consumer acts. The sources are cancelled when the stream ends.
public func unixSignals(_ signals: [UnixSignal]) -> AsyncStream<UnixSignal> {
    let (stream, continuation) = AsyncStream.makeStream(of: UnixSignal.self, bufferingPolicy: .bufferingNewest(16))
    let queue = DispatchQueue(label: "sugard.signals")
    var sources: [any DispatchSourceSignal] = []
    for sig in signals {
        Glibc.signal(sig.rawValue, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: sig.rawValue, queue: queue)
        source.setEventHandler { continuation.yield(sig) }
        source.resume()
        sources.append(source)
    }
    let owned = SignalSources(sources)
    continuation.onTermination = { _ in owned.cancel() }
    return stream
}

/// Keeps the sources alive for as long as the stream lives.
private final class SignalSources: @unchecked Sendable {
    // Written once in init; `cancel` only calls thread-safe Dispatch API.
    private let sources: [any DispatchSourceSignal]
    init(_ sources: [any DispatchSourceSignal]) { self.sources = sources }
    func cancel() { for source in self.sources { source.cancel() } }
}
