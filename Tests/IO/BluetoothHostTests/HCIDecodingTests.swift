import BluetoothHost
import Glibc
import PacketCapture
import Testing

/// `struct hci_dev_info` as the kernel lays it out on x86-64/arm64 (written out by hand from
/// linux/include/net/bluetooth/hci_sock.h, independently of libbluetooth's header).
private func devInfo(id: UInt16, name: String, address: BluetoothAddress, flags: UInt32, features: [UInt8]) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: 92)
    bytes[0] = UInt8(id & 0xFF)
    bytes[1] = UInt8(id >> 8)
    for (i, c) in name.utf8.prefix(8).enumerated() { bytes[2 + i] = c }
    bytes.replaceSubrange(10..<16, with: address.littleEndianBytes)
    for i in 0..<4 { bytes[16 + i] = UInt8(truncatingIfNeeded: flags >> (8 * UInt32(i))) }
    bytes[20] = 0x01  // type: USB, primary
    bytes.replaceSubrange(21..<29, with: features)
    bytes[44] = 0xFD  // acl_mtu 1021
    bytes[45] = 0x03
    return bytes
}

@Suite struct HCIDecodingTests {
    @Test func deviceInfoOfAnLEAdapterThatIsUp() throws {
        let address = BluetoothAddress(rawValue: 0x00_1A_7D_DA_71_13)
        let bytes = devInfo(id: 0, name: "hci0", address: address, flags: 0b101,  // HCI_UP | HCI_RUNNING
                            features: [0xBF, 0xFE, 0xCF, 0xFE, 0xDB, 0xFF, 0x7B, 0x87])
        #expect(HCIDeviceInfo.structSize == 92)
        let info = try #require(HCIDeviceInfo.decode(bytes))
        #expect(info.id == 0)
        #expect(info.name == "hci0")
        #expect(info.address == address)
        #expect(info.isUp && info.isRunning)
        #expect(info.supportsLE)  // byte 4 = 0xDB has 0x40
    }

    @Test func deviceInfoOfAClassicOnlyAdapterThatIsDown() throws {
        let bytes = devInfo(id: 1, name: "hci1", address: BluetoothAddress(rawValue: 0xAA_BB_CC_DD_EE_FF), flags: 0,
                            features: [0xFF, 0xFF, 0x8F, 0xFE, 0x9B, 0xFF, 0x59, 0x83])
        let info = try #require(HCIDeviceInfo.decode(bytes))
        #expect(info.id == 1 && info.name == "hci1")
        #expect(!info.isUp && !info.isRunning)
        #expect(!info.supportsLE)  // 0x9B lacks 0x40
        #expect(HCIDeviceInfo.decode(Array(bytes.prefix(91))) == nil)
    }

    @Test func deviceListReply() {
        // dev_num = 2, then hci_dev_req {dev_id u16, pad, dev_opt u32} entries from offset 4.
        let bytes: [UInt8] = [2, 0, 0, 0, 0, 0, 0, 0, 0x11, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0]
        #expect(HCIDeviceInfo.decodeDeviceList(bytes) == [0, 3])
        #expect(HCIDeviceInfo.decodeDeviceList([5, 0, 0, 0, 1, 0]) == [1])
        #expect(HCIDeviceInfo.decodeDeviceList([]) == [])
    }

    @Test func rfkillEventsBuildTheSwitchList() throws {
        // struct rfkill_event: idx u32, type u8, op u8, soft u8, hard u8 (+ hard_block_reasons on 5.11+).
        let wifi = try #require(RfkillEvent.decode([0, 0, 0, 0, 1, 0, 0, 0]))
        let bluetooth = try #require(RfkillEvent.decode([1, 0, 0, 0, 2, 0, 1, 0, 0]))
        #expect(bluetooth.operation == .add && bluetooth.state.isBluetooth && bluetooth.state.softBlocked)
        var switches = RfkillEvent.apply([wifi, bluetooth])
        #expect(switches.filter(\.isBluetooth).map(\.softBlocked) == [true])
        let unblocked = try #require(RfkillEvent.decode([1, 0, 0, 0, 2, 2, 0, 0]))
        switches = RfkillEvent.apply([unblocked], to: switches)
        #expect(switches.filter(\.isBluetooth).map(\.softBlocked) == [false])
        let hard = try #require(RfkillEvent.decode([1, 0, 0, 0, 2, 2, 0, 1]))
        #expect(RfkillEvent.apply([hard], to: switches).filter(\.isBluetooth).map(\.hardBlocked) == [true])
        let gone = try #require(RfkillEvent.decode([1, 0, 0, 0, 2, 1, 0, 0]))
        #expect(RfkillEvent.apply([gone], to: switches).filter(\.isBluetooth).isEmpty)
        #expect(RfkillEvent.decode([1, 0, 0, 0, 2, 9, 0, 0]) == nil)
        #expect(RfkillEvent.decode([1, 0, 0]) == nil)
        #expect(RfkillState.parseSysfs(index: 3, type: "bluetooth\n", soft: "1\n", hard: "0\n")
            == RfkillSwitch(index: 3, type: 2, softBlocked: true, hardBlocked: false))
        #expect(RfkillState.parseSysfs(index: 3, type: nil, soft: "1", hard: "0") == nil)
    }

    @Test func rfkillWithoutTheDeviceOrSysfsIsUnavailable() {
        #expect(RfkillState.read(devicePath: "/nonexistent/rfkill", sysfsPath: "/nonexistent/class") == .unavailable)
    }

    /// This machine's kernel has no Bluetooth: the real socket call fails the way doctor and
    /// `capture record` report (skipped where the kernel has Bluetooth).
    @Test func kernelWithoutBluetooth() throws {
        let fd = socket(AF_BLUETOOTH, Int32(SOCK_RAW.rawValue), 1)
        let code = errno
        if fd >= 0 {
            close(fd)
            return
        }
        #expect(code == EAFNOSUPPORT)
        #expect(throws: BluetoothHostError.self) { try BluetoothHost.probe() }
        do {
            _ = try BluetoothHost.openMonitor()
            Issue.record("the monitor channel opened without Bluetooth")
        } catch {
            #expect(error.isMissingKernelSupport)
            #expect(!error.isPermissionDenied)
        }
        #expect(throws: BluetoothHostError.self) { try BluetoothHost.adapters() }
    }

    @Test func monitorFrameHeader() throws {
        let frame = MonitorFrame(opcode: .eventPacket, index: 1, payload: [0x0E, 0x01, 0x00])
        #expect(frame.encoded == [3, 0, 1, 0, 3, 0, 0x0E, 0x01, 0x00])
        let decoded = frame.encoded.withUnsafeBytes { MonitorFrame.decode($0) }
        #expect(decoded == frame)
        #expect([UInt8]([3, 0, 1, 0, 9, 0, 1]).withUnsafeBytes { MonitorFrame.decode($0) } == nil)
    }
}
