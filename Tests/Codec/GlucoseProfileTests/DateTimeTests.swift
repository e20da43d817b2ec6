import GlucoseProfile
import Testing

@Suite struct DateTimeTests {
    @Test func isoStringIsLocalWithoutZone() throws {
        let time = try DateTime(bytes: hex("e307 02 1b 0b 0a 1e"))
        #expect(time.isoString == "2019-02-27T11:10:30")
        #expect(time.encoded() == hex("e307 02 1b 0b 0a 1e"))
        #expect(DateTime(year: 0, month: 0, day: 0).isoString == "0000-00-00T00:00:00")
    }

    @Test(arguments: [
        ("e307 0d 01 00 00 00", 2, "dateTime.month", 13), ("e307 01 01 18 00 00", 4, "dateTime.hours", 24),
        ("e307 01 01 00 3c 00", 5, "dateTime.minutes", 60), ("e307 01 01 00 00 3c", 6, "dateTime.seconds", 60),
        ("e307 02 1d 00 00 00", 3, "dateTime.day", 29), ("2d06 01 01 00 00 00", 0, "dateTime.year", 1581),
        ("e307 04 1f 00 00 00", 3, "dateTime.day", 31),
    ])
    func outOfRangeFieldsAreReportedWithOffset(bytes: String, offset: Int, field: String, value: Int) {
        #expect {
            try DateTime(bytes: hex(bytes))
        } throws: { error in
            guard let error = error as? GlucoseProfileError, case .outOfRange(let got, _) = error.reason else { return false }
            return error.offset == offset && error.field == field && got == value
        }
    }

    @Test func lenientDecodingKeepsRawFields() throws {
        let time = try DateTime(bytes: hex("e307 0d 01 00 00 00"), options: .lenientDateTime)
        #expect(time.month == 13)
        #expect(!time.isValid)
        #expect(throws: GlucoseProfileError.self) { try time.validated() }
    }

    @Test func unknownZeroFieldsAreAllowed() throws {
        let time = try DateTime(bytes: hex("0000 00 00 0c 00 00"))
        #expect(time.isValid)
        #expect(!time.isDateKnown)
        #expect(time.adding(minutes: 10) == nil)
        // 29 February with an unknown year is accepted; with a known non-leap year it is not.
        #expect(DateTime(year: 0, month: 2, day: 29).isValid)
        #expect(!DateTime(year: 2019, month: 2, day: 29).isValid)
    }

    @Test func addingMinutesCarriesAcrossDaysMonthsYearsAndLeapDays() {
        let newYearsEve = DateTime(year: 2019, month: 12, day: 31, hours: 23, minutes: 30, seconds: 15)
        #expect(newYearsEve.adding(minutes: 60) == DateTime(year: 2020, month: 1, day: 1, hours: 0, minutes: 30, seconds: 15))
        let leap = DateTime(year: 2020, month: 2, day: 28, hours: 23, minutes: 0)
        #expect(leap.adding(minutes: 60) == DateTime(year: 2020, month: 2, day: 29, hours: 0, minutes: 0))
        let nonLeap = DateTime(year: 2100, month: 2, day: 28, hours: 23, minutes: 0)
        #expect(nonLeap.adding(minutes: 60) == DateTime(year: 2100, month: 3, day: 1, hours: 0, minutes: 0))
        let march = DateTime(year: 2024, month: 3, day: 1, hours: 0, minutes: 10)
        #expect(march.adding(minutes: -20) == DateTime(year: 2024, month: 2, day: 29, hours: 23, minutes: 50))
        #expect(march.adding(minutes: -(366 * 1440)) == DateTime(year: 2023, month: 3, day: 1, hours: 0, minutes: 10))
        #expect(march.adding(minutes: Int(Int16.max)) == DateTime(year: 2024, month: 3, day: 23, hours: 18, minutes: 17))
        #expect(DateTime(year: 9999, month: 12, day: 31, hours: 23).adding(minutes: 60) == nil)
    }

    @Test func orderingComparesFieldsFromYearDown() {
        let a = DateTime(year: 2019, month: 2, day: 27, hours: 11, minutes: 10, seconds: 30)
        let b = DateTime(year: 2019, month: 2, day: 27, hours: 11, minutes: 10, seconds: 31)
        let c = DateTime(year: 2019, month: 3, day: 1)
        #expect(a < b && b < c && !(c < a))
    }

    @Test func currentTimeDecodesAndRoundTrips() throws {
        let bytes = hex("e307 02 1b 0b 0a 1e 03 80 01")
        let time = try CurrentTime(bytes: bytes)
        #expect(time.dateTime.isoString == "2019-02-27T11:10:30")
        #expect(time.dayOfWeek == 3)
        #expect(time.fractions256 == 0x80)
        #expect(time.adjustReason == 1)
        #expect(time.encoded() == bytes)
        #expect(throws: GlucoseProfileError.self) { try CurrentTime(bytes: Array(bytes.dropLast())) }
        #expect(throws: GlucoseProfileError.self) { try CurrentTime(bytes: bytes + [0]) }
    }

    @Test func uuidForms() {
        #expect(BluetoothUUID.glucoseMeasurement.uuidString == "00002a18-0000-1000-8000-00805f9b34fb")
        #expect(BluetoothUUID(string: "00002A52-0000-1000-8000-00805F9B34FB")?.uuid16 == 0x2A52)
        #expect(BluetoothUUID(string: "c4dea010-5a9d-11e9-8647-d663bd873d93")?.uuid16 == nil)
        #expect(BluetoothUUID.glucoseFeature.description == "2A51" && BluetoothUUID.glucoseFeature.shortString == "2a51")
        #expect(BluetoothUUID(string: "+2a1") == nil && BluetoothUUID(string: "2a1") == nil)
        let vendor = BluetoothUUID(string: "c4dea010-5a9d-11e9-8647-d663bd873d93")!
        let sorted = [vendor, .recordAccessControlPoint, .glucoseService, BluetoothUUID(uuid32: 0x1234_5678)].sorted()
        #expect(sorted.map(\.uuidString) == sorted.map(\.uuidString).sorted())
    }
}
