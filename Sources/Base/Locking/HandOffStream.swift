/// An `AsyncStream` for values handed from a thread of our own (the D-Bus loop, an I/O thread) to a
/// task, with the hand-off made through a ``Lock`` so that ThreadSanitizer sees it.
///
/// Why: `AsyncStream` buffers with a lock of the Swift runtime, which on Linux is a futex inside the
/// uninstrumented libswift_Concurrency. When the consumer is suspended, the yield resumes it through
/// the runtime's task queue, which TSan is told about; when it is busy, the next value waits in the
/// buffer and the consumer takes it without any step TSan can see, so every read of the value's heap
/// storage (strings, arrays, written on the producing thread) is reported as a race although the
/// runtime's lock orders it. Here the producer yields with a ``Lock`` held and the consumer takes the
/// same lock after each value: a pthread mutex TSan intercepts, costing one uncontended lock per value.
///
/// Use it like `AsyncStream.makeStream`: ``makeStream(of:bufferingPolicy:)`` gives the stream and its
/// ``Continuation``; the stream ends when the continuation finishes, and ``Continuation/onTermination``
/// runs when the consumer drops or cancels it.
public struct HandOffStream<Element: Sendable>: AsyncSequence, Sendable {
    public typealias Failure = Never

    let base: AsyncStream<Element>
    let fence: Lock<UInt64>

    /// The producing side.
    public struct Continuation: Sendable {
        let base: AsyncStream<Element>.Continuation
        let fence: Lock<UInt64>

        /// Hands `value` over; the result of the underlying `AsyncStream.Continuation.yield(_:)`.
        @discardableResult
        public func yield(_ value: Element) -> AsyncStream<Element>.Continuation.YieldResult {
            self.fence.withLock { count in
                count &+= 1
                return self.base.yield(value)
            }
        }

        /// Ends the stream once the values handed over so far are taken.
        public func finish() { self.base.finish() }

        /// Runs when the stream ends: finished, or its consumer dropped or cancelled it.
        public var onTermination: (@Sendable (AsyncStream<Element>.Continuation.Termination) -> Void)? {
            get { self.base.onTermination }
            nonmutating set { self.base.onTermination = newValue }
        }
    }

    /// A stream and its continuation (the `AsyncStream.makeStream` shape).
    public static func makeStream(
        of elementType: Element.Type = Element.self,
        bufferingPolicy limit: AsyncStream<Element>.Continuation.BufferingPolicy = .unbounded
    ) -> (stream: HandOffStream<Element>, continuation: Continuation) {
        let (base, continuation) = AsyncStream.makeStream(of: elementType, bufferingPolicy: limit)
        let fence = Lock<UInt64>(0)
        return (HandOffStream(base: base, fence: fence), Continuation(base: continuation, fence: fence))
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<Element>.AsyncIterator
        let fence: Lock<UInt64>

        public mutating func next() async -> Element? {
            let value = await self.base.next()
            // After the producer's unlock around the yield: what it wrote happens before what we read.
            _ = self.fence.withLock { $0 }
            return value
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> Element? {
            let value = await self.base.next(isolation: actor)
            _ = self.fence.withLock { $0 }
            return value
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: self.base.makeAsyncIterator(), fence: self.fence)
    }
}
