import JSON
import Varlink

/// `sugar-bench json`: the worst-case 1 MiB request (``JSONWorstCase/request(keys:limit:)``) through the
/// production parser, with no element bound (the linear cost of every byte and key) and with the Varlink
/// server's default limits (how early it is refused).
enum JSONBenchmark {
    static func run(keys: Int, rounds: Int) -> Int32 {
        let message = JSONWorstCase.request(keys: keys)
        let serverLimits = VarlinkServerConfiguration(listen: .path("/unused")).parseLimits
        var unbounded = serverLimits
        unbounded.maxElements = nil
        unbounded.cpuBudget = nil
        var parseNanos: [Int64] = []
        var rejectNanos: [Int64] = []
        var rejectedAt = -1
        var members = 0
        let clock = ContinuousClock()
        for _ in 0..<rounds {
            let start = clock.now
            let value = try? JSONValue(parsing: message, limits: unbounded)
            parseNanos.append(nanos(clock.now - start))
            members = value?["parameters"]?.objectValue?.count ?? -1
            let again = clock.now
            do {
                _ = try JSONValue(parsing: message, limits: serverLimits)
            } catch {
                rejectedAt = error.offset
            }
            rejectNanos.append(nanos(clock.now - again))
        }
        parseNanos.sort()
        rejectNanos.sort()
        let median = parseNanos[parseNanos.count / 2]
        let result: JSONValue = [
            "bytes": .int(Int64(message.count)),
            "keys": .int(Int64(keys)),
            "parametersMembers": .int(Int64(members)),
            "rounds": .int(Int64(rounds)),
            "parseMillisMedian": .double(Double(median) / 1e6),
            "parseMillisMax": .double(Double(parseNanos.last ?? 0) / 1e6),
            "megabytesPerSecond": .double(Double(message.count) / (Double(median) / 1e9) / 1e6),
            "serverLimitRejectMillisMedian": .double(Double(rejectNanos[rejectNanos.count / 2]) / 1e6),
            "serverLimitRejectedAtByte": .int(Int64(rejectedAt)),
        ]
        writeStdout(result.serialized() + "\n")
        return members > keys ? 0 : 1
    }

    static func nanos(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
