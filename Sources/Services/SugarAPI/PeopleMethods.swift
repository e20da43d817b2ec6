import GlucoseProfile
import HealthDataSync
import JSON
import SugarWire
import SystemIO
import Varlink

// People, assignments and attributions: AssignMeter, ShareMeter, ListAssignments,
// AttributeReadings, ListPeople, GetPerson, AddPerson, EditPerson, RemovePerson, GetPeopleStatus.
// Parameters are validated here; the store enforces the rest and its refusals come back as
// InvalidParameter with its sentence.
extension HealthDataSyncService {
    /// Runs one of the people methods and sends its single reply. Throws `StorageError` when the
    /// store keeps no people.
    func handlePeople(_ method: String, _ p: JSONObject, replier: VarlinkReplier) async throws(VarlinkError) {
        let people = try self.peopleStore()
        let reply: JSONObject
        switch method {
        case "AssignMeter": reply = try await self.assignMeter(p, people)
        case "ShareMeter":
            let meter = try Self.meter(p["meter"])
            let result = try await self.setAssignment(meter, holder: .shared, from: try Self.from(p["from"]))
            reply = Self.parameters(Wire.AttributionReply(result))
        case "ListAssignments":
            let meter = try Self.meter(p["meter"])
            // Forgotten meters too: their history stays.
            let periods = try await Self.store(unknownMeter: meter) { () async throws(StoreError) in try await people.assignments(meter) }
            reply = Self.parameters(Wire.AssignmentsReply(assignments: periods.map(Wire.Assignment.init)))
        case "AttributeReadings": reply = try await self.attributeReadings(p, people)
        case "ListPeople":
            let store = self.backend.store
            let current = try await Self.store { () async throws(StoreError) in try await store.people() }
            let list = try await Self.store { () async throws(StoreError) in try await people.people(includeCounts: true) }
            reply = Self.parameters(Wire.PeopleReply(people: list.map { Wire.Person($0, meters: Self.meters(of: $0.name, current)) }))
        case "GetPerson": reply = try await self.getPerson(p, people)
        case "AddPerson": reply = try await self.addPerson(p, people)
        case "EditPerson": reply = try await self.editPerson(p, people)
        case "RemovePerson":
            let name = try await self.requiredPerson(p["name"], parameter: "name")
            let force = p["force"]?.boolValue == true
            let removal = try await Self.store(refusedAs: "force") { () async throws(StoreError) in
                try await people.removePerson(named: name, force: force)
            }
            if removal.releasedReadings > 0 { self.attributionBell.ring() }
            reply = Self.parameters(
                Wire.RemovePersonReply(
                    releasedReadings: Int64(removal.releasedReadings), removedAssignments: Int64(removal.removedAssignments)))
        case "GetPeopleStatus":
            let gateway = try await Self.store { () async throws(StoreError) in try await people.gatewayID() }
            let count = try await Self.store { () async throws(StoreError) in try await people.people(includeCounts: false).count }
            let waiting = try await Self.store { () async throws(StoreError) in try await people.unattributedCount() }
            reply = Self.parameters(Wire.PeopleStatusReply(gateway: gateway, people: Int64(count), unattributed: Int64(waiting)))
        default:
            throw VarlinkError.methodNotImplemented(Self.interfaceName + "." + method)
        }
        replier.reply(reply)
    }

    /// `AssignMeter`: gives the meter to `person` (adding a person not known yet) or to nobody from
    /// `from` on; replies with the readings moved and whether the person was added.
    private func assignMeter(_ p: JSONObject, _ people: any PeopleStore) async throws(VarlinkError) -> JSONObject {
        let meter = try Self.meter(p["meter"])
        let from = try Self.from(p["from"])
        var person: String?
        var added = false
        if let value = p["person"], !value.isNull {
            guard let name = Person.validated(value.stringValue ?? "") else { throw Self.invalid("person", Person.rule) }
            person = name
            // A person not known yet is added (AssignMeter has always taken any valid name).
            let known = try await Self.store { () async throws(StoreError) in try await people.person(named: name) }
            if known == nil {
                try await self.backend.requireMeter(meter)
                let record = PersonRecord(id: 0, name: name, created: Instant(epochMillis: wallClockMilliseconds()))
                _ = try await Self.store(refusedAs: "person") { () async throws(StoreError) in try await people.addPerson(record) }
                added = true
            }
        }
        let result = try await self.setAssignment(meter, holder: person.map { .person($0) }, from: from)
        return Self.parameters(Wire.AssignReply(moved: Int64(result.moved), unchanged: Int64(result.unchanged), addedPerson: added))
    }

    /// `AttributeReadings`: gives readings of shared periods to a known person; a refusal is
    /// `InvalidParameter` on `ids` or `meter`, whichever the call used.
    private func attributeReadings(_ p: JSONObject, _ people: any PeopleStore) async throws(VarlinkError) -> JSONObject {
        let person = try await self.requiredPerson(p["person"], parameter: "person")
        let target = try await self.attributionTarget(p)
        let byIDs = p["ids"].map { !$0.isNull } ?? false
        let result = try await Self.store(refusedAs: byIDs ? "ids" : "meter") { () async throws(StoreError) in
            try await people.attribute(target, person: person)
        }
        if result.moved > 0 { self.attributionBell.ring() }
        return Self.parameters(Wire.AttributionReply(result))
    }

    /// `GetPerson`: the person with the meters they hold now and every period that named them, oldest first.
    private func getPerson(_ p: JSONObject, _ people: any PeopleStore) async throws(VarlinkError) -> JSONObject {
        let name = try await self.requiredPerson(p["name"], parameter: "name")
        let store = self.backend.store
        let found = try await Self.store { () async throws(StoreError) in try await people.person(named: name) }
        guard let person = found else {
            throw Self.error(.personNotFound(person: name, message: "No person named \(name) is known."))
        }
        let meters = try await Self.store { () async throws(StoreError) in try await store.meters().map(\.identity.id) }
        var periods: [MeterAssignment] = []
        for meter in meters {
            let history = try await Self.store { () async throws(StoreError) in try await people.assignments(meter) }
            periods += history.filter { $0.person == name }
        }
        periods.sort { $0.from < $1.from }
        let current = try await Self.store { () async throws(StoreError) in try await store.people() }
        return Self.parameters(
            Wire.PersonHistoryReply(
                person: Wire.Person(person, meters: Self.meters(of: name, current)), assignments: periods.map(Wire.Assignment.init)))
    }

    /// `AddPerson`: a valid name, identifiers, thresholds and unit; a refusal is `InvalidParameter(name)`.
    private func addPerson(_ p: JSONObject, _ people: any PeopleStore) async throws(VarlinkError) -> JSONObject {
        guard let name = Person.validated(p["name"]?.stringValue ?? "") else { throw Self.invalid("name", Person.rule) }
        let record = PersonRecord(
            id: 0, name: name, identifiers: try Self.identifiers(p["identifiers"], "identifiers"),
            lowMgdL: try Self.threshold(p["lowMgdL"], "lowMgdL"), highMgdL: try Self.threshold(p["highMgdL"], "highMgdL"),
            unit: try Self.unit(p["unit"]), created: Instant(epochMillis: wallClockMilliseconds()))
        let added = try await Self.store(refusedAs: "name") { () async throws(StoreError) in try await people.addPerson(record) }
        return Self.parameters(Wire.PersonReply(person: Wire.Person(added, meters: [])))
    }

    /// `EditPerson`: rename, identifiers added and removed, thresholds and unit set or cleared
    /// (`clearLow`, `clearHigh`, `clearUnit` win over a value).
    private func editPerson(_ p: JSONObject, _ people: any PeopleStore) async throws(VarlinkError) -> JSONObject {
        let name = try await self.requiredPerson(p["name"], parameter: "name")
        var change = PersonChange()
        if let value = p["newName"], !value.isNull {
            guard let newName = Person.validated(value.stringValue ?? "") else { throw Self.invalid("newName", Person.rule) }
            change.name = newName
        }
        change.addIdentifiers = try Self.identifiers(p["addIdentifiers"], "addIdentifiers")
        change.removeIdentifiers = try Self.identifiers(p["removeIdentifiers"], "removeIdentifiers")
        if p["clearLow"]?.boolValue == true {
            change.lowMgdL = .some(nil)
        } else if let low = try Self.threshold(p["lowMgdL"], "lowMgdL") {
            change.lowMgdL = low
        }
        if p["clearHigh"]?.boolValue == true {
            change.highMgdL = .some(nil)
        } else if let high = try Self.threshold(p["highMgdL"], "highMgdL") {
            change.highMgdL = high
        }
        if p["clearUnit"]?.boolValue == true {
            change.unit = .some(nil)
        } else if let unit = try Self.unit(p["unit"]) {
            change.unit = unit
        }
        let edit = change
        let edited = try await Self.store(refusedAs: "name") { () async throws(StoreError) in try await people.editPerson(named: name, edit) }
        let store = self.backend.store
        let current = try await Self.store { () async throws(StoreError) in try await store.people() }
        return Self.parameters(Wire.PersonReply(person: Wire.Person(edited, meters: Self.meters(of: edited.name, current))))
    }

    /// Runs a store operation: a failure is a StorageError, a refusal (`.constraint`)
    /// InvalidParameter(`refusedAs`) with the store's sentence when `refusedAs` is given.
    static func store<T>(refusedAs parameter: String? = nil, _ work: () async throws(StoreError) -> T) async throws(VarlinkError) -> T {
        do throws(StoreError) {
            return try await work()
        } catch {
            if let parameter, error.code == .constraint { throw Self.invalid(parameter, error.message) }
            throw Self.error(for: error)
        }
    }

    /// The same, a refusal meaning the meter is unknown.
    static func store<T>(unknownMeter meter: MeterID, _ work: () async throws(StoreError) -> T) async throws(VarlinkError) -> T {
        do throws(StoreError) {
            return try await work()
        } catch {
            if error.code == .constraint { throw Self.meterNotFound(meter) }
            throw Self.error(for: error)
        }
    }

    /// A known person's name, required: `InvalidParameter(parameter)` when absent or invalid,
    /// `PersonNotFound` when unknown.
    private func requiredPerson(_ value: JSONValue?, parameter: String) async throws(VarlinkError) -> String {
        guard let name = try await self.knownPerson(value, optional: false, parameter: parameter) else {
            throw Self.invalid(parameter, Person.rule)
        }
        return name
    }

    /// The backend's people store; `StorageError` when it keeps none.
    private func peopleStore() throws(VarlinkError) -> any PeopleStore {
        guard let people = self.backend.people else {
            throw Self.error(.storageError(code: "other", message: "This daemon's store keeps no people."))
        }
        return people
    }

    /// Sets a meter's holder from `from` through the backend; rings the followers when readings moved.
    private func setAssignment(_ meter: MeterID, holder: MeterHolder?, from: Instant) async throws(VarlinkError)
        -> AttributionResult
    {
        do throws(SugarAPIError) {
            let result = try await self.backend.setAssignment(meter: meter, holder: holder, from: from)
            if result.moved > 0 { self.attributionBell.ring() }
            return result
        } catch {
            throw Self.error(for: error)
        }
    }

    /// The meters assigned to `name` now.
    static func meters(of name: String, _ current: [MeterID: String]) -> [String] {
        current.filter { $0.value == name }.map(\.key.rawValue).sorted()
    }

    /// A person's name from `value` that the store knows: nil when absent and `optional`;
    /// `InvalidParameter` for a bad name, `PersonNotFound` for an unknown one.
    func knownPerson(_ value: JSONValue?, optional: Bool, parameter: String = "person") async throws(VarlinkError) -> String? {
        guard let value, !value.isNull else {
            if optional { return nil }
            throw Self.invalid(parameter, Person.rule)
        }
        guard let name = Person.validated(value.stringValue ?? "") else { throw Self.invalid(parameter, Person.rule) }
        let people = try self.peopleStore()
        let known: Bool
        do throws(StoreError) {
            known = try await people.person(named: name) != nil
        } catch {
            throw Self.error(for: error)
        }
        guard known else {
            throw Self.error(.personNotFound(person: name, message: "No person named \(name) is known (sugarctl people list shows who is)."))
        }
        return name
    }

    /// `from` of AssignMeter and ShareMeter: an instant, not in the future (a minute of clock
    /// difference between client and daemon is allowed); now when absent.
    static func from(_ value: JSONValue?) throws(VarlinkError) -> Instant {
        let now = Instant(epochMillis: wallClockMilliseconds())
        guard let from = try Self.instant(value, "from") else { return now }
        guard from.epochMillis <= now.epochMillis + 60_000 else {
            throw Self.invalid("from", "from is in the future; an assignment starts now or in the past.")
        }
        return Instant(epochMillis: min(from.epochMillis, now.epochMillis))
    }

    /// A list of `{system, value}` identifiers; empty when absent; `InvalidParameter(name)` for a
    /// malformed one.
    static func identifiers(_ value: JSONValue?, _ name: String) throws(VarlinkError) -> [PersonIdentifier] {
        guard let value, !value.isNull else { return [] }
        guard let items = value.arrayValue else { throw Self.invalid(name, Person.identifierRule) }
        var out: [PersonIdentifier] = []
        for item in items {
            guard let system = item["system"]?.stringValue, let text = item["value"]?.stringValue,
                let identifier = Person.identifier(system: system, value: text)
            else { throw Self.invalid(name, Person.identifierRule) }
            out.append(identifier.domain)
        }
        return out
    }

    /// A threshold in mg/dL, above 0 and below 1000; nil when absent.
    static func threshold(_ value: JSONValue?, _ name: String) throws(VarlinkError) -> Double? {
        guard let value, !value.isNull else { return nil }
        guard let number = value.doubleValue, number > 0, number < 1000 else {
            throw Self.invalid(name, "\(name) is a glucose value in mg/dL above 0 and below 1000.")
        }
        return number
    }

    /// The `unit` parameter (`mgdl` or `mmol`) as a display unit; nil when absent or null, and
    /// `InvalidParameter(unit)` otherwise.
    static func unit(_ value: JSONValue?) throws(VarlinkError) -> GlucoseUnit? {
        guard let value, !value.isNull else { return nil }
        guard let unit = Wire.Unit(rawValue: value.stringValue ?? "") else { throw Self.invalid("unit", "unit is mgdl or mmol.") }
        return unit
    }

    /// AttributeReadings' readings: `ids`, or `meter` with `since` and `until`.
    private func attributionTarget(_ p: JSONObject) async throws(VarlinkError) -> AttributionTarget {
        if let ids = p["ids"], !ids.isNull {
            guard p["meter"] == nil || p["meter"]?.isNull == true else {
                throw Self.invalid("ids", "Give ids or meter with since and until, not both.")
            }
            guard let items = ids.arrayValue, !items.isEmpty, items.count <= 100_000 else {
                throw Self.invalid("ids", "ids lists 1 to 100000 reading ids.")
            }
            var out: [Int64] = []
            for item in items {
                guard let id = item.intValue, id > 0 else { throw Self.invalid("ids", "A reading id is a positive integer.") }
                out.append(id)
            }
            return .readings(out)
        }
        let meter = try Self.meter(p["meter"])
        guard let since = try Self.instant(p["since"], "since"), let until = try Self.instant(p["until"], "until") else {
            throw Self.invalid("since", "Give ids, or meter with both since and until.")
        }
        guard since < until else { throw Self.invalid("until", "until must be after since.") }
        return .meter(meter, since: since, until: until)
    }
}

extension SugarBackend {
    /// Throws `MeterNotFound` unless the meter is stored or live.
    func requireMeter(_ meter: MeterID) async throws(VarlinkError) {
        do throws(StoreError) {
            if try await self.store.meter(meter) != nil || self.models.model(for: meter) != nil { return }
        } catch {
            throw HealthDataSyncService.error(for: error)
        }
        throw HealthDataSyncService.meterNotFound(meter)
    }
}

extension Wire.AttributionReply {
    /// An attribution's counts.
    init(_ result: AttributionResult) { self.init(moved: Int64(result.moved), unchanged: Int64(result.unchanged)) }
}
