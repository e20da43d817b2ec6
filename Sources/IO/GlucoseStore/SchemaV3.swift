import HealthDataSync

extension Schema {
    /// Version 3: people. `meter.person` names the person a meter is assigned to
    /// (`sugarctl meters assign METER PERSON`), NULL when it is not. A reading's person is its
    /// meter's, so assigning a meter also attributes its stored readings. The column is added in
    /// place (`ALTER TABLE … ADD COLUMN`): no row is copied or rewritten, nothing is lost, and a v1
    /// file is upgraded in one short transaction when this build first opens it.
    static let v3 = """
        ALTER TABLE meter ADD COLUMN person TEXT CHECK (person IS NULL OR length(person) BETWEEN 1 AND \(Self.maxPersonLength));
        """

    /// The longest person name the store accepts (characters).
    static let maxPersonLength = 64

    /// Runs the v3 step (inside the migration's transaction).
    static func applyV3(on db: Connection) throws(StoreError) {
        try db.execute(Self.v3, "Adding people (schema version 3) to \(db.path)")
    }
}
