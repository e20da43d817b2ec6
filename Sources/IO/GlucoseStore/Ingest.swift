import HealthDataSync

/// The body of one `commit`: runs inside the caller's transaction. The rules are documented at
/// ``SQLiteReadingStore/commit(_:)``; this type applies them.
struct Ingest {
    /// The connection, inside the caller's transaction.
    let db: Connection
    /// The commit time (storedAt, session commit time, reset events).
    let now: Instant
    /// Test hook: throw an I/O error after this many inserts.
    let failAfterInserts: Int?

    /// An ingest on `db` at `now`.
    init(db: Connection, now: Instant, failAfterInserts: Int? = nil) {
        self.db = db
        self.now = now
        self.failAfterInserts = failAfterInserts
    }

    /// How a received reading relates to what is stored for its meter.
    enum Match {
        /// Same seq, base time and raw value in the current epoch.
        case currentEpochDuplicate
        /// Same seq, base time, raw value and measurement bytes in an earlier epoch.
        case earlierEpochDuplicate
        /// The current epoch holds this seq with different content.
        case conflict
        /// Nothing stored matches.
        case new
    }

    /// The stored rows of one meter and sequence number, every epoch (`reading_by_seq`).
    static let lookupSQL = """
        SELECT epoch, base_time, concentration_raw, measurement_bytes FROM reading WHERE meter_id = ? AND seq = ?
        """

    /// Classifies `reading` against every stored reading of the meter with the same sequence
    /// number (one indexed lookup on `reading_by_seq`; at most one row per epoch). `s` is the
    /// prepared ``lookupSQL`` the caller holds for the batch; the caller resets it.
    static func classify(_ reading: Reading, meterRowID: Int64, epoch: Int, with s: Statement) throws(StoreError) -> Match {
        try s.bind(meterRowID, at: 1)
        try s.bind(Int64(reading.sequenceNumber), at: 2)
        let raw = reading.concentrationRaw.map { Int64($0) }
        var rule = MatchRule(epoch: epoch)
        // Only a reading already stored under this sequence number needs the text (most need none).
        var baseTimeText: String?
        while try s.step("Looking up reading #\(reading.sequenceNumber) in \(s.connection.path)") {
            if baseTimeText == nil { baseTimeText = reading.baseTime.isoString }
            let sameKey = s.optionalInt64(2) == raw && s.optionalText(1) == baseTimeText
            if let match = rule.see(epoch: Int(s.int64(0)), sameKey: sameKey, sameBytes: s.optionalBlob(3) == reading.measurementBytes) {
                return match
            }
        }
        return rule.match
    }

    /// The rules of ``Match`` over the stored rows with a reading's sequence number, one row at a time
    /// (from the database or from the batch's own inserts: one rule for both).
    struct MatchRule {
        /// The meter's current epoch.
        let epoch: Int
        /// A row of the current epoch had other content.
        private var conflict = false
        /// A row of an earlier epoch had the same content and bytes.
        private var earlierDuplicate = false

        /// A rule for a meter whose current epoch is `epoch`.
        init(epoch: Int) { self.epoch = epoch }

        /// Takes one stored row: whether it has the reading's key (base time and raw value) and, when
        /// that matters, the same measurement bytes. Returns the match once it is decided.
        mutating func see(epoch rowEpoch: Int, sameKey: Bool, sameBytes: @autoclosure () -> Bool) -> Match? {
            if rowEpoch == self.epoch {
                if sameKey { return .currentEpochDuplicate }
                self.conflict = true
            } else if sameKey && !self.earlierDuplicate && sameBytes() {
                self.earlierDuplicate = true
            }
            return nil
        }

        /// The match once every row was seen.
        var match: Match { self.earlierDuplicate ? .earlierEpochDuplicate : self.conflict ? .conflict : .new }
    }

    /// The same decision as ``classify(_:meterRowID:epoch:with:)`` from the batch's own inserts, for
    /// a sequence number that had no stored row when the batch began: every row the lookup would
    /// find is one of `inserted` (chained by ``BatchRows``), so the rules run on them in memory.
    static func classify(
        _ reading: Reading, epoch: Int, amongBatch rows: BatchRows, _ inserted: [StoredReading]
    ) -> Match {
        var rule = MatchRule(epoch: epoch)
        var index = rows.latest(reading.sequenceNumber)
        while index >= 0 {
            let row = inserted[Int(index)]
            let sameKey =
                row.reading.concentrationRaw == reading.concentrationRaw
                && sameISOText(row.reading.baseTime, reading.baseTime)
            if let match = rule.see(epoch: row.epoch, sameKey: sameKey, sameBytes: row.reading.measurementBytes == reading.measurementBytes) {
                return match
            }
            index = rows.previous(index)
        }
        return rule.match
    }

    /// Whether the two date-times store the same `base_time` text (what the lookup compares).
    static func sameISOText(_ a: LocalDateTime, _ b: LocalDateTime) -> Bool {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 2 * LocalDateTime.isoStringMaxBytes) { buffer in
            let first = UnsafeMutableBufferPointer(rebasing: buffer[..<LocalDateTime.isoStringMaxBytes])
            let second = UnsafeMutableBufferPointer(rebasing: buffer[LocalDateTime.isoStringMaxBytes...])
            let n = a.writeISOString(into: first)
            return n == b.writeISOString(into: second) && first[..<n].elementsEqual(second[..<n])
        }
    }

    /// The batch's inserts by sequence number: the latest insert under each number and, per insert,
    /// the one before it under the same number (an earlier epoch of this batch), as indices into
    /// the batch's `inserted` list.
    struct BatchRows {
        /// Per sequence number, the index of its newest insert (−1: none).
        private var latestBySeq = [Int32](repeating: -1, count: 65536)
        /// Per insert, the index of the previous insert with its number (−1: none).
        private var previousByIndex: [Int32] = []

        /// Empty chains, room for `capacity` inserts.
        init(capacity: Int) { self.previousByIndex.reserveCapacity(capacity) }

        /// The index of the newest insert with `seq`; −1 when none.
        func latest(_ seq: UInt16) -> Int32 { self.latestBySeq[Int(seq)] }

        /// The index of the insert before `index` with the same number; −1 when none.
        func previous(_ index: Int32) -> Int32 { self.previousByIndex[Int(index)] }

        /// Records the insert that is `inserted[index]`; indices come in order 0, 1, 2, …
        mutating func append(_ seq: UInt16, index: Int) {
            self.previousByIndex.append(self.latestBySeq[Int(seq)])
            self.latestBySeq[Int(seq)] = Int32(index)
        }
    }

    /// The stored sequence numbers of one meter in a range, every epoch (one range scan of `reading_by_seq`).
    static let storedSequencesSQL = "SELECT seq FROM reading WHERE meter_id = ? AND seq BETWEEN ? AND ?"

    /// Which sequence numbers of a meter have a stored reading in any epoch (65 536 bits): a
    /// reading whose number has none is new without a lookup. Filled by one range scan of
    /// `reading_by_seq` per batch and kept up to date with the batch's own inserts.
    struct SequenceSet {
        /// One bit per sequence number.
        private var words = [UInt64](repeating: 0, count: 1024)

        /// Whether some stored row has `seq`.
        func contains(_ seq: UInt16) -> Bool { self.words[Int(seq >> 6)] & (1 << UInt64(seq & 63)) != 0 }

        /// Records that a row with `seq` exists now.
        mutating func insert(_ seq: UInt16) { self.words[Int(seq >> 6)] |= 1 << UInt64(seq & 63) }
    }

    /// The stored sequence numbers of the meter between the batch's lowest and highest, or nil when
    /// the per-reading lookups are cheaper: a small batch, or one spread so wide that the scan
    /// could read far more rows than the batch has.
    func storedSequences(_ readings: [Reading], meterRowID: Int64) throws(StoreError) -> SequenceSet? {
        guard readings.count >= 32, let low = readings.lazy.map(\.sequenceNumber).min(),
            let high = readings.lazy.map(\.sequenceNumber).max(), Int(high - low) < 4 * readings.count
        else { return nil }
        return try self.db.withStatement(Self.storedSequencesSQL) { (s) throws(StoreError) -> SequenceSet in
            try s.bind(meterRowID, at: 1)
            try s.bind(Int64(low), at: 2)
            try s.bind(Int64(high), at: 3)
            var set = SequenceSet()
            while try s.step("Looking up the stored sequence numbers in \(self.db.path)") {
                set.insert(UInt16(truncatingIfNeeded: s.int64(0)))
            }
            return set
        }
    }

    /// Opens a new epoch for the meter and records the event. Clears the high-water mark: it
    /// belonged to the old epoch.
    static func openEpoch(
        _ meter: inout MeterRow, reason: SequenceResetEvent.Reason, sequenceNumber: UInt16?, sessionID: Int64?,
        now: Instant, _ db: Connection
    ) throws(StoreError) {
        let old = meter.epoch
        try EventRows.insert(
            meterRowID: meter.rowID, oldEpoch: old, newEpoch: old + 1, at: now, reason: reason,
            sequenceNumber: sequenceNumber, oldHighWater: meter.highWater, sessionID: sessionID, db)
        meter.epoch = old + 1
        meter.highWater = nil
    }

    /// Applies the commit rules to one batch: upserts the meter, starts or continues the session row,
    /// classifies and inserts the readings, opens epochs, moves the high-water mark and records the
    /// session's counts. The caller's transaction makes it all or nothing.
    mutating func commit(_ batch: SyncBatch) throws(StoreError) -> CommitResult {
        let meterID = batch.meter.id
        if let stray = batch.readings.first(where: { $0.meter != meterID }) {
            throw StoreError(
                .constraint, "A sync batch for meter \(meterID) contained a reading from meter \(stray.meter); nothing was stored.")
        }
        for reading in batch.readings {
            let t = reading.baseTime
            guard t.month >= 0, t.day >= 0, t.hour >= 0, t.minute >= 0, t.second >= 0 else {
                throw StoreError(
                    .constraint,
                    "Reading #\(reading.sequenceNumber) of meter \(meterID) has a negative base-time field; nothing was stored.")
            }
        }

        let seenAt = batch.session.ended ?? batch.session.started
        var (meter, serialChanged) = try MeterRow.upsert(batch.meter, features: batch.features, seenAt: seenAt, self.db)
        try meter.saveCapabilities(procedure: batch.procedure, clockSettable: batch.clockSettable, self.db)
        // The first batch of an attempt makes its session row; later ones (chunks) add to it.
        let continuing = batch.session.id
        let sessionID: Int64
        if let continuing {
            sessionID = continuing
        } else {
            // One sync per meter at a time: a session of this meter still "running" was cut off
            // (the daemon was killed mid-transfer); its chunks are stored, the attempt ended.
            try SessionRows.closeStale(meterRowID: meter.rowID, self.db)
            sessionID = try SessionRows.insert(
                batch.session, meterRowID: meter.rowID, epoch: meter.epoch, highWater: meter.highWater, now: self.now, self.db)
        }
        let epochBefore = meter.epoch

        var resets = 0
        if serialChanged {
            try Self.openEpoch(&meter, reason: .serialNumberChanged, sequenceNumber: nil, sessionID: sessionID, now: self.now, self.db)
            resets += 1
        }

        if batch.meterReset {
            try Self.openEpoch(&meter, reason: .meterReset, sequenceNumber: meter.highWater, sessionID: sessionID, now: self.now, self.db)
            resets += 1
        }

        var inserted: [StoredReading] = []
        inserted.reserveCapacity(batch.readings.count)
        var duplicates = 0
        // Highest sequence number of this batch that is stored in the current epoch (inserted or
        // already there); it caps the new high-water mark.
        // Earlier batches of the attempt count while the epoch is the one they stored into.
        var topInCurrentEpoch: UInt16? = meter.epoch == epochBefore ? batch.storedEarlier : nil
        // Rule 4: armed when the attempt ends below the stored mark; fires at the first new reading.
        // A chunk (the transfer goes on) never arms it: what comes later may pass the mark.
        var highWaterRuleArmed = false
        if batch.isFinal, let mark = meter.highWater, let batchMax = batch.readings.map(\.sequenceNumber).max(),
            max(batchMax, batch.highestReceived ?? batchMax) < mark
        {
            highWaterRuleArmed = true
        }

        // The two per-reading statements, looked up once for the batch. Every reading binds all of
        // their parameters, so they keep their bindings between readings and clear them at the end.
        let lookup = try self.db.cached(Self.lookupSQL)
        let insert = try self.db.cached(ReadingRows.insertSQL)
        defer {
            lookup.reset()
            insert.reset()
        }
        // A meter never assigned (most) has no person to look up per reading.
        let assigned = try AssignmentRows.hasPeriods(meterRowID: meter.rowID, self.db)
        var stored = try self.storedSequences(batch.readings, meterRowID: meter.rowID)
        // The numbers stored before this batch; a number outside it has only this batch's rows.
        let storedBefore = stored
        var batchRows = stored.map { _ in BatchRows(capacity: batch.readings.count) }
        for reading in batch.readings {
            let match: Match
            if let stored, !stored.contains(reading.sequenceNumber) {
                match = .new  // what the lookup would find: no row with this number in any epoch
            } else if let storedBefore, let batchRows, !storedBefore.contains(reading.sequenceNumber) {
                match = Self.classify(reading, epoch: meter.epoch, amongBatch: batchRows, inserted)
            } else {
                defer { lookup.resetKeepingBindings() }
                match = try Self.classify(reading, meterRowID: meter.rowID, epoch: meter.epoch, with: lookup)
            }
            switch match {
            case .currentEpochDuplicate:
                duplicates += 1
                topInCurrentEpoch = max(topInCurrentEpoch ?? 0, reading.sequenceNumber)
            case .earlierEpochDuplicate:
                duplicates += 1
            case .conflict, .new:
                if match == .conflict || highWaterRuleArmed {
                    try Self.openEpoch(
                        &meter, reason: match == .conflict ? .sequenceConflict : .highWaterBackwards,
                        sequenceNumber: reading.sequenceNumber, sessionID: sessionID, now: self.now, self.db)
                    resets += 1
                    highWaterRuleArmed = false
                    topInCurrentEpoch = nil
                }
                if let limit = self.failAfterInserts, inserted.count >= limit {
                    throw StoreError(.io, "Storing reading #\(reading.sequenceNumber) failed: injected test failure.")
                }
                let id: Int64
                do {
                    defer { insert.resetKeepingBindings() }
                    id = try ReadingRows.insert(
                        reading, meterRowID: meter.rowID, epoch: meter.epoch, storedAt: self.now,
                        sessionID: sessionID, with: insert, self.db)
                }
                stored?.insert(reading.sequenceNumber)
                batchRows?.append(reading.sequenceNumber, index: inserted.count)
                // The person follows from the reading's measured time (trigger reading_person_on_insert).
                let (person, waiting) = assigned ? try AssignmentRows.personOfReading(id, self.db) : (nil, false)
                inserted.append(
                    StoredReading(
                        id: id, epoch: meter.epoch, storedAt: self.now, reading: reading, person: person,
                        awaitingAttribution: waiting))
                topInCurrentEpoch = max(topInCurrentEpoch ?? 0, reading.sequenceNumber)
            }
        }

        if let newMark = batch.newHighWater {
            // An empty attempt ("no records found") keeps or raises the mark. Otherwise the mark may
            // not pass the highest record of the attempt that sits in the current epoch; batches of
            // only earlier-epoch duplicates leave it alone.
            let emptyAttempt = batch.readings.isEmpty && continuing == nil
            let candidate: UInt16? = emptyAttempt ? newMark : topInCurrentEpoch.map { min($0, newMark) }
            if let candidate { meter.highWater = meter.highWater.map { max($0, candidate) } ?? candidate }
        }
        if batch.isFinal {
            meter.lastSync = seenAt
            meter.lastSyncResult = batch.session.result
        }
        try meter.saveSyncState(self.db)

        if let clock = batch.session.clockSet { try SessionRows.saveClockSet(id: sessionID, clock, self.db) }
        let received = max(batch.session.received, batch.readings.count)
        var session = batch.session
        session.id = sessionID
        session.received = received
        if continuing != nil {
            let totals = try SessionRows.add(
                id: sessionID, batch.session, received: received, stored: inserted.count, duplicates: duplicates,
                resets: resets, epoch: meter.epoch, highWater: meter.highWater, now: self.now, self.db)
            session.stored = totals.stored
            session.duplicates = totals.duplicates
            session.sequenceResets = totals.resets
        } else {
            try SessionRows.finish(
                id: sessionID, received: received, stored: inserted.count, duplicates: duplicates, resets: resets,
                epoch: meter.epoch, highWater: meter.highWater, self.db)
            session.stored = inserted.count
            session.duplicates = duplicates
            session.sequenceResets = resets
        }
        return CommitResult(
            inserted: inserted, duplicates: duplicates, sequenceResets: resets, meter: try meter.stored(self.db),
            session: session, highestInCurrentEpoch: topInCurrentEpoch)
    }
}
