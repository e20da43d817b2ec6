import Foundation
import Testing

@testable import SugarForward

/// The forwarder's position in sugard's readings: (database id, cursor), what a reply from another
/// database does to it, and how it is saved.
@Suite struct CursorIdentityTests {
    @Test func aReplyFromAnotherDatabaseStartsOverAndAnUnknownOneIsAdopted() {
        let saved = FeedPosition(databaseId: "a", cursor: 500)
        #expect(saved.change(for: "a") == .same)
        #expect(saved.change(for: nil) == .same, "a daemon without identities")
        #expect(saved.change(for: "b") == .startOver(from: "a", to: "b"))
        #expect(FeedPosition(databaseId: nil, cursor: 500).change(for: "b") == .adopt("b"))
    }

    @Test func theCursorFileKeepsTheIdentityAndTheLastStartOver() throws {
        let dir = FileManager.default.temporaryDirectory.path + "/cursor-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = CursorFile(directory: dir)
        let state = ForwardState(
            cursor: 42, databaseId: "0b9d6c4e-1c1a-4e7b-9c55-0a6f1d2e7b31", newest: ["m": 7],
            databaseReset: ForwardState.DatabaseReset(atMillis: 1_760_000_000_000, previousDatabaseId: "x", databaseId: "0b9d6c4e-1c1a-4e7b-9c55-0a6f1d2e7b31"))
        try file.save(state)
        #expect(try file.load() == state)
        // A file from before identities: no id, no reset; it loads and adopts later.
        try #"{"cursor": 9, "newest": {}}"#.write(toFile: file.path, atomically: true, encoding: .utf8)
        #expect(try file.load() == ForwardState(cursor: 9))
    }

    /// Saves run on another thread: a save of the old database's position that lands after the
    /// start-over must not move the file back to it.
    @Test func aStaleSaveAfterAStartOverIsDropped() throws {
        let dir = FileManager.default.temporaryDirectory.path + "/cursor-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let saver = CursorSaver(file: CursorFile(directory: dir))
        try saver.save(ForwardState(cursor: 500, databaseId: "a"))
        let restarted = ForwardState(
            cursor: 0, databaseId: "b", databaseReset: ForwardState.DatabaseReset(atMillis: 10, previousDatabaseId: "a", databaseId: "b"))
        try saver.save(restarted)
        try saver.save(ForwardState(cursor: 499, databaseId: "a"))  // stale, from before
        #expect(try CursorFile(directory: dir).load() == restarted)
        var next = restarted
        next.cursor = 3
        try saver.save(next)
        #expect(try CursorFile(directory: dir).load().cursor == 3)
        // Adopting an identity without moving the cursor is saved too.
        let other = CursorSaver(file: CursorFile(directory: dir))
        try other.save(ForwardState(cursor: 7))
        try other.save(ForwardState(cursor: 7, databaseId: "c"))
        #expect(try CursorFile(directory: dir).load().databaseId == "c")
    }
}
