import Glibc
import SystemIO

/// A configuration problem, naming the file and line when it came from a file.
public struct ConfigError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The configuration file's path, when the problem came from one.
    public var file: String?
    /// The 1-based line in `file`, when the problem is on one line.
    public var line: Int?
    /// What is wrong, naming the key and the refused value where there is one.
    public var message: String

    /// A problem in `file` at `line`; both nil when it did not come from a file (a flag).
    public init(file: String? = nil, line: Int? = nil, _ message: String) {
        self.file = file
        self.line = line
        self.message = message
    }

    /// `FILE:LINE: message`, `FILE: message` or the bare message, as far as the place is known.
    public var description: String {
        switch (self.file, self.line) {
        case (let file?, let line?): "\(file):\(line): \(self.message)"
        case (let file?, nil): "\(file): \(self.message)"
        default: self.message
        }
    }
}

/// The `key = value` file format of `sugard.conf` and `forward.conf`: one setting per line, `#`
/// or `;` starts a comment line, blank lines are ignored, values may be quoted with double quotes.
public enum ConfigFile {
    /// Calls `apply` for each setting in order; an error from it, or a malformed line, is
    /// rethrown naming `file` and the line. Refused: a line without `=`, an empty key, an
    /// unterminated or stray double quote, and a key set twice in one file unless `repeatable`
    /// names it (`replay` may repeat).
    public static func parse(
        _ text: String, file: String, repeatable: Set<String> = [], apply: (String, String) throws(ConfigError) -> Void
    ) throws(ConfigError) {
        var seen: [String: Int] = [:]
        var lineNumber = 0
        // "\r\n" is one Character in Swift, so CRLF files need it named as a separator.
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }) {
            lineNumber += 1
            let line = rawLine.trimmingSpaces()
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            guard let eq = line.firstIndex(of: "=") else {
                throw ConfigError(file: file, line: lineNumber, "expected \"key = value\", got \"\(line)\"")
            }
            let key = line[..<eq].trimmingSpaces()
            var value = line[line.index(after: eq)...].trimmingSpaces()
            guard !key.isEmpty else { throw ConfigError(file: file, line: lineNumber, "missing key before \"=\"") }
            if value.hasPrefix("\"") {
                guard value.count >= 2, value.hasSuffix("\"") else {
                    throw ConfigError(file: file, line: lineNumber, "\(key): unterminated quote in \(value)")
                }
                value = String(value.dropFirst().dropLast())
            }
            if value.contains("\"") {
                throw ConfigError(file: file, line: lineNumber, "\(key): stray double quote in the value (quote the whole value once)")
            }
            if !repeatable.contains(key) {
                if let first = seen[key] {
                    throw ConfigError(file: file, line: lineNumber, "\(key) is set twice in this file (first on line \(first))")
                }
                seen[key] = lineNumber
            }
            do {
                try apply(key, value)
            } catch {
                throw ConfigError(file: file, line: lineNumber, error.message)
            }
        }
    }

    /// A command-line argument as a flag name and its inline value: `--name=value` is
    /// ("--name", "value"); anything else is (argument, nil).
    public static func splitFlag(_ argument: String) -> (name: String, inline: String?) {
        guard argument.hasPrefix("--"), let eq = argument.firstIndex(of: "=") else { return (argument, nil) }
        return (String(argument[..<eq]), String(argument[argument.index(after: eq)...]))
    }

    /// Reads a whole file of at most `limit` bytes; nil when it does not exist.
    public static func readBytes(_ path: String, limit: Int) throws(ConfigError) -> [UInt8]? {
        do throws(FileReadError) {
            return try readWholeFile(path, limit: limit)
        } catch {
            switch error.code {
            case ENOENT: return nil
            case EFBIG: throw ConfigError(file: path, "file is larger than \(limit >> 20) MiB")
            default: throw ConfigError(file: path, "cannot read: \(error)")
            }
        }
    }

    /// Refuses a configuration whose secrets others may read (``SecretFiles``): a secret file it
    /// names, or itself when it holds a secret inline, with mode & 0o004. The error names the file,
    /// what it holds and the fix (`chmod 0640 FILE && chown root:GROUP FILE`); the programs exit 78.
    /// - Parameter serviceGroup: the group the service reads its secrets through (`sugard-forward`).
    public static func checkSecrets(fileText text: String, file: String, serviceGroup: String) throws(ConfigError) {
        let exposed = SecretFiles.findings(configFile: file, text: text, serviceGroup: serviceGroup)
            .filter(\.readableByOthers)
        guard let first = exposed.first else { return }
        var message = "\(first.problem); refusing to start, fix: \(first.fix)"
        if exposed.count > 1 {
            message += " (also readable by every user: \(exposed.dropFirst().map(\.path).joined(separator: ", ")))"
        }
        throw ConfigError(file: first.path, message)
    }

    /// Reads a whole text file (at most 1 MiB of UTF-8); nil when it does not exist.
    public static func readText(_ path: String) throws(ConfigError) -> String? {
        guard let bytes = try Self.readBytes(path, limit: 1 << 20) else { return nil }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ConfigError(file: path, "file is not UTF-8 text")
        }
        return text
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces, tabs and carriage returns.
    package func trimmingSpaces() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" || f == "\r" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" || l == "\r" { s.removeLast() }
        return String(s)
    }
}

// MARK: Values every MQTT client's configuration shares (sugard-forward, sugard-hub)

extension ConfigFile {
    /// A broker as `mqtt_url` names it: `mqtt://HOST[:PORT]` (port 1883) or `mqtts://HOST[:PORT]`
    /// (port 8883); an IPv6 host in brackets.
    public struct BrokerURL: Equatable, Sendable {
        /// The host name or address, without the brackets of an IPv6 literal.
        public var host: String
        /// The TCP port: the URL's, else 1883 (`mqtt://`) or 8883 (`mqtts://`).
        public var port: Int32
        /// Whether the connection uses TLS (`mqtts://`).
        public var tls: Bool
    }

    /// Parses the value of `key` (`mqtt_url`) as a broker URL.
    public static func brokerURL(_ key: String, _ value: String) throws(ConfigError) -> BrokerURL {
        let (tls, rest): (Bool, Substring)
        if value.hasPrefix("mqtt://") {
            (tls, rest) = (false, value.dropFirst(7))
        } else if value.hasPrefix("mqtts://") {
            (tls, rest) = (true, value.dropFirst(8))
        } else {
            throw ConfigError("\(key) must be mqtt://HOST[:PORT] or mqtts://HOST[:PORT], not \"\(value)\"")
        }
        var hostPart = rest.hasSuffix("/") ? rest.dropLast() : rest
        var port: Int32 = tls ? 8883 : 1883
        if let colon = hostPart.lastIndex(of: ":"), !hostPart.hasSuffix("]") {
            guard let p = Int32(hostPart[hostPart.index(after: colon)...]), (1...65535).contains(p) else {
                throw ConfigError("\(key) has a bad port: \"\(value)\"")
            }
            port = p
            hostPart = hostPart[..<colon]
        }
        if hostPart.hasPrefix("["), hostPart.hasSuffix("]") { hostPart = hostPart.dropFirst().dropLast() }
        guard !hostPart.isEmpty, !hostPart.contains("/"), !hostPart.contains("@") else {
            throw ConfigError("\(key) must be mqtt://HOST[:PORT] or mqtts://HOST[:PORT], not \"\(value)\"")
        }
        return BrokerURL(host: String(hostPart), port: port, tls: tls)
    }

    /// An MQTT topic level (or, with `allowSlash`, a prefix of levels): no wildcards, no NUL.
    public static func topicLevel(_ key: String, _ value: String, allowSlash: Bool = false) throws(ConfigError) -> String {
        guard !value.isEmpty else { throw ConfigError("\(key) needs a value") }
        guard !value.contains(where: { $0 == "+" || $0 == "#" || $0 == "\0" || (!allowSlash && $0 == "/") }) else {
            throw ConfigError("\(key) must not contain \(allowSlash ? "" : "'/', ")'+', '#' or NUL, not \"\(value)\"")
        }
        return value
    }
}
