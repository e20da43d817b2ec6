import Glibc
import JSON
import Testing
import TestSupport

/// `sugarctl doctor` on this machine, whose kernel has no Bluetooth: it says so, exits 1, and still
/// checks sugard (the built daemon in demo mode), the socket and the groups.
@Suite(.serialized) struct DoctorTests {
    static func doctor(_ arguments: [String], dir: TempDirectory) async throws -> (Termination?, String, String) {
        let child = try ChildProcess(
            try builtProduct("sugarctl"), ["doctor"] + arguments,
            // A system bus that is not there: the bluetoothd check fails, the rest goes on.
            environment: ["HOME": dir.path, "TZ": "UTC", "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=" + dir.file("no-bus")],
            outputPrefix: dir.file("doctor-\(UInt32.random(in: 0...UInt32.max))"))
        return (await child.waitForExit(within: 60), child.stdout, child.stderr)
    }

    static func checks(_ json: String) throws -> [String: [JSONValue]] {
        let value = try JSONValue(parsing: json)
        var byName: [String: [JSONValue]] = [:]
        for check in value["checks"]?.arrayValue ?? [] { byName[check["name"]?.stringValue ?? "?", default: []].append(check) }
        return byName
    }

    @Test func withSugardRunningButNoBluetoothInTheKernel() async throws {
        let kernelHasBluetooth = socket(AF_BLUETOOTH, Int32(SOCK_RAW.rawValue), 1)
        if kernelHasBluetooth >= 0 {
            close(kernelHasBluetooth)
            return  // this test is about kernels without Bluetooth
        }
        let dir = try TempDirectory()
        let run = try SugardRun(in: dir, arguments: ["--demo"])
        try await run.waitUntilReady()
        // The demo meter appears once its first sync is done.
        var last: (Termination?, String, String) = (nil, "", "")
        let seen = try await eventually(within: 40) {
            last = try await Self.doctor(["--json", "--socket", run.socketPath], dir: dir)
            return last.1.contains("Accu-Chek Guide") && last.1.contains("last sync success")
        }
        #expect(seen, "doctor --json: \(last.0.map(\.description) ?? "running")\n\(last.1)\(last.2)")
        #expect(last.0 == .exited(1))
        let checks = try Self.checks(last.1)
        let kernel = try #require(checks["kernel"]?.first)
        #expect(kernel["status"] == "fail")
        #expect(kernel["message"]?.stringValue?.contains("no Bluetooth support") == true)
        #expect(kernel["needsRoot"] == true)
        #expect(checks["adapter"] == nil)
        #expect(checks["bluetoothd"]?.first?["status"] == "fail")
        #expect(checks["sugard"]?.first?["status"] == "ok")
        #expect(checks["storage"]?.first?["status"] == "ok")
        #expect(checks["socket group"]?.first?["status"] == "ok")
        #expect(checks["admin group"] != nil)
        #expect(checks["bluetoothd adapter"]?.first?["status"] == "ok")  // the demo's simulated adapter
        let meter = try #require(checks.first { $0.key.hasPrefix("meter ") }?.value.first)
        #expect(meter["status"] == "ok")
        #expect(try JSONValue(parsing: last.1)["ok"] == false)

        // The text form: one line per check, the kernel line first.
        let text = try await Self.doctor(["--socket", run.socketPath], dir: dir)
        #expect(text.0 == .exited(1))
        let lines = text.1.split(separator: "\n")
        #expect(lines.first?.hasPrefix("fail    kernel: this kernel has no Bluetooth support") == true, "\(text.1)")
        #expect(lines.contains { $0.hasPrefix("ok      sugard: running") })
        #expect(lines.contains { $0.hasPrefix("ok      storage:") })
        #expect(lines.contains { $0.hasPrefix("        fix (root): ") })
        #expect(await run.stop() == .exited(0))
    }

    @Test func withoutSugard() async throws {
        let dir = try TempDirectory()
        let (status, stdout, stderr) = try await Self.doctor(["--json", "--socket", dir.file("absent.sock")], dir: dir)
        #expect(status == .exited(1), "\(stdout)\(stderr)")
        let checks = try Self.checks(stdout)
        let sugard = try #require(checks["sugard"]?.first)
        #expect(sugard["status"] == "fail")
        #expect(sugard["message"]?.stringValue?.contains("sugard is not running") == true)
        #expect(sugard["fix"]?.stringValue?.contains("systemctl start sugard") == true)
        #expect(checks["storage"] == nil)
        #expect(checks["kernel"] != nil && checks["rfkill"] != nil && checks["admin group"] != nil)
    }

    @Test func recordWithoutBluetoothExits69AndWritesNothing() async throws {
        let kernelHasBluetooth = socket(AF_BLUETOOTH, Int32(SOCK_RAW.rawValue), 1)
        if kernelHasBluetooth >= 0 {
            close(kernelHasBluetooth)
            return
        }
        let dir = try TempDirectory()
        let child = try ChildProcess(
            try builtProduct("sugarctl"), ["capture", "record", dir.file("out.btsnoop"), "--redact"],
            environment: ["HOME": dir.path], outputPrefix: dir.file("record"))
        #expect(await child.waitForExit(within: 30) == .exited(69))
        #expect(child.stderr.contains("no Bluetooth support"))
        #expect(access(dir.file("out.btsnoop"), F_OK) != 0)
    }
}
