import GlucoseProfile
import JSON
import SugarWire

/// A stored reading as the alert rules see it.
struct AlertReading: Sendable, Equatable {
    /// `<meter>/<epoch>/<sequence>`, the reading payload's `id`.
    var id: String
    /// The meter's id.
    var meter: String
    /// The person it belongs to, when sugard knows one.
    var person: String?
    /// What it is: glucose, LO, HI, control, ketone, no value.
    var kind: Wire.ReadingKind
    /// Its value in mg/dL; nil without a glucose value.
    var mgdL: Double?
    /// When it was measured (epoch ms).
    var measuredMillis: Int64
}

/// One alert event with its place in the alert log: sinks count their delivery progress in `seq`.
struct LoggedAlert: Sendable, Equatable {
    /// Its place in the log: 1, 2, 3, … never reused.
    var seq: Int64
    /// The event.
    var alert: Wire.ForwardAlert
}

/// What the alert rules keep across restarts, in `<state-dir>/alerts.json` (written atomically
/// and durably, like the delivery cursor): the readings looked at (a cursor in sugard's database),
/// the firing alerts, the log of alert events not yet delivered to every sink (and the recent
/// ones), each sink's delivery progress, and what the rules remember (each subject's newest
/// reading looked at, each meter's person, since when the gateway fails).
struct AlertState: Sendable, Equatable {
    /// The last reading looked at (a position in sugard's database).
    var cursor: Int64 = 0
    /// The database the cursor belongs to.
    var databaseId: String?
    /// The seq the next alert event gets.
    var nextSeq: Int64 = 1
    /// The firing alerts by ``AlertStateMachine/key(_:_:)``: each its firing event.
    var active: [String: Wire.ForwardAlert] = [:]
    /// Alert events not yet delivered to every sink, and the recent ones, oldest first.
    var log: [LoggedAlert] = []
    /// Each sink's (`mqtt`, `webhook NAME`) highest alert event delivered.
    var delivered: [String: Int64] = [:]
    /// Each glucose subject's (``AlertStateMachine/subject(meter:person:)``) newest measured time looked at.
    var newest: [String: Int64] = [:]
    /// Each meter's person, from its newest reading.
    var meterPerson: [String: String] = [:]
    /// Since when the adapter or the storage has failed (epoch ms).
    var failingSince: Int64?

    /// The state as `alerts.json` holds it (keys sorted).
    var json: JSONValue {
        func map(_ values: [String: Int64]) -> JSONValue {
            .object(JSONObject(values.sorted { $0.key < $1.key }.map { ($0.key, JSONValue.int($0.value)) }))
        }
        var object: JSONObject = ["cursor": .int(self.cursor), "nextSeq": .int(self.nextSeq)]
        if let id = self.databaseId { object["databaseId"] = .string(id) }
        object["active"] = .object(JSONObject(self.active.sorted { $0.key < $1.key }.map { ($0.key, $0.value.json) }))
        object["log"] = .array(self.log.map { ["seq": .int($0.seq), "alert": $0.alert.json] })
        object["delivered"] = map(self.delivered)
        object["newest"] = map(self.newest)
        object["meterPerson"] = .object(JSONObject(self.meterPerson.sorted { $0.key < $1.key }.map { ($0.key, JSONValue.string($0.value)) }))
        if let since = self.failingSince { object["failingSince"] = .int(since) }
        return .object(object)
    }

    /// A fresh state: cursor 0, nothing active, an empty log.
    init() {}

    /// The state from `alerts.json`; throws without `cursor` and `nextSeq` or for a bad log entry.
    init(json: JSONValue) throws(WireError) {
        guard case .object(let o) = json, let cursor = o["cursor"]?.intValue, let next = o["nextSeq"]?.intValue else {
            throw WireError(path: [], reason: "not the alert state")
        }
        self.cursor = cursor
        self.nextSeq = next
        self.databaseId = o["databaseId"]?.stringValue
        for entry in o["active"]?.objectValue?.entries ?? [] { self.active[entry.key] = try Wire.ForwardAlert(json: entry.value) }
        for item in o["log"]?.arrayValue ?? [] {
            guard let seq = item["seq"]?.intValue, let alert = item["alert"] else { throw WireError(path: ["log"], reason: "bad entry") }
            self.log.append(LoggedAlert(seq: seq, alert: try Wire.ForwardAlert(json: alert)))
        }
        for entry in o["delivered"]?.objectValue?.entries ?? [] { if let v = entry.value.intValue { self.delivered[entry.key] = v } }
        for entry in o["newest"]?.objectValue?.entries ?? [] { if let v = entry.value.intValue { self.newest[entry.key] = v } }
        for entry in o["meterPerson"]?.objectValue?.entries ?? [] { if let v = entry.value.stringValue { self.meterPerson[entry.key] = v } }
        self.failingSince = o["failingSince"]?.intValue
    }

    /// The alert events `sink` has not had yet, in order.
    func pending(for sink: String) -> [LoggedAlert] {
        let done = self.delivered[sink] ?? .max
        return self.log.filter { $0.seq > done }
    }
}

/// The alert rules as a state machine: readings (in commit order), sugard's health and the time
/// go in; alert events (to publish and deliver) and the state to save come out. No I/O, no clock:
/// ``handle(_:now:)`` takes the wall clock in epoch milliseconds.
///
/// - Glucose rules, per subject (the reading's person, else its meter): `urgent_low` fires for a
///   LO or a value below its limit; `low` for a value below its limit (not when `urgent_low` is
///   already firing: an urgent low covers it); `high` for a HI or a value above its limit. Each
///   fires once per episode and resolves once: `low` and `urgent_low` at the first reading not
///   below the low limit (hysteresis: a reading between the two limits keeps an urgent low
///   firing), `high` at the first reading not above the high limit. A LO resolves `high`, a HI
///   resolves `low`/`urgent_low`. Only glucose values, LO and HI count (never a control test or a
///   ketone record), and only a reading measured after the newest one looked at for the subject
///   (a backlog synced late does not replay its old episodes).
/// - `sync_overdue`, per meter: fires when the meter's last good sync is older than its limit,
///   resolves with the next good sync.
/// - `gateway_failed`: fires when the Bluetooth adapter is missing or off, or sugard's storage
///   has failed, for the limit; resolves when both work again.
/// - Events are saved (``Action/save(_:)``) before they are handed on (``Action/emit(_:)``), so a
///   crash never loses one; a reading looked at again after a crash (the cursor saved before it)
///   finds the state it left and fires nothing twice.
struct AlertStateMachine: Sendable {
    /// The rules' settings from `forward.conf`.
    struct Settings: Sendable {
        /// The alert keys at the top and in `[person NAME]` and `[meter ADDRESS]` sections.
        var config: AlertConfig
        /// The gateway's id, the start of each alert's id.
        var gateway: String
        /// The unit of the alert messages' values.
        var unit: ForwardConfig.Unit = .mgdl
        /// `glucose_low_mgdl` and `glucose_high_mgdl`: the default low and high limits.
        var defaultLow: Double = 70
        /// The default high limit in mg/dL.
        var defaultHigh: Double = 250
        /// `sync_overdue_hours`: the default `sync_overdue` limit, in milliseconds.
        var defaultSyncOverdueMillis: Double = 24 * 3_600_000
        /// The sinks that deliver alert events (`mqtt`, `webhook NAME`).
        var sinks: [String] = []
        /// Recent events kept for `sugarctl alerts` beyond those some sink still needs.
        var recent = 100
        /// The least time between two saves that only move the cursor.
        var cursorSaveMillis: Int64 = 1000
        /// The most events the log holds for a sink that does not take them (a webhook down for
        /// weeks): beyond it the oldest go, and that sink skips them.
        var maxLog = 10_000
    }

    /// What the rules react to.
    enum Event: Sendable {
        /// Readings in commit order, each with its cursor.
        case readings([(cursor: Int64, reading: AlertReading)])
        /// The readings that follow come from database `id`; `previous` not nil: it changed and
        /// they start over from its beginning.
        case database(id: String, previous: String?)
        /// sugard's health: adapter, storage and each meter's last good sync.
        case health(GatewayHealth)
        /// sugard's people and their thresholds (mg/dL).
        case people([String: PersonLimits])
        /// The periodic look at `sync_overdue` and `gateway_failed`.
        case tick
        /// `sink` has every event up to `seq`.
        case delivered(sink: String, seq: Int64)
        /// The forwarder stops: the state is saved when it changed.
        case stop
    }

    /// A person's own low and high limits in mg/dL; nil: the configured or default one.
    struct PersonLimits: Sendable, Equatable {
        /// The person's low limit.
        var low: Double?
        /// The person's high limit.
        var high: Double?
    }

    /// What the caller does, in order.
    enum Action: Sendable, Equatable {
        /// Save `state` durably before the next action.
        case save(AlertState)
        /// New alert events for the sinks.
        case emit([LoggedAlert])
    }

    /// The settings it was made with.
    let settings: Settings
    /// The state as the next save writes it.
    private(set) var state: AlertState
    /// sugard's health as last told.
    private var health: GatewayHealth?
    /// sugard's people and their limits as last read.
    private var people: [String: PersonLimits] = [:]
    /// The state changed since the last save.
    private var dirty = false
    /// When the state was last saved (epoch ms).
    private var lastSave: Int64 = .min / 2

    /// A machine resuming `saved`: a sink new in `settings` starts after the last event, a sink no
    /// longer configured is dropped.
    init(saved: AlertState, settings: Settings) {
        self.settings = settings
        var state = saved
        // A new sink starts with what comes from now on; a sink no longer configured holds nothing back.
        for sink in settings.sinks where state.delivered[sink] == nil { state.delivered[sink] = state.nextSeq - 1 }
        for sink in state.delivered.keys where !settings.sinks.contains(sink) { state.delivered[sink] = nil }
        self.state = state
        self.prune()
    }

    /// The key of a glucose subject: the person, else the meter.
    static func subject(meter: String, person: String?) -> String { person.map { "person/" + $0 } ?? "meter/" + meter }

    /// An active alert's key.
    static func key(_ rule: Wire.ForwardAlert.Rule, _ subject: String) -> String { rule.rawValue + "|" + subject }

    /// Handles one event at `now` (epoch ms) and returns what to do: a save before any new events,
    /// a save that only moves the cursor at most once per ``Settings/cursorSaveMillis``.
    mutating func handle(_ event: Event, now: Int64) -> [Action] {
        var emitted: [LoggedAlert] = []
        switch event {
        case .readings(let list):
            for (cursor, reading) in list {
                self.evaluate(reading, now, &emitted)
                self.state.cursor = cursor
            }
            self.dirty = true
        case .database(let id, let previous):
            self.state.databaseId = id
            if previous != nil { self.state.cursor = 0 }
            self.dirty = true
            return self.finish(emitted, now: now, force: true)
        case .health(let health):
            self.health = health
            self.evaluateHealth(now, &emitted)
        case .people(let people):
            self.people = people
        case .tick:
            self.evaluateHealth(now, &emitted)
        case .delivered(let sink, let seq):
            guard let done = self.state.delivered[sink], seq > done else { return [] }
            self.state.delivered[sink] = min(seq, self.state.nextSeq - 1)
            self.prune()
            self.dirty = true
            return self.finish(emitted, now: now, force: true)
        case .stop:
            return self.dirty ? self.finish([], now: now, force: true) : []
        }
        return self.finish(emitted, now: now, force: false)
    }

    /// A save (and the new events) when there are new events, when `force`, or when the dirty state
    /// waited long enough; nothing otherwise.
    private mutating func finish(_ emitted: [LoggedAlert], now: Int64, force: Bool) -> [Action] {
        guard !emitted.isEmpty || force || (self.dirty && now - self.lastSave >= self.settings.cursorSaveMillis) else { return [] }
        guard self.dirty || !emitted.isEmpty else { return [] }
        self.prune()
        self.dirty = false
        self.lastSave = now
        var actions: [Action] = [.save(self.state)]
        if !emitted.isEmpty { actions.append(.emit(emitted)) }
        return actions
    }

    /// Drops log entries every sink has and that are not among the recent ones, and the oldest
    /// beyond ``Settings/maxLog`` (a sink that had not taken them skips them).
    private mutating func prune() {
        if self.state.log.count > self.settings.maxLog {
            self.state.log.removeFirst(self.state.log.count - self.settings.maxLog)
            let first = self.state.log.first?.seq ?? self.state.nextSeq
            for (sink, done) in self.state.delivered where done < first - 1 { self.state.delivered[sink] = first - 1 }
        }
        let needed = self.state.delivered.values.min().map { $0 + 1 } ?? self.state.nextSeq
        let keepRecent = self.state.nextSeq - Int64(self.settings.recent)
        let first = min(needed, keepRecent)
        if let index = self.state.log.firstIndex(where: { $0.seq >= first }), index > 0 {
            self.state.log.removeFirst(index)
        } else if self.state.log.last.map({ $0.seq < first }) == true {
            self.state.log.removeAll()
        }
    }

    // MARK: Rules

    /// The limits for a reading of `meter` and `person`: configuration, then the person's, then defaults.
    private func limits(meter: String?, person: String?) -> AlertLimits {
        self.settings.config.limits(
            meter: meter, person: person, personThresholds: person.flatMap { self.people[$0] }.map { ($0.low, $0.high) },
            defaultLow: self.settings.defaultLow, defaultHigh: self.settings.defaultHigh,
            defaultSyncOverdueMillis: self.settings.defaultSyncOverdueMillis)
    }

    /// Runs the glucose rules on one reading: notes its meter's person, skips what is not a level or
    /// not newer than the subject's newest, fires and resolves.
    private mutating func evaluate(_ reading: AlertReading, _ now: Int64, _ emitted: inout [LoggedAlert]) {
        if let person = reading.person {
            self.state.meterPerson[reading.meter] = person
        } else if reading.kind.isGlucoseLevel {
            self.state.meterPerson[reading.meter] = nil
        }
        guard reading.kind.isGlucoseLevel, reading.kind != .glucose || reading.mgdL != nil else { return }
        let subject = Self.subject(meter: reading.meter, person: reading.person)
        guard reading.measuredMillis > (self.state.newest[subject] ?? .min) else { return }
        self.state.newest[subject] = reading.measuredMillis
        let limits = self.limits(meter: reading.meter, person: reading.person)
        // Too old to be news (a meter synced after days away, the history at the first start): it
        // fires nothing, but still ends an episode it shows is over.
        if let maxAge = limits.maxAgeMillis, now - reading.measuredMillis > maxAge {
            self.resolveOnly(reading, subject, limits, &emitted)
            return
        }
        let value = reading.mgdL
        let isLO = reading.kind == .lo
        let isHI = reading.kind == .hi
        let high = limits.high.map { isHI || (value ?? 0) > $0 } ?? false
        let urgent = limits.urgentLow.map { isLO || (value ?? .infinity) < $0 } ?? false
        let low = limits.low.map { isLO || (value ?? .infinity) < $0 } ?? false
        let lowActive = self.state.active[Self.key(.low, subject)] != nil
        let urgentActive = self.state.active[Self.key(.urgentLow, subject)] != nil
        if high {
            self.resolve(.urgentLow, subject, reading, &emitted)
            self.resolve(.low, subject, reading, &emitted)
            self.fire(.high, subject, reading, &emitted)
        } else if urgent {
            self.resolve(.high, subject, reading, &emitted)
            self.fire(.urgentLow, subject, reading, &emitted)
        } else if low {
            self.resolve(.high, subject, reading, &emitted)
            if !urgentActive && !lowActive { self.fire(.low, subject, reading, &emitted) }
        } else {
            // Not below the low limit (the urgent one with the low rule off) and not above the high
            // one, or no rule applies any more: every glucose alert of the subject ends.
            self.resolve(.urgentLow, subject, reading, &emitted)
            self.resolve(.low, subject, reading, &emitted)
            self.resolve(.high, subject, reading, &emitted)
        }
    }

    /// A reading that may only end episodes: a value not below the low limit ends `low` and
    /// `urgent_low`, one not above the high limit ends `high` (a LO or HI ends the other side).
    private mutating func resolveOnly(_ reading: AlertReading, _ subject: String, _ limits: AlertLimits, _ emitted: inout [LoggedAlert]) {
        let value = reading.mgdL
        let notLow = reading.kind == .hi || (reading.kind == .glucose && (value ?? 0) >= (limits.low ?? limits.urgentLow ?? 0))
        let notHigh = reading.kind == .lo || (reading.kind == .glucose && (value ?? .infinity) <= (limits.high ?? .infinity))
        if notLow {
            self.resolve(.urgentLow, subject, reading, &emitted)
            self.resolve(.low, subject, reading, &emitted)
        }
        if notHigh { self.resolve(.high, subject, reading, &emitted) }
    }

    /// Fires `rule` for the subject with this reading, unless it is firing already.
    private mutating func fire(
        _ rule: Wire.ForwardAlert.Rule, _ subject: String, _ reading: AlertReading, _ emitted: inout [LoggedAlert]
    ) {
        let key = Self.key(rule, subject)
        guard self.state.active[key] == nil else { return }
        let alert = Wire.ForwardAlert(
            id: self.alertId(rule, subject, reading.measuredMillis), rule: rule, state: .firing, person: reading.person,
            meter: reading.meter, reading: reading.id, timeMillis: reading.measuredMillis, value: reading.mgdL,
            message: self.message(rule, .firing, reading))
        self.state.active[key] = alert
        self.log(alert, &emitted)
    }

    /// Resolves `rule` for the subject with this reading, when it is firing.
    private mutating func resolve(
        _ rule: Wire.ForwardAlert.Rule, _ subject: String, _ reading: AlertReading, _ emitted: inout [LoggedAlert]
    ) {
        guard let firing = self.state.active.removeValue(forKey: Self.key(rule, subject)) else { return }
        let alert = Wire.ForwardAlert(
            id: firing.id, rule: rule, state: .resolved, person: firing.person, meter: reading.meter, reading: reading.id,
            timeMillis: reading.measuredMillis, value: reading.mgdL, message: self.message(rule, .resolved, reading))
        self.log(alert, &emitted)
    }

    /// Runs `sync_overdue` for each meter and `gateway_failed` on sugard's health.
    private mutating func evaluateHealth(_ now: Int64, _ emitted: inout [LoggedAlert]) {
        guard let health = self.health else { return }
        for (meter, last) in health.lastSync.sorted(by: { $0.key < $1.key }) {
            let person = self.state.meterPerson[meter]
            let key = Self.key(.syncOverdue, "meter/" + meter)
            let limit = self.limits(meter: meter, person: person).syncOverdueMillis
            let overdue = limit.map { now - last > $0 } ?? false
            if overdue, self.state.active[key] == nil, let limit {
                // Minutes below two hours (a short alert_sync_overdue), hours above.
                let minutes = (now - last) / 60_000
                let since = minutes < 120 ? "\(minutes) min" : ReadingExport.formatted(Double(now - last) / 3_600_000, digits: 0) + " h"
                let alert = Wire.ForwardAlert(
                    id: self.alertId(.syncOverdue, "meter/" + meter, last + limit), rule: .syncOverdue, state: .firing, person: person,
                    meter: meter, reading: nil, timeMillis: last + limit, value: nil,
                    message: "Meter \(meter)\(person.map { " (\($0))" } ?? "") has not synced for \(since) (last good sync \(Wire.Instant(epochMillis: last).iso))")
                self.state.active[key] = alert
                self.log(alert, &emitted)
            } else if !overdue, let firing = self.state.active.removeValue(forKey: key) {
                let alert = Wire.ForwardAlert(
                    id: firing.id, rule: .syncOverdue, state: .resolved, person: person, meter: meter, reading: nil,
                    timeMillis: max(last, firing.timeMillis), value: nil,
                    message: "Meter \(meter)\(person.map { " (\($0))" } ?? "") synced again")
                self.log(alert, &emitted)
            }
        }
        let key = Self.key(.gatewayFailed, "gateway")
        let adapterFailed = health.adapterWorking == false
        let storageFailed = health.storageFailed == true
        if adapterFailed || storageFailed {
            let since = self.state.failingSince ?? now
            if self.state.failingSince == nil {
                self.state.failingSince = since
                self.dirty = true
            }
            let limit = self.limits(meter: nil, person: nil).gatewayFailedMillis
            if let limit, now - since >= limit, self.state.active[key] == nil {
                let what = [adapterFailed ? "the Bluetooth adapter is missing or off" : nil, storageFailed ? "sugard's storage has failed" : nil]
                    .compactMap { $0 }.joined(separator: " and ")
                let alert = Wire.ForwardAlert(
                    id: self.alertId(.gatewayFailed, "gateway", since + limit), rule: .gatewayFailed, state: .firing, person: nil,
                    meter: nil, reading: nil, timeMillis: since + limit, value: nil,
                    message: "Gateway \(self.settings.gateway): \(what) (since \(Wire.Instant(epochMillis: since).iso))")
                self.state.active[key] = alert
                self.log(alert, &emitted)
            }
        } else if health.adapterWorking == true {
            if self.state.failingSince != nil {
                self.state.failingSince = nil
                self.dirty = true
            }
            if let firing = self.state.active.removeValue(forKey: key) {
                let alert = Wire.ForwardAlert(
                    id: firing.id, rule: .gatewayFailed, state: .resolved, person: nil, meter: nil, reading: nil, timeMillis: now,
                    value: nil, message: "Gateway \(self.settings.gateway): the Bluetooth adapter and the storage work again")
                self.log(alert, &emitted)
            }
        }
    }

    /// Appends an event to the log with the next seq and to `emitted`.
    private mutating func log(_ alert: Wire.ForwardAlert, _ emitted: inout [LoggedAlert]) {
        let entry = LoggedAlert(seq: self.state.nextSeq, alert: alert)
        self.state.nextSeq += 1
        self.state.log.append(entry)
        emitted.append(entry)
        self.dirty = true
    }

    /// An episode's id: the gateway, the rule, the subject and when it began (the same when a
    /// reading is looked at again after a crash).
    private func alertId(_ rule: Wire.ForwardAlert.Rule, _ subject: String, _ millis: Int64) -> String {
        "\(self.settings.gateway)/\(rule.rawValue)/\(subject)/\(millis)"
    }

    /// The alert's title: `Low glucose`, `Urgent low glucose`, `High glucose`, `Meter not synced`, `Gateway failed`.
    static func title(_ rule: Wire.ForwardAlert.Rule) -> String {
        switch rule {
        case .low: "Low glucose"
        case .urgentLow: "Urgent low glucose"
        case .high: "High glucose"
        case .syncOverdue: "Meter not synced"
        case .gatewayFailed: "Gateway failed"
        }
    }

    /// "Urgent low glucose: LO (below the meter's range) for anna" / "Low glucose resolved: 85 mg/dL for anna".
    private func message(_ rule: Wire.ForwardAlert.Rule, _ state: Wire.ForwardAlert.State, _ reading: AlertReading) -> String {
        let value: String
        switch reading.kind {
        case .lo: value = "LO (below the meter's range)"
        case .hi: value = "HI (above the meter's range)"
        default:
            value = (self.settings.unit == .mgdl ? Wire.Unit.mgdl : .mmol).text(mgdL: reading.mgdL ?? 0)
        }
        let who = reading.person.map { "for \($0) (meter \(reading.meter))" } ?? "on meter \(reading.meter)"
        return "\(Self.title(rule))\(state == .resolved ? " resolved" : ""): \(value) \(who)"
    }
}
