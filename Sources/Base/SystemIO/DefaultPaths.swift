import Glibc

/// Where things live by default.
public enum DefaultPaths {
    public static let systemConfigFile = "/etc/sugard/sugard.conf"
    public static let systemStateDirectory = "/var/lib/sugard"
    public static let systemRuntimeDirectory = "/run/sugard"
    public static let socketName = "io.sugard.HealthDataSync"
    public static let forwardConfigFile = "/etc/sugard/forward.conf"
    /// The groups through which, besides root, each service reads its configuration's secrets
    /// (the `chown root:GROUP` of ``SecretFiles``'s fix): sugard's and sugard-forward's.
    public static let daemonSecretGroup = "sugard"
    public static let forwardSecretGroup = "sugard-forward"

    /// The configuration files `sugarctl doctor` checks for readable secrets, with the group each
    /// service reads them through: `SUGARD_CONFIG` (else sugard.conf) and `SUGARD_FORWARD_CONFIG`
    /// (else forward.conf).
    public static func secretBearingConfigFiles(environment: [String: String]) -> [(path: String, group: String)] {
        let daemon = environment["SUGARD_CONFIG"].flatMap { $0.isEmpty ? nil : $0 } ?? systemConfigFile
        let forward = environment["SUGARD_FORWARD_CONFIG"].flatMap { $0.isEmpty ? nil : $0 } ?? forwardConfigFile
        return [(daemon, daemonSecretGroup), (forward, forwardSecretGroup)]
    }
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
