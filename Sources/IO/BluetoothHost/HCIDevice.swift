internal import CBlueZ
import PacketCapture

/// One HCI controller as the kernel describes it (`struct hci_dev_info`, from `HCIGETDEVINFO`).
public struct HCIDeviceInfo: Sendable, Hashable {
    /// The device id (`hci0` is 0).
    public var id: UInt16
    /// The kernel's name (`hci0`).
    public var name: String
    /// The controller's own address.
    public var address: BluetoothAddress
    /// The `HCI_UP` flag: the controller is powered up in the kernel.
    public var isUp: Bool
    /// `HCI_RUNNING`: the controller finished its set-up.
    public var isRunning: Bool
    /// LMP feature page 0, byte 4, bit `LMP_LE` (0x40): the controller speaks Bluetooth LE.
    public var supportsLE: Bool
    /// The raw flags word (bits numbered as libbluetooth's `HCI_UP`, `HCI_INIT`, `HCI_RUNNING`, …).
    public var flags: UInt32
    /// The LMP features (page 0).
    public var features: [UInt8]

    /// Size of `struct hci_dev_info` as libbluetooth lays it out.
    public static let structSize = MemoryLayout<hci_dev_info>.size

    /// Decodes a `struct hci_dev_info` as the kernel fills it (host byte order, libbluetooth's layout).
    /// - Returns: nil when `bytes` is shorter than the structure.
    public static func decode(_ bytes: [UInt8]) -> HCIDeviceInfo? {
        guard bytes.count >= Self.structSize,
            let nameAt = MemoryLayout<hci_dev_info>.offset(of: \hci_dev_info.name),
            let addressAt = MemoryLayout<hci_dev_info>.offset(of: \hci_dev_info.bdaddr),
            let flagsAt = MemoryLayout<hci_dev_info>.offset(of: \hci_dev_info.flags),
            let featuresAt = MemoryLayout<hci_dev_info>.offset(of: \hci_dev_info.features)
        else { return nil }
        let id = UInt16(bytes[0]) | UInt16(bytes[1]) << 8
        let nameBytes = bytes[nameAt..<(nameAt + 8)].prefix { $0 != 0 }
        let flags = (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[flagsAt + $1]) << (8 * UInt32($1)) }
        let features = Array(bytes[featuresAt..<(featuresAt + 8)])
        return HCIDeviceInfo(
            id: id, name: String(decoding: nameBytes, as: UTF8.self),
            address: BluetoothAddress(littleEndianBytes: Array(bytes[addressAt..<(addressAt + 6)])),
            isUp: flags & (1 << UInt32(HCI_UP)) != 0,
            isRunning: flags & (1 << UInt32(HCI_RUNNING)) != 0,
            supportsLE: features[4] & UInt8(LMP_LE) != 0, flags: flags, features: features)
    }

    /// Decodes the reply of `HCIGETDEVLIST` (`struct hci_dev_list_req`): the device ids.
    public static func decodeDeviceList(_ bytes: [UInt8]) -> [UInt16] {
        guard bytes.count >= 4 else { return [] }
        let count = Int(UInt16(bytes[0]) | UInt16(bytes[1]) << 8)
        let entry = MemoryLayout<hci_dev_req>.stride
        let first = MemoryLayout<hci_dev_list_req>.size
        var ids: [UInt16] = []
        for position in 0..<count {
            let offset = first + position * entry
            guard offset + 2 <= bytes.count else { break }
            ids.append(UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8)
        }
        return ids
    }
}
