import HealthDataSync
import Testing

@testable import GlucoseStore

/// The insert path binds text formatted on the stack; it must be the bytes the String forms give.
@Suite struct BindTests {
    @Test func isoTextBindsTheSameTextAsIsoString() throws {
        let dir = try TempDirectory()
        let db = try Connection(path: dir.database)
        let samples = [
            LocalDateTime(year: 2025, month: 11, day: 24, hour: 6, minute: 58, second: 0),
            LocalDateTime(year: 1, month: 1, day: 1, hour: 0, minute: 0, second: 0),
            LocalDateTime(year: 12345, month: 13, day: 99, hour: 24, minute: 60, second: 61),
            LocalDateTime(year: -44, month: -3, day: 0, hour: -1, minute: 7, second: -59),
            LocalDateTime(year: Int.max, month: -Int.max, day: 9, hour: 10, minute: 100, second: 5),
        ]
        for sample in samples {
            let text = try db.withStatement("SELECT ?") { (s) throws(StoreError) -> String? in
                try s.bind(isoText: sample, at: 1)
                _ = try s.step("select")
                return s.optionalText(0)
            }
            #expect(text == sample.isoString)
        }
    }
}
