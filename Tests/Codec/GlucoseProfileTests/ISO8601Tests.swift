import GlucoseProfile
import Testing

/// The one ISO 8601 instant formatter and parser (`CivilCalendar`), which the daemon's replies, the
/// logs, the exports, sugarctl's `--since`/`--until` and the capture timestamps use.
@Suite struct ISO8601Tests {
    @Test func instantsFormatInUTCWithFractionsOnlyWhenAsked() {
        #expect(CivilCalendar.isoUTC(epochMillis: 1_551_265_830_000) == "2019-02-27T11:10:30Z")
        #expect(CivilCalendar.isoUTC(epochMillis: 1_551_265_830_042) == "2019-02-27T11:10:30.042Z")
        #expect(CivilCalendar.isoUTC(epochMillis: -1) == "1969-12-31T23:59:59.999Z")
        #expect(CivilCalendar.isoUTC(secondsSinceEpoch: 0, fraction: 1234, fractionDigits: 6) == "1970-01-01T00:00:00.001234Z")
        #expect(CivilCalendar.isoString(epochMillis: 1_551_265_830_000, utcOffsetSeconds: -12600) == "2019-02-27T07:40:30-03:30")
        #expect(CivilCalendar.isoString(epochMillis: 1_551_265_830_000, utcOffsetSeconds: 3600) == "2019-02-27T12:10:30+01:00")
    }

    @Test func parsesInstantsWithAZoneAndBareDates() {
        #expect(CivilCalendar.parseISOInstant("2019-02-27T11:10:30Z") == 1_551_265_830_000)
        #expect(CivilCalendar.parseISOInstant("2019-02-27t11:10:30.042z") == 1_551_265_830_042)
        #expect(CivilCalendar.parseISOInstant("2019-02-27 12:10:30,5+01:00") == 1_551_265_830_500)
        #expect(CivilCalendar.parseISOInstant("2019-02-27T07:40-0330") == 1_551_265_800_000)
        #expect(CivilCalendar.parseISOInstant("2019-02-27T13:10:30+02") == 1_551_265_830_000)
        #expect(CivilCalendar.parseISOInstant("2024-03-31") == 1_711_843_200_000)
    }

    @Test(arguments: [
        "2019-02-27T11:10:30", "2019-02-29", "2019-13-01", "2019-02-27T24:00Z", "2019-02-27T11:10:30.Z", "2019-02-27T11:10Z+",
        "2019-02-27T11:10+24:00", "19-02-27", "2019-02-27Z", "",
    ])
    func refusesTimesWithoutAZoneAndImpossibleDates(text: String) {
        #expect(CivilCalendar.parseISOInstant(text) == nil)
    }

    @Test func formattedInstantsParseBack() {
        for millis: Int64 in [0, 1, 999, 1_551_265_830_042, 253_402_300_799_000, -62_135_596_800_000] {
            #expect(CivilCalendar.parseISOInstant(CivilCalendar.isoUTC(epochMillis: millis)) == millis, "\(millis)")
        }
    }
}
