import GlucoseProfile
import Testing
@testable import PacketCapture

@Suite struct BluetoothTypesTests {
    @Test func uuidFormsAreEqualAndPrint() throws {
        let short = BluetoothUUID(0x2A18)
        #expect(try BluetoothUUID(parsing: "2a18") == short)
        #expect(try BluetoothUUID(parsing: "0x2A18") == short)
        #expect(try BluetoothUUID(parsing: "00002a18-0000-1000-8000-00805f9b34fb") == short)
        #expect(short.description == "2A18")
        #expect(short.uuid16 == 0x2A18)
        #expect(try BluetoothUUID(littleEndianBytes: [0x18, 0x2A]) == short)
        let vendor = try BluetoothUUID(parsing: "c4dea010-5a9d-11e9-8647-d663bd873d93")
        #expect(vendor.uuid16 == nil)
        #expect(vendor.description == "c4dea010-5a9d-11e9-8647-d663bd873d93")
        #expect(try BluetoothUUID(littleEndianBytes: vendor.littleEndianBytes) == vendor)
        #expect(vendor.littleEndianBytes.first == 0x93)
        #expect(throws: CaptureError.self) { try BluetoothUUID(parsing: "2a1") }
        #expect(throws: CaptureError.self) { try BluetoothUUID(littleEndianBytes: [1, 2, 3]) }
    }

    @Test func addressesPrintMostSignificantFirst() throws {
        let address = BluetoothAddress(littleEndianBytes: [0x55, 0x44, 0x33, 0x22, 0x11, 0xC0])
        #expect(address.description == "c0:11:22:33:44:55")
        #expect(try BluetoothAddress(parsing: "C0:11:22:33:44:55") == address)
        #expect(address.littleEndianBytes == [0x55, 0x44, 0x33, 0x22, 0x11, 0xC0])
        #expect(throws: CaptureError.self) { try BluetoothAddress(parsing: "C0:11:22") }
    }

    @Test func handleOverridesParse() throws {
        let plain = try HandleOverride(parsing: "0x0012=2a18")
        #expect(plain.handle == 0x12 && plain.uuid == BluetoothUUID(0x2A18) && plain.peer == nil)
        let scoped = try HandleOverride(parsing: "C0:11:22:33:44:55/18=00002a52-0000-1000-8000-00805f9b34fb")
        #expect(scoped.peer == meterA && scoped.handle == 18 && scoped.uuid == BluetoothUUID(0x2A52))
        for bad in ["0x12", "0x0=2a18", "zz=2a18", "0x12=nope", "C0:11/0x12=2a18"] {
            #expect(throws: CaptureError.self, "\(bad)") { try HandleOverride(parsing: bad) }
        }
    }

    @Test func databaseFromOverridesOwnsDescriptors() {
        let database = GATTDatabase(overrides: [
            HandleOverride(handle: 0x12, uuid: glucoseMeasurement),
            HandleOverride(handle: 0x13, uuid: .clientCharacteristicConfiguration),
            HandleOverride(handle: 0x18, uuid: racp),
        ])
        #expect(database.attribute(at: 0x12).uuid == glucoseMeasurement)
        #expect(database.attribute(at: 0x13).uuid == .clientCharacteristicConfiguration)
        #expect(database.attribute(at: 0x13).characteristic == glucoseMeasurement)
        #expect(database.attribute(at: 0x18).isCharacteristicValue)
        #expect(database.attribute(at: 0x30).uuid == nil)
    }
}
