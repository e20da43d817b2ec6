import Glibc
import JSON
import Locking
import SystemIO

/// What the forwarder keeps across restarts, in `<state-dir>/cursor.json`: the highest cursor the
/// broker acknowledged contiguously, and each meter's newest measured time published to its
/// retained state topic. Written atomically and durably: a temporary file, fsync, rename, fsync
/// of the directory; a crash leaves the old or the new file, never a torn one.
public struct ForwardState: Equatable, Sendable {
    public var cursor: Int64 = 0
    public var newest: [String: Int64] = [:]

    public init(cursor: Int64 = 0, newest: [String: Int64] = [:]) {
        self.cursor = cursor
        self.newest = newest
    }

    var json: JSONValue {
        let newest = JSONObject(self.newest.sorted { $0.key < $1.key }.map { ($0.key, JSONValue.int($0.value)) })
        return ["cursor": .int(self.cursor), "newest": .object(newest)]
    }
}

public struct CursorFile: Sendable {
    public let path: String

    public init(directory: String) { self.path = directory + "/cursor.json" }

    /// The saved state; a fresh one when there is no file yet. Throws when the file is unreadable.
    public func load() throws(ForwardFileError) -> ForwardState {
        let bytes: [UInt8]
        do throws(FileReadError) {
            bytes = try readWholeFile(self.path)
        } catch {
            if error.code == ENOENT { return ForwardState() }
            throw ForwardFileError("cannot read \(self.path): \(error)")
        }
        guard case .object(let object)? = try? JSONValue(parsing: bytes), let cursor = object["cursor"]?.intValue else {
            throw ForwardFileError("\(self.path) is damaged (not the forwarder's state); move it away to start over")
        }
        var state = ForwardState(cursor: cursor)
        if case .object(let newest)? = object["newest"] {
            for entry in newest.entries { if let millis = entry.value.intValue { state.newest[entry.key] = millis } }
        }
        return state
    }

    /// Replaces the file with `state`, durably.
    public func save(_ state: ForwardState) throws(ForwardFileError) {
        let temporary = self.path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ForwardFileError("cannot write \(temporary): \(String(cString: strerror(errno)))") }
        let bytes = Array((state.json.serialized() + "\n").utf8)
        let code = writeAll(fd, bytes)
        if code != 0 {
            close(fd)
            throw ForwardFileError("cannot write \(temporary): \(String(cString: strerror(code)))")
        }
        guard fsync(fd) == 0 else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw ForwardFileError("cannot sync \(temporary): \(message)")
        }
        close(fd)
        guard rename(temporary, self.path) == 0 else {
            throw ForwardFileError("cannot replace \(self.path): \(String(cString: strerror(errno)))")
        }
        let directory = String(self.path[..<(self.path.lastIndex(of: "/") ?? self.path.startIndex)])
        let dfd = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 {
            _ = fsync(dfd)
            close(dfd)
        }
    }
}

/// Writes the cursor file from any thread (the forwarder saves on a thread of its own, so its event
/// loop goes on while the disk syncs): one write at a time, never an older cursor over a newer one.
final class CursorSaver: Sendable {
    let file: CursorFile
    private let written = Lock<Int64?>(nil)

    init(file: CursorFile) { self.file = file }

    func save(_ state: ForwardState) throws(ForwardFileError) {
        try self.written.withLock { (last: inout Int64?) throws(ForwardFileError) in
            if let last, state.cursor <= last { return }
            try self.file.save(state)
            last = state.cursor
        }
    }
}

public struct ForwardFileError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
