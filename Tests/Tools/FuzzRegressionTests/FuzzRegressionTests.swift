import Foundation
import FuzzTargets
import JSON
import PacketCapture
import Testing

/// One input file of a fuzz target.
struct FuzzInput: Sendable, Codable, CustomTestStringConvertible {
    /// Target name (`glucose-profile`, `json`, ...), the folder the file sits in.
    var target: String
    /// Path relative to the repository root.
    var path: String

    var testDescription: String { self.path }

    func bytes() throws -> [UInt8] {
        [UInt8](try Data(contentsOf: FuzzInputs.repository.appendingPathComponent(self.path)))
    }
}

enum FuzzInputs {
    /// The repository root (this file is Tests/Tools/FuzzRegressionTests/FuzzRegressionTests.swift).
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The target folders under `Fuzz/<kind>/`.
    static func folders(_ kind: String) -> [String] {
        let url = self.repository.appendingPathComponent("Fuzz/\(kind)")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        return names.filter { name in
            var isDirectory: ObjCBool = false
            let exists = FileManager.default.fileExists(atPath: url.appendingPathComponent(name).path, isDirectory: &isDirectory)
            return !name.hasPrefix(".") && exists && isDirectory.boolValue
        }.sorted()
    }

    /// Every file in `Fuzz/<kind>/<target>/`, for every target, sorted.
    static func files(_ kind: String) -> [FuzzInput] {
        self.folders(kind).flatMap { target in
            let folder = self.repository.appendingPathComponent("Fuzz/\(kind)/\(target)")
            let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
            return names.filter { !$0.hasPrefix(".") }.sorted().map { FuzzInput(target: target, path: "Fuzz/\(kind)/\(target)/\($0)") }
        }
    }
}

/// Runs a fuzz target on a thread of its own. The varlink target blocks while the server it talks to runs
/// on the cooperative pool, which has only as many threads as cores: two targets blocking pool threads at
/// once on a 2-core machine would starve the server.
func onOwnThread(_ body: @escaping FuzzTargets.Body, _ bytes: [UInt8]) async throws(FuzzFailure) {
    let result: Result<Void, FuzzFailure> = await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: Result { () throws(FuzzFailure) in try body(bytes) }) }.start()
    }
    try result.get()
}

/// Replays every input the fuzzers ever crashed on (`Fuzz/regressions/<target>/`) through the same entry
/// logic as the fuzz executables, each in a child process so a trap fails only its own case. Dropping a
/// reproducer file into that folder is all it takes to turn a fuzzer finding into a test.
@Suite struct FuzzRegressionTests {
    /// The child's exit code when the input passed. `.failure` matches any exit but 0 and any signal, so
    /// the child reports a pass with this code and the expectation returns the result (with the child's
    /// stderr: the trap message or the broken property) whatever happened; `.success` would return nil
    /// on a failure and lose the message.
    static let passed: Int32 = 42

    @Test("A regression input neither traps nor breaks a checked property", arguments: FuzzInputs.files("regressions"))
    func regression(_ input: FuzzInput) async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) { [input] in
            let bytes: [UInt8]
            do { bytes = try input.bytes() } catch {
                FileHandle.standardError.write(Data("cannot read \(input.path): \(error)\n".utf8))
                exit(2)
            }
            guard let body = FuzzTargets.target(named: input.target) else {
                FileHandle.standardError.write(Data("no fuzz target named \(input.target)\n".utf8))
                exit(3)
            }
            do {
                try await onOwnThread(body, bytes)
            } catch {
                FileHandle.standardError.write(Data("\(error)\n".utf8))
                exit(1)
            }
            exit(FuzzRegressionTests.passed)
        }
        guard let result else { return }  // the child could not run; #expect recorded why
        if result.exitStatus != .exitCode(Self.passed) {
            let stderr = String(decoding: result.standardErrorContent, as: UTF8.self)
            let lines = stderr.split(separator: "\n").filter { !$0.isEmpty }.prefix(16).joined(separator: "\n")
            Issue.record("\(input.path) (\(input.target)): \(result.exitStatus)\n\(lines)")
        }
    }

    /// The seed corpora must pass too (they are known-good packets, documents and config files), and each
    /// run checks far more than its decoder's unit tests: round trips, error offsets, JSON stability.
    @Test("Every seed passes its target's checks", arguments: FuzzTargets.all.map(\.name))
    func seeds(_ target: String) async throws {
        let body = try #require(FuzzTargets.target(named: target))
        let seeds = FuzzInputs.files("corpus").filter { $0.target == target }
        #expect(seeds.count >= 3, "Fuzz/corpus/\(target) needs seeds")
        for seed in seeds {
            let bytes = try seed.bytes()
            await #expect(throws: Never.self, "\(seed.path)") { try await onOwnThread(body, bytes) }
        }
    }

    /// The varlink target's byte streams really reach a server: a pipelined Echo, a three-part Stream and
    /// an unknown method come back in order, and a half-sent message is dropped when the client stops.
    @Test func varlinkStreamsReachTheServer() async throws {
        let stream = Array("""
            {"method":"org.sugard.fuzz.Echo","parameters":{"n":7}}\u{0}\
            {"method":"org.sugard.fuzz.Stream","parameters":{"count":3},"more":true}\u{0}\
            {"method":"org.sugard.fuzz.Nope"}\u{0}{"method":
            """.utf8)
        let replies: [JSONValue] = try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try FuzzTargets.varlinkReplies(toStream: stream) }) }.start()
        }
        #expect(replies.count == 5)
        #expect(replies.first?["parameters"]?["n"]?.intValue == 7)
        #expect(replies.dropFirst().prefix(3).map { $0["parameters"]?["index"]?.intValue } == [0, 1, 2])
        #expect(replies.dropFirst().prefix(3).map { $0["continues"]?.boolValue ?? false } == [true, true, false])
        #expect(replies.last?["error"]?.stringValue == "org.varlink.service.MethodNotFound")
    }

    /// The btsnoop seeds are real captures: the session seed decodes to a GATT session with notifications,
    /// so the fuzzer starts from inputs that reach the ATT and Glucose layers.
    @Test func btsnoopSeedReachesTheGATTLayer() throws {
        let seed = try FuzzInput(target: "btsnoop", path: "Fuzz/corpus/btsnoop/h4-glucose-session.btsnoop").bytes()
        let summary = try GATTEventReader.readAll(bytes: seed)
        #expect(summary.sessions.count == 1)
        #expect(summary.events.count >= 5)
        try FuzzTargets.btsnoop(seed)
    }

    @Test func everyFolderNamesATarget() {
        let names = Set(FuzzTargets.all.map(\.name))
        for kind in ["corpus", "regressions"] {
            for folder in FuzzInputs.folders(kind) {
                #expect(names.contains(folder), "Fuzz/\(kind)/\(folder) is not a fuzz target (known: \(names.sorted()))")
            }
        }
        #expect(Set(FuzzInputs.folders("corpus")) == names, "every target needs a seed corpus")
    }

    /// The checks can fail: a measurement that re-encodes differently is impossible to build from real
    /// decoders, so this uses inputs that must be rejected and documents that rejects are not failures.
    @Test func rejectedInputsAreNotFailures() async throws {
        for name in FuzzTargets.all.map(\.name) {
            let body = try #require(FuzzTargets.target(named: name))
            try await onOwnThread(body, [])
            try await onOwnThread(body, [0xFF, 0xFE, 0x00, 0x7B])
            try await onOwnThread(body, Array(repeating: UInt8(ascii: "["), count: 10_000))
            try await onOwnThread(body, [0x00] + Array(repeating: UInt8(ascii: "["), count: 10_000) + [0x00])
        }
    }
}
