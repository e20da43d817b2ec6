import HealthDataSync

extension Schema {
    /// Version 5: people as records, meter assignments with time, attributions, the follow feed
    /// and the gateway's identity. Self-contained: it needs only the v1 tables and v3's
    /// `meter.person`, so it can be renumbered.
    ///
    /// - `person`: one row per person (display name unique; thresholds in mg/dL; preferred unit).
    /// - `person_identifier`: a person's identifiers in other systems; (system, value) names one person.
    /// - `meter_assignment`: periods [from_ms, until_ms) of a meter; `person_id` NULL means shared.
    ///   Periods of one meter never overlap (the store keeps them so).
    /// - `reading.person_id`: the person the reading belongs to now, kept by the store: set from
    ///   the period covering `instant_ms` when the reading is inserted (trigger
    ///   `reading_person_on_insert`, which rewrites the new row only when a period covers it), changed only by an assignment change in the past or an
    ///   attribution. `reading.shared`: 1 when the reading was measured in a shared period.
    /// - `feed`: the commit order followers read (`FollowReadings`). One row per stored reading
    ///   (the trigger adds it) and one more each time a reading's person changes, with the person
    ///   it then got; `feed.id` is the follow position. Existing readings get the row whose id is
    ///   their own, so a cursor saved before v5 (a reading id) keeps its meaning. A follower reads
    ///   only entries no later entry of the same reading superseded (`feed_by_reading`).
    /// - `gateway_identity`: one row, a random UUID made when the step runs (FHIR identifiers).
    /// - v3's `meter.person` becomes an assignment from the meter's first reading (or first sighting,
    ///   if earlier) and is then cleared: `meter_assignment` is the one home of assignments.
    static let v5 = """
        CREATE TABLE person (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND \(Self.maxPersonLength)),
            low_mgdl REAL CHECK (low_mgdl IS NULL OR low_mgdl > 0),
            high_mgdl REAL CHECK (high_mgdl IS NULL OR high_mgdl > 0),
            unit TEXT CHECK (unit IS NULL OR unit IN ('mgdl', 'mmol')),
            created_ms INTEGER NOT NULL
        ) STRICT;

        CREATE TABLE person_identifier (
            person_id INTEGER NOT NULL REFERENCES person(id),
            system TEXT NOT NULL CHECK (length(system) BETWEEN 1 AND 256),
            value TEXT NOT NULL CHECK (length(value) BETWEEN 1 AND 256),
            PRIMARY KEY (system, value)
        ) STRICT;
        CREATE INDEX person_identifier_by_person ON person_identifier(person_id);

        CREATE TABLE meter_assignment (
            id INTEGER PRIMARY KEY,
            meter_id INTEGER NOT NULL REFERENCES meter(id),
            person_id INTEGER REFERENCES person(id),
            from_ms INTEGER NOT NULL,
            until_ms INTEGER CHECK (until_ms IS NULL OR until_ms > from_ms),
            set_ms INTEGER NOT NULL
        ) STRICT;
        CREATE INDEX meter_assignment_by_meter ON meter_assignment(meter_id, from_ms);

        ALTER TABLE reading ADD COLUMN person_id INTEGER REFERENCES person(id);
        ALTER TABLE reading ADD COLUMN shared INTEGER NOT NULL DEFAULT 0 CHECK (shared IN (0, 1));
        CREATE INDEX reading_by_person ON reading(person_id, instant_ms);
        CREATE INDEX reading_unattributed ON reading(meter_id, instant_ms) WHERE shared = 1 AND person_id IS NULL;

        CREATE TABLE feed (
            id INTEGER PRIMARY KEY,
            reading_id INTEGER NOT NULL REFERENCES reading(id),
            person_id INTEGER REFERENCES person(id)
        ) STRICT;
        CREATE INDEX feed_by_reading ON feed(reading_id, id);

        CREATE TABLE gateway_identity (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            uuid TEXT NOT NULL
        ) STRICT;
        INSERT INTO gateway_identity (id, uuid)
        SELECT 1, lower(substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-4' || substr(h, 14, 3) || '-'
            || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(h, 18, 3) || '-' || substr(h, 21, 12))
        FROM (SELECT hex(randomblob(16)) AS h);

        INSERT INTO person (name, created_ms)
        SELECT DISTINCT person, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) FROM meter WHERE person IS NOT NULL;
        INSERT INTO meter_assignment (meter_id, person_id, from_ms, until_ms, set_ms)
        SELECT m.id, p.id, min(m.first_seen_ms, coalesce((SELECT min(instant_ms) FROM reading WHERE meter_id = m.id),
            m.first_seen_ms)), NULL, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
        FROM meter m JOIN person p ON p.name = m.person;
        UPDATE reading SET person_id = (
            SELECT a.person_id FROM meter_assignment a WHERE a.meter_id = reading.meter_id)
        WHERE meter_id IN (SELECT meter_id FROM meter_assignment);
        UPDATE meter SET person = NULL;
        INSERT INTO feed (id, reading_id, person_id) SELECT id, id, person_id FROM reading ORDER BY id;

        CREATE TRIGGER reading_person_on_insert AFTER INSERT ON reading
        BEGIN
            UPDATE reading SET
                person_id = (SELECT a.person_id FROM meter_assignment a WHERE a.meter_id = NEW.meter_id
                    AND a.from_ms <= NEW.instant_ms AND (a.until_ms IS NULL OR NEW.instant_ms < a.until_ms)),
                shared = (SELECT a.person_id IS NULL FROM meter_assignment a WHERE a.meter_id = NEW.meter_id
                    AND a.from_ms <= NEW.instant_ms AND (a.until_ms IS NULL OR NEW.instant_ms < a.until_ms))
            WHERE id = NEW.id AND EXISTS (SELECT 1 FROM meter_assignment a WHERE a.meter_id = NEW.meter_id
                AND a.from_ms <= NEW.instant_ms AND (a.until_ms IS NULL OR NEW.instant_ms < a.until_ms));
            INSERT INTO feed (reading_id, person_id) VALUES (NEW.id, (SELECT a.person_id FROM meter_assignment a
                WHERE a.meter_id = NEW.meter_id AND a.from_ms <= NEW.instant_ms AND (a.until_ms IS NULL OR NEW.instant_ms < a.until_ms)));
        END;
        """

    /// Runs the v5 step (tables, data moved from `meter.person`, the insert trigger).
    static func applyV5(on db: Connection) throws(StoreError) {
        try db.execute(Self.v5, "Adding people records and assignments (schema version 5) to \(db.path)")
    }
}
