import Foundation
import Glibc
import HealthDataSync
import JSON
import ReplayTransport
import SugarAPI
import Testing
import TestSupport
import Varlink

/// Watch over the socket: the view-model semantics as a client sees them.
@Suite struct WatchTests {
    /// Records large errors in the view model (big Watch messages) until `done` holds or time is up.
    static func write(until timeout: Duration, size: Int, _ f: Fixture, done: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        var n = 0
        while ContinuousClock.now < deadline {
            if done() { return true }
            n += 1
            let message = String(repeating: "x", count: size) + String(n)
            f.models.viewModel.update { $0.record(ReportedError(code: "test", message: message, at: seedStart)) }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return done()
    }

    @Test func snapshotFirstThenOnlyChangedFields() async throws {
        try await withAPIServer { f in
            let client = try f.client()
            defer { client.close() }
            var replies = client.callMore(api + "Watch").makeAsyncIterator()
            let snapshot = try #require(try await replies.next())
            expectValidReply("Watch", snapshot)
            #expect(snapshot["snapshot"] == true)
            #expect(snapshot["fields"]?.objectValue?.keys == StateField.allCases.map(\.rawValue))
            // The snapshot's fields validate as the State type.
            let full = try #require(snapshot["fields"]?.objectValue)
            try HealthDataSyncService.parsedDefinition.validate(.object(full), as: .named("State"))
            f.models.viewModel.update { $0.readingCount = 42 }
            let change = try #require(try await replies.next())
            #expect(change["snapshot"] == false)
            #expect(change["fields"] == ["readingCount": 42])
            #expect(change["revisions"]?["readingCount"]?.intValue == Int64(f.models.viewModel.revision))
        }
    }

    @Test func fieldsFilterWhatArrives() async throws {
        try await withAPIServer { f in
            let client = try f.client()
            defer { client.close() }
            var replies = client.callMore(api + "Watch", ["fields": ["adapter"]]).makeAsyncIterator()
            #expect(try await replies.next()?["fields"]?.objectValue?.keys == ["adapter"])
            f.models.viewModel.update { $0.readingCount = 99 }
            f.transport.setAdapterPresent(false)
            let change = try #require(try await replies.next())
            #expect(change["fields"]?.objectValue?.keys == ["adapter"])
            #expect(change["fields"]?["adapter"]?["present"] == false)
        }
    }

    @Test func meterWatchesSeeTheMeterModel() async throws {
        try await withAPIServer { f in
            let client = try f.client()
            defer { client.close() }
            var replies = client.callMore(api + "Watch", ["meter": .string(meterB.id.rawValue), "fields": ["pairing"]])
                .makeAsyncIterator()
            // The meter advertised as bonded.
            #expect(try await replies.next()?["fields"] == ["pairing": "paired"])
            f.models.model(for: meterB.id)?.update { $0.pairing = .notPaired }
            #expect(try await replies.next()?["fields"] == ["pairing": "notPaired"])
        }
    }

    @Test func badWatchParametersAreRefused() async throws {
        try await withAPIServer { f in
            let unknownField = await remoteError {
                let client = try f.client()
                defer { client.close() }
                _ = try await collect(client.callMore(api + "Watch", ["fields": ["readingCount", "glucose"]]))
            }
            #expect(unknownField?.name == api + "InvalidParameter")
            #expect(unknownField?.parameters["parameter"] == "fields")
            let meterField = await remoteError {
                let client = try f.client()
                defer { client.close() }
                _ = try await collect(client.callMore(api + "Watch", ["meter": .string(meterA.id.rawValue), "fields": ["readingCount"]]))
            }
            #expect(meterField?.name == api + "InvalidParameter")
            let noMeter = await remoteError {
                let client = try f.client()
                defer { client.close() }
                _ = try await collect(client.callMore(api + "Watch", ["meter": "C0:26:DA:00:00:00"]))
            }
            #expect(noMeter?.name == api + "MeterNotFound")
            let policy = await remoteError {
                let client = try f.client()
                defer { client.close() }
                _ = try await collect(client.callMore(api + "Watch", ["policy": "eventually"]))
            }
            #expect(policy == .invalidParameter("policy"))
            let noMore = await remoteError { _ = try await f.call(api + "Watch") }
            #expect(noMore == .expectedMore)
        }
    }

    @Test func coalescedWatchersConvergeOnTheLastWriteWhileTheClientLags() async throws {
        try await withAPIServer { f in
            let raw = try f.raw()
            await raw.send(#"{"method":"io.sugard.HealthDataSync.Watch","parameters":{"fields":["readingCount"]},"more":true}"#)
            #expect(try await raw.readMessage()?.parameters?["snapshot"] == true)
            for n in 1...500 { f.models.viewModel.update { $0.readingCount = n } }
            var messages = 0
            var last: JSONValue?
            while last != 500 {
                let message = try #require(try await raw.readMessage())
                messages += 1
                last = message.parameters?["fields"]?["readingCount"]
            }
            #expect(messages < 500)
        }
    }

    @Test func immediateWatchersGetEveryChangeInOrder() async throws {
        try await withAPIServer { f in
            let raw = try f.raw()
            await raw.send(
                #"{"method":"io.sugard.HealthDataSync.Watch","parameters":{"fields":["readingCount"],"policy":"immediate"},"more":true}"#)
            #expect(try await raw.readMessage()?.parameters?["snapshot"] == true)
            for n in 1...200 { f.models.viewModel.update { $0.readingCount = n } }
            var values: [Int64] = []
            while values.count < 200 {
                let message = try #require(try await raw.readMessage())
                values.append(message.parameters?["fields"]?["readingCount"]?.intValue ?? -1)
            }
            #expect(values == Array(1...200))
        }
    }

    @Test func aSlowConsumerIsDroppedWithSlowConsumerAndMayWatchAgain() async throws {
        var limits = HealthDataSyncService.Limits()
        limits.watchOutputCap = 8
        try await withAPIServer(limits: limits, configure: {
            $0.maxPendingOutputBytes = 16 << 10
            $0.slowClientTimeout = .seconds(60)
        }) { f in
            let raw = try f.raw()
            await raw.send(#"{"method":"io.sugard.HealthDataSync.Watch","parameters":{"policy":"immediate"},"more":true}"#)
            // The client reads nothing while errors (large messages) pile up.
            let dropped = await Self.write(until: .seconds(20), size: 2000, f) { f.stats.droppedWatchers == 1 }
            #expect(dropped)
            var last: JSONObject?
            while let message = try await raw.readMessage(timeout: .seconds(5)) {
                last = message
                if message.errorName != nil { break }
            }
            #expect(last?.errorName == api + "SlowConsumer")
            // The connection stays usable: watching again starts with a fresh snapshot.
            await raw.send(#"{"method":"io.sugard.HealthDataSync.Watch","parameters":{"fields":["adapter"]},"more":true}"#)
            #expect(try await raw.readMessage()?.parameters?["snapshot"] == true)
        }
    }

    /// A coalesced watcher queues its next reply only once the last one left sugard's buffer, so a
    /// client that never reads holds at most one reply in sugard (the rest are folded), and its
    /// watcher is dropped as a slow consumer once it misses its cap of owner turns; others are served.
    @Test func aClientThatNeverReadsIsDroppedAndOthersAreServed() async throws {
        var limits = HealthDataSyncService.Limits()
        limits.watchOutputCap = 64
        try await withAPIServer(limits: limits, configure: {
            $0.maxPendingOutputBytes = 32 << 10
            $0.slowClientTimeout = .milliseconds(300)
        }) { f in
            let baseline = f.stats.liveWatchers
            let stuck = try f.raw()
            await stuck.send(#"{"method":"io.sugard.HealthDataSync.Watch","more":true}"#)
            #expect(await eventually { f.stats.liveWatchers == baseline + 1 })
            let gone = await Self.write(until: .seconds(20), size: 4000, f) { f.stats.liveWatchers == baseline }
            #expect(gone)
            // Memory stayed bounded: the watcher was dropped for lag, not fed until the socket broke.
            #expect(f.stats.droppedWatchers == 1)
            let status = try await f.call(api + "GetStatus")
            #expect(status["state"] != nil)
            // What the client finally reads ends with SlowConsumer, or the server closed the socket
            // (it stayed over its output cap): the replies the kernel held may come first.
            var last: JSONObject?
            var closed = false
            while true {
                guard let message = try await stuck.readMessage(timeout: .seconds(5)) else {
                    closed = true
                    break
                }
                last = message
                if message.errorName != nil { break }
            }
            #expect(closed || last?.errorName == api + "SlowConsumer", "\(String(describing: last))")
        }
    }

    @Test func disconnectingCancelsTheWatcher() async throws {
        try await withAPIServer { f in
            let baseline = f.stats.liveWatchers
            var clients: [VarlinkClient] = []
            var streams: [AsyncThrowingStream<JSONObject, any Error>.AsyncIterator] = []
            for i in 0..<20 {
                let client = try f.client()
                var iterator = client.callMore(api + "Watch", i % 2 == 0 ? [:] : ["meter": .string(meterA.id.rawValue)])
                    .makeAsyncIterator()
                _ = try await iterator.next()
                clients.append(client)
                streams.append(iterator)
            }
            // One lease per group of coalesced watchers (WatchFanout): the view model's, meter A's.
            #expect(f.stats.liveWatchers == baseline + 2)
            for client in clients { client.close() }
            #expect(await eventually { f.noClientWatchers })
            #expect(f.models.model(for: meterA.id)?.watcherCount == 0)
        }
    }
    /// Rebinding over the socket: one Watch call follows whichever meter is syncing. When B starts
    /// while A is still receiving, the watcher rebinds to B (the generation advances, a snapshot of
    /// B comes), and none of A's later changes reach the client.
    @Test func followSyncingRebindsToTheMeterThatStartsSyncing() async throws {
        try await withAPIServer(stepDelay: .milliseconds(15)) { f in
            f.queue(
                (6...35).map { meterRecord(sequence: UInt16($0), mgdL: 100 + $0, at: Instant(epochMillis: seedStart.epochMillis + Int64($0) * hour)) },
                for: meterA.id)
            f.queue([meterRecord(sequence: 3, mgdL: 140, at: Instant(epochMillis: seedStart.epochMillis + 40 * hour))], for: meterB.id)
            let client = try f.client()
            defer { client.close() }
            let guardTask = closing(client)
            defer { guardTask.cancel() }
            var replies = client.callMore(
                api + "Watch", ["followSyncing": true, "meter": .string(meterA.id.rawValue), "fields": ["sync", "progress"]]
            ).makeAsyncIterator()
            let first = try #require(try await replies.next())
            expectValidReply("Watch", first)
            #expect(first["snapshot"] == true)
            #expect(first["meter"] == .string(meterA.id.rawValue))
            let firstGeneration = try #require(first["generation"]?.intValue)

            let syncA = Task { try await f.call(api + "Sync", ["meter": .string(meterA.id.rawValue), "force": true]) }
            // A is receiving in this sync (progress starts again at 0 when a sync connects).
            #expect(await eventually { f.isSyncing(meterA.id) && (f.models.model(for: meterA.id)?.state.progress.received ?? 0) >= 3 })
            let syncB = Task { try await f.call(api + "Sync", ["meter": .string(meterB.id.rawValue), "force": true]) }

            var seen: [JSONObject] = []
            var aSyncingAtRebind = false
            var rebound: JSONObject?
            while let reply = try await replies.next() {
                expectValidReply("Watch", reply)
                seen.append(reply)
                if rebound == nil, reply["meter"] == .string(meterB.id.rawValue) {
                    rebound = reply
                    aSyncingAtRebind = f.isSyncing(meterA.id)
                }
                if rebound != nil, reply["fields"]?["sync"] == "done" { break }
            }
            let sessionsA = try await syncA.value
            _ = try await syncB.value
            #expect(sessionsA["sessions"]?.arrayValue?.first?["stored"] == 30)

            let rebind = try #require(rebound)
            #expect(rebind["snapshot"] == true)
            #expect(rebind["generation"]?.intValue == firstGeneration + 1)
            // A was still downloading when the watcher moved: its later progress must not arrive.
            #expect(aSyncingAtRebind)
            let rebindIndex = try #require(seen.firstIndex { $0["meter"] == .string(meterB.id.rawValue) })
            let before = seen[..<rebindIndex]
            let after = seen[rebindIndex...]
            #expect(before.allSatisfy { $0["meter"] == .string(meterA.id.rawValue) && $0["generation"]?.intValue == firstGeneration })
            #expect(after.allSatisfy { $0["meter"] == .string(meterB.id.rawValue) && $0["generation"]?.intValue == firstGeneration + 1 })
            #expect(before.contains { ($0["fields"]?["progress"]?["received"]?.intValue ?? 0) > 0 })
            // A's download ended while the watcher was on B: A's 30 records were never reported.
            #expect(!seen.contains { $0["meter"] == .string(meterA.id.rawValue) && $0["fields"]?["progress"]?["received"] == 30 })

            // sugarctl: the same call, one line of JSON per reply, naming the meter.
            let watch = try await SugarctlTests.run(f, ["watch", "--follow-syncing", "--json", "--count", "1"])
            #expect(watch.status == 0, "\(watch.stderr)")
            #expect(try JSONValue(parsing: watch.stdout)["meter"]?.stringValue != nil)
        }
    }
}
