import Locking
import Glibc
import Synchronization
import Testing
import TestSupport

// Helpers to run the built `sugard`/`sugarctl` as child processes. posix_spawn instead of Foundation's
// Process (which misbehaves when several tests spawn at once); every wait is a poll with
// `Task.sleep` in between, so no test blocks a thread of the cooperative pool.

/// A short directory under /tmp (socket paths must stay under 108 bytes), removed on deinit.
final class TempDirectory: Sendable {
    let path: String

    init() throws {
        var template = Array("/tmp/sdt.XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        try #require(made != nil, "mkdtemp failed (errno \(errno))")
        self.path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    deinit { Self.remove(self.path) }

    func file(_ name: String) -> String { self.path + "/" + name }

    func write(_ name: String, _ text: String) throws { try self.write(name, Array(text.utf8)) }

    func write(_ name: String, _ bytes: [UInt8]) throws {
        let target = self.file(name)
        // Write then rename, so a reload never reads half a file.
        let temporary = target + ".new"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        try #require(fd >= 0, "cannot create \(temporary)")
        defer { close(fd) }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            try #require(n > 0, "write to \(temporary) failed")
            offset += n
        }
        try #require(rename(temporary, target) == 0)
    }

    static func remove(_ path: String) {
        guard let dir = opendir(path) else {
            unlink(path)
            return
        }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        closedir(dir)
        for name in names {
            let child = path + "/" + name
            var info = stat()
            if lstat(child, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR {
                Self.remove(child)
            } else {
                unlink(child)
            }
        }
        rmdir(path)
    }
}

/// Reads a whole file as text ("" when missing).
func readText(_ path: String) -> String {
    guard let fp = fopen(path, "rb") else { return "" }
    defer { fclose(fp) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let n = fread(&buffer, 1, buffer.count, fp)
        if n > 0 { bytes.append(contentsOf: buffer[0..<n]) }
        if n < buffer.count { break }
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// Polls `condition` every 20 ms until it holds or `seconds` passed; returns whether it held.
func eventually(within seconds: Double, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
    while true {
        if try await condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(20))
    }
}

/// Runs `body`, cancelling it after `seconds`; nil when it did not finish in time.
func withTimeout<T: Sendable>(seconds: Double, _ body: @escaping @Sendable () async -> T) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await body() }
        group.addTask {
            try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}

/// How a child ended.
enum Termination: Equatable, CustomStringConvertible {
    case exited(Int32)
    case signalled(Int32)

    var description: String {
        switch self {
        case .exited(let code): "exit status \(code)"
        case .signalled(let signal): "killed by signal \(signal)"
        }
    }
}

/// A child process with stdout and stderr in files. Killed (SIGKILL) and reaped on deinit if it is
/// still running, so a failing test leaves nothing behind.
final class ChildProcess: Sendable {
    let pid: pid_t
    let stdoutPath: String
    let stderrPath: String
    private let ended = Lock<Termination?>(nil)

    /// Starts `executable` with exactly `environment` (nothing inherited).
    init(_ executable: String, _ arguments: [String], environment: [String: String], outputPrefix: String) throws {
        self.stdoutPath = outputPrefix + ".out"
        self.stderrPath = outputPrefix + ".err"
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, self.stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, self.stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        // Other tests' sockets and files stay out of the child (glibc ignores already closed ones).
        for fd in Self.openDescriptors() where fd > 2 { posix_spawn_file_actions_addclose(&actions, fd) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for sig in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD] { sigaddset(&defaults, sig) }
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.merging(sanitizerEnvironment()) { own, _ in own }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        try #require(result == 0, "posix_spawn \(executable): errno \(result)")
        self.pid = pid
    }

    private static func openDescriptors() -> [Int32] {
        guard let dir = opendir("/proc/self/fd") else { return [] }
        defer { closedir(dir) }
        var fds: [Int32] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if let fd = Int32(name) { fds.append(fd) }
        }
        return fds
    }

    deinit {
        if self.ended.withLock({ $0 }) == nil {
            kill(self.pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(self.pid, &status, 0)
        }
    }

    var stdout: String { readText(self.stdoutPath) }
    var stderr: String { readText(self.stderrPath) }

    func signal(_ sig: Int32) { kill(self.pid, sig) }

    /// Reaps the child if it ended; nil while it runs.
    func poll() -> Termination? {
        self.ended.withLock { ended in
            if let ended { return ended }
            var status: Int32 = 0
            let r = waitpid(self.pid, &status, WNOHANG)
            guard r == self.pid else { return nil }
            let result: Termination =
                (status & 0x7f) == 0 ? .exited((status >> 8) & 0xff) : .signalled(status & 0x7f)
            ended = result
            return result
        }
    }

    var isRunning: Bool { self.poll() == nil }

    /// Waits up to `seconds` for the child to end; nil when it is still running.
    func waitForExit(within seconds: Double) async -> Termination? {
        _ = await eventually(within: seconds) { self.poll() != nil }
        return self.poll()
    }
}

/// The supervisor's end of sd_notify: an `AF_UNIX` datagram socket bound to a path, read by its
/// own thread the way systemd reads it (the kernel queues only 10 unread datagrams).
final class NotifyListener: Sendable {
    let path: String
    private let reader: NotifyReader
    private let thread: pthread_t

    init(path: String) throws {
        self.path = path
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        try #require(fd >= 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        try #require(bytes.count < MemoryLayout.size(ofValue: address.sun_path), "socket path too long: \(path)")
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if bound != 0 { close(fd) }
        try #require(bound == 0, "bind \(path): errno \(errno)")
        self.reader = NotifyReader(fd: fd)
        var thread = pthread_t()
        let started = pthread_create(&thread, nil, { argument in
            Unmanaged<NotifyReader>.fromOpaque(argument!).takeRetainedValue().run()
            return nil
        }, Unmanaged.passRetained(self.reader).toOpaque())
        try #require(started == 0, "pthread_create: \(started)")
        self.thread = thread
    }

    deinit {
        self.reader.stop.store(true, ordering: .relaxed)
        pthread_join(self.thread, nil)
        close(self.reader.fd)
        unlink(self.path)
    }

    /// Every message so far, in arrival order.
    var messages: [String] { self.reader.received.withLock { $0 } }

    /// When each message arrived (`ContinuousClock`), in the order of `messages`.
    var arrivals: [ContinuousClock.Instant] { self.reader.arrivals.withLock { $0 } }

    /// All `KEY=value` lines so far, in order.
    var lines: [String] { self.messages.flatMap { $0.split(separator: "\n").map(String.init) } }

    /// The `STATUS=` values so far.
    var statuses: [String] { self.lines.filter { $0.hasPrefix("STATUS=") }.map { String($0.dropFirst(7)) } }

    func count(_ line: String) -> Int { self.lines.filter { $0 == line }.count }

    /// Waits until a line satisfies `predicate`; returns it, or nil after `seconds`.
    func waitForLine(within seconds: Double, where predicate: (String) -> Bool) async -> String? {
        var found: String?
        _ = await eventually(within: seconds) {
            found = self.lines.first(where: predicate)
            return found != nil
        }
        return found
    }

    /// Waits until `line` arrived at least `count` times.
    func waitFor(_ line: String, count: Int = 1, within seconds: Double) async -> Bool {
        await eventually(within: seconds) { self.count(line) >= count }
    }
}

/// One run of `sugard` with a fake NOTIFY_SOCKET, its state and socket in `directory`.
final class SugardRun: Sendable {
    let process: ChildProcess
    let notify: NotifyListener
    let socketPath: String
    let databasePath: String

    /// Starts sugard. `--state-dir` and `--socket` point into `directory` unless `placeFiles` is
    /// false (the demo's default folder, from HOME).
    /// `wrapper` runs first and execs sugard (e.g. `prlimit --nofile=256:256`), so the pid stays sugard's.
    init(
        in directory: TempDirectory, name: String = "sugard", arguments: [String], environment: [String: String] = [:],
        placeFiles: Bool = true, wrapper: [String] = []
    ) throws {
        self.notify = try NotifyListener(path: directory.file(name + ".notify"))
        self.socketPath = directory.file("s")
        self.databasePath = directory.file("state/sugard.sqlite")
        var env = ["NOTIFY_SOCKET": self.notify.path, "TZ": "UTC", "HOME": directory.path, "PATH": "/usr/bin:/bin"]
        env.merge(environment) { $1 }
        let files = placeFiles ? ["--state-dir", directory.file("state"), "--socket", self.socketPath] : []
        let sugard = try builtProduct("sugard")
        self.process = try ChildProcess(
            wrapper.first ?? sugard, Array(wrapper.dropFirst()) + (wrapper.isEmpty ? [] : [sugard]) + files + arguments,
            environment: env, outputPrefix: directory.file(name))
    }

    var stderr: String { self.process.stderr }

    /// Waits for `READY=1` (fails the test with the daemon's stderr when it does not come).
    func waitUntilReady(count: Int = 1, within seconds: Double = 90) async throws {
        let ready = await self.notify.waitFor("READY=1", count: count, within: seconds)
        try #require(ready, "no READY=1 (#\(count)) within \(seconds) s; \(self.process.poll().map { "\($0)" } ?? "running"); stderr:\n\(self.stderr)")
    }

    /// SIGTERM, then waits for the exit.
    /// SIGTERM and wait; when the daemon does not exit 0, its stderr is printed (a sanitizer
    /// report in the child, for one, shows up only there).
    func stop(within seconds: Double = 30) async -> Termination? {
        self.process.signal(SIGTERM)
        let ended = await self.process.waitForExit(within: seconds)
        if ended != .exited(0) {
            print("sugard ended with \(ended.map(\.description) ?? "no exit within \(seconds) s"); its stderr:\n\(String(self.stderr.suffix(20_000)))")
        }
        return ended
    }
}

/// Context switches and CPU time of a process, for "idle means idle".
struct ThreadActivity: CustomStringConvertible {
    /// Voluntary + involuntary context switches per live thread.
    var switchesByThread: [Int: Int] = [:]
    /// utime + stime of the whole process (exited threads included), in clock ticks.
    var cpuTicks = 0

    init(pid: pid_t) throws {
        let taskDirectory = "/proc/\(pid)/task"
        let dir = try #require(opendir(taskDirectory), "cannot list \(taskDirectory)")
        var tids: [Int] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if let tid = Int(name) { tids.append(tid) }
        }
        closedir(dir)
        for tid in tids {
            var total = 0
            for line in readText("\(taskDirectory)/\(tid)/status").split(separator: "\n")
            where line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:") {
                total += Int(line.split(separator: ":").last!.trimmingPrefix(while: { $0 == " " || $0 == "\t" })) ?? 0
            }
            self.switchesByThread[tid] = total
        }
        // /proc/PID/stat: "pid (comm) state ppid …", utime and stime are fields 14 and 15.
        let stat = readText("/proc/\(pid)/stat")
        let afterName = stat[(stat.lastIndex(of: ")") ?? stat.startIndex)...].split(separator: " ")
        // afterName[0] is ")", [1] is the state (field 3): field N is afterName[N - 2].
        if afterName.count > 13 {
            self.cpuTicks = (Int(afterName[12]) ?? 0) + (Int(afterName[13]) ?? 0)
        }
    }

    /// Switches since `earlier`: growth of every thread, whole counts of new threads, and one for
    /// each thread that ended (it had to wake up to end).
    func switches(since earlier: ThreadActivity) -> Int {
        var total = 0
        for (tid, count) in self.switchesByThread { total += count - (earlier.switchesByThread[tid] ?? 0) }
        total += earlier.switchesByThread.keys.filter { self.switchesByThread[$0] == nil }.count
        return total
    }

    var description: String { "\(self.switchesByThread.count) threads \(self.switchesByThread.sorted { $0.key < $1.key }), cpu \(self.cpuTicks)" }
}

/// The listener's reading loop (one thread, until `stop`).
private final class NotifyReader: Sendable {
    let fd: Int32
    let received = Lock<[String]>([])
    let arrivals = Lock<[ContinuousClock.Instant]>([])
    let stop = Atomic<Bool>(false)

    init(fd: Int32) { self.fd = fd }

    func run() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !self.stop.load(ordering: .relaxed) {
            var pollFD = pollfd(fd: self.fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pollFD, 1, 50) > 0 else { continue }
            while true {
                let n = recv(self.fd, &buffer, buffer.count, 0)
                if n <= 0 { break }
                let message = String(decoding: buffer[0..<n], as: UTF8.self)
                self.received.withLock { $0.append(message) }
                self.arrivals.withLock { $0.append(.now) }
            }
        }
    }
}
