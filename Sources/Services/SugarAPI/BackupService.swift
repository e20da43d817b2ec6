import Glibc
import SugarWire
import SystemIO
import Varlink
import JSON

/// `Backup`, `RestoreUpload` and `Restore`: the database's bytes travel over the socket (base64 in
/// JSON), because sugard runs sandboxed (its own user, ProtectSystem=strict, ProtectHome,
/// PrivateTmp) and can neither write a caller's path nor read one. sugarctl writes the backup
/// file itself (0600, temporary file, fsync, rename) and reads the file to restore.
extension HealthDataSyncService {
    /// Bytes of the file per `Backup` reply (64 KiB of base64).
    static let backupPart = 48 << 10
    /// The most bytes one `RestoreUpload` call carries (its base64 stays well inside the server's
    /// 64 KiB message cap).
    public static let restorePart = 32 << 10

    /// `Backup`: asks the backend for a copy and streams it in ``backupPart``-byte parts (base64
    /// `data` at `offset`, with the copy's size, readings, identity and schema version), waiting for
    /// the client to read each; the last reply has no `continues`.
    func backup(_ replier: VarlinkReplier) async throws(VarlinkError) {
        let copy: BackupCopy
        do throws(SugarAPIError) {
            copy = try await self.backend.backup()
        } catch {
            throw Self.error(for: error)
        }
        defer { Glibc.close(copy.fileDescriptor) }
        replier.widenSendBuffer()
        var offset: Int64 = 0
        var buffer = [UInt8](repeating: 0, count: Self.backupPart)
        repeat {
            let count = buffer.withUnsafeMutableBytes { raw -> Int in
                var done = 0
                while done < raw.count {
                    let n = retryingInterrupted { pread(copy.fileDescriptor, raw.baseAddress! + done, raw.count - done, off_t(offset) + off_t(done)) }
                    if n <= 0 { return n < 0 ? -1 : done }
                    done += n
                }
                return done
            }
            guard count >= 0 else {
                throw Self.error(.storageError(code: "io", message: "Reading the backup copy failed: \(String(cString: strerror(errno)))."))
            }
            let last = offset + Int64(count) >= copy.size || count < buffer.count
            await self.waitForReader(replier) { true }
            if replier.isClosed || Task.isCancelled { return }
            let reply: JSONObject = [
                "size": .int(copy.size), "readings": .int(Int64(copy.readings)), "databaseId": copy.databaseId.map { .string($0) } ?? .null,
                "schemaVersion": .int(Int64(copy.schemaVersion)), "offset": .int(offset),
                "data": .string(Base64.encode(buffer[0..<count])),
            ]
            guard replier.reply(reply, continues: !last) else { return }
            offset += Int64(count)
            if last { return }
        } while true
    }

    /// `RestoreUpload`: checks the upload name, offset and base64 `data` (at most ``restorePart``
    /// bytes) and appends them; replies with the size so far.
    func restoreUpload(_ p: JSONObject, replier: VarlinkReplier) async throws(VarlinkError) {
        let upload = try Self.upload(p["upload"])
        guard let offset = p["offset"]?.intValue, offset >= 0 else {
            throw Self.invalid("offset", "offset must be the number of bytes sent so far (0 or more).")
        }
        guard let text = p["data"]?.stringValue, let bytes = Base64.decode(text) else {
            throw Self.invalid("data", "data must be base64 (RFC 4648, padded).")
        }
        guard bytes.count <= Self.restorePart else {
            throw Self.invalid("data", "one part carries at most \(Self.restorePart) bytes.")
        }
        do throws(SugarAPIError) {
            let size = try await self.backend.restoreUpload(upload, offset: offset, bytes: bytes)
            replier.reply(["size": .int(size)])
        } catch {
            throw Self.error(for: error)
        }
    }

    /// `Restore`: swaps the finished upload in and replies with the ``RestoreReport``'s fields.
    func restore(_ p: JSONObject, replier: VarlinkReplier) async throws(VarlinkError) {
        let upload = try Self.upload(p["upload"])
        do throws(SugarAPIError) {
            let report = try await self.backend.restore(upload)
            replier.reply([
                "path": .string(report.path), "size": .int(report.size), "readings": .int(Int64(report.readings)),
                "databaseId": report.databaseId.map { .string($0) } ?? .null,
                "previousDatabaseId": report.previousDatabaseId.map { .string($0) } ?? .null,
                "schemaVersion": .int(Int64(report.schemaVersion)),
                "migratedFrom": report.migratedFrom.map { .int(Int64($0)) } ?? .null,
                "keptAs": report.keptAs.map { .string($0) } ?? .null,
            ])
        } catch {
            throw Self.error(for: error)
        }
    }

    /// An upload's name: 8 to 64 letters, digits, `-` or `_` (it becomes part of a file name).
    static func upload(_ value: JSONValue?) throws(VarlinkError) -> String {
        guard let name = value?.stringValue, (8...64).contains(name.utf8.count),
            name.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7a) || $0 == 0x2d || $0 == 0x5f })
        else {
            throw Self.invalid("upload", "upload must be 8 to 64 letters, digits, '-' or '_'.")
        }
        return name
    }
}
