import Glibc
import GlucoseProfile
import HealthDataSync
import PacketCapture
import Locking
import SystemIO

/// A ``MeterTransport`` whose meters are simulators: built from a personality, or from a btsnoop capture
/// (``meter(fromCapture:handleOverrides:passkey:)``), which then plays back its recorded records byte for
/// byte. It answers the sync engine's reads and writes as a live meter would, BlueZ-like: notifications
/// and indications caused by a write are delivered before the write returns (with no delay set).
///
/// Events: the adapter (present, powered) and one `meterAppeared` per meter are queued at creation;
/// adding a meter or a record queues `meterAppeared` again, so an engine with automatic sync picks the
/// new reading up. `passkeyRequested` comes during ``pair(_:)`` for a passkey meter, answered with
/// ``submitPasskey(_:for:)``. A simulated link drop yields `disconnected`.
///
/// Errors follow BlueZ's meaning: `authenticationRequired` (ATT 0x05) on glucose characteristics before
/// pairing, `authenticationFailed` for a wrong passkey, `attError` with the code for ATT errors (RACP
/// 0x80/0x81…), `notConnected`/`disconnected` without a link, `characteristicNotFound` for a UUID the
/// meter lacks, `meterNotFound` for an unknown meter.
///
/// With ``Options/operationDelay`` above zero every operation waits that long and report records
/// trickle in one per delay from a delivery task, like a real meter (the demo looks alive); while
/// one runs, another RACP request gets ATT 0x80 (procedure already in progress) and abort stops it.
/// Every task is owned by the transport and cancelled by ``shutdown()``.
public final class ReplayTransport: MeterTransport, Sendable {
    /// Knobs.
    public struct Options: Sendable {
        /// Wait before each operation and between report packets (default none).
        public var operationDelay: Duration
        /// The adapter name in `adapter` events.
        public var adapterName: String
        /// When set, meter clocks read this (the host's local time) instead of the personality's value.
        public var clock: (@Sendable () -> DateTime)?
        /// The wall clock in Unix microseconds, for meters whose clock runs (``MeterPersonality/clockReference``,
        /// set for meters made from a capture). Defaults to the system's real-time clock.
        public var wallClock: @Sendable () -> Int64

        /// Options with no delay, adapter `replay`, the personalities' clocks and the system wall clock.
        public init(
            operationDelay: Duration = .zero, adapterName: String = "replay", clock: (@Sendable () -> DateTime)? = nil,
            wallClock: @escaping @Sendable () -> Int64 = ReplayTransport.systemMicroseconds
        ) {
            self.operationDelay = operationDelay
            self.adapterName = adapterName
            self.clock = clock
            self.wallClock = wallClock
        }
    }

    /// One hosted meter: its simulator, the passkey a pairing waits for, and the task delivering a report.
    private struct Slot {
        /// The meter's model.
        var simulator: MeterSimulator
        /// Feeds ``submitPasskey(_:for:)``'s answer to the waiting ``pair(_:)``.
        var passkeyInput: AsyncStream<UInt32?>.Continuation?
        /// The task trickling a write's outputs out (with a delay); nil when none runs.
        var delivery: Task<Void, Never>?
        /// Bumps on every connection so a stale delivery task stops.
        var generation = 0
    }

    /// Everything behind the transport's lock.
    private struct State {
        /// The hosted meters.
        var slots: [MeterID: Slot] = [:]
        /// Their ids in the order they were added.
        var order: [MeterID] = []
        /// Discovery is on (for the adapter events).
        var discovering = false
        /// ``setAdapterPresent(_:)`` took the adapter away.
        var adapterAbsent = false
        /// ``shutdown()`` ran: every operation fails.
        var shutDown = false
        /// Where events go; nil after shutdown.
        var continuation: AsyncStream<TransportEvent>.Continuation?
    }

    /// The options given at creation.
    public let options: Options
    /// The hosted meters and the transport's state.
    private let state: Lock<State>
    /// The one event stream (unbounded: events queued before anyone listens are kept).
    private let stream: AsyncStream<TransportEvent>

    /// - Parameters:
    ///   - meters: the meters to host (more can be added with ``addMeter(_:)``).
    public init(meters: [MeterSimulator] = [], options: Options = Options()) {
        self.options = options
        let (stream, continuation) = AsyncStream.makeStream(of: TransportEvent.self, bufferingPolicy: .unbounded)
        self.stream = stream
        self.state = Lock(State(continuation: continuation))
        continuation.yield(.adapter(self.adapterState(discovering: false)))
        for meter in meters { self.addMeter(meter) }
    }

    /// A present, powered adapter named as the options say.
    private func adapterState(discovering: Bool) -> AdapterState {
        AdapterState(present: true, powered: true, discovering: discovering, name: self.options.adapterName)
    }

    // MARK: - Hosting meters

    /// Hosts a meter (replacing one with the same id) and announces it.
    public func addMeter(_ simulator: MeterSimulator) {
        self.state.withLock { state in
            if state.slots[simulator.id] == nil { state.order.append(simulator.id) }
            state.slots[simulator.id]?.delivery?.cancel()
            state.slots[simulator.id] = Slot(simulator: simulator)
            state.continuation?.yield(.meterAppeared(self.advertisement(simulator)))
        }
    }

    /// Stops hosting a meter and announces that it is gone.
    public func removeMeter(_ id: MeterID) {
        self.state.withLock { state in
            guard let slot = state.slots.removeValue(forKey: id) else { return }
            slot.delivery?.cancel()
            slot.passkeyInput?.finish()
            state.order.removeAll { $0 == id }
            state.continuation?.yield(.meterDisappeared(id))
        }
    }

    /// The adapter goes away (unplugged, bluetoothd stopped) or comes back, as BlueZ reports it:
    /// an `adapter` event; while it is away, connecting fails with `adapterUnavailable`.
    public func setAdapterPresent(_ present: Bool) {
        self.state.withLock { state in
            state.adapterAbsent = !present
            state.continuation?.yield(.adapter(present ? self.adapterState(discovering: state.discovering) : .absent))
        }
    }

    /// The hosted meters, in the order they were added.
    public var meterIDs: [MeterID] { self.state.withLock { $0.order } }

    /// A copy of a hosted meter's simulator (records, bond, faults).
    public func simulator(_ id: MeterID) -> MeterSimulator? {
        self.state.withLock { $0.slots[id]?.simulator }
    }

    /// Changes a hosted meter (faults, bond, clock…) in place.
    public func updateMeter(_ id: MeterID, _ body: (inout MeterSimulator) -> Void) {
        self.state.withLock { state in
            guard state.slots[id] != nil else { return }
            body(&state.slots[id]!.simulator)
        }
    }

    /// The meter takes a new reading (next sequence number) and advertises again, so a sync can follow.
    /// - Returns: the record's sequence number, nil for an unknown meter.
    @discardableResult
    public func addReading(_ measurement: GlucoseMeasurement, context: MeasurementContext? = nil, to id: MeterID) -> UInt16? {
        self.state.withLock { state -> UInt16? in
            guard state.slots[id] != nil else { return nil }
            let seq = state.slots[id]!.simulator.addRecord(measurement, context: context)
            state.continuation?.yield(.meterAppeared(self.advertisement(state.slots[id]!.simulator)))
            return seq
        }
    }

    /// A plain capillary finger-stick reading in mg/dL (kg/L on the wire, as most meters send), for demos.
    /// - Parameters:
    ///   - time: the meter's local wall-clock time of the test (Base Time; no offset).
    ///   - meal: an optional context meal code (1 preprandial, 2 postprandial, 3 fasting…).
    /// - Returns: the record's sequence number, nil for an unknown meter.
    @discardableResult
    public func addReading(mgdL: Int, at time: DateTime, meal: Meal? = nil, to id: MeterID) -> UInt16? {
        let mantissa = UInt16(clamping: max(0, min(mgdL, SFloat.maximumMantissa)))
        let measurement = GlucoseMeasurement(
            sequenceNumber: 0, baseTime: time, concentration: SFloat(rawValue: 0xB000 | mantissa),
            unit: .kilogramsPerLiter, type: .capillaryPlasma, sampleLocation: .finger)
        return self.addReading(measurement, context: meal.map { MeasurementContext(sequenceNumber: 0, meal: $0) }, to: id)
    }

    /// The meter as discovery reports it (RSSI −60, paired when bonded).
    private func advertisement(_ simulator: MeterSimulator) -> MeterAdvertisement {
        MeterAdvertisement(id: simulator.id, name: simulator.personality.name, rssi: -60, paired: simulator.isBonded)
    }

    /// Ends the event stream, cancels every delivery task and waits for them, and fails pending pairings.
    /// Safe to call twice.
    public func shutdown() async {
        let tasks = self.state.withLock { state -> [Task<Void, Never>] in
            state.shutDown = true
            var tasks: [Task<Void, Never>] = []
            for id in state.slots.keys {
                if let task = state.slots[id]!.delivery { tasks.append(task) }
                state.slots[id]!.delivery?.cancel()
                state.slots[id]!.delivery = nil
                state.slots[id]!.passkeyInput?.finish()
                state.slots[id]!.passkeyInput = nil
            }
            state.continuation?.finish()
            state.continuation = nil
            return tasks
        }
        for task in tasks { await task.value }
    }

    // MARK: - MeterTransport

    /// The transport's events (see the type's description); one stream for its life.
    public func events() -> AsyncStream<TransportEvent> { self.stream }

    /// Turns discovery on or off; turning it on announces every hosted meter again.
    public func setDiscovery(_ enabled: Bool) async throws(TransportError) {
        try self.checkRunning()
        self.state.withLock { state in
            state.discovering = enabled
            state.continuation?.yield(.adapter(self.adapterState(discovering: enabled)))
            if enabled {
                for id in state.order { state.continuation?.yield(.meterAppeared(self.advertisement(state.slots[id]!.simulator))) }
            }
        }
    }

    /// Connects (a no-op when connected), setting the meter's clock from the options' clock or its
    /// running reference unless a sync set it; returns its services.
    public func connect(_ meter: MeterID) async throws(TransportError) -> MeterServices {
        try await self.pause()
        return try self.withSlot(meter) { slot throws(TransportError) in
            slot.generation += 1
            slot.delivery?.cancel()
            slot.delivery = nil
            if slot.simulator.isConnected { return slot.simulator.services }
            if slot.simulator.clockWasSet {
                // Set by a sync: it shows what was written (the override is the meter's old clock).
            } else if let clock = self.options.clock {
                slot.simulator.clockValue = clock()
            } else if let reference = slot.simulator.personality.clockReference,
                let shown = slot.simulator.personality.clock.value
            {
                slot.simulator.clockValue = Self.advance(shown, bySeconds: (self.options.wallClock() - reference) / 1_000_000)
            }
            return slot.simulator.connect()
        }
    }

    /// Pairs like BlueZ's `Device1.Pair`: connects first when the meter is not connected (and
    /// disconnects again afterwards), asks for the passkey through `passkeyRequested` for a passkey
    /// meter that is not bonded, and bonds.
    public func pair(_ meter: MeterID) async throws(TransportError) {
        try await self.pause()
        enum Plan {
            case done
            case ask(AsyncStream<UInt32?>)
        }
        var connectedHere = false
        let plan = try self.withSlot(meter) { slot throws(TransportError) -> Plan in
            if !slot.simulator.isConnected {
                _ = slot.simulator.connect()
                connectedHere = true
            }
            guard case .passkey = slot.simulator.personality.pairing, !slot.simulator.isBonded else {
                _ = slot.simulator.pair(passkey: nil)
                return .done
            }
            let (stream, input) = AsyncStream.makeStream(of: UInt32?.self)
            slot.passkeyInput?.finish()
            slot.passkeyInput = input
            return .ask(stream)
        }
        guard case .ask(let stream) = plan else {
            if connectedHere { await self.disconnect(meter) }
            return
        }
        do throws(TransportError) {
            try await self.awaitPasskey(stream, meter: meter)
        } catch {
            if connectedHere { await self.disconnect(meter) }
            throw error
        }
        if connectedHere { await self.disconnect(meter) }
    }

    /// Announces `passkeyRequested`, waits for the answer and pairs with it: `authenticationFailed`
    /// for a wrong passkey or a cancelled entry, `cancelled` when the wait ended without an answer,
    /// `disconnected` when the link dropped meanwhile.
    private func awaitPasskey(_ stream: AsyncStream<UInt32?>, meter: MeterID) async throws(TransportError) {
        self.emit(.passkeyRequested(meter))
        var iterator = stream.makeAsyncIterator()
        let answer = await iterator.next()
        guard let answer else {
            throw TransportError(.cancelled, "Pairing with \(meter) was cancelled before a passkey came.")
        }
        guard let passkey = answer else {
            throw TransportError(.authenticationFailed, "Pairing with \(meter) was cancelled (no passkey).")
        }
        try self.withSlot(meter) { slot throws(TransportError) in
            slot.passkeyInput = nil
            guard slot.simulator.isConnected else {
                throw TransportError(.disconnected, "\(meter) disconnected during pairing.")
            }
            if slot.simulator.pair(passkey: passkey) == .wrongPasskey {
                throw TransportError(.authenticationFailed, "\(meter) rejected the passkey (authentication failed).")
            }
        }
    }

    /// Answers the pairing waiting for the meter's passkey (nil cancels the entry).
    public func submitPasskey(_ passkey: UInt32?, for meter: MeterID) async throws(TransportError) {
        let input = self.state.withLock { $0.slots[meter]?.passkeyInput }
        guard let input else { throw TransportError(.other, "\(meter) is not waiting for a passkey.") }
        input.yield(passkey)
        input.finish()
    }

    /// Reads a characteristic of a connected meter; ATT errors as the type describes.
    public func read(_ characteristic: BluetoothUUID, on meter: MeterID) async throws(TransportError) -> [UInt8] {
        try await self.pause()
        return try self.withSlot(meter) { slot throws(TransportError) -> [UInt8] in
            guard slot.simulator.isConnected else { throw TransportError(.notConnected, "\(meter) is not connected.") }
            guard let handle = slot.simulator.valueHandle(characteristic) else {
                throw TransportError(.characteristicNotFound, "\(meter) has no characteristic \(characteristic.shortString).")
            }
            switch slot.simulator.read(handle) {
            case .value(let value): return value
            case .error(let error): throw Self.error(error, "Reading \(characteristic.shortString) on \(meter)")
            }
        }
    }

    /// Writes the characteristic's CCCD on a connected meter.
    public func setNotifications(
        _ enabled: Bool, for characteristic: BluetoothUUID, on meter: MeterID
    ) async throws(TransportError) {
        try await self.pause()
        try self.withSlot(meter) { slot throws(TransportError) in
            guard slot.simulator.isConnected else { throw TransportError(.notConnected, "\(meter) is not connected.") }
            guard slot.simulator.cccdHandle(characteristic) != nil else {
                throw TransportError(.characteristicNotFound, "\(meter) cannot notify \(characteristic.shortString).")
            }
            let result = slot.simulator.setNotifications(enabled, for: characteristic)
            if let error = result.error { throw Self.error(error, "Subscribing to \(characteristic.shortString) on \(meter)") }
        }
    }

    /// Writes a value on a connected meter. Without a delay the outputs it causes are emitted before
    /// this returns; with one, a delivery task emits them one per delay (reports streamed a record
    /// at a time), and another RACP write while it runs gets ATT 0x80 (an abort stops it).
    public func write(
        _ value: [UInt8], to characteristic: BluetoothUUID, on meter: MeterID
    ) async throws(TransportError) {
        try await self.pause()
        let delay = self.options.operationDelay
        let outputs = try self.withSlot(meter) { slot throws(TransportError) -> [SimulatorOutput] in
            guard slot.simulator.isConnected else { throw TransportError(.notConnected, "\(meter) is not connected.") }
            guard let handle = slot.simulator.valueHandle(characteristic) else {
                throw TransportError(.characteristicNotFound, "\(meter) has no characteristic \(characteristic.shortString).")
            }
            let isAbort = value.first == RACPOpCode.abortOperation.rawValue
            if characteristic == .recordAccessControlPoint, let running = slot.delivery {
                if !isAbort {
                    throw TransportError(.attError, "\(meter) is still sending the previous RACP procedure.", attError: 0x80)
                }
                running.cancel()
                slot.delivery = nil
            }
            // With a delay, a record report is streamed: the simulator hands out one record at a
            // time, so no report is ever held whole (100 000 records would be megabytes).
            let result = slot.simulator.write(handle, value, streamingReports: delay > .zero)
            if let error = result.error { throw Self.error(error, "Writing \(characteristic.shortString) on \(meter)") }
            return result.outputs
        }
        let streaming = delay > .zero && self.state.withLock { $0.slots[meter]?.simulator.isStreamingReport == true }
        guard !outputs.isEmpty || streaming else { return }
        if delay == .zero {
            // BlueZ-like: the values a write causes may arrive before the write returns.
            for output in outputs { self.emit(output, meter: meter) }
            return
        }
        self.state.withLock { state in
            guard !state.shutDown, let generation = state.slots[meter]?.generation else { return }
            let task = Task { [self] in
                var queue = outputs[...]
                while true {
                    if queue.isEmpty, streaming {
                        // The next record of the report (or its end), if this delivery is still current.
                        queue = self.state.withLock { state -> [SimulatorOutput] in
                            guard state.slots[meter]?.generation == generation else { return [] }
                            return state.slots[meter]?.simulator.nextReportOutputs() ?? []
                        }[...]
                    }
                    guard let output = queue.popFirst() else { break }
                    do {
                        try await Task.sleep(for: delay)
                    } catch {
                        return
                    }
                    let current = self.state.withLock { $0.slots[meter]?.generation }
                    guard current == generation else { return }
                    self.emit(output, meter: meter)
                }
                self.state.withLock { state in
                    if state.slots[meter]?.generation == generation { state.slots[meter]?.delivery = nil }
                }
            }
            state.slots[meter]?.delivery = task
        }
    }

    /// Drops the link: stops a delivery in progress and a waiting pairing.
    public func disconnect(_ meter: MeterID) async {
        self.state.withLock { state in
            guard state.slots[meter] != nil else { return }
            state.slots[meter]!.generation += 1
            state.slots[meter]!.delivery?.cancel()
            state.slots[meter]!.delivery = nil
            state.slots[meter]!.passkeyInput?.finish()
            state.slots[meter]!.passkeyInput = nil
            state.slots[meter]!.simulator.disconnect()
        }
    }

    // MARK: - Helpers

    /// The system's real-time clock in Unix microseconds.
    public static let systemMicroseconds: @Sendable () -> Int64 = { wallClockMicroseconds() }

    /// A wall-clock date-time moved by whole seconds (unknown dates stay as they are).
    static func advance(_ time: DateTime, bySeconds seconds: Int64) -> DateTime {
        guard time.isDateKnown, time.isValid else { return time }
        let local = LocalDateTime(
            year: Int(time.year), month: Int(time.month), day: Int(time.day), hour: Int(time.hours),
            minute: Int(time.minutes), second: Int(time.seconds)
        ).adding(seconds: seconds)
        return DateTime(
            year: UInt16(clamping: local.year), month: UInt8(clamping: local.month), day: UInt8(clamping: local.day),
            hours: UInt8(clamping: local.hour), minutes: UInt8(clamping: local.minute), seconds: UInt8(clamping: local.second))
    }

    /// Throws `adapterUnavailable` after shutdown.
    private func checkRunning() throws(TransportError) {
        if self.state.withLock({ $0.shutDown }) {
            throw TransportError(.adapterUnavailable, "The replay transport has shut down.")
        }
    }

    /// Waits the operation delay (none by default); `cancelled` when the task is cancelled.
    private func pause() async throws(TransportError) {
        try self.checkRunning()
        guard self.options.operationDelay > .zero else { return }
        do {
            try await Task.sleep(for: self.options.operationDelay)
        } catch {
            throw TransportError(.cancelled, "The operation was cancelled.")
        }
    }

    /// Runs `body` on the meter's slot under the lock; throws for a shut-down transport, an absent
    /// adapter or an unknown meter.
    private func withSlot<R>(
        _ meter: MeterID, _ body: (inout Slot) throws(TransportError) -> R
    ) throws(TransportError) -> R {
        try self.state.withLock { (state: inout State) throws(TransportError) -> R in
            guard !state.shutDown else { throw TransportError(.adapterUnavailable, "The replay transport has shut down.") }
            guard !state.adapterAbsent else { throw TransportError(.adapterUnavailable, "The adapter is gone.") }
            guard state.slots[meter] != nil else { throw TransportError(.meterNotFound, "No replay meter \(meter).") }
            return try body(&state.slots[meter]!)
        }
    }

    /// Yields an event, unless shut down.
    private func emit(_ event: TransportEvent) {
        _ = self.state.withLock { $0.continuation?.yield(event) }
    }

    /// Turns a simulator output into the transport event the engine sees.
    private func emit(_ output: SimulatorOutput, meter: MeterID) {
        switch output {
        case .notification(_, let uuid, let value), .indication(_, let uuid, let value):
            self.emit(.value(meter, uuid, value))
        case .disconnected(let reason):
            self.emit(.disconnected(meter, reason: "the meter dropped the link (HCI reason 0x\(String(reason, radix: 16)))"))
        }
    }

    /// An ATT error as BlueZ reports it: `authenticationRequired` for the insufficient-security codes,
    /// `attError` with the code otherwise.
    static func error(_ code: ATTErrorCode, _ what: String) -> TransportError {
        switch code {
        case .insufficientAuthentication, .insufficientEncryption, .insufficientAuthorization:
            TransportError(.authenticationRequired, "\(what) needs a bond: pair first (ATT \(code)).", attError: code.rawValue)
        default:
            TransportError(.attError, "\(what) failed with ATT error 0x\(String(code.rawValue, radix: 16)) (\(code)).",
                           attError: code.rawValue)
        }
    }
}
