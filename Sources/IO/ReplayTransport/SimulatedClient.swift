import GlucoseProfile
import HealthDataSync
import PacketCapture

/// A deterministic central that runs the production download (``SyncStateMachine``: the Glucose Profile
/// procedure, or the Verio one for a Verio, and the clock write after a complete download) against a
/// ``MeterSimulator``, synchronously: each action the machine returns is carried out on the simulator
/// and its result fed back as the event the sync engine would feed. The order of operations is the
/// machine's; this type only translates. Used to record fixture captures (see
/// ``MeterSimulator/startRecording(format:)``).
public enum SimulatedClient {
    /// What the download saw.
    public struct Transcript: Sendable, Hashable {
        /// Notification values, in order.
        public var notifications: [[UInt8]] = []
        /// Indication values, in order.
        public var indications: [[UInt8]] = []
        /// ATT errors the meter answered with.
        public var errors: [ATTErrorCode] = []
        /// A pairing succeeded.
        public var bonded = false
    }

    /// Runs sync attempts until one does not end in a failed pairing, or the passkeys run out.
    ///
    /// Each attempt is one connection driven wholly by ``SyncStateMachine``, which pairs at most once
    /// per attempt: a rejected passkey ends the attempt as `pairingFailed` and disconnects. Production
    /// does not retry that by itself (``SyncPolicy/isTransient(_:)`` is false for `pairingFailed`, so
    /// ``SyncEngine`` schedules no retry); the user starts a new sync (`sugarctl pair` / `sync`) and
    /// enters the next passkey on the new connection. This loop stands for that user: the next attempt
    /// gets the next passkey. It is the only step this driver adds.
    /// - Parameters:
    ///   - passkeys: passkeys entered, one per attempt that asks for one.
    ///   - highWater: the stored high-water sequence number; nil for a new meter.
    ///   - zone: the zone meter clocks are resolved in (and a clock set to).
    ///   - now: the instant the client thinks it is; a settable meter clock off by more than the tolerance
    ///     from it is set after the download, as the daemon does.
    @discardableResult
    public static func download(
        _ meter: inout MeterSimulator, passkeys: [UInt32] = [], highWater: UInt16? = nil, zone: TimeZoneRules = .utc,
        now: Instant = Instant(epochMillis: 0)
    ) -> Transcript {
        var transcript = Transcript()
        var keys = passkeys[...]
        while true {
            let passkey = keys.popFirst()
            let result = Self.attempt(&meter, passkey: passkey, highWater: highWater, zone: zone, now: now, &transcript)
            if result != .pairingFailed || keys.isEmpty { return transcript }
        }
    }

    /// One sync attempt (one connection), with at most one passkey entered; returns how it ended.
    private static func attempt(
        _ meter: inout MeterSimulator, passkey: UInt32?, highWater: UInt16?, zone: TimeZoneRules, now: Instant,
        _ transcript: inout Transcript
    ) -> SyncFailure.Code? {
        var ended: SyncFailure.Code?
        var machine = SyncStateMachine(.init(
            meter: meter.id, advertisedName: meter.personality.name, highWater: highWater, zone: zone))
        var events: [SyncEvent] = [.start]
        while !events.isEmpty {
            let event = events.removeFirst()
            for action in machine.handle(event, at: now) {
                switch action {
                case .connect:
                    events.append(.connected(meter.connect(clientMTU: 517)))
                case .pair:
                    if meter.pair(passkey: passkey) == .bonded {
                        transcript.bonded = true
                        events.append(.paired)
                    } else {
                        events.append(.pairingFailed(TransportError(.authenticationFailed, "wrong passkey")))
                    }
                case .read(let uuid):
                    guard let handle = meter.valueHandle(uuid) else {
                        events.append(.readFailed(uuid, TransportError(.characteristicNotFound, "no \(uuid.shortString)")))
                        break
                    }
                    switch meter.read(handle) {
                    case .value(let value): events.append(.readCompleted(uuid, value))
                    case .error(let error):
                        transcript.errors.append(error)
                        events.append(.readFailed(uuid, ReplayTransport.error(error, "Reading \(uuid.shortString)")))
                    }
                case .enableNotifications(let uuid):
                    let result = meter.setNotifications(true, for: uuid)
                    if let error = result.error {
                        transcript.errors.append(error)
                        events.append(.notificationsFailed(uuid, ReplayTransport.error(error, "Subscribing")))
                    } else {
                        events.append(.notificationsEnabled(uuid))
                    }
                case .write(let bytes, let uuid):
                    guard let handle = meter.valueHandle(uuid) else {
                        events.append(.characteristicWriteFailed(uuid, TransportError(.characteristicNotFound, "no \(uuid.shortString)")))
                        break
                    }
                    let result = meter.write(handle, bytes)
                    if let error = result.error {
                        transcript.errors.append(error)
                        events.append(.characteristicWriteFailed(uuid, ReplayTransport.error(error, "Writing \(uuid.shortString)")))
                        break
                    }
                    Self.deliver(result.outputs, &events, &transcript)
                    events.append(.characteristicWritten(uuid))
                case .writeRACP(let bytes, let purpose):
                    let result = meter.writeRACP(bytes)
                    if let error = result.error {
                        transcript.errors.append(error)
                        events.append(.writeFailed(purpose, ReplayTransport.error(error, "Writing RACP")))
                        break
                    }
                    Self.deliver(result.outputs, &events, &transcript)
                    events.append(.writeCompleted(purpose))
                case .lookUpStored:
                    events.append(.storedLookup(highest: highWater, known: []))
                case .commit(let batch):
                    let stored = StoredMeter(
                        identity: batch.meter, features: batch.features, firstSeen: now, lastSeen: now,
                        highWater: batch.newHighWater, epoch: 0, lastSync: now, lastSyncResult: batch.session.result,
                        readingCount: batch.readings.count)
                    events.append(.committed(CommitResult(
                        inserted: [], duplicates: 0, sequenceResets: 0, meter: stored, session: batch.session)))
                case .disconnect:
                    meter.disconnect()
                    events.append(.disconnectCompleted)
                case .publish(.failed(_, let failure)):
                    ended = failure.code
                case .startTimer, .cancelTimer, .publish, .finished:
                    break
                }
            }
        }
        return ended
    }

    /// Records the simulator's outputs and turns them into the events the machine gets next.
    private static func deliver(_ outputs: [SimulatorOutput], _ events: inout [SyncEvent], _ transcript: inout Transcript) {
        for output in outputs {
            switch output {
            case .notification(_, let uuid, let value):
                transcript.notifications.append(value)
                events.append(.value(uuid, value))
            case .indication(_, let uuid, let value):
                transcript.indications.append(value)
                events.append(.value(uuid, value))
            case .disconnected:
                events.append(.disconnected(reason: nil))
            }
        }
    }
}
