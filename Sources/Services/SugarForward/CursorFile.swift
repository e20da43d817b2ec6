import Glibc
import JSON
import Locking
import SugarWire
import SystemIO

/// What the forwarder keeps across restarts, in `<state-dir>/cursor.json`: the highest cursor the
/// broker acknowledged contiguously and the database it is a position in (`databaseId`, sugard's
/// database identity), each meter's newest measured time published to its retained state topic,
/// and the last time the database changed and delivery started over (`databaseReset`). Written
/// atomically and durably: a temporary file, fsync, rename, fsync of the directory; a crash leaves
/// the old or the new file, never a torn one. A file from before identities has no `databaseId`:
/// its cursor adopts the first identity sugard reports (no start-over).
public struct ForwardState: Equatable, Sendable {
    /// The highest cursor the broker acknowledged with every one before it.
    public var cursor: Int64 = 0
    /// The sugard database the cursor is a position in; nil in a file from before identities.
    public var databaseId: String?
    /// Each meter's newest measured time (epoch ms) published to its retained state topic.
    public var newest: [String: Int64] = [:]
    /// The last start-over, when there was one.
    public var databaseReset: DatabaseReset?

    /// Delivery started over because sugard's database changed (recreated, restored).
    public struct DatabaseReset: Equatable, Sendable {
        /// When the forwarder noticed it (epoch ms).
        public var atMillis: Int64
        /// The database delivered before.
        public var previousDatabaseId: String
        /// The database delivery started over in.
        public var databaseId: String

        /// A start-over's facts.
        public init(atMillis: Int64, previousDatabaseId: String, databaseId: String) {
            self.atMillis = atMillis
            self.previousDatabaseId = previousDatabaseId
            self.databaseId = databaseId
        }

        /// The start-over as `io.sugard.Forward` shows it.
        public var wire: Wire.DatabaseReset {
            Wire.DatabaseReset(atMillis: self.atMillis, previousDatabaseId: self.previousDatabaseId, databaseId: self.databaseId)
        }
    }

    /// A state; a fresh one by default (cursor 0, no database).
    public init(cursor: Int64 = 0, databaseId: String? = nil, newest: [String: Int64] = [:], databaseReset: DatabaseReset? = nil) {
        self.cursor = cursor
        self.databaseId = databaseId
        self.newest = newest
        self.databaseReset = databaseReset
    }

    /// The state's place in time: a save of a state that sorts below the last one written is
    /// stale (a start-over moves the cursor back, but its reset time forward).
    var order: (Int64, Int64) { (self.databaseReset?.atMillis ?? 0, self.cursor) }

    /// The state as `cursor.json` holds it.
    var json: JSONValue {
        let newest = JSONObject(self.newest.sorted { $0.key < $1.key }.map { ($0.key, JSONValue.int($0.value)) })
        var object: JSONObject = ["cursor": .int(self.cursor)]
        if let id = self.databaseId { object["databaseId"] = .string(id) }
        object["newest"] = .object(newest)
        if let reset = self.databaseReset {
            object["databaseReset"] = [
                "atMillis": .int(reset.atMillis), "previousDatabaseId": .string(reset.previousDatabaseId),
                "databaseId": .string(reset.databaseId),
            ]
        }
        return .object(object)
    }
}

/// `<state-dir>/cursor.json`: the MQTT sink's ``ForwardState``.
public struct CursorFile: Sendable {
    /// The file's path.
    public let path: String

    /// The file in `directory`.
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
        var state = ForwardState(cursor: cursor, databaseId: object["databaseId"]?.stringValue)
        if case .object(let reset)? = object["databaseReset"], let at = reset["atMillis"]?.intValue,
            let previous = reset["previousDatabaseId"]?.stringValue, let id = reset["databaseId"]?.stringValue
        {
            state.databaseReset = ForwardState.DatabaseReset(atMillis: at, previousDatabaseId: previous, databaseId: id)
        }
        if case .object(let newest)? = object["newest"] {
            for entry in newest.entries { if let millis = entry.value.intValue { state.newest[entry.key] = millis } }
        }
        return state
    }

    /// Replaces the file with `state`, durably.
    /// Throws when the temporary file cannot be written or synced, or the rename fails.
    public func save(_ state: ForwardState) throws(ForwardFileError) {
        try Self.replace(self.path, with: Array((state.json.serialized() + "\n").utf8))
    }

    /// Replaces the file at `path` with `bytes`: a temporary file, fsync, rename, fsync of the directory.
    static func replace(_ path: String, with bytes: [UInt8]) throws(ForwardFileError) {
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ForwardFileError("cannot write \(temporary): \(String(cString: strerror(errno)))") }
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
        guard rename(temporary, path) == 0 else {
            throw ForwardFileError("cannot replace \(path): \(String(cString: strerror(errno)))")
        }
        syncDirectory(containing: path)
    }
}

/// The sugard database a Nightscout sink's cursor (`nightscout-<name>.cursor`) is a position in:
/// `nightscout-<name>.database`, the identity alone. Missing: a cursor from before identities,
/// which adopts the first identity sugard reports.
struct DatabaseIdFile: Sendable {
    /// `<state-dir>/nightscout-<name>.database`.
    let path: String

    /// The file of sink `sink` in `directory`.
    init(directory: String, sink: String) { self.path = directory + "/nightscout-" + sink + ".database" }

    /// The saved identity; nil when there is none (or the file cannot be read).
    func load() -> String? {
        guard let bytes = try? readWholeFile(self.path) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self).filter { !$0.isWhitespace }
        return text.isEmpty ? nil : text
    }

    /// Replaces the file with `id`, durably.
    func save(_ id: String) throws(ForwardFileError) { try CursorFile.replace(self.path, with: Array((id + "\n").utf8)) }
}

/// Writes the cursor file from any thread (the forwarder saves on a thread of its own, so its event
/// loop goes on while the disk syncs): one write at a time, never an older cursor over a newer one.
final class CursorSaver: Sendable {
    /// The cursor file.
    let file: CursorFile
    /// The last state written.
    private let written = Lock<ForwardState?>(nil)

    /// A saver for `file`.
    init(file: CursorFile) { self.file = file }

    /// Writes `state` unless it is older than the last one written (or the same place, adopting no
    /// new identity); throws when the file cannot be replaced.
    func save(_ state: ForwardState) throws(ForwardFileError) {
        try self.written.withLock { (last: inout ForwardState?) throws(ForwardFileError) in
            // Older than what was written (a save from before a start-over lands late): dropped.
            // The same place: dropped, unless it adopts an identity the file does not have yet.
            if let last, state.order < last.order || (state.order == last.order && (last.databaseId != nil || state.databaseId == nil)) {
                return
            }
            try self.file.save(state)
            last = state
        }
    }
}

/// Why the forwarder's state file cannot be read or written.
public struct ForwardFileError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, with the path.
    public var description: String
    /// An error saying `description`.
    public init(_ description: String) { self.description = description }
}
