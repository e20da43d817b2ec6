import SystemIO

/// The `--help` text and the man page of a service program (`sugard-forward`, `sugard-hub`), both
/// made from one description and its config file's key tables, so the two never disagree.
public struct ServiceManual: Sendable {
    /// A block of config keys in `--help`: its title line and the keys' lines.
    public struct KeyBlock: Sendable {
        /// The title, such as `CONFIG KEYS (key = value):`.
        public var title: String
        /// One line per key (``ConfigFileDoc/helpLines(section:width:)``).
        public var lines: [String]

        /// A titled block of key lines.
        public init(title: String, lines: [String]) {
            self.title = title
            self.lines = lines
        }
    }

    /// The program's name (the man page's title).
    public var name: String
    /// One line: what the program does.
    public var summary: String
    /// The paragraph under the summary.
    public var description: String
    /// The usage line.
    public var synopsis: String
    /// The flags with their help, in order.
    public var options: [(flag: String, help: String)]
    /// The key blocks of `--help`, in order.
    public var keyBlocks: [KeyBlock]
    /// The man page's paragraph on the config file (its path, its syntax, its sections).
    public var configuration: String
    /// The config file's keys, for the man page.
    public var reference: ConfigFileDoc
    /// What each exit status means.
    public var exitStatus: String
    /// The man page's "See also" line.
    public var seeAlso: String
    /// The man page's section (8 for the daemons).
    public var section: Int

    /// A manual from its parts; see the properties.
    public init(
        name: String, summary: String, description: String, synopsis: String, options: [(flag: String, help: String)],
        keyBlocks: [KeyBlock], configuration: String, reference: ConfigFileDoc, exitStatus: String, seeAlso: String, section: Int = 8
    ) {
        self.name = name
        self.summary = summary
        self.description = description
        self.synopsis = synopsis
        self.options = options
        self.keyBlocks = keyBlocks
        self.configuration = configuration
        self.reference = reference
        self.exitStatus = exitStatus
        self.seeAlso = seeAlso
        self.section = section
    }

    /// The `--help` text: overview, usage, options, the key blocks and the exit statuses.
    public var usage: String {
        var parts = [
            "OVERVIEW: \(self.name) - \(self.summary)", self.description, "USAGE: \(self.synopsis)",
            "OPTIONS:\n" + self.options.map { ConfigFileDoc.helpLine($0.flag, $0.help) }.joined(separator: "\n"),
        ]
        for block in self.keyBlocks { parts.append(block.title + "\n" + block.lines.joined(separator: "\n")) }
        parts.append("Exit status: \(self.exitStatus)")
        return parts.joined(separator: "\n\n")
    }

    /// The man page in roff: synopsis, description, options, configuration with every key, exit
    /// status, see also.
    public func manPage() -> String {
        var page = ManPage(name: self.name, section: self.section, summary: self.summary)
        page.section("Synopsis")
        page.literal([self.synopsis])
        page.section("Description")
        page.paragraph(self.description)
        page.section("Options")
        for option in self.options { page.item(option.flag, option.help) }
        page.section("Configuration")
        page.paragraph(self.configuration)
        self.reference.manItems(into: &page)
        page.section("Exit status")
        page.paragraph(self.exitStatus)
        page.section("See also")
        page.paragraph(self.seeAlso)
        return page.roff
    }
}

extension ServiceManual {
    /// What an informational request prints, newline-terminated (nil for ``ServiceArguments/run(configFile:keyFlags:)``):
    /// the usage, `NAME VERSION`, the man page, the example config file or the key reference.
    public func text(for request: ServiceArguments, version: String) -> String? {
        switch request {
        case .help: self.usage + "\n"
        case .version: "\(self.name) \(version)\n"
        case .manPage: self.manPage()
        case .exampleConfig: self.reference.exampleFile
        case .configReference: self.reference.referenceTable
        case .run: nil
        }
    }
}
