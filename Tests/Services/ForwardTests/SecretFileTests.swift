import Foundation
import Glibc
import SystemIO
import Testing
import TestSupport

/// The built sugard-forward refuses to start (exit 78, naming the file and the fix) when a file
/// holding a password, API secret or token is readable by others, and starts when it is 0640.
/// No broker or sugard is needed: a refused start ends before either is contacted, and a start
/// shows as the status socket appearing in the state directory.
@Suite(.serialized) struct SecretFileTests {
    final class Folder: @unchecked Sendable {
        let dir: String
        init() throws {
            var template = Array("/tmp/sfs.XXXXXX".utf8CString)
            let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
            guard made != nil else { throw RigError("mkdtemp failed") }
            self.dir = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        deinit { try? FileManager.default.removeItem(atPath: self.dir) }

        /// Writes `text` to `name` with `mode` (chmod, so the umask does not matter); its path.
        @discardableResult
        func write(_ name: String, _ text: String, mode: mode_t) throws -> String {
            let path = self.dir + "/" + name
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            guard chmod(path, mode) == 0 else { throw RigError("chmod \(path) failed") }
            return path
        }

        var arguments: [String] {
            ["--config", self.dir + "/forward.conf", "--socket", self.dir + "/no-sugard", "--state-dir", self.dir + "/state"]
        }
    }

    /// Runs sugard-forward to its refusal.
    func refused(_ folder: Folder) async throws -> ProcessResult {
        try await runToEnd(try builtProduct("sugard-forward"), folder.arguments, environment: [:], dir: folder.dir, seconds: 20)
    }

    /// Starts sugard-forward and waits for its status socket (it started); stops it again.
    func starts(_ folder: Folder) async throws -> Bool {
        let log = open(folder.dir + "/forward.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        defer { close(log) }
        let child = try Child(try builtProduct("sugard-forward"), folder.arguments, environment: [:], stdout: log, stderr: log)
        let started = await eventually(within: 20) {
            access(folder.dir + "/state/io.sugard.Forward", F_OK) == 0 || child.exitStatus != nil
        }
        let running = started && child.isRunning
        _ = await child.terminate(graceSeconds: 5)
        #expect(running, "sugard-forward did not start:\n\(readFile(folder.dir + "/forward.log"))")
        return running
    }

    @Test func aWorldReadablePasswordFileStopsTheStartWithExit78NamingTheFile() async throws {
        let folder = try Folder()
        let password = try folder.write("mqtt-password", "hunter2\n", mode: 0o644)
        try folder.write(
            "forward.conf", "mqtt_url = mqtt://127.0.0.1:1\nmqtt_username = gw\nmqtt_password_file = \(password)\n", mode: 0o640)
        let result = try await self.refused(folder)
        #expect(result.status == 78, "\(result.status): \(result.stderr)")
        #expect(result.stderr.contains("\(password): readable by every user (mode 0644"), "\(result.stderr)")
        #expect(result.stderr.contains("mqtt_password_file"), "\(result.stderr)")
        #expect(result.stderr.contains("chmod 0640 \(password)"), "\(result.stderr)")
        #expect(result.stderr.contains("chown root:sugard-forward \(password)"), "\(result.stderr)")
        #expect(!result.stderr.contains("hunter2"), "the secret is in the message")

        // The same file, 0640: it starts.
        chmod(password, 0o640)
        #expect(try await self.starts(folder))
    }

    @Test func aWorldReadableNightscoutSecretFileStopsTheStart() async throws {
        let folder = try Folder()
        let secret = try folder.write("mia.secret", "s3cret-api\n", mode: 0o604)
        try folder.write(
            "forward.conf", "[nightscout mia]\nnightscout_url = http://127.0.0.1:1\nnightscout_api_secret_file = \(secret)\n",
            mode: 0o600)
        let result = try await self.refused(folder)
        #expect(result.status == 78, "\(result.status): \(result.stderr)")
        #expect(result.stderr.contains("\(secret): readable by every user (mode 0604"), "\(result.stderr)")
        #expect(result.stderr.contains("nightscout_api_secret_file"), "\(result.stderr)")
        #expect(!result.stderr.contains("s3cret-api"))
        chmod(secret, 0o600)
        #expect(try await self.starts(folder))
    }

    @Test func aWorldReadableWebhookSecretOrTokenFileStopsTheStart() async throws {
        let folder = try Folder()
        let secret = try folder.write("pager.secret", "hmac-key-1\n", mode: 0o644)
        let token = try folder.write("ntfy.token", "tk_abc\n", mode: 0o600)
        try folder.write(
            "forward.conf",
            "mqtt_url = mqtt://127.0.0.1:1\n[webhook pager]\nurl = http://127.0.0.1:1/x\nsecret_file = \(secret)\ntoken_file = \(token)\n",
            mode: 0o640)
        let result = try await self.refused(folder)
        #expect(result.status == 78, "\(result.status): \(result.stderr)")
        #expect(result.stderr.contains("\(secret): readable by every user (mode 0644") && result.stderr.contains("secret_file"), "\(result.stderr)")
        #expect(!result.stderr.contains("hmac-key-1"))
        chmod(secret, 0o640)
        chmod(token, 0o604)
        let again = try await self.refused(folder)
        #expect(again.status == 78 && again.stderr.contains("\(token): readable by every user") && again.stderr.contains("token_file"), "\(again.stderr)")
        chmod(token, 0o600)
        #expect(try await self.starts(folder))
    }

    @Test func anInlineTokenInAWorldReadableConfigStopsTheStart() async throws {
        let folder = try Folder()
        let config = try folder.write(
            "forward.conf", "# Nightscout only\nnightscout_url = http://127.0.0.1:1\nnightscout_token = family-3f9c1e0a\n", mode: 0o644)
        let result = try await self.refused(folder)
        #expect(result.status == 78, "\(result.status): \(result.stderr)")
        #expect(result.stderr.contains("\(config): readable by every user (mode 0644"), "\(result.stderr)")
        #expect(result.stderr.contains("nightscout_token on line 3"), "\(result.stderr)")
        #expect(result.stderr.contains("chmod 0640 \(config)"), "\(result.stderr)")
        #expect(!result.stderr.contains("family-3f9c1e0a"), "the token is in the message")
        chmod(config, 0o640)
        #expect(try await self.starts(folder))
    }

    @Test func aWorldReadableConfigWithoutSecretsStartsAndTheSugarctlDoctorLinesSayWhy() async throws {
        let folder = try Folder()
        let password = try folder.write("mqtt-password", "hunter2\n", mode: 0o644)
        // No secret inline: a 0644 forward.conf is fine (it names the password file, which is not).
        try folder.write(
            "forward.conf", "mqtt_url = mqtt://127.0.0.1:1\nmqtt_username = gw\nmqtt_password_file = \(password)\n", mode: 0o644)
        let environment = ["SUGARD_CONFIG": folder.dir + "/none.conf", "SUGARD_FORWARD_CONFIG": folder.dir + "/forward.conf",
                           "SUGARD_SOCKET": folder.dir + "/no-sugard", "HOME": folder.dir, "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=" + folder.dir + "/no-bus"]
        let doctor = try await runToEnd(try builtProduct("sugarctl"), ["doctor"], environment: environment, dir: folder.dir, seconds: 30)
        let lines = doctor.stdout.split(separator: "\n").map(String.init)
        let configLine = lines.first { $0.contains("secrets: \(folder.dir)/forward.conf") }
        #expect(configLine?.hasPrefix("ok") == true, "\(doctor.stdout)")
        let passwordLine = lines.first { $0.contains("secrets: \(password):") }
        #expect(passwordLine?.hasPrefix("fail") == true, "\(doctor.stdout)")
        #expect(passwordLine?.contains("sugard-forward refuses to start") == true, "\(doctor.stdout)")
        #expect(doctor.stdout.contains("fix (root): chmod 0640 \(password) && chown root:sugard-forward \(password)"), "\(doctor.stdout)")
        #expect(!doctor.stdout.contains("hunter2"))

        chmod(password, 0o640)
        let again = try await runToEnd(try builtProduct("sugarctl"), ["doctor", "--json"], environment: environment, dir: folder.dir, seconds: 30)
        #expect(again.stdout.contains("\(password) (mqtt_password_file in \(folder.dir)/forward.conf): mode 0640"), "\(again.stdout)")
        #expect(!again.stdout.contains("readable by every user"), "\(again.stdout)")
    }
}
