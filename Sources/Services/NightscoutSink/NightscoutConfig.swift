import Glibc
import GlucoseProfile
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
    /// The sink's name: `nightscout` for the top-level keys, else the section's NAME; names the cursor file.
    public var name: String
    /// The site's address (`nightscout_url`), trailing slashes removed; empty until set (required).
    public var url: String = ""
    /// The file holding the site's API_SECRET (`nightscout_api_secret_file`), read when the sink starts.
    public var apiSecretFile: String?
    /// An access token sent as `?token=` (`nightscout_token`).
    public var token: String?
    /// Whether each glucose reading is also posted as a `BG Check` treatment (`nightscout_treatments`).
    public var treatments = false
    /// The unit of those treatments (`nightscout_units`); entries are always in mg/dL, as
    /// Nightscout stores them.
    public var treatmentUnit: Wire.Unit = .mgdl
    /// PEM CA certificates to verify the site with (`nightscout_ca_file`); nil: the system's.
    public var caFile: String?
    /// Only readings of meters assigned to this person (`nightscout_person`); nil: every reading.
    public var person: String?

    /// A sink with every key at its default (no URL yet: ``validate()`` refuses it).
    public init(name: String = "nightscout") { self.name = name }

    /// Every key a sink understands, declared once: the parser, forward.conf's `--help`, man page,
    /// example file and docs/configuration.md read this table.
    public static let keys: [ConfigKey<NightscoutSinkConfig>] = [
        ConfigKey(
            "nightscout_url", "a Nightscout site, https://... (a sink: these keys before any section, or in a [nightscout NAME] section)",
            example: "https://family.example.net",
            intro: "Nightscout sinks (one site per person). The nightscout_* keys here, before any section, form the sink \"nightscout\"; each [nightscout NAME] section starts another (until the next section; see the end of this file). A sink needs nightscout_url and nightscout_api_secret_file or nightscout_token.",
            { $0.url }
        ) {
            var url = $1.value
            while url.hasSuffix("/") { url.removeLast() }
            let lower = url.lowercased()
            guard lower.hasPrefix("https://") || lower.hasPrefix("http://"), url.count > 8, !url.contains("?") else {
                throw ConfigError("nightscout_url must be the site's http:// or https:// address, not \"\($1.value)\"")
            }
            $0.url = url
        },
        ConfigKey(
            "nightscout_api_secret_file", "file holding the site's API_SECRET, sent as the api-secret header (its SHA-1 hex digest)",
            example: "/etc/sugard/nightscout.secret", { $0.apiSecretFile ?? "" }
        ) { $0.apiSecretFile = $1.value },
        ConfigKey("nightscout_token", "or an access token, sent as ?token=", example: "sugard-3f9c1e0a2b7d4c55", { $0.token ?? "" }) {
            guard !$1.value.isEmpty, $1.value.utf8.allSatisfy({ $0 > 32 && $0 < 127 }) else {
                throw ConfigError("nightscout_token must be the access token Nightscout's admin page shows")
            }
            $0.token = $1.value
        },
        ConfigKey(
            "nightscout_treatments",
            "true also posts a BG Check treatment per glucose value (default false; LO and HI always go as Note treatments)",
            { String($0.treatments) }
        ) {
            guard $1.value == "true" || $1.value == "false" else {
                throw ConfigError("nightscout_treatments must be true or false, not \"\($1.value)\"")
            }
            $0.treatments = $1.value == "true"
        },
        ConfigKey("nightscout_units", "the unit of those treatments: mgdl (default) or mmol", { $0.treatmentUnit.rawValue }) {
            guard $1.value == "mgdl" || $1.value == "mmol" else {
                throw ConfigError("nightscout_units must be mgdl or mmol, not \"\($1.value)\"")
            }
            $0.treatmentUnit = $1.value == "mgdl" ? .mgdl : .mmol
        },
        ConfigKey(
            "nightscout_ca_file", "PEM CA certificates for a site behind a private CA (certificates are always verified)",
            example: "/etc/sugard/home-ca.pem", { $0.caFile ?? "" }
        ) { $0.caFile = $1.value },
        ConfigKey(
            "nightscout_person", "only readings of meters assigned to this person (without it: every reading, unassigned meters too)",
            example: "Mia", { $0.person ?? "" }
        ) {
            guard !$1.value.isEmpty else { throw ConfigError("nightscout_person must name a person") }
            $0.person = $1.value
        },
    ]

    /// The names of ``keys``.
    public static let keyNames: Set<String> = Set(Self.keys.map(\.key))

    /// Sets one key. Throws a message (without the value when it may be secret) for a bad value.
    public mutating func apply(key: String, value: String) throws(NightscoutConfigError) {
        guard let entry = Self.keys.key(key) else { throw NightscoutConfigError("unknown key \"\(key)\"") }
        do {
            try entry.apply(value, to: &self)
        } catch {
            throw NightscoutConfigError(error.message)
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
                guard inSection || Self.keyNames.contains(key) else { return }
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
    /// The problem, naming the key or the file; never the secret itself.
    public var message: String
    /// An error with `message` as its text.
    public init(_ message: String) { self.message = message }
    /// The message as it is.
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
