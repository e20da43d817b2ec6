import GlucoseReport
import HubStore
import JSON

/// `/`: one self-contained page (inline style, no script, refreshes itself every 30 s) with every
/// gateway and every person, problems first.
extension HubService {
    /// One gateway's line on the page.
    struct GatewayRow {
        /// The gateway's id.
        var id: String
        /// Online and heard from within `offlineAfter`.
        var online: Bool
        /// When it was last heard from (UTC, to the minute).
        var lastSeen: String?
        /// The adapter in words (`unknown` before a health message).
        var adapter: String
        /// The adapter is absent, off or in error.
        var adapterProblem: Bool
        /// The storage state in words.
        var storage: String
        /// The storage is not ok.
        var storageProblem: Bool
        /// Meters whose sync is overdue, with their person.
        var overdue: [String]
        /// Active alerts' messages, oldest first.
        var alerts: [String]
        /// The gateway's sugard version.
        var version: String?
        /// What is wrong, in words; empty for a healthy gateway (sorted after the troubled ones).
        var problems: [String] {
            var p: [String] = []
            if !self.online { p.append("offline") }
            if self.adapterProblem { p.append("adapter") }
            if self.storageProblem { p.append("storage") }
            if !self.overdue.isEmpty { p.append("meter overdue") }
            if !self.alerts.isEmpty { p.append("alert") }
            return p
        }
    }

    /// One person's line on the page.
    struct PersonRow {
        /// The person's name.
        var id: String
        /// The time of their newest reading (not a control test), as the gateway wrote it.
        var lastTime: String?
        /// Its value in mg/dL.
        var lastValue: Double?
        /// Its flags.
        var lastFlags: [String]
        /// Its age in hours; nil when they have no reading.
        var ageHours: Double?
        /// Readings of the last 14 days between 70 and 180 mg/dL.
        var inRange: Int
        /// Readings of the last 14 days (control tests excluded).
        var total: Int
        /// What needs a look: a low (< 70) or high (> 250) last value, LO or HI, no reading for over 3 days, none yet.
        var problems: [String] {
            var p: [String] = []
            if let v = self.lastValue, v < 70 { p.append("last reading low") }
            if let v = self.lastValue, v > 250 { p.append("last reading high") }
            if self.lastFlags.contains("lo") { p.append("last reading LO") }
            if self.lastFlags.contains("hi") { p.append("last reading HI") }
            if let h = self.ageHours, h > 72 { p.append("no reading for \(Int(h / 24)) days") }
            if self.ageHours == nil { p.append("no reading yet") }
            return p
        }
    }

    /// Every gateway, with its overdue meters and active alerts, in one query.
    func gatewayRows(_ store: HubStore) throws(PostgresError) -> [GatewayRow] {
        let rows = try store.query(
            """
            SELECT g.id,
                   g.online AND (g.health_time IS NULL OR g.health_time > now() - make_interval(secs => $1::integer)
                                 OR g.status_changed > now() - make_interval(secs => $1::integer)),
                   to_char(g.last_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') || ' UTC',
                   g.adapter::text, g.storage::text, g.version,
                   (SELECT string_agg(coalesce(m.name, m.id) || coalesce(' (' || m.person || ')', ''), E'\\x1f' ORDER BY m.id)
                      FROM meter m WHERE m.gateway = g.id AND m.overdue),
                   (SELECT string_agg(coalesce(a.message, a.kind, a.id), E'\\x1f' ORDER BY a.raised_at)
                      FROM alert a WHERE a.gateway = g.id AND a.active)
            FROM gateway g ORDER BY g.id
            """, [String(self.offlineAfter)]).rows
        return rows.map { r in
            let adapter = r[3].flatMap { try? JSONValue(parsing: $0) }
            let storage = r[4].flatMap { try? JSONValue(parsing: $0) }
            var adapterText = "unknown"
            var adapterProblem = false
            if let a = adapter {
                let present = a["present"]?.boolValue ?? true
                let powered = a["powered"]?.boolValue ?? true
                adapterProblem = !present || !powered
                adapterText = !present ? "missing" : !powered ? "off" : "ok"
                if let reason = a["reason"]?.stringValue, !reason.isEmpty, adapterProblem { adapterText += ": " + reason }
                if let error = a["error"]?.stringValue { adapterText = error; adapterProblem = true }
            }
            var storageText = "unknown"
            var storageProblem = false
            if let s = storage {
                if s["ok"]?.boolValue == true || s.stringValue == "ok" {
                    storageText = "ok"
                } else {
                    storageProblem = true
                    // The forwarder's health sends sugard's error as {code, message}.
                    storageText = s["message"]?.stringValue ?? s["error"]?.stringValue ?? s.serialized()
                }
            }
            /// The values of an aggregated column (joined with U+001F by the query); empty for NULL.
            func list(_ t: String?) -> [String] { t.map { $0.split(separator: "\u{1f}").map(String.init) } ?? [] }
            return GatewayRow(
                id: r[0] ?? "?", online: r[1] == "t", lastSeen: r[2], adapter: adapterText, adapterProblem: adapterProblem,
                storage: storageText, storageProblem: storageProblem, overdue: list(r[6]), alerts: list(r[7]), version: r[5])
        }
    }

    /// Every person with their newest reading and the last 14 days' time in range, in one query.
    func personRows(_ store: HubStore) throws(PostgresError) -> [PersonRow] {
        let rows = try store.query(
            """
            SELECT p.id, last.time, last.mgdl, last.flags, extract(epoch FROM now() - last.measured_at) / 3600,
                   (SELECT count(*) FROM reading r WHERE r.person = p.id AND NOT r.control_solution AND r.mgdl BETWEEN 70 AND 180
                      AND r.measured_at > now() - interval '14 days'),
                   (SELECT count(*) FROM reading r WHERE r.person = p.id AND NOT r.control_solution
                      AND r.measured_at > now() - interval '14 days')
            FROM person p
            LEFT JOIN LATERAL (
                SELECT r.time, r.mgdl, r.measured_at, (r.payload->'flags')::text AS flags FROM reading r
                WHERE r.person = p.id AND NOT r.control_solution ORDER BY r.measured_at DESC LIMIT 1) last ON true
            ORDER BY p.id
            """).rows
        return rows.map { r in
            PersonRow(
                id: r[0] ?? "?", lastTime: r[1], lastValue: r[2].flatMap { Double($0) },
                lastFlags: (r[3].flatMap { try? JSONValue(parsing: $0) }?.arrayValue ?? []).compactMap(\.stringValue),
                ageHours: r[4].flatMap { Double($0) }, inRange: r[5].flatMap { Int($0) } ?? 0, total: r[6].flatMap { Int($0) } ?? 0)
        }
    }

    /// The whole page: gateways, then people, troubled ones first, each list by id.
    func fleetPage(_ store: HubStore) throws(PostgresError) -> String {
        let gateways = try self.gatewayRows(store).sorted { ($0.problems.isEmpty ? 1 : 0, $0.id) < ($1.problems.isEmpty ? 1 : 0, $1.id) }
        let people = try self.personRows(store).sorted { ($0.problems.isEmpty ? 1 : 0, $0.id) < ($1.problems.isEmpty ? 1 : 0, $1.id) }
        let offline = gateways.filter { !$0.online }.count
        let troubled = gateways.filter { !$0.problems.isEmpty }.count
        var h = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="30">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>sugard-hub: \(gateways.count) gateways, \(troubled) with problems</title>
            <style>
            body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
            table{border-collapse:collapse;margin-bottom:2em;width:100%}
            th,td{border-bottom:1px solid #ddd;padding:.35em .6em;text-align:left;vertical-align:top}
            th{background:#f4f4f4}
            tr.problem td{background:#fff3f0}
            .online{color:#1a7f37;font-weight:600}.offline{color:#b42318;font-weight:600}
            .bad{color:#b42318}.muted{color:#777}
            </style></head><body>
            <h1>Gateways and people</h1>
            <p id="summary">\(gateways.count) gateways (\(offline) offline, \(troubled) with problems), \(people.count) people. Problems first; refreshes every 30 s.</p>
            <h2>Gateways</h2>
            <table id="gateways"><thead><tr><th>Gateway</th><th>State</th><th>Last seen</th><th>Adapter</th><th>Storage</th><th>Meters overdue</th><th>Active alerts</th></tr></thead><tbody>

            """
        for g in gateways {
            let cls = g.problems.isEmpty ? "" : " class=\"problem\""
            h += "<tr\(cls) id=\"gateway-\(htmlEscaped(g.id))\" data-problems=\"\(htmlEscaped(g.problems.joined(separator: ",")))\">"
            h += "<td>\(htmlEscaped(g.id))\(g.version.map { " <span class=\"muted\">\(htmlEscaped($0))</span>" } ?? "")</td>"
            h += g.online ? "<td class=\"online\">online</td>" : "<td class=\"offline\">offline</td>"
            h += "<td>\(htmlEscaped(g.lastSeen ?? "never"))</td>"
            h += "<td\(g.adapterProblem ? " class=\"bad\"" : "")>\(htmlEscaped(g.adapter))</td>"
            h += "<td\(g.storageProblem ? " class=\"bad\"" : "")>\(htmlEscaped(g.storage))</td>"
            h += g.overdue.isEmpty ? "<td class=\"muted\">none</td>" : "<td class=\"bad\">overdue: \(htmlEscaped(g.overdue.joined(separator: ", ")))</td>"
            h += g.alerts.isEmpty ? "<td class=\"muted\">none</td>" : "<td class=\"bad\">\(htmlEscaped(g.alerts.joined(separator: "; ")))</td>"
            h += "</tr>\n"
        }
        h += """
            </tbody></table>
            <h2>People</h2>
            <table id="people"><thead><tr><th>Person</th><th>Last reading</th><th>Time</th><th>In range 70&ndash;180 mg/dL, 14 days</th><th>Problems</th></tr></thead><tbody>

            """
        for p in people {
            let cls = p.problems.isEmpty ? "" : " class=\"problem\""
            let value: String
            if p.lastFlags.contains("hi") {
                value = "HI"
            } else if p.lastFlags.contains("lo") {
                value = "LO"
            } else {
                value = p.lastValue.map { "\(Int($0.rounded())) mg/dL" } ?? "none"
            }
            let inRange = p.total == 0 ? "no readings" : "\(p.inRange) of \(p.total) (\(Int((Double(p.inRange) * 100 / Double(p.total)).rounded())) %)"
            let link = "/person/\(percentEncoded(p.id))/report"
            h += "<tr\(cls) id=\"person-\(htmlEscaped(p.id))\"><td><a href=\"\(htmlEscaped(link))\">\(htmlEscaped(p.id))</a></td><td>\(htmlEscaped(value))</td>"
            h += "<td>\(htmlEscaped(p.lastTime ?? ""))</td><td>\(htmlEscaped(inRange))</td>"
            h += p.problems.isEmpty ? "<td class=\"muted\">none</td>" : "<td class=\"bad\">\(htmlEscaped(p.problems.joined(separator: "; ")))</td>"
            h += "</tr>\n"
        }
        h += "</tbody></table>\n</body></html>\n"
        return h
    }
}


/// A path segment with everything but unreserved characters percent-encoded.
func percentEncoded(_ text: String) -> String {
    var out = ""
    for b in text.utf8 {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
            out.unicodeScalars.append(Unicode.Scalar(b))
        default:
            let hex = Array("0123456789ABCDEF".utf8)
            out += "%" + String(decoding: [hex[Int(b >> 4)], hex[Int(b & 15)]], as: UTF8.self)
        }
    }
    return out
}
