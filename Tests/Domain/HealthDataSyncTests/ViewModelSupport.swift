import GlucoseProfile
import HealthDataSync
import Testing
import TestSupport

/// Shared helpers for the view-model tests.
enum VM {
    static let meterA = MeterID("C0:26:DA:00:00:0A")
    static let meterB = MeterID("C0:26:DA:00:00:0B")

    static func daemon() -> DaemonInfo {
        DaemonInfo(
            version: "0.1.0", startedAt: Instant(epochMillis: 1_700_000_000_000),
            storage: StorageHealth(status: .ok, path: "/var/lib/sugard/readings.sqlite"))
    }

    static func viewModel(stats: ObservationStats = ObservationStats()) -> ViewModel {
        ViewModel(ViewState(daemon: daemon()), stats: stats)
    }

    static func reading(meter: MeterID = meterA, sequence: UInt16, mgdL: Double, at millis: Int64 = 1_700_000_600_000)
        -> Reading
    {
        Reading(
            meter: meter, sequenceNumber: sequence, measurementBytes: [0x03], contextBytes: nil,
            baseTime: LocalDateTime(year: 2023, month: 11, day: 14, hour: 23, minute: 23, second: 20),
            timeOffsetMinutes: 0, concentrationRaw: nil, unit: .kilogramsPerLiter, sampleType: 1, sampleLocation: 1,
            sensorStatus: nil, meal: nil, instant: Instant(epochMillis: millis),
            time: TimeResolution(
                method: .meterClock, zone: "Europe/Berlin", utcOffsetSeconds: 3600, meterClockSkewSeconds: 4,
                meterLocalTime: LocalDateTime(year: 2023, month: 11, day: 15, hour: 0, minute: 23, second: 20)),
            mgdL: mgdL, mmolL: nil, flags: [])
    }

    static func summary(sequence: UInt16, mgdL: Double) -> ReadingSummary {
        ReadingSummary(reading(sequence: sequence, mgdL: mgdL))
    }

    /// Runs `body`; nil when it did not finish within `seconds` (the body is then cancelled,
    /// which also ends any watcher it was waiting on).
    static func withDeadline<T: Sendable>(
        _ seconds: Double = 20, _ body: @escaping @Sendable () async -> T
    ) async -> T? {
        await withTaskGroup(of: T?.self) { group in
            group.addTask { await body() }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    /// The next message, or nil on end or after `seconds`.
    static func next<S: ObservableState>(_ watcher: Watcher<S>, within seconds: Double = 20) async -> WatchMessage<S>? {
        let message = await withDeadline(seconds) { await watcher.next() }
        return message ?? nil
    }

    /// Polls `condition` until it holds or `seconds` pass; returns whether it held.
    static func eventually(within seconds: Double = 20, _ condition: () -> Bool) async -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .milliseconds(Int(seconds * 1000)))
        while clock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return condition()
    }
}

/// A small deterministic generator (SplitMix64) for seeded randomized tests.
typealias SplitMix64 = SplitMix
