import GlucoseProfile
/// People as records, meter assignments with time, and attributions of shared meters' readings.
///
/// A reading's person is decided by its measured time: a meter's assignments are periods
/// (`from` inclusive, `until` exclusive, open while nil); the reading belongs to the person whose
/// period covers its instant. A shared period has no person: its readings wait until someone
/// attributes them (``ReadingStore/attribute(_:person:)``).

/// An identifier a person carries in other systems (a clinic's record number, a national id):
/// `system` names the issuer (a URI), `value` the identifier within it.
public struct PersonIdentifier: Hashable, Sendable {
    /// The issuer, a URI (`urn:oid:…`, a clinic's system URL).
    public var system: String
    /// The identifier within ``system``.
    public var value: String

    /// An identifier `value` issued by `system`.
    public init(system: String, value: String) {
        self.system = system
        self.value = value
    }
}

/// A person as stored.
public struct PersonRecord: Hashable, Sendable {
    /// The store's id: stable for the person's life, never reused for another person.
    public var id: Int64
    /// The display name, unique on this gateway; commands and sinks name the person by it.
    public var name: String
    /// The person's identifiers in other systems; each is held by at most one person.
    public var identifiers: [PersonIdentifier]
    /// Thresholds used by reports and alerts, in mg/dL (nil: the defaults).
    public var lowMgdL: Double?
    /// The person's high threshold in mg/dL (nil: the default); above ``lowMgdL`` when both are set.
    public var highMgdL: Double?
    /// The unit the person prefers (nil: the configured one).
    public var unit: GlucoseUnit?
    /// When the person was added.
    public var created: Instant
    /// Readings that belong to the person now.
    public var readingCount: Int

    /// A record; `id`, `created` and `readingCount` are the store's when the record is added.
    public init(
        id: Int64, name: String, identifiers: [PersonIdentifier] = [], lowMgdL: Double? = nil, highMgdL: Double? = nil,
        unit: GlucoseUnit? = nil, created: Instant, readingCount: Int = 0
    ) {
        self.id = id
        self.name = name
        self.identifiers = identifiers
        self.lowMgdL = lowMgdL
        self.highMgdL = highMgdL
        self.unit = unit
        self.created = created
        self.readingCount = readingCount
    }
}

/// What to change about a person (nil fields are kept).
public struct PersonChange: Hashable, Sendable {
    /// A new display name (refused when another person has it).
    public var name: String?
    /// Identifiers to add (an identifier another person holds is refused).
    public var addIdentifiers: [PersonIdentifier]
    /// Identifiers to remove, by system and value.
    public var removeIdentifiers: [PersonIdentifier]
    /// New thresholds; `.some(nil)` clears one.
    public var lowMgdL: Double??
    /// A new high threshold; `.some(nil)` clears it.
    public var highMgdL: Double??
    /// A new preferred unit; `.some(nil)` clears it (the configured one applies).
    public var unit: GlucoseUnit??

    /// A change; with every argument left out, nothing changes.
    public init(
        name: String? = nil, addIdentifiers: [PersonIdentifier] = [], removeIdentifiers: [PersonIdentifier] = [],
        lowMgdL: Double?? = nil, highMgdL: Double?? = nil, unit: GlucoseUnit?? = nil
    ) {
        self.name = name
        self.addIdentifiers = addIdentifiers
        self.removeIdentifiers = removeIdentifiers
        self.lowMgdL = lowMgdL
        self.highMgdL = highMgdL
        self.unit = unit
    }
}

/// Who holds a meter during a period.
public enum MeterHolder: Hashable, Sendable {
    /// The meter is one person's: its readings are theirs.
    case person(String)
    /// The meter is shared: its readings wait for an attribution.
    case shared
}

/// One period of a meter's assignment history.
public struct MeterAssignment: Hashable, Sendable {
    /// The meter.
    public var meter: MeterID
    /// Who holds it during the period.
    public var holder: MeterHolder
    /// Inclusive start.
    public var from: Instant
    /// Exclusive end; nil while the period lasts.
    public var until: Instant?
    /// Readings of the meter measured within the period.
    public var readingCount: Int

    /// A period of `meter` held by `holder` from `from` until `until`.
    public init(meter: MeterID, holder: MeterHolder, from: Instant, until: Instant?, readingCount: Int = 0) {
        self.meter = meter
        self.holder = holder
        self.from = from
        self.until = until
        self.readingCount = readingCount
    }

    /// The person of a `.person` period.
    public var person: String? {
        if case .person(let name) = self.holder { return name }
        return nil
    }
}

/// What an assignment change or an attribution did to stored readings.
public struct AttributionResult: Hashable, Sendable {
    /// Readings whose person changed.
    public var moved: Int
    /// Readings of the changed period (or named by the attribution) whose person stayed.
    public var unchanged: Int

    /// A result; `unchanged` defaults to 0.
    public init(moved: Int, unchanged: Int = 0) {
        self.moved = moved
        self.unchanged = unchanged
    }
}

/// What removing a person did.
public struct PersonRemoval: Hashable, Sendable {
    /// Readings that were the person's: they keep their meter and values and have no person now.
    public var releasedReadings: Int
    /// Assignment periods that named the person (removed: the meter is unassigned in them).
    public var removedAssignments: Int

    /// A removal's counts.
    public init(releasedReadings: Int, removedAssignments: Int) {
        self.releasedReadings = releasedReadings
        self.removedAssignments = removedAssignments
    }
}

/// Which readings an attribution names.
public enum AttributionTarget: Hashable, Sendable {
    /// Readings by store id.
    case readings([Int64])
    /// A meter's readings measured in [since, until).
    case meter(MeterID, since: Instant, until: Instant)
}

/// People operations of a store. The SQLite store implements them; other stores refuse them.
public protocol PeopleStore: Sendable {
    /// Every person, sorted by name, with identifiers (and reading counts when `includeCounts`).
    func people(includeCounts: Bool) async throws(StoreError) -> [PersonRecord]
    /// The person `name` with identifiers and reading count; nil when unknown.
    func person(named name: String) async throws(StoreError) -> PersonRecord?
    /// Adds a person (`id`, `created` and `readingCount` ignored) and returns it as stored. Throws
    /// `.constraint` for a name in use, an identifier another person holds, or thresholds out of order.
    func addPerson(_ person: PersonRecord) async throws(StoreError) -> PersonRecord
    /// Applies `change` and returns the person as stored. Throws `.constraint` for an unknown person,
    /// a name in use, an identifier held by another, or thresholds out of order.
    func editPerson(named name: String, _ change: PersonChange) async throws(StoreError) -> PersonRecord
    /// Removes a person. With readings and without `force`, throws `.constraint` saying how many.
    /// Returns what the removal did to readings and periods.
    func removePerson(named name: String, force: Bool) async throws(StoreError) -> PersonRemoval
    /// Starts a period for `holder` at `from` (nil holder: ends the period covering `from`).
    /// Readings measured inside the changed span move to the new holder. Throws `.constraint` for
    /// an unknown meter or person, a holder the meter already has at `from`, or nothing to end.
    func setAssignment(_ meter: MeterID, holder: MeterHolder?, from: Instant) async throws(StoreError) -> AttributionResult
    /// The meter's periods, oldest first, each with its reading count; throws `.constraint` for an
    /// unknown meter.
    func assignments(_ meter: MeterID) async throws(StoreError) -> [MeterAssignment]
    /// Gives readings of shared periods to `person`.
    /// A reading named by id must exist and be of a shared period; a meter's window gives only the
    /// readings that wait. Throws `.constraint` for an unknown person, reading or meter, or a reading
    /// not of a shared period.
    func attribute(_ target: AttributionTarget, person: String) async throws(StoreError) -> AttributionResult
    /// Readings of shared periods that nobody was given yet.
    func unattributedCount() async throws(StoreError) -> Int
    /// This gateway's persistent random identity (a UUID, lower case).
    /// Throws `.corrupt` when the stored identity is missing.
    func gatewayID() async throws(StoreError) -> String
}
