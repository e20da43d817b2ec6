// capture-bench: throughput of the PacketCapture reader on synthetic captures (or a given file).
//
//   swift run -c release capture-bench [--megabytes N] [--runs N] [--keep] [capture.btsnoop ...]
//
// Fold into sugar-bench when that exists. Timings are never asserted in unit tests.
import Glibc
import PacketCapture

struct Arguments {
    var megabytes = 256
    var runs = 3
    var keep = false
    var files: [String] = []
}

func parseArguments() -> Arguments {
    var arguments = Arguments()
    var iterator = CommandLine.arguments.dropFirst().makeIterator()
    while let argument = iterator.next() {
        switch argument {
        case "--megabytes": arguments.megabytes = Int(iterator.next() ?? "") ?? arguments.megabytes
        case "--runs": arguments.runs = Int(iterator.next() ?? "") ?? arguments.runs
        case "--keep": arguments.keep = true
        default: arguments.files.append(argument)
        }
    }
    return arguments
}

/// Writes a synthetic capture of about `megabytes`: glucose sessions surrounded by classic ACL, vendor events
/// and flow-control noise (`small`), or big notifications over 251-byte ACL buffers (`large`).
func makeCapture(path: String, megabytes: Int, large: Bool) throws -> Int {
    let writer = try BTSnoopWriter(path: path, datalink: .hciUART)
    var written = 16
    var session: UInt16 = 0
    let layout = GATTLayout.glucoseMeter(startHandle: 0x20)
    while written < megabytes << 20 {
        var builder = CaptureBuilder(format: .h4, aclBufferSize: large ? 251 : 27)
        let handle = 0x40 + session % 8
        builder.leConnect(handle: handle, peer: BluetoothAddress(rawValue: 0xC000_0000_0000 | UInt64(session % 4)))
        builder.exchangeMTU(handle: handle, client: large ? 517 : 23, server: large ? 512 : 23)
        if session % 4 == 0 { builder.discover(handle: handle, layout: layout) }
        builder.write(handle: handle, attribute: layout.cccdHandle(BluetoothUUID(0x2A18))!, value: [1, 0])
        for sequence in 0..<500 {
            if large {
                builder.notify(handle: handle, attribute: layout.valueHandle(BluetoothUUID(0x2A18))!,
                               value: [UInt8](repeating: UInt8(truncatingIfNeeded: sequence), count: 500))
            } else {
                builder.notify(handle: handle, attribute: layout.valueHandle(BluetoothUUID(0x2A18))!,
                               value: [0x1B, UInt8(truncatingIfNeeded: sequence), 0, 0xEA, 0x07, 11, 30, 10, 39, 17, 0x3C,
                                       0, 0x58, 0xB0, 0x11])
                builder.completedPackets(handle: handle, count: 1)
                builder.l2cap(handle: 0x0005, direction: .received, cid: 0x0041,
                              payload: [UInt8](repeating: 0xA5, count: 60))
                builder.vendorEvent([0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08])
            }
        }
        builder.disconnect(handle: handle)
        try writer.appendRaw(builder.image[16...])
        written += builder.image.count - 16
        session &+= 1
    }
    try writer.close()
    return written
}

func fileSize(_ path: String) -> Int {
    var info = stat()
    return stat(path, &info) == 0 ? Int(info.st_size) : 0
}

func benchmark(path: String, runs: Int) throws {
    let bytes = Double(fileSize(path))
    let clock = ContinuousClock()
    var best = Duration.seconds(1_000_000)
    var checksum = 0
    // One warm-up, then `runs` timed runs.
    for run in 0...runs {
        let start = clock.now
        let reader = try GATTEventReader(path: path)
        var items = 0
        while let item = try reader.next() {
            if case .event(let event) = item { items &+= event.frame } else { items &+= 1 }
        }
        let elapsed = clock.now - start
        checksum = items &+ reader.statistics.frames
        if run > 0 { best = min(best, elapsed) }
    }
    let seconds = Double(best.components.seconds) + Double(best.components.attoseconds) / 1e18
    let recordStart = clock.now
    let raw = try BTSnoopReader(path: path)
    var frames = 0
    while try raw.withNextRecord({ record, _ in record.frame }) != nil { frames += 1 }
    let rawElapsed = clock.now - recordStart
    let rawSeconds = Double(rawElapsed.components.seconds) + Double(rawElapsed.components.attoseconds) / 1e18
    print("""
        \(path): \(Int(bytes) >> 20) MiB, \(frames) frames
          GATT events:   best of \(runs) \(String(format3(seconds))) s = \(format3(bytes / seconds / 1e6)) MB/s, \
        \(format3(Double(frames) / seconds / 1e6)) Mframes/s (checksum \(checksum))
          records only:  \(format3(rawSeconds)) s = \(format3(bytes / rawSeconds / 1e6)) MB/s
        """)
}

func format3(_ value: Double) -> String {
    let scaled = (value * 1000).rounded() / 1000
    return String(scaled)
}

let arguments = parseArguments()
do {
    if arguments.files.isEmpty {
        for large in [false, true] {
            let path = "/tmp/capture-bench-\(large ? "large" : "small")-\(getpid()).btsnoop"
            _ = try makeCapture(path: path, megabytes: arguments.megabytes, large: large)
            defer { if !arguments.keep { unlink(path) } }
            print(large ? "Workload: 500-byte notifications, MTU 512, 251-byte ACL buffers"
                        : "Workload: small notifications in classic ACL, vendor and flow-control noise")
            try benchmark(path: path, runs: arguments.runs)
        }
    } else {
        for file in arguments.files { try benchmark(path: file, runs: arguments.runs) }
    }
} catch {
    print("capture-bench: \(error)")
    exit(1)
}
