import DBus
import Foundation
import Glibc
import GlucoseStore
import HealthDataSync
import JSON
import Testing
import TestSupport
import Varlink

private let meterA = "C0:26:DA:01:02:03"
private let meterB = "C0:26:DA:0A:0B:0C"
private let glucoseService = "00001808-0000-1000-8000-00805f9b34fb"

/// The built `sugard` (and `sugarctl`) against the BlueZ stand-in on a private bus: the tests of the
/// BlueZ transport issue, run through the whole daemon. Each test starts its own bus, stand-in and
/// daemon and kills them at the end.
@Suite("sugard over the BlueZ stand-in", .serialized)
struct DaemonOverBlueZTests {
    @Test("a meter's records sync into the store exactly once; discovery is filtered on 0x1808")
    func normalSync() async throws {
        let first = records(1...3)
        try await withRig(standIn: standIn([SimulatedMeter(address: meterA, records: first)])) { rig in
            // The meter appears and the automatic sync stores its records.
            expectStored(try await rig.waitForReadings(meterA, count: 3), match: first, meter: meterA)
            let model = try await rig.waitForLastSync(meterA, ["success"])
            #expect(model["highWater"]?.intValue == 3)
            #expect(model["identity"]?["serialNumber"]?.stringValue == "SN-03")
            #expect(model["lastError"]?.isNull ?? true)

            // LE discovery, filtered on the Glucose service, runs while meters are expected.
            let filters = try await rig.methodCalls("/org/bluez/hci0", "SetDiscoveryFilter")
            // Each logged call is (timestamp, [filter]); the filter a{sv} holds UUIDs and Transport.
            let arguments = filters.compactMap { call -> [String: DBusValue]? in
                guard case .structure(let fields) = call, fields.count == 2 else { return nil }
                return fields[1].array?.first?.dictionary
            }
            // The Glucose service, and the OneTouch Verio vendor service (Verio meters have no 0x1808).
            #expect(
                arguments.contains { $0["UUIDs"]?.strings == [glucoseService, "af9df7a1-e595-11e3-96b4-0002a5d5c51b"] },
                "SetDiscoveryFilter calls: \(filters)")
            #expect(arguments.contains { $0["Transport"]?.string == "le" })
            #expect(try await rig.methodCalls("/org/bluez/hci0", "StartDiscovery").count >= 1)
            try await rig.waitUntil("the adapter shows discovering") {
                try await rig.state()["adapter"]?["discovering"]?.boolValue == true
            }
            let adapter = try await rig.state()["adapter"]
            #expect(adapter?["present"]?.boolValue == true)
            #expect(adapter?["powered"]?.boolValue == true)
            #expect(adapter?["name"]?.stringValue == "hci0")

            // New readings on the meter: a forced sync fetches only those.
            let more = records(4...5)
            try await rig.mock("AddGlucoseRecords", [.string(meterA), .string(recordsJSON(more))])
            let session = try await rig.syncToSuccess(meterA)
            if let session {
                #expect(session["result"]?.stringValue == "success")
                #expect(session["stored"]?.intValue == 2)
                #expect(session["duplicates"]?.intValue == 0)
            }
            expectStored(try await rig.waitForReadings(meterA, count: 5), match: first + more, meter: meterA)
            // Nothing new: the next sync asks for records after #5 and stores nothing.
            let again = try await rig.syncToSuccess(meterA)
            if let again { #expect(again["stored"]?.intValue == 0) }
            #expect(try await rig.readings(meterA).count == 5)

            // sugarctl sees the same.
            let status = try await rig.sugarctl(["status"])
            #expect(status.status == 0, "\(status.stderr)")
            #expect(status.stdout.contains(meterA))

            // A clean stop, and the database file holds each reading once.
            #expect(await rig.stopDaemon() == 0, "sugard's exit status; log:\n\(rig.daemonLog)")
            let store = try SQLiteReadingStore(path: rig.databasePath)
            let stored = try await store.readings(ReadingQuery(meter: MeterID(meterA)))
            #expect(stored.map(\.reading.sequenceNumber) == [1, 2, 3, 4, 5])
            #expect(try await store.meter(MeterID(meterA))?.highWater == 5)
            await store.close()
        }
    }

    @Test("pairing: the passkey request reaches sugarctl pair; a wrong PIN fails with a hint, the right one pairs")
    func pairing() async throws {
        let stored = records(1...3)
        let meter = SimulatedMeter(address: meterA, records: stored, options: #""requires_pairing": true, "pin": "123456""#)
        try await withRig(standIn: standIn([meter])) { rig in
            // The automatic sync hits "Not paired", pairs, and the meter asks for its passkey.
            try await rig.waitUntil("the meter model waits for the passkey") {
                try await rig.meter(meterA)?["pairing"]?.stringValue == "waitingForPasskey"
            }
            let wrong = try await rig.sugarctl(["pair", meterA, "--pin", "000000"])
            #expect(wrong.status == 1, "wrong PIN: \(wrong.stdout) \(wrong.stderr)")
            var model: JSONValue?
            try await rig.waitUntil("pairing failed with a hint") {
                model = try await rig.meter(meterA)
                return model?["pairing"]?.stringValue == "failed" && model?["lastError"]?["hint"]?.stringValue != nil
            }
            #expect(model?["lastError"]?["code"]?.stringValue == "pairingFailed")
            #expect(model?["lastError"]?["hint"]?.stringValue?.contains("sugarctl pair \(meterA)") == true)
            #expect(try await rig.readings(meterA).isEmpty)

            // Wrong again, now outside a sync: the pairing call itself reports the failure and the hint.
            let again = try await rig.sugarctl(["pair", meterA, "--pin", "111111"])
            #expect(again.status == 1, "wrong PIN again: \(again.stdout) \(again.stderr)")
            #expect(again.stderr.contains("AuthenticationFailed"))
            let failedAgain = try await rig.meter(meterA)
            #expect(failedAgain?["pairing"]?.stringValue == "failed")
            #expect(failedAgain?["lastError"]?["message"]?.stringValue?.contains("AuthenticationFailed") == true)
            #expect(failedAgain?["lastError"]?["hint"]?.stringValue?.contains("sugarctl pair \(meterA)") == true)

            // Retry with the right PIN.
            let right = try await rig.sugarctl(["pair", meterA, "--pin", "123456"])
            #expect(right.status == 0, "right PIN: \(right.stdout) \(right.stderr)\n\(rig.daemonLog)")
            #expect(right.stdout.contains("Paired with"))
            let state = try await rig.meterState(meterA)
            #expect(state["paired"]?.boolValue == true)
            #expect(state["passkeys"] == [0, 111_111, 123_456])
            #expect(try await rig.deviceProperty(meterA, "Trusted")?.bool == true)
            try await rig.waitUntil("the model says paired") {
                try await rig.meter(meterA)?["pairing"]?.stringValue == "paired"
            }

            // Paired: the sync goes through.
            _ = try await rig.syncToSuccess(meterA)
            expectStored(try await rig.waitForReadings(meterA, count: 3), match: stored, meter: meterA)
            let after = try await rig.meter(meterA)
            #expect(after?["lastError"]?.isNull ?? true)
        }
    }

    @Test("the meter disconnects mid-transfer: partial readings kept, the mark after them; the next sync asks for the rest only")
    func disconnectMidTransfer() async throws {
        let all = records(1...5)
        let meter = SimulatedMeter(address: meterA, records: all, options: #""disconnect_after_records": 2"#)
        try await withRig(standIn: standIn([meter])) { rig in
            let interrupted = try await rig.waitForLastSync(meterA, ["interrupted"])
            #expect(interrupted["highWater"]?.intValue == 2, "the contiguous mark after an interrupted sync")
            #expect(interrupted["lastError"]?["code"]?.stringValue == "meterDisconnected")
            expectStored(try await rig.readings(meterA), match: Array(all.prefix(2)), meter: meterA)

            try await rig.mock("SetGlucoseMeterOptions", [.string(meterA), .string(#"{"disconnect_after_records": null}"#)])
            let session = try await rig.syncToSuccess(meterA)
            if let session {
                #expect(session["stored"]?.intValue == 3)
                #expect(session["duplicates"]?.intValue == 0, "records 1 and 2 are not asked for again")
            }
            expectStored(try await rig.waitForReadings(meterA, count: 5), match: all, meter: meterA)
            #expect(try await rig.meter(meterA)?["highWater"]?.intValue == 5)
            let results = try await rig.sessions(meterA).compactMap { $0["result"]?.stringValue }
            #expect(results.contains("interrupted") && results.first == "success", "sessions: \(results)")
        }
    }

    @Test("bluetoothd restarts mid-sync: the daemon keeps running, re-registers its agent and resumes")
    func bluetoothdRestart() async throws {
        let all = records(1...8)
        let meter = SimulatedMeter(address: meterA, records: all, options: #""record_interval_ms": 250"#)
        try await withRig(standIn: standIn([meter])) { rig in
            try await rig.waitUntil("the transfer is under way") {
                try await rig.meter(meterA)?["progress"]?["received"]?.intValue ?? 0 >= 2
            }
            let firstAgents = try await rig.mock("GetAgentState").first?.string
            #expect(firstAgents?.contains("KeyboardDisplay") == true)
            rig.killStandIn()

            try await rig.waitUntil("the adapter is unavailable") {
                try await rig.state()["adapter"]?["present"]?.boolValue == false
            }
            let model = try await rig.waitForLastSync(meterA, ["interrupted", "failed"])
            #expect(rig.daemonRunning)
            let partial = try await rig.readings(meterA)
            // The records that arrived are contiguous: the mark is the last of them.
            #expect(model["highWater"]?.intValue == Int64(partial.count))
            #expect(partial.count >= 2 && partial.count < all.count)
            expectStored(partial, match: Array(all.prefix(partial.count)), meter: meterA)
            let status = try await rig.sugarctl(["status"])
            #expect(status.status == 0, "\(status.stderr)")

            // bluetoothd is back (with the bonded meter): agent registered again, discovery resumed.
            try await rig.startStandIn(rig.standInParameters)
            try await rig.waitUntil("the daemon registered its agent with the new bluetoothd") {
                let text = try await rig.mock("GetAgentState").first?.string ?? ""
                let agents = try JSONValue(parsing: text)
                return agents["default_agent"]?.stringValue == "/io/sugard/agent"
                    && agents["registrations"]?.arrayValue?.first?.arrayValue?[1].stringValue == "KeyboardDisplay"
            }
            try await rig.waitUntil("discovery restarted") {
                try await rig.state()["adapter"]?["discovering"]?.boolValue == true
            }
            _ = try await rig.syncToSuccess(meterA)
            expectStored(try await rig.waitForReadings(meterA, count: all.count), match: all, meter: meterA)
            #expect(try await rig.meter(meterA)?["highWater"]?.intValue == 8)
            #expect(rig.daemonRunning)
        }
    }

    @Test("two meters sync at once, each into its own readings")
    func twoMeters() async throws {
        let a = records(1...3)
        let b = records(1...4).map { MeterRecord(sequenceNumber: $0.sequenceNumber, mgdL: $0.mgdL + 50, withContext: false) }
        try await withRig(
            standIn: standIn([
                SimulatedMeter(address: meterA, name: "Meter A", records: a, options: #""record_interval_ms": 50"#),
                SimulatedMeter(address: meterB, name: "Meter B", records: b, options: #""record_interval_ms": 50"#),
            ])
        ) { rig in
            expectStored(try await rig.waitForReadings(meterA, count: 3), match: a, meter: meterA)
            expectStored(try await rig.waitForReadings(meterB, count: 4), match: b, meter: meterB)
            try await rig.waitForLastSync(meterA, ["success"])
            try await rig.waitForLastSync(meterB, ["success"])
            let state = try await rig.state()
            #expect(state["readingCount"]?.intValue == 7)
            let names = state["meters"]?.arrayValue?.compactMap { $0["identity"]?["name"]?.stringValue }.sorted()
            #expect(names == ["Meter A", "Meter B"])
        }
    }

    @Test("RACP ATT errors: 0x80 and a lost CCCD recover; persistent 0x81, 0x80 and 0xFE end in a clear error")
    func racpATTErrors() async throws {
        let stored = records(1...3)
        func meter(_ last: UInt8, _ options: String) -> SimulatedMeter {
            SimulatedMeter(
                address: "C0:26:DA:00:00:\(String(format: "%02X", last))", name: "Meter \(last)", records: stored,
                options: options)
        }
        let busyOnce = meter(1, #""busy_writes": 1"#)
        let cccdOnce = meter(2, #""racp_att_error": 129, "racp_att_error_count": 1"#)
        let cccdAlways = meter(3, #""racp_att_error": 129"#)
        let busyAlways = meter(4, #""racp_att_error": 128"#)
        let fe = meter(5, #""racp_att_error": 254"#)
        try await withRig(standIn: standIn([busyOnce, cccdOnce, cccdAlways, busyAlways, fe])) { rig in
            // Recovered: abort, pause and retry; or re-enable the RACP indications and retry.
            for recovered in [busyOnce, cccdOnce] {
                try await rig.waitForLastSync(recovered.address, ["success"])
                expectStored(try await rig.readings(recovered.address), match: stored, meter: recovered.address)
            }
            #expect(try await rig.meterState(busyOnce.address)["aborts"]?.intValue ?? 0 >= 1)
            #expect(try await rig.meterState(cccdOnce.address)["start_notify"]?["2a52"]?.intValue == 2)

            // Not recoverable: a failed sync with a stable code, the ATT code, a message and a hint.
            for (failing, code, att) in [
                (cccdAlways, "cccdImproperlyConfigured", 0x81), (busyAlways, "procedureAlreadyInProgress", 0x80),
                (fe, "procedureAlreadyInProgress", 0xFE),
            ] {
                let model = try await rig.waitForLastSync(failing.address, ["failed"])
                let error = model["lastError"]
                #expect(error?["code"]?.stringValue == code, "\(failing.address): \(String(describing: error))")
                #expect(error?["specCode"]?.intValue == Int64(att))
                #expect(error?["message"]?.stringValue?.isEmpty == false)
                #expect(error?["hint"]?.stringValue?.contains("sugarctl capture inspect") == true)
                #expect(try await rig.readings(failing.address).isEmpty)
            }
            #expect(rig.daemonRunning)
        }
    }

    @Test("a meter without a Glucose Measurement Context characteristic syncs")
    func noContextCharacteristic() async throws {
        let stored = records(1...4)
        let meter = SimulatedMeter(address: meterA, records: stored, options: #""context": false"#)
        try await withRig(standIn: standIn([meter])) { rig in
            expectStored(
                try await rig.waitForReadings(meterA, count: 4), match: stored, meter: meterA, context: false)
            try await rig.waitForLastSync(meterA, ["success"])
            let state = try await rig.meterState(meterA)
            #expect(state["characteristics"]?["2a34"] == nil)
            #expect(state["start_notify"]?["2a34"] == nil)
        }
    }

    @Test("no bluetoothd at start: READY, adapter unavailable; meters appear and sync once it comes")
    func noBluetoothdAtStart() async throws {
        let stored = records(1...3)
        try await withRig(standIn: nil, daemon: false) { rig in
            let notify = try NotifySocket(path: rig.dir + "/notify.sock")
            defer { notify.close() }
            try await rig.startDaemon(notifySocket: notify.path)
            try await rig.waitUntil("READY=1 from sugard") { notify.received.contains("READY=1") }
            let adapter = try await rig.state()["adapter"]
            #expect(adapter?["present"]?.boolValue == false)
            let status = try await rig.sugarctl(["status"])
            #expect(status.status == 0, "\(status.stderr)")
            // Sync refuses clearly while there is no adapter.
            let refused = await #expect(throws: VarlinkClientError.self) { _ = try await rig.sync(meterA) }
            if case .remote(let error) = refused { #expect(error.name.hasSuffix("MeterNotFound") || error.name.hasSuffix("AdapterUnavailable")) }

            try await rig.startStandIn(standIn([SimulatedMeter(address: meterA, records: stored)]))
            expectStored(try await rig.waitForReadings(meterA, count: 3), match: stored, meter: meterA)
            try await rig.waitUntil("the adapter is present and discovering") {
                let adapter = try await rig.state()["adapter"]
                return adapter?["present"]?.boolValue == true && adapter?["discovering"]?.boolValue == true
            }
            #expect(rig.daemonRunning)
        }
    }

    @Test("without an adapter setting the first powered adapter is used")
    func firstPoweredAdapter() async throws {
        let stored = records(1...2)
        try await withRig(standIn: standIn([]), daemon: false) { rig in
            // hci0 is off; the meter is near hci1.
            _ = try await rig.bluez(
                "/org/bluez/hci0", "org.freedesktop.DBus.Mock", "UpdateProperties",
                [.string("org.bluez.Adapter1"), .vardict(["Powered": .bool(false)])])
            try await rig.mock("AddAdapter", [.string("hci1"), .string("second")])
            try await rig.mock(
                "AddGlucoseMeter",
                [.string("hci1"), .string(meterA), .string("Test Meter"), .string(#"{"records": \#(recordsJSON(stored))}"#)])
            try await rig.startDaemon()
            expectStored(try await rig.waitForReadings(meterA, count: 2), match: stored, meter: meterA)
            let adapter = try await rig.state()["adapter"]
            #expect(adapter?["name"]?.stringValue == "hci1")
            #expect(adapter?["powered"]?.boolValue == true)
            #expect(try await rig.methodCalls("/org/bluez/hci1", "StartDiscovery").count >= 1)
            #expect(try await rig.methodCalls("/org/bluez/hci0", "StartDiscovery").isEmpty)
        }
    }

    @Test("a meter that advertises again syncs again; an adapter unplugged and plugged back works")
    func advertisingAndAdapterReplug() async throws {
        let first = records(1...2)
        try await withRig(
            standIn: standIn([SimulatedMeter(address: meterA, records: first)]), config: ["cooldown_seconds = 1"]
        ) { rig in
            try await rig.waitForReadings(meterA, count: 2)
            try await rig.waitForLastSync(meterA, ["success"])
            // The meter took a reading and advertises (RSSI update): an automatic sync fetches it.
            try await rig.mock("AddGlucoseRecords", [.string(meterA), .string(recordsJSON(records(3...3)))])
            try await Task.sleep(for: .milliseconds(1200))
            try await rig.mock("SetGlucoseMeterInRange", [.string(meterA), .bool(true)])
            try await rig.waitForReadings(meterA, count: 3)

            // Unplug: the meter and the adapter go away.
            try await rig.mock("RemoveGlucoseMeter", [.string(meterA)])
            try await rig.mock("RemoveAdapter", [.string("hci0")])
            try await rig.waitUntil("the adapter is unavailable") {
                try await rig.state()["adapter"]?["present"]?.boolValue == false
            }
            #expect(rig.daemonRunning)
            try await Task.sleep(for: .milliseconds(1200))  // past the 1 s cooldown of the last sync
            // Plug back: discovery restarts and the meter syncs its new reading.
            try await rig.mock("AddAdapter", [.string("hci0"), .string("sugard-test")])
            try await rig.mock(
                "AddGlucoseMeter",
                [.string("hci0"), .string(meterA), .string("Test Meter"), .string(#"{"records": \#(recordsJSON(records(1...4)))}"#)])
            expectStored(try await rig.waitForReadings(meterA, count: 4), match: records(1...4), meter: meterA)
            try await rig.waitUntil("discovery restarted on the new adapter") {
                try await rig.methodCalls("/org/bluez/hci0", "StartDiscovery").count >= 1
            }
        }
    }
}

/// A datagram socket standing in for systemd's NOTIFY_SOCKET.
final class NotifySocket: @unchecked Sendable {
    // @unchecked: fd is immutable; reads happen from the test task only.
    let path: String
    private let fd: Int32

    init(path: String) throws {
        self.path = path
        self.fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard self.fd >= 0 else { throw RigError("socket failed") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in bytes.prefix(raw.count - 1).enumerated() { raw[i] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(self.fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { throw RigError("binding \(path) failed: errno \(errno)") }
    }

    private var messages: [String] = []

    /// Everything received so far, newline-separated.
    var received: String {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(self.fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if n <= 0 { break }
            self.messages.append(String(decoding: buffer[0..<n], as: UTF8.self))
        }
        return self.messages.joined(separator: "\n")
    }

    func close() { Glibc.close(self.fd) }
}
