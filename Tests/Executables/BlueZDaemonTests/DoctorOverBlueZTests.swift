import DBus
import Glibc
import JSON
import Testing
import TestSupport

private let meter = "C0:26:DA:01:02:03"

/// `sugarctl doctor` with bluetoothd's stand-in on a private system bus and the built sugard synced
/// with a meter: the bluetoothd, adapter and meter checks read the real D-Bus objects.
@Suite("sugarctl doctor over the BlueZ stand-in", .serialized)
struct DoctorOverBlueZTests {
    static func doctor(_ rig: Rig) async throws -> (status: Int32, checks: [String: JSONValue], text: String) {
        let result = try await runToEnd(
            try builtProduct("sugarctl"), ["doctor", "--json", "--socket", rig.socketPath],
            environment: ["PATH": "/usr/bin:/bin", "HOME": rig.dir, "TZ": "UTC", "DBUS_SYSTEM_BUS_ADDRESS": rig.busAddress],
            dir: rig.dir, seconds: 60)
        var checks: [String: JSONValue] = [:]
        for check in try JSONValue(parsing: result.stdout)["checks"]?.arrayValue ?? [] {
            checks[check["name"]?.stringValue ?? "?"] = check
        }
        return (result.status, checks, result.stdout + result.stderr)
    }

    @Test("bluetoothd, the adapter and a synced meter check out; a bond BlueZ lost is named")
    func doctorSeesBlueZ() async throws {
        try await withRig(standIn: standIn([SimulatedMeter(address: meter, records: records(1...2))])) { rig in
            _ = try await rig.waitForLastSync(meter, ["success"])
            let first = try await Self.doctor(rig)
            #expect(first.checks["bluetoothd"]?["status"] == "ok", "\(first.text)")
            #expect(first.checks["bluetoothd"]?["message"]?.stringValue?.contains("running on the system bus") == true)
            #expect(first.checks["sugard"]?["status"] == "ok")
            #expect(first.checks["bluetoothd adapter"]?["status"] == "ok", "\(first.text)")
            let line = try #require(first.checks.first { $0.key.hasPrefix("meter ") }?.value, "\(first.text)")
            #expect(line["status"] == "ok", "\(first.text)")
            #expect(line["message"]?.stringValue?.contains("last sync success") == true, "\(first.text)")
            #expect(line["message"]?.stringValue?.contains("no bond in BlueZ") == true, "\(first.text)")
            #expect(line["message"]?.stringValue?.contains("in range (RSSI") == true, "\(first.text)")
        }
    }

    @Test("a paired meter whose bond BlueZ lost gets the fix sugarctl pair")
    func lostBond() async throws {
        let paired = SimulatedMeter(address: meter, records: records(1...2), options: #""requires_pairing": true, "pin": "123456""#)
        try await withRig(standIn: standIn([paired])) { rig in
            try await rig.waitUntil("the meter model waits for the passkey") {
                try await rig.meter(meter)?["pairing"]?.stringValue == "waitingForPasskey"
            }
            let right = try await rig.sugarctl(["pair", meter, "--pin", "123456"])
            #expect(right.status == 0, "\(right.stdout) \(right.stderr)")
            _ = try await rig.syncToSuccess(meter)
            let before = try await Self.doctor(rig)
            let ok = try #require(before.checks.first { $0.key.hasPrefix("meter ") }?.value, "\(before.text)")
            #expect(ok["status"] == "ok", "\(before.text)")
            #expect(ok["message"]?.stringValue?.contains("bonded in BlueZ") == true, "\(before.text)")
            // Another phone took the meter's single bond: BlueZ's device is no longer paired.
            _ = try await rig.bluez(
                "/org/bluez/hci0/dev_C0_26_DA_01_02_03", "org.freedesktop.DBus.Mock", "UpdateProperties",
                [.string("org.bluez.Device1"),
                 .dict(keySignature: "s", valueSignature: "v", [DBusDictEntry(.string("Paired"), .variant(.bool(false)))])])
            let after = try await Self.doctor(rig)
            let lost = try #require(after.checks.first { $0.key.hasPrefix("meter ") }?.value, "\(after.text)")
            #expect(lost["status"] == "warning", "\(after.text)")
            #expect(lost["message"]?.stringValue?.contains("no bond in BlueZ") == true, "\(after.text)")
            #expect(lost["fix"]?.stringValue?.contains("sugarctl pair \(meter)") == true, "\(after.text)")
        }
    }
}
