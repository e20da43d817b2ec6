import Glibc
import ProcessKit
import SugarWire
import SystemIO

/// One Nightscout sink: one site, optionally limited to one person's readings.
///
/// Keys (the same in every sink): `nightscout_url` (required), `nightscout_api_secret_file` (a file
/// holding the site's API_SECRET; sent as the `api-secret` header, its SHA-1 hex digest, as
/// Nightscout expects) and/or `nightscout_token` (an access token, sent as `?token=`),
/// `nightscout_treatments` (`false` by default; `true` also posts a "BG Check" treatment per glucose
/// reading), `nightscout_units` (`mgdl` or `mmol`: the unit of those treatments, default `mgdl`),
/// `nightscout_ca_file` (PEM CA certificates for a site with a private CA; certificates are always
/// verified) and `nightscout_person` (only readings of meters assigned to this person; without it
/// the sink takes every reading, including those of unassigned meters).
///
/// A configuration file holds any number of sinks: keys before any section form the sink named
/// `nightscout`; each `[nightscout NAME]` section starts the sink NAME (letters, digits, `-`, `_`).
public struct NightscoutSinkConfig: Sendable, Hashable {
    public var name: String
    public var url: String = ""
    public var apiSecretFile: String?
    public var token: String?
    public var treatments = false
    public var treatmentUnit: Wire.Unit = .mgdl
    public var caFile: String?
    public var person: String?

    public init(name: String = "nightscout") { self.name = name }

    /// Every key a sink understands.
    public static let keys: Set<String> = [
        "nightscout_url", "nightscout_api_secret_file", "nightscout_token", "nightscout_treatments", "nightscout_units",
        "nightscout_ca_file", "nightscout_person",
    ]

    /// Sets one key. Throws a message (without the value when it may be secret) for a bad value.
    public mutating func apply(key: String, value: String) throws(NightscoutConfigError) {
        switch key {
        case "nightscout_url":
            var url = value
            while url.hasSuffix("/") { url.removeLast() }
            let lower = url.lowercased()
            guard lower.hasPrefix("https://") || lower.hasPrefix("http://"), url.count > 8, !url.contains("?") else {
                throw NightscoutConfigError("nightscout_url must be the site's http:// or https:// address, not \"\(value)\"")
            }
            self.url = url
        case "nightscout_api_secret_file": self.apiSecretFile = value
        case "nightscout_token":
            guard !value.isEmpty, value.utf8.allSatisfy({ $0 > 32 && $0 < 127 }) else {
                throw NightscoutConfigError("nightscout_token must be the access token Nightscout's admin page shows")
            }
            self.token = value
        case "nightscout_treatments":
            guard value == "true" || value == "false" else {
                throw NightscoutConfigError("nightscout_treatments must be true or false, not \"\(value)\"")
            }
            self.treatments = value == "true"
        case "nightscout_units":
            guard value == "mgdl" || value == "mmol" else {
                throw NightscoutConfigError("nightscout_units must be mgdl or mmol, not \"\(value)\"")
            }
            self.treatmentUnit = value == "mgdl" ? .mgdl : .mmol
        case "nightscout_ca_file": self.caFile = value
        case "nightscout_person":
            guard !value.isEmpty else { throw NightscoutConfigError("nightscout_person must name a person") }
            self.person = value
        default:
            throw NightscoutConfigError("unknown key \"\(key)\"")
        }
    }

    /// Checks that the sink can run: a URL, and a secret or token.
    public func validate() throws(NightscoutConfigError) {
        guard !self.url.isEmpty else { throw NightscoutConfigError("sink \(self.name) needs nightscout_url") }
        guard self.apiSecretFile != nil || self.token != nil else {
            throw NightscoutConfigError("sink \(self.name) needs nightscout_api_secret_file or nightscout_token")
        }
    }

    /// The `api-secret` header value: the SHA-1 hex digest of the secret in `nightscout_api_secret_file`
    /// (surrounding white space removed), or nil without a secret file.
    public func apiSecretHeader() throws(NightscoutConfigError) -> String? {
        guard let path = self.apiSecretFile else { return nil }
        guard let text = readSmallFile(path) else {
            throw NightscoutConfigError("cannot read nightscout_api_secret_file \(path): \(String(cString: strerror(errno)))")
        }
        let secret = String(text.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
        guard !secret.isEmpty else { throw NightscoutConfigError("nightscout_api_secret_file \(path) is empty") }
        return SHA1.hex(secret)
    }

    /// Parses the Nightscout sinks of a `key = value` file (the format of ``ConfigFile``: `#` or `;`
    /// comment lines, quoted values, a key once per sink). Keys that are not Nightscout's before
    /// the first section belong to the program's own configuration and are skipped; inside a
    /// `[nightscout NAME]` section every key must be a sink key.
    public static func parse(_ text: String, file: String) throws(NightscoutConfigError) -> [NightscoutSinkConfig] {
        do {
            return try Self.sinks(in: text, file: file)
        } catch {
            throw NightscoutConfigError(error.description)
        }
    }

    /// ``parse(_:file:)`` with the errors as ``ConfigError`` (file and line), for a program's own
    /// configuration parser. Sections whose header starts with a word in `otherSections`
    /// (`[webhook NAME]`) belong to that parser and are skipped.
    public static func sinks(in text: String, file: String, otherSections: Set<String> = []) throws(ConfigError) -> [NightscoutSinkConfig] {
        var sinks: [NightscoutSinkConfig] = []
        for section in Self.sections(of: text) {
            var sink: NightscoutSinkConfig?
            if let header = section.header {
                let words = header.text.dropFirst().dropLast().split(separator: " ").map(String.init)
                if let kind = words.first, otherSections.contains(kind) { continue }
                guard header.text.hasSuffix("]"), words.count == 2, words[0] == "nightscout",
                    words[1].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
                else {
                    throw ConfigError(file: file, line: header.line, "a section is [nightscout NAME] (NAME: letters, digits, - or _)")
                }
                guard !sinks.contains(where: { $0.name == words[1] }) else {
                    throw ConfigError(file: file, line: header.line, "sink \(words[1]) is defined twice")
                }
                sink = NightscoutSinkConfig(name: words[1])
            }
            let inSection = section.header != nil
            try ConfigFile.parse(section.text, file: file) { (key, value) throws(ConfigError) in
                guard inSection || Self.keys.contains(key) else { return }
                if sink == nil { sink = NightscoutSinkConfig() }
                do throws(NightscoutConfigError) {
                    try sink?.apply(key: key, value: value)
                } catch {
                    throw ConfigError(error.message)
                }
            }
            guard let sink else { continue }
            do throws(NightscoutConfigError) {
                try sink.validate()
            } catch {
                throw ConfigError(file: file, line: section.header?.line, error.message)
            }
            sinks.append(sink)
        }
        return sinks
    }

    /// The text before the first `[section]` line, then each section: its header line and its
    /// text, with blank lines in front so that line numbers stay those of the file.
    public static func sections(of text: String) -> [(header: (text: String, line: Int)?, text: String)] {
        var out: [(header: (text: String, line: Int)?, text: String)] = [(nil, "")]
        var lineNumber = 0
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }) {
            lineNumber += 1
            let line = String(raw).trimmed
            if line.hasPrefix("[") {
                out.append(((line, lineNumber), String(repeating: "\n", count: lineNumber)))
            } else {
                out[out.count - 1].text += raw + "\n"
            }
        }
        return out
    }
}

/// A configuration problem, as one line for people (never contains a secret).
public struct NightscoutConfigError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { self.message }
}

extension String {
    var trimmed: String { String(self.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed()) }
}

/// The contents of a small text file (at most 1 MiB), or nil (errno set).
func readSmallFile(_ path: String) -> String? {
    do throws(FileReadError) {
        return String(decoding: try readWholeFile(path, limit: 1 << 20), as: UTF8.self)
    } catch {
        errno = error.code
        return nil
    }
}
