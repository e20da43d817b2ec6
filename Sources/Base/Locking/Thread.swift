internal import Glibc

/// Starts a detached POSIX thread running `body`; returns 0 or the `pthread_create` error. For loops
/// that block in the kernel (poll, recv) and so must not occupy a thread of Swift's cooperative pool.
public func startDetachedThread(_ body: @escaping @Sendable () -> Void) -> Int32 {
    final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let box = Unmanaged.passRetained(Box(body)).toOpaque()
    var thread = pthread_t()
    let rc = pthread_create(&thread, nil, { argument in
        guard let argument else { return nil }
        Unmanaged<Box>.fromOpaque(argument).takeRetainedValue().body()
        return nil
    }, box)
    guard rc == 0 else {
        Unmanaged<Box>.fromOpaque(box).release()
        return rc
    }
    pthread_detach(thread)
    return 0
}
