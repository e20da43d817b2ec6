import Foundation
import Glibc
import HubStore
import Locking
import Testing
import TestSupport

@Suite("sugard-hub PostgreSQL store", .serialized)
struct HubStoreTests {
    /// Eight connections migrate a fresh database at once: the advisory lock makes one create the
    /// tables; every caller returns without error and the version is current. A re-sent reading
    /// changes nothing; a newer schema is refused untouched.
    @Test(.enabled(if: Tools.missing.isEmpty, "needs postgresql and setpriv (scripts/install-deps)"))
    func concurrentMigrationsAndIdempotentReadings() async throws {
        let rig = try HubRig()
        do {
            try await rig.startPostgres()
            let url = rig.databaseURL
            let failures = Lock<[String]>([])
            let done = Lock(0)
            for _ in 0..<8 {
                _ = startDetachedThread {
                    do {
                        let store = try HubStore(url: url)
                        _ = try HubSchema.migrate(store.db)
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                    done.withLock { $0 += 1 }
                }
            }
            let finished = await eventually(within: 60) { done.withLock { $0 } == 8 }
            #expect(finished)
            #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
            let store = try rig.store()
            #expect(try store.query("SELECT version FROM hub_schema").scalar == String(HubSchema.currentVersion))
            #expect(try store.query("SELECT count(*) FROM hub_schema").scalar == "1")

            let r = HubReading(
                gateway: "g", id: "m/1/1", meter: "m", person: "p", sequenceNumber: 1, time: nil, epochMillis: 1_700_000_000_000, mgdl: 99,
                mmolL: 5.5, kind: nil, controlSolution: false, payload: #"{"id":"m/1/1"}"#)
            #expect(try store.store(r) == true)
            #expect(try store.store(r) == false)
            var other = r
            other.gateway = "h"
            #expect(try store.store(other) == true, "the same reading id from another gateway is another reading")
            #expect(try store.query("SELECT count(*) FROM reading").scalar == "2")

            try store.db.execute("UPDATE hub_schema SET version = 99")
            #expect(throws: PostgresError.self) { try HubSchema.migrate(store.db) }
            #expect(try store.query("SELECT version FROM hub_schema").scalar == "99")
        } catch {
            await rig.cleanUp(keep: true)
            throw error
        }
        await rig.cleanUp(keep: false)
    }
}
