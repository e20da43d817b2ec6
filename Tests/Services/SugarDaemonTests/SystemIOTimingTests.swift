import Glibc
import SystemIO
import Testing

/// SystemIO's one monotonic clock, its sleep and the one doubling backoff that the MQTT reconnect,
/// the forwarder's sugard connections, the HTTP sinks, the webhooks and the hub's retries share.
@Suite struct SystemIOTimingTests {
    @Test func backoffDoublesFromTheFirstFailureUpToTheCap() {
        let waits = (0...9).map { RetryBackoff.delay(failures: $0, initial: .milliseconds(100), max: .seconds(5)) }
        #expect(waits == [100, 100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000].map { Duration.milliseconds($0) })
        #expect(RetryBackoff.delay(failures: 1_000_000, initial: .seconds(1), max: .seconds(60)) == .seconds(60))
    }

    @Test func backoffInSecondsIsTheSameSequence() {
        // The hub's database retry: 0.2 s doubled, at most 3 s.
        #expect((1...6).map { RetryBackoff.delay(failures: $0, initial: 0.2, max: 3.0) } == [0.2, 0.4, 0.8, 1.6, 3.0, 3.0])
        // The MQTT reconnect's defaults: 0.2 s up to 30 s.
        #expect(RetryBackoff.delay(failures: 9, initial: 0.2, max: 30) == 30)
        #expect(RetryBackoff.delay(failures: 8, initial: 0.2, max: 30) == 25.6)
        // A first wait above the cap is the cap.
        #expect(RetryBackoff.delay(failures: 1, initial: 10.0, max: 3.0) == 3.0)
    }

    @Test func monotonicClockAdvancesWithASleep() {
        let before = monotonicNanoseconds()
        let beforeMillis = monotonicMilliseconds()
        let beforeSeconds = monotonicSeconds()
        sleepFully(seconds: 0.05)
        let elapsed = monotonicNanoseconds() - before
        #expect(elapsed >= 50_000_000, "slept \(elapsed) ns")
        #expect(monotonicMilliseconds() - beforeMillis >= 50)
        #expect(monotonicSeconds() - beforeSeconds >= 0.05)
        // The three readings are one clock.
        #expect(abs(Double(monotonicMilliseconds()) / 1000 - monotonicSeconds()) < 0.5)
    }

    @Test func sleepFullyOfNothingReturnsAtOnce() {
        let before = monotonicNanoseconds()
        sleepFully(seconds: 0)
        sleepFully(seconds: -1)
        #expect(monotonicNanoseconds() - before < 1_000_000_000)
    }

    @Test func retryingInterruptedReturnsTheFirstOtherResult() {
        var calls = 0
        let result = retryingInterrupted { () -> Int32 in
            calls += 1
            if calls < 3 {
                errno = EINTR
                return -1
            }
            return 7
        }
        #expect(result == 7 && calls == 3)
        let failed = retryingInterrupted { () -> Int32 in
            errno = EBADF
            return -1
        }
        #expect(failed == -1 && errno == EBADF)
    }
}
