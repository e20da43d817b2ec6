import GlucoseProfile
import HealthDataSync
import PacketCapture
import ReplayTransport
import Testing

@Suite struct MeterSimulatorTests {
    static func meter(seqs: [UInt16], faults: SimulatorFaults = SimulatorFaults(), pairing: MeterPersonality.Pairing = .none)
        -> MeterSimulator
    {
        let personality = MeterPersonality(
            address: BluetoothAddress(rawValue: 0xD4_A0_09_00_00_01), name: "T", manufacturer: "sugard simulator",
            model: "test", clock: .currentTime(DateTime(year: 2025, month: 1, day: 1, hours: 12)), pairing: pairing,
            faults: faults)
        let records = seqs.map { seq in
            SimulatedRecord(GlucoseMeasurement(
                sequenceNumber: seq, baseTime: DateTime(year: 2025, month: 1, day: 1, hours: 8),
                concentration: SFloat(rawValue: 0xB000 | 100), unit: .kilogramsPerLiter, type: .capillaryPlasma,
                sampleLocation: .finger))
        }
        var meter = MeterSimulator(personality: personality, records: records)
        meter.connect()
        return meter
    }

    static func subscribe(_ meter: inout MeterSimulator) {
        #expect(meter.setNotifications(true, for: .glucoseMeasurement).error == nil)
        #expect(meter.setNotifications(true, for: .glucoseMeasurementContext).error == nil)
        #expect(meter.setNotifications(true, for: .recordAccessControlPoint).error == nil)
    }

    /// Sequence numbers of the measurements a RACP request sends, and the final indication.
    static func ask(_ meter: inout MeterSimulator, _ request: [UInt8]) -> (seqs: [UInt16], last: [UInt8]?, error: ATTErrorCode?) {
        let result = meter.writeRACP(request)
        var seqs: [UInt16] = []
        var last: [UInt8]?
        for output in result.outputs {
            switch output {
            case .notification(_, let uuid, let value) where uuid == .glucoseMeasurement:
                seqs.append(UInt16(value[1]) | UInt16(value[2]) << 8)
            case .indication(_, _, let value): last = value
            default: break
            }
        }
        return (seqs, last, result.error)
    }

    @Test func reportAllAndGreaterOrEqualAcrossTheWrap() {
        var meter = Self.meter(seqs: [65534, 65535, 0, 1])
        Self.subscribe(&meter)
        #expect(Self.ask(&meter, [0x01, 0x01]).seqs == [65534, 65535, 0, 1])
        #expect(Self.ask(&meter, [0x01, 0x01]).last == [0x06, 0x00, 0x01, 0x01])
        #expect(Self.ask(&meter, [0x01, 0x03, 0x01, 0xFF, 0xFF]).seqs == [65535, 0, 1])
        #expect(Self.ask(&meter, [0x01, 0x03, 0x01, 0x01, 0x00]).seqs == [1])
        #expect(Self.ask(&meter, [0x01, 0x03, 0x01, 0x00, 0x00]).seqs == [0, 1])
        let none = Self.ask(&meter, [0x01, 0x03, 0x01, 0x02, 0x00])
        #expect(none.seqs.isEmpty && none.last == [0x06, 0x00, 0x01, 0x06])
        #expect(Self.ask(&meter, [0x04, 0x01]).last == [0x05, 0x00, 0x04, 0x00])
        #expect(Self.ask(&meter, [0x04, 0x03, 0x01, 0xFF, 0xFF]).last == [0x05, 0x00, 0x03, 0x00])
        #expect(Self.ask(&meter, [0x01, 0x02, 0x01, 0xFF, 0xFF]).seqs == [65534, 65535])
        #expect(Self.ask(&meter, [0x01, 0x04, 0x01, 0xFF, 0xFF, 0x00, 0x00]).seqs == [65535, 0])
        #expect(Self.ask(&meter, [0x01, 0x05]).seqs == [65534])
        #expect(Self.ask(&meter, [0x01, 0x06]).seqs == [1])
        #expect(meter.nextSequenceNumber == 2)
    }

    @Test func responseCodesForBadRequests() {
        var meter = Self.meter(seqs: [1, 2])
        Self.subscribe(&meter)
        #expect(Self.ask(&meter, [0x04, 0x01, 0x00]).last == [0x06, 0x00, 0x04, 0x05])  // stray operand byte
        #expect(Self.ask(&meter, [0x09, 0x01]).last == [0x06, 0x00, 0x09, 0x02])  // reserved op code
        #expect(Self.ask(&meter, [0x01, 0x09]).last == [0x06, 0x00, 0x01, 0x03])  // reserved operator
        #expect(Self.ask(&meter, [0x01, 0x03, 0x07, 0x01, 0x00]).last == [0x06, 0x00, 0x01, 0x09])  // filter type
        #expect(Self.ask(&meter, [0x01, 0x03, 0x02] + DateTime(year: 2025, month: 1, day: 1).encoded()).last
            == [0x06, 0x00, 0x01, 0x09])  // user-facing time filter not offered
        #expect(Self.ask(&meter, [0x02, 0x01]).last == [0x06, 0x00, 0x02, 0x02])  // delete not supported
        #expect(Self.ask(&meter, [0x03, 0x00]).last == [0x06, 0x00, 0x03, 0x01])  // abort
        #expect(Self.ask(&meter, []).error == .invalidAttributeValueLength)
    }

    @Test func racpBeforeIndicationsIsATTError0x81() {
        var meter = Self.meter(seqs: [1])
        #expect(Self.ask(&meter, [0x01, 0x01]).error == .glucoseCCCDImproperlyConfigured)
        Self.subscribe(&meter)
        #expect(Self.ask(&meter, [0x01, 0x01]).seqs == [1])
    }

    @Test func faults() {
        var meter = Self.meter(seqs: [1, 2, 3, 4], faults: SimulatorFaults(
            countNotSupported: true, racpWriteErrors: [0x80], disconnectAfterRecords: 2))
        Self.subscribe(&meter)
        #expect(Self.ask(&meter, [0x03, 0x00]).error == nil)  // abort does not use up the injected error
        #expect(Self.ask(&meter, [0x04, 0x01]).error == .glucoseProcedureAlreadyInProgress)
        #expect(Self.ask(&meter, [0x04, 0x01]).last == [0x06, 0x00, 0x04, 0x02])
        let cut = meter.writeRACP([0x01, 0x01])
        #expect(cut.outputs.last == .disconnected(reason: 0x08))
        #expect(cut.outputs.count == 3)
        #expect(!meter.isConnected)
        meter.connect()
        Self.subscribe(&meter)
        #expect(Self.ask(&meter, [0x01, 0x01]).seqs == [1, 2, 3, 4])  // the drop happens once

        var empty = Self.meter(seqs: [1, 2], faults: SimulatorFaults(reportNotSupported: true, noRecords: true))
        Self.subscribe(&empty)
        #expect(Self.ask(&empty, [0x04, 0x01]).last == [0x05, 0x00, 0x00, 0x00])
        #expect(Self.ask(&empty, [0x01, 0x01]).last == [0x06, 0x00, 0x01, 0x02])
    }

    @Test func pairingGuardsTheGlucoseService() {
        var meter = Self.meter(seqs: [1], pairing: .passkey(123_456))
        let feature = meter.valueHandle(.glucoseFeature)!
        #expect(meter.read(feature) == .error(.insufficientAuthentication))
        #expect(meter.read(meter.valueHandle(.manufacturerName)!) == .value(Array("sugard simulator".utf8)))
        #expect(meter.setNotifications(true, for: .glucoseMeasurement).error == .insufficientAuthentication)
        #expect(meter.pair(passkey: 1) == .wrongPasskey)
        #expect(meter.pair(passkey: 123_456) == .bonded)
        #expect(meter.read(feature) == .value(meter.personality.feature.encoded()))
        meter.disconnect()
        meter.connect()
        #expect(meter.isBonded)
    }

    @Test func addRecordNumbersAfterTheLastAndWraps() {
        var meter = Self.meter(seqs: [65535])
        let seq = meter.addRecord(GlucoseMeasurement(
            sequenceNumber: 7, baseTime: DateTime(year: 2025, month: 1, day: 2), concentration: SFloat(rawValue: 0xB064),
            unit: .kilogramsPerLiter, type: .capillaryPlasma, sampleLocation: .finger))
        #expect(seq == 0)
        #expect(meter.records.last?.sequenceNumber == 0)
        #expect(MeterSimulator(personality: meter.personality).nextSequenceNumber == 1)
    }

    @Test func recordingWritesAReadableCapture() throws {
        var meter = FixtureMeter.contour.simulator
        meter.startRecording(format: .monitor)
        SimulatedClient.download(&meter)
        let recorded = meter.stopRecording()
        let builder = try #require(recorded)
        let inspection = try CaptureInspector.inspect(bytes: builder.image)
        #expect(inspection.records.map(\.measurement.sequenceNumber) == [1, 2, 3, 4, 5])
        #expect(inspection.anomalies.isEmpty, "\(inspection.anomalies)")
        let session = try #require(inspection.sessions.first)
        #expect(session.capture.mtu == 247)
        #expect(session.capture.encrypted)
        #expect(session.deviceInformation.firmware == "04.07.00 build 2319 (bootloader 1.02)")
        #expect(session.racp.map { $0.request?.encoded() } == [[0x04, 0x01], [0x01, 0x01]])
        #expect(session.racp.last?.measurements == 5)
    }
}

@Suite struct ReplayTransportTests {
    @Test func valuesArriveBeforeTheWriteReturnsAndErrorsMapToTransportErrors() async throws {
        let meter = FixtureMeter.wrap.simulator
        let transport = ReplayTransport(meters: [meter])
        var events = transport.events().makeAsyncIterator()
        #expect(await events.next() == .adapter(AdapterState(present: true, powered: true, discovering: false, name: "replay")))
        guard case .meterAppeared(let ad)? = await events.next() else { Issue.record("no meterAppeared"); return }
        #expect(ad.id == meter.id)

        do {
            _ = try await transport.read(.glucoseFeature, on: meter.id)
            Issue.record("read while disconnected succeeded")
        } catch {
            #expect(error.code == .notConnected)
        }
        let services = try await transport.connect(meter.id)
        #expect(services.has(.glucoseMeasurement) && services.has(.recordAccessControlPoint) && services.has(.currentTime))
        do {
            _ = try await transport.read(.dateTime, on: meter.id)
            Issue.record("read of a missing characteristic succeeded")
        } catch {
            #expect(error.code == .characteristicNotFound)
        }
        do {
            try await transport.write([0x01, 0x01], to: .recordAccessControlPoint, on: meter.id)
            Issue.record("RACP before indications succeeded")
        } catch {
            #expect(error.code == .attError && error.attError == 0x81)
        }
        try await transport.setNotifications(true, for: .glucoseMeasurement, on: meter.id)
        try await transport.setNotifications(true, for: .recordAccessControlPoint, on: meter.id)
        try await transport.write([0x01, 0x01], to: .recordAccessControlPoint, on: meter.id)
        var values: [TransportEvent] = []
        for _ in 0..<7 { values.append(await events.next()!) }
        #expect(values.count == 7)
        #expect(values.last == .value(meter.id, .recordAccessControlPoint, [0x06, 0x00, 0x01, 0x01]))
        await transport.disconnect(meter.id)
        await transport.shutdown()
        #expect(await events.next() == nil)
        do {
            _ = try await transport.connect(meter.id)
            Issue.record("connect after shutdown succeeded")
        } catch {
            #expect(error.code == .adapterUnavailable)
        }
    }

    @Test func aCaptureMetersClockRunsOnFromTheRecordedReading() async throws {
        let meter = try ReplayTransport.meter(fromCaptureBytes: FixtureMeter.contour.capture())
        let reference = try #require(meter.personality.clockReference)
        let options = ReplayTransport.Options(wallClock: { reference + 3_600_000_000 + 500_000 })
        let transport = ReplayTransport(meters: [meter], options: options)
        _ = try await transport.connect(meter.id)
        let bytes = try await transport.read(.currentTime, on: meter.id)
        #expect(try CurrentTime(bytes: bytes).dateTime == DateTime(year: 2025, month: 11, day: 24, hours: 17, minutes: 58, seconds: 10))
        await transport.shutdown()

        // A simulator personality without a reference keeps its fixed value; `clock` overrides both.
        let fixed = ReplayTransport(meters: [FixtureMeter.contour.simulator], options: ReplayTransport.Options(
            clock: { DateTime(year: 2030, month: 1, day: 2, hours: 3) }))
        _ = try await fixed.connect(meter.id)
        #expect(try CurrentTime(bytes: try await fixed.read(.currentTime, on: meter.id)).dateTime
            == DateTime(year: 2030, month: 1, day: 2, hours: 3))
        await fixed.shutdown()
    }

    @Test func passkeyPairing() async throws {
        let meter = FixtureMeter.accuChekGuide.simulator
        let transport = ReplayTransport(meters: [meter])
        _ = try await transport.connect(meter.id)
        do {
            _ = try await transport.read(.glucoseFeature, on: meter.id)
            Issue.record("read before pairing succeeded")
        } catch {
            #expect(error.code == .authenticationRequired && error.attError == 0x05)
        }
        async let pairing: Void = transport.pair(meter.id)
        var events = transport.events().makeAsyncIterator()
        while let event = await events.next() {
            if case .passkeyRequested(let id) = event, id == meter.id { break }
        }
        try await transport.submitPasskey(FixtureMeter.accuChekPasskey, for: meter.id)
        try await pairing
        #expect(try await transport.read(.glucoseFeature, on: meter.id) == [0x03, 0x04])
        await transport.shutdown()
    }

    @Test func shutdownCancelsAPendingPairingAndADelivery() async throws {
        let meter = FixtureMeter.accuChekGuide.simulator
        let transport = ReplayTransport(meters: [meter], options: ReplayTransport.Options(operationDelay: .milliseconds(1)))
        _ = try await transport.connect(meter.id)
        let pairing = Task { () -> TransportError? in
            do throws(TransportError) {
                try await transport.pair(meter.id)
                return nil
            } catch {
                return error
            }
        }
        var events = transport.events().makeAsyncIterator()
        while let event = await events.next() {
            if case .passkeyRequested = event { break }
        }
        await transport.shutdown()
        #expect(await pairing.value?.code == .cancelled)
    }
}
