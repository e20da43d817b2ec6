import ProcessKit
import SugarAPI
import SugarDaemon
import Testing

/// `DaemonConfig.keys` is the one table of sugard's settings: the parser, the flags and the reload
/// diff read it (the example file and the man page are checked against it in ConfigCheckTests).
@Suite struct ConfigKeyTableTests {
    /// A valid value other than the default for every key but log_level: a key added to the table
    /// without one here fails the first test.
    static let samples: [String: String] = [
        "state_dir": "/t", "socket": "/t/sock", "socket_mode": "0600", "socket_group": "0", "admin_group": "0",
        "replay": "a.btsnoop", "replay_delay_ms": "5", "demo": "true", "demo_interval": "7", "adapter": "hci1",
        "simulate_delay_us": "500",
        "cooldown_seconds": "3", "timezone": "UTC", "unit": "mmol", "max_connections": "9", "max_socket_connections": "99", "simulate_meters": "2",
        "simulate_start": "100", "simulate_stop": "200", "max_connections_per_uid": "8", "forwarder_user": "mqtt",
        "set_meter_clock": "false", "clock_tolerance": "5m",
    ]

    /// Reload names each changed key that needs a restart, simulate_* included, and never log_level.
    @Test func reloadNamesEveryChangedKeyThatNeedsARestart() throws {
        let base = DaemonConfig(stateDirectory: "/s", socketPath: "/s/sock")
        #expect(Set(Self.samples.keys) == Set(DaemonConfig.keys.filter { !$0.appliesOnReload }.map(\.key)))
        for (key, value) in Self.samples {
            var fresh = base
            try fresh.apply(key: key, value: value)
            #expect(DaemonConfig.keysNeedingRestart(from: base, to: fresh) == [key], "\(key) = \(value)")
        }
        var louder = base
        try louder.apply(key: "log_level", value: "debug")
        #expect(louder != base)
        #expect(DaemonConfig.keysNeedingRestart(from: base, to: louder).isEmpty)
        #expect(DaemonConfig.keys.filter(\.appliesOnReload).map(\.key) == ["log_level"])
    }

    /// Every key's flag is in `sugard --help` and sets the same value as the key in a file.
    @Test func keyFlagsAreInTheHelpAndSetTheKey() throws {
        let helpFlags = Set(DaemonCommandLine.options.flatMap { $0.flag.split(separator: ",").map { String($0.drop { $0 == " " }) } })
        for key in DaemonConfig.keys {
            guard let flag = key.flag else { continue }
            #expect(helpFlags.contains(flag), "sugard --help lacks \(flag) (key \(key.key))")
            guard key.key != "demo", let value = Self.samples[key.key] ?? (key.key == "log_level" ? "debug" : nil) else { continue }
            var fromFile = DaemonConfig(stateDirectory: "/s", socketPath: "/s/sock")
            try fromFile.apply(key: key.key, value: value)
            guard case .run(let fromFlag, _) = try DaemonCommandLine.parse(["--config", "/dev/null", flag, value], environment: [:])
            else {
                Issue.record("\(flag) \(value) did not parse to a run")
                continue
            }
            #expect(key.value(fromFlag) == key.value(fromFile), "\(flag) \(value)")
        }
    }
}

/// `max_connections` became the meters' connection slots (issue 39); the socket cap moved to
/// `max_socket_connections`. An old file's socket-sized value is refused with the new key's name.
@Suite struct ConnectionSlotsKeyTests {
    @Test func maxConnectionsIsTheMeterSlotsWithDefaultThree() throws {
        var config = DaemonConfig(stateDirectory: "/s", socketPath: "/s/sock")
        #expect(config.maxMeterConnections == 3)
        #expect(config.maxSocketConnections == 4096)
        try config.apply(key: "max_connections", value: "5")
        #expect(config.maxMeterConnections == 5)
        try config.apply(key: "max_socket_connections", value: "100")
        #expect(config.maxSocketConnections == 100)
        for bad in ["0", "x"] {
            #expect(throws: ConfigError.self) { try config.apply(key: "max_connections", value: bad) }
        }
        do {
            try config.apply(key: "max_connections", value: "4096")
            Issue.record("an old socket cap was accepted as meter slots")
        } catch {
            #expect("\(error)".contains("max_socket_connections"), "\(error)")
        }
    }
}
