import BlueZTransport
import DBus
import Foundation
import GlucoseProfile
import HealthDataSync
import Testing
import TestSupport

private let meter = MeterID("C0:26:DA:01:02:03")
private let records: [(String, String?)] = [
    ("020100e807010f081e005fb011", "0201000142"),
    ("020200e807010f091e0064b011", nil),
]

private func standIn(_ options: String) -> String {
    let recordJSON = records.map { "[\"\($0.0)\", \($0.1.map { "\"\($0)\"" } ?? "null")]" }.joined(separator: ",")
    return """
        {"adapter": "hci0", "meters": [{"address": "\(meter.rawValue)", "name": "Guide", \
        "options": {"records": [\(recordJSON)], "serial": "SN-7"\(options.isEmpty ? "" : ", " + options)}}]}
        """
}

private func hex(_ bytes: [UInt8]) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}

/// Runs a transport against the fixture's bus for the duration of `body`, then cancels it.
private func withTransport(
    _ fixture: BusFixture,
    _ body: @Sendable (BlueZTransport, inout AsyncStream<TransportEvent>.Iterator) async throws -> Void
) async throws {
    let transport = BlueZTransport(
        configuration: BlueZTransportConfiguration(
            bus: .address(fixture.address), adapter: "hci0", callTimeout: .seconds(10), pairTimeout: .seconds(10),
            resolveTimeout: .seconds(10), reconnectDelay: .milliseconds(100)))
    var events = transport.events().makeAsyncIterator()
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { await transport.run() }
        defer { group.cancelAll() }
        try await body(transport, &events)
    }
}

/// Skips events until one matches; fails (returns nil) after the stream ends or 10 s.
private func waitFor(
    _ events: inout AsyncStream<TransportEvent>.Iterator, _ what: String,
    _ matches: (TransportEvent) -> Bool
) async throws -> TransportEvent? {
    while let event = try await next(&events, what) {
        if matches(event) { return event }
    }
    return nil
}

extension DBusIntegration {
    @Suite("BlueZTransport against the stand-in")
    struct BlueZTransportTests {
        @Test("adapter and meter appear; connect, notify, RACP report, read, disconnect")
        func syncThroughTransport() async throws {
            try await withBus(standIn: standIn("")) { fixture in
                try await withTransport(fixture) { transport, events in
                    let adapter = try await waitFor(&events, "adapter") {
                        if case .adapter(let state) = $0 { return state.present }
                        return false
                    }
                    #expect(adapter == .adapter(AdapterState(
                        present: true, powered: true, discovering: false, name: "hci0", address: "00:01:02:03:04:05")))
                    let appeared = try await waitFor(&events, "meter") {
                        if case .meterAppeared = $0 { return true }
                        return false
                    }
                    guard case .meterAppeared(let advertisement) = appeared else {
                        Issue.record("no meterAppeared")
                        return
                    }
                    #expect(advertisement.id == meter)
                    #expect(advertisement.name == "Guide")

                    try await transport.setDiscovery(true)
                    _ = try await waitFor(&events, "discovering") {
                        if case .adapter(let state) = $0 { return state.discovering }
                        return false
                    }

                    let services = try await transport.connect(meter)
                    for uuid in [BluetoothUUID.glucoseMeasurement, .glucoseMeasurementContext, .glucoseFeature,
                                 .recordAccessControlPoint, .serialNumber] {
                        #expect(services.has(uuid), "\(uuid)")
                    }
                    #expect(services.characteristic(.recordAccessControlPoint)?.properties == [.write, .indicate])
                    #expect(services.characteristic(.glucoseMeasurement)?.service == .glucoseService)
                    #expect(try await transport.read(.serialNumber, on: meter) == Array("SN-7".utf8))

                    for uuid in [BluetoothUUID.glucoseMeasurement, .glucoseMeasurementContext, .recordAccessControlPoint] {
                        try await transport.setNotifications(true, for: uuid, on: meter)
                    }
                    try await transport.write([0x01, 0x01], to: .recordAccessControlPoint, on: meter)
                    var values: [(BluetoothUUID, String)] = []
                    while values.last?.0 != .recordAccessControlPoint,
                        let event = try await waitFor(&events, "values", {
                            if case .value = $0 { return true }
                            return false
                        })
                    {
                        if case .value(let id, let uuid, let bytes) = event, id == meter { values.append((uuid, hex(bytes))) }
                    }
                    #expect(values.map(\.0) == [.glucoseMeasurement, .glucoseMeasurementContext, .glucoseMeasurement,
                                                .recordAccessControlPoint])
                    #expect(values.map(\.1) == [records[0].0, records[0].1!, records[1].0, "06000101"])

                    await transport.disconnect(meter)
                    let dropped = try await waitFor(&events, "disconnected") {
                        if case .disconnected = $0 { return true }
                        return false
                    }
                    #expect(dropped == .disconnected(meter, reason: nil))
                    let error = await #expect(throws: TransportError.self) {
                        try await transport.read(.glucoseFeature, on: meter)
                    }
                    #expect(error?.code == .notConnected)
                }
            }
        }

        @Test("pairing: the passkey request becomes an event and submitPasskey answers it")
        func pairingThroughTransport() async throws {
            try await withBus(standIn: standIn(#""requires_pairing": true, "pin": "123456""#)) { fixture in
                try await withTransport(fixture) { transport, events in
                    _ = try await waitFor(&events, "meter") {
                        if case .meterAppeared = $0 { return true }
                        return false
                    }
                    _ = try await transport.connect(meter)
                    let denied = await #expect(throws: TransportError.self) {
                        try await transport.read(.glucoseFeature, on: meter)
                    }
                    #expect(denied?.code == .authenticationRequired)

                    // Wrong passkey first (the Accu-Chek capture shows exactly that), then the right one.
                    for (passkey, succeeds) in [(UInt32(111_111), false), (UInt32(123_456), true)] {
                        try await withThrowingTaskGroup(of: Void.self) { group in
                            group.addTask { try await transport.pair(meter) }
                            let request = try await waitFor(&events, "passkey request") {
                                if case .passkeyRequested = $0 { return true }
                                return false
                            }
                            #expect(request == .passkeyRequested(meter))
                            try await transport.submitPasskey(passkey, for: meter)
                            do {
                                try await group.next()
                                #expect(succeeds, "pairing with a wrong passkey succeeded")
                            } catch let error as TransportError {
                                #expect(!succeeds, "pairing failed: \(error)")
                                #expect(error.code == .authenticationFailed)
                            }
                        }
                    }
                    #expect(try await transport.read(.glucoseFeature, on: meter) == [0x02, 0x04])
                }
            }
        }

        @Test("ATT errors on the RACP write carry their code")
        func attErrors() async throws {
            try await withBus(standIn: standIn(#""racp_att_error": 128"#)) { fixture in
                try await withTransport(fixture) { transport, events in
                    _ = try await waitFor(&events, "meter") {
                        if case .meterAppeared = $0 { return true }
                        return false
                    }
                    _ = try await transport.connect(meter)
                    try await transport.setNotifications(true, for: .recordAccessControlPoint, on: meter)
                    let error = await #expect(throws: TransportError.self) {
                        try await transport.write([0x01, 0x01], to: .recordAccessControlPoint, on: meter)
                    }
                    #expect(error?.code == .attError)
                    #expect(error?.attError == 0x80)
                    let missing = await #expect(throws: TransportError.self) {
                        try await transport.read(.currentTime, on: meter)
                    }
                    #expect(missing?.code == .characteristicNotFound)
                    let unknown = await #expect(throws: TransportError.self) {
                        _ = try await transport.connect(MeterID("00:11:22:33:44:55"))
                    }
                    #expect(unknown?.code == .meterNotFound)
                }
            }
        }

        @Test("bluetoothd restarts: adapter absent, then back with the meter; the agent is registered again")
        func bluetoothdRestart() async throws {
            try await withBus(standIn: standIn(#""requires_pairing": true"#)) { fixture in
                try await withTransport(fixture) { transport, events in
                    _ = try await waitFor(&events, "meter") {
                        if case .meterAppeared = $0 { return true }
                        return false
                    }
                    _ = try await transport.connect(meter)
                    fixture.killStandIn()
                    let gone = try await waitFor(&events, "disconnected on vanish") {
                        if case .disconnected = $0 { return true }
                        return false
                    }
                    if case .disconnected(let id, let reason) = gone {
                        #expect(id == meter)
                        #expect(reason != nil)
                    }
                    #expect(try await waitFor(&events, "adapter absent") { $0 == .adapter(.absent) } != nil)
                    let error = await #expect(throws: TransportError.self) { _ = try await transport.connect(meter) }
                    #expect(error?.code == .adapterUnavailable)

                    try await fixture.startStandIn(parameters: fixture.standInParameters)
                    _ = try await waitFor(&events, "adapter back") {
                        if case .adapter(let state) = $0 { return state.present }
                        return false
                    }
                    _ = try await waitFor(&events, "meter back") { $0 == .meterAppeared(MeterAdvertisement(
                        id: meter, name: "Guide", rssi: -79, paired: false)) }
                    // Pairing needs the agent, which only the re-registration after the restart provides.
                    // (Registration runs right after GetManagedObjects; retry briefly until it is in place.)
                    _ = try await transport.connect(meter)
                    var paired = false
                    for _ in 0..<20 where !paired {
                        try await withThrowingTaskGroup(of: Void.self) { group in
                            group.addTask { try await transport.pair(meter) }
                            group.addTask {
                                try await Task.sleep(for: .seconds(5))
                                throw FixtureError("no passkey request")
                            }
                            var iterator = events
                            let request = try await waitFor(&iterator, "passkey after restart") {
                                if case .passkeyRequested = $0 { return true }
                                return false
                            }
                            events = iterator
                            if request != nil {
                                try await transport.submitPasskey(123_456, for: meter)
                                try await group.next()
                                paired = true
                            }
                            group.cancelAll()
                        }
                    }
                    #expect(paired)
                }
            }
        }

        @Test("BlueZ error names map to transport error codes")
        func errorMapping() {
            let cases: [(String, String, TransportError.Code, UInt8?)] = [
                ("org.bluez.Error.NotPermitted", "Not paired", .authenticationRequired, nil),
                ("org.bluez.Error.Failed", "Operation failed with ATT error: 0x81", .attError, 0x81),
                ("org.bluez.Error", "Operation failed with ATT error: 0xfe", .attError, 0xFE),
                ("org.bluez.Error.Failed", "Not connected", .notConnected, nil),
                ("org.bluez.Error.AuthenticationFailed", "Authentication Failed", .authenticationFailed, nil),
                ("org.bluez.Error.AuthenticationCanceled", "", .authenticationFailed, nil),
                ("org.bluez.Error.NotReady", "Resource Not Ready", .adapterUnavailable, nil),
                ("org.freedesktop.DBus.Error.ServiceUnknown", "", .adapterUnavailable, nil),
                ("org.freedesktop.DBus.Error.UnknownObject", "", .notConnected, nil),
                ("org.bluez.Error.InProgress", "In Progress", .other, nil),
            ]
            for (name, message, code, att) in cases {
                let error = BlueZTransport.mapError(DBusError(kind: .remote, name: name, message: message), what: "X")
                #expect(error.code == code, "\(name)")
                #expect(error.attError == att, "\(name)")
            }
            #expect(BlueZTransport.mapError(DBusError(kind: .timeout, name: "n", message: ""), what: "X").code == .timeout)
        }
    }
}
