import GlucoseProfile
import HealthDataSync
import ProcessKit
import SugarAPI
import SugarDaemon
import SystemIO
import Testing

@Suite struct ConfigTests {
    let env = ["HOME": "/home/test", "STATE_DIRECTORY": "/var/lib/sugard:/other", "RUNTIME_DIRECTORY": "/run/sugard"]

    @Test func systemdDirectoriesAreDefaults() throws {
        let command = try DaemonCommandLine.parse(["--config", "/dev/null"], environment: self.env)
        guard case .run(let config, _) = command else { Issue.record("expected run"); return }
        #expect(config.stateDirectory == "/var/lib/sugard")
        #expect(config.socketPath == "/run/sugard/io.sugard.HealthDataSync")
        #expect(config.databasePath == "/var/lib/sugard/sugard.sqlite")
    }

    @Test func demoUsesOneLocalFolder() throws {
        let command = try DaemonCommandLine.parse(["--demo"], environment: self.env)
        guard case .run(let config, let file) = command else { Issue.record("expected run"); return }
        #expect(config.demo)
        #expect(file == nil)
        #expect(config.stateDirectory == "/home/test/.local/state/sugard-demo")
        #expect(config.socketPath == "/home/test/.local/state/sugard-demo/io.sugard.HealthDataSync")
    }

    @Test func fileThenFlags() throws {
        var config = DaemonConfig(stateDirectory: "/s", socketPath: "/s/sock")
        try config.apply(
            fileText: """
                # comment
                ; another
                log_level = debug
                replay = /a.btsnoop
                replay = "/b c.btsnoop"
                cooldown_seconds=45
                unit = mmol
                socket_mode = 0640
                """, file: "x.conf")
        #expect(config.logLevel == .debug)
        #expect(config.replay == ["/a.btsnoop", "/b c.btsnoop"])
        #expect(config.cooldownSeconds == 45)
        #expect(config.unit == .mmol)
        #expect(config.socketMode == 0o640)
    }

    @Test(arguments: [
        ("log_level = loud", 1, "log_level must be"),
        ("\n\nfrobnicate = 1", 3, "unknown key \"frobnicate\""),
        ("demo = maybe", 1, "demo must be true or false"),
        ("# ok\njust words", 2, "expected \"key = value\""),
        ("cooldown_seconds = -5", 1, "cooldown_seconds must be a whole number"),
        // #22 item 7: invalid zone, duplicate keys, bad quoting, unknown groups.
        ("unit = mmol\ntimezone = Mars/Olympus_Mons", 2, "not an IANA time zone"),
        ("timezone = ../../etc/passwd", 1, "not an IANA time zone"),
        ("timezone = Europe/Berlin\nlog_level = info\ntimezone = UTC", 3, "set twice in this file (first on line 1)"),
        ("adapter = \"hci0", 1, "unterminated quote"),
        ("adapter = \"", 1, "unterminated quote"),
        ("state_dir = /var/lib/\"x\"", 1, "stray double quote"),
        ("# groups\nsocket_group = no-such-group-sugard-test", 2, "no group named \"no-such-group-sugard-test\""),
        ("admin_group = no-such-group-sugard-test", 1, "admin_group: no group named"),
    ])
    func badFilesNameTheLine(text: String, line: Int, fragment: String) {
        var config = DaemonConfig(stateDirectory: "/s", socketPath: "/s/sock")
        do {
            try config.apply(fileText: text, file: "/etc/sugard/sugard.conf")
            Issue.record("accepted bad config: \(text)")
        } catch {
            #expect(error.file == "/etc/sugard/sugard.conf")
            #expect(error.line == line)
            #expect(error.description.hasPrefix("/etc/sugard/sugard.conf:\(line): "))
            #expect(error.message.contains(fragment), "\(error)")
        }
    }

    @Test func crlfFilesSplitIntoLines() throws {
        var config = DaemonConfig(stateDirectory: "/s", socketPath: "/s/sock")
        try config.apply(fileText: "# windows editor\r\nlog_level = debug\r\nunit = mmol\r\n", file: "c.conf")
        #expect(config.logLevel == .debug)
        #expect(config.unit == .mmol)
        do {
            try config.apply(fileText: "unit = mmol\r\nbogus = 1\r\n", file: "c.conf")
            Issue.record("accepted an unknown key")
        } catch {
            #expect(error.line == 2)
        }
    }

    @Test func badFlags() {
        #expect(throws: ConfigError.self) { try DaemonCommandLine.parse(["--bogus"], environment: self.env) }
        #expect(throws: ConfigError.self) { try DaemonCommandLine.parse(["--demo", "--state-dir"], environment: self.env) }
        #expect(throws: ConfigError.self) { try DaemonCommandLine.parse(["--demo", "--log-level=shout"], environment: self.env) }
        #expect(throws: ConfigError.self) { try DaemonCommandLine.parse(["--config", "/nonexistent/x.conf"], environment: self.env) }
        #expect((try? DaemonCommandLine.parse(["-h"], environment: self.env)) == .help)
    }

    @Test func clientSocketPrefersEnvironment() {
        #expect(DefaultPaths.clientSocket(environment: ["SUGARD_SOCKET": "/x/y"]) == "/x/y")
    }

    /// `clock_tolerance` takes seconds or a number with s, m or h; `set_meter_clock` a boolean.
    @Test func clockKeys() throws {
        var config = DaemonConfig(stateDirectory: "/s", socketPath: "/s/sock")
        #expect(config.setMeterClock == true)
        #expect(config.clockToleranceSeconds == 120)
        for (text, seconds) in [("120s", 120), ("2m", 120), ("90", 90), ("1h", 3600), ("0", 0), ("5M", 300)] {
            try config.apply(key: "clock_tolerance", value: text)
            #expect(config.clockToleranceSeconds == seconds, "\(text)")
        }
        for bad in ["", "m", "2 m", "-1m", "1.5m", "2d", "25h", "ten"] {
            #expect(throws: ConfigError.self, "\(bad)") { try config.apply(key: "clock_tolerance", value: bad) }
        }
        try config.apply(fileText: "set_meter_clock = false\nclock_tolerance = 5m\n", file: "t.conf")
        #expect(config.setMeterClock == false)
        #expect(config.clockToleranceSeconds == 300)
        #expect(throws: ConfigError.self) { try config.apply(key: "set_meter_clock", value: "sometimes") }
    }
}