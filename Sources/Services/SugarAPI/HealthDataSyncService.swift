import GlucoseProfile
public import HealthDataSync
public import JSON
public import Varlink
import Locking
import SugarWire

/// The `io.sugard.HealthDataSync` interface: validates, authorises and translates calls to a
/// ``SugarBackend`` (the daemon), and streams the view model to watchers.
///
/// The server has already checked each call against the interface description (types, required
/// fields, `more` for Watch and Pair); this layer checks values (field names, times, limits,
/// passkeys), authorises the peer per call (``AccessPolicy``) and maps backend errors to the
/// interface's errors. It never logs reading values.
public struct HealthDataSyncService: VarlinkInterfaceHandler {
    /// Bounds that keep one client from costing the daemon more than a fixed amount.
    public struct Limits: Sendable, Hashable {
        /// A watcher's output cap (unread owner turns when coalesced, queued messages when
        /// immediate) before it is dropped with `SlowConsumer`.
        public var watchOutputCap = WatchPolicy.defaultOutputCap
        /// Unread reply bytes on a connection at which streaming methods stop queueing and wait
        /// (coalesced watchers coalesce meanwhile). ``makeServer(listen:version:configure:)`` sets it
        /// to the server's `maxPendingOutputBytes`, so a client that stops reading stays over the
        /// server's soft cap and is disconnected after its `slowClientTimeout` (`FollowReadings`
        /// waits at half of it: its followers pause on purpose and stay connected).
        public var backpressureBytes = 1 << 20
        /// The least time between two replies of a coalesced watcher while changes keep coming:
        /// what arrives meanwhile is folded into the next reply. At rest a change goes out at once.
        /// The coalesced watchers of the same fields of one model get their replies in the same
        /// rounds (``WatchFanout``).
        public var coalescedWatchInterval: Duration = .milliseconds(50)
        /// `ListReadings` limit when none is given, and the most it accepts.
        public var defaultReadingLimit = 1000
        /// The largest `limit` a `ListReadings` call without `more` accepts (`InvalidParameter` above it);
        /// with `more` the readings come in pages and `limit` has no maximum.
        public var maxReadingLimit = 100_000
        /// The most readings one reply carries: the whole answer without `more`, one part with it.
        public var readingsPerReply = 10_000
        /// The most readings one `ListReadings` reply carries with `more` (when below
        /// ``readingsPerReply``): a page the daemon reads from the database, encodes and sends
        /// before it reads the next, once the client has read what it got; its memory is one page.
        public var readingsPerStreamedReply = 250
        /// The same for the readings of `compact` and `csv` replies, a fraction of the full objects'
        /// size each (what exports and reports ask for): fewer, larger pages.
        public var leanReadingsPerStreamedReply = 1000
        /// `ListSyncSessions` limit when none is given, and the most it accepts.
        public var defaultSessionLimit = 50
        /// The most sessions `ListSyncSessions` accepts as its `limit`.
        public var maxSessionLimit = 10_000
        /// Readings `FollowReadings` reads from the database at once (it reads the next page only
        /// once the client has taken the previous one).
        public var followPageSize = 256

        /// The defaults above.
        public init() {}
    }

    /// `io.sugard.HealthDataSync`.
    public static let interfaceName = "io.sugard.HealthDataSync"
    /// The most readings one `FollowReadings` reply carries (its `batch` parameter).
    public static let maxFollowBatch = 256
    /// Methods open to the socket group.
    public static let readMethods: Set<String> = [
        "GetStatus", "Watch", "ListReadings", "ListMeters", "ListSyncSessions", "FollowReadings", "ListPeople", "GetPerson",
        "ListAssignments", "GetPeopleStatus",
    ]
    /// Methods that change something: root, the daemon's uid and the admin group only.
    public static let adminMethods: Set<String> = [
        "Sync", "Forget", "Pair", "SubmitPasskey", "AssignMeter", "ShareMeter", "AttributeReadings", "AddPerson", "EditPerson",
        "RemovePerson", "Backup", "RestoreUpload", "Restore", "CheckStorage",
    ]

    /// The parsed ``interfaceDescription``.
    public static let parsedDefinition: VarlinkInterfaceDefinition = {
        do {
            return try VarlinkInterfaceDefinition(description: interfaceDescription)
        } catch {
            fatalError("io.sugard.HealthDataSync description does not parse: \(error)")
        }
    }()

    /// The interface as parsed from ``interfaceDescription``.
    public var definition: VarlinkInterfaceDefinition { Self.parsedDefinition }
    /// The streaming methods: a call without `more` is refused by the server.
    public var methodsRequiringMore: Set<String> { ["Watch", "Pair", "FollowReadings", "Backup"] }

    /// The daemon's side: sync, pair, backups and the models and store the calls read.
    public let backend: any SugarBackend
    /// Who may call which method.
    public let access: AccessPolicy
    /// Rung after each change of readings' people (attribution, assignment changed in the past):
    /// the followers of this service read the feed entries it added.
    let attributionBell = FeedSignal()
    /// The display unit clients use unless told otherwise (`GetStatus`'s `unit`).
    public let unit: GlucoseUnit
    /// The bounds per client.
    public var limits: Limits
    /// Watch replies encoded once per change, shared by the immediate watchers that get the same message.
    public let watchReplies = SharedWatchReplies()
    /// The coalesced watchers, served in groups (one per model and field set).
    public let watchFanout = WatchFanout()
    /// The people `GetStatus` names, kept between the calls that change them.
    public let statusPeople = StatusPeople()

    /// A service over `backend`, authorising with `access`; mg/dL unless told.
    public init(backend: any SugarBackend, access: AccessPolicy, unit: GlucoseUnit = .mgdl, limits: Limits = Limits()) {
        self.backend = backend
        self.access = access
        self.unit = unit
        self.limits = limits
    }

    /// A server for this interface: mode 0660 (or `configure`'s), the access policy's socket group
    /// as the file's group, sugard's `GetInfo`, and the Varlink module's connection, message and
    /// output caps. Call `run()` on the result.
    ///
    /// - Parameters:
    ///   - listen: a path to bind, or the socket systemd passed (`VarlinkServerConfiguration.systemdListeningSocket()`).
    ///   - configure: adjust the configuration (caps, timeouts, mode) before the server is built.
    public func makeServer(
        listen: VarlinkServerConfiguration.Listen, version: String,
        configure: (inout VarlinkServerConfiguration) -> Void = { _ in }
    ) throws(VarlinkServerError) -> VarlinkServer {
        var configuration = VarlinkServerConfiguration(listen: listen)
        configuration.socketMode = 0o660
        configuration.socketGroup = self.access.socketGroup
        configuration.vendor = "sugard"
        configuration.product = "sugard"
        configuration.version = version
        configuration.url = "https://github.com/sugard/sugard"
        configure(&configuration)
        var service = self
        service.limits.backpressureBytes = configuration.maxPendingOutputBytes
        return try VarlinkServer(configuration: configuration, handlers: [service])
    }

    // MARK: Errors

    /// `io.sugard.HealthDataSync.<name>` with `parameters`.
    public static func error(_ name: String, _ parameters: JSONObject = [:]) -> VarlinkError {
        VarlinkError(interfaceName + "." + name, parameters)
    }

    /// The interface error `failure`, with its parameters as SugarWire writes them.
    static func error(_ failure: Wire.Failure) -> VarlinkError {
        VarlinkError(interfaceName + "." + failure.member, failure.parameters)
    }

    /// A reply's parameters as SugarWire writes them.
    static func parameters(_ reply: some WireValue) -> JSONObject { reply.json.objectValue ?? [:] }

    /// `InvalidParameter(parameter, message)`.
    static func invalid(_ parameter: String, _ message: String) -> VarlinkError {
        error(.invalidParameter(parameter: parameter, message: message))
    }

    /// `MeterNotFound(meter)`, with a default message.
    static func meterNotFound(_ meter: MeterID, _ message: String? = nil) -> VarlinkError {
        error(.meterNotFound(meter: meter.rawValue, message: message ?? "No meter \(meter.rawValue) is known."))
    }

    /// The interface error for a backend error.
    public static func error(for failure: SugarAPIError) -> VarlinkError {
        let message = failure.message
        let subject = failure.subject
        switch failure.code {
        case .meterNotFound: return error(.meterNotFound(meter: subject ?? "", message: message))
        case .adapterUnavailable: return error(.adapterUnavailable(message: message))
        case .syncInProgress: return error(.syncInProgress(meter: subject, message: message))
        case .storageError: return error(.storageError(code: subject, message: message))
        case .invalidParameter: return error(.invalidParameter(parameter: subject ?? "", message: message))
        case .permissionDenied: return error(.permissionDenied(method: subject ?? "", message: message))
        case .pairingFailed: return error(.pairingFailed(meter: subject, message: message))
        case .syncFailed: return error(.syncFailed(meter: subject, message: message))
        case .invalidDatabase: return error(.invalidDatabase(message: message))
        }
    }

    /// The interface error for a storage error.
    public static func error(for failure: StoreError) -> VarlinkError {
        error(.storageError(code: failure.code.rawValue, message: failure.message))
    }

    // MARK: Authorisation

    /// The access level `method` (member name) needs.
    public static func level(of method: String) -> AccessPolicy.Level {
        self.readMethods.contains(method) ? .read : .admin
    }

    /// Throws `PermissionDenied(method)` unless the peer may call `method` (member name).
    public func authorize(_ method: String, peer: VarlinkPeer) throws(VarlinkError) {
        let level = Self.level(of: method)
        guard self.access.allows(peer, level) else {
            let who = level == .read ? "the socket group" : "root or the admin group"
            throw Self.error(
                .permissionDenied(
                    method: Self.interfaceName + "." + method, message: "uid \(peer.uid) may not call \(method): it needs \(who)."))
        }
    }

    // MARK: Dispatch

    /// Authorises the call, then runs the method; errors are the interface's, unknown methods
    /// `MethodNotImplemented`.
    public func handle(_ call: VarlinkCall, replier: VarlinkReplier) async throws(VarlinkError) {
        let method = call.methodName
        try self.authorize(method, peer: call.peer)
        let p = call.parameters
        if Self.adminMethods.contains(method) {
            // It may change who a meter belongs to (or the whole database): GetStatus reads the
            // people again, after it as well as during it.
            self.statusPeople.invalidate()
        }
        defer { if Self.adminMethods.contains(method) { self.statusPeople.invalidate() } }
        switch method {
        case "GetStatus": await self.getStatus(replier)
        case "Watch": try await self.watch(p, replier: replier)
        case "ListReadings": try await self.listReadings(p, more: call.more, replier: replier)
        case "ListMeters": try await self.listMeters(replier)
        case "FollowReadings": try await self.followReadings(p, replier: replier)
        case "Sync": try await self.sync(p, more: call.more, replier: replier)
        case "Forget":
            let meter = try Self.meter(p["meter"])
            do throws(SugarAPIError) {
                try await self.backend.forget(meter: meter)
            } catch {
                throw Self.error(for: error)
            }
            replier.reply()
        case "Pair": try await self.pair(p, replier: replier)
        case "AssignMeter", "ShareMeter", "ListAssignments", "AttributeReadings", "ListPeople", "GetPerson", "AddPerson",
            "EditPerson", "RemovePerson", "GetPeopleStatus":
            try await self.handlePeople(method, p, replier: replier)
        case "Backup": try await self.backup(replier)
        case "RestoreUpload": try await self.restoreUpload(p, replier: replier)
        case "Restore": try await self.restore(p, replier: replier)
        case "CheckStorage":
            do throws(SugarAPIError) {
                let check = try await self.backend.checkStorage()
                replier.reply(Self.parameters(Wire.CheckStorageReply(check: Wire.StorageCheck(check))))
            } catch {
                throw Self.error(for: error)
            }
        case "SubmitPasskey":
            let meter = try Self.meter(p["meter"])
            let text = p["passkey"]?.stringValue ?? ""
            guard text.utf8.count == 6, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let passkey = UInt32(text) else {
                throw Self.invalid("passkey", "The passkey must be the 6 digits the meter shows.")
            }
            do throws(SugarAPIError) {
                try await self.backend.submitPasskey(passkey, meter: meter)
            } catch {
                throw Self.error(for: error)
            }
            replier.reply()
        case "ListSyncSessions":
            let meter = try Self.optionalMeter(p["meter"])
            let limit = try Self.limit(
                p["limit"], default: self.limits.defaultSessionLimit, max: self.limits.maxSessionLimit)
            do throws(StoreError) {
                let sessions = try await self.backend.store.sessions(meter: meter, limit: limit)
                replier.reply(Self.parameters(Wire.SessionsReply(sessions: sessions.map(Wire.Session.init))))
            } catch {
                throw Self.error(for: error)
            }
        default:
            throw .methodNotImplemented(call.method)
        }
    }

    // MARK: Parameters

    /// The `meter` parameter as an id; throws `InvalidParameter` when it is missing or empty.
    static func meter(_ value: JSONValue?) throws(VarlinkError) -> MeterID {
        guard let text = value?.stringValue, !text.isEmpty else { throw invalid("meter", "The meter id is empty.") }
        return MeterID(text)
    }

    /// An optional `meter` parameter; nil when absent or null.
    static func optionalMeter(_ value: JSONValue?) throws(VarlinkError) -> MeterID? {
        guard let value, !value.isNull else { return nil }
        return try meter(value)
    }

    /// A `limit` parameter in 1...`max`; `fallback` when absent or null.
    static func limit(_ value: JSONValue?, default fallback: Int, max: Int) throws(VarlinkError) -> Int {
        guard let value, !value.isNull else { return fallback }
        guard let n = value.intValue, n >= 1, n <= Int64(max) else {
            throw invalid("limit", max == Int.max ? "limit must be 1 or more." : "limit must be between 1 and \(max).")
        }
        return Int(n)
    }

    /// An ISO 8601 instant with a zone, or a date (its midnight UTC); nil when absent or null; throws
    /// `InvalidParameter(name)` otherwise.
    static func instant(_ value: JSONValue?, _ name: String) throws(VarlinkError) -> Instant? {
        guard let value, !value.isNull else { return nil }
        guard let text = value.stringValue, let millis = CivilCalendar.parseISOInstant(text) else {
            throw invalid(
                name,
                "\(name) must be an ISO 8601 instant with a zone (2024-03-31T06:00:00Z, 2024-03-31T08:00:00+02:00) or a date (2024-03-31)."
            )
        }
        return Instant(epochMillis: millis)
    }

    /// Field names as a set; nil when absent or empty; throws `InvalidParameter(fields)` naming the
    /// known fields for an unknown one.
    static func fields<Field: RawRepresentable & CaseIterable & Hashable>(_ value: JSONValue?, _: Field.Type)
        throws(VarlinkError) -> Set<Field>? where Field.RawValue == String
    {
        guard let names = value?.arrayValue else { return nil }
        var set = Set<Field>()
        for name in names {
            let text = name.stringValue ?? ""
            guard let field = Field(rawValue: text) else {
                let known = Field.allCases.map(\.rawValue).joined(separator: ", ")
                throw invalid("fields", "Unknown field '\(text)'; known fields: \(known).")
            }
            set.insert(field)
        }
        return set.isEmpty ? nil : set
    }

    // MARK: Methods

    private func getStatus(_ replier: VarlinkReplier) async {
        let (state, revision, revisions) = self.backend.models.viewModel.stateWithRevisions()
        // People come from the database; when it cannot be read, the state (with its storage
        // error) still goes out, without them.
        let store = self.backend.store
        let people = await self.statusPeople.people { try? await store.people() }.map { people in
            WireMap(people.sorted(by: { $0.key < $1.key }).map { (key: $0.key.rawValue, value: $0.value) })
        }
        let reply = Wire.StatusReply(
            revision: Int64(truncatingIfNeeded: revision),
            revisions: WireMap(revisions: ViewState.Field.allCases.map { ($0, revisions[$0] ?? 0) }), state: Wire.State(state),
            unit: self.unit, people: people)
        var parameters: [UInt8] = []
        reply.json.write(into: &parameters)
        // A whole state (~20 KB with 50 meters) in one write: through the small send buffer every
        // connection starts with it took several, each waiting for the client to read and for the
        // server's I/O thread, which 1 000 watchers' rounds keep busy (`sugar-bench scale watch`).
        replier.fitSendBuffer(toReplies: parameters.count + 64)
        replier.reply { $0.append(contentsOf: parameters) }
    }

    private func watch(_ p: JSONObject, replier: VarlinkReplier) async throws(VarlinkError) {
        let policy = WatchPolicy(rawValue: p["policy"]?.stringValue ?? "coalesced") ?? .coalesced
        if p["followSyncing"]?.boolValue == true {
            let fields = try Self.fields(p["fields"], MeterField.self)
            try await self.followSyncing(from: try Self.optionalMeter(p["meter"]), fields: fields, policy: policy, replier: replier)
        } else if let meter = try Self.optionalMeter(p["meter"]) {
            let fields = try Self.fields(p["fields"], MeterField.self)
            guard let model = self.backend.models.model(for: meter) else { throw Self.meterNotFound(meter) }
            try await self.stream(
                model, fields: fields, policy: policy, replier: replier,
                closed: Self.meterNotFound(meter, "The meter \(meter.rawValue) was forgotten."))
        } else {
            let fields = try Self.fields(p["fields"], StateField.self)
            try await self.stream(
                self.backend.models.viewModel, fields: fields, policy: policy, replier: replier,
                closed: Self.error(.shuttingDown(message: "The daemon is shutting down.")))
        }
    }

    /// Streams a watcher until the client goes away, the model closes or the watcher is dropped.
    private func stream<State: ObservableState>(
        _ model: ObservableModel<State>, fields: Set<State.Field>?, policy: WatchPolicy, replier: VarlinkReplier,
        closed: VarlinkError
    ) async throws(VarlinkError) where State.Value: WireFieldValue {
        if policy == .coalesced, replier.more, !replier.oneway {
            // Served with the other coalesced watchers of these fields of this model (WatchFanout).
            let end = await self.watchFanout.serve(
                model, fields: fields, replier: replier, outputCap: self.limits.watchOutputCap,
                interval: self.limits.coalescedWatchInterval)
            switch end {
            case .droppedSlowConsumer: throw self.slowConsumer()
            case .modelClosed: throw closed
            case .cancelled: return
            }
        }
        let watcher = model.watch(fields: fields, policy: policy, outputCap: self.limits.watchOutputCap)
        defer { watcher.cancel() }
        // A coalesced watcher sends its next reply only once the last one left sugard's buffer (it
        // is in the kernel's, or read): one whole state of 50 meters is ~20 KB, and 1 000 watchers
        // each allowed the connection's output cap (1 MiB) blew the server's 16 MiB memory budget
        // and were dropped (64 KiB each still lost 16 % of them; measured with `sugar-bench scale
        // watch`). The changes meanwhile are folded into that next reply; a client that stops
        // reading for good is dropped as a slow consumer once it misses its cap of owner turns.
        let backlog = policy == .coalesced ? 1 : nil
        // And at most one reply per `coalescedWatchInterval` while changes keep coming (a 50-meter
        // sync changes the state hundreds of times a second; every reply is a whole state).
        let interval = policy == .coalesced ? self.limits.coalescedWatchInterval : .zero
        var lastSent: ContinuousClock.Instant?
        while true {
            if let lastSent, interval > .zero {
                let due = lastSent + interval
                if due > .now { try? await Task.sleep(until: due, clock: .continuous) }
            }
            // While the client has not read what it got, do not queue more: a coalesced watcher
            // folds the changes meanwhile, an immediate one fills up to its cap and is dropped.
            await self.waitForReader(replier, below: backlog) { watcher.endReason == nil }
            guard let message = await watcher.next() else { break }
            let reply = self.watchReplies.reply(for: message, of: model) { Self.parameters(Wire.WatchReply(message)) }
            guard replier.reply(shared: reply) else { break }
            lastSent = .now
        }
        switch watcher.endReason {
        case .droppedSlowConsumer?:
            throw self.slowConsumer()
        case .modelClosed?:
            throw closed
        case .cancelled?, nil:
            return
        }
    }

    /// A meter watcher that follows whichever meter is syncing: it starts on `start` (else a meter
    /// syncing now, else the first known one) and, each time another meter starts a sync, rebinds
    /// to that meter's model on the same call. The generation advances with each rebind, the next
    /// reply is a snapshot of the new meter, every reply names its meter, and nothing the old meter
    /// emits after the rebind reaches the client (the watcher rejects its late emissions).
    private func followSyncing(
        from start: MeterID?, fields: Set<MeterField>?, policy: WatchPolicy, replier: VarlinkReplier
    ) async throws(VarlinkError) {
        let models = self.backend.models
        let meters = models.viewModel.state.meters
        guard let first = start ?? meters.values.filter({ Self.isSyncing($0.sync) }).map(\.id).min() ?? models.meterIDs.first
        else {
            throw Self.error(.meterNotFound(meter: "", message: "No meter is known yet: wake a meter near the adapter."))
        }
        guard let model = models.model(for: first) else { throw Self.meterNotFound(first) }
        let watcher = model.watch(fields: fields, policy: policy, outputCap: self.limits.watchOutputCap)
        defer { watcher.cancel() }
        // Which meter each generation is bound to, so each reply names its meter.
        let bound = Lock<[UInt64: MeterID]>([watcher.generation: first])
        let follower = models.viewModel.watch(fields: [.meters], policy: .coalesced)
        defer { follower.cancel() }
        let service = self
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                var syncing = Set(meters.values.filter { Self.isSyncing($0.sync) }.map(\.id))
                var current = first
                for await message in follower {
                    guard case .meters(let states)? = message[.meters] else { continue }
                    let now = Set(states.filter { Self.isSyncing($0.sync) }.map(\.id))
                    let started = now.subtracting(syncing)
                    syncing = now
                    guard let next = started.sorted().first, next != current, let model = models.model(for: next) else {
                        continue
                    }
                    // Only this task rebinds, so the next generation is known before the rebind.
                    bound.withLock { $0[watcher.generation &+ 1] = next }
                    if watcher.rebind(to: model) { current = next }
                }
            }
            group.addTask {
                while true {
                    await service.waitForReader(replier) { watcher.endReason == nil }
                    guard let message = await watcher.next() else { break }
                    let reply = Wire.WatchReply(message, meter: bound.withLock { $0[message.generation] }?.rawValue)
                    guard replier.reply(Self.parameters(reply), continues: true) else { break }
                }
                follower.cancel()
            }
            await group.next()
            group.cancelAll()
            follower.cancel()
            watcher.cancel()
        }
        switch watcher.endReason {
        case .droppedSlowConsumer?:
            throw self.slowConsumer()
        case .modelClosed?:
            throw Self.meterNotFound(bound.withLock { $0[watcher.generation] } ?? first, "The meter was forgotten.")
        case .cancelled?, nil:
            return
        }
    }

    /// The `SlowConsumer` error a dropped watcher's call ends with, naming the cap it exceeded.
    private func slowConsumer() -> VarlinkError {
        Self.error(
            .slowConsumer(
                message:
                    "The watcher fell more than \(self.limits.watchOutputCap) changes behind and was dropped; watch again for a fresh snapshot."
            ))
    }

    /// Whether a meter in `phase` is syncing now (neither idle nor done or failed).
    static func isSyncing(_ phase: SyncPhase) -> Bool { phase != .idle && !phase.isFinal }

    /// Returns once the connection's unread output is below `bytes` (default
    /// ``Limits/backpressureBytes``), the connection closed, the task was cancelled, or
    /// `stillWanted` turned false.
    func waitForReader(_ replier: VarlinkReplier, below bytes: Int? = nil, stillWanted: () -> Bool) async {
        let limit = bytes ?? self.limits.backpressureBytes
        while replier.pendingOutputBytes >= limit, !replier.isClosed, !Task.isCancelled,
            stillWanted()
        {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    private func listReadings(_ p: JSONObject, more: Bool, replier: VarlinkReplier) async throws(VarlinkError) {
        let since = try Self.instant(p["since"], "since")
        let until = try Self.instant(p["until"], "until")
        if let since, let until, until < since {
            throw Self.invalid("until", "until is before since.")
        }
        let meter = try Self.optionalMeter(p["meter"])
        let all = p["all"]?.boolValue == true
        if all {
            guard more else { throw Self.invalid("all", "all needs 'more': every reading comes in several replies.") }
            if let limit = p["limit"], !limit.isNull { throw Self.invalid("limit", "Give limit or all, not both.") }
        }
        // With more the readings come in pages, so a limit has no maximum; without, one reply holds them all.
        let limit: Int? =
            all ? nil : try Self.limit(p["limit"], default: self.limits.defaultReadingLimit, max: more ? Int.max : self.limits.maxReadingLimit)
        let order: ReadingQuery.Order = p["order"]?.stringValue == "desc" ? .descending : .ascending
        let person = try await self.knownPerson(p["person"], optional: true)
        let unattributed = p["unattributed"]?.boolValue == true
        let compact = p["compact"]?.boolValue == true
        let csv = p["csv"]?.boolValue == true
        if compact && csv { throw Self.invalid("csv", "Give compact or csv, not both.") }
        let query = ReadingQuery(since: since, until: until, meter: meter, order: order, person: person, unattributed: unattributed)
        let unit = self.unit
        /// The CSV rows of a page, written before the reply that carries them (reused page after page).
        var rows: [UInt8] = []
        /// One reply: the full objects, the compact ones written straight into its bytes, or the CSV rows.
        func send(_ page: ArraySlice<StoredReading>, truncated: Bool?, continues: Bool) -> Bool {
            if csv {
                rows.removeAll(keepingCapacity: true)
                for stored in page { ReadingExport.writeCSVRow(ReadingExport.CSVRow(stored), into: &rows) }
                return replier.reply(continues: continues) { out in
                    out.reserveCapacity(out.count + rows.count + rows.count / 16 + 64)
                    Wire.CSVPage.write(rows: rows, count: page.count, truncated: truncated, unit: unit, into: &out)
                }
            }
            guard compact else {
                let reply = Wire.ReadingsReply(readings: page.map { Wire.Reading($0).object }, truncated: truncated, unit: unit)
                return replier.reply(Self.parameters(reply), continues: continues)
            }
            return replier.reply(continues: continues) { out in
                out.reserveCapacity(out.count + 400 * page.count)
                out.append(contentsOf: #"{"readings":["#.utf8)
                for (index, stored) in page.enumerated() {
                    if index > 0 { out.append(UInt8(ascii: ",")) }
                    Wire.CompactReading(stored).write(into: &out)
                }
                out.append(UInt8(ascii: "]"))
                Wire.writePageEnd(truncated: truncated, unit: unit, into: &out)
            }
        }
        guard more else {
            let stored = try await self.readings(query, limit: (limit ?? 0) + 1, after: nil)
            let truncated = stored.count > (limit ?? 0)
            let readings = stored.prefix(limit ?? 0)
            let perReply = max(1, self.limits.readingsPerReply)
            guard readings.count <= perReply else {
                throw Self.invalid(
                    "limit",
                    "\(readings.count) readings match, more than one reply carries (\(perReply)): call with 'more' or lower the limit."
                )
            }
            _ = send(readings, truncated: truncated, continues: false)
            return
        }
        // Pages by keyset: each page starts right after the last reading sent (its instant and id),
        // read only once the client has taken the previous replies. One row past the page says
        // whether another page follows, so the last reply is known when it is sent.
        let perReply = max(
            1, min(self.limits.readingsPerReply, compact || csv ? self.limits.leanReadingsPerStreamedReply : self.limits.readingsPerStreamedReply))
        var remaining = limit
        var after: ReadingQuery.Position?
        while true {
            let wanted = min(perReply, remaining ?? perReply)
            await self.waitForReader(replier) { true }
            if replier.isClosed || Task.isCancelled { return }
            let stored = try await self.readings(query, limit: wanted + 1, after: after)
            let page = stored.prefix(wanted)
            remaining = remaining.map { $0 - page.count }
            let moreMatch = stored.count > wanted
            let last = !moreMatch || remaining == 0
            guard send(page, truncated: last ? moreMatch : nil, continues: !last) else { return }
            if last { return }
            after = page.last.map(ReadingQuery.Position.init)
        }
    }

    /// One page of a listing: at most `limit` readings of `query` after `after`.
    private func readings(_ query: ReadingQuery, limit: Int, after: ReadingQuery.Position?) async throws(VarlinkError) -> [StoredReading] {
        var query = query
        query.limit = limit
        query.after = after
        do throws(StoreError) {
            return try await self.backend.store.readings(query)
        } catch {
            throw Self.error(for: error)
        }
    }

    /// Streams every stored reading after the cursor in commit order, one per reply, then each new
    /// one as it commits. A page is read from the database only once the client has read what it
    /// got (``waitForReader(_:below:stillWanted:)``), so a stalled client costs at most one page plus
    /// the connection's output cap (and the kernel's send buffer, widened for the stream:
    /// ``VarlinkReplier/widenSendBuffer()``). It waits at half that cap: a follower that stops reading on
    /// purpose (sugard-forward while its broker is slow or away: its flow control) stays under the
    /// server's soft cap and keeps its connection, not dropped as a slow reader. Commits are
    /// noticed through the view model's `readingCount`.
    ///
    /// With `batch`, one reply carries up to that many readings (`readings`, each with its cursor)
    /// when more than one is waiting: the same stream with fewer messages. A reply never holds
    /// more than one page, so the bound stays one page plus the output cap.
    ///
    /// With `compact: true` each reading is ``ReadingJSON/compact(_:)`` (what the sinks read; a
    /// batched reply is written straight into bytes by `Wire.CompactReading`), without it the full
    /// ``ReadingJSON/object(_:)``.
    private func followReadings(_ p: JSONObject, replier: VarlinkReplier) async throws(VarlinkError) {
        var cursor: Int64 = 0
        if let after = p["after"], !after.isNull {
            guard let n = after.intValue, n >= 0 else {
                throw Self.invalid("after", "after must be a cursor from an earlier reply (0 or more).")
            }
            cursor = n
        }
        var batch: Int?
        if let value = p["batch"], !value.isNull {
            guard let n = value.intValue, n >= 1, n <= Int64(Self.maxFollowBatch) else {
                throw Self.invalid("batch", "batch must be 1 to \(Self.maxFollowBatch).")
            }
            batch = Int(n)
        }
        // The database the cursor is a position in: when the daemon's is another (recreated,
        // restored), the cursor means nothing here and the stream starts from its beginning.
        var streamId: String?
        if let value = p["databaseId"], !value.isNull {
            guard let id = value.stringValue, !id.isEmpty else {
                throw Self.invalid("databaseId", "databaseId must be the databaseId of the reply the cursor came with.")
            }
            streamId = id
        }
        let compact = p["compact"]?.boolValue == true
        /// A stored reading in the form the call asked for: compact, or the full reading object.
        func form(_ stored: StoredReading) -> JSONValue { compact ? ReadingJSON.compact(stored) : ReadingJSON.object(stored) }
        // A backlog goes out in replies of tens of KiB: written whole, not in 4.5 KiB pieces.
        replier.widenSendBuffer()
        // Subscribed before the first read, so a commit between a read and the wait is not missed.
        // Commits (readingCount), person changes (the attribution bell) and storage health (the
        // daemon field: a database swapped in by a restore or a recreate wakes the stream even when
        // its reading count happens to be the same) ring one signal.
        let watcher = self.backend.models.viewModel.watch(fields: [.readingCount, .daemon], policy: .coalesced)
        let signal = FeedSignal()
        let attributions = self.attributionBell
        let commits = Task {
            for await _ in watcher { signal.ring() }
            signal.close()
        }
        let changes = Task {
            var seen = attributions.generation
            while await attributions.wait(after: seen) {
                seen = attributions.generation
                signal.ring()
            }
        }
        defer {
            watcher.cancel()
            commits.cancel()
            changes.cancel()
        }
        let pageSize = max(1, self.limits.followPageSize)
        // Half the output cap: a follower pausing on purpose is never over the server's soft cap.
        let pause = self.limits.backpressureBytes / 2
        var first = true
        while true {
            let page: [StoredReading]
            let databaseId: String?
            let seen = signal.generation
            do throws(StoreError) {
                var read = try await self.backend.store.page(afterCursor: cursor, limit: pageSize)
                if read.databaseId != streamId, streamId != nil || !first, cursor > 0 {
                    // Another database than the cursor's: from its beginning, nothing skipped.
                    cursor = 0
                    read = try await self.backend.store.page(afterCursor: 0, limit: pageSize)
                }
                page = read.readings
                databaseId = read.databaseId
            } catch {
                throw Self.error(for: error)
            }
            first = false
            streamId = databaseId
            let idJSON: JSONValue = databaseId.map { .string($0) } ?? .null
            if let batch {
                var start = page.startIndex
                while start < page.endIndex {
                    let end = min(start + batch, page.endIndex)
                    await self.waitForReader(replier, below: pause) { true }
                    if replier.isClosed || Task.isCancelled { return }
                    if compact {
                        // Written straight into the reply's bytes (no JSON tree per reading).
                        let part = page[start..<end]
                        let sent = replier.reply(continues: true) { out in
                            out.reserveCapacity(out.count + 400 * part.count)
                            Wire.CompactFollowReply.write(cursors: part.map(\.cursor), databaseId: databaseId, into: &out) { index, out in
                                Wire.CompactReading(part[part.startIndex + index]).write(into: &out)
                            }
                        }
                        guard sent else { return }
                    } else {
                        let readings: [JSONValue] = page[start..<end].map { ["cursor": .int($0.cursor), "reading": form($0)] }
                        guard
                            replier.reply(
                                ["cursor": .int(page[end - 1].cursor), "readings": .array(readings), "databaseId": idJSON], continues: true)
                        else { return }
                    }
                    cursor = page[end - 1].cursor
                    start = end
                }
            } else {
                for stored in page {
                    await self.waitForReader(replier, below: pause) { true }
                    if replier.isClosed || Task.isCancelled { return }
                    guard replier.reply(["cursor": .int(stored.cursor), "reading": form(stored), "databaseId": idJSON], continues: true)
                    else { return }
                    cursor = stored.cursor
                }
            }
            if page.count < pageSize {
                guard await signal.wait(after: seen) else {
                    if replier.isClosed || Task.isCancelled { return }
                    throw Self.error(.shuttingDown(message: "The daemon is shutting down."))
                }
            }
        }
    }

    /// `ListMeters`: every meter live or stored, sorted by id, each with its live state, stored facts,
    /// person, procedure and whether its clock can be set.
    private func listMeters(_ replier: VarlinkReplier) async throws(VarlinkError) {
        let stored: [StoredMeter]
        do throws(StoreError) {
            stored = try await self.backend.store.meters()
        } catch {
            throw Self.error(for: error)
        }
        let live = self.backend.models.viewModel.state.meters
        var ids = Set(live.keys)
        for meter in stored { ids.insert(meter.identity.id) }
        let byID = Dictionary(stored.map { ($0.identity.id, $0) }, uniquingKeysWith: { a, _ in a })
        let entries = ids.sorted().map { id in
            let state = live[id]
            let record = byID[id]
            let identity = state?.identity ?? record?.identity ?? MeterIdentity(id: id)
            return Wire.MeterEntry(
                id: id.rawValue, identity: Wire.MeterIdentity(identity), live: state.map(Wire.Meter.init),
                stored: record.map(Wire.StoredMeter.init), person: record?.person,
                procedure: record?.procedure.map { $0 == .verio ? .verio : .gls }, clockSettable: record?.clockSettable)
        }
        replier.reply(Self.parameters(Wire.MetersReply(meters: entries)))
    }

    /// `Sync`: syncs one meter or all and replies with the sessions; with `more`, first a reply per
    /// change of a meter's phase or progress.
    private func sync(_ p: JSONObject, more: Bool, replier: VarlinkReplier) async throws(VarlinkError) {
        let meter = try Self.optionalMeter(p["meter"])
        let force = p["force"]?.boolValue ?? false
        let backend = self.backend
        let outcome: Result<[SyncSessionRecord], SugarAPIError>
        if more {
            // Subscribe before the sync starts so no phase is missed; the snapshot is the state
            // before it and is not reported.
            let watcher = backend.models.viewModel.watch(fields: [.meters], policy: .coalesced)
            outcome = await self.whileStreaming(watcher) {
                do throws(SugarAPIError) {
                    return .success(try await backend.sync(meter: meter, force: force))
                } catch {
                    return .failure(error)
                }
            } stream: {
                await Self.streamProgress(watcher, meter: meter, replier: replier)
            }
        } else {
            do throws(SugarAPIError) {
                outcome = .success(try await backend.sync(meter: meter, force: force))
            } catch {
                outcome = .failure(error)
            }
        }
        switch outcome {
        case .success(let sessions):
            replier.reply(Self.parameters(Wire.SyncReply(sessions: sessions.map(Wire.Session.init))))
        case .failure(let error):
            throw Self.error(for: error)
        }
    }

    /// Runs `work` while `stream` forwards the watcher's messages; ends the watcher when `work` is done.
    private func whileStreaming<T: Sendable>(
        _ watcher: Watcher<ViewState>, work: @escaping @Sendable () async -> T,
        stream: @escaping @Sendable () async -> Void
    ) async -> T {
        await withTaskGroup(of: T?.self) { group in
            group.addTask {
                await stream()
                return nil
            }
            group.addTask { await work() }
            var result: T?
            for await value in group {
                if let value {
                    result = value
                    watcher.cancel()
                }
            }
            watcher.cancel()
            return result!
        }
    }

    /// Sends a progress reply for each change of a meter's phase or counts (the snapshot and idle
    /// meters are left out); ends when the watcher ends or the client is gone.
    private static func streamProgress(_ watcher: Watcher<ViewState>, meter: MeterID?, replier: VarlinkReplier) async {
        var last: [MeterID: (String, Int, Int?)] = [:]
        var first = true
        for await message in watcher {
            guard case .meters(let meters)? = message[.meters] else { continue }
            for state in meters where meter == nil || state.id == meter {
                let now = (state.sync.name, state.progress.received, state.progress.expected)
                let previous = last[state.id]
                last[state.id] = now
                if first || state.sync == .idle { continue }
                if let previous, previous == now { continue }
                let progress = Wire.SyncReply(
                    meter: state.id.rawValue, phase: Wire.SyncPhase(state.sync), received: Int64(now.1), expected: now.2.map(Int64.init))
                var reply = Self.parameters(progress)
                // A progress reply has always carried `expected`, null until the meter has said.
                if reply["expected"] == nil { reply["expected"] = .null }
                let sent = replier.reply(reply, continues: true)
                if !sent { return }
            }
            first = false
        }
    }

    /// `Pair`: pairs with the meter; with `more`, a reply when pairing starts, when the meter waits
    /// for its passkey and when it fails; the last reply says `paired`.
    private func pair(_ p: JSONObject, replier: VarlinkReplier) async throws(VarlinkError) {
        let meter = try Self.meter(p["meter"])
        let backend = self.backend
        let watcher = backend.models.viewModel.watch(fields: [.meters], policy: .coalesced)
        let outcome: Result<Void, SugarAPIError> = await self.whileStreaming(watcher) {
            do throws(SugarAPIError) {
                try await backend.pair(meter: meter)
                return .success(())
            } catch {
                return .failure(error)
            }
        } stream: {
            var last: PairingState?
            var first = true
            for await message in watcher {
                guard case .meters(let meters)? = message[.meters], let state = meters.first(where: { $0.id == meter })
                else {
                    first = false
                    continue
                }
                defer {
                    last = state.pairing
                    first = false
                }
                // The snapshot counts when the meter already waits for its passkey (a sync started pairing).
                if state.pairing == last || (first && state.pairing != .waitingForPasskey) { continue }
                let reply: Wire.PairReply
                switch state.pairing {
                case .pairing:
                    reply = Wire.PairReply(meter: meter.rawValue, state: .pairing)
                case .waitingForPasskey:
                    reply = Wire.PairReply(
                        meter: meter.rawValue, state: .waitingForPasskey, message: "Enter the PIN shown on the meter (SubmitPasskey).")
                case .failed:
                    reply = Wire.PairReply(meter: meter.rawValue, state: .failed, message: state.lastError?.message)
                case .paired, .unknown, .notPaired:
                    continue
                }
                if !replier.reply(Self.parameters(reply), continues: true) { return }
            }
        }
        switch outcome {
        case .success:
            replier.reply(Self.parameters(Wire.PairReply(meter: meter.rawValue, state: .paired)))
        case .failure(let error):
            throw Self.error(for: error)
        }
    }
}
