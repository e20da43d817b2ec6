import BluetoothHost
import DBus
import Glibc
import JSON
import PacketCapture
import SugarWire
import SystemIO
import Varlink

/// `sugarctl doctor [--json]`: walks the chain from the kernel to the meters and names the first
/// broken link, with the fix.
enum DoctorCommand {
    static let help = CommandHelp(
        name: "doctor",
        abstract: "Check Bluetooth, bluetoothd, sugard and the meters; say what is broken and how to fix it.",
        usage: "doctor [--json] [--socket <path>]",
        options: [("--json", "Print {\"checks\": [{\"name\", \"status\", \"message\", \"fix\", \"needsRoot\"}], \"ok\"}.")]
            + DaemonOptions.help,
        discussion: """
            One line per check, in this order: kernel Bluetooth support (AF_BLUETOOTH), adapters (HCI \
            device info: up, LE, address), rfkill, bluetoothd on the system bus, the D-Bus policy file, \
            sugard and its socket, your groups, storage, bluetoothd's adapter, each known meter (last \
            sync, last error with its hint, bond in BlueZ, signal), the forwarder's sinks, and secrets: \
            sugard.conf, forward.conf ($SUGARD_CONFIG, $SUGARD_FORWARD_CONFIG) and each password, \
            secret or token file they name, which must not be readable by others. Each line is ok, warning or fail; a \
            fix follows every warning and failure, marked (root) when it needs root. Works without root.

            Exit status: 0 every check ok or warning, 1 any check failed, 64 usage.
            """
    )

    static let subcommand = Subcommand(help: help) { arguments in await run(arguments) }

    enum Status: String { case ok, warning, fail }

    struct Check {
        var name: String
        var status: Status
        var message: String
        var fix: String? = nil
        var needsRoot = false

        var json: JSONValue {
            .object([
                "name": .string(self.name), "status": .string(self.status.rawValue), "message": .string(self.message),
                "fix": self.fix.map(JSONValue.string) ?? .null, "needsRoot": .bool(self.needsRoot),
            ])
        }

        var line: String {
            var text = "\(self.status.rawValue.padding(8))\(self.name): \(self.message)\n"
            if let fix = self.fix { text += "        fix\(self.needsRoot ? " (root)" : ""): \(fix)\n" }
            return text
        }
    }

    static func run(_ arguments: [String]) async -> Int32 {
        let parsed: ParsedArguments
        do throws(UsageError) {
            parsed = try ParsedArguments(arguments, flags: [JSONOutput.flag], valueOptions: DaemonOptions.values)
        } catch {
            return usageFailure(error, help)
        }
        if parsed.helpRequested {
            writeStdout(help.render())
            return ExitCode.success
        }
        var checks = self.hostChecks()
        let bluez = await self.bluezChecks()
        checks += bluez.checks
        checks += await self.daemonChecks(parsed, bluez: bluez.devices)
        checks += self.sinkChecks(await StatusCommand.sinks())
        checks += self.secretChecks(environment: environment())
        let failed = checks.contains { $0.status == .fail }
        if JSONOutput.wanted(parsed) {
            writeStdout(JSONValue.object(["checks": .array(checks.map(\.json)), "ok": .bool(!failed)]).prettySerialized() + "\n")
        } else {
            writeStdout(checks.map(\.line).joined())
            let failures = checks.filter { $0.status == .fail }.count
            writeStdout(failed ? "\n\(failures) check(s) failed; fix the first one first.\n" : "\nAll checks passed.\n")
        }
        return failed ? ExitCode.failure : ExitCode.success
    }

    /// One check per sink sugard-forward reports (none without a forwarder): connected is ok,
    /// retrying a warning (it keeps trying by itself), failing or unreachable a failure.
    static func sinkChecks(_ forwarder: StatusCommand.Forwarder) -> [Check] {
        if let reason = forwarder.unreachable {
            return [
                Check(
                    name: "forwarder \(StatusCommand.Forwarder.unreachableName)", status: .fail, message: "unreachable (\(reason))",
                    fix: "systemctl status sugard-forward; journalctl -u sugard-forward -b")
            ]
        }
        return forwarder.sinks.map { sink in
            let name = "forwarder \(sink.name)"
            var message = sink.state.rawValue + (sink.reason.map { " (\($0))" } ?? "")
            message += ", \(sink.pending) readings pending"
            switch sink.state {
            case .connected:
                return Check(name: name, status: .ok, message: message)
            case .retrying:
                return Check(
                    name: name, status: .warning, message: message,
                    fix: "sugard-forward retries by itself; check that the broker or server is up and reachable")
            case .failing:
                return Check(
                    name: name, status: .fail, message: message,
                    fix: "check the credentials, CA file and URL in /etc/sugard/forward.conf, then systemctl restart sugard-forward")
            }
        }
    }

    // MARK: - Kernel, adapters, rfkill

    static func hostChecks() -> [Check] {
        var checks: [Check] = []
        do throws(BluetoothHostError) {
            try BluetoothHost.probe()
            checks.append(Check(name: "kernel", status: .ok, message: "Bluetooth support present (AF_BLUETOOTH sockets open)"))
            checks += self.adapterChecks()
        } catch {
            if error.isMissingKernelSupport {
                checks.append(Check(
                    name: "kernel", status: .fail,
                    message: "this kernel has no Bluetooth support (\(error)); no adapter can work here",
                    fix: "use a kernel built with Bluetooth (CONFIG_BT) or load its module: `sudo modprobe bluetooth`",
                    needsRoot: true))
            } else {
                checks.append(Check(name: "kernel", status: .fail, message: "\(error)",
                                    fix: "check `dmesg | grep -i bluetooth`"))
            }
        }
        checks.append(self.rfkillCheck(RfkillState.read()))
        return checks
    }

    static func adapterChecks() -> [Check] {
        let adapters: [HCIDeviceInfo]
        do throws(BluetoothHostError) {
            adapters = try BluetoothHost.adapters()
        } catch {
            return [Check(name: "adapter", status: .fail, message: "cannot list adapters: \(error)")]
        }
        guard !adapters.isEmpty else {
            return [Check(name: "adapter", status: .fail, message: "no Bluetooth adapter found",
                          fix: "plug in a Bluetooth 4.0+ (LE) adapter; `dmesg` shows whether its firmware loaded")]
        }
        let route = BluetoothHost.defaultRoute()
        return adapters.map { self.adapterCheck($0, isDefault: route == $0.id) }
    }

    static func adapterCheck(_ info: HCIDeviceInfo, isDefault: Bool) -> Check {
        let what = "\(info.name) \(info.address)\(isDefault ? " (default)" : "")"
        if !info.supportsLE {
            return Check(name: "adapter", status: .fail, message: "\(what) does not support Bluetooth LE",
                         fix: "glucose meters need a Bluetooth 4.0+ (LE) adapter")
        }
        if !info.isUp {
            return Check(name: "adapter", status: .fail, message: "\(what) is down",
                         fix: "`bluetoothctl power on` (or `sudo hciconfig \(info.name) up`); check rfkill below")
        }
        return Check(name: "adapter", status: .ok, message: "\(what) is up and supports LE")
    }

    static func rfkillCheck(_ state: RfkillState) -> Check {
        switch state {
        case .unavailable:
            return Check(name: "rfkill", status: .warning, message: "no /dev/rfkill or /sys/class/rfkill (kernel without rfkill)")
        case .switches(let switches, let source):
            let bluetooth = switches.filter(\.isBluetooth)
            if bluetooth.contains(where: \.hardBlocked) {
                return Check(name: "rfkill", status: .fail, message: "Bluetooth is hard-blocked (\(source))",
                             fix: "turn on the wireless switch or enable Bluetooth in the firmware set-up")
            }
            if bluetooth.contains(where: \.softBlocked) {
                return Check(name: "rfkill", status: .fail, message: "Bluetooth is soft-blocked (\(source))",
                             fix: "`sudo rfkill unblock bluetooth`", needsRoot: true)
            }
            return Check(name: "rfkill", status: .ok,
                         message: bluetooth.isEmpty ? "no Bluetooth rfkill switch" : "Bluetooth not blocked")
        }
    }

    // MARK: - bluetoothd

    struct BlueZDevice {
        var address: String
        var paired: Bool
        var bonded: Bool?
        var connected: Bool
        var rssi: Int?
    }

    static func bluezChecks() async -> (checks: [Check], devices: [String: BlueZDevice]?) {
        var checks: [Check] = []
        let candidates: [String] = ["/usr/share/dbus-1/system.d/io.sugard.conf", "/etc/dbus-1/system.d/io.sugard.conf",
                      "/usr/local/share/dbus-1/system.d/io.sugard.conf"]
        let policy = candidates.first { access($0, R_OK) == 0 }
        let connection: DBusConnection
        do throws(DBusError) {
            connection = try await DBusConnection.connect(to: .system)
        } catch {
            checks.append(Check(name: "bluetoothd", status: .fail, message: "cannot reach the system bus: \(error.message)",
                                fix: "start D-Bus (`sudo systemctl start dbus`)", needsRoot: true))
            checks.append(self.policyCheck(policy))
            return (checks, nil)
        }
        defer { connection.close() }
        var devices: [String: BlueZDevice]? = nil
        do throws(DBusError) {
            let reply = try await connection.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                method: "NameHasOwner", arguments: [.string("org.bluez")], timeout: .seconds(5))
            guard case .bool(true)? = reply.first?.unwrapped else {
                checks.append(Check(name: "bluetoothd", status: .fail, message: "org.bluez has no owner on the system bus",
                                    fix: "`sudo systemctl start bluetooth`", needsRoot: true))
                checks.append(self.policyCheck(policy))
                return (checks, nil)
            }
            let objects = try await connection.call(
                destination: "org.bluez", path: "/", interface: "org.freedesktop.DBus.ObjectManager",
                method: "GetManagedObjects", timeout: .seconds(5))
            devices = self.devices(objects.first)
            let version = self.bluetoothdVersion().map { "bluetoothd \($0)" } ?? "bluetoothd"
            checks.append(Check(name: "bluetoothd", status: .ok,
                                message: "\(version) running on the system bus (org.bluez), \(devices?.count ?? 0) device(s) known"))
        } catch {
            checks.append(Check(name: "bluetoothd", status: .fail, message: "talking to org.bluez failed: \(error.message)",
                                fix: "`sudo systemctl restart bluetooth`; `journalctl -u bluetooth` shows why", needsRoot: true))
        }
        checks.append(self.policyCheck(policy))
        return (checks, devices)
    }

    /// `bluetoothd --version` (BlueZ does not publish its version on the bus).
    static func bluetoothdVersion() -> String? {
        let candidates: [String] = ["/usr/libexec/bluetooth/bluetoothd", "/usr/sbin/bluetoothd"]
        guard let path = candidates.first(where: { access($0, X_OK) == 0 }) else { return nil }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return nil }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_addclose(&actions, fds[0])
        posix_spawn_file_actions_addclose(&actions, fds[1])
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv = [strdup(path), strdup("--version"), nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, nil, argv, environ)
        close(fds[1])
        defer { close(fds[0]) }
        guard spawned == 0 else { return nil }
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 256)
        while output.count < 4096 {
            let got = buffer.withUnsafeMutableBytes { raw in retryingInterrupted { read(fds[0], raw.baseAddress, raw.count) } }
            guard got > 0 else { break }
            output += buffer[0..<got]
        }
        var status: Int32 = 0
        _ = retryingInterrupted { waitpid(pid, &status, 0) }
        let text = String(decoding: output, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
        return text.isEmpty ? nil : text
    }

    static func policyCheck(_ path: String?) -> Check {
        guard let path else {
            return Check(name: "dbus policy", status: .warning, message: "io.sugard.conf is not installed",
                         fix: "reinstall the package, `sudo apt install --reinstall sugard` (needed where the bus restricts who may talk to BlueZ)", needsRoot: true)
        }
        let text = self.readSmallFile(path) ?? ""
        guard text.contains("user=\"sugard\""), text.contains("send_destination=\"org.bluez\"") else {
            return Check(name: "dbus policy", status: .warning,
                         message: "\(path) does not let the user sugard send to org.bluez",
                         fix: "reinstall the package's copy: `sudo apt install --reinstall sugard`", needsRoot: true)
        }
        guard text.contains("receive_interface=\"org.bluez.Agent1\"") else {
            return Check(name: "dbus policy", status: .warning,
                         message: "\(path) lets any peer call sugard's pairing agent (an older io.sugard.conf; sugard rejects them itself)",
                         fix: "reinstall it from systemd/io.sugard.conf (`sudo make install`)", needsRoot: true)
        }
        return Check(name: "dbus policy", status: .ok,
                     message: "\(path) lets the user sugard talk to BlueZ and only bluetoothd call its pairing agent")
    }

    /// A small text file (at most 1 MiB), nil when it cannot be read.
    static func readSmallFile(_ path: String) -> String? {
        (try? readWholeFile(path, limit: 1 << 20)).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Device1 objects of a GetManagedObjects reply, by upper-case address.
    static func devices(_ reply: DBusValue?) -> [String: BlueZDevice] {
        guard case .dict(_, _, let objects)? = reply?.unwrapped else { return [:] }
        var result: [String: BlueZDevice] = [:]
        for object in objects {
            guard case .dict(_, _, let interfaces) = object.value.unwrapped else { continue }
            for interface in interfaces where interface.key.unwrapped == .string("org.bluez.Device1") {
                guard case .dict(_, _, let properties) = interface.value.unwrapped else { continue }
                var values: [String: DBusValue] = [:]
                for property in properties {
                    if case .string(let name) = property.key.unwrapped { values[name] = property.value.unwrapped }
                }
                guard case .string(let address)? = values["Address"] else { continue }
                func flag(_ name: String) -> Bool? { if case .bool(let b)? = values[name] { b } else { nil } }
                var rssi: Int? = nil
                if case .int16(let value)? = values["RSSI"] { rssi = Int(value) }
                result[address.uppercased()] = BlueZDevice(
                    address: address, paired: flag("Paired") ?? false, bonded: flag("Bonded"),
                    connected: flag("Connected") ?? false, rssi: rssi)
            }
        }
        return result
    }

    // MARK: - sugard

    static func daemonChecks(_ parsed: ParsedArguments, bluez: [String: BlueZDevice]?) async -> [Check] {
        var checks: [Check] = []
        let path = Daemon.socketPath(parsed)
        checks += self.groupChecks(socket: path)
        let state: Wire.State
        do throws(CommandFailure) {
            let daemon = try Daemon.connect(parsed)
            state = try await daemon.call("GetStatus", as: Wire.StatusReply.self).state
            checks.insert(Check(name: "sugard", status: .ok,
                                message: "running, socket \(path) answers (sugard \(state.daemon.version))"), at: 0)
        } catch {
            let lines = error.message.split(separator: "\n").map(String.init)
            let message = (lines.first ?? error.message).replacingPrefix("Error: ", with: "")
            let fix = lines.dropFirst().joined(separator: " ")
            checks.insert(Check(name: "sugard", status: .fail, message: message, fix: fix.isEmpty ? nil : fix,
                                needsRoot: error.status == ExitCode.unavailable), at: 0)
            return checks
        }
        let storage = state.daemon.storage
        let storageStatus = storage.status
        let identity = "database \(storage.databaseId ?? "without an identity")"
        let replaced = storage.error?.code == "replaced"
        checks.append(Check(
            name: "storage", status: storageStatus == .ok ? .ok : (storageStatus == .degraded ? .warning : .fail),
            message: storageStatus == .ok ? "\(identity) ok (\(storage.path))"
                : "\(identity) \(storageStatus.rawValue): \(storage.error?.message ?? "unknown error")",
            fix: storageStatus == .ok ? nil
                : replaced ? "put the moved file back with `sugarctl restore FILE` if it still exists; `journalctl -u sugard`"
                : storage.error?.code == "corrupt"
                ? "copy the file away (`sugarctl backup FILE`), run `sugarctl check`, restore a sound backup (`sugarctl restore FILE`)"
                : "check free space and permissions of \(storage.path); `journalctl -u sugard`"))
        if let check = storage.check {
            let line = StatusCommand.checkText(check)
            let status: Status = check.result == .damaged ? .fail : (check.result == .failed ? .warning : .ok)
            checks.append(Check(
                name: "storage check", status: status, message: line,
                fix: check.result == .damaged ? "`sugarctl check` for the problems; restore a sound backup (`sugarctl restore FILE`)"
                    : check.result == .failed ? "`sugarctl check` to try again; `journalctl -u sugard`" : nil))
        }
        let adapter = state.adapter
        if !adapter.present {
            checks.append(Check(name: "bluetoothd adapter", status: .fail, message: "sugard sees no adapter through bluetoothd",
                                fix: "`bluetoothctl list`; check the adapter and rfkill lines above"))
        } else if !adapter.powered {
            checks.append(Check(name: "bluetoothd adapter", status: .fail,
                                message: "\(adapter.name ?? "adapter") is powered off",
                                fix: "`bluetoothctl power on`"))
        } else {
            let scanning = adapter.discovering ? "discovering" : "not discovering (sugard scans while it looks for meters)"
            checks.append(Check(name: "bluetoothd adapter", status: .ok,
                                message: "\(adapter.name ?? "adapter") powered, \(scanning)"))
        }
        let meters = state.meters
        if meters.isEmpty {
            checks.append(Check(name: "meters", status: .warning, message: "no meter known yet",
                                fix: "put the meter in pairing mode near the adapter; `sugarctl meters` lists it within seconds"))
        }
        for meter in meters { checks.append(self.meterCheck(meter, bluez: bluez)) }
        return checks
    }

    static func meterCheck(_ meter: Wire.Meter, bluez: [String: BlueZDevice]?) -> Check {
        let id = meter.id
        let name = "meter \(meterLabel(meter.identity))"
        var parts: [String] = []
        if let last = meter.lastSync {
            parts.append("last sync \(last.result.rawValue) \(instantText(last.at) ?? "")")
        } else {
            parts.append("never synced")
        }
        let device = bluez?[id.uppercased()]
        if let device {
            parts.append(device.paired || device.bonded == true ? "bonded in BlueZ" : "no bond in BlueZ")
            parts.append(device.rssi.map { "in range (RSSI \($0) dBm)" } ?? (device.connected ? "connected" : "not in range"))
        } else if bluez != nil {
            parts.append("unknown to BlueZ")
        }
        let pairing = meter.pairing
        if let error = meter.lastError {
            let message = error.message
            var fix = error.hint
            if device != nil, pairing == .paired, device?.paired == false {
                fix = "the meter keeps a single bond and another phone may have taken it: put it in pairing mode and "
                    + "run `sugarctl pair \(id)`"
            }
            return Check(name: name, status: .fail, message: (parts + ["last error: \(message)"]).joined(separator: ", "), fix: fix)
        }
        if let device, pairing == .paired, !device.paired, device.bonded != true {
            return Check(name: name, status: .warning, message: parts.joined(separator: ", "),
                         fix: "sugard paired it but BlueZ lost the bond (another phone may have taken the meter's "
                            + "single bond): run `sugarctl pair \(id)`")
        }
        return Check(name: name, status: .ok, message: parts.joined(separator: ", "))
    }

    /// Whether this user can open the socket (its group) and may sync (the admin group).
    static func groupChecks(socket path: String) -> [Check] {
        var checks: [Check] = []
        let uid = geteuid()
        var groups = [gid_t](repeating: 0, count: 256)
        let count = getgroups(Int32(groups.count), &groups)
        let mine = Set(groups.prefix(Int(max(0, count))) + [getegid()])
        var info = stat()
        if stat(path, &info) == 0 {
            let group = groupName(info.st_gid)
            if uid == 0 || info.st_uid == uid || (info.st_mode & 0o002) != 0 {
                checks.append(Check(name: "socket group", status: .ok, message: "you may open \(path)"))
            } else if mine.contains(info.st_gid) && (info.st_mode & 0o020) != 0 {
                checks.append(Check(name: "socket group", status: .ok, message: "you are in \(group), which may open \(path)"))
            } else {
                checks.append(Check(name: "socket group", status: .fail, message: "you are not in \(group), the group of \(path)",
                                    fix: "`sudo usermod -aG \(group) $USER`, then log in again", needsRoot: true))
            }
        }
        if uid == 0 {
            checks.append(Check(name: "admin group", status: .ok, message: "root may sync, pair and forget meters"))
        } else if let admin = getgrnam("sugard-admin") {
            let gid = admin.pointee.gr_gid
            checks.append(mine.contains(gid)
                ? Check(name: "admin group", status: .ok, message: "you are in sugard-admin (sync, pair, forget)")
                : Check(name: "admin group", status: .warning, message: "you are not in sugard-admin: you can read, not sync or pair",
                        fix: "`sudo usermod -aG sugard-admin $USER` (and admin_group = sugard-admin in sugard.conf)",
                        needsRoot: true))
        } else {
            checks.append(Check(name: "admin group", status: .warning,
                                message: "no sugard-admin group: only root and sugard's user may sync and pair",
                                fix: "`sudo systemd-sysusers sugard.conf` creates it (the package does on install); set admin_group in sugard.conf", needsRoot: true))
        }
        return checks
    }

    static func groupName(_ gid: gid_t) -> String {
        guard let entry = getgrgid(gid) else { return "group \(gid)" }
        return String(cString: entry.pointee.gr_name)
    }
}

extension String {
    fileprivate func padding(_ width: Int) -> String {
        self.count >= width ? self + " " : self + String(repeating: " ", count: width - self.count)
    }

    fileprivate func replacingPrefix(_ prefix: String, with replacement: String) -> String {
        self.hasPrefix(prefix) ? replacement + self.dropFirst(prefix.count) : self
    }
}
