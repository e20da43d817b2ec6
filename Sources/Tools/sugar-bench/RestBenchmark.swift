import GlucoseStore
import GlucoseStoreFixtures
import JSON
import PacketCapture
import ReplayTransport
import Varlink

#if canImport(Glibc)
import Glibc
#endif
import SystemIO

/// `sugar-bench rest [--records N] [--idle-seconds S]`: the built `sugard` (next to sugar-bench) as a
/// child process, observed from outside through /proc/PID:
///
/// 1. no meter: BlueZ mode on a private bus (a `dbus-daemon --session` this benchmark starts and stops,
///    as `DBUS_SYSTEM_BUS_ADDRESS`) where no bluetoothd runs: RSS after start, then the context switches
///    of all its threads over S seconds at rest (wake-ups per second);
/// 2. a meter replayed from a capture of N records (default 10 000, one full download): RSS once
///    `GetStatus` counts N readings; then 1 000 watchers connect (`Watch` with `more`, first reply read)
///    and disconnect one after another, and RSS again after a 2 s pause.
struct RestBenchmark {
    var records: Int
    var idleSeconds: Int

    func run() async -> Int32 {
        let sugard = siblingProgram("sugard")
        guard access(sugard, X_OK) == 0 else {
            writeStderr("sugar-bench rest: \(sugard) not found; build sugard first\n")
            return 1
        }
        guard let scratch = makeScratchDirectory("sugar-bench-rest", for: "rest") else { return 1 }
        let files = ["meter.btsnoop", "s", "sugard.sqlite", "sugard.sqlite-wal", "sugard.sqlite-shm"]
        defer { removeScratchDirectory(scratch, files: files) }
        var object = JSONObject()
        object["benchmark"] = "rest"
        do {
            var meter = E2EBenchmark.bulkMeter(0, records: self.records)
            meter.startRecording(format: .h4)
            SimulatedClient.download(&meter, passkeys: [])
            try writeFile(scratch + "/meter.btsnoop", meter.stopRecording()?.image ?? [])

            // 1. At rest with no meter.
            guard let bus = PrivateBus() else { throw BenchFailure("cannot start dbus-daemon --session") }
            defer { bus.stop() }
            let idle = try await Daemon.start(sugard, scratch, capture: nil, environment: ["DBUS_SYSTEM_BUS_ADDRESS=" + bus.address])
            defer { idle.stop() }
            _ = try await idle.client().call("io.sugard.HealthDataSync.GetStatus")
            object["rssAfterStartBytes"] = .from(idle.residentBytes())
            try await Task.sleep(for: .seconds(2))
            let before = idle.switches()
            let clock = ContinuousClock()
            let start = clock.now
            try await Task.sleep(for: .seconds(self.idleSeconds))
            let elapsed = clock.now - start
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
            object["idleSeconds"] = .double(seconds)
            let after = idle.switches()
            // Per thread: a thread that ended in between takes its count with it.
            let woken = after.reduce(0) { $0 + $1.value.switches - (before[$1.key]?.switches ?? 0) }
            object["idleWakeupsPerSecond"] = .double(Double(woken) / seconds)
            object["threads"] = .from(after.count)
            object["rssAtRestBytes"] = .from(idle.residentBytes())
            idle.stop()
            bus.stop()
            for name in files.dropFirst() { unlink(scratch + "/" + name) }

            // 2. A sync of N records, then watcher churn.
            let daemon = try await Daemon.start(sugard, scratch, capture: "meter.btsnoop")
            defer { daemon.stop() }
            let client = try daemon.client()
            defer { client.close() }
            let syncStart = clock.now
            while true {
                let status = try await client.call("io.sugard.HealthDataSync.GetStatus")
                if (status["state"]?["readingCount"]?.intValue ?? 0) >= Int64(self.records) {
                    break
                }
                guard clock.now - syncStart < .seconds(120) else { throw BenchFailure("the sync did not store \(self.records) readings in 120 s") }
                try await Task.sleep(for: .milliseconds(50))
            }
            let syncElapsed = clock.now - syncStart
            object["records"] = .from(self.records)
            object["syncSeconds"] = .double(Double(syncElapsed.components.seconds) + Double(syncElapsed.components.attoseconds) * 1e-18)
            try await Task.sleep(for: .seconds(2))
            object["rssAfterSyncBytes"] = .from(daemon.residentBytes())
            for _ in 0..<1000 {
                let watcher = try daemon.client()
                for try await _ in watcher.callMore("io.sugard.HealthDataSync.Watch") { break }
                watcher.close()
            }
            try await Task.sleep(for: .seconds(2))
            object["watcherConnects"] = 1000
            object["rssAfterChurnBytes"] = .from(daemon.residentBytes())
            object["peakRSSBytes"] = .from(peakResidentSetBytes(pid: daemon.pid))
        } catch {
            writeStderr("sugar-bench rest: \(error)\n")
            return 1
        }
        writeStdout(JSONValue.object(object).serialized() + "\n")
        return 0
    }

    struct BenchFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// A running sugard child.
    final class Daemon {
        let pid: pid_t
        let socket: String
        private var running = true

        private init(pid: pid_t, socket: String) {
            self.pid = pid
            self.socket = socket
        }

        static func start(
            _ sugard: String, _ scratch: String, capture: String?, environment: [String] = []
        ) async throws -> Daemon {
            let socket = scratch + "/s"
            let arguments = [sugard, "--state-dir", scratch, "--socket", socket] + (capture.map { ["--replay", scratch + "/" + $0] } ?? [])
            guard let pid = spawnQuietly(arguments, environment: environment) else { throw BenchFailure("cannot start sugard") }
            let daemon = Daemon(pid: pid, socket: socket)
            for _ in 0..<200 {
                if access(socket, F_OK) == 0, let client = try? daemon.client() {
                    client.close()
                    return daemon
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            daemon.stop()
            throw BenchFailure("sugard did not open its socket in 10 s")
        }

        func client() throws -> VarlinkClient { try VarlinkClient(socketPath: self.socket) }

        /// VmRSS in bytes.
        func residentBytes() -> Int {
            guard let status = try? readFile("/proc/\(self.pid)/status") else { return 0 }
            for line in String(decoding: status, as: UTF8.self).split(separator: "\n") where line.hasPrefix("VmRSS:") {
                return (Int(line.filter(\.isNumber)) ?? 0) * 1024
            }
            return 0
        }

        /// Voluntary and involuntary context switches of each of its threads so far.
        func switches() -> [Int: (name: String, switches: Int)] { threadSwitches(pid: "\(self.pid)") }

        /// SIGTERM, then wait for it.
        func stop() {
            guard self.running else { return }
            self.running = false
            kill(self.pid, SIGTERM)
            var status: Int32 = 0
            _ = retryingInterrupted { waitpid(self.pid, &status, 0) }
        }
    }
}

/// A `dbus-daemon --session` of its own, standing in for a system bus with no bluetoothd on it.
final class PrivateBus {
    let address: String
    private let pid: pid_t
    private var running = true

    init?() {
        guard let pipe = popen("dbus-daemon --session --fork --print-address=1 --print-pid=1", "r") else { return nil }
        var lines: [String] = []
        var buffer = [CChar](repeating: 0, count: 1024)
        while lines.count < 2, fgets(&buffer, CInt(buffer.count), pipe) != nil {
            lines.append(String(decoding: buffer.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        pclose(pipe)
        guard lines.count == 2, let pid = pid_t(lines[1]) else { return nil }
        self.address = lines[0]
        self.pid = pid
    }

    func stop() {
        guard self.running else { return }
        self.running = false
        kill(self.pid, SIGTERM)
    }
}
