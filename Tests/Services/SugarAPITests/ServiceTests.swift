import Foundation
import Glibc
import GlucoseProfile
import GlucoseStore
import HealthDataSync
import JSON
import ReplayTransport
import SugarAPI
import SugarWire
import Testing
import Varlink

/// Every method of io.sugard.HealthDataSync over a real socket, served by the daemon itself (engine,
/// SQLite in a temp directory, two simulated meters on the replay transport).
@Suite struct ServiceTests {
    @Test func interfaceDescriptionIsTheCheckedInFileAndDocumented() throws {
        let file = try String(contentsOfFile: packageRoot + "/Sources/Services/SugarAPI/io.sugard.HealthDataSync.varlink", encoding: .utf8)
        #expect(Array(file.utf8) == Array(HealthDataSyncService.interfaceDescription.utf8))
        let definition = HealthDataSyncService.parsedDefinition
        #expect(definition.name == "io.sugard.HealthDataSync")
        #expect(Set(definition.methods.keys) == HealthDataSyncService.readMethods.union(HealthDataSyncService.adminMethods))
        for error in ["MeterNotFound", "AdapterUnavailable", "PermissionDenied", "SyncInProgress", "StorageError", "InvalidParameter"] {
            #expect(definition.errors[error] != nil, "\(error)")
        }
        // Every declaration has a doc comment right above it.
        let lines = file.split(separator: "\n", omittingEmptySubsequences: false)
        for (index, line) in lines.enumerated()
        where line.hasPrefix("method ") || line.hasPrefix("type ") || line.hasPrefix("error ") {
            #expect(index > 0 && lines[index - 1].hasPrefix("#"), "undocumented: \(line)")
        }
    }

    @Test func introspectionServesTheDescriptionVerbatim() async throws {
        try await withAPIServer { f in
            let client = try f.client()
            let info = try await client.call("org.varlink.service.GetInfo")
            #expect(info["interfaces"]?.arrayValue?.contains("io.sugard.HealthDataSync") == true)
            #expect(info["vendor"] == "sugard")
            let description = try await client.call(
                "org.varlink.service.GetInterfaceDescription", ["interface": "io.sugard.HealthDataSync"])
            #expect(description["description"]?.stringValue == HealthDataSyncService.interfaceDescription)
        }
    }

    @Test func getStatusIsTheViewModelSnapshot() async throws {
        try await withAPIServer(unit: .mmol) { f in
            let reply = try await f.call(api + "GetStatus")
            expectValidReply("GetStatus", reply)
            let state = try #require(reply["state"])
            #expect(state["meters"]?.arrayValue?.count == 2)
            #expect(state["readingCount"] == 7)
            #expect(state["lastReading"]?["meter"] == .string(meterB.id.rawValue))
            #expect(state["lastReading"]?["glucose"]?["mgdL"]?.doubleValue == 151)
            #expect(state["adapter"]?["present"] == true)
            #expect(reply["unit"] == "mmol")
            #expect(reply["revision"]?.intValue == Int64(f.models.viewModel.revision))
            #expect(reply["revisions"]?["readingCount"]?.intValue == Int64(f.models.viewModel.revision(of: .readingCount)))
        }
    }

    @Test func listReadingsFiltersOrdersAndLimits() async throws {
        try await withAPIServer { f in
            let client = try f.client()
            let all = try await client.call(api + "ListReadings")
            expectValidReply("ListReadings", all)
            let readings = try #require(all["readings"]?.arrayValue)
            #expect(readings.count == 7)
            #expect(all["truncated"] == false)
            let times = readings.compactMap { $0["time"]?["epochMillis"]?.intValue }
            #expect(times == times.sorted())
            for key in [
                "sequenceNumber", "baseTime", "timeOffsetMinutes", "concentration", "mgdL", "mmolL", "type",
                "sampleLocation", "sensorStatus", "meter", "time", "context", "flags",
            ] {
                #expect(readings[0].objectValue?[key] != nil, "missing \(key)")
            }
            #expect(readings[0]["time"]?["iso"] == "2024-03-31T06:00:00Z")
            // The simulated meters have no readable clock, so every time is flagged clockUnverified.
            #expect(readings[2]["flags"] == ["controlSolution", "clockUnverified"])
            #expect(readings[3]["flags"] == ["hi", "clockUnverified"])
            #expect(readings[0]["context"] == .null)

            let desc = try await client.call(api + "ListReadings", ["order": "desc", "limit": 2])
            #expect(desc["readings"]?.arrayValue?.map { $0["time"]?["epochMillis"]?.intValue } == [times[6], times[5]])
            #expect(desc["truncated"] == true)

            let window = try await client.call(
                api + "ListReadings", ["since": "2024-03-31T08:00:00+01:00", "until": "2024-03-31T09:00:00Z"])
            // 07:00Z inclusive .. 09:00Z exclusive: the 2nd and 3rd readings.
            #expect(window["readings"]?.arrayValue?.map { $0["sequenceNumber"]?.intValue } == [2, 3])

            let byDate = try await client.call(api + "ListReadings", ["since": "2024-04-01"])
            #expect(byDate["readings"]?.arrayValue?.count == 0)
            let byMeter = try await client.call(api + "ListReadings", ["meter": "c0-26-da-0a-0b-0c"])
            #expect(byMeter["readings"]?.arrayValue?.count == 2)
        }
    }

    @Test func listReadingsRejectsBadValuesWithInterfaceErrors() async throws {
        try await withAPIServer { f in
            let client = try f.client()
            for (parameters, parameter) in [
                (["since": "yesterday"] as JSONObject, "since"), (["until": "2024-03-31T10:00:00"], "until"),
                (["limit": 0], "limit"), (["limit": 100_001], "limit"),
                (["since": "2024-04-02", "until": "2024-04-01"], "until"),
            ] {
                let error = await remoteError { _ = try await client.call(api + "ListReadings", parameters) }
                #expect(error?.name == api + "InvalidParameter")
                #expect(error?.parameters["parameter"]?.stringValue == parameter)
                if let error { expectValidError(error) }
            }
            // Wrong types and enum values are caught by the server's validation.
            let error = await remoteError { _ = try await client.call(api + "ListReadings", ["order": "sideways"]) }
            #expect(error == .invalidParameter("order"))
        }
    }

    @Test func listReadingsStreamsPartsWithMore() async throws {
        var limits = HealthDataSyncService.Limits()
        limits.readingsPerReply = 3
        try await withAPIServer(limits: limits) { f in
            let client = try f.client()
            let replies = try await collect(client.callMore(api + "ListReadings"))
            #expect(replies.map { $0["readings"]?.arrayValue?.count } == [3, 3, 1])
            #expect(replies.last?["truncated"] == false)
            for reply in replies { expectValidReply("ListReadings", reply) }
            // Without more, more than one reply's worth is refused rather than sent as one huge message.
            let error = await remoteError { _ = try await client.call(api + "ListReadings") }
            #expect(error?.name == api + "InvalidParameter")
        }
    }

    /// Issue 39: with more, ListReadings pages through the store by keyset (instant, id): no cap,
    /// all sends everything, limit has no maximum, and the pages join up to the one-call listing.
    @Test func listReadingsPagesEverythingByKeyset() async throws {
        var limits = HealthDataSyncService.Limits()
        limits.readingsPerStreamedReply = 2
        limits.leanReadingsPerStreamedReply = 2
        try await withAPIServer(limits: limits) { f in
            let client = try f.client()
            func ids(_ replies: [JSONObject]) -> [Int64] {
                replies.flatMap { ($0["readings"]?.arrayValue ?? []).compactMap { $0["id"]?.intValue } }
            }
            let whole = try await client.call(api + "ListReadings")
            let expected = (whole["readings"]?.arrayValue ?? []).compactMap { $0["id"]?.intValue }
            #expect(expected.count == 7)
            let all = try await collect(client.callMore(api + "ListReadings", ["all": true]))
            #expect(all.map { $0["readings"]?.arrayValue?.count } == [2, 2, 2, 1])
            #expect(ids(all) == expected)
            #expect(all.last?["truncated"] == false && all.dropLast().allSatisfy { $0["truncated"] == nil || $0["truncated"] == .null })
            for reply in all { expectValidReply("ListReadings", reply) }
            let desc = try await collect(client.callMore(api + "ListReadings", ["all": true, "order": "desc"]))
            #expect(ids(desc) == expected.reversed())
            // A limit cuts after that many (truncated), one exactly at the end does not.
            let five = try await collect(client.callMore(api + "ListReadings", ["limit": 5]))
            #expect(five.map { $0["readings"]?.arrayValue?.count } == [2, 2, 1])
            #expect(ids(five) == Array(expected.prefix(5)) && five.last?["truncated"] == true)
            let four = try await collect(client.callMore(api + "ListReadings", ["limit": 4]))
            #expect(ids(four) == Array(expected.prefix(4)) && four.last?["truncated"] == true)
            let seven = try await collect(client.callMore(api + "ListReadings", ["limit": 7]))
            #expect(ids(seven) == expected && seven.last?["truncated"] == false)
            // No maximum with more; all needs more and goes without limit.
            let big = try await collect(client.callMore(api + "ListReadings", ["limit": 5_000_000]))
            #expect(ids(big) == expected)
            let none = try await collect(client.callMore(api + "ListReadings", ["all": true, "since": "2030-01-01"]))
            #expect(none.count == 1 && none[0]["readings"] == [] && none[0]["truncated"] == false)
            // compact: the compact form's keys with the full objects' values, paged the same way.
            let compact = try await collect(client.callMore(api + "ListReadings", ["all": true, "compact": true]))
            #expect(compact.map { $0["readings"]?.arrayValue?.count } == [2, 2, 2, 1])
            let full = try Wire.Reading.list((whole["readings"]?.arrayValue ?? []).compactMap(\.objectValue))
            let compactReadings = compact.flatMap { $0["readings"]?.arrayValue ?? [] }
            #expect(compactReadings.map { $0.serialized() } == full.map { Wire.CompactReading($0).json.serialized() })
            #expect(compact.last?["truncated"] == false && compact.last?["unit"] == whole["unit"])
            for reply in compact { expectValidReply("ListReadings", reply) }
            let single = try await client.call(api + "ListReadings", ["compact": true, "limit": 3])
            #expect(single["readings"]?.arrayValue == Array(compactReadings.prefix(3)) && single["truncated"] == true)
            let withoutMore = await remoteError { _ = try await client.call(api + "ListReadings", ["all": true]) }
            #expect(withoutMore?.name == api + "InvalidParameter" && withoutMore?.parameters["parameter"] == "all")
            let both = await remoteError { _ = try await collect(client.callMore(api + "ListReadings", ["all": true, "limit": 3])) }
            #expect(both?.name == api + "InvalidParameter" && both?.parameters["parameter"] == "limit")
        }
    }

    @Test func listMetersJoinsLiveModelsAndTheStore() async throws {
        try await withAPIServer { f in
            let stored = MeterIdentity(id: MeterID("C0:26:DA:FF:FF:01"), name: "Old meter")
            let reading = storedReading(meter: stored.id, sequence: 1, mgdL: 100, at: seedStart)
            _ = try await f.store.commit(
                SyncBatch(
                    meter: stored, features: nil, readings: [reading], newHighWater: 1,
                    session: SyncSessionRecord(meter: stored.id, started: seedStart, result: .success)))
            let reply = try await f.call(api + "ListMeters")
            expectValidReply("ListMeters", reply)
            let meters = try #require(reply["meters"]?.arrayValue)
            #expect(meters.map { $0["id"]?.stringValue } == [meterA.id.rawValue, meterB.id.rawValue, stored.id.rawValue])
            #expect(meters[0]["live"]?["sync"] == "done")  // its first sync, when it appeared, ended
            #expect(meters[0]["stored"]?["readingCount"] == 5)
            #expect(meters[0]["identity"]?["displayName"] == "Roche Accu-Chek Guide")
            #expect(meters[2]["live"] == .null)
            #expect(meters[2]["stored"]?["highWater"] == 1)
        }
    }

    @Test func syncWithoutMoreRepliesWhenDone() async throws {
        try await withAPIServer { f in
            let client = try f.client()
            let new = (6...8).map {
                meterRecord(sequence: UInt16($0), mgdL: 100 + $0, at: Instant(epochMillis: seedStart.epochMillis + Int64($0) * hour))
            }
            f.queue(new, for: meterA.id)
            // Forced: the meter synced by itself moments ago, when it appeared.
            let reply = try await client.call(api + "Sync", ["meter": .string(meterA.id.rawValue), "force": true])
            expectValidReply("Sync", reply)
            let sessions = try #require(reply["sessions"]?.arrayValue)
            #expect(sessions.count == 1)
            #expect(sessions[0]["stored"] == 3)
            #expect(sessions[0]["result"] == "success")
            #expect(f.models.viewModel.state.readingCount == 10)
            #expect(f.models.model(for: meterA.id)?.state.lastSync?.stored == 3)
            // Within the cooldown an unforced sync is skipped; force runs it.
            let skipped = try await client.call(api + "Sync", ["meter": .string(meterA.id.rawValue)])
            #expect(skipped["sessions"] == [])
            let forced = try await client.call(api + "Sync", ["meter": .string(meterA.id.rawValue), "force": true])
            #expect(forced["sessions"]?.arrayValue?.first?["result"] == "noNewRecords")
            // All meters: both synced by themselves when they appeared (B) or just now (A), so both are
            // in their cooldown; force syncs both.
            let everyone = try await client.call(api + "Sync")
            #expect(everyone["sessions"] == [])
            let everyoneForced = try await client.call(api + "Sync", ["force": true])
            #expect(everyoneForced["sessions"]?.arrayValue?.map { $0["meter"]?.stringValue } == [meterA.id.rawValue, meterB.id.rawValue])
        }
    }

    @Test func syncErrorsMapToInterfaceErrors() async throws {
        try await withAPIServer(stepDelay: .milliseconds(30)) { f in
            let client = try f.client()
            let missing = await remoteError { _ = try await client.call(api + "Sync", ["meter": "C0:26:DA:00:00:99"]) }
            #expect(missing?.name == api + "MeterNotFound")
            #expect(missing?.parameters["meter"] == "C0:26:DA:00:00:99")
            // A meter that keeps refusing the download: the sync ends failed, with the meter's error.
            f.failNextSync(of: meterA.id)
            let failed = try await client.call(api + "Sync", ["meter": .string(meterA.id.rawValue), "force": true])
            expectValidReply("Sync", failed)
            let failedSession = try #require(failed["sessions"]?.arrayValue?.first)
            #expect(failedSession["result"] == "failed")
            #expect(failedSession["error"]?.stringValue?.contains("indications") == true, "\(failedSession)")
            #expect(f.models.model(for: meterA.id)?.state.lastError?.code == "cccdImproperlyConfigured")
            // Two syncs of one meter at once: the second is refused.
            let first = Task { try await f.call(api + "Sync", ["meter": .string(meterB.id.rawValue), "force": true]) }
            #expect(await eventually { f.isSyncing(meterB.id) })
            let busy = await remoteError { _ = try await client.call(api + "Sync", ["meter": .string(meterB.id.rawValue)]) }
            #expect(busy?.name == api + "SyncInProgress")
            _ = try await first.value
            f.transport.setAdapterPresent(false)
            #expect(await eventually { !f.models.viewModel.state.adapter.present })
            let adapter = await remoteError { _ = try await client.call(api + "Sync", ["force": true]) }
            #expect(adapter?.name == api + "AdapterUnavailable")
            for error in [missing, busy, adapter].compactMap({ $0 }) { expectValidError(error) }
        }
    }

    @Test func syncWithMoreStreamsProgressThenSessions() async throws {
        try await withAPIServer(stepDelay: .milliseconds(15)) { f in
            let new = (6...9).map {
                meterRecord(sequence: UInt16($0), mgdL: 100, at: Instant(epochMillis: seedStart.epochMillis + Int64($0) * hour))
            }
            f.queue(new, for: meterB.id)
            let client = try f.client()
            defer { client.close() }
            let replies = try await collect(client.callMore(api + "Sync", ["meter": .string(meterB.id.rawValue), "force": true]))
            for reply in replies { expectValidReply("Sync", reply) }
            let progress = replies.dropLast()
            #expect(progress.count >= 3)
            let phases = progress.compactMap { $0["phase"]?.stringValue }
            #expect(phases.contains("receiving"))
            // Coalescing may fold phases together, never reorder them.
            let order = [
                "connecting", "readingDeviceInfo", "readingClock", "subscribing", "counting", "receiving", "committing",
                "disconnecting", "done",
            ]
            let ranks = phases.compactMap { order.firstIndex(of: $0) }
            #expect(ranks.count == phases.count && ranks == ranks.sorted(), "\(phases)")
            #expect(progress.allSatisfy { $0["meter"]?.stringValue == meterB.id.rawValue })
            let received = progress.compactMap { $0["received"]?.intValue }
            #expect(received == received.sorted())
            // Under load the last progress step may be folded into the final reply.
            #expect((received.last ?? 0) <= 4 && (received.last ?? 0) >= 1)
            #expect(replies.last?["sessions"]?.arrayValue?.first?["stored"] == 4)
        }
    }

    @Test func forgetRemovesTheMeterButKeepsItsReadings() async throws {
        try await withAPIServer { f in
            let client = try f.client()
            let watcher = try f.client()
            defer { watcher.close() }
            let watch = watcher.callMore(api + "Watch", ["meter": .string(meterA.id.rawValue)])
            var iterator = watch.makeAsyncIterator()
            #expect(try await iterator.next()?["snapshot"] == true)
            #expect(try await client.call(api + "Forget", ["meter": .string(meterA.id.rawValue)]).count == 0)
            // The meter's watchers end with MeterNotFound.
            let ended = await remoteError { _ = try await iterator.next() }
            #expect(ended?.name == api + "MeterNotFound")
            #expect(f.models.model(for: meterA.id) == nil)
            let meters = try await client.call(api + "ListMeters")["meters"]?.arrayValue
            #expect(meters?.map { $0["id"]?.stringValue } == [meterB.id.rawValue])
            let readings = try await client.call(api + "ListReadings", ["meter": .string(meterA.id.rawValue)])
            #expect(readings["readings"]?.arrayValue?.count == 5)
            let again = await remoteError { _ = try await client.call(api + "Forget", ["meter": .string(meterA.id.rawValue)]) }
            #expect(again?.name == api + "MeterNotFound")
        }
    }

    @Test func pairStreamsThePasskeyRequestAndSubmitPasskeyAnswersIt() async throws {
        try await withAPIServer { f in
            f.removeBond(of: meterA.id)
            let meter = JSONValue.string(meterA.id.rawValue)
            let pairing = try f.client()
            defer { pairing.close() }
            let guardTask = closing(pairing)
            defer { guardTask.cancel() }
            let stream = pairing.callMore(api + "Pair", ["meter": meter])
            var states: [String] = []
            for try await reply in stream {
                expectValidReply("Pair", reply)
                let state = reply["state"]?.stringValue ?? ""
                states.append(state)
                if state == "waitingForPasskey" {
                    // A passkey must be 6 digits.
                    let bad = await remoteError {
                        _ = try await f.call(api + "SubmitPasskey", ["meter": meter, "passkey": "12345"])
                    }
                    #expect(bad?.name == api + "InvalidParameter")
                    _ = try await f.call(api + "SubmitPasskey", ["meter": meter, "passkey": "123456"])
                }
            }
            #expect(states.contains("waitingForPasskey"))
            #expect(states.last == "paired")
            #expect(f.models.model(for: meterA.id)?.state.pairing == .paired)
        }
    }

    @Test func aWrongPasskeyEndsPairingWithPairingFailed() async throws {
        try await withAPIServer { f in
            f.removeBond(of: meterB.id)
            let meter = JSONValue.string(meterB.id.rawValue)
            let notWaiting = await remoteError {
                _ = try await f.call(api + "SubmitPasskey", ["meter": meter, "passkey": "000000"])
            }
            #expect(notWaiting?.name == api + "PairingFailed")
            let pairing = try f.client()
            defer { pairing.close() }
            let guardTask = closing(pairing)
            defer { guardTask.cancel() }
            let stream = pairing.callMore(api + "Pair", ["meter": meter])
            let error = await remoteError {
                for try await reply in stream where reply["state"] == "waitingForPasskey" {
                    _ = try await f.call(api + "SubmitPasskey", ["meter": meter, "passkey": "999999"])
                }
            }
            #expect(error?.name == api + "PairingFailed")
            #expect(error?.parameters["meter"] == meter)
            if let error { expectValidError(error) }
            #expect(f.models.model(for: meterB.id)?.state.pairing == .failed)
            // Pair needs more.
            let noMore = await remoteError { _ = try await f.call(api + "Pair", ["meter": meter]) }
            #expect(noMore == .expectedMore)
        }
    }

    @Test func listSyncSessionsNewestFirst() async throws {
        try await withAPIServer { f in
            let client = try f.client()
            _ = try await client.call(api + "Sync", ["meter": .string(meterB.id.rawValue), "force": true])
            let reply = try await client.call(api + "ListSyncSessions")
            expectValidReply("ListSyncSessions", reply)
            let sessions = try #require(reply["sessions"]?.arrayValue)
            #expect(sessions.count == 3)
            #expect(sessions.first?["meter"] == .string(meterB.id.rawValue))
            #expect(sessions.first?["result"] == "noNewRecords")
            let one = try await client.call(api + "ListSyncSessions", ["meter": .string(meterA.id.rawValue), "limit": 1])
            #expect(one["sessions"]?.arrayValue?.map { $0["meter"]?.stringValue } == [meterA.id.rawValue])
            let error = await remoteError { _ = try await client.call(api + "ListSyncSessions", ["limit": -1]) }
            #expect(error?.parameters["parameter"] == "limit")
        }
    }
}
