import GlucoseProfile
import Testing

/// Byte-level tests from docs/verio-protocol.md. Expected packets were computed independently of the
/// codec (Python `binascii.crc_hqx(frame, 0xFFFF)`, the CRC-16/CCITT-FALSE the description names).
@Suite struct VerioTests {
    @Test func crcIsCCITTFalse() {
        #expect(Verio.crc16(Array("123456789".utf8)) == 0x29B1)
        #expect(Verio.crc16([]) == 0xFFFF)
    }

    @Test func uuidsAreTheVendorService() {
        #expect(Verio.service.uuidString == "af9df7a1-e595-11e3-96b4-0002a5d5c51b")
        #expect(Verio.commandCharacteristic.uuidString == "af9df7a2-e595-11e3-96b4-0002a5d5c51b")
        #expect(Verio.replyCharacteristic.uuidString == "af9df7a3-e595-11e3-96b4-0002a5d5c51b")
        #expect(BluetoothUUID.isensTime.uuidString == "0000fff1-0000-1000-8000-00805f9b34fb")
        #expect(BluetoothUUID.isensTimeService.uuidString == "0000fff0-0000-1000-8000-00805f9b34fb")
    }

    @Test func commandsEncodeToTheDescribedPackets() throws {
        let cases: [(VerioCommand, String)] = [
            (.readClock, "01 02 09 00 03 20 02 03 d4 92"),
            (.highestRecordNumber, "01 02 09 00 03 27 00 03 26 71"),
            (.recordCount, "01 02 0a 00 03 0a 02 06 03 0a 3f"),
            (.record(number: 300), "01 02 0a 00 03 b3 2c 01 03 fc 39"),
        ]
        for (command, text) in cases {
            #expect(command.encoded() == hex(text), "\(command.name)")
            #expect(try VerioCommand(bytes: hex(text)) == command, "\(command.name)")
        }
    }

    @Test func repliesDecodePerCommand() throws {
        // Highest record number 10000 (0x2710), a uint32.
        let counter = try VerioReply(bytes: hex("01 02 0c 00 03 06 10 27 00 00 03 9a 8d"))
        guard case .data(let counterPayload) = counter else { Issue.record("not data: \(counter)"); return }
        #expect(try VerioCommand.highestRecordNumber.answer(payload: counterPayload) == .highestRecordNumber(10_000))
        // Record count 1000 (0x03e8), a uint16.
        let count = try VerioReply(bytes: hex("01 02 0a 00 03 06 e8 03 03 3d e8"))
        guard case .data(let countPayload) = count else { Issue.record("not data: \(count)"); return }
        #expect(try VerioCommand.recordCount.answer(payload: countPayload) == .recordCount(1000))
        // The same 4-byte payload read as the clock: the command sent decides, not the value.
        #expect(try VerioCommand.readClock.answer(payload: counterPayload) == .clock(meterSeconds: 10_000))
        // A payload of the wrong size for the command is an error, not a guess.
        #expect(throws: GlucoseProfileError.self) { try VerioCommand.recordCount.answer(payload: counterPayload) }
        #expect(throws: GlucoseProfileError.self) { try VerioCommand.highestRecordNumber.answer(payload: countPayload) }
    }

    @Test func recordDecodesTimeValueAndTrailer() throws {
        // 2023-11-14 08:00:00 is 0x2ce5e580 s after 2000-01-01; 120 mg/dL.
        let packet = hex("01 02 13 00 03 06 80 e5 e5 2c 78 00 00 00 00 00 00 03 07 8a")
        guard case .data(let payload) = try VerioReply(bytes: packet) else { Issue.record("not data"); return }
        let answer = try VerioCommand.record(number: 7).answer(payload: payload)
        let record = VerioRecord(meterSeconds: 0x2CE5_E580, mgdL: 120)
        #expect(answer == .record(number: 7, record))
        #expect(record.isBloodGlucose)
        #expect(record.dateTime == DateTime(year: 2023, month: 11, day: 14, hours: 8, minutes: 0, seconds: 0))
        #expect(VerioReply.data(record.encoded()).encoded() == packet)
        #expect(!VerioRecord(meterSeconds: 1, mgdL: 1, trailer: [0, 0, 1, 0, 0]).isBloodGlucose)
    }

    @Test func acknowledgementsAndRefusals() throws {
        #expect(try VerioReply(bytes: [0x81]) == .acknowledgement)
        #expect(try VerioReply(bytes: [0x83]) == .acknowledgement)
        #expect(throws: GlucoseProfileError.self) { try VerioReply(bytes: [0x01]) }
        #expect(try VerioReply(bytes: hex("01 02 08 00 03 07 03 d9 77")) == .refused(.notAllowed))
        #expect(VerioReply.refused(.notAllowed).encoded() == hex("01 02 08 00 03 07 03 d9 77"))
        #expect(Verio.acknowledgement == [0x81])
        // A refusal with bytes after its status is an error, not a refusal with the extra bytes dropped.
        #expect(throws: GlucoseProfileError.self) { try VerioReply(bytes: Verio.frame([0x07, 0x01])) }
    }

    @Test func damagedPacketsNameTheField() {
        func error(_ text: String) -> GlucoseProfileError? {
            do { _ = try VerioReply(bytes: hex(text)); return nil } catch { return error }
        }
        // CRC flipped.
        #expect(error("01 02 0a 00 03 06 e8 03 03 3d e9")?.field == "crc")
        // Length disagrees with the packet.
        #expect(error("01 02 0b 00 03 06 e8 03 03 3d e8")?.field == "length")
        // ETX missing (CRC recomputed would not help: the ETX check comes first).
        #expect(error("01 02 0a 00 03 06 e8 03 04 3d e8")?.field == "etx")
        // Wrong link byte, wrong STX.
        #expect(error("00 02 0a 00 03 06 e8 03 03 3d e8")?.field == "linkByte")
        #expect(error("01 03 0a 00 03 06 e8 03 03 3d e8")?.field == "stx")
        // Too short to be a packet.
        #expect(error("01 02 06 00 03")?.field == "verioPacket")
        // An unknown command is refused by the command decoder.
        #expect(throws: GlucoseProfileError.self) { try VerioCommand(bytes: Verio.frame([0x55])) }
    }

    @Test func meterSecondsRoundTripAndBounds() {
        let time = DateTime(year: 2024, month: 2, day: 29, hours: 23, minutes: 59, seconds: 59)
        let seconds = Verio.meterSeconds(time)
        #expect(seconds.map(Verio.dateTime(meterSeconds:)) == time)
        #expect(Verio.meterSeconds(DateTime(year: 2000, month: 1, day: 1)) == 0)
        #expect(Verio.meterSeconds(DateTime(year: 1999, month: 12, day: 31)) == nil)
        #expect(Verio.meterSeconds(DateTime(year: 0, month: 0, day: 0)) == nil)
    }

    @Test func isensTimeIsElevenBytes() throws {
        let time = DateTime(year: 2026, month: 12, day: 3, hours: 7, minutes: 45, seconds: 9)
        let bytes = hex("c0 03 01 00 ea07 0c 03 07 2d 09")
        #expect(ISensTime(dateTime: time).encoded() == bytes)
        #expect(try ISensTime(bytes: bytes) == ISensTime(dateTime: time))
        #expect(throws: GlucoseProfileError.self) { try ISensTime(bytes: hex("c0 03 02 00 ea07 0c 03 07 2d 09")) }
        #expect(throws: GlucoseProfileError.self) { try ISensTime(bytes: hex("c0 03 01 00 ea07 0d 03 07 2d 09")) }
    }
}
