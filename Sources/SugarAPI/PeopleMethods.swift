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
    func handlePeople(_ method: String, _ p: JSONObject, replier: VarlinkReplier) async throws(VarlinkError) {
        let people = try self.peopleStore()
        do {
            switch method {
            case "AssignMeter":
                let meter = try Self.meter(p["meter"])
                let from = try Self.from(p["from"])
                var person: String?
                var added = false
                if let value = p["person"], !value.isNull {
                    guard let name = Person.validated(value.stringValue ?? "") else { throw Self.invalid("person", Person.rule) }
                    person = name
                    // A person not known yet is added (the earlier AssignMeter took any name).
                    if try await people.person(named: name) == nil {
                        try await self.backend.requireMeter(meter)
                        _ = try await people.addPerson(PersonRecord(id: 0, name: name, created: Instant(epochMillis: wallClockMilliseconds())))
                        added = true
                    }
                }
                let result = try await self.setAssignment(meter, holder: person.map { .person($0) }, from: from)
                replier.reply(
                    Self.parameters(
                        Wire.AssignReply(moved: Int64(result.moved), unchanged: Int64(result.unchanged), addedPerson: added)))
            case "ShareMeter":
                let meter = try Self.meter(p["meter"])
                let result = try await self.setAssignment(meter, holder: .shared, from: try Self.from(p["from"]))
                replier.reply(Self.parameters(Wire.AttributionReply(result)))
            case "ListAssignments":
                let meter = try Self.meter(p["meter"])
                try await self.backend.requireMeter(meter)
                let periods = try await people.assignments(meter)
                replier.reply(Self.parameters(Wire.AssignmentsReply(assignments: periods.map(Wire.Assignment.init))))
            case "AttributeReadings":
                guard let person = try await self.knownPerson(p["person"], optional: false) else {
                    throw Self.invalid("person", Person.rule)
                }
                let target = try await self.attributionTarget(p)
                let result: AttributionResult = try await Self.refused(p["ids"] != nil && p["ids"]?.isNull == false ? "ids" : "meter") { try await people.attribute(target, person: person) }
                if result.moved > 0 { self.attributionBell.ring() }
                replier.reply(Self.parameters(Wire.AttributionReply(result)))
            case "ListPeople":
                let current = try await self.backend.store.people()
                let list = try await people.people(includeCounts: true).map { person in
                    Wire.Person(person, meters: Self.meters(of: person.name, current))
                }
                replier.reply(Self.parameters(Wire.PeopleReply(people: list)))
            case "GetPerson":
                guard let name = try await self.knownPerson(p["name"], optional: false, parameter: "name"),
                    let person = try await people.person(named: name)
                else { throw Self.invalid("name", Person.rule) }
                var periods: [MeterAssignment] = []
                for meter in try await self.backend.store.meters().map(\.identity.id) {
                    periods += try await people.assignments(meter).filter { $0.person == name }
                }
                periods.sort { $0.from < $1.from }
                let current = try await self.backend.store.people()
                replier.reply(
                    Self.parameters(
                        Wire.PersonHistoryReply(
                            person: Wire.Person(person, meters: Self.meters(of: name, current)),
                            assignments: periods.map(Wire.Assignment.init))))
            case "AddPerson":
                guard let name = Person.validated(p["name"]?.stringValue ?? "") else { throw Self.invalid("name", Person.rule) }
                let record = PersonRecord(
                    id: 0, name: name, identifiers: try Self.identifiers(p["identifiers"], "identifiers"),
                    lowMgdL: try Self.threshold(p["lowMgdL"], "lowMgdL"), highMgdL: try Self.threshold(p["highMgdL"], "highMgdL"),
                    unit: try Self.unit(p["unit"]), created: Instant(epochMillis: wallClockMilliseconds()))
                let added: PersonRecord = try await Self.refused("name") { try await people.addPerson(record) }
                replier.reply(Self.parameters(Wire.PersonReply(person: Wire.Person(added, meters: []))))
            case "EditPerson":
                guard let name = try await self.knownPerson(p["name"], optional: false, parameter: "name") else {
                    throw Self.invalid("name", Person.rule)
                }
                var change = PersonChange()
                if let value = p["newName"], !value.isNull {
                    guard let newName = Person.validated(value.stringValue ?? "") else { throw Self.invalid("newName", Person.rule) }
                    change.name = newName
                }
                change.addIdentifiers = try Self.identifiers(p["addIdentifiers"], "addIdentifiers").map(\.self)
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
                let edited: PersonRecord = try await Self.refused("name") { try await people.editPerson(named: name, change) }
                let current = try await self.backend.store.people()
                replier.reply(
                    Self.parameters(Wire.PersonReply(person: Wire.Person(edited, meters: Self.meters(of: edited.name, current)))))
            case "RemovePerson":
                guard let name = try await self.knownPerson(p["name"], optional: false, parameter: "name") else {
                    throw Self.invalid("name", Person.rule)
                }
                let removal: PersonRemoval = try await Self.refused("force") { try await people.removePerson(named: name, force: p["force"]?.boolValue == true) }
                if removal.releasedReadings > 0 { self.attributionBell.ring() }
                replier.reply(
                    Self.parameters(
                        Wire.RemovePersonReply(
                            releasedReadings: Int64(removal.releasedReadings), removedAssignments: Int64(removal.removedAssignments))))
            case "GetPeopleStatus":
                replier.reply(
                    Self.parameters(
                        Wire.PeopleStatusReply(
                            gateway: try await people.gatewayID(), people: Int64(try await people.people(includeCounts: false).count),
                            unattributed: Int64(try await people.unattributedCount()))))
            default:
                throw VarlinkError.methodNotImplemented(Self.interfaceName + "." + method)
            }
        } catch let error as VarlinkError {
            throw error
        } catch let error as StoreError {
            throw Self.error(for: error)
        } catch {
            throw Self.error(.storageError(code: "other", message: "\(error)"))
        }
    }

    /// Runs `body`; a store refusal (`.constraint`) becomes InvalidParameter(`parameter`) with the
    /// store's sentence.
    static func refused<T>(_ parameter: String, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as StoreError where error.code == .constraint {
            throw Self.invalid(parameter, error.message)
        }
    }

    private func peopleStore() throws(VarlinkError) -> any PeopleStore {
        guard let people = self.backend.people else {
            throw Self.error(.storageError(code: "other", message: "This daemon's store keeps no people."))
        }
        return people
    }

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

    static func threshold(_ value: JSONValue?, _ name: String) throws(VarlinkError) -> Double? {
        guard let value, !value.isNull else { return nil }
        guard let number = value.doubleValue, number > 0, number < 1000 else {
            throw Self.invalid(name, "\(name) is a glucose value in mg/dL above 0 and below 1000.")
        }
        return number
    }

    static func unit(_ value: JSONValue?) throws(VarlinkError) -> GlucoseUnit? {
        guard let value, !value.isNull else { return nil }
        guard let unit = Wire.Unit(rawValue: value.stringValue ?? "") else { throw Self.invalid("unit", "unit is mgdl or mmol.") }
        return unit.glucoseUnit
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
    init(_ result: AttributionResult) { self.init(moved: Int64(result.moved), unchanged: Int64(result.unchanged)) }
}
