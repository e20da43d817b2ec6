/// One reading as a gateway's forwarder published it, with the fields the hub queries by.
public struct HubReading: Sendable, Equatable {
    /// The gateway's id (from the topic it was published on).
    public var gateway: String
    /// The reading's `id` (`<meter>/<epoch>/<sequence>`): unique per gateway.
    public var id: String
    /// The meter's id.
    public var meter: String
    /// Who the reading belongs to, when the gateway named someone.
    public var person: String?
    /// The meter's record number.
    public var sequenceNumber: Int64?
    /// The `time` text as the gateway wrote it (the meter's local time with its offset).
    public var time: String?
    /// Milliseconds since 1970 (`epochMillis`).
    public var epochMillis: Int64?
    /// The value in mg/dL; nil for LO, HI and readings without one.
    public var mgdl: Double?
    /// The value in mmol/L.
    public var mmolL: Double?
    /// The payload's `kind` (what the reading means), as the gateway sent it.
    public var kind: String?
    /// The reading is a control-solution test.
    public var controlSolution: Bool
    /// The whole payload (JSON text), kept as received.
    public var payload: String

    /// A reading with every field given.
    public init(
        gateway: String, id: String, meter: String, person: String?, sequenceNumber: Int64?, time: String?, epochMillis: Int64?,
        mgdl: Double?, mmolL: Double?, kind: String?, controlSolution: Bool, payload: String
    ) {
        self.gateway = gateway
        self.id = id
        self.meter = meter
        self.person = person
        self.sequenceNumber = sequenceNumber
        self.time = time
        self.epochMillis = epochMillis
        self.mgdl = mgdl
        self.mmolL = mmolL
        self.kind = kind
        self.controlSolution = controlSolution
        self.payload = payload
    }
}

/// One meter as a gateway's health message names it.
public struct HubMeter: Sendable, Equatable {
    /// The meter's id.
    public var id: String
    /// Its display name.
    public var name: String?
    /// Who it is assigned to (nil keeps what the hub knows).
    public var person: String?
    /// When its last sync ended (ISO 8601).
    public var lastSync: String?
    /// How that sync ended.
    public var lastSyncResult: String?
    /// The gateway says its sync is overdue.
    public var overdue: Bool
    /// Readings the gateway stores for it.
    public var readingCount: Int64?

    /// A meter with every field given.
    public init(id: String, name: String?, person: String?, lastSync: String?, lastSyncResult: String?, overdue: Bool, readingCount: Int64?) {
        self.id = id
        self.name = name
        self.person = person
        self.lastSync = lastSync
        self.lastSyncResult = lastSyncResult
        self.overdue = overdue
        self.readingCount = readingCount
    }
}

/// An alert a gateway raised (or cleared).
public struct HubAlert: Sendable, Equatable {
    /// The gateway that raised it.
    public var gateway: String
    /// The alert's id, unique per gateway (its raise and its clear share it).
    public var id: String
    /// The alert's rule or kind.
    public var kind: String?
    /// The meter it is about, if any.
    public var meter: String?
    /// The person it is about, if any.
    public var person: String?
    /// Raised (true) or cleared.
    public var active: Bool
    /// One sentence for people.
    public var message: String?
    /// The whole message (JSON text), kept as received.
    public var payload: String

    /// An alert with every field given.
    public init(gateway: String, id: String, kind: String?, meter: String?, person: String?, active: Bool, message: String?, payload: String) {
        self.gateway = gateway
        self.id = id
        self.kind = kind
        self.meter = meter
        self.person = person
        self.active = active
        self.message = message
        self.payload = payload
    }
}

/// The hub's writes and queries over one ``PostgresConnection``. Every write is one statement
/// (PostgreSQL commits it before returning), so a caller that returns after a write returns
/// after the commit.
public final class HubStore {
    /// The connection every call uses (not shared between threads).
    public let db: PostgresConnection

    /// Connects to the hub's database (migrate it with ``HubSchema/migrate(_:)`` before use).
    public init(url: String) throws(PostgresError) {
        self.db = try PostgresConnection(url: url)
    }

    /// Stores a reading once: a second copy (a re-send, a redelivery) changes nothing. The meter
    /// and the person are recorded too, in the same statement. Returns whether it was new.
    @discardableResult
    public func store(_ r: HubReading) throws(PostgresError) -> Bool {
        let rows = try self.db.execute(
            """
            WITH r AS (
                INSERT INTO reading (gateway, id, meter, person, sequence_number, time, measured_at, mgdl, mmoll, kind,
                                     control_solution, payload)
                VALUES ($1, $2, $3, $4, $5::bigint, $6, to_timestamp($7::double precision / 1000), $8::double precision,
                        $9::double precision, $10, $11::boolean, $12::jsonb)
                ON CONFLICT (gateway, id) DO NOTHING
                RETURNING 1
            ), m AS (
                INSERT INTO meter (gateway, id, person) VALUES ($1, $3, $4)
                ON CONFLICT (gateway, id) DO UPDATE SET person = EXCLUDED.person
                WHERE meter.person IS DISTINCT FROM EXCLUDED.person AND EXCLUDED.person IS NOT NULL
            ), p AS (
                INSERT INTO person (id) SELECT $4 WHERE $4 IS NOT NULL ON CONFLICT (id) DO NOTHING
            )
            SELECT count(*) FROM r
            """,
            [
                r.gateway, r.id, r.meter, r.person, r.sequenceNumber.map(String.init), r.time, r.epochMillis.map(String.init),
                r.mgdl.map { "\($0)" }, r.mmolL.map { "\($0)" }, r.kind, r.controlSolution ? "true" : "false", r.payload,
            ])
        return rows.scalar.flatMap { Int($0) } == 1
    }

    /// The gateway's retained status (`online`/`offline`, the latter also its will).
    public func setStatus(gateway: String, online: Bool) throws(PostgresError) {
        try self.db.execute(
            """
            INSERT INTO gateway (id, online, status_changed, last_seen) VALUES ($1, $2::boolean, now(), now())
            ON CONFLICT (id) DO UPDATE SET online = EXCLUDED.online, status_changed = now(),
                last_seen = CASE WHEN EXCLUDED.online THEN now() ELSE gateway.last_seen END
            """, [gateway, online ? "true" : "false"])
    }

    /// The gateway's health message: the gateway row, its meters and its active alerts (alerts
    /// it no longer lists are cleared), in one transaction.
    public func setHealth(
        gateway: String, version: String?, adapter: String?, storage: String?, databaseID: String?, meters: [HubMeter],
        alerts: [HubAlert], payload: String
    ) throws(PostgresError) {
        try self.db.execute("BEGIN")
        do throws(PostgresError) {
            try self.db.execute(
                """
                INSERT INTO gateway (id, last_seen, version, adapter, storage, database_id, health, health_time)
                VALUES ($1, now(), $2, $3::jsonb, $4::jsonb, $5, $6::jsonb, now())
                ON CONFLICT (id) DO UPDATE SET last_seen = now(), version = EXCLUDED.version, adapter = EXCLUDED.adapter,
                    storage = EXCLUDED.storage, database_id = COALESCE(EXCLUDED.database_id, gateway.database_id),
                    health = EXCLUDED.health, health_time = now()
                """, [gateway, version, adapter, storage, databaseID, payload])
            for m in meters {
                try self.db.execute(
                    """
                    INSERT INTO meter (gateway, id, name, person, last_sync, last_sync_result, overdue, reading_count)
                    VALUES ($1, $2, $3, $4, $5::timestamptz, $6, $7::boolean, $8::bigint)
                    ON CONFLICT (gateway, id) DO UPDATE SET name = EXCLUDED.name, person = COALESCE(EXCLUDED.person, meter.person),
                        last_sync = EXCLUDED.last_sync, last_sync_result = EXCLUDED.last_sync_result, overdue = EXCLUDED.overdue,
                        reading_count = EXCLUDED.reading_count
                    """,
                    [gateway, m.id, m.name, m.person, m.lastSync, m.lastSyncResult, m.overdue ? "true" : "false", m.readingCount.map(String.init)])
                if let person = m.person {
                    try self.db.execute("INSERT INTO person (id) VALUES ($1) ON CONFLICT (id) DO NOTHING", [person])
                }
            }
            for a in alerts { try self.upsert(a) }
            try self.db.execute(
                "UPDATE alert SET active = false, updated_at = now() WHERE gateway = $1 AND active AND NOT (id = ANY($2::text[]))",
                [gateway, "{" + alerts.map { "\"" + $0.id.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"") + "\"" }.joined(separator: ",") + "}"])
            try self.db.execute("COMMIT")
        } catch {
            _ = try? self.db.execute("ROLLBACK")
            throw error
        }
    }

    /// An alert published on its own topic: raised, updated or cleared (`active` false).
    public func record(_ a: HubAlert) throws(PostgresError) { try self.upsert(a) }

    /// Inserts the alert or updates it in place (its first `raised_at` kept).
    private func upsert(_ a: HubAlert) throws(PostgresError) {
        try self.db.execute(
            """
            INSERT INTO alert (gateway, id, kind, meter, person, active, message, payload)
            VALUES ($1, $2, $3, $4, $5, $6::boolean, $7, $8::jsonb)
            ON CONFLICT (gateway, id) DO UPDATE SET kind = EXCLUDED.kind, meter = EXCLUDED.meter, person = EXCLUDED.person,
                active = EXCLUDED.active, message = EXCLUDED.message, payload = EXCLUDED.payload, updated_at = now()
            """, [a.gateway, a.id, a.kind, a.meter, a.person, a.active ? "true" : "false", a.message, a.payload])
    }

    // MARK: Queries (JSON made by PostgreSQL)

    /// `/api/gateways`: every gateway with its meters and active alerts, as a JSON array.
    public func gatewaysJSON() throws(PostgresError) -> String {
        try self.json(
            """
            SELECT coalesce(json_agg(g ORDER BY g.id), '[]'::json) FROM (
                SELECT gw.id, gw.online, gw.status_changed AS "statusChanged", gw.last_seen AS "lastSeen", gw.version,
                       gw.adapter, gw.storage, gw.database_id AS "databaseId",
                       (SELECT coalesce(json_agg(json_build_object('id', m.id, 'name', m.name, 'person', m.person,
                            'lastSync', m.last_sync, 'lastSyncResult', m.last_sync_result, 'overdue', m.overdue,
                            'readingCount', m.reading_count) ORDER BY m.id), '[]'::json)
                          FROM meter m WHERE m.gateway = gw.id) AS meters,
                       (SELECT count(*) FROM alert a WHERE a.gateway = gw.id AND a.active) AS "activeAlerts"
                FROM gateway gw) g
            """)
    }

    /// `/api/alerts`: active alerts first, then the latest cleared ones (at most `limit`).
    public func alertsJSON(limit: Int = 500) throws(PostgresError) -> String {
        try self.json(
            """
            SELECT coalesce(json_agg(a), '[]'::json) FROM (
                SELECT gateway, id, kind, meter, person, active, message, raised_at AS "raisedAt", updated_at AS "updatedAt",
                       payload
                FROM alert ORDER BY active DESC, updated_at DESC LIMIT $1::integer) a
            """, [String(limit)])
    }

    /// `/api/readings`: readings in storage order after position `after`, filtered; `limit` of
    /// them and the position to ask after for the next page (nil at the end).
    public func readingsJSON(
        person: String?, gateway: String?, sinceMillis: Int64?, untilMillis: Int64?, after: Int64, limit: Int
    ) throws(PostgresError) -> String {
        try self.json(
            """
            WITH page AS (
                SELECT position, gateway, payload FROM reading
                WHERE position > $1::bigint
                  AND ($2::text IS NULL OR person = $2) AND ($3::text IS NULL OR gateway = $3)
                  AND ($4::bigint IS NULL OR measured_at >= to_timestamp($4::double precision / 1000))
                  AND ($5::bigint IS NULL OR measured_at < to_timestamp($5::double precision / 1000))
                ORDER BY position LIMIT $6::integer + 1
            ), shown AS (SELECT * FROM page ORDER BY position LIMIT $6::integer)
            SELECT json_build_object(
                'readings', (SELECT coalesce(json_agg(payload::jsonb || jsonb_build_object('gateway', gateway) ORDER BY position), '[]'::json) FROM shown),
                'next', CASE WHEN (SELECT count(*) FROM page) > $6::integer THEN (SELECT max(position)::text FROM shown) END)
            """,
            [String(after), person, gateway, sinceMillis.map(String.init), untilMillis.map(String.init), String(limit)])
    }

    /// The single JSON value a query builds; `null` when it returns nothing.
    private func json(_ sql: String, _ parameters: [String?] = []) throws(PostgresError) -> String {
        try self.db.execute(sql, parameters).scalar ?? "null"
    }

    /// Rows for the fleet page and reports (text cells), one statement.
    public func query(_ sql: String, _ parameters: [String?] = []) throws(PostgresError) -> PostgresRows {
        try self.db.execute(sql, parameters)
    }
}
