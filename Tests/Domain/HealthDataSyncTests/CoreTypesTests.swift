import GlucoseProfile
import HealthDataSync
import Testing

@Suite struct CoreTypesTests {
    @Test(arguments: [
        ("c0:26:da:01:02:03", "C0:26:DA:01:02:03"),
        ("C0-26-DA-01-02-03", "C0:26:DA:01:02:03"),
        ("c026da010203", "C0:26:DA:01:02:03"),
        ("/org/bluez/hci0/dev_C0_26_DA_01_02_03", "C0:26:DA:01:02:03"),
        ("replay-meter", "replay-meter"),
    ])
    func meterIDsAreCanonical(input: String, expected: String) {
        #expect(MeterID(input).rawValue == expected)
    }

    @Test func calendarArithmeticCarriesAcrossYearsAndLeapDays() {
        let t = LocalDateTime(year: 2023, month: 12, day: 31, hour: 23, minute: 30)
        #expect(t.adding(seconds: 3600).isoString == "2024-01-01T00:30:00")
        let leap = LocalDateTime(year: 2024, month: 2, day: 28, hour: 12)
        #expect(leap.adding(seconds: 86_400).isoString == "2024-02-29T12:00:00")
        #expect(LocalDateTime(year: 2023, month: 2, day: 29).isValid == false)
        #expect(LocalDateTime(year: 2019, month: 13, day: 1).isValid == false)
        #expect(LocalDateTime(year: 1970, month: 1, day: 1).secondsSinceEpoch == 0)
        #expect(LocalDateTime(year: 2019, month: 2, day: 27, hour: 11, minute: 10, second: 30).secondsSinceEpoch == 1_551_265_830)
        #expect(LocalDateTime(secondsSinceEpoch: -1).isoString == "1969-12-31T23:59:59")
    }

    @Test func isoStringPadsEachFieldAndKeepsSignsAndLongYears() {
        #expect(LocalDateTime(year: 7, month: 1, day: 2, hour: 3, minute: 4, second: 5).isoString == "0007-01-02T03:04:05")
        #expect(LocalDateTime(year: -5, month: 3, day: 1).isoString == "-0005-03-01T00:00:00")
        #expect(LocalDateTime(year: 12345, month: 12, day: 31, hour: 23, minute: 59, second: 7).isoString == "12345-12-31T23:59:07")
        #expect(LocalDateTime(year: 2024, month: -1, day: 100, hour: 0, minute: 60, second: -30).isoString == "2024--01-100T00:60:-30")
        #expect(LocalDateTime(year: Int.min, month: 1, day: 1).isoString.hasPrefix("-9223372036854775808-01-01T"))
    }

    @Test func instantsFormatAsISO8601() {
        let i = Instant(epochMillis: 1_551_265_830_000)
        #expect(i.isoString == "2019-02-27T11:10:30Z")
        #expect(i.isoString(utcOffsetSeconds: 3600) == "2019-02-27T12:10:30+01:00")
        #expect(i.isoString(utcOffsetSeconds: -12600) == "2019-02-27T07:40:30-03:30")
        #expect(Instant(epochMillis: 1_551_265_830_042).isoString == "2019-02-27T11:10:30.042Z")
    }

    @Test func bluetoothUUIDs() throws {
        #expect(BluetoothUUID(0x2A18).uuidString == "00002a18-0000-1000-8000-00805f9b34fb")
        #expect(BluetoothUUID(string: "0x2A18") == .glucoseMeasurement)
        #expect(BluetoothUUID(string: "00002A52-0000-1000-8000-00805F9B34FB") == .recordAccessControlPoint)
        #expect(BluetoothUUID.glucoseFeature.shortString == "2a51")
        let custom = try #require(BluetoothUUID(string: "00000000-0002-11e2-9e96-0800200c9a66"))
        #expect(custom.uuid16 == nil)
        #expect(custom.shortString == "00000000-0002-11e2-9e96-0800200c9a66")
        #expect(BluetoothUUID(string: "xyz") == nil)
    }

    @Test func flagNamesRoundTrip() {
        let flags: ReadingFlags = [.lo, .controlSolution, .timeFault]
        #expect(flags.names == ["controlSolution", "lo", "timeFault"])
        #expect(ReadingFlags(names: flags.names) == flags)
    }
}
