import GlucoseProfile
import Testing
@testable import PacketCapture

/// A meter that is also a GATT client (the Accu-Chek Guide reads the phone's Device Name and clock):
/// every read is attributed to the side that serves it.
@Suite struct GATTRoleTests {
    static let meter = BluetoothAddress(rawValue: 0x60_77_71_8A_0B_14)

    /// The phone's own GATT server as the meter discovers it: GAP with Device Name, Current Time Service.
    static let phoneLayout = GATTLayout(startHandle: 1, services: [
        GATTLayout.ServiceSpec(BluetoothUUID(0x1800), [.init(BluetoothUUID(0x2A00), .read)]),
        GATTLayout.ServiceSpec(BluetoothUUID(0x1805), [.init(BluetoothUUID(0x2A2B), [.read, .notify])]),
    ])

    static func capture(role: LinkRole, meterReadsFirst: Bool) -> [UInt8] {
        var b = CaptureBuilder(format: .h4)
        let layout = GATTLayout.glucoseMeter(startHandle: 0x0010)
        b.leConnect(handle: 0x0040, peer: meter, role: role)
        func meterAsClient(_ b: inout CaptureBuilder) {
            b.discover(handle: 0x0040, layout: phoneLayout, client: .received)
            b.read(handle: 0x0040, attribute: phoneLayout.valueHandle(BluetoothUUID(0x2A00))!,
                   value: Array("Galaxy S20".utf8), client: .received)
            b.read(handle: 0x0040, attribute: phoneLayout.valueHandle(BluetoothUUID(0x2A2B))!,
                   value: [0xE9, 0x07, 0x0B, 0x18, 0x11, 0x00, 0x2A, 0x01, 0x00, 0x00], client: .received)
        }
        if meterReadsFirst { meterAsClient(&b) }
        b.discover(handle: 0x0040, layout: layout)
        b.read(handle: 0x0040, attribute: layout.valueHandle(BluetoothUUID(0x2A00))!, value: Array("meter+06123456".utf8))
        b.read(handle: 0x0040, attribute: layout.valueHandle(BluetoothUUID(0x2A29))!, value: Array("Roche".utf8))
        if !meterReadsFirst { meterAsClient(&b) }
        b.disconnect(handle: 0x0040)
        return b.image
    }

    @Test(arguments: [(LinkRole.central, false), (.central, true), (.peripheral, false), (.peripheral, true)])
    func deviceNameIsTheMetersNotThePhones(role: LinkRole, meterReadsFirst: Bool) throws {
        let image = Self.capture(role: role, meterReadsFirst: meterReadsFirst)
        let inspection = try CaptureInspector.inspect(bytes: image)
        let session = try #require(inspection.sessions.first)
        #expect(session.deviceInformation.deviceName == "meter+06123456")
        #expect(session.deviceInformation.manufacturer == "Roche")
        // The phone's Current Time is not the meter's clock.
        #expect(session.clock == nil)
        // The reads of the phone's server are still reported, as served by the local host.
        let summary = try GATTEventReader.readAll(bytes: image)
        let phoneReads = summary.events.filter {
            if case .read(let attribute, _, _) = $0.kind { attribute.uuid == BluetoothUUID(0x2A00) && !$0.attributeServedByPeer }
            else { false }
        }
        #expect(phoneReads.count == 1)
        #expect(phoneReads.first?.direction == .sent)
        // The peer's layout does not absorb the phone's services.
        #expect(!session.capture.database.services.contains { $0.uuid == BluetoothUUID(0x1805) })
    }
}
