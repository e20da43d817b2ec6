import Foundation
import Glibc
import HealthDataSync
import JSON
import SugarAPI
import Testing
import TestSupport
import Varlink

/// Issue 39: coalesced watchers are served in groups (one per model and field set): one read of
/// the model, one encoding and one batched send per round for all of them. Over the daemon's
/// socket, a burst of changes reaches each watcher as fewer replies, in revision order, the last
/// one with the final state; a watcher that stops reading catches up with the latest values.
@Suite struct WatchFanoutTests {
    /// Reads replies until `done` holds for the state built so far; returns the replies read.
    static func read(
        _ raw: RawConnection, until done: (JSONObject) -> Bool, into state: inout JSONObject
    ) async throws -> [JSONObject] {
        var replies: [JSONObject] = []
        while !done(state) {
            let message = try #require(try await raw.readMessage(timeout: .seconds(20)))
            let parameters = try #require(message.parameters, "\(message)")
            replies.append(parameters)
            for entry in parameters["fields"]?.objectValue?.entries ?? [] { state[entry.key] = entry.value }
        }
        return replies
    }

    @Test func aBurstReachesEveryWatcherAsFewerRepliesEndingWithTheFinalState() async throws {
        try await withAPIServer(limits: HealthDataSyncService.Limits()) { f in
            let fanout = try #require(f.service?.watchFanout)
            var whole: [RawConnection] = []
            var narrow: [RawConnection] = []
            for _ in 0..<24 {
                let raw = try f.raw()
                await raw.send(#"{"method":"io.sugard.HealthDataSync.Watch","more":true}"#)
                whole.append(raw)
            }
            for _ in 0..<8 {
                let raw = try f.raw()
                await raw.send(#"{"method":"io.sugard.HealthDataSync.Watch","parameters":{"fields":["readingCount"]},"more":true}"#)
                narrow.append(raw)
            }
            var states = [JSONObject](repeating: [:], count: whole.count + narrow.count)
            for (index, raw) in (whole + narrow).enumerated() {
                let snapshot = try await Self.read(raw, until: { $0.count > 0 }, into: &states[index])
                #expect(snapshot.first?["snapshot"] == true)
            }
            // Two groups: one per field set of the view model.
            #expect(fanout.groupCount == 2 && fanout.memberCount == 32)
            let before = fanout.counts

            // A burst of 2 000 changes of two fields, spread over several rounds, while every
            // watcher reads.
            let base = f.models.viewModel.state.readingCount
            let final = base + 2000
            let readers = (whole + narrow).enumerated().map { index, raw in
                let isWhole = index < whole.count
                let start = states[index]
                return Task { () throws -> [JSONObject] in
                    var state = start
                    return try await Self.read(
                        raw, until: { $0["readingCount"]?.intValue == Int64(final) && (!isWhole || $0["errors"]?.arrayValue?.last?["message"] == "burst 2000") },
                        into: &state)
                }
            }
            for n in 1...2000 {
                f.models.viewModel.update {
                    $0.readingCount = base + n
                    if n % 100 == 0 { $0.record(ReportedError(code: "test", message: "burst \(n)", at: seedStart)) }
                }
                if n % 200 == 0 { try await Task.sleep(for: .milliseconds(30)) }
            }
            let revision = Int64(f.models.viewModel.revision)
            for (index, reader) in readers.enumerated() {
                let isWhole = index < whole.count
                let replies = try await reader.value
                #expect(replies.count < 200, "watcher \(index) got \(replies.count) replies for 2 000 changes")
                #expect(replies.allSatisfy { $0["snapshot"] == false })
                let revisions = replies.compactMap { $0["revision"]?.intValue }
                #expect(zip(revisions, revisions.dropFirst()).allSatisfy { $0 < $1 }, "\(revisions)")
                // A narrow watcher never gets another field.
                if !isWhole { #expect(replies.allSatisfy { $0["fields"]?.objectValue?.keys == ["readingCount"] }) }
                // The last reply was read after the last change.
                #expect(revisions.last == revision)
            }
            // One encoding per round (plus snapshots and catch-ups), shared by the whole group.
            let after = fanout.counts
            let encodings = after.encodings - before.encodings
            let replies = after.replies - before.replies
            #expect(after.rounds > before.rounds && encodings >= 2)
            #expect(replies >= 5 * encodings, "\(encodings) encodings for \(replies) replies")
        }
    }

    @Test func aWatcherThatStopsReadingCatchesUpWithTheLatestValues() async throws {
        try await withAPIServer(limits: HealthDataSyncService.Limits()) { f in
            let fanout = try #require(f.service?.watchFanout)
            let reader = try f.raw()
            let sleeper = try f.raw()
            var readerState = JSONObject()
            var sleeperState = JSONObject()
            for raw in [reader, sleeper] { await raw.send(#"{"method":"io.sugard.HealthDataSync.Watch","more":true}"#) }
            _ = try await Self.read(reader, until: { $0.count > 0 }, into: &readerState)
            _ = try await Self.read(sleeper, until: { $0.count > 0 }, into: &sleeperState)
            // Large changes (errors of 3 000 bytes: each reply ~100 KB) fill the sleeper's socket
            // while it reads nothing; the reader keeps up.
            let before = fanout.counts
            let last = "last " + String(repeating: "z", count: 3000)
            var n = 0
            let skipped = await WatchTests.write(until: .seconds(20), size: 3000, f) { fanout.counts.skipped > before.skipped + 5 }
            #expect(skipped)
            f.models.viewModel.update {
                n = $0.readingCount + 1
                $0.readingCount = n
                $0.record(ReportedError(code: "test", message: last, at: seedStart))
            }
            _ = try await Self.read(reader, until: { $0["readingCount"]?.intValue == Int64(n) }, into: &readerState)
            // The sleeper wakes up: it gets the latest values, ending on the final state, and was
            // never dropped (its cap of owner turns was not reached).
            let replies = try await Self.read(
                sleeper, until: { $0["readingCount"]?.intValue == Int64(n) && $0["errors"]?.arrayValue?.last?["message"] == .string(last) },
                into: &sleeperState)
            #expect(replies.allSatisfy { $0["snapshot"] == false && $0["error"] == nil })
            #expect(sleeperState["errors"] == readerState["errors"])
            #expect(f.stats.droppedWatchers == 0)
        }
    }

    /// Rounds of a big state to many watchers go out in turns, one round after the other: while
    /// 60 watchers read a burst of changes of a ~200 KB state (12 MB per round), a `GetStatus`
    /// caller is answered every time, and every watcher ends on the final state with its replies
    /// in revision order, none dropped.
    @Test func getStatusIsAnsweredWhileBigRoundsAreWritten() async throws {
        try await withAPIServer(limits: HealthDataSyncService.Limits()) { f in
            for n in 0..<ViewState.errorLimit {
                f.models.viewModel.update { $0.record(ReportedError(code: "test", message: String(repeating: "e", count: 6000) + String(n), at: seedStart)) }
            }
            let fanout = try #require(f.service?.watchFanout)
            var raws: [RawConnection] = []
            for _ in 0..<60 {
                let raw = try f.raw()
                await raw.send(#"{"method":"io.sugard.HealthDataSync.Watch","more":true}"#)
                raws.append(raw)
            }
            #expect(await eventually { fanout.memberCount == raws.count })
            let base = f.models.viewModel.state.readingCount
            let final = base + 400
            let readers = raws.map { raw in
                Task { () throws -> [JSONObject] in
                    var state = JSONObject()
                    return try await Self.read(
                        raw, until: { $0["readingCount"]?.intValue == Int64(final) && $0["errors"]?.arrayValue?.last?["message"] == "final" },
                        into: &state)
                }
            }
            let status = try f.client()
            defer { status.close() }
            var answered = 0
            for n in 1...400 {
                f.models.viewModel.update {
                    $0.readingCount = base + n
                    if n == 400 { $0.record(ReportedError(code: "test", message: "final", at: seedStart)) }
                }
                if n % 20 == 0 {
                    let reply = try await status.call(api + "GetStatus")
                    #expect(reply["state"]?["readingCount"]?.intValue ?? 0 >= Int64(base + n))
                    answered += 1
                }
            }
            #expect(answered == 20)
            let revision = Int64(f.models.viewModel.revision)
            for reader in readers {
                let replies = try await reader.value
                #expect(replies.first?["snapshot"] == true)
                let revisions = replies.compactMap { $0["revision"]?.intValue }
                #expect(zip(revisions, revisions.dropFirst()).allSatisfy { $0 < $1 }, "\(revisions)")
                #expect(revisions.last == revision)
                #expect(replies.allSatisfy { $0["error"] == nil })
            }
            #expect(f.stats.droppedWatchers == 0)
            #expect(fanout.memberCount == raws.count)
        }
    }

    @Test func theLastMemberToLeaveEndsTheGroup() async throws {
        try await withAPIServer(limits: HealthDataSyncService.Limits()) { f in
            let fanout = try #require(f.service?.watchFanout)
            var clients: [VarlinkClient] = []
            var streams: [AsyncThrowingStream<JSONObject, any Error>.AsyncIterator] = []
            for i in 0..<12 {
                let client = try f.client()
                var replies = client.callMore(api + "Watch", i % 2 == 0 ? [:] : ["meter": .string(meterA.id.rawValue)]).makeAsyncIterator()
                _ = try await replies.next()
                clients.append(client)
                streams.append(replies)
            }
            #expect(fanout.groupCount == 2 && fanout.memberCount == 12)
            // One lease per group on each model, whatever the number of calls.
            #expect(f.clientWatchers == 2)
            for client in clients.prefix(6) { client.close() }
            #expect(await eventually { fanout.memberCount == 6 })
            #expect(fanout.groupCount == 2)
            for client in clients.dropFirst(6) { client.close() }
            #expect(await eventually { fanout.groupCount == 0 && f.noClientWatchers })
            streams.removeAll()
            #expect(f.models.model(for: meterA.id)?.watcherCount == 0)
        }
    }
}

/// The replies a fan-out queues are held once for all its members: 40 watchers of a ~200 KB state
/// that read nothing for a while stay within a 4 MiB memory budget for all connections (charged
/// per connection, their snapshots alone were 8 MB, and the server closed connections).
@Suite struct WatchFanoutBudgetTests {
    @Test func sharedRepliesAreNotChargedPerConnection() async throws {
        try await withAPIServer(limits: HealthDataSyncService.Limits(), configure: { $0.memoryBudgetBytes = 4 << 20 }) { f in
            // A big state: 32 errors of 6 000 bytes.
            for n in 0..<ViewState.errorLimit {
                f.models.viewModel.update { $0.record(ReportedError(code: "test", message: String(repeating: "e", count: 6000) + String(n), at: seedStart)) }
            }
            var raws: [RawConnection] = []
            for _ in 0..<40 {
                let raw = try f.raw()
                await raw.send(#"{"method":"io.sugard.HealthDataSync.Watch","more":true}"#)
                raws.append(raw)
            }
            let fanout = try #require(f.service?.watchFanout)
            #expect(await eventually { fanout.memberCount == 40 })
            let final = f.models.viewModel.state.readingCount + 1
            f.models.viewModel.update { $0.readingCount = final }
            // Every watcher (none was closed) gets its snapshot and then the change.
            for raw in raws {
                var state = JSONObject()
                let replies = try await WatchFanoutTests.read(raw, until: { $0["readingCount"]?.intValue == Int64(final) }, into: &state)
                #expect(replies.first?["snapshot"] == true)
                #expect(replies.count <= 2)
                #expect(state["errors"]?.arrayValue?.count == ViewState.errorLimit)
            }
            #expect(fanout.memberCount == 40)
        }
    }
}
