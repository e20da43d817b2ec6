/// The version of sugard, sugarctl and the package (`scripts/package` reads it from `sugard --version`).
public let sugarVersion = "0.1.0"

/// The date of this version, for the man pages' header (`.TH`); set together with ``sugarVersion``.
public let sugarVersionDate = "2026-12-03"
