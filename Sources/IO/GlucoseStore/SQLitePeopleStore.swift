import HealthDataSync

/// People, assignments with time and attributions (schema v5).
///
/// Each operation is one transaction. A reading's person is kept in `reading.person_id`: set
/// from the period covering its measured time when it is stored, changed by an assignment change
/// that reaches into the past (only the readings inside the changed span move) or by an
/// attribution (only readings of shared periods). Every change of a reading's person adds a feed
/// entry, so followers (sugard-forward) see the reading again with its new person.
extension SQLiteReadingStore: PeopleStore {
    /// Every person, sorted by name, with identifiers (and reading counts when asked).
    public func people(includeCounts: Bool) throws(StoreError) -> [PersonRecord] {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) -> [PersonRecord] in
            try PersonRows.load(where: "", bind: nil, counts: includeCounts, db)
        }
    }

    /// The person `name` with identifiers and reading count; nil when unknown.
    public func person(named name: String) throws(StoreError) -> PersonRecord? {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) -> PersonRecord? in
            try PersonRows.named(name, counts: true, db)
        }
    }

    /// Adds a person (`id`, `created` and `readingCount` of `person` are ignored). Throws
    /// `.constraint` for a name in use, an identifier another person holds, or thresholds out of order.
    public func addPerson(_ person: PersonRecord) throws(StoreError) -> PersonRecord {
        let now = self.options.now()
        return try self.withDatabase(writing: true) { (db: Connection) throws(StoreError) -> PersonRecord in
            try db.transaction("Adding person \(person.name)") { () throws(StoreError) -> PersonRecord in
                try self.insertPersonRow(person, now: now, db)
                guard let added = try PersonRows.named(person.name, counts: true, db) else {
                    throw StoreError(.other, "Adding person \(person.name) failed: the row is missing.")
                }
                return added
            }
        }
    }

    /// Applies `change` (rename, identifiers added and removed, thresholds, unit) in one transaction.
    /// Throws `.constraint` for an unknown person, a name in use, an identifier held by another, or
    /// thresholds out of order.
    public func editPerson(named name: String, _ change: PersonChange) throws(StoreError) -> PersonRecord {
        try self.withDatabase(writing: true) { (db: Connection) throws(StoreError) -> PersonRecord in
            try db.transaction("Editing person \(name)") { () throws(StoreError) -> PersonRecord in
                guard var person = try PersonRows.named(name, counts: false, db) else {
                    throw StoreError(.constraint, "No person named \(name) is known.")
                }
                if let newName = change.name, newName != name {
                    if newName.isEmpty || newName.count > Schema.maxPersonLength {
                        throw StoreError(.constraint, "A person's name has 1 to \(Schema.maxPersonLength) characters.")
                    }
                    if try PersonRows.named(newName, counts: false, db) != nil {
                        throw StoreError(.constraint, "A person named \(newName) exists already.")
                    }
                    person.name = newName
                }
                if let low = change.lowMgdL { person.lowMgdL = low }
                if let high = change.highMgdL { person.highMgdL = high }
                if let unit = change.unit { person.unit = unit }
                try PersonRows.checkThresholds(low: person.lowMgdL, high: person.highMgdL)
                try db.withStatement("UPDATE person SET name = ?, low_mgdl = ?, high_mgdl = ?, unit = ? WHERE id = ?") {
                    (s) throws(StoreError) in
                    try s.bind(person.name, at: 1)
                    try s.bind(person.lowMgdL, at: 2)
                    try s.bind(person.highMgdL, at: 3)
                    try s.bind(PersonRows.unitText(person.unit), at: 4)
                    try s.bind(person.id, at: 5)
                    try s.run("Editing person \(name) in \(db.path)")
                }
                try db.withStatement("DELETE FROM person_identifier WHERE person_id = ? AND system = ? AND value = ?") {
                    (s) throws(StoreError) in
                    for identifier in change.removeIdentifiers {
                        s.reset()
                        try s.bind(person.id, at: 1)
                        try s.bind(identifier.system, at: 2)
                        try s.bind(identifier.value, at: 3)
                        try s.run("Removing an identifier of \(name) in \(db.path)")
                    }
                }
                try PersonRows.addIdentifiers(change.addIdentifiers, personID: person.id, name: person.name, db)
                guard let edited = try PersonRows.named(person.name, counts: true, db) else {
                    throw StoreError(.other, "Editing person \(name) failed: the row is missing.")
                }
                return edited
            }
        }
    }

    /// Removes a person. Their readings stay (meter, values, times) and have no person afterwards;
    /// the periods that named them are removed, so their meters are unassigned in them; earlier
    /// feed entries no longer name them. Without `force`, a person with readings is refused.
    public func removePerson(named name: String, force: Bool) throws(StoreError) -> PersonRemoval {
        try self.withDatabase(writing: true) { (db: Connection) throws(StoreError) -> PersonRemoval in
            try db.transaction("Removing person \(name)") { () throws(StoreError) -> PersonRemoval in
                guard let person = try PersonRows.named(name, counts: true, db) else {
                    throw StoreError(.constraint, "No person named \(name) is known.")
                }
                if person.readingCount > 0 && !force {
                    throw StoreError(
                        .constraint,
                        "\(name) has \(person.readingCount) reading(s). Removing \(name) keeps them (meter, values, times) "
                            + "without a person, and ends the meter assignments that name \(name); repeat with --force to do so.")
                }
                var counts: [Int] = []
                for sql in [
                    "UPDATE reading SET person_id = NULL WHERE person_id = ?",
                    "DELETE FROM meter_assignment WHERE person_id = ?",
                    "UPDATE feed SET person_id = NULL WHERE person_id = ?",
                    "DELETE FROM person_identifier WHERE person_id = ?",
                    "DELETE FROM person WHERE id = ?",
                ] {
                    try db.withStatement(sql) { (s) throws(StoreError) in
                        try s.bind(person.id, at: 1)
                        try s.run("Removing person \(name) from \(db.path)")
                    }
                    counts.append(db.changes)
                }
                return PersonRemoval(releasedReadings: counts[0], removedAssignments: counts[1])
            }
        }
    }

    /// Starts a period of `meter` for `holder` at `from` and ends the one covering `from` (nil
    /// holder: only ends it). The new period lasts until the next later period starts (or stays
    /// open). Readings measured inside the changed span move to the new holder; readings before
    /// `from` keep theirs. Throws `.constraint` for an unknown meter or person, a holder the meter
    /// already has at `from`, or nothing to end.
    public func setAssignment(_ meter: MeterID, holder: MeterHolder?, from: Instant) throws(StoreError) -> AttributionResult {
        let now = self.options.now()
        return try self.withDatabase(writing: true) { (db: Connection) throws(StoreError) -> AttributionResult in
            try db.transaction("Changing the assignment of meter \(meter)") { () throws(StoreError) -> AttributionResult in
                guard let row = try MeterRow.load(meter, db) else { throw StoreError(.constraint, "No meter \(meter) is stored.") }
                return try AssignmentRows.set(meter: row, holder: holder, from: from.epochMillis, now: now.epochMillis, db)
            }
        }
    }

    /// The meter's periods, oldest first, each with the readings measured in it.
    public func assignments(_ meter: MeterID) throws(StoreError) -> [MeterAssignment] {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) -> [MeterAssignment] in
            guard let row = try MeterRow.load(meter, db) else { throw StoreError(.constraint, "No meter \(meter) is stored.") }
            return try AssignmentRows.load(meterRowID: row.rowID, db).map { (period) throws(StoreError) -> MeterAssignment in
                MeterAssignment(
                    meter: meter, holder: period.holder, from: Instant(epochMillis: period.from),
                    until: period.until.map { Instant(epochMillis: $0) },
                    readingCount: try AssignmentRows.count(meterRowID: row.rowID, from: period.from, until: period.until, db))
            }
        }
    }

    /// Gives readings measured while their meter was shared to `person`. Readings named by id must
    /// exist and be of a shared period; one that was given to someone else moves (a correction). A
    /// meter's time window gives only the readings that wait; those given already are `unchanged`.
    public func attribute(_ target: AttributionTarget, person: String) throws(StoreError) -> AttributionResult {
        try self.withDatabase(writing: true) { (db: Connection) throws(StoreError) -> AttributionResult in
            try db.transaction("Attributing readings to \(person)") { () throws(StoreError) -> AttributionResult in
                let personID = try AssignmentRows.personID(named: person, db)
                var moved = 0
                var unchanged = 0
                switch target {
                case .readings(let ids):
                    for id in ids {
                        let found = try db.withStatement(
                            "SELECT r.shared, p.name FROM reading r LEFT JOIN person p ON p.id = r.person_id WHERE r.id = ?"
                        ) { (s) throws(StoreError) -> (Bool, String?)? in
                            try s.bind(id, at: 1)
                            return try s.step("Looking up reading \(id) in \(db.path)") ? (s.int64(0) != 0, s.optionalText(1)) : nil
                        }
                        guard let (shared, owner) = found else { throw StoreError(.constraint, "No reading \(id) is stored.") }
                        guard shared else {
                            throw StoreError(
                                .constraint,
                                "Reading \(id) was not measured while its meter was shared (it belongs to "
                                    + "\(owner ?? "nobody") by its meter's assignment); change the assignment instead.")
                        }
                        let changed = try Self.give(where: "id = ?2", bindText: nil, bindInt: id, personID: personID, db)
                        moved += changed
                        unchanged += 1 - changed
                    }
                case .meter(let meter, let since, let until):
                    guard let row = try MeterRow.load(meter, db) else { throw StoreError(.constraint, "No meter \(meter) is stored.") }
                    let window = "meter_id = ?2 AND shared = 1 AND instant_ms >= \(since.epochMillis) AND instant_ms < \(until.epochMillis)"
                    // A time window gives only what waits: readings already given to someone keep them
                    // (name them by id to correct one).
                    let condition = window + " AND person_id IS NULL"
                    let total = try db.withStatement("SELECT count(*) FROM reading WHERE \(window) AND ?1 IS ?1") {
                        (s) throws(StoreError) -> Int in
                        try s.bind(personID, at: 1)
                        try s.bind(row.rowID, at: 2)
                        _ = try s.step("Counting shared readings in \(db.path)")
                        return Int(s.int64(0))
                    }
                    moved = try Self.give(where: condition, bindText: nil, bindInt: row.rowID, personID: personID, db)
                    unchanged = total - moved
                }
                return AttributionResult(moved: moved, unchanged: unchanged)
            }
        }
    }

    /// Sets `person_id = ?1` on the readings matching `condition` (its ?2 bound to `bindInt`)
    /// whose person differs, after a feed entry for each. Returns how many changed.
    private static func give(
        where condition: String, bindText: String?, bindInt: Int64, personID: Int64, _ db: Connection
    ) throws(StoreError) -> Int {
        try db.withStatement(
            "INSERT INTO feed (reading_id, person_id) SELECT id, ?1 FROM reading WHERE \(condition) AND person_id IS NOT ?1 ORDER BY id"
        ) { (s) throws(StoreError) in
            try s.bind(personID, at: 1)
            try s.bind(bindInt, at: 2)
            try s.run("Recording an attribution in \(db.path)")
        }
        return try db.withStatement("UPDATE reading SET person_id = ?1 WHERE \(condition) AND person_id IS NOT ?1") {
            (s) throws(StoreError) -> Int in
            try s.bind(personID, at: 1)
            try s.bind(bindInt, at: 2)
            try s.run("Attributing readings in \(db.path)")
            return db.changes
        }
    }

    /// Readings of shared periods that nobody was given yet.
    public func unattributedCount() throws(StoreError) -> Int {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) -> Int in
            Int(try db.scalarInt("SELECT count(*) FROM reading WHERE shared = 1 AND person_id IS NULL", "Counting unattributed readings in \(db.path)") ?? 0)
        }
    }

    /// The gateway's identity (schema v5); throws `.corrupt` when the row is missing.
    public func gatewayID() throws(StoreError) -> String {
        try self.withDatabase(writing: false) { (db: Connection) throws(StoreError) -> String in
            guard let id = try db.textColumn("SELECT uuid FROM gateway_identity WHERE id = 1", "Reading the gateway id of \(db.path)").first
            else { throw StoreError(.corrupt, "The database \(db.path) has no gateway identity.") }
            return id
        }
    }
}
