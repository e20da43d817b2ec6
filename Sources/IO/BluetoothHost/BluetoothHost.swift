internal import CBlueZ
import Glibc
import PacketCapture
import SystemIO

/// A failed system call on the Bluetooth host side, with its errno.
public struct BluetoothHostError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The errno value.
    public var code: Int32
    /// What was attempted.
    public var operation: String

    /// An error for `operation` with the errno it set.
    public init(code: Int32, operation: String) {
        self.code = code
        self.operation = operation
    }

    /// `socket(AF_BLUETOOTH, …)` failed because the kernel has no Bluetooth support.
    public var isMissingKernelSupport: Bool { self.code == EAFNOSUPPORT || self.code == EPROTONOSUPPORT }
    /// Root or CAP_NET_RAW is needed.
    public var isPermissionDenied: Bool { self.code == EPERM || self.code == EACCES }

    /// `operation failed: strerror text`.
    public var description: String { "\(self.operation) failed: \(String(cString: strerror(self.code)))" }
}

/// The kernel's Bluetooth support as seen through libbluetooth: the HCI socket, the controllers, the
/// monitor channel btmon records from.
public enum BluetoothHost {
    /// Opens a raw HCI socket (no device bound): works without root when the kernel has Bluetooth.
    /// - Throws: `BluetoothHostError` (`isMissingKernelSupport` on kernels without Bluetooth).
    public static func openHCISocket() throws(BluetoothHostError) -> Int32 {
        let fd = socket(AF_BLUETOOTH, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), BTPROTO_HCI)
        guard fd >= 0 else { throw BluetoothHostError(code: errno, operation: "socket(AF_BLUETOOTH, SOCK_RAW, BTPROTO_HCI)") }
        return fd
    }

    /// Checks that the kernel has Bluetooth support (an HCI socket opens).
    /// - Throws: `BluetoothHostError` from `openHCISocket`.
    public static func probe() throws(BluetoothHostError) {
        let fd = try self.openHCISocket()
        close(fd)
    }

    /// The id of the adapter libbluetooth would use (`hci_get_route`), nil when none is up.
    public static func defaultRoute() -> UInt16? {
        let id = hci_get_route(nil)
        return id >= 0 ? UInt16(id) : nil
    }

    /// Every controller the kernel knows (`HCIGETDEVLIST`), each with its `HCIGETDEVINFO` record.
    /// - Throws: `BluetoothHostError` when the socket or the ioctl fails.
    public static func adapters() throws(BluetoothHostError) -> [HCIDeviceInfo] {
        let fd = try self.openHCISocket()
        defer { close(fd) }
        let entry = MemoryLayout<hci_dev_req>.stride
        let size = MemoryLayout<hci_dev_list_req>.size + Int(HCI_MAX_DEV) * entry
        var list = [UInt8](repeating: 0, count: size)
        list[0] = UInt8(HCI_MAX_DEV)
        let status = list.withUnsafeMutableBytes { cbluez_ioctl(fd, CBLUEZ_HCIGETDEVLIST, $0.baseAddress) }
        guard status >= 0 else { throw BluetoothHostError(code: errno, operation: "ioctl(HCIGETDEVLIST)") }
        var result: [HCIDeviceInfo] = []
        for id in HCIDeviceInfo.decodeDeviceList(list) {
            var info = hci_dev_info()
            guard hci_devinfo(Int32(id), &info) >= 0 else {
                throw BluetoothHostError(code: errno, operation: "hci_devinfo(hci\(id))")
            }
            let bytes = withUnsafeBytes(of: &info) { Array($0) }
            if let decoded = HCIDeviceInfo.decode(bytes) { result.append(decoded) }
        }
        return result
    }

    /// Opens the HCI monitor channel (`HCI_CHANNEL_MONITOR` on `HCI_DEV_NONE`): every controller's
    /// traffic, as btmon sees it. Needs root or CAP_NET_RAW.
    /// - Throws: `BluetoothHostError` (`isMissingKernelSupport`, `isPermissionDenied`).
    public static func openMonitor() throws(BluetoothHostError) -> Int32 {
        let fd = try self.openHCISocket()
        guard cbluez_bind_hci(fd, UInt16(HCI_DEV_NONE), UInt16(HCI_CHANNEL_MONITOR)) == 0 else {
            let code = errno
            close(fd)
            throw BluetoothHostError(code: code, operation: "bind(HCI_CHANNEL_MONITOR)")
        }
        return fd
    }

    /// Makes SIGINT and SIGTERM write a byte to a pipe and returns the pipe's read end, for
    /// `MonitorRecorder.run(stopFD:)`.
    /// - Throws: `BluetoothHostError` when the pipe or the handlers cannot be set up.
    public static func stopOnSignals() throws(BluetoothHostError) -> Int32 {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw BluetoothHostError(code: errno, operation: "pipe") }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        }
        guard cbluez_install_stop_signals(fds[1]) == 0 else { throw BluetoothHostError(code: errno, operation: "sigaction") }
        return fds[0]
    }
}

/// One frame of the HCI monitor channel: `struct hci_mon_hdr` (opcode, index, length, little-endian)
/// and its payload.
public struct MonitorFrame: Sendable, Hashable {
    /// What the frame is (event, ACL in or out, new index…).
    public var opcode: MonitorOpcode
    /// The controller it belongs to (0xFFFF: none).
    public var index: UInt16
    /// The frame's bytes after the header.
    public var payload: [UInt8]

    /// A frame with every field given.
    public init(opcode: MonitorOpcode, index: UInt16, payload: [UInt8]) {
        self.opcode = opcode
        self.index = index
        self.payload = payload
    }

    /// `struct hci_mon_hdr`: opcode, index and length, 2 bytes each.
    public static let headerSize = 6

    /// Decodes one datagram read from the monitor socket. Nil when the header is incomplete or its
    /// length disagrees with the bytes.
    public static func decode(_ bytes: UnsafeRawBufferPointer) -> MonitorFrame? {
        guard bytes.count >= Self.headerSize else { return nil }
        let opcode = UInt16(bytes[0]) | UInt16(bytes[1]) << 8
        let index = UInt16(bytes[2]) | UInt16(bytes[3]) << 8
        let length = Int(UInt16(bytes[4]) | UInt16(bytes[5]) << 8)
        guard bytes.count == Self.headerSize + length else { return nil }
        return MonitorFrame(opcode: MonitorOpcode(rawValue: opcode), index: index, payload: Array(bytes[Self.headerSize...]))
    }

    /// The datagram for this frame (what the kernel sends; tests feed these).
    public var encoded: [UInt8] {
        let length = UInt16(truncatingIfNeeded: self.payload.count)
        return [UInt8(truncatingIfNeeded: self.opcode.rawValue), UInt8(truncatingIfNeeded: self.opcode.rawValue >> 8),
                UInt8(truncatingIfNeeded: self.index), UInt8(truncatingIfNeeded: self.index >> 8),
                UInt8(truncatingIfNeeded: length), UInt8(truncatingIfNeeded: length >> 8)] + self.payload
    }
}

/// Records monitor frames into a btsnoop monitor (2001) file, redacting on the fly when asked.
public enum MonitorRecorder {
    /// Why recording stopped.
    public enum Ending: Sendable, Hashable {
        /// The stop descriptor became readable (Ctrl-C).
        case interrupted
        /// The watched meter's connection ended (its sync is over).
        case meterDisconnected
        /// The monitor descriptor reached end of file (the other end of a socket pair closed).
        case endOfStream
    }

    /// How a recording went.
    public struct Result: Sendable, Hashable {
        /// Why it stopped.
        public var ending: Ending
        /// Frames written.
        public var frames: Int
        /// Datagrams that were not monitor frames (skipped).
        public var malformed: Int
    }

    /// The frame loop: reads datagrams from `fd` (the monitor socket, or a socket pair in tests) until
    /// `stopFD` is readable, `meter` disconnects after having connected, or `fd` ends.
    /// - Parameters:
    ///   - redactor: When given, each frame goes through it before it is written.
    ///   - now: The timestamp for a frame (the monitor channel carries none in the frame itself).
    /// - Throws: `BluetoothHostError` when reading fails; `CaptureError` is wrapped likewise.
    public static func run(
        fd: Int32, stopFD: Int32?, writer: BTSnoopWriter, redactor: CaptureRedactor?, meter: BluetoothAddress?,
        now: () -> CaptureTimestamp = MonitorRecorder.realtime
    ) throws(BluetoothHostError) -> Result {
        var redactor = redactor
        var result = Result(ending: .endOfStream, frames: 0, malformed: 0)
        var meterHandles = Set<UInt32>()
        var buffer = [UInt8](repeating: 0, count: 65_600)
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
        if let stopFD { fds.append(pollfd(fd: stopFD, events: Int16(POLLIN), revents: 0)) }
        while true {
            let ready = retryingInterrupted { poll(&fds, nfds_t(fds.count), -1) }
            if ready < 0 {
                throw BluetoothHostError(code: errno, operation: "poll")
            }
            if fds.count > 1, fds[1].revents != 0 {
                result.ending = .interrupted
                break
            }
            guard fds[0].revents != 0 else { continue }
            let got = buffer.withUnsafeMutableBytes { raw in retryingInterrupted { recv(fd, raw.baseAddress, raw.count, 0) } }
            if got < 0 {
                if errno == EAGAIN { continue }
                throw BluetoothHostError(code: errno, operation: "recv(monitor)")
            }
            if got == 0 { break }
            let decoded = buffer.withUnsafeBytes { MonitorFrame.decode(UnsafeRawBufferPointer(rebasing: $0[0..<got])) }
            guard let frame = decoded else {
                result.malformed += 1
                continue
            }
            var flags = BTSnoopFlags.monitor(index: frame.index, opcode: frame.opcode)
            var payload = frame.payload
            if var active = redactor {
                (flags, payload) = frame.payload.withUnsafeBytes { active.redact(flags: flags, payload: $0) }
                redactor = active
            }
            do throws(CaptureError) {
                try writer.append(payload, flags: flags, timestamp: now())
            } catch {
                throw BluetoothHostError(code: EIO, operation: error.message)
            }
            result.frames += 1
            if let meter, frame.opcode == .eventPacket {
                let key = { (handle: UInt16) in UInt32(frame.index) << 16 | UInt32(handle) }
                if let connection = HCIEventFields.leConnection(frame.payload), connection.status == 0,
                    connection.peer == meter
                {
                    meterHandles.insert(key(connection.handle))
                } else if let handle = HCIEventFields.disconnectedHandle(frame.payload),
                    meterHandles.remove(key(handle)) != nil
                {
                    result.ending = .meterDisconnected
                    break
                }
            }
        }
        do throws(CaptureError) {
            try writer.flush()
        } catch {
            throw BluetoothHostError(code: EIO, operation: error.message)
        }
        return result
    }

    /// The wall clock as a capture timestamp.
    public static func realtime() -> CaptureTimestamp {
        CaptureTimestamp(unixMicroseconds: wallClockMicroseconds())
    }
}
