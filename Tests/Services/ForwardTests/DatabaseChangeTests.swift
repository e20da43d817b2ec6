import Foundation
import Glibc
@testable import GlucoseStore
import HealthDataSync
import JSON
import Testing
import TestSupport
import Varlink

/// sugard's database changing under its followers and under sugard itself, with the built programs:
/// sugard on simulated meters, sugard-forward, a real mosquitto and mosquitto_sub, sugarctl.
@Suite(.serialized) struct DatabaseChangeTests {
    func withRig(meters: Int = 2, backlog: Int = 20, seconds: Int = 6, _ body: (ForwardRig) async throws -> Void) async throws {
        let rig = try ForwardRig(meters: meters, backlog: backlog, seconds: seconds)
        var failed = true
        defer { rig.cleanUp(keep: failed || environmentValue("FORWARD_TESTS_KEEP") != nil) }
        try await body(rig)
        failed = false
    }

    var database: (ForwardRig) -> String { { $0.dir + "/state/sugard.sqlite" } }

    func storage(_ rig: ForwardRig) async throws -> JSONValue {
        let client = try VarlinkClient(socketPath: rig.socket)
        defer { client.close() }
        let reply = try await client.call("io.sugard.HealthDataSync.GetStatus")
        return reply["state"]?["daemon"]?["storage"] ?? .null
    }

    func sugarctl(_ rig: ForwardRig, _ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        let result = try await runToEnd(
            try builtProduct("sugarctl"), arguments + ["--socket", rig.socket, "--timeout", "60"],
            environment: ["SUGARD_FORWARD_SOCKET": rig.statusSocket, "TZ": "UTC"], dir: rig.dir, seconds: 120)
        return (result.status, result.stdout, result.stderr)
    }

    /// Rewrites sugard.conf for a second run: `meters` simulated meters (from the same start, so
    /// their records are the first run's) taking readings until `seconds` from now.
    func reconfigure(_ rig: ForwardRig, meters: Int, seconds: Int) throws -> Int64 {
        let stop = Int64(Date().timeIntervalSince1970) + Int64(seconds)
        try """
        state_dir = \(rig.dir)/state
        socket = \(rig.socket)
        simulate_meters = \(meters)
        simulate_start = \(rig.start)
        simulate_stop = \(stop)
        demo_interval = 1
        cooldown_seconds = 1
        timezone = UTC

        """.write(toFile: rig.dir + "/sugard.conf", atomically: true, encoding: .utf8)
        return stop
    }

    /// Waits until `stop` passed and the store stopped growing; its ids in commit order.
    func settle(_ rig: ForwardRig, after stop: Int64) async throws -> [String] {
        let wait = Double(stop - Int64(Date().timeIntervalSince1970)) + 1
        if wait > 0 { try await Task.sleep(for: .milliseconds(Int(wait * 1000))) }
        var ids = try await rig.storedIDs()
        let settled = try await eventually(within: 30) {
            try await Task.sleep(for: .milliseconds(1500))
            let again = try await rig.storedIDs()
            defer { ids = again }
            return again.count == ids.count
        }
        try #require(settled && !ids.isEmpty, "sugard's store did not settle (\(ids.count) readings)")
        return ids
    }

    /// The issue's case: the database moved aside and sugard restarted on a fresh one holding fewer
    /// readings than the forwarder's cursor. Every reading of the new database is delivered (none
    /// below the old cursor skipped), the forwarder logs both ids, and its status shows the
    /// start-over.
    @Test func aRecreatedDatabaseIsDeliveredFromItsBeginning() async throws {
        try await withRig(seconds: 4) { rig in
            try await rig.startAll()
            let first = try await rig.waitForAllStored()
            await rig.expectDelivered(first)
            let oldID = try #require(try await self.storage(rig)["databaseId"]?.stringValue)

            #expect(await rig.sugard?.terminate(graceSeconds: 10) == 0)
            unlink(rig.socket)
            for suffix in ["", "-wal", "-shm"] { _ = rename(self.database(rig) + suffix, self.database(rig) + ".corrupt" + suffix) }
            // One meter now: the new database holds about half as many readings as the cursor counts.
            let stop = try self.reconfigure(rig, meters: 1, seconds: 6)
            try await rig.startSugard()
            let newID = try #require(try await self.storage(rig)["databaseId"]?.stringValue)
            #expect(newID != oldID)
            let second = try await self.settle(rig, after: stop)
            #expect(second.count < first.count, "the new database must hold fewer readings than the old cursor for this test")
            let fresh = second.filter { !first.contains($0) }
            #expect(!fresh.isEmpty, "readings taken after the restart")
            await rig.expectDelivered(second)

            let log = readFile(rig.forwarderLog)
            #expect(log.contains("sugard's database changed from \(oldID) to \(newID)"), "\(log.suffix(2000))")
            let saved = try JSONValue(parsing: readFile(rig.forwardState + "/cursor.json"))
            #expect(saved["databaseId"]?.stringValue == newID)
            #expect(saved["databaseReset"]?["previousDatabaseId"]?.stringValue == oldID)
            let status = try await self.sugarctl(rig, ["status"])
            #expect(status.stdout.contains("started over"), "\(status.stdout)")
            #expect(status.stdout.contains("\(oldID) to \(newID)"))
            #expect(status.stdout.contains("Database") && status.stdout.contains(newID))
            let json = try JSONValue(parsing: try await self.sugarctl(rig, ["status", "--json"]).stdout)
            #expect(json["state"]?["daemon"]?["storage"]?["databaseId"]?.stringValue == newID)
            let sink = json["sinks"]?.arrayValue?.first
            #expect(sink?["databaseId"]?.stringValue == newID)
            #expect(sink?["databaseReset"]?["databaseId"]?.stringValue == newID)
        }
    }

    /// The same for a Nightscout sink (its own cursor file and feed): every entry of the new
    /// database reaches the site, the sink's cursor restarts, its status shows the start-over.
    @Test func aNightscoutSinkStartsOverOnARecreatedDatabase() async throws {
        try await withRig(seconds: 3) { rig in
            let site = try await NightscoutSite(rig, name: "home")
            try rig.writeForwardConfig(site.section("home"), mqtt: false)
            try await rig.startSugard()
            try rig.startForwarder()
            _ = try await rig.waitForAllStored()
            let first = NightscoutForwardTests.keys(NightscoutForwardTests.entryReadings(try await rig.storedReadings()))
            let caughtUp = await eventually(within: 20) { first.isSubset(of: await site.posted) }
            #expect(caughtUp)
            let oldID = try #require(try await self.storage(rig)["databaseId"]?.stringValue)

            #expect(await rig.sugard?.terminate(graceSeconds: 10) == 0)
            unlink(rig.socket)
            for suffix in ["", "-wal", "-shm"] { _ = rename(self.database(rig) + suffix, self.database(rig) + ".old" + suffix) }
            let stop = try self.reconfigure(rig, meters: 1, seconds: 5)
            try await rig.startSugard()
            let newID = try #require(try await self.storage(rig)["databaseId"]?.stringValue)
            _ = try await self.settle(rig, after: stop)
            let second = NightscoutForwardTests.keys(NightscoutForwardTests.entryReadings(try await rig.storedReadings()))
            #expect(!second.subtracting(first).isEmpty, "readings taken after the restart")
            var missing = Set<String>()
            let delivered = await eventually(within: 20) {
                missing = second.subtracting(await site.posted)
                return missing.isEmpty
            }
            #expect(delivered, "\(missing.count) entries of the new database never reached the site; log:\n\(readFile(rig.forwarderLog).suffix(2000))")
            #expect(readFile(rig.forwarderLog).contains("Nightscout sink home: sugard's database changed from \(oldID) to \(newID)"))
            #expect(readFile(rig.forwardState + "/nightscout-home.database").contains(newID))
            let client = try VarlinkClient(socketPath: rig.statusSocket)
            defer { client.close() }
            let sink = try await client.call("io.sugard.Forward.GetStatus")["sinks"]?.arrayValue?.first
            #expect(sink?["databaseId"]?.stringValue == newID)
            #expect(sink?["databaseReset"]?["previousDatabaseId"]?.stringValue == oldID)
        }
    }

    /// A restore while sugard-forward follows: its stream moves to the restored database (a new
    /// identity) without a reconnect, and it delivers that database from the beginning again.
    @Test func aRestoreUnderARunningForwarderStartsItOver() async throws {
        try await withRig(seconds: 3) { rig in
            try await rig.startAll()
            let stored = try await rig.waitForAllStored()
            await rig.expectDelivered(stored)
            let oldID = try #require(try await self.storage(rig)["databaseId"]?.stringValue)
            let backup = rig.dir + "/backup.sqlite"
            #expect(try await self.sugarctl(rig, ["backup", backup]).status == 0)
            let before = rig.receivedReadings().count
            let restored = try await self.sugarctl(rig, ["restore", backup])
            #expect(restored.status == 0, "\(restored.stderr)")
            let newID = try #require(try await self.storage(rig)["databaseId"]?.stringValue)
            #expect(newID != oldID)
            // Every reading of the restored database arrives once more.
            let again = await eventually(within: 20) { rig.receivedReadings().count >= before + stored.count }
            #expect(again, "\(rig.receivedReadings().count - before) of \(stored.count) re-sent; log:\n\(readFile(rig.forwarderLog).suffix(2000))")
            let log = readFile(rig.forwarderLog)
            #expect(log.contains("sugard's database changed from \(oldID) to \(newID)"))
            #expect(!log.contains("sugard's readings are not reachable"), "the stream moved without a reconnect")
            await rig.expectDelivered(try await rig.storedIDs())
        }
    }

    /// A cursor file from before identities (no databaseId) adopts the first id without starting over.
    @Test func aCursorFileWithoutAnIdentityAdoptsTheFirstOne() async throws {
        try await withRig(seconds: 3) { rig in
            try await rig.startBroker()
            try await rig.startSubscriber()
            try await rig.startSugard()
            let stored = try await rig.waitForAllStored()
            mkdir(rig.forwardState, 0o700)
            let half = Int64(stored.count / 2)
            try #"{"cursor": \#(half), "newest": {}}"#.write(toFile: rig.forwardState + "/cursor.json", atomically: true, encoding: .utf8)
            try rig.startForwarder()
            let id = try #require(try await self.storage(rig)["databaseId"]?.stringValue)
            let adopted = await eventually(within: 20) {
                (try? JSONValue(parsing: readFile(rig.forwardState + "/cursor.json")))?["databaseId"]?.stringValue == id
            }
            #expect(adopted, "\(readFile(rig.forwardState + "/cursor.json"))")
            // Readings wait a moment after a meter's first Home Assistant config; then only those after the cursor come.
            _ = await eventually(within: 20) {
                Set(rig.receivedReadings().compactMap { $0.payload["id"]?.stringValue }).count >= stored.count - Int(half)
            }
            try await Task.sleep(for: .milliseconds(1000))
            let got = Set(rig.receivedReadings().compactMap { $0.payload["id"]?.stringValue })
            #expect(got.count == stored.count - Int(half), "resumed after the cursor, not from the start")
            #expect(!readFile(rig.forwarderLog).contains("changed from"))
        }
    }

    /// Deleted under the running daemon: status says so within 10 s, the file is recreated under a
    /// new identity, and the meters' next syncs put every record into it (nothing lost).
    @Test func aDatabaseDeletedUnderTheDaemonIsNoticedAndRecreated() async throws {
        try await withRig(seconds: 14) { rig in
            try await rig.startSugard()
            let filled = await eventually(within: 20) { ((try? await rig.storedIDs()) ?? []).count >= 40 }
            try #require(filled)
            let before = try await rig.storedIDs()
            let oldID = try #require(try await self.storage(rig)["databaseId"]?.stringValue)
            #expect(unlink(self.database(rig)) == 0)
            let deletedAt = ContinuousClock.now
            var seen: JSONValue = .null
            let noticed = try await eventually(within: 10) {
                seen = try await self.storage(rig)
                return seen["error"]?["code"]?.stringValue == "replaced"
            }
            #expect(noticed, "status after 10 s: \(seen)")
            #expect(ContinuousClock.now - deletedAt < .seconds(10))
            #expect(seen["status"]?.stringValue == "degraded")
            let newID = seen["databaseId"]?.stringValue
            #expect(newID != nil && newID != oldID)
            let status = try await self.sugarctl(rig, ["status"])
            #expect(status.stdout.contains("deleted, renamed or replaced"), "\(status.stdout)")
            let doctor = try await self.sugarctl(rig, ["doctor"])
            #expect(doctor.stdout.contains(newID ?? "?"), "\(doctor.stdout)")
            let logged = await eventually(within: 5) { readFile(rig.dir + "/sugard.log").contains("was deleted, renamed or replaced") }
            #expect(logged, "\(readFile(rig.dir + "/sugard.log"))")

            let after = try await self.settle(rig, after: rig.stop)
            let missing = before.filter { !after.contains($0) }
            #expect(missing.isEmpty, "\(missing.count) readings of the deleted file are not in the new one")
            #expect(after.count > before.count)
            #expect(try await self.storage(rig)["error"]?["code"]?.stringValue == "replaced", "shown for a minute")
            // What the daemon serves is the file at the path.
            #expect(await rig.sugard?.terminate(graceSeconds: 10) == 0)
            let file = try SQLiteReadingStore(path: self.database(rig))
            #expect(try await file.readingCount(meter: nil) == after.count)
            #expect(await file.identity() == newID)
            await file.close()
        }
    }

    /// `sugarctl backup` while the meters sync: each copy opens, passes integrity_check, keeps the
    /// identity, is 0600 and holds every reading committed before it started. `sugarctl restore`
    /// keeps the current file, gives a new identity and serves the restored readings; bad files
    /// get exit 65 and change nothing.
    @Test func backupDuringSyncsAndRestore() async throws {
        // The meters take a reading a second for 90 s: still running when the restore is done, also
        // under a sanitizer (the test takes 15 s plain, 40 s under ThreadSanitizer).
        try await withRig(seconds: 90) { rig in
            try await rig.startSugard()
            let filled = await eventually(within: 20) { ((try? await rig.storedIDs()) ?? []).count >= 40 }
            try #require(filled)
            let id = try #require(try await self.storage(rig)["databaseId"]?.stringValue)
            var last: (path: String, ids: [String])?
            for n in 0..<4 {
                let committed = try await rig.storedIDs()
                let path = rig.dir + "/backup-\(n).sqlite"
                let result = try await self.sugarctl(rig, ["backup", path])
                #expect(result.status == 0, "\(result.stderr)")
                #expect(result.stdout.contains("Backed up sugard's database to \(path)"))
                #expect(result.stdout.contains(id))
                var info = stat()
                #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
                let copy = try SQLiteReadingStore(path: path)
                #expect(try await copy.integrityCheck() == ["ok"])
                #expect(await copy.identity() == id)
                let ids = try await copy.readings(ReadingQuery()).map { "\($0.reading.meter.rawValue)/\($0.epoch)/\($0.reading.sequenceNumber)" }
                let absent = committed.filter { !ids.contains($0) }
                #expect(absent.isEmpty, "backup \(n) lacks \(absent.count) committed readings")
                await copy.close()
                last = (path, ids)
                try await Task.sleep(for: .milliseconds(700))
            }
            let again = try await self.sugarctl(rig, ["backup", last!.path])
            #expect(again.status == 1 && again.stderr.contains("exists"))

            // Bad files: exit 65, the database and its identity unchanged, nothing kept aside.
            let text = rig.dir + "/notes.txt"
            try String(repeating: "not a database\n", count: 200).write(toFile: text, atomically: true, encoding: .utf8)
            let foreign = rig.dir + "/foreign.sqlite"
            let newer = rig.dir + "/newer.sqlite"
            do {
                let other = try SQLiteReadingStore(path: foreign)
                try await other.executeForTesting("DROP TABLE reading; DROP TABLE sequence_reset;")
                await other.close()
                let db = try SQLiteReadingStore(path: newer)
                try await db.executeForTesting("PRAGMA user_version = 99")
                await db.close()
            }
            let damaged = rig.dir + "/damaged.sqlite"
            var bytes = try Data(contentsOf: URL(fileURLWithPath: last!.path))
            bytes.replaceSubrange(4096..<8192, with: Data(repeating: 0x5a, count: 4096))
            try bytes.write(to: URL(fileURLWithPath: damaged))
            for bad in [text, foreign, newer, damaged] {
                let result = try await self.sugarctl(rig, ["restore", bad])
                #expect(result.status == 65, "\(bad): \(result.status) \(result.stderr)")
                #expect(result.stderr.contains("Nothing was changed"), "\(result.stderr)")
                #expect(try await self.storage(rig)["databaseId"]?.stringValue == id)
            }
            #expect(try self.keptFiles(rig).isEmpty)
            let missingFile = try await self.sugarctl(rig, ["restore", rig.dir + "/absent.sqlite"])
            #expect(missingFile.status == 66)

            // The restore.
            let result = try await self.sugarctl(rig, ["restore", last!.path])
            #expect(result.status == 0, "\(result.stderr)")
            let newID = try #require(try await self.storage(rig)["databaseId"]?.stringValue)
            #expect(newID != id)
            #expect(result.stdout.contains("new database id \(newID) (was \(id))"), "\(result.stdout)")
            let kept = try self.keptFiles(rig)
            #expect(kept.count == 1)
            #expect(result.stdout.contains(kept.first ?? "?"))
            let served = try await rig.storedIDs()
            #expect(last!.ids.allSatisfy(served.contains), "the restored readings are served")
            #expect(try await self.storage(rig)["status"]?.stringValue == "ok")
            // The kept file is the database as it was, whole by itself.
            let old = try SQLiteReadingStore(path: rig.dir + "/state/" + kept[0])
            #expect(await old.identity() == id)
            #expect(try await old.readingCount(meter: nil) >= last!.ids.count)
            await old.close()
            // The daemon goes on: syncs commit into the restored database.
            let grew = await eventually(within: 20) { ((try? await rig.storedIDs()) ?? []).count > served.count }
            #expect(grew || Int64(Date().timeIntervalSince1970) >= rig.stop, "the meters still take readings and nothing new was stored")
        }
    }

    func keptFiles(_ rig: ForwardRig) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: rig.dir + "/state").filter {
            $0.hasPrefix("sugard.sqlite.before-restore-") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm")
        }
    }
}
