import GlucoseStore
import GlucoseStoreFixtures
import Glibc
import HealthDataSync
import JSON
import Testing
import TestSupport

/// Issue 39: exports and reports stream, so memory is flat at any size. A store of 200 000
/// readings (`sugar-bench ingest`'s synthetic meters) is exported by the built sugarctl from the
/// built sugard as CSV and as JSON without --limit: every reading comes (count, first and last
/// reading id), and the peak RSS (VmHWM) of both processes stays under the bounds
/// (sugarctl 32 MB, sugard 64 MB; before streaming a 100 000-row CSV export took sugarctl to
/// 538 MB and sugard to 175 MB). A report over ten years of it stays under 64 MB in both, and its
/// page is bounded and says what it leaves out. Figures for the release build: `sugar-bench scale`.
@Suite(.serialized) struct ExportMemoryTests {
    static let readings = 200_000
    static let sugarctlBound = 32 * 1_048_576
    static let sugardBound = 64 * 1_048_576

    /// VmHWM of a process, in bytes (nil once it is gone).
    static func peakResident(_ pid: pid_t) -> Int? {
        let status = readText("/proc/\(pid)/status")
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            return Int(line.filter(\.isNumber)).map { $0 * 1024 }
        }
        return nil
    }

    /// Runs sugarctl to its end, its output in `dir/name.out`; its last VmHWM seen (polled every
    /// 2 ms: the high-water mark only grows) and its exit.
    static func sugarctl(_ arguments: [String], name: String, dir: TempDirectory, socket: String) async throws
        -> (peak: Int, end: Termination?, child: ChildProcess)
    {
        let env = ["PATH": "/usr/bin:/bin", "HOME": dir.path, "TZ": "UTC", "SUGARD_SOCKET": socket, "SUGARCTL_TIMEOUT": "60"]
        let child = try ChildProcess(try builtProduct("sugarctl"), arguments, environment: env, outputPrefix: dir.file(name))
        var peak = 0
        while child.isRunning {
            if let now = Self.peakResident(child.pid) { peak = max(peak, now) }
            try await Task.sleep(for: .milliseconds(2))
        }
        return (peak, await child.waitForExit(within: 1), child)
    }

    /// The lines of a file, read a line at a time (an export of 200 000 readings is hundreds of MB).
    static func forEachLine(_ path: String, _ body: (String) -> Void) throws {
        let file = try #require(fopen(path, "r"), "cannot open \(path)")
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) >= 0, let line {
            body(String(cString: line))
        }
    }

    @Test func twoHundredThousandReadingsExportAndReportInFlatMemory() async throws {
        let dir = try TempDirectory()
        // The synthetic store, made through the store (raw mode: one transaction), then sugard's database.
        let made = try await IngestBenchmark.run(count: Self.readings * 10 / 9 + 1, raw: true, directory: dir.path)
        try #require(made.stored >= Self.readings, "\(made)")
        try #require(mkdir(dir.file("state"), 0o700) == 0)
        try #require(rename(dir.file("ingest-raw.sqlite"), dir.file("state/sugard.sqlite")) == 0)
        // The first and last reading as the listing orders them (measured instant, then id).
        let store = try SQLiteReadingStore(path: dir.file("state/sugard.sqlite"))
        let first = try #require(try await store.readings(ReadingQuery(limit: 1)).first)
        let last = try #require(try await store.readings(ReadingQuery(limit: 1, order: .descending)).first)
        let total = try await store.readingCount(meter: nil)
        await store.close()
        try #require(total == made.stored)
        func identifier(_ r: StoredReading) -> String { "\(r.reading.meter.rawValue)/\(r.epoch)/\(r.reading.sequenceNumber)" }

        try dir.write("sugard.conf", "timezone = UTC\nlog_level = warning\n")
        let run = try SugardRun(
            in: dir, arguments: ["--config", dir.file("sugard.conf")], environment: ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent"])
        try await run.waitUntilReady()

        // CSV: a header, then every reading in order.
        let csv = try await Self.sugarctl(["readings", "--format", "csv"], name: "csv", dir: dir, socket: run.socketPath)
        #expect(csv.end == .exited(0), "\(csv.child.stderr)")
        var rows = 0
        var firstRow = ""
        var lastRow = ""
        try Self.forEachLine(dir.file("csv.out")) { line in
            rows += 1
            if rows == 2 { firstRow = line }
            lastRow = line
        }
        #expect(rows == total + 1, "no row cap: \(rows - 1) of \(total) readings")
        #expect(firstRow.hasPrefix(identifier(first) + ","), "\(firstRow)")
        #expect(lastRow.hasPrefix(identifier(last) + ","), "\(lastRow)")
        #expect(csv.child.stderr.isEmpty, "\(csv.child.stderr)")
        print("csv export of \(total) readings: sugarctl VmHWM \(csv.peak >> 10) KiB")
        #expect(csv.peak > 0 && csv.peak < Self.sugarctlBound, "sugarctl VmHWM \(csv.peak >> 10) KiB")

        // JSON: one indented array, an element per reading (each starts a line with two spaces and "{").
        let json = try await Self.sugarctl(["readings", "--format", "json"], name: "json", dir: dir, socket: run.socketPath)
        #expect(json.end == .exited(0), "\(json.child.stderr)")
        var elements = 0
        var lines = 0
        var element = ""
        var firstElement = ""
        var lastLine = ""
        try Self.forEachLine(dir.file("json.out")) { line in
            lines += 1
            if line == "  {\n" {
                elements += 1
                if elements == 2 { firstElement = element }
                element = ""
            }
            if elements >= 1 { element += line }
            lastLine = line
        }
        #expect(elements == total, "no row cap: \(elements) of \(total) readings")
        #expect(lastLine == "]\n")
        let firstObject = try JSONValue(parsing: String(firstElement.dropLast(2)))  // without ",\n"
        let lastObject = try JSONValue(parsing: String(element.dropLast(3)))  // without "\n]\n"
        #expect(firstObject["id"] == .int(first.id) && firstObject["sequenceNumber"] == .int(Int64(first.reading.sequenceNumber)))
        #expect(lastObject["id"] == .int(last.id) && lastObject["meter"] == .string(last.reading.meter.rawValue))
        print("json export of \(total) readings: sugarctl VmHWM \(json.peak >> 10) KiB")
        #expect(json.peak > 0 && json.peak < Self.sugarctlBound, "sugarctl VmHWM \(json.peak >> 10) KiB")

        // A report over the store's first ten years (most of its readings).
        let report = try await Self.sugarctl(
            ["report", "--since", "2020-01-01", "--days", "3650", "--output", dir.file("report.html")], name: "report", dir: dir,
            socket: run.socketPath)
        #expect(report.end == .exited(0), "\(report.child.stderr)")
        let page = readText(dir.file("report.html"))
        print("report: sugarctl VmHWM \(report.peak >> 10) KiB, page \(page.utf8.count >> 10) KiB")
        #expect(report.peak > 0 && report.peak < Self.sugardBound, "sugarctl VmHWM \(report.peak >> 10) KiB")
        #expect(page.utf8.count < 1_048_576, "the page has \(page.utf8.count) bytes")
        #expect(page.contains("the latest 2000 of "), "the time-of-day chart says how many readings it draws")
        #expect(page.contains("days with readings ("), "the logbook says how many days and entries it shows")
        let figures = try await Self.sugarctl(
            ["report", "--since", "2020-01-01", "--days", "3650", "--json"], name: "figures", dir: dir, socket: run.socketPath)
        #expect(figures.end == .exited(0), "\(figures.child.stderr)")
        let counted = try JSONValue(parsing: figures.child.stdout)["readings"]?.intValue ?? 0
        #expect(counted > Int64(total / 2), "the report counted \(counted) readings")

        let sugardPeak = try #require(Self.peakResident(run.process.pid))
        print("sugard VmHWM after the exports and reports: \(sugardPeak >> 10) KiB")
        #expect(sugardPeak < Self.sugardBound, "sugard VmHWM \(sugardPeak >> 10) KiB")
        #expect(await run.stop() == .exited(0))
    }
}
