import Locking
import Testing

/// `HandOffStream`, which the D-Bus loop hands signals, owner changes and calls to tasks through.
@Suite struct HandOffStreamTests {
    /// A thread of ours hands over heap values (arrays and strings, as decoded D-Bus arguments are)
    /// while the consumer is busy, so most wait in the buffer: all arrive, in order. (What the fence
    /// is for, ThreadSanitizer seeing the hand-off, shows in the BlueZ soak's sugard under
    /// `scripts/sanitize thread`; in this test process TSan saw the hand-off even without it.)
    @Test func valuesFromAThreadArriveInOrder() async {
        let (stream, continuation) = HandOffStream.makeStream(of: ([UInt8], String).self)
        let count = 5_000
        let started = startDetachedThread {
            for i in 0..<count {
                continuation.yield(([UInt8(truncatingIfNeeded: i), UInt8(truncatingIfNeeded: i >> 8)], "value \(i)"))
            }
            continuation.finish()
        }
        #expect(started == 0)
        var received = 0
        var inOrder = true
        for await (bytes, text) in stream {
            // Busy now and then, so that the next values wait in the buffer.
            if received % 64 == 0 { for _ in 0..<20_000 { _ = bytes.count } }
            inOrder = inOrder && bytes == [UInt8(truncatingIfNeeded: received), UInt8(truncatingIfNeeded: received >> 8)]
                && text == "value \(received)"
            received += 1
        }
        #expect(received == count && inOrder)
    }

    /// Dropping the stream runs the continuation's onTermination (the D-Bus subscription is removed then).
    @Test func droppingTheStreamRunsOnTermination() async {
        let terminated = Lock(false)
        do {
            let (stream, continuation) = HandOffStream.makeStream(of: Int.self)
            continuation.onTermination = { _ in terminated.withLock { $0 = true } }
            continuation.yield(1)
            var iterator = stream.makeAsyncIterator()
            #expect(await iterator.next() == 1)
        }
        #expect(terminated.withLock { $0 })
    }
}
