import Locking
import DBus
import Foundation
import TestSupport

/// A private system-like dbus-daemon (and optionally the BlueZ stand-in) in a short temp dir: the
/// shared `PrivateBus`. Every process it starts is killed by `withBus`, also when the test fails.
typealias BusFixture = PrivateBus
typealias FixtureError = RigError

extension PrivateBus {
    /// Starts (or restarts, on the same socket path) the bus daemon.
    func startBus() throws { try self.start() }
    /// Kills the bus daemon (SIGKILL: it vanishes the way a crashed bus would).
    func killBus() { self.kill() }
    /// Starts the stand-in and waits until it owns org.bluez.
    func startStandIn(parameters: String) async throws { try await self.startStandIn(parameters) }
}

/// Runs `body` with a fresh bus (and the stand-in when `standIn` parameters are given); always tears down.
func withBus<T>(
    standIn parameters: String? = nil, _ body: (BusFixture) async throws -> T
) async throws -> T {
    var template = Array("/tmp/sgd-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw FixtureError("mkdtemp failed") }
    let fixture = PrivateBus(dir: String(cString: made))
    defer {
        fixture.stop()
        try? FileManager.default.removeItem(atPath: fixture.dir)
    }
    try fixture.start()
    if let parameters { try await fixture.startStandIn(parameters) }
    return try await body(fixture)
}

/// Pulls the next element of an async iterator, failing after `seconds` instead of hanging.
func next<Iterator: AsyncIteratorProtocol & SendableMetatype>(
    _ iterator: inout Iterator, _ what: String, seconds: Int = 10
) async throws -> Iterator.Element? where Iterator.Element: Sendable, Iterator.Failure == Never {
    // The iterators are not Sendable; poll it through a task that owns a moved copy.
    let box = IteratorBox(iterator)
    defer { iterator = box.iterator }
    return try await within(seconds, what) { await box.next() }
}

final class IteratorBox<Iterator: AsyncIteratorProtocol>: @unchecked Sendable
where Iterator.Element: Sendable, Iterator.Failure == Never {
    // @unchecked: used by one task at a time (the caller awaits `within`, which awaits this).
    var iterator: Iterator
    init(_ iterator: Iterator) { self.iterator = iterator }
    func next() async -> Iterator.Element? { await self.iterator.next(isolation: nil) }
}
