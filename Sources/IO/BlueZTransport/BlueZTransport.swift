import DBus
import GlucoseProfile
import HealthDataSync
import Locking
import ProcessKit

/// Settings of the BlueZ transport.
public struct BlueZTransportConfiguration: Sendable {
    /// The bus BlueZ is on (the system bus, unless a test points elsewhere).
    public var bus: DBusBus
    /// The adapter to use (`hci0`); nil takes the first one BlueZ lists.
    public var adapter: String?
    /// Where the pairing agent (org.bluez.Agent1, capability KeyboardDisplay) is exported.
    public var agentPath: String
    /// Timeout of ordinary BlueZ calls (connect, read, write, notify).
    public var callTimeout: Duration
    /// Timeout of `Device1.Pair` (it includes the time a person needs to type the passkey).
    public var pairTimeout: Duration
    /// How long to wait for ServicesResolved after Connect.
    public var resolveTimeout: Duration
    /// Pause before reconnecting to the bus after it went away.
    public var reconnectDelay: Duration

    /// A configuration; every default suits sugard on a real system bus.
    public init(
        bus: DBusBus = .system, adapter: String? = nil, agentPath: String = "/io/sugard/agent",
        callTimeout: Duration = .seconds(30), pairTimeout: Duration = .seconds(90),
        resolveTimeout: Duration = .seconds(30), reconnectDelay: Duration = .seconds(2)
    ) {
        self.bus = bus
        self.adapter = adapter
        self.agentPath = agentPath
        self.callTimeout = callTimeout
        self.pairTimeout = pairTimeout
        self.resolveTimeout = resolveTimeout
        self.reconnectDelay = reconnectDelay
    }
}

/// Reaches glucose meters through BlueZ (bluetoothd) on the system D-Bus.
///
/// `run()` is the transport's only long-lived work and must run in a task its owner cancels: it
/// connects to the bus (again after the bus goes away), follows the `org.bluez` name (bluetoothd
/// restarting), mirrors BlueZ's object tree, registers the pairing agent and resumes discovery each
/// time bluetoothd appears. The `MeterTransport` calls work while `run()` is running.
public final class BlueZTransport: MeterTransport {
    /// Everything the session's tasks and the `MeterTransport` calls share, behind ``state``.
    private struct State {
        /// The bus connection of the running session; nil between sessions.
        var connection: DBusConnection?
        /// Bumped whenever org.bluez appears or vanishes; work from an older generation is stale.
        var generation: UInt64 = 0
        /// `org.bluez` has an owner now.
        var bluezPresent = false
        /// BlueZ's object tree as last seen.
        var mirror = ObjectMirror()
        /// The adapter state last published.
        var adapterState = AdapterState.absent
        /// The engine asked for discovery (kept across bluetoothd restarts).
        var discoveryWanted = false
        /// Device paths announced with `meterAppeared`, with the RSSI last reported.
        var announced: [String: Int?] = [:]
        /// `RequestPasskey` calls from bluetoothd waiting for ``submitPasskey(_:for:)``, by meter.
        var pendingPasskeys: [MeterID: DBusIncomingCall] = [:]
        /// Ids for the waiters below.
        var nextWaiter: UInt64 = 0
        /// Callers of ``waitForServicesResolved(_:)`` by device path.
        var resolvedWaiters: [String: [UInt64: CheckedContinuation<Bool, Never>]] = [:]
        /// Device paths with a `Device1.Pair` in flight, with the callers waiting for its outcome.
        var pairings: [String: [UInt64: CheckedContinuation<TransportError?, Never>]] = [:]
        /// Wakes the session's discovery task (the adapter appeared, powered on or stopped discovering).
        var discoveryKick: AsyncStream<Void>.Continuation?
        /// While the GetManagedObjects reply is awaited, signals wait here and are applied on top of
        /// the loaded tree: the reply is consumed by another task than the signals, so applying them
        /// directly could let an older snapshot overwrite newer signals (a meter's GATT objects).
        var loading = false
        var deferredSignals: [DBusSignal] = []
        /// Agent calls refused since the last line logged about them (one line a second at most).
        var refusedAgentCalls = 0
        /// When the last refusal line was written.
        var lastRefusalLogged: ContinuousClock.Instant?
    }

    /// The settings given at creation.
    private let configuration: BlueZTransportConfiguration
    /// The transport's log, named `bluez`.
    private let logger: Logger
    /// The shared state.
    private let state = Lock(State())
    /// The events the engine consumes.
    private let stream: AsyncStream<TransportEvent>
    /// Where events are yielded; finished when ``run()`` returns.
    private let continuation: AsyncStream<TransportEvent>.Continuation

    /// A transport that does nothing until ``run()``.
    public init(configuration: BlueZTransportConfiguration = BlueZTransportConfiguration(), logger: Logger = .disabled) {
        self.configuration = configuration
        self.logger = logger.named("bluez")
        (self.stream, self.continuation) = AsyncStream.makeStream(of: TransportEvent.self)
    }

    /// Adapter changes, meters appearing and disappearing, values, disconnections and passkey
    /// requests, in order; one stream for the transport's life.
    public func events() -> AsyncStream<TransportEvent> {
        self.stream
    }

    // MARK: The session

    /// Runs until the calling task is cancelled; the event stream finishes then.
    public func run() async {
        defer { self.continuation.finish() }
        while !Task.isCancelled {
            do {
                let connection = try await DBusConnection.connect(to: self.configuration.bus)
                self.logger.info("Connected to the system bus as \(connection.uniqueName).")
                await self.session(connection)
                connection.close()
                self.vanished(reason: "the D-Bus connection ended")
            } catch {
                self.logger.warning("Connecting to the system bus failed: \(error.message)")
                self.publishAdapter(.absent)
            }
            if Task.isCancelled { break }
            try? await Task.sleep(for: self.configuration.reconnectDelay)
        }
    }

    /// One bus connection's life: subscribes to BlueZ's signals, exports the pairing agent (only the
    /// owner of `org.bluez` may call it), follows the `org.bluez` owner, and runs discovery kicks,
    /// signal, agent-call and owner tasks until the connection drops or the task is cancelled.
    private func session(_ connection: DBusConnection) async {
        let signals: HandOffStream<DBusSignal>
        let owners: HandOffStream<String?>
        let agent: DBusExportedObject
        do {
            // Signals first, then the owner (whose appearance triggers GetManagedObjects): nothing is missed.
            signals = try await connection.signals(matching: DBusMatchRule(sender: "org.bluez"))
            // Only bluetoothd (whoever owns org.bluez now) may ask the agent for a passkey.
            agent = try await connection.exportObject(at: self.configuration.agentPath, trustedCaller: "org.bluez")
            owners = try await connection.nameOwnerChanges(of: "org.bluez")
        } catch {
            self.logger.warning("Subscribing to BlueZ failed: \(error.message)")
            return
        }
        let (kicks, kick) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.state.withLock {
            $0.connection = connection
            $0.discoveryKick = kick
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await connection.waitUntilDisconnected() }
            group.addTask {
                // Discovery follows the adapter: started when it appears or powers on while wanted.
                for await _ in kicks {
                    guard self.state.withLock({ $0.discoveryWanted && $0.bluezPresent }) else { continue }
                    do throws(TransportError) {
                        try await self.applyDiscovery(true)
                    } catch {
                        self.logger.warning("Starting discovery failed: \(error.message)")
                    }
                }
            }
            group.addTask { for await signal in signals { self.apply(signal) } }
            group.addTask { for await call in agent.calls { self.agentCall(call) } }
            group.addTask {
                for await owner in owners {
                    if let owner { await self.appeared(owner: owner, connection: connection) } else {
                        self.vanished(reason: "bluetoothd left the bus")
                    }
                }
            }
            _ = await group.next()
            group.cancelAll()
        }
        kick.finish()
        agent.unexport()
        self.state.withLock {
            $0.connection = nil
            $0.discoveryKick = nil
        }
    }

    /// org.bluez appeared (bluetoothd started or restarted): reload everything and register again.
    private func appeared(owner: String, connection: DBusConnection) async {
        let generation = self.state.withLock { state -> UInt64 in
            state.generation += 1
            state.bluezPresent = true
            state.loading = true
            state.deferredSignals = []
            return state.generation
        }
        self.logger.info("BlueZ is on the bus as \(owner).")
        var objects: [DBusValue] = []
        do {
            objects = try await connection.call(
                destination: "org.bluez", path: "/", interface: "org.freedesktop.DBus.ObjectManager",
                method: "GetManagedObjects", timeout: self.configuration.callTimeout)
        } catch {
            self.logger.warning("GetManagedObjects failed: \(error.message)")
        }
        var waiters: [CheckedContinuation<Bool, Never>] = []
        let events = self.state.withLock { state -> [TransportEvent] in
            guard state.generation == generation else { return [] }
            if let tree = objects.first { state.mirror.load(tree) }
            state.loading = false
            var events = self.refresh(&state)
            let deferred = state.deferredSignals
            state.deferredSignals = []
            for signal in deferred { events += self.applyLocked(signal, &state, &waiters) }
            return events
        }
        for waiter in waiters { waiter.resume(returning: true) }
        self.emit(events)
        do {
            _ = try await connection.call(
                destination: "org.bluez", path: "/org/bluez", interface: "org.bluez.AgentManager1",
                method: "RegisterAgent",
                arguments: [.objectPath(self.configuration.agentPath), .string("KeyboardDisplay")],
                timeout: self.configuration.callTimeout)
            _ = try await connection.call(
                destination: "org.bluez", path: "/org/bluez", interface: "org.bluez.AgentManager1",
                method: "RequestDefaultAgent", arguments: [.objectPath(self.configuration.agentPath)],
                timeout: self.configuration.callTimeout)
            self.logger.info("Pairing agent registered at \(self.configuration.agentPath) (KeyboardDisplay).")
        } catch {
            self.logger.warning("Registering the pairing agent failed: \(error.message)")
        }
    }

    /// org.bluez (or the bus) went away: everything known is stale.
    private func vanished(reason: String) {
        let (events, waiters, passkeys) = self.state.withLock { state in
            state.generation += 1
            let wasPresent = state.bluezPresent
            state.bluezPresent = false
            var events: [TransportEvent] = []
            for (path, _) in state.announced.sorted(by: { $0.key < $1.key }) {
                if let meter = state.mirror.advertisement(path)?.id,
                    state.mirror.properties(path, ObjectMirror.deviceInterface)?["Connected"]?.bool == true
                {
                    events.append(.disconnected(meter, reason: reason))
                }
            }
            state.mirror.removeAll()
            state.announced = [:]
            state.loading = false
            state.deferredSignals = []
            if wasPresent || state.adapterState != .absent {
                state.adapterState = .absent
                events.append(.adapter(.absent))
            }
            let waiters = state.resolvedWaiters.values.flatMap(\.values)
            state.resolvedWaiters = [:]
            let passkeys = Array(state.pendingPasskeys.values)
            state.pendingPasskeys = [:]
            return (events, waiters, passkeys)
        }
        if !events.isEmpty { self.logger.notice("BlueZ is gone: \(reason).") }
        for waiter in waiters { waiter.resume(returning: false) }
        for call in passkeys { call.reply(error: .remote("org.bluez.Error.Canceled", "BlueZ went away")) }
        self.emit(events)
    }

    /// Recomputes adapter state and meter announcements after the mirror changed.
    private func refresh(_ state: inout State) -> [TransportEvent] {
        var events: [TransportEvent] = []
        let adapter = state.mirror.adapterState(preferred: self.configuration.adapter)
        if adapter != state.adapterState {
            state.adapterState = adapter
            events.append(.adapter(adapter))
            if adapter.present, adapter.powered, !adapter.discovering, state.discoveryWanted {
                state.discoveryKick?.yield()
            }
        }
        let adapterPath = state.mirror.adapterPath(preferred: self.configuration.adapter)
        let meters = adapterPath == nil ? [] : state.mirror.meterPaths(adapter: adapterPath)
        for path in meters {
            guard let advertisement = state.mirror.advertisement(path) else { continue }
            if let previous = state.announced[path] {
                // Announce again only when the meter comes back into range (RSSI reappears).
                if previous == nil, advertisement.rssi != nil {
                    state.announced[path] = advertisement.rssi
                    events.append(.meterAppeared(advertisement))
                } else {
                    state.announced[path] = advertisement.rssi
                }
            } else {
                state.announced[path] = advertisement.rssi
                events.append(.meterAppeared(advertisement))
            }
        }
        for path in state.announced.keys.sorted() where !meters.contains(path) {
            state.announced.removeValue(forKey: path)
            events.append(.meterDisappeared(MeterID(rawValue: path)))
        }
        return events
    }

    /// Yields `events` in order.
    private func emit(_ events: [TransportEvent]) {
        for event in events { self.continuation.yield(event) }
    }

    /// Yields an adapter event when the state changed.
    private func publishAdapter(_ adapter: AdapterState) {
        let changed = self.state.withLock { state -> Bool in
            guard state.adapterState != adapter else { return false }
            state.adapterState = adapter
            return true
        }
        if changed { self.continuation.yield(.adapter(adapter)) }
    }

    // MARK: Signals

    /// Applies one signal from `org.bluez`, or defers it while `GetManagedObjects` is awaited.
    private func apply(_ signal: DBusSignal) {
        var waiters: [CheckedContinuation<Bool, Never>] = []
        let events = self.state.withLock { state -> [TransportEvent] in
            guard state.bluezPresent else { return [] }
            if state.loading {
                state.deferredSignals.append(signal)
                return []
            }
            return self.applyLocked(signal, &state, &waiters)
        }
        for waiter in waiters { waiter.resume(returning: true) }
        self.emit(events)
    }

    /// Applies one BlueZ signal to the mirror (the caller holds the lock); the events it causes.
    /// ServicesResolved waiters to resume (with true) are added to `waiters`.
    private func applyLocked(
        _ signal: DBusSignal, _ state: inout State, _ waiters: inout [CheckedContinuation<Bool, Never>]
    ) -> [TransportEvent] {
        var events: [TransportEvent] = []
        switch (signal.interface, signal.member) {
        case ("org.freedesktop.DBus.ObjectManager", "InterfacesAdded"):
            guard signal.arguments.count == 2, let path = signal.arguments[0].string else { return [] }
            state.mirror.add(path: path, interfaces: signal.arguments[1])
            events = self.refresh(&state)
        case ("org.freedesktop.DBus.ObjectManager", "InterfacesRemoved"):
            guard signal.arguments.count == 2, let path = signal.arguments[0].string,
                let interfaces = signal.arguments[1].strings
            else { return [] }
            state.mirror.remove(path: path, interfaces: interfaces)
            events = self.refresh(&state)
        case ("org.freedesktop.DBus.Properties", "PropertiesChanged"):
            guard signal.arguments.count >= 2, let interface = signal.arguments[0].string,
                let changed = signal.arguments[1].dictionary
            else { return [] }
            let invalidated = signal.arguments.count > 2 ? signal.arguments[2].strings ?? [] : []
            let path = signal.path
            let wasConnected = state.mirror.properties(path, ObjectMirror.deviceInterface)?["Connected"]?.bool
            guard state.mirror.update(path: path, interface: interface, changed: changed, invalidated: invalidated)
            else { return [] }
            switch interface {
            case ObjectMirror.characteristicInterface:
                if let value = changed["Value"]?.bytes, let owner = state.mirror.owner(ofCharacteristic: path),
                    state.announced[owner.device] != nil
                {
                    events.append(.value(MeterID(rawValue: owner.device), owner.uuid, value))
                }
            case ObjectMirror.deviceInterface:
                let meter = MeterID(rawValue: path)
                if changed["Connected"]?.bool == false, wasConnected == true, state.announced[path] != nil {
                    events.append(.disconnected(meter, reason: nil))
                }
                if changed["ServicesResolved"]?.bool == true, let pending = state.resolvedWaiters[path] {
                    state.resolvedWaiters.removeValue(forKey: path)
                    waiters += pending.values
                }
                let refreshed = self.refresh(&state)
                events += refreshed
                // An advertisement received (RSSI or advertising data updated) from a known meter that
                // is not connected: the meter woke up, so announce it again (the engine's cooldown
                // keeps this from syncing more often than it should).
                let advertised = ["RSSI", "ManufacturerData", "ServiceData"].contains { changed[$0] != nil }
                if advertised, state.announced[path] != nil,
                    state.mirror.properties(path, ObjectMirror.deviceInterface)?["Connected"]?.bool != true,
                    let advertisement = state.mirror.advertisement(path),
                    !refreshed.contains(.meterAppeared(advertisement))
                {
                    state.announced[path] = advertisement.rssi
                    events.append(.meterAppeared(advertisement))
                }
            default:
                events = self.refresh(&state)
            }
        default:
            break
        }
        return events
    }

    // MARK: The pairing agent (org.bluez.Agent1)

    /// Answers a call to the pairing agent: only from bluetoothd (others are refused and logged at
    /// most once a second); `RequestPasskey` waits for ``submitPasskey(_:for:)``, `Cancel` cancels
    /// the waiting ones, PIN codes are refused, other agent methods are accepted.
    private func agentCall(_ call: DBusIncomingCall) {
        guard call.isFromTrustedCaller else {
            // Any other peer could otherwise read the passkey typed into `sugarctl pair`.
            call.reply(error: .remote("org.bluez.Error.Rejected", "Only bluetoothd may call this pairing agent."))
            let now = ContinuousClock.now
            let held = self.state.withLock { state -> Int? in
                if let last = state.lastRefusalLogged, now - last < .seconds(1) {
                    state.refusedAgentCalls += 1
                    return nil
                }
                defer { state.refusedAgentCalls = 0 }
                state.lastRefusalLogged = now
                return state.refusedAgentCalls
            }
            if let held {
                self.logger.warning(
                    "Refused org.bluez.Agent1.\(call.member) from \(call.sender ?? "a peer without a name"): "
                        + "only bluetoothd, the owner of org.bluez, may call the pairing agent"
                        + (held > 0 ? " (and \(held) more refused calls since the last line)." : "."))
            }
            return
        }
        switch call.member {
        case "RequestPasskey":
            guard let device = call.arguments.first?.string else {
                call.reply(error: .remote("org.bluez.Error.Rejected", "RequestPasskey needs a device path."))
                return
            }
            let meter = MeterID(rawValue: device)
            let previous = self.state.withLock { state in
                let previous = state.pendingPasskeys[meter]
                state.pendingPasskeys[meter] = call
                return previous
            }
            previous?.reply(error: .remote("org.bluez.Error.Canceled", "Superseded by a new passkey request."))
            self.logger.notice("Meter \(meter) asks for the passkey it displays.")
            self.continuation.yield(.passkeyRequested(meter))
        case "Cancel":
            let pending = self.state.withLock { state in
                let calls = Array(state.pendingPasskeys.values)
                state.pendingPasskeys = [:]
                return calls
            }
            for call in pending { call.reply(error: .remote("org.bluez.Error.Canceled", "Pairing was cancelled.")) }
            try? call.reply()
        case "RequestPinCode":
            // Legacy PIN pairing is not something glucose meters (LE only) use.
            call.reply(error: .remote("org.bluez.Error.Rejected", "PIN code pairing is not supported."))
        case "Release", "DisplayPasskey", "DisplayPinCode", "RequestConfirmation", "RequestAuthorization",
            "AuthorizeService":
            try? call.reply()
        default:
            call.reply(error: .remote(DBusError.Names.unknownMethod, "org.bluez.Agent1 has no \(call.member)."))
        }
    }

    // MARK: MeterTransport

    /// Starts or stops discovery filtered to the meter services (LE only). The wish is kept: when
    /// BlueZ is not running, enabling throws `adapterUnavailable` and discovery starts once it runs.
    public func setDiscovery(_ enabled: Bool) async throws(TransportError) {
        let present = self.state.withLock { state -> Bool in
            state.discoveryWanted = enabled
            return state.bluezPresent
        }
        guard present else {
            if enabled { throw TransportError(.adapterUnavailable, "BlueZ is not running; discovery starts when it does.") }
            return
        }
        try await self.applyDiscovery(enabled)
    }

    /// Sets the discovery filter and starts discovery, or stops it, on the chosen adapter; "in
    /// progress" answers are fine.
    private func applyDiscovery(_ enabled: Bool) async throws(TransportError) {
        guard let adapter = self.state.withLock({ $0.mirror.adapterPath(preferred: self.configuration.adapter) }) else {
            throw TransportError(.adapterUnavailable, "No Bluetooth adapter is available.")
        }
        do {
            if enabled {
                _ = try await self.call(
                    adapter, ObjectMirror.adapterInterface, "SetDiscoveryFilter",
                    [.vardict(["UUIDs": .stringArray(ObjectMirror.meterServices), "Transport": .string("le")])],
                    what: "Setting the discovery filter")
                _ = try await self.call(adapter, ObjectMirror.adapterInterface, "StartDiscovery", what: "Starting discovery")
            } else {
                _ = try await self.call(adapter, ObjectMirror.adapterInterface, "StopDiscovery", what: "Stopping discovery")
            }
        } catch let error where error.message.contains("org.bluez.Error.InProgress") {
            return
        }
    }

    /// Connects (an existing connection is fine) and waits for ServicesResolved; returns the meter's
    /// characteristics. Throws `connectFailed` when BlueZ cannot connect or resolve in time.
    public func connect(_ meter: MeterID) async throws(TransportError) -> MeterServices {
        let device = try self.devicePath(meter)
        do {
            _ = try await self.call(device, ObjectMirror.deviceInterface, "Connect", what: "Connecting to \(meter)")
        } catch let error where error.code == .other && error.message.contains("AlreadyConnected") {
            // Connected already: fine.
        } catch let error where error.code == .other || error.code == .timeout {
            throw TransportError(.connectFailed, error.message)
        }
        guard await self.waitForServicesResolved(device) else {
            throw TransportError(.connectFailed, "\(meter) connected but its GATT services were not resolved in time.")
        }
        let characteristics = self.state.withLock { $0.mirror.characteristics(ofDevice: device).map(\.info) }
        return MeterServices(characteristics: characteristics)
    }

    /// Waits until the device's ServicesResolved is true (false on timeout or when BlueZ goes away).
    private func waitForServicesResolved(_ device: String) async -> Bool {
        let id = self.state.withLock { state -> UInt64 in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        let timeout = self.configuration.resolveTimeout
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                        let now = self.state.withLock { state -> Bool? in
                            guard state.bluezPresent, !Task.isCancelled else { return false }
                            let props = state.mirror.properties(device, ObjectMirror.deviceInterface)
                            if props?["ServicesResolved"]?.bool == true { return true }
                            state.resolvedWaiters[device, default: [:]][id] = continuation
                            return nil
                        }
                        if let now { continuation.resume(returning: now) }
                    }
                } onCancel: {
                    let waiter = self.state.withLock { $0.resolvedWaiters[device]?.removeValue(forKey: id) }
                    waiter?.resume(returning: false)
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    /// Pairs with the meter and marks it trusted. A second call while a pairing of the same meter is
    /// in flight (an automatic sync paired first, then `sugarctl pair`) waits for that pairing's
    /// outcome instead of starting another one.
    public func pair(_ meter: MeterID) async throws(TransportError) {
        let device = try self.devicePath(meter)
        let id = self.state.withLock { state -> UInt64? in
            guard state.pairings[device] != nil else {
                state.pairings[device] = [:]
                return nil
            }
            state.nextWaiter += 1
            return state.nextWaiter
        }
        if let id {
            self.logger.info("Pairing with \(meter) is already in progress; waiting for it.")
            if let error = await self.joinPairing(device, id: id) { throw error }
            return
        }
        var failure: TransportError?
        do {
            _ = try await self.call(
                device, ObjectMirror.deviceInterface, "Pair", timeout: self.configuration.pairTimeout,
                what: "Pairing with \(meter)")
        } catch let error where error.message.contains("org.bluez.Error.AlreadyExists") {
            // Bonded already.
        } catch {
            failure = error
        }
        if failure == nil {
            // Trusted lets the meter reconnect without the agent being asked for authorization.
            do {
                _ = try await self.call(
                    device, "org.freedesktop.DBus.Properties", "Set",
                    [.string(ObjectMirror.deviceInterface), .string("Trusted"), .variant(.bool(true))],
                    what: "Marking \(meter) trusted")
            } catch {
                self.logger.warning(error.message)
            }
            self.logger.notice("Paired with \(meter).")
        }
        let waiters = self.state.withLock { $0.pairings.removeValue(forKey: device) ?? [:] }
        for waiter in waiters.values { waiter.resume(returning: failure) }
        if let failure { throw failure }
    }

    /// Waits for the pairing in flight on `device`; its error, or nil when it paired.
    private func joinPairing(_ device: String, id: UInt64) async -> TransportError? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<TransportError?, Never>) in
                let outcome = self.state.withLock { state -> TransportError?? in
                    guard !Task.isCancelled else { return .some(TransportError(.cancelled, "Pairing was cancelled.")) }
                    guard state.pairings[device] != nil else {
                        // It ended between the check and now: the bond tells how.
                        let paired = state.mirror.properties(device, ObjectMirror.deviceInterface)?["Paired"]?.bool
                        return .some(paired == true ? nil : TransportError(.authenticationFailed, "The pairing in progress failed."))
                    }
                    state.pairings[device]?[id] = continuation
                    return .none
                }
                if case .some(let outcome) = outcome { continuation.resume(returning: outcome) }
            }
        } onCancel: {
            let waiter = self.state.withLock { $0.pairings[device]?.removeValue(forKey: id) }
            waiter?.resume(returning: TransportError(.cancelled, "Pairing was cancelled."))
        }
    }

    /// Answers the meter's waiting passkey request with `passkey`, or cancels it (nil). Throws when
    /// no request is waiting.
    public func submitPasskey(_ passkey: UInt32?, for meter: MeterID) async throws(TransportError) {
        guard let call = self.state.withLock({ $0.pendingPasskeys.removeValue(forKey: meter) }) else {
            throw TransportError(.other, "No passkey request from \(meter) is waiting for an answer.")
        }
        if let passkey {
            do {
                try call.reply([.uint32(passkey)])
            } catch {
                throw TransportError(.other, "Answering the passkey request failed: \(error.message)")
            }
        } else {
            call.reply(error: .remote("org.bluez.Error.Canceled", "The passkey entry was cancelled."))
        }
    }

    /// `ReadValue` of the characteristic (inside the Glucose service first when the UUID repeats).
    public func read(_ characteristic: BluetoothUUID, on meter: MeterID) async throws(TransportError) -> [UInt8] {
        let path = try self.characteristicPath(characteristic, meter)
        let reply = try await self.call(
            path, ObjectMirror.characteristicInterface, "ReadValue", [.vardict([:])],
            what: "Reading \(characteristic.shortString) on \(meter)")
        guard let bytes = reply.first?.bytes else {
            throw TransportError(.other, "Reading \(characteristic.shortString) on \(meter) returned no byte array.")
        }
        return bytes
    }

    /// `StartNotify` or `StopNotify`. Enabling an already notifying characteristic stops it first so
    /// that BlueZ writes the CCCD again (after a meter answered ATT 0x81).
    public func setNotifications(_ enabled: Bool, for characteristic: BluetoothUUID, on meter: MeterID)
        async throws(TransportError)
    {
        let path = try self.characteristicPath(characteristic, meter)
        let notifying = self.state.withLock {
            $0.mirror.properties(path, ObjectMirror.characteristicInterface)?["Notifying"]?.bool == true
        }
        if enabled, notifying {
            // Enabling again (the meter answered ATT 0x81 "CCCD improperly configured"): BlueZ only writes
            // the CCCD when the first subscriber starts, so stop and start to make it write it again.
            _ = try? await self.call(
                path, ObjectMirror.characteristicInterface, "StopNotify",
                what: "Disabling notifications of \(characteristic.shortString) on \(meter)")
        }
        _ = try await self.call(
            path, ObjectMirror.characteristicInterface, enabled ? "StartNotify" : "StopNotify",
            what: "\(enabled ? "Enabling" : "Disabling") notifications of \(characteristic.shortString) on \(meter)")
    }

    /// `WriteValue` as a write request (acknowledged), not a command.
    public func write(_ value: [UInt8], to characteristic: BluetoothUUID, on meter: MeterID) async throws(TransportError) {
        let path = try self.characteristicPath(characteristic, meter)
        _ = try await self.call(
            path, ObjectMirror.characteristicInterface, "WriteValue",
            [.bytes(value), .vardict(["type": .string("request")])], what: "Writing \(characteristic.shortString) on \(meter)")
    }

    /// `Disconnect`, best effort (errors ignored).
    public func disconnect(_ meter: MeterID) async {
        guard let device = try? self.devicePath(meter) else { return }
        _ = try? await self.call(device, ObjectMirror.deviceInterface, "Disconnect", what: "Disconnecting \(meter)")
    }

    // MARK: Helpers

    /// The meter's device object below the chosen adapter; throws `adapterUnavailable` or `meterNotFound`.
    private func devicePath(_ meter: MeterID) throws(TransportError) -> String {
        let (present, path) = self.state.withLock { state in
            (
                state.bluezPresent,
                state.mirror.devicePath(
                    for: meter, adapter: state.mirror.adapterPath(preferred: self.configuration.adapter))
            )
        }
        guard present else { throw TransportError(.adapterUnavailable, "BlueZ is not running.") }
        guard let path else { throw TransportError(.meterNotFound, "BlueZ does not know the meter \(meter).") }
        return path
    }

    /// The characteristic's object on a connected meter; throws `notConnected` or `characteristicNotFound`.
    private func characteristicPath(_ uuid: BluetoothUUID, _ meter: MeterID) throws(TransportError) -> String {
        let device = try self.devicePath(meter)
        let (connected, path) = self.state.withLock { state in
            (
                state.mirror.properties(device, ObjectMirror.deviceInterface)?["Connected"]?.bool ?? false,
                state.mirror.characteristicPath(uuid, ofDevice: device)
            )
        }
        guard connected else { throw TransportError(.notConnected, "\(meter) is not connected.") }
        guard let path else {
            throw TransportError(.characteristicNotFound, "\(meter) has no characteristic \(uuid.shortString).")
        }
        return path
    }

    /// Calls a BlueZ method with the configured timeout (or `timeout`), errors mapped by
    /// ``transportError(_:what:)``; throws `adapterUnavailable` while BlueZ is not running.
    private func call(
        _ path: String, _ interface: String, _ method: String, _ arguments: [DBusValue] = [],
        timeout: Duration? = nil, what: String
    ) async throws(TransportError) -> [DBusValue] {
        guard let connection = self.state.withLock({ $0.bluezPresent ? $0.connection : nil }) else {
            throw TransportError(.adapterUnavailable, "\(what) failed: BlueZ is not running.")
        }
        do {
            return try await connection.call(
                destination: "org.bluez", path: path, interface: interface, method: method, arguments: arguments,
                timeout: timeout ?? self.configuration.callTimeout)
        } catch {
            throw BlueZTransport.transportError(error, what: what)
        }
    }

    /// Maps BlueZ's D-Bus errors (src/error.c, src/gatt-client.c) to transport errors.
    public static func mapError(_ error: DBusError, what: String) -> TransportError {
        self.transportError(error, what: what)
    }

    /// The mapping behind ``mapError(_:what:)``: timeouts, cancellation and a lost bus by kind, BlueZ's
    /// error names by name (authentication, not connected, not ready, ATT errors in `Failed`), BlueZ
    /// gone as `adapterUnavailable`; anything else `other` with the full detail.
    static func transportError(_ error: DBusError, what: String) -> TransportError {
        let detail = "\(what) failed: \(error.name): \(error.message)"
        switch error.kind {
        case .timeout: return TransportError(.timeout, "\(what) timed out.")
        case .cancelled: return TransportError(.cancelled, "\(what) was cancelled.")
        case .disconnected: return TransportError(.adapterUnavailable, "\(what) failed: the system bus is gone.")
        case .invalidArgument, .invalidMessage, .invalidState, .connectionFailed: return TransportError(.other, detail)
        case .remote: break
        }
        let bluez = "org.bluez.Error."
        switch error.name {
        case bluez + "NotPermitted", bluez + "NotAuthorized":
            let text = error.message.lowercased()
            if text.contains("paired") || text.contains("authenticat") || text.contains("encrypt") {
                return TransportError(.authenticationRequired, detail)
            }
            return TransportError(.other, detail)
        case bluez + "AuthenticationFailed", bluez + "AuthenticationRejected", bluez + "AuthenticationCanceled",
            bluez + "AuthenticationTimeout":
            return TransportError(.authenticationFailed, detail)
        case bluez + "NotConnected":
            return TransportError(.notConnected, detail)
        case bluez + "NotReady":
            return TransportError(.adapterUnavailable, detail)
        case bluez + "ConnectionAttemptFailed":
            return TransportError(.connectFailed, detail)
        case bluez + "Failed", "org.bluez.Error":
            if let code = Self.attErrorCode(error.message) {
                return TransportError(.attError, detail, attError: code)
            }
            if error.message.lowercased().contains("not connected") { return TransportError(.notConnected, detail) }
            return TransportError(.other, detail)
        case DBusError.Names.serviceUnknown, DBusError.Names.nameHasNoOwner, DBusError.Names.noReply:
            return TransportError(.adapterUnavailable, "\(what) failed: BlueZ went away (\(error.name)).")
        case DBusError.Names.unknownObject, DBusError.Names.unknownMethod:
            return TransportError(.notConnected, "\(what) failed: the object is gone (\(error.message)).")
        default:
            return TransportError(.other, detail)
        }
    }

    /// `NN` from "Operation failed with ATT error: 0xNN".
    static func attErrorCode(_ message: String) -> UInt8? {
        guard let range = message.firstRange(of: "ATT error: 0x") else { return nil }
        let digits = message[range.upperBound...].prefix { $0.isHexDigit }
        return UInt8(digits, radix: 16)
    }
}
