#if canImport(Glibc)
import Glibc
#endif
import HealthDataSync
import SystemIO

/// The wall clock as an ``Instant``.
///
/// The corresponding C function is `clock_gettime(CLOCK_REALTIME)`.
@Sendable public func systemNow() -> Instant { Instant(epochMillis: wallClockMilliseconds()) }

/// Whether a file exists at `path`.
func fileExists(_ path: String) -> Bool { access(path, F_OK) == 0 }

/// Creates an empty file readable and writable by its owner only (SQLite treats an empty file as a
/// new database). Best effort: when it fails, SQLite reports the problem on open.
///
/// The corresponding C function is `open(O_CREAT | O_EXCL, 0600)`.
func createPrivateFile(_ path: String) {
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    if fd >= 0 { _ = Glibc.close(fd) }
}

/// Removes group and other permissions from the database and its `-wal`/`-shm` files where they
/// exist. Best effort (a read-only file system refuses it; the store then reports that itself).
///
/// The corresponding C function is `chmod`.
func tightenModes(databasePath path: String) {
    for file in [path, path + "-wal", path + "-shm"] {
        var info = stat()
        guard stat(file, &info) == 0, info.st_mode & 0o077 != 0 else { continue }
        _ = chmod(file, info.st_mode & 0o7700)
    }
}
