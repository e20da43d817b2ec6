import Glibc
import GlucoseProfile
import HealthDataSync
import ProcessKit
import SugarAPI
import SugarDaemon
import Testing

/// #22 item 7 (what is accepted; the rejections are in ConfigTests.badFilesNameTheLine) and #20's
/// drop-in directory, through the production parser and command line.
@Suite struct ConfigCheckTests {
    @Test func validZonesGroupsAndRepeatedReplayAreAccepted() throws {
        var config = DaemonConfig(stateDirectory: "/s", socketPath: "/s/sock")
        try config.apply(
            fileText: "timezone = \"Europe/Berlin\"\nsocket_group = root\nadmin_group = 0\nreplay = /a\nreplay = /b\n", file: "x.conf")
        #expect(config.timeZone == "Europe/Berlin")
        #expect(config.socketGroup == "root" && config.adminGroup == "0")
        #expect(config.replay == ["/a", "/b"])
    }

    /// A scratch directory with the main file and its drop-ins.
    private func scratch(_ files: [String: String]) throws -> String {
        var template = Array("/tmp/sdc.XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        try #require(made != nil)
        let dir = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        mkdir(dir + "/sugard.conf.d", 0o755)
        for (name, text) in files {
            let fp = try #require(fopen(dir + "/" + name, "wb"))
            fputs(text, fp)
            fclose(fp)
        }
        return dir
    }

    private func remove(_ dir: String) {
        for name in MainFileAndDropIns.allNames { unlink(dir + "/" + name) }
        rmdir(dir + "/sugard.conf.d")
        rmdir(dir)
    }

    private enum MainFileAndDropIns {
        static let allNames = ["sugard.conf", "sugard.conf.d/10-a.conf", "sugard.conf.d/20-b.conf", "sugard.conf.d/README",
                               "sugard.conf.d/30-bad.conf"]
    }

    @Test func dropInsOverrideTheMainFileInLexicalOrder() throws {
        let dir = try self.scratch([
            "sugard.conf": "log_level = warning\ncooldown_seconds = 10\nunit = mmol\n",
            // 20 is read after 10 whatever order readdir gives; a non-.conf file is ignored.
            "sugard.conf.d/20-b.conf": "cooldown_seconds = 30\n",
            "sugard.conf.d/10-a.conf": "cooldown_seconds = 20\nlog_level = debug\n",
            "sugard.conf.d/README": "this is not config\n",
        ])
        defer { self.remove(dir) }
        #expect(try DaemonCommandLine.dropInFiles(dir + "/sugard.conf.d") == [dir + "/sugard.conf.d/10-a.conf", dir + "/sugard.conf.d/20-b.conf"])
        let command = try DaemonCommandLine.parse(["--config", dir + "/sugard.conf", "--log-level", "error"], environment: [:])
        guard case .run(let config, _) = command else { Issue.record("expected run"); return }
        #expect(config.cooldownSeconds == 30)
        #expect(config.unit == .mmol)
        #expect(config.logLevel == .error)  // flags still win
    }

    @Test func aBadDropInNamesItsFileAndLine() throws {
        let dir = try self.scratch([
            "sugard.conf": "log_level = info\n",
            "sugard.conf.d/30-bad.conf": "# zone\n\ntimezone = Nowhere/Land\n",
        ])
        defer { self.remove(dir) }
        do {
            _ = try DaemonCommandLine.parse(["--config", dir + "/sugard.conf"], environment: [:])
            Issue.record("accepted a bad drop-in")
        } catch {
            #expect(error.file == dir + "/sugard.conf.d/30-bad.conf")
            #expect(error.line == 3)
        }
    }

    /// The conffile the package installs has every key the parser knows, commented out.
    @Test func exampleConfigListsEveryKeyCommented() throws {
        let fp = try #require(fopen(Self.repositoryRoot() + "/config/sugard.conf.example", "rb"))
        defer { fclose(fp) }
        var text = ""
        var buffer = [CChar](repeating: 0, count: 4096)
        while fgets(&buffer, 4096, fp) != nil { text += String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        let lines = text.split(separator: "\n")
        for key in DaemonConfig.keys {
            #expect(lines.contains { $0.hasPrefix("#\(key.key) = ") }, "config/sugard.conf.example lacks #\(key.key) = …")
        }
        #expect(!lines.contains { !$0.hasPrefix("#") && !$0.isEmpty }, "every line of the example is a comment")
        var config = DaemonConfig(stateDirectory: "/s", socketPath: "/s/sock")
        try config.apply(fileText: text, file: "sugard.conf.example")
        #expect(config == DaemonConfig(stateDirectory: "/s", socketPath: "/s/sock"))
    }

    /// The committed example is the one `sugard --print-example-config` writes from
    /// `DaemonConfig.keys` (regenerate: `sugard --print-example-config > config/sugard.conf.example`);
    /// every key it shows, uncommented, is a value the parser takes.
    @Test func theCommittedExampleIsTheGeneratedOne() throws {
        let fp = try #require(fopen(Self.repositoryRoot() + "/config/sugard.conf.example", "rb"))
        defer { fclose(fp) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, fp)
            if count <= 0 { break }
            bytes += buffer.prefix(count)
        }
        #expect(String(decoding: bytes, as: UTF8.self) == DaemonConfig.reference.exampleFile)
        for key in DaemonConfig.reference.keys {
            var config = DaemonConfig(stateDirectory: "/s", socketPath: "/s/sock")
            guard key.key != "socket_group", key.key != "admin_group" else { continue }  // groups of the installed host
            #expect(throws: Never.self, "\(key.key) = \(key.example)") { try config.apply(key: key.key, value: key.example) }
        }
    }

    /// The directory holding Package.swift, above this file.
    static func repositoryRoot() -> String {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false).dropLast()
        while !parts.isEmpty, access(parts.joined(separator: "/") + "/Package.swift", F_OK) != 0 { parts = parts.dropLast() }
        return parts.joined(separator: "/")
    }

    @Test func manPagesCarryEveryOptionAndKey() throws {
        let daemon = try #require(ManPages.page("sugard"))
        for option in DaemonCommandLine.options {
            let flag = option.flag.split(separator: ",").last!.trimmingCharacters(in: " ")
            #expect(daemon.contains(flag.replacingMinus()), "sugard(8) lacks \(flag)")
            #expect(DaemonCommandLine.usage.contains(flag))
        }
        let conf = try #require(ManPages.page("sugard.conf"))
        for key in DaemonConfig.keys { #expect(conf.contains(".B \(key.key)"), "sugard.conf(5) lacks \(key.key)") }
    }
}

extension StringProtocol {
    fileprivate func trimmingCharacters(in set: Character) -> String {
        String(self.drop { $0 == set }.reversed().drop { $0 == set }.reversed())
    }
    fileprivate func replacingMinus() -> String { self.split(separator: "-", omittingEmptySubsequences: false).joined(separator: "\\-") }
}
