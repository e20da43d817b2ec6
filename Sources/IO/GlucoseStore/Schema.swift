import HealthDataSync

/// The database schema and its versioned migrations (`PRAGMA user_version`).
///
/// Each version is one step; a database at version N is brought to the latest version by running
/// steps N+1, N+2, … each in its own `BEGIN IMMEDIATE` transaction that also sets `user_version`,
/// so a crash mid-migration leaves the database at the last completed version. To add v2: append
/// `2` to ``versions``, add its case to ``apply(version:on:)``, and add a fixture writer for v1 in
/// the migration tests (they open every earlier version and compare the result with a fresh DB).
enum Schema {
    /// Every schema version this build knows, in order.
    static let versions: [Int64] = [1, 2, 3, 4, 5, 6]

    /// The version a new database is created at and every older one migrated to.
    static var latestVersion: Int64 { Self.versions[Self.versions.count - 1] }

    /// Brings the database to `target` (normally the latest version).
    static func migrate(_ db: Connection, to target: Int64 = Schema.latestVersion) throws(StoreError) {
        let current = try Self.userVersion(db)
        if current > Self.latestVersion {
            throw StoreError(
                .cannotOpen,
                "The database \(db.path) has schema version \(current), newer than this sugard understands "
                    + "(\(Self.latestVersion)); use a newer sugard or restore a backup."
            )
        }
        for version in Self.versions where version > current && version <= target {
            try db.transaction("Migrating \(db.path) to schema version \(version)") { () throws(StoreError) in
                // Re-read inside the write lock: another process may have migrated meanwhile.
                guard try Self.userVersion(db) < version else { return }
                try Self.apply(version: version, on: db)
                try db.execute("PRAGMA user_version = \(version)", "Setting the schema version of \(db.path)")
            }
        }
    }

    /// `PRAGMA user_version`: 0 for a new, empty file.
    static func userVersion(_ db: Connection) throws(StoreError) -> Int64 {
        try db.scalarInt("PRAGMA user_version", "Reading the schema version of \(db.path)") ?? 0
    }

    /// Runs the step that brings a database from `version − 1` to `version` (inside ``migrate(_:to:)``'s
    /// transaction, which then sets `user_version`).
    static func apply(version: Int64, on db: Connection) throws(StoreError) {
        switch version {
        case 1: try db.execute(Self.v1, "Creating schema version 1 in \(db.path)")
        case 2: try db.execute(Self.v2, "Creating schema version 2 in \(db.path)")
        case 3: try Self.applyV3(on: db)
        case 4: try Self.applyV4(on: db)
        case 5: try Self.applyV5(on: db)
        case 6: try db.execute(Self.v6, "Adding meter procedures and clock settings (schema version 6) to \(db.path)")
        default: fatalError("Internal inconsistency: no migration step for schema version \(version)")
        }
    }

    /// Version 2: readings by base time, so a meter that cannot number its records (TaiDoc) is
    /// matched by content with an indexed lookup instead of loading its history.
    static let v2 = """
        CREATE INDEX reading_by_meter_base_time ON reading(meter_id, base_time);
        """

    /// Version 1.
    ///
    /// - `meter`: one row per Bluetooth address (re-pairing keeps the row). `epoch` counts sequence
    ///   resets; `high_water` is the highest sequence number committed after a successful sync in
    ///   the current epoch. `forgotten_ms` hides a forgotten meter without deleting its data.
    /// - `reading`: raw facts (packet bytes, seq, base time as sent, offset, raw SFLOAT, unit, type,
    ///   location, status, meal) and conclusions (instant, how it was resolved, values, flags).
    ///   A trigger refuses any change to the raw facts. `(meter_id, seq, epoch)` is unique: within
    ///   an epoch a sequence number names one record.
    /// - `sync_session`: one row per sync attempt, for `sugarctl` and support.
    /// - `sequence_reset`: one row per detected reset (old and new epoch, why).
    static let v1 = """
        CREATE TABLE meter (
            id INTEGER PRIMARY KEY,
            address TEXT NOT NULL UNIQUE,
            name TEXT,
            manufacturer TEXT,
            model TEXT,
            serial_number TEXT,
            firmware TEXT,
            features INTEGER,
            first_seen_ms INTEGER NOT NULL,
            last_seen_ms INTEGER NOT NULL,
            epoch INTEGER NOT NULL DEFAULT 0 CHECK (epoch >= 0),
            high_water INTEGER CHECK (high_water BETWEEN 0 AND 65535),
            last_sync_ms INTEGER,
            last_sync_result TEXT,
            forgotten_ms INTEGER
        ) STRICT;

        CREATE TABLE sync_session (
            id INTEGER PRIMARY KEY,
            meter_id INTEGER NOT NULL REFERENCES meter(id),
            started_ms INTEGER NOT NULL,
            ended_ms INTEGER,
            result TEXT NOT NULL,
            expected INTEGER,
            received INTEGER NOT NULL,
            stored INTEGER NOT NULL,
            duplicates INTEGER NOT NULL,
            sequence_resets INTEGER NOT NULL,
            epoch INTEGER NOT NULL,
            high_water_before INTEGER,
            high_water_after INTEGER,
            error TEXT,
            committed_ms INTEGER NOT NULL
        ) STRICT;
        CREATE INDEX sync_session_by_meter ON sync_session(meter_id, started_ms);
        CREATE INDEX sync_session_by_start ON sync_session(started_ms);

        CREATE TABLE reading (
            id INTEGER PRIMARY KEY,
            meter_id INTEGER NOT NULL REFERENCES meter(id),
            epoch INTEGER NOT NULL CHECK (epoch >= 0),
            seq INTEGER NOT NULL CHECK (seq BETWEEN 0 AND 65535),
            measurement_bytes BLOB NOT NULL,
            context_bytes BLOB,
            base_time TEXT NOT NULL,
            time_offset_min INTEGER,
            concentration_raw INTEGER,
            unit TEXT,
            sample_type INTEGER,
            sample_location INTEGER,
            sensor_status INTEGER,
            meal INTEGER,
            instant_ms INTEGER NOT NULL,
            time_method TEXT NOT NULL,
            time_zone TEXT NOT NULL,
            utc_offset_s INTEGER NOT NULL,
            clock_skew_s INTEGER,
            meter_local_time TEXT NOT NULL,
            quirks TEXT NOT NULL,
            mgdl REAL,
            mmoll REAL,
            ketone_mmoll REAL,
            flags INTEGER NOT NULL,
            flag_names TEXT NOT NULL,
            stored_ms INTEGER NOT NULL,
            session_id INTEGER REFERENCES sync_session(id)
        ) STRICT;
        CREATE UNIQUE INDEX reading_by_seq ON reading(meter_id, seq, epoch);
        CREATE INDEX reading_by_instant ON reading(instant_ms);
        CREATE INDEX reading_by_meter_instant ON reading(meter_id, instant_ms);

        CREATE TRIGGER reading_raw_facts_are_immutable
        BEFORE UPDATE OF meter_id, epoch, seq, measurement_bytes, context_bytes, base_time, time_offset_min,
            concentration_raw, unit, sample_type, sample_location, sensor_status, meal ON reading
        BEGIN
            SELECT RAISE(ABORT, 'the raw facts of a stored reading are never changed');
        END;

        CREATE TABLE sequence_reset (
            id INTEGER PRIMARY KEY,
            meter_id INTEGER NOT NULL REFERENCES meter(id),
            old_epoch INTEGER NOT NULL,
            new_epoch INTEGER NOT NULL,
            at_ms INTEGER NOT NULL,
            reason TEXT NOT NULL,
            sequence_number INTEGER,
            old_high_water INTEGER,
            session_id INTEGER REFERENCES sync_session(id)
        ) STRICT;
        CREATE INDEX sequence_reset_by_meter ON sequence_reset(meter_id, at_ms);
        """
}
