import GlucoseProfile
import JSON
import SugarWire

/// One export of `sugarctl readings`, written page by page as `ListReadings` replies arrive: what
/// to write before the first page, for each page and after the last. It holds one page at a time
/// (FHIR: at most one Bundle's readings), so an export of any size stays flat in memory.
///
/// The bytes are those the whole list gave before exports streamed: json and nightscout are the
/// indented array `prettySerialized()` writes, written element by element; csv is the header
/// then the rows; fhir is one transaction Bundle per ``fhirPageSize`` readings.
struct ReadingsWriter {
    let format: String
    let fhirPageSize: Int
    /// FHIR: the meters' identities, the people by name and the gateway's UUID.
    var meters: [String: Wire.MeterIdentity] = [:]
    var people: [String: Wire.Person] = [:]
    var gateway = ""
    /// FHIR: the unit Observations carry (the first reply's, unless --unit says).
    var unit: Wire.Unit?
    /// Readings received, and those left out because the format cannot carry them.
    private(set) var count = 0
    private(set) var skipped = 0
    /// Array elements written so far (json, nightscout).
    private var elements = 0
    /// FHIR readings waiting for their Bundle, and Bundles written.
    private var pending: [Wire.Reading] = []
    private var bundles = 0

    init(format: String, fhirPageSize: Int) {
        self.format = format
        self.fhirPageSize = max(1, fhirPageSize)
    }

    mutating func begin() -> String {
        self.format == "csv" ? ReadingExport.csvHeader : ""
    }

    /// The FHIR Bundles one reply's readings complete (the rest wait for the next reply).
    mutating func page(fhir objects: [JSONObject]) throws(CommandFailure) -> String {
        self.count += objects.count
        self.pending += try Daemon.readings(objects, method: "ListReadings")
        var out = ""
        while self.pending.count >= self.fhirPageSize {
            out += self.bundle(Array(self.pending.prefix(self.fhirPageSize)))
            self.pending.removeFirst(self.fhirPageSize)
        }
        return out
    }

    /// The text of one reply of full objects for json and ndjson: each object's text as sugard
    /// wrote it (ndjson), or indented as an element of the array (json).
    mutating func page(texts page: Wire.ReadingTextPage) -> String {
        self.count += page.count
        var out: [UInt8] = []
        out.reserveCapacity(page.bytes.count * (self.format == "json" ? 2 : 1) + page.count)
        page.withEachText { text in
            if self.format == "json" {
                out.append(contentsOf: (self.elements == 0 ? "[\n  " : ",\n  ").utf8)
                JSONValue.writePretty(compactText: text, indent: 1, into: &out)
                self.elements += 1
            } else {
                out.append(contentsOf: text)
                out.append(UInt8(ascii: "\n"))
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The text of one reply of `ListReadings` with `csv`: its rows as sugard wrote them.
    mutating func page(csv page: Wire.CSVPage) -> String {
        self.count += Int(page.rows)
        return page.text
    }

    /// The Nightscout entries of one reply of `ListReadings` with `compact`.
    mutating func page(compact readings: [Wire.CompactReading]) -> String {
        self.count += readings.count
        var out: [UInt8] = []
        for reading in readings {
            guard let entry = ReadingExport.nightscoutEntry(reading) else {
                self.skipped += 1
                continue
            }
            self.element(entry, into: &out)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// What closes the export.
    mutating func end() -> String {
        switch self.format {
        case "json", "nightscout": return self.elements == 0 ? "[]\n" : "\n]\n"
        case "fhir":
            // The rest, or one (empty) Bundle when nothing matched, as a single export gave.
            guard !self.pending.isEmpty || self.bundles == 0 else { return "" }
            defer { self.pending = [] }
            return self.bundle(self.pending)
        default: return ""
        }
    }

    /// Appends one element of the indented array: the same bytes as inside `prettySerialized()`.
    private mutating func element(_ value: JSONValue, into out: inout [UInt8]) {
        out.append(contentsOf: (self.elements == 0 ? "[\n  " : ",\n  ").utf8)
        value.writePretty(into: &out, indent: 1)
        self.elements += 1
    }

    /// One Bundle, written entry by entry (the bytes of `ReadingExport.fhir(...).prettySerialized()`).
    private mutating func bundle(_ readings: [Wire.Reading]) -> String {
        var out: [UInt8] = []
        self.skipped += ReadingExport.writeFHIR(
            readings, meters: self.meters, unit: self.unit ?? .mgdl, people: self.people, gateway: self.gateway, into: &out)
        out.append(UInt8(ascii: "\n"))
        self.bundles += 1
        return String(decoding: out, as: UTF8.self)
    }
}
