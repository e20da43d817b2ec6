#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SystemIO

/// `sugarctl report --format pdf`: the HTML page printed by headless Chromium (Debian `chromium`), with
/// the network blocked and a throw-away profile.
enum PDFPrinter {
    static let installHint = "Install it with `sudo apt install chromium` (Debian), or make the HTML report (--format html) and print it from a browser."

    /// The Chromium on PATH, if any.
    static func chromium() -> String? {
        let path = environment()["PATH"] ?? "/usr/bin:/bin"
        for folder in path.split(separator: ":") {
            for name in ["chromium", "chromium-browser"] {
                let candidate = folder + "/" + name
                if access(candidate, X_OK) == 0 { return candidate }
            }
        }
        return nil
    }

    /// Writes the PDF of `html` to `path` (`-`: standard output).
    static func print(html: String, to path: String) async throws(CommandFailure) {
        guard let chromium = self.chromium() else {
            throw CommandFailure(ExitCode.failure, "Error: --format pdf needs Chromium, and no chromium is on PATH.\n" + self.installHint)
        }
        var template = Array("/tmp/sugarctl-report.XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw CommandFailure(ExitCode.failure, "Error: cannot make a temporary folder: \(String(cString: strerror(errno)))")
        }
        let folder = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        defer { removeTree(folder) }
        try ReportCommand.write(html, to: folder + "/report.html")
        let pdf = path == "-" ? folder + "/report.pdf" : absolute(path)
        let log = folder + "/chromium.log"
        let arguments = [
            chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
            "--disable-extensions", "--user-data-dir=\(folder)/profile", "--host-resolver-rules=MAP * ~NOTFOUND",
            "--no-pdf-header-footer", "--print-to-pdf=\(pdf)", "file://\(folder)/report.html",
        ]
        unlink(pdf)
        let status = try await self.run(arguments, log: log, seconds: 120)
        var info = stat()
        guard status == 0, stat(pdf, &info) == 0, info.st_size > 0 else {
            let tail = (readText(log) ?? "").split(separator: "\n").suffix(5).joined(separator: "\n")
            throw CommandFailure(
                ExitCode.failure, "Error: Chromium did not print the report (\(status.map { "exit status \($0)" } ?? "timed out")).\n\(tail)")
        }
        if path == "-" { copy(pdf, to: 1) }
    }

    /// Runs a program with stdin from /dev/null and stdout and stderr to `log`; its exit status, nil on timeout.
    static func run(_ arguments: [String], log: String, seconds: Int) async throws(CommandFailure) -> Int32? {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, arguments[0], &actions, nil, &argv, environ)
        guard spawned == 0 else {
            throw CommandFailure(ExitCode.failure, "Error: cannot start \(arguments[0]): \(String(cString: strerror(spawned)))")
        }
        let deadline = ContinuousClock.now + .seconds(seconds)
        while true {
            var status: Int32 = 0
            let done = retryingInterrupted { waitpid(pid, &status, WNOHANG) }
            if done == pid {
                // WIFEXITED / WEXITSTATUS, which Swift does not import as functions.
                return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
            }
            if done < 0 { return nil }
            if ContinuousClock.now > deadline {
                kill(pid, SIGKILL)
                _ = waitpid(pid, &status, 0)
                return nil
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
    }
}

/// `path` made absolute against the current folder.
private func absolute(_ path: String) -> String {
    guard !path.hasPrefix("/") else { return path }
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    guard getcwd(&buffer, buffer.count) != nil else { return path }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/" + path
}

/// Copies a file's bytes to a descriptor.
private func copy(_ path: String, to descriptor: Int32) {
    let input = open(path, O_RDONLY | O_CLOEXEC)
    guard input >= 0 else { return }
    defer { close(input) }
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let count = buffer.withUnsafeMutableBytes { raw in retryingInterrupted { read(input, raw.baseAddress, raw.count) } }
        guard count > 0, writeAll(descriptor, buffer[0..<count]) == 0 else { return }
    }
}

/// A small text file (Chromium's log), or nil.
private func readText(_ path: String) -> String? {
    let input = open(path, O_RDONLY | O_CLOEXEC)
    guard input >= 0 else { return nil }
    defer { close(input) }
    var bytes = [UInt8](repeating: 0, count: 1 << 16)
    let count = bytes.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
    return count > 0 ? String(decoding: bytes.prefix(count), as: UTF8.self) : nil
}

/// Removes a folder and everything in it (depth first, symbolic links not followed).
private func removeTree(_ path: String) {
    var info = stat()
    guard lstat(path, &info) == 0 else { return }
    if info.st_mode & S_IFMT == S_IFDIR, let folder = opendir(path) {
        var names: [String] = []
        while let entry = readdir(folder) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        closedir(folder)
        for name in names { removeTree(path + "/" + name) }
        rmdir(path)
    } else {
        unlink(path)
    }
}
