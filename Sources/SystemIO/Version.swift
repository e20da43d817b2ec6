/// The version of sugard, sugarctl and the package (`scripts/package` reads it from `sugard --version`).
public let sugarVersion = "0.1.0"
