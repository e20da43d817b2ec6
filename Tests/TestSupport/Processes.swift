import Foundation
import Glibc
import Locking

// Child processes for the tests that run the built programs (sugard, sugarctl, dbus-daemon, the
// BlueZ stand-in): start, wait, stop, and where the built products are.

/// `.build/<config>/<name>`, next to the test bundle (or `.build/debug/<name>` in the package).
package func builtProduct(_ name: String) throws -> String {
    var candidates: [String] = []
    let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    // The bundle is `<bin>/sugardPackageTests.xctest` (or a file inside it): look in each parent.
    var folder = testBinary.deletingLastPathComponent()
    while folder.path != "/" {
        candidates.append(folder.appendingPathComponent(name).path)
        folder = folder.deletingLastPathComponent()
        if candidates.count > 4 { break }
    }
    let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    candidates.append(packageRoot.appendingPathComponent(".build/debug/" + name).path)
    guard
        let found = candidates.first(where: {
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: $0, isDirectory: &isDirectory) && !isDirectory.boolValue
                && FileManager.default.isExecutableFile(atPath: $0)
        })
    else {
        throw RigError("\(name) is not built; run `swift build` first (looked in \(candidates))")
    }
    return found
}

package struct ProcessResult: Sendable {
    package var status: Int32
    package var stdout: String
    package var stderr: String
}

/// Runs a program to its end (stdout and stderr through files in `dir`), polling for its exit.
package func runToEnd(
    _ path: String, _ arguments: [String], environment: [String: String], dir: String, seconds: Int
) async throws -> ProcessResult {
    let stamp = UInt64.random(in: 0...UInt64.max)
    let outPath = dir + "/out-\(stamp)"
    let errPath = dir + "/err-\(stamp)"
    let out = open(outPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    let err = open(errPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    defer {
        close(out)
        close(err)
        unlink(outPath)
        unlink(errPath)
    }
    let child = try Child(path, arguments, environment: environment, stdout: out, stderr: err)
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if let status = child.exitStatus {
            return ProcessResult(
                status: status, stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
                stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
        }
        try await Task.sleep(for: .milliseconds(20))
    }
    child.kill()
    throw RigError("\(path) \(arguments.joined(separator: " ")) did not end within \(seconds) s")
}

// glibc declares these only under _GNU_SOURCE, which Swift's Glibc module does not define.
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
private func spawnActionsAddCloseFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) -> Int32
@_silgen_name("pipe2")
package func pipe2(_ fds: UnsafeMutablePointer<Int32>, _ flags: Int32) -> Int32

/// A child process started with posix_spawn (not Foundation's Process, which hangs here: its exit monitor
/// mistakes dbus-daemon closing inherited descriptors for an exit). The child gets stdin, stdout and
/// stderr only; stdin is /dev/null. It inherits this process's sanitizer settings.
package final class Child: @unchecked Sendable {
    // @unchecked: the reaped flag sits behind a mutex; the pid never changes.
    package let pid: pid_t
    private let status = Lock<Int32?>(nil)

    package init(_ path: String, _ arguments: [String], environment: [String: String], stdout: Int32?, stderr: Int32?) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if let stdout { posix_spawn_file_actions_adddup2(&actions, stdout, 1) }
        if let stderr { posix_spawn_file_actions_adddup2(&actions, stderr, 2) }
        _ = spawnActionsAddCloseFrom(&actions, 3)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.merging(sanitizerEnvironment()) { own, _ in own }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, nil, argv, envp)
        guard result == 0 else { throw RigError("posix_spawn \(path) failed: \(String(cString: strerror(result)))") }
        self.pid = pid
    }

    /// The exit status (128 + signal when killed) once the child ended; nil while it runs.
    package var exitStatus: Int32? {
        self.status.withLock { status in
            if let status { return status }
            var raw: Int32 = 0
            guard waitpid(self.pid, &raw, WNOHANG) == self.pid else { return nil }
            let signal = raw & 0x7f
            status = signal == 0 ? (raw >> 8) & 0xff : 128 + signal
            return status
        }
    }

    package var isRunning: Bool { self.exitStatus == nil }

    /// SIGKILL and reap.
    package func kill() {
        guard self.isRunning else { return }
        Glibc.kill(self.pid, SIGKILL)
        self.status.withLock { status in
            guard status == nil else { return }
            var raw: Int32 = 0
            while waitpid(self.pid, &raw, 0) < 0 && errno == EINTR {}
            status = 128 + SIGKILL
        }
    }

    /// SIGTERM, then SIGKILL after `graceSeconds`; the exit status, nil when it had to be killed.
    package func terminate(graceSeconds: Int) async -> Int32? {
        guard self.isRunning else { return self.exitStatus }
        Glibc.kill(self.pid, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(graceSeconds)
        while ContinuousClock.now < deadline {
            if let status = self.exitStatus { return status }
            try? await Task.sleep(for: .milliseconds(20))
        }
        self.kill()
        return nil
    }

    /// Open file descriptors of the running child (`/proc/<pid>/fd`), -1 when unreadable.
    package var fileDescriptorCount: Int {
        guard let dir = opendir("/proc/\(self.pid)/fd") else { return -1 }
        defer { closedir(dir) }
        var count = 0
        while let entry = readdir(dir) {
            if entry.pointee.d_name.0 != UInt8(ascii: ".") { count += 1 }
        }
        return count
    }

    /// Resident set size of the running child in bytes (`VmRSS` of `/proc/<pid>/status`), -1 when unreadable.
    package var residentBytes: Int {
        guard let text = try? String(contentsOfFile: "/proc/\(self.pid)/status", encoding: .utf8) else { return -1 }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return (Int(line.dropFirst(6).filter(\.isNumber)) ?? -1) * 1024
        }
        return -1
    }

    deinit { self.kill() }
}

package struct RigError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// Fails instead of hanging when `operation` takes longer than `seconds`.
package func within<T: Sendable>(
    _ seconds: Int = 10, _ what: String, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw RigError("\(what) did not finish within \(seconds) s")
        }
        return value
    }
}

/// The sanitizer settings of this test process (`scripts/sanitize` exports them), handed to child
/// processes so a sanitized child uses the same suppressions and exit codes.
package func sanitizerEnvironment() -> [String: String] {
    var found: [String: String] = [:]
    for name in ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS", "UBSAN_OPTIONS", "SWIFT_BACKTRACE"] {
        if let value = getenv(name) { found[name] = String(cString: value) }
    }
    return found
}

/// This process's environment variable `name`, nil when unset.
package func environmentValue(_ name: String) -> String? {
    getenv(name).map { String(cString: $0) }
}

/// Runs a built program (``builtProduct(_:)``) to its end with Foundation's `Process`, for short
/// runs whose stderr stays small (stdout is read to its end first, then stderr).
package func runBuilt(_ name: String, _ arguments: [String]) throws -> ProcessResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: try builtProduct(name))
    process.arguments = arguments
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let stdout = out.fileHandleForReading.readAllRetryingInterrupts()
    let stderr = err.fileHandleForReading.readAllRetryingInterrupts()
    process.waitUntilExit()
    return ProcessResult(
        status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
        stderr: String(decoding: stderr, as: UTF8.self))
}
