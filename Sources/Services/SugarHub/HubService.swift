import GlucoseProfile
import GlucoseReport
public import HTTPServer
public import HubStore
import JSON
import Locking
import SugarWire
import SystemIO

/// The hub's HTTP side: routes, the bearer-token rule, the fleet page, the person report and the
/// JSON API, all read from PostgreSQL through one connection of its own (requests come one at a
/// time from libmicrohttpd's thread; the lock keeps that true whatever the server does).
public final class HubService: Sendable {
    /// The HTTP side's own connection; nil after it was lost (a new one is made on the next request).
    let store: Lock<HubStore?>
    /// Where to connect again.
    let databaseURL: String
    /// The bearer token every route but `/healthz` needs; nil: none.
    let token: String?
    /// Seconds after its last health or status message a gateway counts as offline on the fleet page, will or not.
    let offlineAfter: Int
    /// Where request failures are logged.
    let log: @Sendable (String) -> Void

    /// `token` nil: no authorization asked (loopback only; the config refuses it elsewhere).
    public init(store: sending HubStore, databaseURL: String, token: String?, offlineAfter: Int, log: @escaping @Sendable (String) -> Void) {
        self.store = Lock(store)
        self.databaseURL = databaseURL
        self.token = token
        self.offlineAfter = offlineAfter
        self.log = log
    }

    /// Answers one request: only GET and HEAD (405 otherwise), the bearer token checked in constant
    /// time (401), then the route; a database failure is a 503 (a lost connection is made again next time).
    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        guard request.method == "GET" || request.method == "HEAD" else {
            return HTTPResponse(status: 405, contentType: "text/plain; charset=utf-8", body: Array("only GET\n".utf8), headers: [("Allow", "GET, HEAD")])
        }
        if request.path != "/healthz", let token = self.token {
            guard let given = request.authorization, given.hasPrefix("Bearer "), Self.same(Array(given.dropFirst(7).utf8), Array(token.utf8)) else {
                return HTTPResponse(
                    status: 401, contentType: "text/plain; charset=utf-8", body: Array("Authorization: Bearer <token> needed\n".utf8),
                    headers: [("WWW-Authenticate", "Bearer realm=\"sugard-hub\"")])
            }
        }
        return self.store.withLock { slot -> HTTPResponse in
            do throws(PostgresError) {
                if slot == nil { slot = try HubStore(url: self.databaseURL) }
                guard let store = slot else { return .text(503, "no database") }
                return try self.route(request, store)
            } catch {
                self.log("HTTP \(request.path): \(error)")
                if error.sqlState == nil { slot = nil }  // a lost connection: a fresh one next time
                return request.path == "/healthz" ? .text(503, "database unavailable") : .text(503, "database unavailable: \(error.message)")
            }
        }
    }

    /// Compares without stopping at the first difference (the token is not guessed byte by byte).
    static func same(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var diff = UInt8(a.count == b.count ? 0 : 1)
        for i in 0..<max(a.count, b.count) { diff |= (i < a.count ? a[i] : 0) ^ (i < b.count ? b[i] : 0) }
        return diff == 0
    }

    /// A 200 `application/json` response with a trailing newline.
    static func json(_ text: String) -> HTTPResponse {
        HTTPResponse(status: 200, contentType: "application/json", body: Array((text + "\n").utf8))
    }

    /// `/` the fleet page, `/healthz`, `/api/gateways`, `/api/alerts`, `/api/readings` (`since`,
    /// `until`, `limit` 1–10 000, `after`, `person`, `gateway`; 400 for bad values) and
    /// `/person/NAME/report?days=N` (1–366, default 14); 404 otherwise.
    func route(_ request: HTTPRequest, _ store: HubStore) throws(PostgresError) -> HTTPResponse {
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        switch parts.count {
        case 0: return HTTPResponse(status: 200, contentType: "text/html; charset=utf-8", body: Array(try self.fleetPage(store).utf8))
        case 1 where parts[0] == "healthz":
            try store.db.execute("SELECT 1")
            return .text(200, "ok")
        case 2 where parts[0] == "api" && parts[1] == "gateways": return Self.json(try store.gatewaysJSON())
        case 2 where parts[0] == "api" && parts[1] == "alerts": return Self.json(try store.alertsJSON())
        case 2 where parts[0] == "api" && parts[1] == "readings":
            let q = request.query
            /// A `since`/`until` parameter as epoch milliseconds (a number or an ISO 8601 time), or the
            /// 400 message for a bad one; (nil, nil) when absent or empty.
            func millis(_ key: String) -> (Int64?, String?) {
                guard let text = q[key], !text.isEmpty else { return (nil, nil) }
                if let n = Int64(text) { return (n, nil) }
                if let m = Self.isoMillis(text) { return (m, nil) }
                return (nil, "\(key) must be epoch milliseconds or an ISO 8601 time (2026-01-31T08:00:00Z), not \"\(text.prefix(40))\"")
            }
            let (since, e1) = millis("since")
            let (until, e2) = millis("until")
            if let e = e1 ?? e2 { return .text(400, e) }
            let limit = q["limit"].flatMap { Int($0) } ?? 1000
            guard (1...10_000).contains(limit) else { return .text(400, "limit must be 1 to 10000") }
            guard let after = Int64(q["after"] ?? "0"), after >= 0 else { return .text(400, "after must be the next value of the previous page") }
            return Self.json(
                try store.readingsJSON(
                    person: q["person"].flatMap { $0.isEmpty ? nil : $0 }, gateway: q["gateway"].flatMap { $0.isEmpty ? nil : $0 },
                    sinceMillis: since, untilMillis: until, after: after, limit: limit))
        case 3 where parts[0] == "person" && parts[2] == "report":
            let days = request.query["days"].flatMap { Int($0) } ?? 14
            guard (1...366).contains(days) else { return .text(400, "days must be 1 to 366") }
            guard let page = try self.report(store, person: parts[1], days: days) else {
                return .text(404, "no readings of \(parts[1]) in the last \(days) days")
            }
            return HTTPResponse(status: 200, contentType: "text/html; charset=utf-8", body: Array(page.utf8))
        default: return .text(404, "not found: \(request.path)")
        }
    }

    /// `2026-01-31T08:00:00Z` or with an offset, to epoch milliseconds.
    static func isoMillis(_ text: String) -> Int64? {
        let u = Array(text.utf8)
        guard u.count >= 19 else { return nil }
        /// The decimal number in `n` bytes from offset `a`; nil when they are not a number.
        func num(_ a: Int, _ n: Int) -> Int? { Int(String(decoding: u[a..<a + n], as: UTF8.self)) }
        guard let y = num(0, 4), let mo = num(5, 2), let d = num(8, 2), let h = num(11, 2), let mi = num(14, 2), let s = num(17, 2),
            CivilCalendar.isValid(year: y, month: mo, day: d, hour: h, minute: mi, second: s)
        else { return nil }
        var rest = u[19...]
        var fraction = 0
        if rest.first == UInt8(ascii: ".") {
            rest = rest.dropFirst()
            var digits = 0
            while let c = rest.first, c >= 48, c <= 57 {
                if digits < 3 { fraction = fraction * 10 + Int(c - 48) }
                digits += 1
                rest = rest.dropFirst()
            }
            for _ in digits..<3 where digits < 3 { fraction *= 10 }
        }
        var offset = 0
        if rest.first == UInt8(ascii: "Z") || rest.first == UInt8(ascii: "z") {
            rest = rest.dropFirst()
        } else if let sign = rest.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-"), rest.count == 6 {
            let t = Array(rest)
            guard let oh = Int(String(decoding: t[1...2], as: UTF8.self)), let om = Int(String(decoding: t[4...5], as: UTF8.self)) else { return nil }
            offset = (oh * 60 + om) * (sign == UInt8(ascii: "+") ? 1 : -1)
            rest = rest.dropFirst(6)
        } else {
            return nil
        }
        guard rest.isEmpty else { return nil }
        let seconds = CivilCalendar.secondsSinceEpoch(year: y, month: mo, day: d, hour: h, minute: mi, second: s) - Int64(offset * 60)
        return seconds * 1000 + Int64(fraction)
    }

    // MARK: The report

    /// The report page of `sugarctl report` over the person's last `days` days in the hub.
    func report(_ store: HubStore, person: String, days: Int) throws(PostgresError) -> String? {
        let now = wallClockMilliseconds()
        let from = now - Int64(days) * 86_400_000
        let rows = try store.query(
            """
            SELECT position, meter, (payload->>'epochMillis'), payload->>'time', mgdl, payload->'flags', payload->'meal', control_solution
            FROM reading WHERE person = $1 AND measured_at >= to_timestamp($2::double precision / 1000)
              AND measured_at < to_timestamp($3::double precision / 1000)
            ORDER BY measured_at
            """, [person, String(from), String(now)]).rows
        var readings: [ReportReading] = []
        var control = 0
        var notGlucose = 0
        for row in rows {
            guard let position = row[0].flatMap({ Int64($0) }), let millis = row[2].flatMap({ Int64($0) }) else { notGlucose += 1; continue }
            if row[7] == "t" { control += 1; continue }
            let flags = (row[5].flatMap { try? JSONValue(parsing: $0) }?.arrayValue ?? []).compactMap(\.stringValue)
            if flags.contains("controlSolution") { control += 1; continue }
            if !Set(flags).isDisjoint(with: ["ketone", "noValue", "suspect"]) { notGlucose += 1; continue }
            let result: GlucoseResult
            if flags.contains("hi") {
                result = .hi
            } else if flags.contains("lo") {
                result = .lo
            } else if let mg = row[4].flatMap({ Double($0) }) {
                result = .mgdL(mg)
            } else {
                notGlucose += 1
                continue
            }
            let offset = row[3].map(Self.offsetMinutes) ?? 0
            let meal = row[6].flatMap { try? JSONValue(parsing: $0) }.flatMap { $0.stringValue ?? $0["name"]?.stringValue }
            readings.append(
                ReportReading(
                    id: position, meter: row[1] ?? "?", epochMillis: millis, local: LocalStamp(epochMillis: millis, utcOffsetMinutes: offset),
                    result: result, meal: MealTag(glsName: meal), person: person))
        }
        guard !readings.isEmpty else { return nil }
        let meterRows = try store.query(
            "SELECT DISTINCT m.id, coalesce(m.name, m.id) FROM meter m JOIN reading r ON r.gateway = m.gateway AND r.meter = m.id WHERE r.person = $1",
            [person]).rows
        let used = Set(readings.map(\.meter))
        let meters = meterRows.compactMap { r -> ReportContext.Meter? in
            guard let id = r[0], used.contains(id) else { return nil }
            return ReportContext.Meter(id: id, name: r[1] ?? id, serialNumber: nil)
        }
        let figures = ReportFigures(readings: readings, period: ReportPeriod(fromMillis: from, toMillis: now))
        return figures.html(
            ReportContext(unit: .mgdl, person: person, meters: meters, madeAtMillis: now, controlSolutionCount: control, notGlucoseCount: notGlucose))
    }

    /// The offset of an ISO 8601 time (`...+02:00` is 120), 0 for `Z` or none.
    static func offsetMinutes(_ iso: String) -> Int {
        let u = Array(iso.utf8)
        guard u.count >= 6 else { return 0 }
        let tail = u[(u.count - 6)...]
        let t = Array(tail)
        guard t[0] == UInt8(ascii: "+") || t[0] == UInt8(ascii: "-"), t[3] == UInt8(ascii: ":"),
            let h = Int(String(decoding: t[1...2], as: UTF8.self)), let m = Int(String(decoding: t[4...5], as: UTF8.self))
        else { return 0 }
        return (h * 60 + m) * (t[0] == UInt8(ascii: "+") ? 1 : -1)
    }
}
