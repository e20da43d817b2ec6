import Foundation
import Glibc
import JSON
import Testing
import TestSupport
import Varlink

/// What both soaks share: their length and seed from the environment, a time budget, waiting for
/// the daemon's socket and a last forced sync that tolerates an automatic one already running.
enum Soak {
    /// `SUGARD_SOAK_SECONDS` (both soaks), else `defaultSeconds`.
    static func seconds(default defaultSeconds: Int) -> Int {
        environmentValue("SUGARD_SOAK_SECONDS").flatMap { Int($0) } ?? defaultSeconds
    }

    /// `SUGARD_SOAK_SEED`, else a fresh random one; printed so a run's choices can be replayed.
    static func seed(_ name: String, seconds: Int) -> UInt64 {
        let seed = environmentValue("SUGARD_SOAK_SEED").flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("\(name): \(seconds) s, seed \(seed) (SUGARD_SOAK_SEED=\(seed) replays the random choices)")
        return seed
    }

    /// `SUGARD_SOAK_KEEP=1` keeps the state directory and logs.
    static var keep: Bool { environmentValue("SUGARD_SOAK_KEEP") != nil }

    /// Runs `body`; a soak that wedges must fail, not hold CI, so it races a generous budget and
    /// whichever ends first cancels the other (the clients and the chaos loops stop on cancellation).
    static func withBudget(seconds: Int, _ body: @escaping @Sendable () async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                throw RigError("the soak did not finish within \(seconds) s")
            }
            defer { group.cancelAll() }
            try await group.next()
        }
    }

    static func makeTemporaryDirectory() throws -> String {
        var template = Array("/tmp/sugard-soak.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw RigError("cannot create a directory in /tmp") }
        return String(cString: made)
    }

    static func waitForSocket(_ path: String, seconds: Int) async -> Bool {
        let deadline = nowMillis() + Int64(seconds) * 1000
        while nowMillis() < deadline {
            if let client = try? VarlinkClient(socketPath: path) {
                let ok = (try? await client.call("io.sugard.HealthDataSync.GetStatus")) != nil
                client.close()
                if ok { return true }
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// A forced Sync (of `meter`, or of every meter when nil) that is asked again while it fails
    /// (an automatic sync may be running: SyncInProgress); the sessions' results.
    static func finalSync(socket: String, meter: String? = nil, attempts: Int = 8) async -> [String] {
        var parameters: JSONObject = ["force": true]
        if let meter { parameters["meter"] = .string(meter) }
        for attempt in 1...attempts {
            do {
                let admin = try VarlinkClient(socketPath: socket)
                defer { admin.close() }
                let reply = try await admin.call("io.sugard.HealthDataSync.Sync", parameters)
                return (reply["sessions"]?.arrayValue ?? []).compactMap { $0["result"]?.stringValue }
            } catch {
                print("soak: final sync\(meter.map { " of \($0)" } ?? "") attempt \(attempt) failed: \(error)")
                try? await Task.sleep(for: .seconds(1))
            }
        }
        return []
    }

    /// The last run's descriptors must not grow (counted with no client connected); its RSS may grow
    /// by at most 25% + 8 MiB. Under a sanitizer RSS says nothing about the daemon (ASan keeps freed
    /// memory in quarantine, TSan keeps shadow state): there it is printed, not bounded.
    static func expectFlat(fds: (start: Int, end: Int), rss: (start: Int, end: Int)) {
        #expect(fds.start > 0 && fds.end <= fds.start, "file descriptors grew from \(fds.start) to \(fds.end)")
        if sanitizerEnvironment().isEmpty {
            #expect(rss.start > 0 && rss.end <= rss.start + rss.start / 4 + 8 << 20, "RSS grew from \(rss.start) to \(rss.end) bytes")
        }
    }
}
