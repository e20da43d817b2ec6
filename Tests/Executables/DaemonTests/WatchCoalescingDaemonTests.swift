import Glibc
import JSON
import Locking
import Testing
import TestSupport
import Varlink

/// Issue 39: coalesced `Watch` calls on the built daemon while simulated meters sync. Every
/// watcher gets far fewer replies than the state has changes, in revision order, and the state it
/// holds in the end (its snapshot with every later reply's fields laid over it) is the daemon's
/// final state as `GetStatus` tells it.
@Suite struct WatchCoalescingDaemonTests {
    static let interface = "io.sugard.HealthDataSync"

    @Test func watchersOfASyncGetFewerRepliesAndEndOnTheFinalState() async throws {
        let dir = try TempDirectory()
        let now = Int64(time(nil))
        try dir.write("sugard.conf", """
            simulate_meters = 4
            simulate_start = \(now - 300)
            simulate_stop = \(now - 1)
            simulate_delay_us = 10000
            demo_interval = 1
            cooldown_seconds = 3600
            max_connections = 4
            timezone = UTC
            log_level = warning

            """)
        let run = try SugardRun(in: dir, arguments: ["--config", dir.file("sugard.conf")])
        try await run.waitUntilReady()
        let control = try VarlinkClient(socketPath: run.socketPath, timeout: .seconds(10))
        defer { control.close() }

        /// One whole-state watcher read on its own task: its replies in order.
        final class Watched: Sendable {
            let client: VarlinkClient
            let replies = Lock<[JSONObject]>([])
            let task: Task<Void, Never>

            init(path: String) throws {
                let client = try VarlinkClient(socketPath: path)
                self.client = client
                let replies = self.replies
                self.task = Task {
                    do {
                        for try await reply in client.callMore(WatchCoalescingDaemonTests.interface + ".Watch") {
                            replies.withLock { $0.append(reply) }
                        }
                    } catch {}
                }
            }

            var lastRevision: Int64 { self.replies.withLock { $0.last?["revision"]?.intValue ?? -1 } }

            /// The snapshot with every later reply's fields laid over it.
            var state: JSONObject {
                self.replies.withLock { replies in
                    var state = JSONObject()
                    for reply in replies {
                        for entry in reply["fields"]?.objectValue?.entries ?? [] { state[entry.key] = entry.value }
                    }
                    return state
                }
            }

            func close() {
                self.task.cancel()
                self.client.close()
            }
        }

        let watchers = try (0..<12).map { _ in try Watched(path: run.socketPath) }
        defer { for watcher in watchers { watcher.close() } }
        #expect(await eventually(within: 30) { watchers.allSatisfy { $0.lastRevision >= 0 } })
        let firstRevisions = watchers.map(\.lastRevision)

        // The syncs end (all four meters stored their 300 records).
        var final: JSONObject = [:]
        let synced = await eventually(within: 120) {
            guard let status = try? await control.call(Self.interface + ".GetStatus") else { return false }
            final = status
            let meters = status["state"]?["meters"]?.arrayValue ?? []
            return meters.count == 4 && (status["state"]?["readingCount"]?.intValue ?? 0) > 1000
                && meters.allSatisfy { ["done", "idle"].contains($0["sync"]?.stringValue ?? "") && $0["lastSync"]?["result"]?.stringValue == "success" }
        }
        #expect(synced, "\(final)\n\(String(run.stderr.suffix(3000)))")

        // Once every watcher is at the revision GetStatus gives (and that does not move
        // meanwhile), each holds the same fields as GetStatus's state.
        var settled = false
        for _ in 0..<50 where !settled {
            guard let status = try? await control.call(Self.interface + ".GetStatus"),
                let revision = status["revision"]?.intValue
            else { continue }
            final = status
            _ = await eventually(within: 10) { watchers.allSatisfy { $0.lastRevision >= revision } }
            settled = watchers.allSatisfy { $0.lastRevision == revision }
            if !settled { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(settled, "the state kept changing or the watchers did not catch up: \(watchers.map(\.lastRevision)) vs \(final["revision"] ?? .null)")
        let revision = final["revision"]?.intValue ?? 0
        for (index, watcher) in watchers.enumerated() {
            let replies = watcher.replies.withLock { $0 }
            // A snapshot first, then changes only, each at a later revision than the one before.
            #expect(replies.first?["snapshot"] == true)
            #expect(replies.dropFirst().allSatisfy { $0["snapshot"] == false })
            let revisions = replies.compactMap { $0["revision"]?.intValue }
            #expect(zip(revisions, revisions.dropFirst()).allSatisfy { $0 < $1 }, "watcher \(index): \(revisions)")
            // Coalesced: far fewer replies than changes.
            let changes = revision - firstRevisions[index]
            #expect(changes > 100 && replies.count - 1 < Int(changes) / 4, "watcher \(index): \(replies.count) replies for \(changes) changes")
            let state = watcher.state
            for field in ["meters", "lastReading", "readingCount", "sync", "adapter", "errors"] {
                #expect(state[field] == final["state"]?[field], "watcher \(index), field \(field)")
            }
        }
        #expect(await run.stop() == .exited(0))
    }
}
