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
            let screenshot = try await Self.chromium(dir, ["--screenshot=\(shot)", "--window-size=900,2600", "--hide-scrollbars", "file://" + page])
            #expect(screenshot.status == 0, "\(screenshot.stderr)")
            let pixels = try await Self.tool("/usr/bin/python3", ["-c", Self.pngCheck, shot])
            #expect(pixels.status == 0, "\(pixels.stderr)")
            let counts = try JSONValue(parsing: pixels.stdout)
            // Ink on the page (page one is mostly tables of figures now: a blank page has none), many colours,
            // the in-target green of the bar and the 10-90 % band's blue.
            #expect((counts["inkFraction"]?.doubleValue ?? 0) > 0.03, "\(counts)")
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

    /// Two meters, nine readings a day for 180 days (2024-01-01 to 2024-06-28, Berlin): any period up to 90
    /// days up to 2024-06-29 and the period of the same length before it are full.
    static func withBusyServer(_ body: (Fixture) async throws -> Void) async throws {
        try await withAPIServer(seed: false) { f in
            let records = ReportSamples.busy(days: 180)
            for meter in [ReportSamples.roche, ReportSamples.contour] {
                let readings = records.filter { $0.meter == meter }.map(ReportSamples.reading)
                try await f.commit(meter, readings: readings, at: Instant(epochMillis: 1_719_700_000_000))
            }
            try await body(f)
        }
    }

    /// 14, 42 and 90 days of a busy two-meter household print on two A4 pages: the summaries on page
    /// one, the chart, the latest days and the bounded logbook on page two.
    @Test(arguments: [14, 42, 90])
    func longPeriodsPrintOnTwoPages(days: Int) async throws {
        try await Self.withBusyServer { f in
            let period = ["--until", "2024-06-29", "--days", String(days)]
            let json = try await Self.run(f, period + ["--json"])
            #expect(json.status == 0, "\(json.stderr)")
            let figures = try JSONValue(parsing: json.stdout)
            // Nine readings on each day of the period and of the one before it.
            #expect(figures["readings"] == .int(Int64(days * 9)) && figures["daysWithReadings"] == .int(Int64(days)))
            #expect(figures["readingsPerDay"]?.doubleValue == 9)
            #expect(figures["previous"]?["readings"] == .int(Int64(days * 9)), "\(figures["previous"] ?? .null)")
            if days >= 42 { #expect((figures["lows"]?.arrayValue?.count ?? 0) > 30, "more lows than the page lists: the bound is exercised") }

            let pdf = f.directory + "/report-\(days).pdf"
            // With a person in the header too (a line more on page one): both meters are hers for the whole data set.
            for meter in [ReportSamples.roche, ReportSamples.contour] {
                let assigned = try await SugarctlTests.run(f, ["meters", "assign", meter.id.rawValue, "Ada Lovelace", "--from", "2023-12-01"])
                #expect(assigned.status == 0, "\(assigned.stderr)")
            }
            let printed = try await Self.run(f, period + ["--format", "pdf", "--output", pdf, "--person", "Ada Lovelace"])
            #expect(printed.status == 0, "\(printed.stderr)")
            let info = try await Self.tool("/usr/bin/pdfinfo", [pdf])
            #expect(info.stdout.contains("Pages:           2"), "\(days) days: \(info.stdout)")
            #expect(info.stdout.contains("(A4)"), "\(info.stdout)")
            let one = try await Self.tool("/usr/bin/pdftotext", ["-f", "1", "-l", "1", pdf, "-"]).stdout.uppercased()
            let two = try await Self.tool("/usr/bin/pdftotext", ["-f", "2", "-l", "2", pdf, "-"]).stdout.uppercased()
            for heading in ["STATISTICS", "TIME IN RANGES", "BY MEAL TAG", "LOWS", "PREVIOUS"] { #expect(one.contains(heading), "page 1 lacks \(heading)") }
            for heading in ["TIME OF DAY", "DAILY VIEW", "LOGBOOK"] { #expect(two.contains(heading), "page 2 lacks \(heading)") }
            // Every low on page one carries its seconds (the Roche's 22:37:45 among them).
            #expect(one.contains("22:37:45"))
        }
    }

    /// The page's layout in Chromium at 1200 and 900 px: the logbook (its Bedtime column too) stays inside
    /// its section, no logbook cell's content is cut off, and each lows table's rows share its header's columns.
    @Test func logbookAndLowsKeepTheirColumnsOnWideScreens() async throws {
        try await Self.withBusyServer { f in
            let page = f.directory + "/layout.html"
            let made = try await Self.run(f, ["--until", "2024-06-29", "--days", "42", "--output", page])
            #expect(made.status == 0, "\(made.stderr)")
            // The report runs no script; this copy adds one that measures the laid-out page into #layout.
            let probe = """
                <pre id="layout"></pre><script>
                const out = {}, box = e => e.getBoundingClientRect();
                const lb = document.querySelector('table.logbook'), section = lb.closest('section');
                out.logbookRight = box(lb).right; out.sectionRight = box(section).right;
                out.bedtimeRight = box(lb.rows[0].cells[5]).right; out.bedtime = lb.rows[0].cells[5].textContent;
                const cut = [...lb.querySelectorAll('td')].filter(c => c.scrollWidth > c.clientWidth + 1);
                out.cutCells = cut.length; out.cut = cut.slice(0, 3).map(c => c.className + ': ' + c.textContent + ' ' + c.scrollWidth + '/' + c.clientWidth);
                out.lowTables = 0; out.misaligned = 0;
                for (const t of document.querySelectorAll('.lows table')) {
                  out.lowTables++;
                  const head = [...t.rows[0].cells].map(c => [Math.round(box(c).left), Math.round(box(c).right)]);
                  for (const r of [...t.rows].slice(1)) [...r.cells].forEach((c, i) => {
                    if (!head[i] || Math.round(box(c).left) !== head[i][0] || Math.round(box(c).right) !== head[i][1]) out.misaligned++;
                  });
                }
                document.getElementById('layout').textContent = JSON.stringify(out);
                </script></body>
                """
            let html = try String(contentsOfFile: page, encoding: .utf8)
            try html.replacingOccurrences(of: "</body>", with: probe).write(toFile: page + ".probe.html", atomically: true, encoding: .utf8)
            for width in [1200, 900] {
                let dom = try await Self.chromium(f.directory, ["--dump-dom", "--window-size=\(width),2000", "file://" + page + ".probe.html"])
                #expect(dom.status == 0, "\(dom.stderr)")
                let text = try #require(dom.stdout.components(separatedBy: "<pre id=\"layout\">").dropFirst().first?.components(separatedBy: "</pre>").first)
                let layout = try JSONValue(parsing: text.replacingOccurrences(of: "&amp;", with: "&"))
                let right = layout["sectionRight"]?.doubleValue ?? 0
                #expect(layout["bedtime"] == "Bedtime 21-24")
                #expect((layout["logbookRight"]?.doubleValue ?? .infinity) <= right + 0.5, "\(width) px: \(layout)")
                #expect((layout["bedtimeRight"]?.doubleValue ?? .infinity) <= right + 0.5, "\(width) px: the Bedtime column is clipped: \(layout)")
                #expect(layout["cutCells"] == 0, "\(width) px: \(layout)")
                #expect((layout["lowTables"]?.intValue ?? 0) >= 2 && layout["misaligned"] == 0, "\(width) px: \(layout)")
            }
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
