import GlucoseProfile
import HealthDataSync

// People, assignment periods and attributions (schema v5, SchemaV5.swift). All functions run on
// the caller's connection inside the caller's transaction.

/// A `meter_assignment` row.
struct AssignmentRow {
    /// `meter_assignment.id`.
    var id: Int64
    /// The person's row id; nil for a shared period.
    var personID: Int64?
    /// The person's name; nil for a shared period.
    var personName: String?
    /// Start of the period (epoch ms, inclusive).
    var from: Int64
    /// End of the period (epoch ms, exclusive); nil while it lasts.
    var until: Int64?

    /// Who holds the meter in the period.
    var holder: MeterHolder { self.personName.map { .person($0) } ?? .shared }

    /// Whether the period covers `instant` (milliseconds).
    func covers(_ instant: Int64) -> Bool { self.from <= instant && (self.until.map { instant < $0 } ?? true) }
}

/// `meter_assignment` rows and the reattribution of readings they imply.
enum AssignmentRows {
    /// The meter's periods, oldest first, with their persons' names.
    static func load(meterRowID: Int64, _ db: Connection) throws(StoreError) -> [AssignmentRow] {
        try db.withStatement(
            """
            SELECT a.id, a.person_id, p.name, a.from_ms, a.until_ms FROM meter_assignment a
            LEFT JOIN person p ON p.id = a.person_id WHERE a.meter_id = ? ORDER BY a.from_ms
            """
        ) { (s) throws(StoreError) -> [AssignmentRow] in
            try s.bind(meterRowID, at: 1)
            var rows: [AssignmentRow] = []
            while try s.step("Loading the assignments of a meter in \(db.path)") {
                rows.append(
                    AssignmentRow(
                        id: s.int64(0), personID: s.optionalInt64(1), personName: s.optionalText(2), from: s.int64(3),
                        until: s.optionalInt64(4)))
            }
            return rows
        }
    }

    /// Whether the meter has any assignment period (else its readings are nobody's).
    static func hasPeriods(meterRowID: Int64, _ db: Connection) throws(StoreError) -> Bool {
        try db.withStatement("SELECT 1 FROM meter_assignment WHERE meter_id = ? LIMIT 1") { (s) throws(StoreError) -> Bool in
            try s.bind(meterRowID, at: 1)
            return try s.step("Looking up the assignments of a meter in \(db.path)")
        }
    }

    /// Who holds the meter in its open period (the one without an end), if it has one.
    static func openHolder(meterRowID: Int64, _ db: Connection) throws(StoreError) -> MeterHolder? {
        try Self.load(meterRowID: meterRowID, db).last { $0.until == nil }?.holder
    }

    /// The person and waiting flag of one stored reading (as the insert trigger set them).
    static func personOfReading(_ id: Int64, _ db: Connection) throws(StoreError) -> (String?, Bool) {
        try db.withStatement(
            "SELECT p.name, r.shared = 1 AND r.person_id IS NULL FROM reading r LEFT JOIN person p ON p.id = r.person_id WHERE r.id = ?"
        ) { (s) throws(StoreError) -> (String?, Bool) in
            try s.bind(id, at: 1)
            guard try s.step("Looking up the person of reading \(id) in \(db.path)") else { return (nil, false) }
            return (s.optionalText(0), s.int64(1) != 0)
        }
    }

    /// The row id of the person `name`; throws ``StoreError/Code/constraint`` naming how to add them.
    static func personID(named name: String, _ db: Connection) throws(StoreError) -> Int64 {
        let id = try db.withStatement("SELECT id FROM person WHERE name = ?") { (s) throws(StoreError) -> Int64? in
            try s.bind(name, at: 1)
            return try s.step("Looking up person \(name) in \(db.path)") ? s.int64(0) : nil
        }
        guard let id else {
            throw StoreError(.constraint, "No person named \(name) is known; add them first (sugarctl people add \(name)).")
        }
        return id
    }

    /// Gives the meter's readings measured in [from, until) to `personID` (nil: nobody) with the
    /// shared flag `shared`; each reading whose person changes gets a feed entry first. Returns
    /// (moved, unchanged).
    static func reattribute(
        meterRowID: Int64, from: Int64, until: Int64?, personID: Int64?, shared: Bool, _ db: Connection
    ) throws(StoreError) -> (Int, Int) {
        let range = "meter_id = ?1 AND instant_ms >= ?2 AND (?3 IS NULL OR instant_ms < ?3)"
        func bindRange(_ s: Statement) throws(StoreError) {
            try s.bind(meterRowID, at: 1)
            try s.bind(from, at: 2)
            try s.bind(until, at: 3)
            try s.bind(personID, at: 4)
        }
        try db.withStatement(
            "INSERT INTO feed (reading_id, person_id) SELECT id, ?4 FROM reading WHERE \(range) AND person_id IS NOT ?4 ORDER BY id"
        ) { (s) throws(StoreError) in
            try bindRange(s)
            try s.run("Recording person changes in \(db.path)")
        }
        let moved = try db.withStatement(
            "UPDATE reading SET person_id = ?4 WHERE \(range) AND person_id IS NOT ?4"
        ) { (s) throws(StoreError) -> Int in
            try bindRange(s)
            try s.run("Changing the person of readings in \(db.path)")
            return db.changes
        }
        try db.withStatement("UPDATE reading SET shared = ?5 WHERE \(range) AND shared != ?5") { (s) throws(StoreError) in
            try bindRange(s)
            try s.bind(Int64(shared ? 1 : 0), at: 5)
            try s.run("Marking shared readings in \(db.path)")
        }
        let total = try db.withStatement("SELECT count(*) FROM reading WHERE \(range) AND ?4 IS ?4") {
            (s) throws(StoreError) -> Int in
            try bindRange(s)
            _ = try s.step("Counting readings in \(db.path)")
            return Int(s.int64(0))
        }
        return (moved, total - moved)
    }

    /// Readings of the meter measured in [from, until) (the period's count for `history`).
    static func count(meterRowID: Int64, from: Int64, until: Int64?, _ db: Connection) throws(StoreError) -> Int {
        try db.withStatement(
            "SELECT count(*) FROM reading WHERE meter_id = ?1 AND instant_ms >= ?2 AND (?3 IS NULL OR instant_ms < ?3)"
        ) { (s) throws(StoreError) -> Int in
            try s.bind(meterRowID, at: 1)
            try s.bind(from, at: 2)
            try s.bind(until, at: 3)
            _ = try s.step("Counting readings of a period in \(db.path)")
            return Int(s.int64(0))
        }
    }

    /// Starts a period for `holder` at `from` (nil: ends the period covering `from`) and moves the
    /// readings of the changed span. See ``SQLiteReadingStore/setAssignment(_:holder:from:)``.
    static func set(
        meter: MeterRow, holder: MeterHolder?, from: Int64, now: Int64, _ db: Connection
    ) throws(StoreError) -> AttributionResult {
        let periods = try Self.load(meterRowID: meter.rowID, db)
        let covering = periods.first { $0.covers(from) }
        let id = meter.identity.id
        guard let holder else {
            guard let covering else {
                throw StoreError(
                    .constraint, "Meter \(id) is not assigned at \(Instant(epochMillis: from).isoString): nothing to end.")
            }
            try Self.end(covering, at: from, db)
            let (moved, unchanged) = try Self.reattribute(
                meterRowID: meter.rowID, from: from, until: covering.until, personID: nil, shared: false, db)
            return AttributionResult(moved: moved, unchanged: unchanged)
        }
        var personID: Int64?
        if case .person(let name) = holder { personID = try Self.personID(named: name, db) }
        if let covering, covering.holder == holder {
            throw StoreError(
                .constraint,
                "Meter \(id) is already \(Self.describe(holder)) since \(Instant(epochMillis: covering.from).isoString).")
        }
        if let covering { try Self.end(covering, at: from, db) }
        let until = periods.first { $0.from > from }?.from
        try db.withStatement(
            "INSERT INTO meter_assignment (meter_id, person_id, from_ms, until_ms, set_ms) VALUES (?, ?, ?, ?, ?)"
        ) { (s) throws(StoreError) in
            try s.bind(meter.rowID, at: 1)
            try s.bind(personID, at: 2)
            try s.bind(from, at: 3)
            try s.bind(until, at: 4)
            try s.bind(now, at: 5)
            try s.run("Assigning meter \(id) in \(db.path)")
        }
        let (moved, unchanged) = try Self.reattribute(
            meterRowID: meter.rowID, from: from, until: until, personID: personID, shared: holder == .shared, db)
        return AttributionResult(moved: moved, unchanged: unchanged)
    }

    /// `assigned to NAME` or `shared`, for messages.
    static func describe(_ holder: MeterHolder) -> String {
        switch holder {
        case .person(let name): return "assigned to \(name)"
        case .shared: return "shared"
        }
    }

    /// Ends `period` at `at`: it is removed when it would be empty.
    private static func end(_ period: AssignmentRow, at: Int64, _ db: Connection) throws(StoreError) {
        let sql =
            period.from >= at
            ? "DELETE FROM meter_assignment WHERE id = ?1" : "UPDATE meter_assignment SET until_ms = ?2 WHERE id = ?1"
        try db.withStatement(sql) { (s) throws(StoreError) in
            try s.bind(period.id, at: 1)
            if period.from < at { try s.bind(at, at: 2) }
            try s.run("Ending an assignment period in \(db.path)")
        }
    }
}

/// `person` and `person_identifier` rows.
enum PersonRows {
    /// People matching `condition` (its `?1` bound to `bind`), sorted by name, with their identifiers
    /// and, when `counts`, their reading counts (0 otherwise).
    static func load(where condition: String, bind: String?, counts: Bool, _ db: Connection) throws(StoreError)
        -> [PersonRecord]
    {
        let countColumn = counts ? "(SELECT count(*) FROM reading WHERE person_id = person.id)" : "0"
        var people = try db.withStatement(
            "SELECT id, name, low_mgdl, high_mgdl, unit, created_ms, \(countColumn) FROM person \(condition) ORDER BY name"
        ) { (s) throws(StoreError) -> [PersonRecord] in
            if let bind { try s.bind(bind, at: 1) }
            var out: [PersonRecord] = []
            while try s.step("Listing people in \(db.path)") {
                out.append(
                    PersonRecord(
                        id: s.int64(0), name: s.optionalText(1) ?? "", lowMgdL: s.optionalDouble(2),
                        highMgdL: s.optionalDouble(3),
                        unit: s.optionalText(4).flatMap { GlucoseUnit(rawValue: $0) },
                        created: Instant(epochMillis: s.int64(5)), readingCount: Int(s.int64(6))))
            }
            return out
        }
        try db.withStatement("SELECT system, value FROM person_identifier WHERE person_id = ? ORDER BY system, value") {
            (s) throws(StoreError) in
            for index in people.indices {
                s.reset()
                try s.bind(people[index].id, at: 1)
                while try s.step("Listing identifiers in \(db.path)") {
                    people[index].identifiers.append(
                        PersonIdentifier(system: s.optionalText(0) ?? "", value: s.optionalText(1) ?? ""))
                }
            }
        }
        return people
    }

    /// The person `name`, if known.
    static func named(_ name: String, counts: Bool, _ db: Connection) throws(StoreError) -> PersonRecord? {
        try Self.load(where: "WHERE name = ?1", bind: name, counts: counts, db).first
    }

    /// The `person.unit` column text: `mgdl`, `mmol` or NULL.
    static func unitText(_ unit: GlucoseUnit?) -> String? { unit?.rawValue }

    /// Throws ``StoreError/Code/constraint`` unless each threshold is above 0 and below 1000 mg/dL
    /// and low is below high.
    static func checkThresholds(low: Double?, high: Double?) throws(StoreError) {
        for value in [low, high].compactMap({ $0 }) where !(value > 0 && value < 1000) {
            throw StoreError(.constraint, "A threshold is a glucose value above 0 and below 1000 mg/dL.")
        }
        if let low, let high, low >= high {
            throw StoreError(.constraint, "The low threshold must be below the high threshold.")
        }
    }

    /// Adds identifiers to the person (`name` for messages); one another person holds throws
    /// ``StoreError/Code/constraint``, one they hold already is kept.
    static func addIdentifiers(_ identifiers: [PersonIdentifier], personID: Int64, name: String, _ db: Connection)
        throws(StoreError)
    {
        try db.withStatement("SELECT p.name FROM person_identifier i JOIN person p ON p.id = i.person_id WHERE system = ? AND value = ?") {
            (s) throws(StoreError) in
            for identifier in identifiers {
                s.reset()
                try s.bind(identifier.system, at: 1)
                try s.bind(identifier.value, at: 2)
                if try s.step("Looking up an identifier in \(db.path)"), let holder = s.optionalText(0), holder != name {
                    throw StoreError(
                        .constraint, "The identifier \(identifier.system)|\(identifier.value) belongs to \(holder) already.")
                }
            }
        }
        try db.withStatement("INSERT OR IGNORE INTO person_identifier (person_id, system, value) VALUES (?, ?, ?)") {
            (s) throws(StoreError) in
            for identifier in identifiers {
                s.reset()
                try s.bind(personID, at: 1)
                try s.bind(identifier.system, at: 2)
                try s.bind(identifier.value, at: 3)
                try s.run("Adding an identifier in \(db.path)")
            }
        }
    }
}
