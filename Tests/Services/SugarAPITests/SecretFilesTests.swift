import Foundation
import Glibc
import ProcessKit
import SugarAPI
import SystemIO
import Testing

/// The one rule both programs and `sugarctl doctor` apply: which keys hold secrets, and that no
/// file holding one may be readable by others.
@Suite struct SecretFilesTests {
    @Test(arguments: [
        ("nightscout_token", true, false), ("mqtt_password", true, false), ("webhook_secret", true, false),
        ("mqtt_password_file", false, true), ("nightscout_api_secret_file", false, true), ("alert_token_file", false, true),
        ("mqtt_ca_file", false, false), ("nightscout_ca_file", false, false), ("token", false, false), ("socket", false, false),
    ])
    func keyNames(key: String, inline: Bool, file: Bool) {
        #expect(SecretFiles.isInlineSecretKey(key) == inline, "\(key)")
        #expect(SecretFiles.isSecretFileKey(key) == file, "\(key)")
    }

    @Test func findsEverySecretFileAndAnInlineSecretAcrossSections() throws {
        let dir = NSTemporaryDirectory() + "secret-files-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        func file(_ name: String, _ mode: mode_t) throws -> String {
            let path = dir + "/" + name
            try "x\n".write(toFile: path, atomically: true, encoding: .utf8)
            chmod(path, mode)
            return path
        }
        let password = try file("pw", 0o640)
        let open = try file("open.secret", 0o644)
        let config = try file("forward.conf", 0o644)
        let text = """
            # nightscout_token = not-a-setting
            mqtt_password_file = "\(password)"
            mqtt_ca_file = \(open)

            [nightscout mia]
            nightscout_api_secret_file = \(open)
            nightscout_token = abc
            [nightscout jonas]
            nightscout_api_secret_file = \(dir)/missing.secret
            """
        let findings = SecretFiles.findings(configFile: config, text: text, serviceGroup: "sugard-forward")
        #expect(findings.map(\.path) == [config, password, open])
        #expect(findings.map(\.readableByOthers) == [true, false, true])
        #expect(findings.first?.holds == "nightscout_token on line 7")
        #expect(findings.last?.holds == "nightscout_api_secret_file in \(config)")
        #expect(findings.last?.fix == "chmod 0640 \(open) && chown root:sugard-forward \(open)")

        let error = #expect(throws: ConfigError.self) {
            try ConfigFile.checkSecrets(fileText: text, file: config, serviceGroup: "sugard-forward")
        }
        #expect(error?.file == config)
        #expect(error?.description.contains("\(config): readable by every user (mode 0644") == true, "\(String(describing: error))")
        #expect(error?.description.contains("also readable by every user: \(open)") == true, "\(String(describing: error))")
        #expect(error?.description.contains("abc") == false)

        chmod(config, 0o600)
        chmod(open, 0o600)
        try ConfigFile.checkSecrets(fileText: text, file: config, serviceGroup: "sugard-forward")
    }
}
