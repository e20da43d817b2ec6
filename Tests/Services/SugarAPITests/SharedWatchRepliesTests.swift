import HealthDataSync
import JSON
import SugarAPI
import SugarWire
import Testing
import Varlink

/// Issue 39: a Watch reply is encoded once per distinct message (model, generation, revision,
/// snapshot, fields), whatever the number of watchers; another message (a snapshot of other fields,
/// a wider coalesced one, another model) gets its own encoding.
@Suite struct SharedWatchRepliesTests {
    @Test func watchersOfTheSameFieldsShareOneEncodingPerChange() async throws {
        let model = WireFromDomainTests.viewModel()
        model.activate()
        let shared = SharedWatchReplies()
        let watchers = (0..<20).map { _ in model.watch() }
        let narrow = model.watch(fields: [.readingCount])
        defer {
            for watcher in watchers { watcher.cancel() }
            narrow.cancel()
        }
        var encodedWith = 0
        func send(_ watcher: Watcher<ViewState>) async throws -> Int {
            let message = try #require(await watcher.next())
            let reply = shared.reply(for: message, of: model) {
                encodedWith += 1
                return Wire.WatchReply(message).json.objectValue ?? [:]
            }
            return reply.byteCount
        }
        // Snapshots: one encoding for the 20 whole-state watchers, one for the narrow one.
        var sizes = Set<Int>()
        for watcher in watchers { sizes.insert(try await send(watcher)) }
        #expect(sizes.count == 1)
        _ = try await send(narrow)
        #expect(encodedWith == 2)

        // One change: one more encoding, for everyone: the whole-state watchers' message carries the
        // changed field only, the same message (fields, revision) the narrow watcher gets.
        model.update { $0.readingCount = 7 }
        sizes = []
        for watcher in watchers { sizes.insert(try await send(watcher)) }
        #expect(sizes.count == 1)
        _ = try await send(narrow)
        #expect(encodedWith == 3)
        #expect(shared.counts.encodings == 3 && shared.counts.hits == 39)
    }

    @Test func anotherModelNeverGetsAnotherModelsBytes() async throws {
        let first = WireFromDomainTests.viewModel()
        let second = WireFromDomainTests.viewModel()
        second.update { $0.readingCount = 99 }
        let shared = SharedWatchReplies()
        let a = first.watch(), b = second.watch()
        defer {
            a.cancel()
            b.cancel()
        }
        let ma = try #require(await a.next()), mb = try #require(await b.next())
        _ = shared.reply(for: ma, of: first) { Wire.WatchReply(ma).json.objectValue ?? [:] }
        _ = shared.reply(for: mb, of: second) { Wire.WatchReply(mb).json.objectValue ?? [:] }
        #expect(shared.counts.encodings == 2 && shared.counts.hits == 0)
    }
}
