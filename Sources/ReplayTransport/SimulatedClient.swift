import GlucoseProfile
import PacketCapture

/// A deterministic central that runs the Glucose Profile download against a ``MeterSimulator``, the way
/// the sync engine does it: connect (MTU 517) → read Glucose Feature (pair on "insufficient
/// authentication", trying the passkeys in order, then read again) → DIS strings → meter clock (0x2A08,
/// else 0x2A2B) → notify 0x2A18 and 0x2A34, indicate 0x2A52 → RACP count → RACP report → disconnect.
/// Used to record fixture captures (see ``MeterSimulator/startRecording(format:)``).
public enum SimulatedClient {
    /// What the download saw.
    public struct Transcript: Sendable, Hashable {
        public var notifications: [[UInt8]] = []
        public var indications: [[UInt8]] = []
        public var errors: [ATTErrorCode] = []
        public var bonded = false
    }

    /// Runs one download.
    /// - Parameters:
    ///   - passkeys: passkeys to try in order when the meter asks for one (a wrong one first shows a
    ///     failed pairing in the capture).
    ///   - highWater: ask for records after this sequence number (`≥ highWater + 1`); nil asks for all.
    @discardableResult
    public static func download(
        _ meter: inout MeterSimulator, passkeys: [UInt32] = [], highWater: UInt16? = nil
    ) -> Transcript {
        var transcript = Transcript()
        func absorb(_ result: SimulatorWriteResult) {
            if let error = result.error { transcript.errors.append(error) }
            for output in result.outputs {
                switch output {
                case .notification(_, _, let value): transcript.notifications.append(value)
                case .indication(_, _, let value): transcript.indications.append(value)
                case .disconnected: break
                }
            }
        }
        meter.connect(clientMTU: 517)
        if let feature = meter.valueHandle(.glucoseFeature) {
            if case .error(let error) = meter.read(feature) {
                transcript.errors.append(error)
                if error == .insufficientAuthentication {
                    var keys = passkeys[...]
                    while !transcript.bonded {
                        let key = keys.popFirst()
                        transcript.bonded = meter.pair(passkey: key) == .bonded
                        if !transcript.bonded && keys.isEmpty { break }
                    }
                    _ = meter.read(feature)
                }
            }
        }
        for uuid in BluetoothUUID.deviceInformationStrings {
            if let handle = meter.valueHandle(uuid) { _ = meter.read(handle) }
        }
        if let handle = meter.valueHandle(.dateTime) ?? meter.valueHandle(.currentTime) {
            _ = meter.read(handle)
        }
        absorb(meter.setNotifications(true, for: .glucoseMeasurement))
        if meter.valueHandle(.glucoseMeasurementContext) != nil {
            absorb(meter.setNotifications(true, for: .glucoseMeasurementContext))
        }
        absorb(meter.setNotifications(true, for: .recordAccessControlPoint))
        let from = highWater.map { $0 &+ 1 }
        absorb(meter.writeRACP(RACPMessage.count(from: from).encoded()))
        if meter.isConnected {
            absorb(meter.writeRACP(RACPMessage.report(from: from).encoded()))
        }
        meter.disconnect()
        return transcript
    }
}
