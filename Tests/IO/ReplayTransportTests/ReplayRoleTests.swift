import GlucoseProfile
import PacketCapture
import ReplayTransport
import Testing

/// A replayed meter takes its name and clock from the meter's own GATT server, not from what the meter
/// read on the phone while acting as a GATT client (the Accu-Chek Guide reads the phone's Device Name).
@Suite struct ReplayRoleTests {
    @Test func replayedMeterIsNotNamedAfterThePhone() throws {
        let meter = BluetoothAddress(rawValue: 0x60_77_71_8A_0B_14)
        let layout = GATTLayout.glucoseMeter(startHandle: 0x0010)
        let phone = GATTLayout(startHandle: 1, services: [
            GATTLayout.ServiceSpec(BluetoothUUID(0x1800), [.init(BluetoothUUID(0x2A00), .read)]),
        ])
        var b = CaptureBuilder(format: .h4)
        b.leConnect(handle: 0x0040, peer: meter, role: .peripheral)
        b.discover(handle: 0x0040, layout: layout)
        b.read(handle: 0x0040, attribute: layout.valueHandle(BluetoothUUID(0x2A00))!, value: Array("Accu-Chek Guide".utf8))
        b.discover(handle: 0x0040, layout: phone, client: .received)
        b.read(handle: 0x0040, attribute: phone.valueHandle(BluetoothUUID(0x2A00))!, value: Array("Galaxy S20".utf8),
               client: .received)
        b.disconnect(handle: 0x0040)
        let replayed = try ReplayTransport.meter(fromCaptureBytes: b.image)
        #expect(replayed.personality.name == "Accu-Chek Guide")
        #expect(replayed.personality.address == meter)
    }
}
