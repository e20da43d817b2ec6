import Foundation
import Glibc
import GlucoseReport
import HealthDataSync
import JSON
import SugarAPI
import Testing

/// The built `sugarctl report` against a live server on a real socket over a real SQLite store
/// holding `ReportSamples`, and its HTML and PDF in headless Chromium (Debian `chromium`, installed by
/// scripts/install-deps; a missing browser fails these tests).
@Suite struct ReportCommandTests {
    static let period = ["--since", "2024-03-29T23:00:00Z", "--until", "2024-04-01T22:00:00Z"]

    /// A server holding the spring set (16 records from two meters, one a control-solution test).
    static func withReportServer(_ body: (Fixture) async throws -> Void) async throws {
        try await withAPIServer(seed: false) { f in
            for meter in [ReportSamples.roche, ReportSamples.contour] {
                let readings = ReportSamples.spring.filter { $0.meter == meter }.map(ReportSamples.reading)
                try await f.commit(meter, readings: readings, at: Instant(epochMillis: ReportSamples.springTo))
            }
            try await body(f)
        }
    }

    static func run(_ f: Fixture?, _ arguments: [String], environment: [String: String] = [:]) async throws -> ProcessOutput {
        try await SugarctlTests.run(f, ["report"] + arguments, environment: environment)
    }

    /// Runs `program` and requires it to exist (no silent skip when Chromium or poppler is missing).
    static func tool(_ path: String, _ arguments: [String]) async throws -> ProcessOutput {
        try #require(FileManager.default.isExecutableFile(atPath: path), "\(path) missing: run scripts/install-deps")
        return try await runProcess(path, arguments, environment: ["HOME": "/tmp", "PATH": "/usr/bin:/bin"])
    }

    static func chromium(_ directory: String, _ arguments: [String]) async throws -> ProcessOutput {
        try await self.tool(
            "/usr/bin/chromium",
            [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=\(directory)/chromium-profile",
                "--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr", "--v=0",
            ] + arguments)
    }

    @Test func jsonFiguresThroughTheSocket() async throws {
        try await Self.withReportServer { f in
            let out = try await Self.run(f, Self.period + ["--format", "json"])
            #expect(out.status == 0, "\(out.stderr)")
            let json = try JSONValue(parsing: out.stdout)
            // The hand-worked figures of GlucoseReportTests, now through ListReadings and the store.
            #expect(json["readings"] == 15 && json["unit"] == "mgdl")
            #expect(json["meanMgdL"]?.doubleValue == 130.37 && json["sdMgdL"]?.doubleValue == 62.87)
            #expect(json["ranges"]?["target"]?.doubleValue == 46.7 && json["ranges"]?["veryLow"]?.doubleValue == 13.3)
            #expect(json["hourly"]?.arrayValue?[7]["p50"]?.doubleValue == 102.5)
            #expect(json["hourly"]?.arrayValue?[2]["count"] == 0)
            #expect(json["lows"]?.arrayValue?.count == 4)
            #expect(json["excluded"]?["controlSolution"] == 1)
            #expect(json["meters"]?.arrayValue?.compactMap { $0["serialNumber"]?.stringValue }.sorted() == ["7830H6123456789012", "92500012345"])
            // --meter, repeatable; --unit; --target; --days from --since.
            let contour = try await Self.run(f, Self.period + ["--format", "json", "--meter", ReportSamples.contour.id.rawValue])
            #expect(try JSONValue(parsing: contour.stdout)["readings"] == 3)
            let both = try await Self.run(
                f, Self.period + ["--format", "json", "--meter", ReportSamples.contour.id.rawValue, "--meter", ReportSamples.roche.id.rawValue])
            #expect(try JSONValue(parsing: both.stdout)["readings"] == 15)
            let tight = try await Self.run(f, Self.period + ["--format", "json", "--unit", "mmol", "--target", "3.9-7.8"])
            let tightJSON = try JSONValue(parsing: tight.stdout)
            #expect(tightJSON["unit"] == "mmol" && tightJSON["target"]?["highMgdL"]?.doubleValue == 140.52)
            let days = try await Self.run(f, ["--since", "2024-03-31", "--days", "1", "--format", "json"])
            let daysJSON = try JSONValue(parsing: days.stdout)
            #expect(daysJSON["period"]?["days"] == 1 && daysJSON["period"]?["to"] == "2024-04-01T00:00:00Z")
            // 2024-03-31 UTC: r7 (01:30Z) r8 r9 r10 r11 and r6 (00:30Z) = 6.
            #expect(daysJSON["readings"] == 6)
            // Per person: a meter each. Without --person the report refuses to pool two people's readings.
            let sugarctl = { (arguments: [String]) async throws -> ProcessOutput in try await SugarctlTests.run(f, arguments) }
            #expect(try await sugarctl(["people", "add", "Ada", "--low", "80", "--high", "160"]).status == 0)
            #expect(try await sugarctl(["meters", "assign", ReportSamples.contour.id.rawValue, "Ada", "--from", "2024-01-01"]).status == 0)
            let one = try await Self.run(f, Self.period + ["--format", "json"])
            #expect(try JSONValue(parsing: one.stdout)["person"] == "Ada (and 12 readings of no one)", "\(one.stdout)")
            #expect(try await sugarctl(["meters", "assign", ReportSamples.roche.id.rawValue, "Ben", "--from", "2024-01-01"]).status == 0)
            let pooled = try await Self.run(f, Self.period + ["--format", "json"])
            #expect(pooled.status == 64 && pooled.stderr.contains("Ada, Ben") && pooled.stderr.contains("--person"), "\(pooled.stderr)")
            let ada = try JSONValue(parsing: try await Self.run(f, Self.period + ["--format", "json", "--person", "Ada"]).stdout)
            #expect(ada["person"] == "Ada" && ada["readings"] == 3)
            #expect(ada["target"]?["lowMgdL"]?.doubleValue == 80 && ada["target"]?["highMgdL"]?.doubleValue == 160, "her thresholds")
            let ben = try JSONValue(parsing: try await Self.run(f, Self.period + ["--format", "json", "--person", "Ben"]).stdout)
            #expect(ben["person"] == "Ben" && ben["readings"] == 12)
            #expect(try await Self.run(f, Self.period + ["--format", "json", "--person", "Nobody"]).status == 1)
        }
    }

    @Test func exitStatuses() async throws {
        try await Self.withReportServer { f in
            let empty = try await Self.run(f, ["--since", "2023-01-01", "--until", "2023-01-15", "--format", "json"])
            #expect(empty.status == 1)
            #expect(empty.stdout.isEmpty)
            #expect(empty.stderr.contains("no readings from 2023-01-01T00:00:00Z to 2023-01-15T00:00:00Z"), "\(empty.stderr)")
            // Default: the last 14 days, empty here; the message names them.
            let recent = try await Self.run(f, [])
            #expect(recent.status == 1 && recent.stderr.contains("no readings from"))
            for bad in [["--since", "last tuesday"], ["--until", "2024-13-01"], ["--since", "2024-04-02", "--until", "2024-04-01"],
                ["--days", "0"], ["--since", "2024-03-01", "--until", "2024-03-02", "--days", "3"]]
            {
                let out = try await Self.run(f, bad)
                #expect(out.status == 64, "\(bad): \(out.stderr)")
            }
            #expect(try await Self.run(f, Self.period + ["--format", "docx"]).status == 64)
            #expect(try await Self.run(f, Self.period + ["--target", "180-70"]).status == 64)
            #expect(try await Self.run(f, Self.period + ["--unit", "grains"]).status == 64)
            let help = try await Self.run(nil, ["--help"])
            #expect(help.status == 0 && help.stdout.contains("--target <low>-<high>") && help.stdout.contains("--meter <id>"))
        }
        let gone = try await Self.run(nil, Self.period, environment: ["SUGARD_SOCKET": "/tmp/no-such-dir/sock"])
        #expect(gone.status == 69)
        #expect(gone.stderr.contains("sugard is not running"))
    }

    @Test func htmlAndPDFInARealBrowser() async throws {
        try await Self.withReportServer { f in
            let dir = f.directory
            // Default name, in the current folder, path on stdout.
            let made = try await runProcess(
                "/bin/sh", ["-c", "cd \"$1\" && shift && exec \"$@\"", "sh", dir, try sugarctlPath(), "report", "--socket", f.path] + Self.period,
                environment: ["HOME": "/nonexistent-home", "PATH": "/usr/bin:/bin", "TZ": "UTC"])
            #expect(made.status == 0, "\(made.stderr)")
            #expect(made.stdout == "sugard-report-2024-03-29-2024-04-01.html\n")
            let page = dir + "/sugard-report-2024-03-29-2024-04-01.html"
            let html = try String(contentsOfFile: page, encoding: .utf8)
            #expect(!html.contains("http://") && !html.contains("https://") && !html.contains("<script"))
            #expect(html.contains("Roche Accu-Chek Guide") && html.contains("92500012345"))
            let stdout = try await Self.run(f, Self.period + ["--output", "-"])
            #expect(stdout.stdout.hasPrefix("<!DOCTYPE html>"))

            // The browser's DOM, network blocked: one element of class pt per reading, no console message.
            let dom = try await Self.chromium(dir, ["--dump-dom", "file://" + page])
            #expect(dom.status == 0, "\(dom.stderr)")
            #expect(dom.stdout.components(separatedBy: "class=\"pt ").count - 1 == 15)
            #expect(dom.stdout.components(separatedBy: "data-id=").count - 1 == 15)
            #expect(dom.stdout.components(separatedBy: "class=\"dpt ").count - 1 == 15)
            #expect(dom.stdout.contains("data-hour=\"7\""))
            let console = dom.stderr.split(separator: "\n").filter { $0.contains(":CONSOLE") }
            #expect(console.isEmpty, "\(console)")

            // A screenshot: decoded (zlib, PNG filters) and checked for the chart's colours, not a blank page.
            let shot = dir + "/shot.png"
            let screenshot = try await Self.chromium(dir, ["--screenshot=\(shot)", "--window-size=900,1600", "--hide-scrollbars", "file://" + page])
            #expect(screenshot.status == 0, "\(screenshot.stderr)")
            let pixels = try await Self.tool("/usr/bin/python3", ["-c", Self.pngCheck, shot])
            #expect(pixels.status == 0, "\(pixels.stderr)")
            let counts = try JSONValue(parsing: pixels.stdout)
            // Ink on the page, many colours, the in-target green of the bar and the 10-90 % band's blue.
            #expect((counts["inkFraction"]?.doubleValue ?? 0) > 0.05, "\(counts)")
            #expect((counts["colours"]?.intValue ?? 0) > 50, "\(counts)")
            #expect((counts["target"]?.intValue ?? 0) > 200, "\(counts)")
            #expect((counts["band"]?.intValue ?? 0) > 200, "\(counts)")

            // PDF through sugarctl (which runs Chromium): two A4 pages.
            let pdf = dir + "/report.pdf"
            let printed = try await Self.run(f, Self.period + ["--format", "pdf", "--output", pdf])
            #expect(printed.status == 0, "\(printed.stderr)")
            let info = try await Self.tool("/usr/bin/pdfinfo", [pdf])
            #expect(info.stdout.contains("Pages:           2"), "\(info.stdout)")
            #expect(info.stdout.contains("(A4)"), "A4: \(info.stdout)")
            // Without Chromium: a clear error saying how to install it.
            let none = try await Self.run(f, Self.period + ["--format", "pdf", "--output", pdf], environment: ["PATH": "/nonexistent"])
            #expect(none.status == 1 && none.stderr.contains("apt install chromium"), "\(none.stderr)")
        }
    }

    @Test func twoBusyWeeksPrintOnTwoPages() async throws {
        try await withAPIServer(seed: false) { f in
            try await f.commit(
                ReportSamples.roche, readings: ReportSamples.fortnight.map(ReportSamples.reading),
                at: Instant(epochMillis: 1_718_400_000_000))
            let period = ["--since", "2024-06-01", "--until", "2024-06-15"]
            let json = try await Self.run(f, period + ["--format", "json"])
            #expect(try JSONValue(parsing: json.stdout)["readings"] == 84, "\(json.stderr)")
            let pdf = f.directory + "/fortnight.pdf"
            let printed = try await Self.run(f, period + ["--format", "pdf", "--output", pdf])
            #expect(printed.status == 0 && printed.stdout == pdf + "\n", "\(printed.stderr)")
            let info = try await Self.tool("/usr/bin/pdfinfo", [pdf])
            #expect(info.stdout.contains("Pages:           2"), "\(info.stdout)")
        }
    }

    /// Decodes an 8-bit RGB(A) PNG with the standard library and prints pixel counts as JSON.
    static let pngCheck = """
        import json, struct, sys, zlib
        data = open(sys.argv[1], 'rb').read()
        assert data[:8] == b'\\x89PNG\\r\\n\\x1a\\n', 'not a PNG'
        pos, idat = 8, b''
        while pos < len(data):
            length, kind = struct.unpack('>I4s', data[pos:pos + 8])
            body = data[pos + 8:pos + 8 + length]
            if kind == b'IHDR':
                width, height, depth, colour = struct.unpack('>IIBB', body[:10])
            elif kind == b'IDAT':
                idat += body
            pos += 12 + length
        assert depth == 8 and colour in (2, 6), (depth, colour)
        bpp = 3 if colour == 2 else 4
        raw, stride, prev, out = zlib.decompress(idat), width * bpp, bytearray(width * bpp), []
        for y in range(height):
            f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                if f == 1: line[i] = (line[i] + a) & 255
                elif f == 2: line[i] = (line[i] + b) & 255
                elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
                elif f == 4:
                    p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            out.append(bytes(line)); prev = line
        colours, ink, target, band = set(), 0, 0, 0
        for line in out:
            for x in range(0, stride, bpp):
                px = tuple(line[x:x + 3]); colours.add(px)
                if sum(px) < 600: ink += 1
                if abs(px[0] - 0) < 12 and abs(px[1] - 158) < 12 and abs(px[2] - 115) < 12: target += 1
                if abs(px[0] - 198) < 10 and abs(px[1] - 219) < 10 and abs(px[2] - 239) < 10: band += 1
        print(json.dumps({'width': width, 'height': height, 'colours': len(colours), 'inkFraction': ink / (width * height),
                          'target': target, 'band': band}))
        """
}
