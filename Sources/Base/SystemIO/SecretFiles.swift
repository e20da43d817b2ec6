#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The rule that no other user may read a secret, in the one place sugard, sugard-forward and
/// `sugarctl doctor` share: which configuration keys hold a secret, and whether a file holding one
/// (a `*_password_file`, `*_secret_file` or `*_token_file`, or a configuration file with a
/// `*_password`, `*_secret` or `*_token` written inline) is readable by others (mode & 0o004).
public enum SecretFiles {
    /// Whether `key` holds a secret inline (`nightscout_token`; any `*_password`, `*_secret`, `*_token`).
    public static func isInlineSecretKey(_ key: String) -> Bool {
        ["_password", "_secret", "_token"].contains { key.hasSuffix($0) }
    }

    /// Whether `key` names a file holding a secret (`mqtt_password_file`, `nightscout_api_secret_file`,
    /// `secret_file`, `token_file`; any `*_password_file`, `*_secret_file`, `*_token_file`).
    public static func isSecretFileKey(_ key: String) -> Bool {
        // `secret_file` and `token_file`: a [webhook NAME] section's HMAC secret and access token.
        key == "secret_file" || key == "token_file" || (key.hasSuffix("_file") && self.isInlineSecretKey(String(key.dropLast(5))))
    }

    /// One file that holds a secret, as found on disk.
    public struct Finding: Sendable, Equatable {
        /// The file.
        public var path: String
        /// What makes it secret: `mqtt_password_file in /etc/sugard/forward.conf` or
        /// `nightscout_token on line 12`.
        public var holds: String
        /// Its permission bits (`st_mode & 0o7777`).
        public var mode: UInt32
        /// The owner's and the group's names (numbers when they have none).
        public var owner: String
        public var group: String
        /// The group the fix gives the file to (the service's, e.g. `sugard-forward`).
        public var serviceGroup: String

        /// Whether every user may read it (mode & 0o004).
        public var readableByOthers: Bool { self.mode & 0o004 != 0 }

        /// The mode as four octal digits (`0640`).
        public var modeText: String {
            let digits = String(self.mode, radix: 8)
            return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
        }

        /// What is wrong, one sentence without the secret (the file is named by the caller).
        public var problem: String {
            "readable by every user (mode \(self.modeText), \(self.owner):\(self.group)) but holds a secret (\(self.holds))"
        }

        /// The commands that fix it.
        public var fix: String {
            "chmod 0640 \(self.path) && chown root:\(self.serviceGroup) \(self.path)"
        }
    }

    /// The file's finding, or nil when it cannot be examined (missing or unreachable: reading it
    /// then fails where it is used, with its own message).
    public static func examine(_ path: String, holds: String, serviceGroup: String) -> Finding? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Finding(
            path: path, holds: holds, mode: UInt32(info.st_mode) & 0o7777, owner: self.userName(info.st_uid),
            group: self.groupName(info.st_gid), serviceGroup: serviceGroup)
    }

    /// Every file a configuration file's text makes secret: each secret file it names, and itself
    /// when it holds a secret inline. Keys are found leniently (the program's own parser reports
    /// malformed lines): `key = value` lines, `#`/`;` comments and `[section]` lines skipped, a value
    /// in double quotes unquoted. Relative file names are taken as the programs take them.
    public static func findings(configFile: String, text: String, serviceGroup: String) -> [Finding] {
        var findings: [Finding] = []
        var inline: [String] = []
        var lineNumber = 0
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }) {
            lineNumber += 1
            let line = Self.trimmed(Substring(raw))
            guard !line.isEmpty, !line.hasPrefix("#"), !line.hasPrefix(";"), !line.hasPrefix("["),
                let eq = line.firstIndex(of: "=")
            else { continue }
            let key = String(Self.trimmed(line[..<eq]))
            var value = Self.trimmed(line[line.index(after: eq)...])
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = value.dropFirst().dropLast() }
            guard !value.isEmpty else { continue }
            if self.isSecretFileKey(key) {
                let holds = "\(key) in \(configFile)"
                if let finding = self.examine(String(value), holds: holds, serviceGroup: serviceGroup),
                    !findings.contains(where: { $0.path == finding.path })
                {
                    findings.append(finding)
                }
            } else if self.isInlineSecretKey(key) {
                inline.append("\(key) on line \(lineNumber)")
            }
        }
        if !inline.isEmpty,
            let finding = self.examine(configFile, holds: inline.joined(separator: ", "), serviceGroup: serviceGroup)
        {
            findings.insert(finding, at: 0)
        }
        return findings
    }

    private static func trimmed(_ text: Substring) -> Substring {
        var s = text
        while let f = s.first, f == " " || f == "\t" || f == "\r" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" || l == "\r" { s.removeLast() }
        return s
    }

    private static func userName(_ uid: uid_t) -> String {
        guard let entry = getpwuid(uid), let name = entry.pointee.pw_name else { return String(uid) }
        return String(cString: name)
    }

    private static func groupName(_ gid: gid_t) -> String {
        guard let entry = getgrgid(gid), let name = entry.pointee.gr_name else { return String(gid) }
        return String(cString: name)
    }
}
