import Foundation
import ProcessKit
import SugarForward
import Testing

/// `config/forward.conf.example`, which the package installs as the conffile /etc/sugard/forward.conf:
/// every key of the forwarder's table shown commented out (as sugard.conf is), nothing set.
@Suite struct ForwardConfigExampleTests {
    static let path = Self.repositoryRoot() + "/config/forward.conf.example"

    /// The directory holding Package.swift, above this file.
    static func repositoryRoot() -> String {
        var url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path), url.path != "/" {
            url = url.deletingLastPathComponent()
        }
        return url.path
    }

    /// The committed example is the one `sugard-forward --print-example-config` writes from the key
    /// tables (regenerate: `sugard-forward --print-example-config > config/forward.conf.example`).
    @Test func theCommittedExampleIsTheGeneratedOne() throws {
        let text = try String(contentsOfFile: Self.path, encoding: .utf8)
        #expect(text == ForwardConfig.reference.exampleFile)
        for key in ForwardConfig.reference.keys {
            #expect(ForwardCommandLine.usage.contains("  " + key.key + " "), "--help lacks \(key.key)")
            #expect(ForwardCommandLine.manPage().contains(".B \(key.key)\n"), "sugard-forward(8) lacks \(key.key)")
        }
    }

    @Test func everyKeyIsShownCommentedOutAndNoneIsSet() throws {
        let text = try String(contentsOfFile: Self.path, encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for key in ForwardConfig.keys.map(\.key) {
            #expect(lines.contains { $0.hasPrefix("#\(key) = ") }, "forward.conf.example lacks #\(key) = …")
        }
        let set = lines.filter { line in
            let trimmed = line.drop(while: { $0 == " " || $0 == "\t" })
            return !trimmed.isEmpty && !trimmed.hasPrefix("#") && !trimmed.hasPrefix(";")
        }
        #expect(set.isEmpty, "forward.conf.example sets \(set)")
        // As installed it reads as the defaults, and each value it shows is one the forwarder accepts.
        var installed = ForwardConfig(gatewayID: "gw", socketPath: "/run/sugard/s", stateDirectory: "/var/lib/sugard-forward")
        try installed.apply(fileText: text, file: "forward.conf")
        for line in lines where line.hasPrefix("#") && !line.hasPrefix("# ") && line.contains(" = ") {
            // A Nightscout key belongs to a sink, which needs its site and a credential (the shown one, or a token).
            let key = String(line.dropFirst().prefix { $0 != " " })
            var sink = ["nightscout_url": "https://site.example.net", "nightscout_token": "test-token"]
            sink[key] = nil
            if key == "nightscout_api_secret_file" { sink["nightscout_token"] = nil }
            let site = key.hasPrefix("nightscout_") ? sink.sorted { $0.key > $1.key }.map { "\($0.key) = \($0.value)\n" }.joined() : ""
            var shown = ForwardConfig(gatewayID: "gw", socketPath: "/run/sugard/s", stateDirectory: "/var/lib/sugard-forward")
            #expect(throws: Never.self, "\(line)") { try shown.apply(fileText: site + line.dropFirst() + "\n", file: "forward.conf") }
        }
    }
}
