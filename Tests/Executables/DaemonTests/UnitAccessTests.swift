import Glibc
import Testing
import TestSupport

/// The shipped unit's access model, run as the unit runs the daemon (PID 1 is not systemd here, so
/// not through systemd-run): `ExecStartPre=+sugard --prepare-runtime-dir` as root, then the daemon
/// as its own unprivileged user in no user namespace (the unit has no `PrivateUsers=`), with
/// `$RUNTIME_DIRECTORY`/`$STATE_DIRECTORY` owned by that user, mode 0750. A custom `socket_group`
/// (the daemon's user is not a member) and an `admin_group` from the config; throwaway users call a
/// read method (`status`, GetStatus) and a mutating one (`sync`, Sync) through the built sugarctl.
@Suite(.serialized, .enabled(if: geteuid() == 0, "needs root to create users and groups"))
struct UnitAccessTests {
    /// The settings of systemd/sugard.service this test reproduces.
    @Test func theUnitRunsTheDaemonThisWay() throws {
        let unit = readText(DaemonProcessTests.fixtures.dropLast("/fixtures".count) + "/systemd/sugard.service")
        let lines = Set(unit.split(separator: "\n").map(String.init))
        for expected in [
            "ExecStartPre=+/usr/local/libexec/sugard --prepare-runtime-dir", "ExecStart=/usr/local/libexec/sugard", "User=sugard",
            "Group=sugard", "RuntimeDirectory=sugard", "RuntimeDirectoryMode=0750", "StateDirectory=sugard", "StateDirectoryMode=0750",
        ] {
            #expect(lines.contains(expected), "sugard.service lacks \(expected)")
        }
        // In a private user namespace every other client would arrive as nobody (65534).
        #expect(!lines.contains { $0.hasPrefix("PrivateUsers=") && !$0.hasSuffix("=no") }, "PrivateUsers= hides peer credentials")
    }

    @Test func socketGroupAndAdminGroupWorkUnderTheUnitsSettings() async throws {
        let tag = String(UInt32.random(in: 0x1000...0xFFFF), radix: 16)
        let daemonUser = "sgd\(tag)", socketGroup = "sgs\(tag)", adminGroup = "sga\(tag)"
        let member = "sgm\(tag)", admin = "sgx\(tag)", outsider = "sgo\(tag)"
        let dir = try TempDirectory()
        let env = ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin"]
        func run(_ program: String, _ arguments: [String], environment: [String: String] = [:]) async throws -> ProcessResult {
            try await runToEnd(program, arguments, environment: env.merging(environment) { $1 }, dir: dir.path, seconds: 60)
        }
        var made: [(String, String)] = []  // (userdel or groupdel, name): users first, then groups
        func cleanUp() async {
            for (tool, name) in made { _ = try? await run("/usr/sbin/" + tool, [name]) }
        }
        do {
            for group in [socketGroup, adminGroup] {
                #expect(try await run("/usr/sbin/groupadd", ["-r", group]).status == 0)
                made.append(("groupdel", group))
            }
            for (user, groups) in [(daemonUser, ""), (member, socketGroup), (admin, socketGroup + "," + adminGroup), (outsider, "")] {
                var arguments = ["-r", "-M", "-U", "-s", "/usr/sbin/nologin"]
                if !groups.isEmpty { arguments += ["-G", groups] }
                let added = try await run("/usr/sbin/useradd", arguments + [user])
                #expect(added.status == 0, "useradd \(user): \(added.stderr)")
                made.insert(("userdel", user), at: 0)  // users go before their groups
            }
            let daemonID = try #require(getpwnam(daemonUser)).pointee
            let socketGID = try #require(getgrnam(socketGroup)).pointee.gr_gid
            chmod(dir.path, 0o755)
            let state = dir.file("state"), runtime = dir.file("run")
            for path in [state, runtime] {
                mkdir(path, 0o750)
                chown(path, daemonID.pw_uid, daemonID.pw_gid)
            }
            try dir.write("sugard.conf", "socket_group = \(socketGroup)\nadmin_group = \(adminGroup)\ndemo = true\ndemo_interval = 3600\n")
            let unitEnvironment = ["STATE_DIRECTORY": state, "RUNTIME_DIRECTORY": runtime]
            let sugard = try builtProduct("sugard"), sugarctl = try builtProduct("sugarctl")
            let config = ["--config", dir.file("sugard.conf")]

            // ExecStartPre=+ (root).
            let prepared = try await run(sugard, ["--prepare-runtime-dir"] + config, environment: unitEnvironment)
            #expect(prepared.status == 0, "\(prepared.stderr)")

            // ExecStart= as User=/Group= (the daemon's user is in none of the configured groups).
            let log = open(dir.file("sugard.log"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            defer { close(log) }
            let daemon = try Child(
                "/usr/bin/setpriv", ["--reuid=\(daemonUser)", "--regid=\(daemonUser)", "--init-groups", "--", sugard] + config,
                environment: env.merging(unitEnvironment) { $1 }, stdout: log, stderr: log)
            defer { daemon.kill() }
            let socket = runtime + "/io.sugard.HealthDataSync"
            let up = await eventually(within: 30) {
                (try? await run(sugarctl, ["status", "--socket", socket]))?.status == 0 || !daemon.isRunning
            }
            try #require(up && daemon.isRunning, "sugard did not serve: \(readText(dir.file("sugard.log")))")
            var info = stat()
            #expect(stat(socket, &info) == 0 && info.st_gid == socketGID && info.st_uid == daemonID.pw_uid)

            func asUser(_ user: String, _ arguments: [String]) async throws -> ProcessResult {
                try await run("/usr/bin/setpriv", ["--reuid=\(user)", "--regid=\(user)", "--init-groups", "--", sugarctl] + arguments + ["--socket", socket])
            }
            // Socket-group member: reads, may not sync.
            let memberStatus = try await asUser(member, ["status", "--json"])
            #expect(memberStatus.status == 0, "\(memberStatus.stderr)")
            #expect(memberStatus.stdout.contains("\"version\""))
            let memberSync = try await asUser(member, ["sync"])
            #expect(memberSync.status == 77, "\(memberSync.stdout) \(memberSync.stderr)")
            #expect(memberSync.stderr.contains("Sync"))
            // Admin-group member (and socket group, as the README says): reads and syncs.
            #expect(try await asUser(admin, ["status"]).status == 0)
            // (The demo meter's own first sync may still run: Sync then says so; wait for it.)
            var adminSync = try await asUser(admin, ["sync", "--force"])
            let deadline = ContinuousClock.now + .seconds(30)
            while adminSync.status == 1, adminSync.stderr.contains("already running"), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(200))
                adminSync = try await asUser(admin, ["sync", "--force"])
            }
            #expect(adminSync.status == 0, "\(adminSync.stdout) \(adminSync.stderr)")
            // Outsider: cannot even open the socket (directory 2750 and socket 0660 of the group).
            for arguments in [["status"], ["sync"]] {
                let refused = try await asUser(outsider, arguments)
                #expect(refused.status == 77, "\(arguments): \(refused.stdout) \(refused.stderr)")
            }
            #expect(await daemon.terminate(graceSeconds: 20) == 0, "\(readText(dir.file("sugard.log")))")
        } catch {
            await cleanUp()
            throw error
        }
        await cleanUp()
    }
}

