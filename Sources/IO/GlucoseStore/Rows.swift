import GlucoseProfile
import HealthDataSync

// Row mapping between the schema (Schema.v1) and the domain types. All functions run on the
// caller's connection, inside whatever transaction the caller holds.

/// A `meter` row.
package struct MeterRow {
    /// `meter.id`.
    package var rowID: Int64
    /// Address and the strings the meter reported.
    var identity: MeterIdentity
    /// Glucose Feature bits, when read.
    var features: UInt16?
    /// When the meter was first seen.
    var firstSeen: Instant
    /// When it was last seen (only moves forward).
    var lastSeen: Instant
    /// The current epoch: counts the sequence resets.
    var epoch: Int
    /// Highest sequence number committed after a successful sync in the current epoch.
    var highWater: UInt16?
    /// When the last sync ended.
    var lastSync: Instant?
    /// How it ended.
    var lastSyncResult: SyncResult?
    /// When the meter was forgotten (hidden, data kept); nil for a listed meter.
    var forgotten: Instant?
    /// How it is downloaded (schema v6); nil until a sync connected.
    var procedure: MeterProcedure?
    /// Whether its clock can be set (schema v6); nil until a sync connected.
    var clockSettable: Bool?

    /// The `meter` columns in the order ``init(_:)`` reads them.
    static let columns = """
        id, address, name, manufacturer, model, serial_number, firmware, features, first_seen_ms, last_seen_ms,
        epoch, high_water, last_sync_ms, last_sync_result, forgotten_ms, procedure, clock_settable
        """

    /// The row at the statement's current result row (selected with ``columns``).
    init(_ s: Statement) {
        self.rowID = s.int64(0)
        self.identity = MeterIdentity(
            id: MeterID(rawValue: s.optionalText(1) ?? ""), name: s.optionalText(2), manufacturer: s.optionalText(3),
            model: s.optionalText(4), serialNumber: s.optionalText(5), firmware: s.optionalText(6))
        self.features = s.optionalInt64(7).map { UInt16(truncatingIfNeeded: $0) }
        self.firstSeen = Instant(epochMillis: s.int64(8))
        self.lastSeen = Instant(epochMillis: s.int64(9))
        self.epoch = Int(s.int64(10))
        self.highWater = s.optionalInt64(11).map { UInt16(truncatingIfNeeded: $0) }
        self.lastSync = s.optionalInt64(12).map { Instant(epochMillis: $0) }
        self.lastSyncResult = s.optionalText(13).flatMap { SyncResult(rawValue: $0) }
        self.forgotten = s.optionalInt64(14).map { Instant(epochMillis: $0) }
        self.procedure = s.optionalText(15).flatMap { MeterProcedure(rawValue: $0) }
        self.clockSettable = s.optionalInt64(16).map { $0 != 0 }
    }

    /// Records how the meter is downloaded and whether its clock can be set (nil keeps what is stored).
    mutating func saveCapabilities(procedure: MeterProcedure?, clockSettable: Bool?, _ db: Connection) throws(StoreError) {
        guard procedure != nil || clockSettable != nil,
            procedure != self.procedure || clockSettable != self.clockSettable
        else { return }
        self.procedure = procedure ?? self.procedure
        self.clockSettable = clockSettable ?? self.clockSettable
        try db.withStatement("UPDATE meter SET procedure = ?, clock_settable = ? WHERE id = ?") { (s) throws(StoreError) in
            try s.bind(self.procedure?.rawValue, at: 1)
            try s.bind(self.clockSettable.map { Int64($0 ? 1 : 0) }, at: 2)
            try s.bind(self.rowID, at: 3)
            try s.run("Saving the procedure of meter \(self.identity.id) in \(db.path)")
        }
    }

    /// The meter with this address, forgotten or not; nil when there is none.
    static func load(_ id: MeterID, _ db: Connection) throws(StoreError) -> MeterRow? {
        try db.withStatement("SELECT \(Self.columns) FROM meter WHERE address = ?") {
            (s) throws(StoreError) -> MeterRow? in
            try s.bind(id.rawValue, at: 1)
            return try s.step("Loading meter \(id) from \(db.path)") ? MeterRow(s) : nil
        }
    }

    /// Every meter row, forgotten ones too, ordered by address.
    static func loadAll(_ db: Connection) throws(StoreError) -> [MeterRow] {
        try db.withStatement("SELECT \(Self.columns) FROM meter ORDER BY address") {
            (s) throws(StoreError) -> [MeterRow] in
            var rows: [MeterRow] = []
            while try s.step("Listing meters in \(db.path)") { rows.append(MeterRow(s)) }
            return rows
        }
    }

    /// Creates the meter or updates what is known about it: identity strings and features that are
    /// given replace stored ones (nil keeps them), `last_seen` only moves forward, and a forgotten
    /// meter comes back. Returns whether the serial number changed (both known and different),
    /// which the caller treats as a sequence reset.
    package static func upsert(
        _ identity: MeterIdentity, features: UInt16?, seenAt: Instant, _ db: Connection
    ) throws(StoreError) -> (MeterRow, serialChanged: Bool) {
        guard var row = try Self.load(identity.id, db) else {
            try db.withStatement(
                """
                INSERT INTO meter (address, name, manufacturer, model, serial_number, firmware, features,
                    first_seen_ms, last_seen_ms, epoch) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0)
                """
            ) { (s) throws(StoreError) in
                try s.bind(identity.id.rawValue, at: 1)
                try s.bind(identity.name, at: 2)
                try s.bind(identity.manufacturer, at: 3)
                try s.bind(identity.model, at: 4)
                try s.bind(identity.serialNumber, at: 5)
                try s.bind(identity.firmware, at: 6)
                try s.bind(features.map { Int64($0) }, at: 7)
                try s.bind(seenAt.epochMillis, at: 8)
                try s.bind(seenAt.epochMillis, at: 9)
                try s.run("Adding meter \(identity.id) to \(db.path)")
            }
            guard let created = try Self.load(identity.id, db) else {
                throw StoreError(.other, "Adding meter \(identity.id) to \(db.path) failed: the row is missing.")
            }
            return (created, false)
        }
        let oldSerial = row.identity.serialNumber ?? ""
        let newSerial = identity.serialNumber ?? ""
        let serialChanged = !oldSerial.isEmpty && !newSerial.isEmpty && oldSerial != newSerial
        row.identity.name = identity.name ?? row.identity.name
        row.identity.manufacturer = identity.manufacturer ?? row.identity.manufacturer
        row.identity.model = identity.model ?? row.identity.model
        row.identity.serialNumber = identity.serialNumber ?? row.identity.serialNumber
        row.identity.firmware = identity.firmware ?? row.identity.firmware
        row.features = features ?? row.features
        row.lastSeen = max(row.lastSeen, seenAt)
        row.forgotten = nil
        try db.withStatement(
            """
            UPDATE meter SET name = ?, manufacturer = ?, model = ?, serial_number = ?, firmware = ?, features = ?,
                last_seen_ms = ?, forgotten_ms = NULL WHERE id = ?
            """
        ) { (s) throws(StoreError) in
            try s.bind(row.identity.name, at: 1)
            try s.bind(row.identity.manufacturer, at: 2)
            try s.bind(row.identity.model, at: 3)
            try s.bind(row.identity.serialNumber, at: 4)
            try s.bind(row.identity.firmware, at: 5)
            try s.bind(row.features.map { Int64($0) }, at: 6)
            try s.bind(row.lastSeen.epochMillis, at: 7)
            try s.bind(row.rowID, at: 8)
            try s.run("Updating meter \(identity.id) in \(db.path)")
        }
        return (row, serialChanged)
    }

    /// Writes epoch, high-water mark, last sync and last seen.
    func saveSyncState(_ db: Connection) throws(StoreError) {
        try db.withStatement(
            "UPDATE meter SET epoch = ?, high_water = ?, last_sync_ms = ?, last_sync_result = ?, last_seen_ms = ? WHERE id = ?"
        ) { (s) throws(StoreError) in
            try s.bind(Int64(self.epoch), at: 1)
            try s.bind(self.highWater.map { Int64($0) }, at: 2)
            try s.bind(self.lastSync?.epochMillis, at: 3)
            try s.bind(self.lastSyncResult?.rawValue, at: 4)
            try s.bind(self.lastSeen.epochMillis, at: 5)
            try s.bind(self.rowID, at: 6)
            try s.run("Saving the sync state of meter \(self.identity.id) in \(db.path)")
        }
    }

    /// Readings of this meter, every epoch.
    func readingCount(_ db: Connection) throws(StoreError) -> Int {
        try db.withStatement("SELECT count(*) FROM reading WHERE meter_id = ?") { (s) throws(StoreError) -> Int in
            try s.bind(self.rowID, at: 1)
            _ = try s.step("Counting readings of meter \(self.identity.id) in \(db.path)")
            return Int(s.int64(0))
        }
    }

    /// The meter as the store reports it: the row, its reading count, when a sync last set its clock,
    /// and who holds it now (a person, or shared).
    func stored(_ db: Connection) throws(StoreError) -> StoredMeter {
        let holder = try AssignmentRows.openHolder(meterRowID: self.rowID, db)
        var meter = StoredMeter(
            identity: self.identity, features: self.features, firstSeen: self.firstSeen, lastSeen: self.lastSeen,
            highWater: self.highWater, epoch: self.epoch, lastSync: self.lastSync,
            lastSyncResult: self.lastSyncResult, readingCount: try self.readingCount(db))
        meter.procedure = self.procedure
        meter.clockSettable = self.clockSettable
        meter.clockSetAt = try db.withStatement("SELECT max(clock_set_ms) FROM sync_session WHERE meter_id = ?") {
            (s) throws(StoreError) -> Instant? in
            try s.bind(self.rowID, at: 1)
            _ = try s.step("Reading when the clock of meter \(self.identity.id) was set in \(db.path)")
            return s.optionalInt64(0).map { Instant(epochMillis: $0) }
        }
        switch holder {
        case .person(let name)?: meter.person = name
        case .shared?: meter.shared = true
        case nil: break
        }
        return meter
    }

    /// The meter's figures: readings by kind, first and last instants, resets and sessions.
    func summary(_ db: Connection) throws(StoreError) -> MeterSummary {
        let control = Int64(ReadingFlags.controlSolution.rawValue)
        let ketone = Int64(ReadingFlags.ketone.rawValue)
        let counts = try db.withStatement(
            """
            SELECT count(*),
                coalesce(sum(flags & \(control) = 0 AND flags & \(ketone) = 0 AND mgdl IS NOT NULL), 0),
                coalesce(sum(flags & \(control) != 0), 0), coalesce(sum(flags & \(ketone) != 0), 0),
                min(instant_ms), max(instant_ms)
            FROM reading WHERE meter_id = ?
            """
        ) { (s) throws(StoreError) -> [Int64?] in
            try s.bind(self.rowID, at: 1)
            _ = try s.step("Summarising meter \(self.identity.id) in \(db.path)")
            return (0..<6).map { s.optionalInt64(CInt($0)) }
        }
        let other = try db.withStatement(
            """
            SELECT (SELECT count(*) FROM sequence_reset WHERE meter_id = ?1),
                (SELECT count(*) FROM sync_session WHERE meter_id = ?1),
                (SELECT count(*) FROM sync_session WHERE meter_id = ?1 AND result IN ('failed', 'interrupted', 'aborted'))
            """
        ) { (s) throws(StoreError) -> [Int64] in
            try s.bind(self.rowID, at: 1)
            _ = try s.step("Summarising meter \(self.identity.id) in \(db.path)")
            return [s.int64(0), s.int64(1), s.int64(2)]
        }
        var meter = try self.stored(db)
        meter.readingCount = Int(counts[0] ?? 0)
        return MeterSummary(
            meter: meter, forgotten: self.forgotten != nil, glucoseReadings: Int(counts[1] ?? 0),
            controlSolutionReadings: Int(counts[2] ?? 0), ketoneReadings: Int(counts[3] ?? 0),
            firstReading: counts[4].map { Instant(epochMillis: $0) }, lastReading: counts[5].map { Instant(epochMillis: $0) },
            sequenceResets: Int(other[0]), sessions: Int(other[1]), failedSessions: Int(other[2]))
    }
}

/// Reading rows: insert, decode, query.
package enum ReadingRows {
    /// The INSERT of one reading, every column but `id` and the v5 person columns (the trigger sets those).
    static let insertSQL = """
        INSERT INTO reading (meter_id, epoch, seq, measurement_bytes, context_bytes, base_time, time_offset_min,
            concentration_raw, unit, sample_type, sample_location, sensor_status, meal, instant_ms, time_method,
            time_zone, utc_offset_s, clock_skew_s, meter_local_time, quirks, mgdl, mmoll, ketone_mmoll, flags,
            flag_names, stored_ms, session_id)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """

    /// Separates quirk names in the `quirks` column (names are identifiers from the quirk table).
    static let quirkSeparator: Character = ","

    /// Inserts one reading and returns its row id. Date-times are bound as their `isoString` text,
    /// formatted on the stack.
    package static func insert(
        _ r: Reading, meterRowID: Int64, epoch: Int, storedAt: Instant, sessionID: Int64?,
        _ db: Connection
    ) throws(StoreError) -> Int64 {
        try db.withStatement(Self.insertSQL) { (s) throws(StoreError) -> Int64 in
            try Self.insert(r, meterRowID: meterRowID, epoch: epoch, storedAt: storedAt, sessionID: sessionID, with: s, db)
        }
    }

    /// The same with `s`, the prepared ``insertSQL`` the caller holds (a batch looks it up once);
    /// the caller resets it.
    static func insert(
        _ r: Reading, meterRowID: Int64, epoch: Int, storedAt: Instant, sessionID: Int64?, with s: Statement,
        _ db: Connection
    ) throws(StoreError) -> Int64 {
        try s.bind(meterRowID, at: 1)
        try s.bind(Int64(epoch), at: 2)
        try s.bind(Int64(r.sequenceNumber), at: 3)
        try s.bind(blob: r.measurementBytes, at: 4)
        try s.bind(blob: r.contextBytes, at: 5)
        try s.bind(isoText: r.baseTime, at: 6)
        try s.bind(r.timeOffsetMinutes, at: 7)
        try s.bind(r.concentrationRaw.map { Int64($0) }, at: 8)
        try s.bind(r.unit?.rawValue, at: 9)
        try s.bind(r.sampleType.map { Int64($0) }, at: 10)
        try s.bind(r.sampleLocation.map { Int64($0) }, at: 11)
        try s.bind(r.sensorStatus.map { Int64($0) }, at: 12)
        try s.bind(r.meal.map { Int64($0) }, at: 13)
        try s.bind(r.instant.epochMillis, at: 14)
        try s.bind(r.time.method.rawValue, at: 15)
        try s.bind(r.time.zone, at: 16)
        try s.bind(r.time.utcOffsetSeconds, at: 17)
        try s.bind(r.time.meterClockSkewSeconds, at: 18)
        try s.bind(isoText: r.time.meterLocalTime, at: 19)
        try s.bind(r.time.quirks.isEmpty ? "" : r.time.quirks.joined(separator: String(Self.quirkSeparator)), at: 20)
        try s.bind(r.mgdL, at: 21)
        try s.bind(r.mmolL, at: 22)
        try s.bind(r.ketoneMmolL, at: 23)
        try s.bind(Int64(r.flags.rawValue), at: 24)
        try s.bind(r.flags.isEmpty ? "" : r.flags.names.joined(separator: ","), at: 25)
        try s.bind(storedAt.epochMillis, at: 26)
        try s.bind(sessionID, at: 27)
        try s.run("Storing reading #\(r.sequenceNumber) of meter \(r.meter) in \(db.path)")
        return db.lastInsertRowID
    }

    /// The reading's columns (0 to 25) both queries share.
    static let readingColumns = """
        r.id, r.epoch, r.stored_ms, m.address, r.seq, r.measurement_bytes, r.context_bytes, r.base_time,
        r.time_offset_min, r.concentration_raw, r.unit, r.sample_type, r.sample_location, r.sensor_status, r.meal,
        r.instant_ms, r.time_method, r.time_zone, r.utc_offset_s, r.clock_skew_s, r.meter_local_time, r.quirks,
        r.mgdl, r.mmoll, r.ketone_mmoll, r.flags
        """

    /// Then the person now, whether it waits for an attribution, and no feed position.
    static let selectColumns = Self.readingColumns + ", p.name, r.shared = 1 AND r.person_id IS NULL, NULL"

    /// Then the person the feed entry gave it, whether it waited then, and the feed position.
    static let feedColumns = Self.readingColumns + ", p.name, r.shared = 1 AND f.person_id IS NULL, f.id"

    /// The tables behind ``selectColumns``: reading, its meter and its person now.
    static let fromTables = """
        reading r JOIN meter m ON m.id = r.meter_id LEFT JOIN person p ON p.id = r.person_id
        """

    /// The meters of one query's rows by their stored address text: the address is checked and
    /// made canonical once per meter, not once per row.
    struct MeterIDs {
        /// Ids made so far, by address text.
        private var known: [String: MeterID] = [:]

        /// The meter id of `address`, made once per distinct address.
        mutating func id(_ address: String) -> MeterID {
            if let id = self.known[address] { return id }
            let id = MeterID(rawValue: address)
            self.known[address] = id
            return id
        }
    }

    /// The reading at the statement's current row (selected with ``selectColumns`` or ``feedColumns``).
    /// Throws ``StoreError/Code/corrupt`` when a column the domain needs does not parse.
    static func decode(_ s: Statement, _ db: Connection, meters: inout MeterIDs) throws(StoreError) -> StoredReading {
        let id = s.int64(0)
        func damaged(_ what: String) -> StoreError {
            StoreError(.corrupt, "Reading row \(id) in \(db.path) has an unreadable \(what).")
        }
        guard let baseTime = parseLocalDateTime(s.optionalText(7) ?? "") else { throw damaged("base time") }
        guard let localTime = parseLocalDateTime(s.optionalText(20) ?? "") else { throw damaged("meter local time") }
        guard let method = TimeResolution.Method(rawValue: s.optionalText(16) ?? "") else {
            throw damaged("time resolution method")
        }
        let quirkText = s.optionalText(21) ?? ""
        let time = TimeResolution(
            method: method, zone: s.optionalText(17) ?? "", utcOffsetSeconds: Int(s.int64(18)),
            meterClockSkewSeconds: s.optionalInt64(19), meterLocalTime: localTime,
            quirks: quirkText.isEmpty ? [] : quirkText.split(separator: Self.quirkSeparator).map(String.init))
        let reading = Reading(
            meter: meters.id(s.optionalText(3) ?? ""), sequenceNumber: UInt16(truncatingIfNeeded: s.int64(4)),
            measurementBytes: s.optionalBlob(5) ?? [], contextBytes: s.optionalBlob(6), baseTime: baseTime,
            timeOffsetMinutes: s.optionalInt(8), concentrationRaw: s.optionalInt64(9).map { UInt16(truncatingIfNeeded: $0) },
            unit: s.optionalText(10).flatMap { ConcentrationUnit(rawValue: $0) },
            sampleType: s.optionalInt64(11).map { UInt8(truncatingIfNeeded: $0) },
            sampleLocation: s.optionalInt64(12).map { UInt8(truncatingIfNeeded: $0) },
            sensorStatus: s.optionalInt64(13).map { UInt16(truncatingIfNeeded: $0) },
            meal: s.optionalInt64(14).map { UInt8(truncatingIfNeeded: $0) },
            instant: Instant(epochMillis: s.int64(15)), time: time, mgdL: s.optionalDouble(22),
            mmolL: s.optionalDouble(23), ketoneMmolL: s.optionalDouble(24),
            flags: ReadingFlags(rawValue: UInt32(truncatingIfNeeded: s.int64(25))))
        return StoredReading(
            id: id, epoch: Int(s.int64(1)), storedAt: Instant(epochMillis: s.int64(2)), reading: reading,
            person: s.optionalText(26), awaitingAttribution: s.int64(27) != 0,
            position: s.optionalInt64(28))
    }

    /// The readings `q` selects (meter, person, time range, keyset position), in its order and limit.
    static func query(_ q: ReadingQuery, _ db: Connection) throws(StoreError) -> [StoredReading] {
        var conditions: [String] = []
        if q.meter != nil { conditions.append("r.meter_id = (SELECT id FROM meter WHERE address = ?1)") }
        if q.since != nil { conditions.append("r.instant_ms >= ?2") }
        if q.until != nil { conditions.append("r.instant_ms < ?3") }
        if q.person != nil { conditions.append("r.person_id = (SELECT id FROM person WHERE name = ?5)") }
        if q.unattributed { conditions.append("r.shared = 1 AND r.person_id IS NULL") }
        if q.after != nil {
            // The keyset: a range on the instant the index serves, then the row id among equal instants.
            conditions.append(
                q.order == .ascending
                    ? "r.instant_ms >= ?6 AND (r.instant_ms > ?6 OR r.id > ?7)"
                    : "r.instant_ms <= ?6 AND (r.instant_ms < ?6 OR r.id < ?7)")
        }
        let direction = q.order == .ascending ? "ASC" : "DESC"
        let sql = """
            SELECT \(Self.selectColumns) FROM \(Self.fromTables)
            \(conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND "))
            ORDER BY r.instant_ms \(direction), r.id \(direction) LIMIT ?4
            """
        return try db.withStatement(sql) { (s) throws(StoreError) -> [StoredReading] in
            if let meter = q.meter { try s.bind(meter.rawValue, at: 1) }
            if let since = q.since { try s.bind(since.epochMillis, at: 2) }
            if let until = q.until { try s.bind(until.epochMillis, at: 3) }
            try s.bind(Int64(q.limit.map { max(0, $0) } ?? -1), at: 4)
            if let person = q.person { try s.bind(person, at: 5) }
            if let after = q.after {
                try s.bind(after.instant.epochMillis, at: 6)
                try s.bind(after.id, at: 7)
            }
            var out: [StoredReading] = []
            var meters = MeterIDs()
            while try s.step("Listing readings in \(db.path)") { out.append(try Self.decode(s, db, meters: &meters)) }
            return out
        }
    }

    /// Feed entries after `cursor`, each reading at its latest entry only, at most `limit`.
    static func query(afterCursor cursor: Int64, limit: Int, _ db: Connection) throws(StoreError) -> [StoredReading] {
        // The feed (schema v5): a reading once when stored, again whenever its person changed, each
        // time with the person it got then. An entry a later one of the same reading superseded is
        // left out: a follower that had not read it yet gets the reading once, with its person now,
        // at the later position (a follower that read it gets the change there too).
        let sql = """
            SELECT \(Self.feedColumns) FROM feed f JOIN reading r ON r.id = f.reading_id
            JOIN meter m ON m.id = r.meter_id LEFT JOIN person p ON p.id = f.person_id
            WHERE f.id > ?1 AND NOT EXISTS (SELECT 1 FROM feed later WHERE later.reading_id = f.reading_id AND later.id > f.id)
            ORDER BY f.id ASC LIMIT ?2
            """
        return try db.withStatement(sql) { (s) throws(StoreError) -> [StoredReading] in
            try s.bind(cursor, at: 1)
            try s.bind(Int64(max(0, limit)), at: 2)
            var out: [StoredReading] = []
            var meters = MeterIDs()
            while try s.step("Following readings in \(db.path)") { out.append(try Self.decode(s, db, meters: &meters)) }
            return out
        }
    }

    /// Readings of `meter`, or of every meter.
    static func count(meter: MeterID?, _ db: Connection) throws(StoreError) -> Int {
        let sql =
            meter == nil
            ? "SELECT count(*) FROM reading"
            : "SELECT count(*) FROM reading WHERE meter_id = (SELECT id FROM meter WHERE address = ?)"
        return try db.withStatement(sql) { (s) throws(StoreError) -> Int in
            if let meter { try s.bind(meter.rawValue, at: 1) }
            _ = try s.step("Counting readings in \(db.path)")
            return Int(s.int64(0))
        }
    }
}

extension ReadingRows {
    /// The measurement bytes under `sequenceNumber` in the meter's current epoch (`reading_by_seq`).
    static func measurement(meter: MeterID, sequenceNumber: UInt16, _ db: Connection) throws(StoreError) -> [UInt8]? {
        try db.withStatement(
            """
            SELECT r.measurement_bytes FROM reading r JOIN meter m ON m.id = r.meter_id
            WHERE m.address = ? AND r.seq = ? AND r.epoch = m.epoch
            """
        ) { (s) throws(StoreError) -> [UInt8]? in
            try s.bind(meter.rawValue, at: 1)
            try s.bind(Int64(sequenceNumber), at: 2)
            guard try s.step("Looking up reading #\(sequenceNumber) of \(meter) in \(db.path)") else { return nil }
            return s.optionalBlob(0)
        }
    }

    /// The highest stored sequence number of the meter, any epoch (`reading_by_seq`).
    static func highestSequenceNumber(meter: MeterID, _ db: Connection) throws(StoreError) -> UInt16? {
        try db.withStatement(
            "SELECT max(seq) FROM reading WHERE meter_id = (SELECT id FROM meter WHERE address = ?)"
        ) { (s) throws(StoreError) -> UInt16? in
            try s.bind(meter.rawValue, at: 1)
            _ = try s.step("Finding the highest sequence number of \(meter) in \(db.path)")
            return s.optionalInt64(0).map { UInt16(truncatingIfNeeded: $0) }
        }
    }

    /// Which candidates the meter's stored readings hold, one `reading_by_meter_base_time` lookup
    /// per distinct base time.
    static func storedContent(meter: MeterID, among candidates: [ReadingContent], _ db: Connection) throws(StoreError)
        -> Set<ReadingContent>
    {
        let wanted = Set(candidates)
        let baseTimes = Set(candidates.map(\.baseTime))
        var found: Set<ReadingContent> = []
        try db.withStatement(
            """
            SELECT time_offset_min, concentration_raw, sample_type, sample_location, sensor_status FROM reading
            WHERE meter_id = (SELECT id FROM meter WHERE address = ?) AND base_time = ?
            """
        ) { (s) throws(StoreError) in
            for base in baseTimes.sorted() {
                s.reset()
                try s.bind(meter.rawValue, at: 1)
                try s.bind(base.isoString, at: 2)
                while try s.step("Looking up readings of \(meter) at \(base.isoString) in \(db.path)") {
                    let content = ReadingContent(
                        baseTime: base, timeOffsetMinutes: s.optionalInt(0),
                        concentrationRaw: s.optionalInt64(1).map { UInt16(truncatingIfNeeded: $0) },
                        sampleType: s.optionalInt64(2).map { UInt8(truncatingIfNeeded: $0) },
                        sampleLocation: s.optionalInt64(3).map { UInt8(truncatingIfNeeded: $0) },
                        sensorStatus: s.optionalInt64(4).map { UInt16(truncatingIfNeeded: $0) })
                    if wanted.contains(content) { found.insert(content) }
                }
            }
        }
        return found
    }
}

/// Sync session rows.
enum SessionRows {
    /// Records a new attempt with zero counts (the batches add theirs) and the mark it started from;
    /// returns its row id.
    static func insert(_ session: SyncSessionRecord, meterRowID: Int64, epoch: Int, highWater: UInt16?, now: Instant,
        _ db: Connection
    ) throws(StoreError) -> Int64 {
        try db.withStatement(
            """
            INSERT INTO sync_session (meter_id, started_ms, ended_ms, result, expected, received, stored, duplicates,
                sequence_resets, epoch, high_water_before, high_water_after, error, committed_ms)
            VALUES (?, ?, ?, ?, ?, ?, 0, 0, 0, ?, ?, ?, ?, ?)
            """
        ) { (s) throws(StoreError) -> Int64 in
            try s.bind(meterRowID, at: 1)
            try s.bind(session.started.epochMillis, at: 2)
            try s.bind(session.ended?.epochMillis, at: 3)
            try s.bind(session.result.rawValue, at: 4)
            try s.bind(session.expected, at: 5)
            try s.bind(session.received, at: 6)
            try s.bind(Int64(epoch), at: 7)
            try s.bind(highWater.map { Int64($0) }, at: 8)
            try s.bind(highWater.map { Int64($0) }, at: 9)
            try s.bind(session.error, at: 10)
            try s.bind(now.epochMillis, at: 11)
            try s.run("Recording a sync session of meter \(session.meter) in \(db.path)")
            return db.lastInsertRowID
        }
    }

    /// Writes an attempt's final counts, epoch and the high-water mark it ended with.
    static func finish(
        id: Int64, received: Int, stored: Int, duplicates: Int, resets: Int, epoch: Int, highWater: UInt16?,
        _ db: Connection
    ) throws(StoreError) {
        try db.withStatement(
            """
            UPDATE sync_session SET received = ?, stored = ?, duplicates = ?, sequence_resets = ?, epoch = ?,
                high_water_after = ? WHERE id = ?
            """
        ) { (s) throws(StoreError) in
            try s.bind(received, at: 1)
            try s.bind(stored, at: 2)
            try s.bind(duplicates, at: 3)
            try s.bind(resets, at: 4)
            try s.bind(Int64(epoch), at: 5)
            try s.bind(highWater.map { Int64($0) }, at: 6)
            try s.bind(id, at: 7)
            try s.run("Recording a sync session in \(db.path)")
        }
    }

    /// Marks the meter's sessions still recorded as running (cut off by a kill) as interrupted.
    static func closeStale(meterRowID: Int64, _ db: Connection) throws(StoreError) {
        try db.withStatement(
            """
            UPDATE sync_session SET result = 'interrupted',
                error = coalesce(error, 'sugard stopped before the sync ended; the chunks before it are stored.')
            WHERE meter_id = ? AND result = 'running'
            """
        ) { (s) throws(StoreError) in
            try s.bind(meterRowID, at: 1)
            try s.run("Closing cut-off sync sessions in \(db.path)")
        }
    }

    /// A later batch of the attempt (a chunk, or its end): adds its counts to the session row and
    /// records how the attempt stands (result, end, error). Returns the row's totals.
    static func add(
        id: Int64, _ session: SyncSessionRecord, received: Int, stored: Int, duplicates: Int, resets: Int, epoch: Int,
        highWater: UInt16?, now: Instant, _ db: Connection
    ) throws(StoreError) -> (stored: Int, duplicates: Int, resets: Int) {
        try db.withStatement(
            """
            UPDATE sync_session SET received = max(received, ?), stored = stored + ?, duplicates = duplicates + ?,
                sequence_resets = sequence_resets + ?, epoch = ?, high_water_after = ?, result = ?, ended_ms = ?,
                expected = ?, error = ?, committed_ms = ? WHERE id = ?
            RETURNING stored, duplicates, sequence_resets
            """
        ) { (s) throws(StoreError) -> (stored: Int, duplicates: Int, resets: Int) in
            try s.bind(received, at: 1)
            try s.bind(stored, at: 2)
            try s.bind(duplicates, at: 3)
            try s.bind(resets, at: 4)
            try s.bind(Int64(epoch), at: 5)
            try s.bind(highWater.map { Int64($0) }, at: 6)
            try s.bind(session.result.rawValue, at: 7)
            try s.bind(session.ended?.epochMillis, at: 8)
            try s.bind(session.expected, at: 9)
            try s.bind(session.error, at: 10)
            try s.bind(now.epochMillis, at: 11)
            try s.bind(id, at: 12)
            guard try s.step("Recording a sync session in \(db.path)") else {
                throw StoreError(.constraint, "Sync session \(id) is not in \(db.path); the batch was not stored.")
            }
            let totals = (stored: Int(s.int64(0)), duplicates: Int(s.int64(1)), resets: Int(s.int64(2)))
            while try s.step("Recording a sync session in \(db.path)") {}
            return totals
        }
    }

    /// Records the clock the attempt set (once; a later batch of the attempt carries it again).
    static func saveClockSet(id: Int64, _ clock: ClockSetting, _ db: Connection) throws(StoreError) {
        try db.withStatement(
            """
            UPDATE sync_session SET clock_set_method = ?, clock_set_ms = ?, clock_set_local = ?, clock_skew_before_s = ?,
                clock_skew_after_s = ? WHERE id = ?
            """
        ) { (s) throws(StoreError) in
            try s.bind(clock.method.rawValue, at: 1)
            try s.bind(clock.at.epochMillis, at: 2)
            try s.bind(isoText: clock.written, at: 3)
            try s.bind(clock.skewBeforeSeconds, at: 4)
            try s.bind(clock.skewAfterSeconds, at: 5)
            try s.bind(id, at: 6)
            try s.run("Recording the meter clock a sync set in \(db.path)")
        }
    }

    /// Sessions of `meter` (or every meter), newest first, at most `limit`; an unknown result is corruption.
    static func query(meter: MeterID?, limit: Int, _ db: Connection) throws(StoreError) -> [SyncSessionRecord] {
        let sql = """
            SELECT s.id, m.address, s.started_ms, s.ended_ms, s.result, s.expected, s.received, s.stored,
                s.duplicates, s.error, s.sequence_resets, s.clock_set_method, s.clock_set_ms, s.clock_set_local,
                s.clock_skew_before_s, s.clock_skew_after_s
            FROM sync_session s JOIN meter m ON m.id = s.meter_id
            \(meter == nil ? "" : "WHERE s.meter_id = (SELECT id FROM meter WHERE address = ?1)")
            ORDER BY s.started_ms DESC, s.id DESC LIMIT ?2
            """
        return try db.withStatement(sql) { (s) throws(StoreError) -> [SyncSessionRecord] in
            if let meter { try s.bind(meter.rawValue, at: 1) }
            try s.bind(Int64(max(0, limit)), at: 2)
            var out: [SyncSessionRecord] = []
            while try s.step("Listing sync sessions in \(db.path)") {
                guard let result = SyncResult(rawValue: s.optionalText(4) ?? "") else {
                    throw StoreError(.corrupt, "Sync session row \(s.int64(0)) in \(db.path) has an unknown result.")
                }
                var clockSet: ClockSetting?
                if let method = s.optionalText(11).flatMap(ClockSetting.Method.init(rawValue:)), let at = s.optionalInt64(12),
                    let written = parseLocalDateTime(s.optionalText(13) ?? "")
                {
                    clockSet = ClockSetting(
                        method: method, at: Instant(epochMillis: at), skewBeforeSeconds: s.optionalInt64(14),
                        skewAfterSeconds: s.optionalInt64(15), written: written)
                }
                out.append(
                    SyncSessionRecord(
                        id: s.int64(0), meter: MeterID(rawValue: s.optionalText(1) ?? ""),
                        started: Instant(epochMillis: s.int64(2)), ended: s.optionalInt64(3).map { Instant(epochMillis: $0) },
                        result: result, expected: s.optionalInt(5), received: Int(s.int64(6)), stored: Int(s.int64(7)),
                        duplicates: Int(s.int64(8)), error: s.optionalText(9), sequenceResets: Int(s.int64(10)),
                        clockSet: clockSet))
            }
            return out
        }
    }
}

/// Sequence-reset event rows.
enum EventRows {
    /// Records a detected sequence reset.
    static func insert(
        meterRowID: Int64, oldEpoch: Int, newEpoch: Int, at: Instant, reason: SequenceResetEvent.Reason,
        sequenceNumber: UInt16?, oldHighWater: UInt16?, sessionID: Int64?, _ db: Connection
    ) throws(StoreError) {
        try db.withStatement(
            """
            INSERT INTO sequence_reset (meter_id, old_epoch, new_epoch, at_ms, reason, sequence_number,
                old_high_water, session_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """
        ) { (s) throws(StoreError) in
            try s.bind(meterRowID, at: 1)
            try s.bind(Int64(oldEpoch), at: 2)
            try s.bind(Int64(newEpoch), at: 3)
            try s.bind(at.epochMillis, at: 4)
            try s.bind(reason.rawValue, at: 5)
            try s.bind(sequenceNumber.map { Int64($0) }, at: 6)
            try s.bind(oldHighWater.map { Int64($0) }, at: 7)
            try s.bind(sessionID, at: 8)
            try s.run("Recording a sequence reset in \(db.path)")
        }
    }

    /// Reset events of `meter` (or every meter), newest first, at most `limit`.
    static func query(meter: MeterID?, limit: Int, _ db: Connection) throws(StoreError) -> [SequenceResetEvent] {
        let sql = """
            SELECT e.id, m.address, e.old_epoch, e.new_epoch, e.at_ms, e.reason, e.sequence_number,
                e.old_high_water, e.session_id
            FROM sequence_reset e JOIN meter m ON m.id = e.meter_id
            \(meter == nil ? "" : "WHERE e.meter_id = (SELECT id FROM meter WHERE address = ?1)")
            ORDER BY e.at_ms DESC, e.id DESC LIMIT ?2
            """
        return try db.withStatement(sql) { (s) throws(StoreError) -> [SequenceResetEvent] in
            if let meter { try s.bind(meter.rawValue, at: 1) }
            try s.bind(Int64(max(0, limit)), at: 2)
            var out: [SequenceResetEvent] = []
            while try s.step("Listing sequence resets in \(db.path)") {
                guard let reason = SequenceResetEvent.Reason(rawValue: s.optionalText(5) ?? "") else {
                    throw StoreError(.corrupt, "Sequence reset row \(s.int64(0)) in \(db.path) has an unknown reason.")
                }
                out.append(
                    SequenceResetEvent(
                        id: s.int64(0), meter: MeterID(rawValue: s.optionalText(1) ?? ""), oldEpoch: Int(s.int64(2)),
                        newEpoch: Int(s.int64(3)), at: Instant(epochMillis: s.int64(4)), reason: reason,
                        sequenceNumber: s.optionalInt64(6).map { UInt16(truncatingIfNeeded: $0) },
                        oldHighWater: s.optionalInt64(7).map { UInt16(truncatingIfNeeded: $0) },
                        sessionID: s.optionalInt64(8)))
            }
            return out
        }
    }
}

/// Parses what `LocalDateTime.isoString` writes (`2019-13-05T11:10:30`; fields may be out of range
/// because base times are stored as the meter sent them; the year may carry a leading `-`).
func parseLocalDateTime(_ text: String) -> LocalDateTime? {
    // What the store writes, `YYYY-MM-DDTHH:MM:SS`, is read straight from the bytes; anything
    // else (a negative or five-digit year) takes the general path below.
    let fast = text.utf8.withContiguousStorageIfAvailable { b -> LocalDateTime? in
        guard b.count == 19, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), b[10] == UInt8(ascii: "T"),
            b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":")
        else { return nil }
        func number(_ start: Int, _ count: Int) -> Int? {
            var value = 0
            for i in start..<start + count {
                let digit = Int(b[i]) - 0x30
                guard digit >= 0, digit <= 9 else { return nil }
                value = value * 10 + digit
            }
            return value
        }
        guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
            let minute = number(14, 2), let second = number(17, 2)
        else { return nil }
        return LocalDateTime(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
    }
    if let fast = fast ?? nil { return fast }
    var body = Substring(text)
    var sign = 1
    if body.first == "-" {
        sign = -1
        body = body.dropFirst()
    }
    let parts = body.split(omittingEmptySubsequences: false) { $0 == "-" || $0 == "T" || $0 == ":" }
    guard parts.count == 6 else { return nil }
    var fields: [Int] = []
    for part in parts {
        guard let value = Int(part) else { return nil }
        fields.append(value)
    }
    return LocalDateTime(
        year: sign * fields[0], month: fields[1], day: fields[2], hour: fields[3], minute: fields[4], second: fields[5])
}
