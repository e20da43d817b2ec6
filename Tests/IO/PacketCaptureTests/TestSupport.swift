import Glibc
import GlucoseProfile
@testable import PacketCapture
import TestSupport

/// SplitMix64: small, seedable, reproducible.
typealias SeededRandom = SplitMix

/// A fresh temporary directory, removed after `body`.
func withTemporaryDirectory<R>(_ body: (String) throws -> R) throws -> R {
    var template = Array("/tmp/packetcapture-XXXXXX".utf8CString)
    guard let pointer = mkdtemp(&template) else { throw CaptureError(.io, "mkdtemp failed") }
    let path = String(cString: pointer)
    defer {
        if let dir = opendir(path) {
            while let entry = readdir(dir) {
                let name = withUnsafePointer(to: entry.pointee.d_name) {
                    $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
                }
                if name != "." && name != ".." { unlink(path + "/" + name) }
            }
            closedir(dir)
        }
        rmdir(path)
    }
    return try body(path)
}

let glucoseMeasurement = BluetoothUUID(0x2A18)
let glucoseContext = BluetoothUUID(0x2A34)
let glucoseFeature = BluetoothUUID(0x2A51)
let racp = BluetoothUUID(0x2A52)
let meterA = BluetoothAddress(rawValue: 0xC0_11_22_33_44_55)
let meterB = BluetoothAddress(rawValue: 0xD0_66_77_88_99_AA)

/// Opaque measurement-like payloads (this module does not decode them): flags, seq LE, filler.
func fakeMeasurement(sequence: UInt16, length: Int = 17) -> [UInt8] {
    var bytes: [UInt8] = [0x1B, UInt8(sequence & 0xFF), UInt8(sequence >> 8)]
    while bytes.count < length { bytes.append(UInt8(truncatingIfNeeded: bytes.count &* 31 &+ Int(sequence))) }
    return bytes
}

/// What a glucose download script produced, for comparison with the reader's events.
struct ScriptedSession {
    var measurements: [[UInt8]] = []
    var contexts: [[UInt8]] = []
    var racpResponse: [UInt8] = []
}

/// Connect, (MTU,) (discover,) read feature, enable CCCDs, RACP report-all, n records, disconnect.
@discardableResult
func glucoseDownload(
    _ builder: inout CaptureBuilder, handle: UInt16, peer: BluetoothAddress, layout: GATTLayout, records: Int,
    firstSequence: UInt16 = 1, discover: Bool = true, mtu: (UInt16, UInt16)? = nil, enhanced: Bool = false,
    disconnect: Bool = true
) -> ScriptedSession {
    var script = ScriptedSession()
    builder.leConnect(handle: handle, peer: peer, enhanced: enhanced)
    if let mtu { builder.exchangeMTU(handle: handle, client: mtu.0, server: mtu.1) }
    if discover { builder.discover(handle: handle, layout: layout) }
    builder.read(handle: handle, attribute: layout.valueHandle(glucoseFeature)!, value: [0x03, 0x04])
    builder.write(handle: handle, attribute: layout.cccdHandle(glucoseMeasurement)!, value: [0x01, 0x00])
    if let cccd = layout.cccdHandle(glucoseContext) { builder.write(handle: handle, attribute: cccd, value: [0x01, 0x00]) }
    builder.write(handle: handle, attribute: layout.cccdHandle(racp)!, value: [0x02, 0x00])
    builder.write(handle: handle, attribute: layout.valueHandle(racp)!, value: [0x01, 0x01])
    for index in 0..<records {
        let sequence = firstSequence &+ UInt16(index)
        let measurement = fakeMeasurement(sequence: sequence)
        builder.notify(handle: handle, attribute: layout.valueHandle(glucoseMeasurement)!, value: measurement)
        script.measurements.append(measurement)
        if let context = layout.valueHandle(glucoseContext), index % 2 == 0 {
            let bytes: [UInt8] = [0x02, UInt8(sequence & 0xFF), UInt8(sequence >> 8), 0x01]
            builder.notify(handle: handle, attribute: context, value: bytes)
            script.contexts.append(bytes)
        }
    }
    script.racpResponse = [0x06, 0x00, 0x01, 0x01]
    builder.indicate(handle: handle, attribute: layout.valueHandle(racp)!, value: script.racpResponse)
    if disconnect { builder.disconnect(handle: handle) }
    return script
}

extension CaptureSummary {
    func notifications(_ uuid: BluetoothUUID, session: Int? = nil) -> [[UInt8]] {
        self.events.compactMap { event in
            guard session == nil || event.session == session,
                case .notification(let attribute, let value) = event.kind, attribute.uuid == uuid
            else { return nil }
            return value
        }
    }

    func indications(_ uuid: BluetoothUUID, session: Int? = nil) -> [[UInt8]] {
        self.events.compactMap { event in
            guard session == nil || event.session == session,
                case .indication(let attribute, let value) = event.kind, attribute.uuid == uuid
            else { return nil }
            return value
        }
    }

    func anomalies(_ kind: CaptureAnomaly.Kind) -> [CaptureAnomaly] {
        self.anomalies.filter { $0.kind == kind }
    }
}
