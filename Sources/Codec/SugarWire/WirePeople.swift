public import JSON

// People, assignments and attributions of `io.sugard.HealthDataSync`: the types and replies.

extension Wire {
    /// `type PersonIdentifier (system, value)`.
    public struct PersonIdentifier: WireValue, Hashable {
        /// Who issued the identifier: a URI, such as a clinic's `urn:oid:…`.
        public var system: String
        /// The identifier within that system.
        public var value: String

        /// An identifier as given (``Person/identifier(system:value:)`` validates).
        public init(system: String, value: String) {
            self.system = system
            self.value = value
        }

        /// Requires `system` and `value`.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.system = try f.required("system")
            self.value = try f.required("value")
        }

        /// The object with every key.
        public var json: JSONValue { ["system": .string(self.system), "value": .string(self.value)] }

        /// `SYSTEM|VALUE`, as `sugarctl` takes and shows it.
        public var text: String { self.system + "|" + self.value }
    }

    /// `type Person`.
    public struct Person: WireValue, Hashable {
        /// The person's row id.
        public var id: Int64
        /// Unique on this gateway; names the person in readings, sinks and reports.
        public var name: String
        /// Identifiers of the person in other systems.
        public var identifiers: [PersonIdentifier]
        /// The low threshold reports and alerts use; nil: the default.
        public var low: Glucose?
        /// The high threshold; nil: the default.
        public var high: Glucose?
        /// The unit the person prefers; nil: the configured one.
        public var unit: Unit?
        /// When the person was added.
        public var created: Instant
        /// Readings that belong to the person.
        public var readingCount: Int64
        /// Meters assigned to the person now.
        public var meters: [String]

        /// A person with every field given.
        public init(
            id: Int64, name: String, identifiers: [PersonIdentifier], low: Glucose?, high: Glucose?, unit: Unit?,
            created: Instant, readingCount: Int64, meters: [String]
        ) {
            self.id = id
            self.name = name
            self.identifiers = identifiers
            self.low = low
            self.high = high
            self.unit = unit
            self.created = created
            self.readingCount = readingCount
            self.meters = meters
        }

        /// Requires `id`, `name`, `identifiers`, `created`, `readingCount` and `meters`; `low`, `high` and `unit`
        /// may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.id = try f.required("id")
            self.name = try f.required("name")
            self.identifiers = try f.array("identifiers")
            self.low = try f.optional("low")
            self.high = try f.optional("high")
            self.unit = try f.optional("unit")
            self.created = try f.required("created")
            self.readingCount = try f.required("readingCount")
            self.meters = try f.array("meters")
        }

        /// The object with every key; a value that is absent is null.
        public var json: JSONValue {
            [
                "id": .int(self.id), "name": .string(self.name), "identifiers": .wire(self.identifiers),
                "low": .wire(self.low), "high": .wire(self.high), "unit": .wire(self.unit), "created": self.created.json,
                "readingCount": .int(self.readingCount), "meters": .wire(self.meters),
            ]
        }
    }

    /// `type Assignment`.
    public struct Assignment: WireValue, Hashable {
        /// The meter's id.
        public var meter: String
        /// Who the readings belong to; nil in a shared period (they wait for an attribution) or unassigned.
        public var person: String?
        /// The meter was shared in this period.
        public var shared: Bool
        /// Start of the period (inclusive).
        public var from: Instant
        /// End of the period (exclusive); nil while it lasts.
        public var until: Instant?
        /// The meter's readings measured in the period.
        public var readingCount: Int64

        /// A period with every field given.
        public init(meter: String, person: String?, shared: Bool, from: Instant, until: Instant?, readingCount: Int64) {
            self.meter = meter
            self.person = person
            self.shared = shared
            self.from = from
            self.until = until
            self.readingCount = readingCount
        }

        /// Requires `meter`, `shared`, `from` and `readingCount`; `person` and `until` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.meter = try f.required("meter")
            self.person = try f.optional("person")
            self.shared = try f.required("shared")
            self.from = try f.required("from")
            self.until = try f.optional("until")
            self.readingCount = try f.required("readingCount")
        }

        /// The object with every key; a value that is absent is null.
        public var json: JSONValue {
            [
                "meter": .string(self.meter), "person": .from(self.person), "shared": .bool(self.shared),
                "from": self.from.json, "until": .wire(self.until), "readingCount": .int(self.readingCount),
            ]
        }
    }

    /// `ListPeople() -> (people)`.
    public struct PeopleReply: WireValue {
        /// People on this gateway, sorted by name.
        public var people: [Person]

        /// A reply listing `people`.
        public init(people: [Person]) { self.people = people }

        /// Requires `people`.
        public init(json: JSONValue) throws(WireError) { self.people = try WireFields(json).array("people") }

        /// The reply's parameters; those without a value are left out, not sent as null.
        public var json: JSONValue { .parameters([("people", .wire(self.people))]) }
    }

    /// `AddPerson(...) -> (person)` and `EditPerson(...) -> (person)`.
    public struct PersonReply: WireValue {
        /// The person as added or changed.
        public var person: Person

        /// A reply carrying `person`.
        public init(person: Person) { self.person = person }

        /// Requires `person`.
        public init(json: JSONValue) throws(WireError) { self.person = try WireFields(json).required("person") }

        /// The reply's parameters; those without a value are left out, not sent as null.
        public var json: JSONValue { .parameters([("person", self.person.json)]) }
    }

    /// `GetPerson(name) -> (person, assignments)`.
    public struct PersonHistoryReply: WireValue {
        /// The person.
        public var person: Person
        /// Every period that names them (any meter), oldest first.
        public var assignments: [Assignment]

        /// The reply with both parameters.
        public init(person: Person, assignments: [Assignment]) {
            self.person = person
            self.assignments = assignments
        }

        /// Requires `person` and `assignments`.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.person = try f.required("person")
            self.assignments = try f.array("assignments")
        }

        /// The reply's parameters; those without a value are left out, not sent as null.
        public var json: JSONValue { .parameters([("person", self.person.json), ("assignments", .wire(self.assignments))]) }
    }

    /// `ListAssignments(meter) -> (assignments)`.
    public struct AssignmentsReply: WireValue {
        /// The meter's periods, oldest first.
        public var assignments: [Assignment]

        /// A reply listing `assignments`.
        public init(assignments: [Assignment]) { self.assignments = assignments }

        /// Requires `assignments`.
        public init(json: JSONValue) throws(WireError) { self.assignments = try WireFields(json).array("assignments") }

        /// The reply's parameters; those without a value are left out, not sent as null.
        public var json: JSONValue { .parameters([("assignments", .wire(self.assignments))]) }
    }

    /// `ShareMeter` and `AttributeReadings` -> (moved, unchanged).
    public struct AttributionReply: WireValue {
        /// Readings whose person changed.
        public var moved: Int64
        /// Readings named or covered whose person stayed.
        public var unchanged: Int64

        /// The reply with both counts.
        public init(moved: Int64, unchanged: Int64) {
            self.moved = moved
            self.unchanged = unchanged
        }

        /// Requires `moved` and `unchanged`.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.moved = try f.required("moved")
            self.unchanged = try f.required("unchanged")
        }

        /// The reply's parameters; those without a value are left out, not sent as null.
        public var json: JSONValue { .parameters([("moved", .int(self.moved)), ("unchanged", .int(self.unchanged))]) }
    }

    /// `AssignMeter(meter, person, from) -> (moved, unchanged, addedPerson)`: every field optional
    /// (a daemon before assignment periods replied with none).
    public struct AssignReply: WireValue {
        /// Readings whose person changed (with a `from` in the past).
        public var moved: Int64?
        /// Readings in that span whose person stayed.
        public var unchanged: Int64?
        /// The person was not known and was added.
        public var addedPerson: Bool?

        /// The reply with the parameters given.
        public init(moved: Int64?, unchanged: Int64?, addedPerson: Bool?) {
            self.moved = moved
            self.unchanged = unchanged
            self.addedPerson = addedPerson
        }

        /// `moved`, `unchanged` and `addedPerson` may be null or absent.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.moved = try f.optional("moved")
            self.unchanged = try f.optional("unchanged")
            self.addedPerson = try f.optional("addedPerson")
        }

        /// The reply's parameters; those without a value are left out, not sent as null.
        public var json: JSONValue {
            .parameters([
                ("moved", .wire(self.moved)), ("unchanged", .wire(self.unchanged)), ("addedPerson", .wire(self.addedPerson)),
            ])
        }
    }

    /// `RemovePerson(name, force) -> (releasedReadings, removedAssignments)`.
    public struct RemovePersonReply: WireValue {
        /// Readings kept without a person.
        public var releasedReadings: Int64
        /// Assignment periods removed with the person.
        public var removedAssignments: Int64

        /// The reply with both counts.
        public init(releasedReadings: Int64, removedAssignments: Int64) {
            self.releasedReadings = releasedReadings
            self.removedAssignments = removedAssignments
        }

        /// Requires `releasedReadings` and `removedAssignments`.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.releasedReadings = try f.required("releasedReadings")
            self.removedAssignments = try f.required("removedAssignments")
        }

        /// The reply's parameters; those without a value are left out, not sent as null.
        public var json: JSONValue {
            .parameters([("releasedReadings", .int(self.releasedReadings)), ("removedAssignments", .int(self.removedAssignments))])
        }
    }

    /// `GetPeopleStatus() -> (gateway, people, unattributed)`.
    public struct PeopleStatusReply: WireValue {
        /// The gateway's identity: a random UUID made once per database (FHIR exports scope identifiers with it).
        public var gateway: String
        /// How many people are known.
        public var people: Int64
        /// Readings that wait for an attribution.
        public var unattributed: Int64

        /// The reply with every parameter given.
        public init(gateway: String, people: Int64, unattributed: Int64) {
            self.gateway = gateway
            self.people = people
            self.unattributed = unattributed
        }

        /// Requires `gateway`, `people` and `unattributed`.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.gateway = try f.required("gateway")
            self.people = try f.required("people")
            self.unattributed = try f.required("unattributed")
        }

        /// The reply's parameters; those without a value are left out, not sent as null.
        public var json: JSONValue {
            .parameters([("gateway", .string(self.gateway)), ("people", .int(self.people)), ("unattributed", .int(self.unattributed))])
        }
    }
}

extension Person {
    /// What an identifier may be, for error messages.
    public static let identifierRule =
        "An identifier is SYSTEM|VALUE: SYSTEM a URI naming the issuer (urn:oid:..., https://...), VALUE the identifier; "
        + "each 1 to 256 characters without control characters or spaces around them."

    /// An identifier from `SYSTEM|VALUE` (split at the first `|`), or nil when it breaks ``identifierRule``.
    public static func identifier(_ text: String) -> Wire.PersonIdentifier? {
        guard let bar = text.firstIndex(of: "|") else { return nil }
        let system = String(text[..<bar])
        let value = String(text[text.index(after: bar)...])
        return self.identifier(system: system, value: value)
    }

    /// The identifier when both parts are valid: the system is a URI (a scheme, `:` and more, no
    /// white space), the value has no control characters and no surrounding white space.
    public static func identifier(system: String, value: String) -> Wire.PersonIdentifier? {
        func clean(_ s: String) -> Bool {
            !s.isEmpty && s.count <= 256 && s.first?.isWhitespace == false && s.last?.isWhitespace == false
                && !s.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        }
        guard clean(system), clean(value), !system.contains(where: \.isWhitespace), let colon = system.firstIndex(of: ":"),
            colon != system.startIndex, system.index(after: colon) != system.endIndex,
            system[..<colon].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) })
        else { return nil }
        return Wire.PersonIdentifier(system: system, value: value)
    }
}
