#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The monotonic clock, a sleep that a signal does not cut short, and the doubling retry delay:
// written once for every module that waits on the outside world.

/// The monotonic clock (`CLOCK_MONOTONIC`: never jumps with the wall clock, stops while the machine
/// is suspended) in nanoseconds since an arbitrary start (boot). For deadlines and timeouts; the
/// corresponding C function is `clock_gettime`.
public func monotonicNanoseconds() -> Int64 {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
}

/// ``monotonicNanoseconds()`` in whole milliseconds.
public func monotonicMilliseconds() -> Int64 { monotonicNanoseconds() / 1_000_000 }

/// ``monotonicNanoseconds()`` in seconds.
public func monotonicSeconds() -> Double { Double(monotonicNanoseconds()) / 1e9 }

/// Blocks the calling thread for `seconds`, sleeping again for what is left when a signal
/// interrupts it. The corresponding C function is `nanosleep`.
public func sleepFully(seconds: Double) {
    guard seconds > 0 else { return }
    let whole = seconds.rounded(.down)
    var spec = timespec(tv_sec: Int(whole), tv_nsec: Int((seconds - whole) * 1e9))
    var left = timespec()
    while nanosleep(&spec, &left) != 0 && errno == EINTR { spec = left }
}

/// The one doubling backoff: `initial` after the first failure, doubled after each further one, at
/// most `max` (the HTTP sinks, the webhooks, the MQTT reconnect, the forwarder's sugard
/// connections, the hub's database retries).
public enum RetryBackoff {
    /// The wait after the `failures`-th failure in a row (1 or more; 0 counts as 1).
    public static func delay(failures: Int, initial: Duration, max: Duration) -> Duration {
        self.delay(failures: failures, initial: initial, max: max) { $0 * 2 }
    }

    /// The wait after the `failures`-th failure in a row, in seconds.
    public static func delay(failures: Int, initial: Double, max: Double) -> Double {
        self.delay(failures: failures, initial: initial, max: max) { $0 * 2 }
    }

    private static func delay<Wait: Comparable>(failures: Int, initial: Wait, max: Wait, doubled: (Wait) -> Wait) -> Wait {
        var wait = initial
        for _ in 1..<Swift.max(1, Swift.min(failures, 30)) where wait < max { wait = doubled(wait) }
        return Swift.min(wait, max)
    }
}
