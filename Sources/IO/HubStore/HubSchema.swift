/// The hub's tables in PostgreSQL, in versioned steps like the gateway's SQLite store
/// (GlucoseStore/Schema.swift): `hub_schema` holds the version; each step runs once, in order.
///
/// Several hub instances may start at once against one database: the migration runs in one
/// transaction holding a transaction-level advisory lock (`pg_advisory_xact_lock`), so one
/// instance migrates and the others wait, then find the version current and do nothing.
public enum HubSchema {
    /// The advisory lock key of the migration ("sugard-hub" as a number: 0x5ugard, hub 35).
    public static let migrationLock: Int64 = 0x5_06A_2D35

    /// The steps; step `n` takes the schema from version `n` to `n + 1`.
    static let steps: [[String]] = [
        [
            """
            CREATE TABLE gateway (
                id text PRIMARY KEY,
                online boolean NOT NULL DEFAULT false,
                status_changed timestamptz,
                last_seen timestamptz,
                version text,
                adapter jsonb,
                storage jsonb,
                database_id text,
                health jsonb,
                health_time timestamptz
            )
            """,
            """
            CREATE TABLE person (
                id text PRIMARY KEY,
                first_seen timestamptz NOT NULL DEFAULT now()
            )
            """,
            """
            CREATE TABLE meter (
                gateway text NOT NULL,
                id text NOT NULL,
                name text,
                person text,
                last_sync timestamptz,
                last_sync_result text,
                overdue boolean NOT NULL DEFAULT false,
                reading_count bigint,
                PRIMARY KEY (gateway, id)
            )
            """,
            """
            CREATE TABLE reading (
                position bigserial NOT NULL,
                gateway text NOT NULL,
                id text NOT NULL,
                meter text NOT NULL,
                person text,
                sequence_number bigint,
                time text,
                measured_at timestamptz,
                mgdl double precision,
                mmoll double precision,
                kind text,
                control_solution boolean NOT NULL DEFAULT false,
                payload jsonb NOT NULL,
                stored_at timestamptz NOT NULL DEFAULT clock_timestamp(),
                PRIMARY KEY (gateway, id)
            )
            """,
            "CREATE INDEX reading_position ON reading (position)",
            "CREATE INDEX reading_person_time ON reading (person, measured_at)",
            "CREATE INDEX reading_gateway_time ON reading (gateway, measured_at)",
            """
            CREATE TABLE alert (
                gateway text NOT NULL,
                id text NOT NULL,
                kind text,
                meter text,
                person text,
                active boolean NOT NULL DEFAULT true,
                message text,
                payload jsonb NOT NULL,
                raised_at timestamptz NOT NULL DEFAULT now(),
                updated_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (gateway, id)
            )
            """,
        ]
    ]

    /// The schema version this hub creates and migrates to.
    public static var currentVersion: Int { self.steps.count }

    /// Brings the database to ``currentVersion``; returns the version found before. A database
    /// from a newer hub is refused (never changed).
    @discardableResult
    public static func migrate(_ db: PostgresConnection) throws(PostgresError) -> Int {
        try db.execute("BEGIN")
        do throws(PostgresError) {
            try db.execute("SELECT pg_advisory_xact_lock($1)", [String(self.migrationLock)])
            try db.execute("CREATE TABLE IF NOT EXISTS hub_schema (version integer NOT NULL)")
            let found = try db.execute("SELECT version FROM hub_schema").scalar.flatMap { Int($0) }
            if found == nil { try db.execute("INSERT INTO hub_schema (version) VALUES (0)") }
            let version = found ?? 0
            guard version <= self.currentVersion else {
                throw PostgresError(
                    "the database has hub schema version \(version), newer than this sugard-hub knows (\(self.currentVersion)); upgrade sugard-hub")
            }
            for step in self.steps[version...] {
                for statement in step { try db.execute(statement) }
            }
            try db.execute("UPDATE hub_schema SET version = $1", [String(self.currentVersion)])
            try db.execute("COMMIT")
            return version
        } catch {
            _ = try? db.execute("ROLLBACK")
            throw error
        }
    }
}
