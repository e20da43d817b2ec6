import Glibc
import SystemIO

/// One rfkill switch (a radio's soft and hard block).
public struct RfkillSwitch: Sendable, Hashable {
    /// The switch's index (`rfkillN`).
    public var index: UInt32
    /// `RFKILL_TYPE_*`: 2 is Bluetooth.
    public var type: UInt8
    /// Blocked by software (`rfkill block`, airplane mode): `rfkill unblock bluetooth` lifts it.
    public var softBlocked: Bool
    /// Blocked by a hardware switch or the firmware: only the switch lifts it.
    public var hardBlocked: Bool

    /// `RFKILL_TYPE_BLUETOOTH`.
    public static let bluetoothType: UInt8 = 2
    /// True for a Bluetooth radio's switch.
    public var isBluetooth: Bool { self.type == Self.bluetoothType }

    /// A switch with every field given.
    public init(index: UInt32, type: UInt8, softBlocked: Bool, hardBlocked: Bool) {
        self.index = index
        self.type = type
        self.softBlocked = softBlocked
        self.hardBlocked = hardBlocked
    }
}

/// An event read from `/dev/rfkill` (`struct rfkill_event`: idx u32, type u8, op u8, soft u8, hard u8;
/// newer kernels append fields, which are ignored).
public struct RfkillEvent: Sendable, Hashable {
    /// `RFKILL_OP_*`: a switch added, removed, changed, or every switch of a type changed.
    public enum Operation: UInt8, Sendable {
        case add = 0, delete = 1, change = 2, changeAll = 3
    }

    /// What the event says happened.
    public var operation: Operation
    /// The switch's state after it (for `changeAll`, the type and soft block that apply to all).
    public var state: RfkillSwitch

    /// The size of the original `struct rfkill_event`.
    public static let minimumSize = 8

    /// Decodes one event (one `read` of `/dev/rfkill` returns one event). Nil when too short or the
    /// operation is unknown.
    public static func decode(_ bytes: [UInt8]) -> RfkillEvent? {
        guard bytes.count >= Self.minimumSize, let operation = Operation(rawValue: bytes[5]) else { return nil }
        // The index is in host byte order (little-endian on every machine sugard runs on).
        let index = (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[$1]) << (8 * UInt32($1)) }
        return RfkillEvent(
            operation: operation,
            state: RfkillSwitch(index: index, type: bytes[4], softBlocked: bytes[6] != 0, hardBlocked: bytes[7] != 0))
    }

    /// Applies a sequence of events (the ADD burst `/dev/rfkill` sends on open, then changes) to a list
    /// of switches.
    public static func apply(_ events: [RfkillEvent], to switches: [RfkillSwitch] = []) -> [RfkillSwitch] {
        var result = switches
        for event in events {
            switch event.operation {
            case .add, .change:
                if let at = result.firstIndex(where: { $0.index == event.state.index }) {
                    result[at] = event.state
                } else {
                    result.append(event.state)
                }
            case .delete:
                result.removeAll { $0.index == event.state.index }
            case .changeAll:
                for at in result.indices where event.state.type == 0 || result[at].type == event.state.type {
                    result[at].softBlocked = event.state.softBlocked
                }
            }
        }
        return result
    }
}

/// What the machine says about rfkill.
public enum RfkillState: Sendable, Hashable {
    /// The switches (all types) and where they were read.
    case switches([RfkillSwitch], source: String)
    /// Neither `/dev/rfkill` nor `/sys/class/rfkill` exists (a kernel without rfkill).
    case unavailable

    /// Reads `/dev/rfkill` (the events it sends on open), else `/sys/class/rfkill`.
    public static func read(devicePath: String = "/dev/rfkill", sysfsPath: String = "/sys/class/rfkill") -> RfkillState {
        let fd = open(devicePath, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        if fd >= 0 {
            defer { close(fd) }
            var events: [RfkillEvent] = []
            var buffer = [UInt8](repeating: 0, count: 64)
            while true {
                let got = buffer.withUnsafeMutableBytes { raw in retryingInterrupted { Glibc.read(fd, raw.baseAddress, raw.count) } }
                guard got > 0 else { break }
                if let event = RfkillEvent.decode(Array(buffer[0..<got])) { events.append(event) }
            }
            return .switches(RfkillEvent.apply(events), source: devicePath)
        }
        guard let directory = opendir(sysfsPath) else { return .unavailable }
        defer { closedir(directory) }
        var switches: [RfkillSwitch] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.hasPrefix("rfkill"), let index = UInt32(name.dropFirst(6)) else { continue }
            let base = sysfsPath + "/" + name + "/"
            if let state = Self.parseSysfs(
                index: index, type: readText(base + "type"), soft: readText(base + "soft"), hard: readText(base + "hard"))
            {
                switches.append(state)
            }
        }
        return .switches(switches.sorted { $0.index < $1.index }, source: sysfsPath)
    }

    /// One `/sys/class/rfkill/rfkillN` entry from its `type`, `soft` and `hard` files.
    public static func parseSysfs(index: UInt32, type: String?, soft: String?, hard: String?) -> RfkillSwitch? {
        let types: [String: UInt8] = ["wlan": 1, "bluetooth": 2, "uwb": 3, "wimax": 4, "wwan": 5, "gps": 6, "fm": 7, "nfc": 8]
        guard let type = type.map(trimmed), let code = types[type] else { return nil }
        return RfkillSwitch(
            index: index, type: code, softBlocked: soft.map(trimmed) == "1", hardBlocked: hard.map(trimmed) == "1")
    }
}

/// `text` without surrounding spaces and newlines.
private func trimmed(_ text: String) -> String {
    String(text.drop { $0 == " " || $0 == "\n" }.reversed().drop { $0 == " " || $0 == "\n" }.reversed())
}

/// The first 256 bytes of a small file (a sysfs attribute) as text; nil when it cannot be read or is empty.
private func readText(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 256)
    let got = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    return got > 0 ? String(decoding: buffer[0..<got], as: UTF8.self) : nil
}
