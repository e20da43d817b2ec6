import Glibc
import GlucoseProfile
import HealthDataSync
import PacketCapture
import ProcessKit
import ReplayTransport
import SystemIO

/// The simulated meters of `simulate_meters = N` (a testing aid for soak tests and load
/// experiments): N meters on the replay transport that take readings on a fixed timetable.
///
/// Meter `k` (0-based) takes its reading `i` (1-based, sequence number `i`) at
/// ``readingTime(meter:index:start:intervalSeconds:meters:)`` with the value
/// ``value(meter:index:)``, up to `simulate_stop`. Everything follows from the configuration and
/// the wall clock, so a daemon killed and restarted rebuilds meters holding the same records, and
/// a test can compute every reading the meters ever took. Clocks and base times are UTC.
public enum SimulatedFleet {
    /// Meter `k`'s Bluetooth address: `D4:A0:5E:00:00:kk`.
    public static func address(meter k: Int) -> BluetoothAddress {
        BluetoothAddress(rawValue: 0xD4_A0_5E_00_00_00 | UInt64(k & 0xFF))
    }

    /// Meter `k`'s identifier as stored.
    public static func meterID(_ k: Int) -> MeterID { MeterID(Self.address(meter: k).description) }

    /// Unix time in milliseconds of meter `k`'s reading `i`: one reading per interval, meters
    /// staggered across the interval so their syncs do not all start at once.
    public static func readingTime(meter k: Int, index i: Int, start: Int64, intervalSeconds: Int, meters: Int) -> Int64 {
        let interval = Int64(intervalSeconds) * 1000
        return start * 1000 + Int64(i) * interval + Int64(k) * interval / Int64(max(1, meters))
    }

    /// The mg/dL value of meter `k`'s reading `i`.
    public static func value(meter k: Int, index i: Int) -> Int { 70 + (k * 37 + i * 53) % 160 }

    /// The meter's base time (UTC wall clock) for a Unix time in milliseconds.
    public static func baseTime(unixMillis: Int64) -> DateTime {
        let t = LocalDateTime(secondsSinceEpoch: unixMillis / 1000)
        return DateTime(
            year: UInt16(t.year), month: UInt8(t.month), day: UInt8(t.day), hours: UInt8(t.hour),
            minutes: UInt8(t.minute), seconds: UInt8(t.second))
    }

    /// How many readings meter `k` has taken by `nowMillis` (capped at `stop`).
    public static func readingCount(
        meter k: Int, at nowMillis: Int64, start: Int64, stop: Int64?, intervalSeconds: Int, meters: Int
    ) -> Int {
        let limit = min(nowMillis, (stop ?? Int64.max / 2_000) * 1000)
        var low = 0
        var high = Int(max(0, (limit - start * 1000) / (Int64(intervalSeconds) * 1000))) + 1
        // Largest n with readingTime(n) <= limit.
        while low < high {
            let mid = (low + high + 1) / 2
            if Self.readingTime(meter: k, index: mid, start: start, intervalSeconds: intervalSeconds, meters: meters) <= limit {
                low = mid
            } else {
                high = mid - 1
            }
        }
        return low
    }

    /// Meter `k`'s personality: even meters need no pairing (mg/dL meter with CTS clock), odd ones
    /// bond with just works (Date Time clock, larger MTU).
    public static func personality(meter k: Int) -> MeterPersonality {
        MeterPersonality(
            address: Self.address(meter: k), name: "SIM-\(k)", manufacturer: "sugard simulator",
            model: k % 2 == 0 ? "fleet-open" : "fleet-bonded", serialNumber: "SIM\(k)", firmware: "1.0",
            hasContext: k % 2 == 1,
            clock: k % 2 == 0
                ? .currentTime(DateTime(year: 2026, month: 1, day: 1, hours: 0, minutes: 0, seconds: 0))
                : .dateTime(DateTime(year: 2026, month: 1, day: 1, hours: 0, minutes: 0, seconds: 0)),
            pairing: k % 2 == 0 ? .none : .justWorks, mtu: k % 2 == 0 ? 23 : 185, startHandle: 1,
            glucoseGap: UInt16(k % 5))
    }

    /// Meter `k`'s reading `i` as the meter sends it (sequence number 0: the simulator numbers records).
    static func measurement(meter k: Int, index i: Int, start: Int64, intervalSeconds: Int, meters: Int) -> GlucoseMeasurement {
        let at = Self.readingTime(meter: k, index: i, start: start, intervalSeconds: intervalSeconds, meters: meters)
        return GlucoseMeasurement(
            sequenceNumber: 0, baseTime: Self.baseTime(unixMillis: at),
            concentration: SFloat(rawValue: 0xB000 | UInt16(Self.value(meter: k, index: i))),
            unit: .kilogramsPerLiter, type: .capillaryPlasma, sampleLocation: .finger)
    }

    /// The wall clock now, in Unix milliseconds.
    static func nowMillis() -> Int64 { wallClockMilliseconds() }

    /// The transport and the background task that adds each reading when it falls due.
    static func parts(config: DaemonConfig, logger: Logger) -> DaemonParts {
        let meters = config.simulateMeters
        let interval = config.demoInterval
        let start = config.simulateStart ?? Self.nowMillis() / 1000
        let stop = config.simulateStop
        let now = Self.nowMillis()
        var simulators: [MeterSimulator] = []
        for k in 0..<meters {
            var simulator = MeterSimulator(personality: Self.personality(meter: k))
            let count = Self.readingCount(meter: k, at: now, start: start, stop: stop, intervalSeconds: interval, meters: meters)
            for i in stride(from: 1, through: count, by: 1) {
                simulator.addRecord(Self.measurement(meter: k, index: i, start: start, intervalSeconds: interval, meters: meters))
            }
            simulators.append(simulator)
        }
        let transport = ReplayTransport(
            meters: simulators,
            // 20 ms per GATT operation and report packet by default: a sync takes a few hundred
            // milliseconds, long enough for a kill to land in the middle of one.
            options: ReplayTransport.Options(
                operationDelay: .microseconds(config.simulateDelayMicros), adapterName: "simulated",
                clock: { Self.baseTime(unixMillis: Self.nowMillis()) }))
        logger.notice("simulating \(meters) meter(s), a reading each every \(interval) s; no Bluetooth used")
        let background: @Sendable (DaemonRuntime) async -> Void = { runtime in
            await withTaskGroup(of: Void.self) { group in
                for k in 0..<meters {
                    group.addTask {
                        let id = Self.meterID(k)
                        var next = (transport.simulator(id)?.records.count ?? 0) + 1
                        while !Task.isCancelled {
                            let due = Self.readingTime(meter: k, index: next, start: start, intervalSeconds: interval, meters: meters)
                            if let stop, due > stop * 1000 { return }
                            let wait = due - Self.nowMillis()
                            if wait > 0 {
                                do { try await Task.sleep(for: .milliseconds(wait)) } catch { return }
                            }
                            let seq = transport.addReading(
                                Self.measurement(meter: k, index: next, start: start, intervalSeconds: interval, meters: meters),
                                to: id)
                            runtime.logger.debug("simulated meter \(k) took reading #\(seq.map(String.init) ?? "?")")
                            next += 1
                        }
                    }
                }
            }
        }
        return DaemonParts(transport: transport, background: background, shutdown: { await transport.shutdown() })
    }
}
