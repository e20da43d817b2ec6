import Foundation
import Glibc
import HealthDataSync
import JSON
import ReplayTransport
import SugarAPI
import SugarDaemon
import Testing
import Varlink

/// Authorisation per call from the peer's credentials, and the socket file's mode and group.
@Suite struct SecurityTests {
    static let socketGroup: UInt32 = 4242
    static let adminGroup: UInt32 = 4343
    static let policy = AccessPolicy(socketGroup: socketGroup, adminGroup: adminGroup, daemonUID: 990)

    static func peer(uid: UInt32, gid: UInt32 = 100, groups: [UInt32] = []) -> VarlinkPeer {
        VarlinkPeer(pid: 1, uid: uid, gid: gid, groups: groups)
    }

    @Test(arguments: [
        // (uid, gid, groups, may read, may administer)
        (0, 0, [], true, true),  // root
        (990, 990, [], true, true),  // the daemon's own user
        (1000, 100, [4242], true, false),  // socket group (supplementary)
        (1000, 4242, [], true, false),  // socket group (primary)
        (1000, 100, [4343], false, true),  // admin group only: mutating methods, not reads
        (1000, 100, [4242, 4343], true, true),
        (1000, 100, [], false, false),  // anyone else
        (65534, 65534, [27, 1000], false, false),
    ] as [(UInt32, UInt32, [UInt32], Bool, Bool)])
    func accessPolicyDecidesByUIDAndGroups(uid: UInt32, gid: UInt32, groups: [UInt32], read: Bool, admin: Bool) {
        let peer = Self.peer(uid: uid, gid: gid, groups: groups)
        #expect(Self.policy.allows(peer, .read) == read)
        #expect(Self.policy.allows(peer, .admin) == admin)
    }

    @Test func everyMethodHasALevelAndDenialNamesTheMethod() throws {
        #expect(HealthDataSyncService.readMethods.isDisjoint(with: HealthDataSyncService.adminMethods))
        for method in ["Sync", "Forget", "Pair", "SubmitPasskey", "AssignMeter"] {
            #expect(HealthDataSyncService.level(of: method) == .admin)
        }
        let models = ModelStore(
            viewModel: ViewModel(ViewState(daemon: DaemonInfo(version: "test", startedAt: seedStart, storage: StorageHealth(status: .ok, path: "none")))))
        let engine = SyncEngine(transport: ReplayTransport(), store: NoStore(), zone: .utc, now: { seedStart })
        let backend = DaemonBackend(models: models, store: NoStore(), engine: engine)
        let service = HealthDataSyncService(backend: backend, access: Self.policy)
        let reader = Self.peer(uid: 1000, groups: [Self.socketGroup])
        #expect(throws: Never.self) { try service.authorize("GetStatus", peer: reader) }
        do {
            try service.authorize("Forget", peer: reader)
            Issue.record("a reader may not forget meters")
        } catch {
            #expect(error.name == api + "PermissionDenied")
            #expect(error.parameters["method"] == "io.sugard.HealthDataSync.Forget")
            expectValidError(error)
        }
        // A nil group grants nothing.
        let open = AccessPolicy(socketGroup: nil, adminGroup: nil, daemonUID: 990)
        #expect(!open.allows(Self.peer(uid: 1000, gid: 0), .read))
    }

    @Test func socketFileIsGroupOwnedWithMode0660() async throws {
        try await withAPIServer(access: AccessPolicy(socketGroup: Self.socketGroup, adminGroup: nil, daemonUID: geteuid())) { f in
            var info = stat()
            #expect(stat(f.path, &info) == 0)
            #expect(info.st_mode & 0o777 == 0o660)
            #expect(info.st_gid == Self.socketGroup)
        }
    }

    /// A real peer with another uid: `setpriv` runs socat as uid 65534 with the socket group, so reads
    /// pass and a mutating call is refused with PermissionDenied.
    @Test(.enabled(if: getuid() == 0, "needs root to switch uid"))
    func anotherUserGetsPermissionDeniedOverTheSocket() async throws {
        try await withAPIServer(access: AccessPolicy(socketGroup: Self.socketGroup, adminGroup: Self.adminGroup, daemonUID: geteuid())) { f in
            chmod(f.directory, 0o755)
            func call(_ message: String, groups: String) async throws -> ProcessOutput {
                try await runProcess(
                    "/usr/bin/setpriv",
                    ["--reuid=65534", "--regid=65534", "--groups=\(groups)", "/usr/bin/socat", "-t", "2", "-", "UNIX-CONNECT:" + f.path],
                    stdin: message + "\u{0}")
            }
            let read = try await call(#"{"method":"io.sugard.HealthDataSync.ListMeters"}"#, groups: "\(Self.socketGroup)")
            #expect(read.stdout.contains(#""meters":["#), "\(read)")
            let sync = try await call(#"{"method":"io.sugard.HealthDataSync.Forget","parameters":{"meter":"C0:26:DA:01:02:03"}}"#, groups: "\(Self.socketGroup)")
            #expect(sync.stdout.contains(#""error":"io.sugard.HealthDataSync.PermissionDenied""#), "\(sync)")
            #expect(f.models.model(for: meterA.id) != nil)
            // In the admin group as well: allowed.
            let admin = try await call(
                #"{"method":"io.sugard.HealthDataSync.Forget","parameters":{"meter":"C0:26:DA:01:02:03"}}"#,
                groups: "\(Self.socketGroup),\(Self.adminGroup)")
            #expect(!admin.stdout.contains("error"), "\(admin)")
            #expect(f.models.model(for: meterA.id) == nil)
            // Outside the socket group the file mode keeps it out altogether.
            let outsider = try await call(#"{"method":"io.sugard.HealthDataSync.GetStatus"}"#, groups: "100")
            #expect(outsider.status != 0)
            #expect(outsider.stderr.contains("Permission denied"), "\(outsider)")
        }
    }
}

/// A store that holds nothing (for tests that never touch storage).
struct NoStore: ReadingStore {
    func meter(_ id: MeterID) async throws(StoreError) -> StoredMeter? { nil }
    func meters() async throws(StoreError) -> [StoredMeter] { [] }
    func noteMeterSeen(_ identity: MeterIdentity, at: Instant) async throws(StoreError) {}
    func commit(_ batch: SyncBatch) async throws(StoreError) -> CommitResult {
        throw StoreError(.readOnly, "This test store stores nothing.")
    }
    func readings(_ query: ReadingQuery) async throws(StoreError) -> [StoredReading] { [] }
    func readings(afterCursor cursor: Int64, limit: Int) async throws(StoreError) -> [StoredReading] { [] }
    func readingCount(meter: MeterID?) async throws(StoreError) -> Int { 0 }
    func sessions(meter: MeterID?, limit: Int) async throws(StoreError) -> [SyncSessionRecord] { [] }
    func forget(_ meter: MeterID) async throws(StoreError) {}
    func assign(_ meter: MeterID, person: String?) async throws(StoreError) {
        throw StoreError(.readOnly, "This test store stores nothing.")
    }
    func people() async throws(StoreError) -> [MeterID: String] { [:] }
    func health() async -> StorageHealth { StorageHealth(status: .ok, path: "none") }
}
