import GlucoseProfile
import HealthDataSync
import Testing

/// `01 02 0a`: lower-case hex, space-separated (as ``SyncAction`` descriptions print bytes).
func hexText(_ bytes: [UInt8]) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined(separator: " ")
}

/// A Verio meter answering the state machine's actions from docs/verio-protocol.md: each command
/// gets the one-byte acknowledgement, then its framed reply; the host's `81` gets nothing.
struct VerioScript {
    /// Seconds since 2000-01-01 on the meter clock (nil: the meter refuses the clock).
    var clock: UInt32? = 0x2CE5_E580  // 2023-11-14 08:00:00
    var records: [(UInt16, VerioRecord)] = []
    var highest: UInt32 = 0
    var bonded = true
    /// Drop the link instead of answering the record with this number.
    var dropAt: UInt16?
    /// Every command packet written, as hex.
    var commands: [String] = []

    mutating func add(_ mgdL: UInt16, at seconds: UInt32, trailer: [UInt8] = [0, 0, 0, 0, 0]) {
        self.highest += 1
        self.records.append((UInt16(self.highest), VerioRecord(meterSeconds: seconds, mgdL: mgdL, trailer: trailer)))
    }

    /// The notifications a command packet causes.
    mutating func answer(_ packet: [UInt8]) -> [[UInt8]]? {
        self.commands.append(hexText(packet))
        guard let command = try? VerioCommand(bytes: packet) else { return [[0x81], VerioReply.refused(.notUnderstood).encoded()] }
        guard self.bonded else { return [VerioReply.refused(.notAllowed).encoded()] }
        let reply: VerioReply
        switch command {
        case .readClock: reply = self.clock.map { .data(VerioAnswer.clock(meterSeconds: $0).payload()) } ?? .refused(.notSupported)
        case .highestRecordNumber: reply = .data(VerioAnswer.highestRecordNumber(self.highest).payload())
        case .recordCount: reply = .data(VerioAnswer.recordCount(UInt16(self.records.count)).payload())
        case .record(let number):
            if number == self.dropAt { return nil }
            if let r = self.records.first(where: { $0.0 == number }) {
                reply = .data(VerioAnswer.record(number: number, r.1).payload())
            } else {
                reply = .refused(.notSupported)
            }
        }
        return [[0x81], reply.encoded()]
    }
}

extension Harness {
    static let verioServices = MeterServices(characteristics: [
        .init(uuid: .manufacturerName, service: .deviceInformationService, properties: .read),
        .init(uuid: Verio.commandCharacteristic, service: Verio.service, properties: .write),
        .init(uuid: Verio.replyCharacteristic, service: Verio.service, properties: .notify),
    ])

    /// Answers every action until the machine ends (or the script drops the link); returns the batches.
    mutating func runVerio(_ meter: inout VerioScript, services: MeterServices = Harness.verioServices) -> [SyncBatch] {
        var queue: [SyncEvent] = [.start]
        var batches: [SyncBatch] = []
        var stored: UInt16? = nil
        while !queue.isEmpty {
            let event = queue.removeFirst()
            for action in self.sm.handle(event, at: self.now) {
                switch action {
                case .connect: queue.append(.connected(services))
                case .pair:
                    meter.bonded = true
                    queue.append(.paired)
                case .read(let uuid) where uuid == .manufacturerName: queue.append(.readCompleted(uuid, Array("LifeScan".utf8)))
                case .read(let uuid): queue.append(.readFailed(uuid, TransportError(.characteristicNotFound, "none")))
                case .enableNotifications(let uuid): queue.append(.notificationsEnabled(uuid))
                case .write(let packet, let uuid) where uuid == Verio.commandCharacteristic:
                    if packet == [0x81] {
                        queue.append(.characteristicWritten(uuid))
                    } else if let replies = meter.answer(packet) {
                        queue += replies.map { .value(Verio.replyCharacteristic, $0) }
                        queue.append(.characteristicWritten(uuid))
                    } else {
                        queue.append(.disconnected(reason: "dropped"))
                    }
                case .write(_, let uuid): queue.append(.characteristicWritten(uuid))
                case .commit(let batch):
                    batches.append(batch)
                    self.lastBatch = batch
                    stored = batch.newHighWater ?? stored
                    let result = CommitResult(
                        inserted: [], duplicates: 0, sequenceResets: batch.meterReset ? 1 : 0,
                        meter: StoredMeter(
                            identity: batch.meter, features: nil, firstSeen: self.now, lastSeen: self.now, highWater: stored, epoch: 0,
                            lastSync: self.now, lastSyncResult: batch.session.result, readingCount: 0),
                        session: batch.session, highestInCurrentEpoch: stored)
                    queue.append(.committed(result))
                case .disconnect: queue.append(.disconnectCompleted)
                case .publish(.phaseChanged(_, let phase)): self.phases.append(phase.name)
                default: break
                }
            }
        }
        return batches
    }
}

@Suite struct VerioSyncTests {
    static let meter = Harness.meter

    @Test func commandsFollowTheDescription() {
        var h = Harness(highWater: nil)
        #expect(h.send(.start) == ["connect", "startTimer(operation, 30.0)"])
        #expect(h.send(.connected(Harness.verioServices)) == ["read(2a29)", "startTimer(operation, 10.0)"])
        #expect(h.sm.procedure == .verio)
        #expect(h.send(.readCompleted(.manufacturerName, Array("LifeScan".utf8))) == [
            "notify(af9df7a3-e595-11e3-96b4-0002a5d5c51b)", "startTimer(operation, 10.0)",
        ])
        #expect(h.sm.profile.name == "LifeScan OneTouch Verio")
        #expect(h.sm.profile.has(.verioProcedure))
        // Read clock `20 02`, framed: 01 02 09 00 03 20 02 03 crc.
        #expect(h.send(.notificationsEnabled(Verio.replyCharacteristic)) == [
            "write(01 02 09 00 03 20 02 03 d4 92 to af9df7a2-e595-11e3-96b4-0002a5d5c51b)", "startTimer(operation, 20.0)",
        ])
        #expect(h.sm.phase == .readingClock)
        // The meter's acknowledgement alone moves nothing.
        #expect(h.send(.value(Verio.replyCharacteristic, [0x81])) == [])
        // Clock 0x2ce5e580: the host acknowledges with 81, then asks for the highest record number.
        #expect(h.send(.value(Verio.replyCharacteristic, VerioReply.data([0x80, 0xE5, 0xE5, 0x2C]).encoded())) == [
            "write(81 to af9df7a2-e595-11e3-96b4-0002a5d5c51b)", "startTimer(operation, 10.0)",
        ])
        #expect(h.sm.clock?.meterTime == LocalDateTime(year: 2023, month: 11, day: 14, hour: 8))
        #expect(h.send(.characteristicWritten(Verio.commandCharacteristic)) == [
            "write(01 02 09 00 03 27 00 03 26 71 to af9df7a2-e595-11e3-96b4-0002a5d5c51b)", "startTimer(operation, 20.0)",
        ])
        #expect(h.sm.phase == .counting)
        h.send(.value(Verio.replyCharacteristic, VerioReply.data([0x02, 0, 0, 0]).encoded()))
        #expect(h.send(.characteristicWritten(Verio.commandCharacteristic)) == [
            "write(01 02 0a 00 03 0a 02 06 03 0a 3f to af9df7a2-e595-11e3-96b4-0002a5d5c51b)", "startTimer(operation, 20.0)",
        ])
        h.send(.value(Verio.replyCharacteristic, VerioReply.data([0x02, 0]).encoded()))
        // Two records, numbered 1 and 2: record 1 is `b3 01 00`.
        let first = hexText(VerioCommand.record(number: 1).encoded())
        #expect(first.hasPrefix("01 02 0a 00 03 b3 01 00 03"))
        #expect(h.send(.characteristicWritten(Verio.commandCharacteristic)) == [
            "write(\(first) to af9df7a2-e595-11e3-96b4-0002a5d5c51b)", "startTimer(operation, 20.0)",
        ])
        #expect(h.sm.phase == .receiving)
        #expect(h.sm.expected == 2)
    }

    @Test func firstSyncStoresEveryRecordWithItsBytesAndResolvedTime() throws {
        var meter = VerioScript()
        meter.add(120, at: 0x2CE5_E580 - 3600)  // 07:00 on the meter clock
        meter.add(95, at: 0x2CE5_E580 - 60)
        var h = Harness(highWater: nil)
        // The host is 10:00Z; the meter clock shows 08:00: skew −2 h, so 07:00 is 09:00Z.
        h.now = Instant(epochSeconds: 1_699_956_000)  // 10:00Z
        let batches = h.runVerio(&meter)
        guard case .done(.success) = h.sm.phase else { Issue.record("not done: \(h.sm.phase)"); return }
        let readings = batches.flatMap(\.readings)
        #expect(readings.map(\.sequenceNumber) == [1, 2])
        #expect(readings.map(\.mgdL) == [120, 95])
        #expect(readings[0].measurementBytes == VerioRecord(meterSeconds: 0x2CE5_E580 - 3600, mgdL: 120).encoded())
        #expect(readings[0].baseTime == LocalDateTime(year: 2023, month: 11, day: 14, hour: 7))
        #expect(readings[0].time.meterClockSkewSeconds == -7200)
        #expect(readings[0].instant == Instant(epochSeconds: 1_699_956_000 - 3600))
        #expect(readings[0].time.method == .meterClock)
        #expect(batches.last?.newHighWater == 2)
        #expect(batches.last?.procedure == .verio)
        #expect(batches.last?.clockSettable == false)
        #expect(h.sm.session?.expected == 2)
        // Commands: clock, highest, count, records 1 and 2 (acks are not commands).
        #expect(meter.commands.count == 5)
    }

    @Test func deltaSyncChecksTheHighWaterRecordThenAsksForTheRest() throws {
        var meter = VerioScript()
        for i in 0..<4 { meter.add(100 + UInt16(i), at: 0x2CE5_0000 + UInt32(i) * 60) }
        let mark = meter.records[1].1.encoded()
        var h = Harness(highWater: 2, highWaterRecord: mark)
        let batches = h.runVerio(&meter)
        #expect(batches.flatMap(\.readings).map(\.sequenceNumber) == [3, 4])
        #expect(batches.allSatisfy { !$0.meterReset })
        // clock, highest, count, the check of record 2, records 3 and 4.
        #expect(meter.commands.count == 6)
        #expect(meter.commands[3].hasPrefix("01 02 0a 00 03 b3 02 00"))
        #expect(!h.sm.resetDetected)
    }

    @Test func aDifferentHighWaterRecordIsAReset() throws {
        var meter = VerioScript()
        for i in 0..<3 { meter.add(150 + UInt16(i), at: 0x2D00_0000 + UInt32(i) * 60) }
        // The store holds record 2 with other content: the meter was cleared and refilled.
        var h = Harness(highWater: 2, highWaterRecord: VerioRecord(meterSeconds: 5, mgdL: 99).encoded())
        let batches = h.runVerio(&meter)
        #expect(h.sm.resetDetected)
        #expect(batches.first?.meterReset == true)
        #expect(batches.flatMap(\.readings).map(\.sequenceNumber) == [1, 2, 3])
        #expect(batches.last?.newHighWater == 3)
    }

    @Test func aLowerHighestNumberIsAReset() throws {
        var meter = VerioScript()
        meter.add(130, at: 0x2D00_0000)
        var h = Harness(highWater: 40, highWaterRecord: VerioRecord(meterSeconds: 5, mgdL: 99).encoded())
        let batches = h.runVerio(&meter)
        #expect(h.sm.resetDetected)
        #expect(batches.first?.meterReset == true)
        #expect(batches.flatMap(\.readings).map(\.sequenceNumber) == [1])
    }

    @Test func aMarkBelowTheOldestHeldRecordIsNotAReset() throws {
        var meter = VerioScript()
        for i in 0..<10 { meter.add(100 + UInt16(i), at: 0x2D00_0000 + UInt32(i) * 60) }
        meter.records.removeFirst(5)  // the meter holds 6…10 only
        var h = Harness(highWater: 3, highWaterRecord: VerioRecord(meterSeconds: 5, mgdL: 99).encoded())
        let batches = h.runVerio(&meter)
        #expect(!h.sm.resetDetected)
        #expect(batches.flatMap(\.readings).map(\.sequenceNumber) == [6, 7, 8, 9, 10])
    }

    @Test func nonGlucoseRecordsAreSkippedAndCounted() throws {
        var meter = VerioScript()
        meter.add(100, at: 0x2D00_0000)
        meter.add(7, at: 0x2D00_0100, trailer: [0, 0, 1, 0, 0])
        meter.add(110, at: 0x2D00_0200)
        var h = Harness(highWater: nil)
        let batches = h.runVerio(&meter)
        #expect(batches.flatMap(\.readings).map(\.sequenceNumber) == [1, 3])
        #expect(h.sm.anomalySummary.count(of: .notBloodGlucose) == 1)
        #expect(batches.last?.newHighWater == 3)
    }

    @Test func interruptedTransferKeepsTheContiguousMark() throws {
        var meter = VerioScript()
        for i in 0..<5 { meter.add(100 + UInt16(i), at: 0x2D00_0000 + UInt32(i) * 60) }
        meter.dropAt = 4
        var h = Harness(highWater: nil)
        let batches = h.runVerio(&meter)
        #expect(h.sm.session?.result == .interrupted)
        #expect(batches.flatMap(\.readings).map(\.sequenceNumber) == [1, 2, 3])
        #expect(batches.last?.newHighWater == 3)
    }

    @Test func notAllowedPairsOnceAndRepeatsTheCommand() throws {
        var meter = VerioScript()
        meter.add(100, at: 0x2D00_0000)
        meter.bonded = false
        var h = Harness(highWater: nil)
        let batches = h.runVerio(&meter)
        guard case .done(.success) = h.sm.phase else { Issue.record("not done: \(h.sm.phase)"); return }
        #expect(h.phases.contains("pairing"))
        #expect(batches.flatMap(\.readings).count == 1)
        // The refused clock read was sent again after pairing.
        #expect(meter.commands.prefix(2).allSatisfy { $0.hasPrefix("01 02 09 00 03 20 02") })
    }

    @Test func silentMeterIsAskedOnceMoreThenTimesOut() {
        var h = Harness(highWater: nil)
        h.send(.start)
        h.send(.connected(Harness.verioServices))
        h.send(.readCompleted(.manufacturerName, Array("LifeScan".utf8)))
        let clock = h.send(.notificationsEnabled(Verio.replyCharacteristic))
        #expect(h.send(.timerFired(.operation)) == clock)
        h.send(.timerFired(.operation))
        guard case .committing = h.sm.phase else { Issue.record("not committing: \(h.sm.phase)"); return }
        _ = h.close()
        guard case .failed(let failure) = h.sm.phase else { Issue.record("not failed"); return }
        #expect(failure.code == .timeout)
    }
}
