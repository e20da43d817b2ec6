import Glibc

/// Where things live by default.
public enum DefaultPaths {
    public static let systemConfigFile = "/etc/sugard/sugard.conf"
    public static let systemStateDirectory = "/var/lib/sugard"
    public static let systemRuntimeDirectory = "/run/sugard"
    public static let socketName = "io.sugard.HealthDataSync"
    public static var systemSocket: String { systemRuntimeDirectory + "/" + socketName }
    /// sugard-forward's status socket (`io.sugard.Forward`) under systemd.
    public static let systemForwardSocket = "/run/sugard-forward/io.sugard.Forward"

    /// The demo's one folder: `$HOME/.local/state/sugard-demo` (database and socket).
    public static func demoDirectory(environment: [String: String]) -> String {
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp/sugard-\(getuid())"
        return home + "/.local/state/sugard-demo"
    }

    /// sugard-forward's status socket (`io.sugard.Forward`) `sugarctl status` reads:
    /// `SUGARD_FORWARD_SOCKET`, else the system one when it exists; nil when there is none.
    public static func forwardStatusSocket(environment: [String: String]) -> String? {
        if let path = environment["SUGARD_FORWARD_SOCKET"], !path.isEmpty { return path }
        return access(systemForwardSocket, F_OK) == 0 ? systemForwardSocket : nil
    }

    /// The socket `sugarctl` talks to when given none: `SUGARD_SOCKET`, else the system socket if
    /// it exists, else the demo's.
    public static func clientSocket(environment: [String: String]) -> String {
        if let path = environment["SUGARD_SOCKET"], !path.isEmpty { return path }
        if access(systemSocket, F_OK) == 0 { return systemSocket }
        return demoDirectory(environment: environment) + "/" + socketName
    }
}

/// This process's environment as a dictionary (`environ`), for the programs' `main`.
public func processEnvironment() -> [String: String] {
    var environment: [String: String] = [:]
    var entry = environ
    while let pointer = entry.pointee {
        let text = String(cString: pointer)
        if let eq = text.firstIndex(of: "=") {
            environment[String(text[..<eq])] = String(text[text.index(after: eq)...])
        }
        entry += 1
    }
    return environment
}
