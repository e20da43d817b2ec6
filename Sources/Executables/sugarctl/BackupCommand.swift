#if canImport(Glibc)
import Glibc
#endif
import JSON
import SugarWire
import SystemIO

/// `sugarctl backup FILE` and `sugarctl restore FILE`.
///
/// sugard runs sandboxed (its own user, ProtectSystem=strict, ProtectHome, PrivateTmp): it can
/// neither write nor read a path of the caller's. So the bytes travel over the socket: for a
/// backup sugard makes a consistent copy with SQLite's online backup API in its own directory,
/// checks it, unlinks it and streams it (`Backup`); sugarctl writes FILE 0600 through a temporary
/// file, fsync and rename. For a restore sugarctl sends FILE in parts (`RestoreUpload`) to a
/// staging file next to the database, and `Restore` checks it and swaps it in.
enum BackupCommand {
    static let backupHelp = CommandHelp(
        name: "backup",
        abstract: "Write a consistent copy of sugard's database to FILE (mode 0600), at any time, also during a sync.",
        usage: "backup <file> [--force] [--json] [--socket <path>]",
        arguments: [("<file>", "Where to write the copy; it must not exist unless --force.")],
        options: [
            ("--force", "Replace FILE when it exists."),
            JSONOutput.help("what was written, {\"path\", \"size\", \"readings\", \"databaseId\", \"schemaVersion\"}"),
        ] + DaemonOptions.help,
        discussion: """
            sugard copies its database with SQLite's online backup API (one consistent snapshot; syncs go on \
            meanwhile), checks the copy (integrity_check) and sends it over its socket; sugarctl writes it to a \
            temporary file next to FILE, syncs it and renames it to FILE, so FILE is whole or absent. The copy keeps \
            the database's identity (databaseId). Restore it with `sugarctl restore FILE`.
            Needs root or the admin group. Exit status: 0 ok, 1 failure (FILE exists, cannot be written, the copy \
            failed), 64 usage, 69 sugard not reachable, 77 permission denied.
            """
    )

    static let restoreHelp = CommandHelp(
        name: "restore",
        abstract: "Replace sugard's database with FILE (a backup); the current one is kept next to it.",
        usage: "restore <file> [--json] [--socket <path>]",
        arguments: [("<file>", "A database file written by `sugarctl backup` (or a copy of sugard.sqlite).")],
        options: [
            JSONOutput.help(
                "what was restored, {\"path\", \"size\", \"readings\", \"databaseId\", \"previousDatabaseId\", \"schemaVersion\", "
                    + "\"migratedFrom\", \"keptAs\"}")
        ] + DaemonOptions.help,
        discussion: """
            sugarctl sends FILE to sugard (running), which checks it: a sound SQLite file (integrity_check), a sugard \
            database with a schema version up to its own (an older one is migrated). It gives the restored data a NEW \
            database identity, so sugard-forward and other followers deliver its readings again from the beginning \
            instead of skipping (receivers drop duplicates by reading id). It keeps the current database as \
            sugard.sqlite.before-restore-<time> next to it, swaps the new one in (rename) and goes on serving.
            Needs root or the admin group. Exit status: 0 ok, 1 failure, 64 usage, 65 FILE is not a usable sugard \
            database (not SQLite, damaged, another schema or a newer one; nothing was changed), 66 FILE cannot be \
            read, 69 sugard not reachable, 77 permission denied.
            """
    )

    static let backup = Subcommand(help: backupHelp) { arguments in await runBackup(arguments) }
    static let restore = Subcommand(help: restoreHelp) { arguments in await runRestore(arguments) }

    /// EX_NOINPUT: the file to restore cannot be read.
    static let noInput: Int32 = 66

    static func runBackup(_ arguments: [String]) async -> Int32 {
        await runDaemonCommand(arguments, help: backupHelp, flags: ["force", JSONOutput.flag], values: []) { parsed throws(CommandFailure) in
            guard let file = parsed.positionals.first else { throw usage("Missing expected argument '<file>'", backupHelp) }
            guard parsed.positionals.count == 1 else { throw usage("Unexpected argument '\(parsed.positionals[1])'", backupHelp) }
            if !parsed.flags.contains("force"), access(file, F_OK) == 0 {
                throw CommandFailure(ExitCode.failure, "Error: \(file) exists; use --force to replace it.")
            }
            let temporary = file + ".tmp-\(getpid())"
            let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                throw CommandFailure(ExitCode.failure, "Error: cannot create \(temporary): \(String(cString: strerror(errno)))")
            }
            var closed = false
            var done = false
            defer {
                if !closed { close(fd) }
                if !done { unlink(temporary) }
            }
            _ = fchmod(fd, 0o600)  // whatever the umask: health data
            var written: Int64 = 0
            var summary: (size: Int64, readings: Int64, databaseId: String?, schema: Int64)?
            let daemon = try Daemon.connect(parsed)
            try await daemon.stream("Backup") { reply throws(CommandFailure) -> Bool in
                guard let size = reply["size"]?.intValue, let offset = reply["offset"]?.intValue,
                    let data = reply["data"]?.stringValue, let bytes = Base64.decode(data)
                else {
                    throw CommandFailure(ExitCode.failure, "Error: sugard sent a Backup reply this sugarctl cannot read.")
                }
                guard offset == written else {
                    throw CommandFailure(ExitCode.failure, "Error: sugard sent part of the backup at \(offset), expected \(written).")
                }
                let code = writeAll(fd, bytes)
                guard code == 0 else {
                    throw CommandFailure(ExitCode.failure, "Error: cannot write \(temporary): \(String(cString: strerror(code)))")
                }
                written += Int64(bytes.count)
                summary = (
                    size, reply["readings"]?.intValue ?? 0, reply["databaseId"]?.stringValue, reply["schemaVersion"]?.intValue ?? 0
                )
                return true
            }
            guard let summary, written == summary.size else {
                throw CommandFailure(ExitCode.failure, "Error: the backup ended after \(written) bytes, before its end; \(file) was not written.")
            }
            guard fsync(fd) == 0 else {
                throw CommandFailure(ExitCode.failure, "Error: cannot sync \(temporary): \(String(cString: strerror(errno)))")
            }
            close(fd)
            closed = true
            guard rename(temporary, file) == 0 else {
                throw CommandFailure(ExitCode.failure, "Error: cannot rename \(temporary) to \(file): \(String(cString: strerror(errno)))")
            }
            done = true
            syncDirectory(containing: file)
            if JSONOutput.wanted(parsed) {
                let object: JSONValue = [
                    "path": .string(file), "size": .int(written), "readings": .int(summary.readings),
                    "databaseId": summary.databaseId.map { .string($0) } ?? .null, "schemaVersion": .int(summary.schema),
                ]
                writeStdout(object.prettySerialized() + "\n")
            } else {
                writeStdout(
                    "Backed up sugard's database to \(file): \(written) bytes, \(summary.readings) readings, "
                        + "database \(summary.databaseId ?? "without an identity") (schema version \(summary.schema)).\n")
            }
            return ExitCode.success
        }
    }

    static func runRestore(_ arguments: [String]) async -> Int32 {
        await runDaemonCommand(arguments, help: restoreHelp, flags: [JSONOutput.flag], values: []) { parsed throws(CommandFailure) in
            guard let file = parsed.positionals.first else { throw usage("Missing expected argument '<file>'", restoreHelp) }
            guard parsed.positionals.count == 1 else { throw usage("Unexpected argument '\(parsed.positionals[1])'", restoreHelp) }
            let fd = open(file, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                throw CommandFailure(Self.noInput, "Error: cannot read \(file): \(String(cString: strerror(errno)))")
            }
            defer { close(fd) }
            var info = stat()
            guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
                throw CommandFailure(Self.noInput, "Error: \(file) is not a regular file.")
            }
            // Not worth sending: every SQLite database starts with this header.
            var header = [UInt8](repeating: 0, count: 16)
            let got = header.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 16, 0) }
            guard got == 16, header == Array("SQLite format 3\0".utf8) else {
                throw CommandFailure(
                    ExitCode.dataError, "Error: \(file) is not an SQLite database (no SQLite header).\nNothing was changed.")
            }
            let daemon = try Daemon.connect(parsed)
            var generator = SystemRandomNumberGenerator()
            let upload = "restore-" + String(UInt64.random(in: 0...UInt64.max, using: &generator), radix: 16)
            var offset: Int64 = 0
            var buffer = [UInt8](repeating: 0, count: 32 << 10)
            while true {
                let count = buffer.withUnsafeMutableBytes { raw in retryingInterrupted { pread(fd, raw.baseAddress, raw.count, off_t(offset)) } }
                guard count >= 0 else {
                    throw CommandFailure(Self.noInput, "Error: cannot read \(file): \(String(cString: strerror(errno)))")
                }
                if count == 0, offset > 0 { break }
                _ = try await daemon.call(
                    "RestoreUpload",
                    ["upload": .string(upload), "offset": .int(offset), "data": .string(Base64.encode(buffer[0..<count]))])
                offset += Int64(count)
                if count == 0 { break }
            }
            let reply = try await daemon.call("Restore", ["upload": .string(upload)])
            if JSONOutput.wanted(parsed) {
                writeStdout(JSONValue.object(reply).prettySerialized() + "\n")
                return ExitCode.success
            }
            let path = reply["path"]?.stringValue ?? "?"
            var text = "Restored \(file) into \(path): \(reply["size"]?.intValue ?? offset) bytes, "
            text += "\(reply["readings"]?.intValue ?? 0) readings, new database id \(reply["databaseId"]?.stringValue ?? "?")"
            if let previous = reply["previousDatabaseId"]?.stringValue { text += " (was \(previous))" }
            text += ".\n"
            if let from = reply["migratedFrom"]?.intValue {
                text += "Its schema was migrated from version \(from) to \(reply["schemaVersion"]?.intValue ?? 0).\n"
            }
            if let kept = reply["keptAs"]?.stringValue { text += "The previous database is kept as \(kept).\n" }
            text += "Forwarders deliver the restored readings again from the beginning (receivers drop duplicates).\n"
            writeStdout(text)
            return ExitCode.success
        }
    }
}
