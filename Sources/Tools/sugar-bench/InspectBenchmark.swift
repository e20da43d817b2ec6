import GlucoseProfile
import GlucoseStore
import GlucoseStoreFixtures
import JSON
import PacketCapture
import SystemIO

#if canImport(Glibc)
import Glibc
#endif

/// `sugar-bench capture --inspect [--records N]`: the whole `sugarctl capture inspect FILE --json`
/// process on a capture of N glucose records (default 20 000, about 1 MB) made with `CaptureBuilder`, beside
/// tshark with a glucose field filter on the same file when tshark is installed; and the same inspect on a
/// capture ten times larger (one session: memory must stay flat, the inspector holds only the records a
/// context may still join). Best of several runs each (wall and CPU time, the least of each); output goes to
/// /dev/null; on the 1 MB capture sugarctl and tshark take turns, five runs each. With `huge`, one more
/// run on a one-session capture of about 200 MB.
struct InspectBenchmark {
    var records: Int
    var huge = false

    /// Records of the `--huge` capture: 49 bytes each in the file, about 200 MB.
    static let hugeRecords = 4_100_000

    func run() -> Int32 {
        guard let scratch = makeScratchDirectory("sugar-bench-inspect", for: "capture --inspect") else { return 1 }
        defer { removeScratchDirectory(scratch, files: ["small.btsnoop", "large.btsnoop", "huge.btsnoop"]) }
        let sugarctl = siblingProgram("sugarctl")
        guard access(sugarctl, X_OK) == 0 else {
            writeStderr("sugar-bench capture --inspect: \(sugarctl) not found; build sugarctl first\n")
            return 1
        }
        let small = scratch + "/small.btsnoop"
        let large = scratch + "/large.btsnoop"
        do {
            try writeFile(small, Self.capture(records: self.records))
            try writeFile(large, Self.capture(records: self.records * 10))
        } catch {
            writeStderr("sugar-bench capture --inspect: \(error)\n")
            return 1
        }
        var object = JSONObject()
        object["benchmark"] = "inspect"
        object["records"] = .from(self.records)
        object["captureBytes"] = .from(fileSize(small))
        let candidates: [String] = ["/usr/bin/tshark", "/usr/local/bin/tshark"]
        let tshark = candidates.first { access($0, X_OK) == 0 }
        // sugarctl and tshark take turns (five runs each), so a load change on the shared machine
        // touches both sides of the ratio alike.
        var commands = [[sugarctl, "capture", "inspect", small, "--json"]]
        if let tshark {
            commands.append([
                tshark, "-r", small, "-Y", "btatt.glucose_measurement.sequence_number", "-T", "fields", "-e", "frame.number",
                "-e", "btatt.glucose_measurement.sequence_number", "-e", "btatt.glucose_measurement.glucose_concentration.kg_per_l",
            ])
        }
        guard let runs = bestOfAlternating(5, commands),
            let oursLarge = bestOf(3, [sugarctl, "capture", "inspect", large, "--json"])
        else {
            writeStderr("sugar-bench capture --inspect: sugarctl capture inspect (or tshark) failed\n")
            return 1
        }
        let ours = runs[0]
        object["sugarctlSeconds"] = .double(ours.seconds)
        object["sugarctlCPUSeconds"] = .double(ours.cpuSeconds)
        object["sugarctlPeakRSSBytes"] = .from(ours.peakRSS)
        object["largeRecords"] = .from(self.records * 10)
        object["largeCaptureBytes"] = .from(fileSize(large))
        object["largeSugarctlSeconds"] = .double(oursLarge.seconds)
        object["largeSugarctlPeakRSSBytes"] = .from(oursLarge.peakRSS)
        if runs.count > 1 {
            let theirs = runs[1]
            object["tsharkSeconds"] = .double(theirs.seconds)
            object["tsharkCPUSeconds"] = .double(theirs.cpuSeconds)
            object["cpuSpeedupVsTshark"] = .double(ours.cpuSeconds > 0 ? theirs.cpuSeconds / ours.cpuSeconds : 0)
            object["tsharkPeakRSSBytes"] = .from(theirs.peakRSS)
            object["speedupVsTshark"] = .double(ours.seconds > 0 ? theirs.seconds / ours.seconds : 0)
        } else {
            object["tsharkSeconds"] = .null
        }
        if self.huge {
            let path = scratch + "/huge.btsnoop"
            do {
                try writeFile(path, Self.capture(records: Self.hugeRecords))
            } catch {
                writeStderr("sugar-bench capture --inspect: \(error)\n")
                return 1
            }
            guard let run = runChild([sugarctl, "capture", "inspect", path, "--json"]) else {
                writeStderr("sugar-bench capture --inspect: sugarctl capture inspect failed on the huge capture\n")
                return 1
            }
            object["hugeRecords"] = .from(Self.hugeRecords)
            object["hugeCaptureBytes"] = .from(fileSize(path))
            object["hugeSugarctlSeconds"] = .double(run.seconds)
            object["hugeSugarctlPeakRSSBytes"] = .from(run.peakRSS)
            object["hugeRSSGrowth"] = .double(Double(run.peakRSS) / Double(max(ours.peakRSS, 1)))
        }
        writeStdout(JSONValue.object(object).serialized() + "\n")
        return 0
    }

    /// One LE session: discovery, subscription, a RACP report and `records` measurement notifications.
    static func capture(records: Int) -> [UInt8] {
        var builder = CaptureBuilder(format: .h4, aclBufferSize: 27)
        let layout = GATTLayout.glucoseMeter(startHandle: 0x20)
        let handle: UInt16 = 0x40
        builder.leConnect(handle: handle, peer: BluetoothAddress(rawValue: 0xC026_DA01_0203))
        builder.discover(handle: handle, layout: layout)
        builder.write(handle: handle, attribute: layout.cccdHandle(.glucoseMeasurement)!, value: [1, 0])
        builder.write(handle: handle, attribute: layout.valueHandle(.recordAccessControlPoint)!, RACPMessage.reportAll)
        let measurementHandle = layout.valueHandle(.glucoseMeasurement)!
        for index in 0..<records {
            let measurement = GlucoseMeasurement(
                sequenceNumber: UInt16(truncatingIfNeeded: index),
                baseTime: DateTime(
                    year: 2026, month: UInt8(1 + index % 12), day: UInt8(1 + index % 28), hours: UInt8(index % 24),
                    minutes: UInt8(index % 60)),
                concentration: SFloat(rawValue: 0xB000 | UInt16(40 + index % 300)), unit: .kilogramsPerLiter,
                type: SampleType(code: 1), sampleLocation: SampleLocation(code: 1))
            builder.notify(handle: handle, attribute: measurementHandle, measurement)
        }
        builder.disconnect(handle: handle)
        return builder.image
    }
}

/// A program next to this one (the build directory).
func siblingProgram(_ name: String) -> String {
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard count > 0 else { return name }
    let path = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    guard let slash = path.lastIndex(of: "/") else { return name }
    return String(path[...slash]) + name
}

func fileSize(_ path: String) -> Int {
    var info = stat()
    return stat(path, &info) == 0 ? Int(info.st_size) : 0
}

/// Runs `arguments` (stdout and stderr to /dev/null) `times` times; the fastest run's wall time and the
/// largest peak RSS. Nil when it cannot start or exits non-zero.
func bestOf(_ times: Int, _ arguments: [String]) -> (seconds: Double, cpuSeconds: Double, peakRSS: Int)? {
    var best = Double.infinity
    var bestCPU = Double.infinity
    var peak = 0
    for _ in 0..<times {
        guard let run = runChild(arguments) else { return nil }
        best = min(best, run.seconds)
        bestCPU = min(bestCPU, run.cpuSeconds)
        peak = max(peak, run.peakRSS)
    }
    return (best, bestCPU, peak)
}

/// `bestOf` for several commands run in turn (A, B, A, B, …): per command the fastest wall and CPU time
/// and the largest peak RSS. Nil when one cannot start or exits non-zero.
func bestOfAlternating(_ times: Int, _ commands: [[String]]) -> [(seconds: Double, cpuSeconds: Double, peakRSS: Int)]? {
    var best = commands.map { _ in (seconds: Double.infinity, cpuSeconds: Double.infinity, peakRSS: 0) }
    for _ in 0..<times {
        for (index, command) in commands.enumerated() {
            guard let run = runChild(command) else { return nil }
            best[index] = (min(best[index].seconds, run.seconds), min(best[index].cpuSeconds, run.cpuSeconds),
                           max(best[index].peakRSS, run.peakRSS))
        }
    }
    return best
}

/// One run of a child process (with `environment` added to this one's): wall time, CPU time (user +
/// system) and peak RSS (its VmHWM, polled every 0.5 ms), or nil on failure.
func runChild(_ arguments: [String], environment: [String] = []) -> (seconds: Double, cpuSeconds: Double, peakRSS: Int)? {
    let clock = ContinuousClock()
    let start = clock.now
    guard let pid = spawnQuietly(arguments, environment: environment) else { return nil }
    var status: Int32 = 0
    var usage = rusage()
    // ru_maxrss would count this process's pages too (posix_spawn shares them until the exec), so the
    // child's own high-water mark (VmHWM of its new address space) is polled until it exits.
    var peak = 0
    while true {
        let done = retryingInterrupted { wait4(pid, &status, WNOHANG, &usage) }
        if done == pid { break }
        if done < 0 { return nil }
        peak = max(peak, peakResidentSetBytes(pid: pid) ?? 0)
        usleep(500)
    }
    let elapsed = clock.now - start
    guard status & 0x7F == 0, (status >> 8) & 0xFF == 0 else { return nil }
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
    let cpu = Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6
    return (seconds, cpu, peak)
}

/// Starts `arguments` (a path first) with stdout and stderr to /dev/null, this process's environment
/// plus `environment` ("NAME=value"); its pid, or nil when it cannot start.
func spawnQuietly(_ arguments: [String], environment: [String] = []) -> pid_t? {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var inherited: [String] = []
    var entry = environ
    while let pointer = entry.pointee {
        inherited.append(String(cString: pointer))
        entry += 1
    }
    var envp: [UnsafeMutablePointer<CChar>?] = (inherited + environment).map { strdup($0) } + [nil]
    defer { for pointer in envp { free(pointer) } }
    var pid: pid_t = 0
    guard posix_spawn(&pid, arguments[0], &actions, nil, &argv, &envp) == 0 else { return nil }
    return pid
}
