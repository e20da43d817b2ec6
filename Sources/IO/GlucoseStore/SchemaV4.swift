import HealthDataSync

extension Schema {
    /// Version 4: the database's identity. `store_identity` holds one row: a random UUID (RFC 4122
    /// version 4, lowercase) made when the database was created, and when. It names this file's
    /// commit order: a follower's cursor (`FollowReadings`) is a position in one database, and a
    /// follower that finds another identity knows its cursor means nothing here and starts over.
    /// An earlier file gets a fresh identity in this step; a migration never changes an existing
    /// one. A restore gives the restored file a new one (``SQLiteReadingStore/restore(from:)``);
    /// a backup keeps it.
    static let v4 = """
        CREATE TABLE store_identity (
            singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
            database_id TEXT NOT NULL CHECK (length(database_id) = 36),
            created_ms INTEGER NOT NULL
        ) STRICT;
        """

    /// Creates the identity table and gives the database a fresh random identity.
    static func applyV4(on db: Connection) throws(StoreError) {
        try db.execute(Self.v4, "Adding the database identity (schema version 4) to \(db.path)")
        try Self.setIdentity(DatabaseIdentity.random(), on: db)
    }

    /// Replaces the database's identity (inside the caller's transaction, or as one statement).
    static func setIdentity(_ id: String, on db: Connection) throws(StoreError) {
        try db.withStatement(
            "INSERT OR REPLACE INTO store_identity (singleton, database_id, created_ms) VALUES (1, ?, ?)"
        ) { (statement) throws(StoreError) in
            try statement.bind(id, at: 1)
            try statement.bind(systemNow().epochMillis, at: 2)
            try statement.run("Setting the identity of \(db.path)")
        }
    }

    /// The database's identity; nil before version 4.
    static func identity(_ db: Connection) throws(StoreError) -> String? {
        guard try Self.userVersion(db) >= 4 else { return nil }
        return try db.textColumn("SELECT database_id FROM store_identity WHERE singleton = 1", "Reading the identity of \(db.path)")
            .first
    }
}

/// A database's identity: a random UUID, RFC 4122 version 4, in lowercase text.
public enum DatabaseIdentity {
    /// A new random identity (`SystemRandomNumberGenerator`: the kernel's `getrandom`).
    public static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        bytes[6] = (bytes[6] & 0x0f) | 0x40  // version 4
        bytes[8] = (bytes[8] & 0x3f) | 0x80  // RFC 4122 variant
        let digits = Array("0123456789abcdef")
        var text = ""
        for (index, byte) in bytes.enumerated() {
            if index == 4 || index == 6 || index == 8 || index == 10 { text.append("-") }
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return text
    }

    /// Whether `text` has the form of an identity (lowercase 8-4-4-4-12 hex digits).
    public static func isValid(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                guard (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
                else { return false }
            }
        }
        return true
    }
}
