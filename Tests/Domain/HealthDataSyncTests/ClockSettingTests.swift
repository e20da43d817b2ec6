import GlucoseProfile
import HealthDataSync
import Testing

/// Setting a meter's clock after the download (never before): Current Time 0x2A2B with write, and
/// the i-SENS vendor time 0xFFF1, at the state-machine level.
@Suite struct ClockSettingTests {
    static func services(cts: CharacteristicProperties? = [.read, .write, .notify], isens: Bool = false) -> MeterServices {
        var list: [DiscoveredCharacteristic] = [
            .init(uuid: .glucoseMeasurement, service: .glucoseService, properties: .notify),
            .init(uuid: .recordAccessControlPoint, service: .glucoseService, properties: [.write, .indicate]),
            .init(uuid: .manufacturerName, service: .deviceInformationService, properties: .read),
        ]
        if let cts { list.append(.init(uuid: .currentTime, service: .currentTimeService, properties: cts)) }
        if isens { list.append(.init(uuid: .isensTime, service: .isensTimeService, properties: .write)) }
        return MeterServices(characteristics: list)
    }

    /// Connect, DIS, the clock (when `clock` is given), subscriptions, count 1, one record (2024-06-14
    /// 08:00 on the meter), RACP success. Returns the actions of the RACP success.
    static func download(
        _ h: inout Harness, services: MeterServices, manufacturer: String = "Acme", clock: LocalDateTime?
    ) -> [String] {
        h.send(.start)
        h.send(.connected(services))
        let afterDIS = h.send(.readCompleted(.manufacturerName, Array(manufacturer.utf8)))
        if let clock {
            #expect(afterDIS.first == "read(2a2b)")
            h.send(.readCompleted(.currentTime, currentTimeBytes(clock)))
        }
        h.send(.notificationsEnabled(.glucoseMeasurement))
        h.send(.notificationsEnabled(.recordAccessControlPoint))
        _ = h.racp([0x05, 0x00, 0x01, 0x00])
        h.send(.value(.glucoseMeasurement, measurementBytes(seq: 1, 2024, 6, 14, 8, 0, sfloat: mgdl(110))))
        return h.racp([0x06, 0x00, 0x01, 0x01])
    }

    // The harness host clock is 2024-06-15T10:00:00Z, a Saturday; the zone is UTC.
    static let hostLocal = LocalDateTime(year: 2024, month: 6, day: 15, hour: 10)

    @Test func aCTSClockTenMinutesFastIsSetAfterTheDownloadAndReadBack() throws {
        var h = Harness()
        let actions = Self.download(&h, services: Self.services(), clock: LocalDateTime(year: 2024, month: 6, day: 15, hour: 10, minute: 10))
        // Nothing committed yet beyond the chunk rules; the clock write comes first, then the read-back.
        // Current Time: 2024 (e8 07), June 15, 10:00:00, Saturday (6), fractions 0, adjust reason manual (01).
        #expect(actions.contains("write(e8 07 06 0f 0a 00 00 06 00 01 to 2a2b)"))
        #expect(h.sm.phase == .settingClock)
        #expect(!actions.contains { $0.hasPrefix("commit(") && !$0.contains("chunk") })
        #expect(h.send(.characteristicWritten(.currentTime)).first == "read(2a2b)")
        let end = h.send(.readCompleted(.currentTime, currentTimeBytes(Self.hostLocal)))
        #expect(end.contains { $0.hasPrefix("commit(") })
        let batch = try #require(h.committedBatch)
        let clock = try #require(batch.session.clockSet)
        #expect(clock.method == .currentTime)
        #expect(clock.skewBeforeSeconds == 600)
        #expect(clock.skewAfterSeconds == 0)
        #expect(clock.written == Self.hostLocal)
        #expect(batch.clockSettable == true)
        #expect(batch.procedure == .gls)
        // The record downloaded before the write keeps the skew measured at the start.
        let readings = h.lastBatch?.readings ?? []
        #expect(readings.allSatisfy { $0.time.meterClockSkewSeconds == 600 })
        _ = h.close()
        #expect(h.sm.session?.clockSet == clock)
        guard case .done(.success) = h.sm.phase else { Issue.record("not done: \(h.sm.phase)"); return }
    }

    @Test func aClockWithinTheToleranceIsLeftAlone() {
        var h = Harness()
        let actions = Self.download(&h, services: Self.services(), clock: LocalDateTime(year: 2024, month: 6, day: 15, hour: 10, minute: 1, second: 59))
        #expect(!actions.contains { $0.contains("to 2a2b") })
        #expect(actions.contains { $0.hasPrefix("commit(") })
        #expect(h.committedBatch?.session.clockSet == nil)
    }

    @Test func setMeterClockFalseNeverWrites() {
        var h = Harness(configuration: SyncConfiguration(setMeterClock: false))
        let actions = Self.download(&h, services: Self.services(), clock: LocalDateTime(year: 2019, month: 1, day: 1))
        #expect(!actions.contains { $0.contains("to 2a2b") })
        #expect(h.committedBatch?.session.clockSet == nil)
        // It still says the clock could be set.
        #expect(h.committedBatch?.clockSettable == true)
    }

    @Test func aReadOnlyCurrentTimeIsNotWritten() {
        var h = Harness()
        let actions = Self.download(&h, services: Self.services(cts: [.read, .notify]), clock: LocalDateTime(year: 2019, month: 1, day: 1))
        #expect(!actions.contains { $0.contains("to 2a2b") })
        #expect(h.committedBatch?.clockSettable == false)
    }

    @Test func anInterruptedDownloadDoesNotSetTheClock() {
        var h = Harness()
        h.send(.start)
        h.send(.connected(Self.services()))
        h.send(.readCompleted(.manufacturerName, Array("Acme".utf8)))
        h.send(.readCompleted(.currentTime, currentTimeBytes(LocalDateTime(year: 2019, month: 1, day: 1))))
        h.send(.notificationsEnabled(.glucoseMeasurement))
        h.send(.notificationsEnabled(.recordAccessControlPoint))
        _ = h.racp([0x05, 0x00, 0x02, 0x00])
        h.send(.value(.glucoseMeasurement, measurementBytes(seq: 1, 2024, 6, 14, 8, 0, sfloat: mgdl(110))))
        let actions = h.send(.disconnected(reason: "gone"))
        #expect(!actions.contains { $0.contains("to 2a2b") })
        #expect(h.committedBatch?.session.clockSet == nil)
    }

    @Test func aTimeZoneChangeSetsTheNewLocalTimeAndSaysSo() throws {
        // The meter still shows the old zone's time, an hour ahead of the new local time.
        var h = Harness()
        let actions = Self.download(&h, services: Self.services(), clock: LocalDateTime(year: 2024, month: 6, day: 15, hour: 11, second: 20))
        // Adjust reason: manual update (bit 0) and time-zone change (bit 2).
        #expect(actions.contains("write(e8 07 06 0f 0a 00 00 06 00 05 to 2a2b)"))
        h.send(.characteristicWritten(.currentTime))
        h.send(.readCompleted(.currentTime, currentTimeBytes(Self.hostLocal)))
        let batch = try #require(h.committedBatch)
        #expect(batch.session.clockSet?.skewBeforeSeconds == 3620)
        // The record of this download is resolved with the skew measured before the write: its time
        // is the moment it was taken (08:00 on the meter = 06:59:40 here).
        let reading = try #require(batch.readings.first)
        #expect(reading.instant == Instant(epochSeconds: 1_718_348_380))
    }

    @Test func anISensMeterGetsItsVendorTimeWhenItsClockCannotBeRead() throws {
        var h = Harness()
        let actions = Self.download(&h, services: Self.services(cts: nil, isens: true), manufacturer: "i-SENS", clock: nil)
        // c0 03 01 00, year LE, month, day, hours, minutes, seconds: the local time.
        #expect(actions.contains("write(c0 03 01 00 e8 07 06 0f 0a 00 00 to fff1)"))
        #expect(h.sm.phase == .settingClock)
        let end = h.send(.characteristicWritten(.isensTime))
        #expect(end.contains { $0.hasPrefix("commit(") })
        let clock = try #require(h.committedBatch?.session.clockSet)
        #expect(clock.method == .isens)
        #expect(clock.skewBeforeSeconds == nil)
        #expect(clock.skewAfterSeconds == nil)
        #expect(h.committedBatch?.clockSettable == true)
    }

    @Test func fff1OnAMeterThatIsNotISensIsNeverWritten() {
        var h = Harness()
        let actions = Self.download(&h, services: Self.services(cts: nil, isens: true), manufacturer: "Acme", clock: nil)
        #expect(!actions.contains { $0.contains("to fff1") })
        #expect(h.committedBatch?.clockSettable == false)
    }

    @Test func aFailedClockWriteStillEndsTheDownloadAsSuccess() throws {
        var h = Harness()
        _ = Self.download(&h, services: Self.services(), clock: LocalDateTime(year: 2019, month: 1, day: 1))
        let end = h.send(.characteristicWriteFailed(.currentTime, TransportError(.attError, "write not permitted", attError: 0x03)))
        #expect(end.contains { $0.hasPrefix("commit(") })
        #expect(h.committedBatch?.session.result == .success)
        #expect(h.committedBatch?.session.clockSet == nil)
        #expect(h.sm.anomalySummary.count(of: .clockNotSet) == 1)
    }
}
