import GlucoseProfile
import HealthDataSync
import JSON
import SugarAPI
import SugarForward
import SugarWire
import Testing
import Varlink

/// The wire types of SugarWire against the interface description (field by field: name, type kind,
/// optionality, enum cases) and against the daemon's actual replies (they decode and re-encode to
/// the same JSON).
@Suite struct WireTypeTests {
    static let definition = HealthDataSyncService.parsedDefinition

    /// Every `type` of the interface and its Swift wire type (enums are checked separately).
    static let types: [(String, any WireValue.Type)] = [
        ("Instant", Wire.Instant.self), ("Glucose", Wire.Glucose.self), ("Coded", Wire.Coded.self),
        ("StoreFailure", Wire.StoreFailure.self), ("Storage", Wire.Storage.self), ("StorageCheck", Wire.StorageCheck.self),
        ("Daemon", Wire.Daemon.self),
        ("Adapter", Wire.Adapter.self), ("MeterIdentity", Wire.MeterIdentity.self), ("Progress", Wire.Progress.self),
        ("LastSync", Wire.LastSync.self), ("ReportedError", Wire.ReportedError.self), ("Meter", Wire.Meter.self),
        ("LastReading", Wire.LastReading.self), ("SyncOverview", Wire.SyncOverview.self), ("State", Wire.State.self),
        ("StoredMeter", Wire.StoredMeter.self), ("MeterEntry", Wire.MeterEntry.self), ("Session", Wire.Session.self),
        ("FollowedReading", Wire.FollowedReading.self), ("PersonIdentifier", Wire.PersonIdentifier.self),
        ("Person", Wire.Person.self), ("Assignment", Wire.Assignment.self), ("ClockSet", Wire.ClockSet.self),
    ]

    static let enums: [(String, [String])] = [
        ("SyncResult", Wire.SyncResult.allCases.map(\.rawValue)), ("SyncPhase", Wire.SyncPhase.allCases.map(\.rawValue)),
        ("PairingState", Wire.PairingState.allCases.map(\.rawValue)), ("Unit", Wire.Unit.allCases.map(\.rawValue)),
    ]

    /// Every method with a reply that carries values, and its reply type.
    static let replies: [(String, any WireValue.Type)] = [
        ("GetStatus", Wire.StatusReply.self), ("Watch", Wire.WatchReply.self), ("ListReadings", Wire.ReadingsReply.self),
        ("FollowReadings", Wire.FollowReply.self), ("ListMeters", Wire.MetersReply.self), ("Sync", Wire.SyncReply.self),
        ("Pair", Wire.PairReply.self), ("ListSyncSessions", Wire.SessionsReply.self),
        ("AssignMeter", Wire.AssignReply.self), ("ShareMeter", Wire.AttributionReply.self),
        ("AttributeReadings", Wire.AttributionReply.self), ("ListAssignments", Wire.AssignmentsReply.self),
        ("ListPeople", Wire.PeopleReply.self), ("GetPerson", Wire.PersonHistoryReply.self), ("AddPerson", Wire.PersonReply.self),
        ("EditPerson", Wire.PersonReply.self), ("RemovePerson", Wire.RemovePersonReply.self),
        ("GetPeopleStatus", Wire.PeopleStatusReply.self), ("Backup", Wire.BackupReply.self),
        ("RestoreUpload", Wire.RestoreUploadReply.self), ("Restore", Wire.RestoreReply.self),
        ("CheckStorage", Wire.CheckStorageReply.self),
    ]

    @Test func everyTypeAndMethodOfTheInterfaceHasAWireType() {
        let structs = Self.definition.types.filter { if case .structure = $0.value { return true } else { return false } }
        #expect(Set(structs.keys) == Set(Self.types.map(\.0)))
        let enumNames = Self.definition.types.filter { if case .enumeration = $0.value { return true } else { return false } }
        #expect(Set(enumNames.keys) == Set(Self.enums.map(\.0)))
        let valued = Self.definition.methods.values.filter { !$0.output.isEmpty }.map(\.name)
        #expect(Set(valued) == Set(Self.replies.map(\.0)))
    }

    @Test func enumCasesAreTheInterfacesCases() {
        for (name, cases) in Self.enums {
            guard case .enumeration(let declared) = Self.definition.types[name] else {
                Issue.record("\(name) is not an enum in the interface")
                continue
            }
            #expect(cases == declared, "\(name)")
        }
    }

    @Test func typesAgreeWithTheInterfaceFieldByField() throws {
        for (name, type) in Self.types {
            guard case .structure(let fields) = Self.definition.types[name] else {
                Issue.record("\(name) is not a struct in the interface")
                continue
            }
            try self.checkFields(fields, of: type, what: name, omitsAbsent: false)
        }
    }

    @Test func repliesAgreeWithTheInterfaceFieldByField() throws {
        for (name, type) in Self.replies {
            let output = try #require(Self.definition.methods[name]?.output, "\(name)")
            try self.checkFields(output, of: type, what: name, omitsAbsent: true)
        }
    }

    /// sugard-forward's `io.sugard.Forward` (sugarctl status and doctor read its sinks).
    @Test func forwardSinksAgreeWithTheForwardInterface() throws {
        let forward = try VarlinkInterfaceDefinition(description: ForwardStatusService.interfaceDescription)
        #expect(Set(forward.types.keys) == ["Sink", "DatabaseReset", "Alert", "AlertsSummary", "Webhook"])
        let alertTypes: [(String, any WireValue.Type)] = [
            ("Alert", Wire.ForwardAlert.self), ("AlertsSummary", Wire.ForwardAlertsSummary.self), ("Webhook", Wire.ForwardWebhook.self),
        ]
        for (name, type) in alertTypes {
            guard case .structure(let fields) = forward.types[name] else {
                Issue.record("io.sugard.Forward has no \(name) struct")
                continue
            }
            try self.checkFields(fields, of: type, what: name, omitsAbsent: false, in: forward)
        }
        let alerts = try #require(forward.methods["GetAlerts"]?.output)
        try self.checkFields(alerts, of: Wire.ForwardAlertsReply.self, what: "Forward.GetAlerts", omitsAbsent: true, in: forward)
        if case .structure(let reset) = forward.types["DatabaseReset"] {
            try self.checkFields(reset, of: Wire.DatabaseReset.self, what: "DatabaseReset", omitsAbsent: false, in: forward)
        } else {
            Issue.record("io.sugard.Forward has no DatabaseReset struct")
        }
        guard case .structure(let sink) = forward.types["Sink"] else {
            Issue.record("io.sugard.Forward has no Sink struct")
            return
        }
        try self.checkFields(sink, of: Wire.ForwardSink.self, what: "Sink", omitsAbsent: false, in: forward)
        let output = try #require(forward.methods["GetStatus"]?.output)
        try self.checkFields(output, of: Wire.ForwardStatusReply.self, what: "Forward.GetStatus", omitsAbsent: true, in: forward)
    }

    @Test func errorsAgreeWithTheInterfaceFieldByField() throws {
        for (name, fields) in Self.definition.errors {
            for full in [true, false] {
                guard case .object(let parameters) = self.object(fields, full: full, omitsAbsent: false) else { continue }
                let failure = try #require(try Wire.Failure(name: "io.sugard.HealthDataSync." + name, parameters: parameters), "\(name)")
                #expect(failure.member == name)
                #expect(failure.parameters == parameters, "\(name)")
                #expect(failure.message == parameters["message"]?.stringValue)
                #expect(try Wire.Failure(name: name, parameters: parameters) == failure)
                for field in fields {
                    let without = JSONObject(parameters.entries.filter { $0.key != field.name }.map { ($0.key, $0.value) })
                    if case .optional = field.type { continue }
                    #expect(throws: WireError(path: [field.name], reason: "missing required field"), "\(name).\(field.name)") {
                        _ = try Wire.Failure(name: name, parameters: without)
                    }
                }
            }
        }
        #expect(try Wire.Failure(name: "org.varlink.service.MethodNotFound", parameters: ["method": "x"]) == nil)
    }

    @Test func aMissingOrMistypedFieldIsNamedInTheError() throws {
        let sample = self.sample(.named("State"), full: true)
        guard case .object(var state) = sample, case .object(var daemon) = state["daemon"] else {
            Issue.record("no State sample")
            return
        }
        daemon["startedAt"] = ["iso": "2024-03-31T06:15:00Z", "epochMillis": "soon"]
        state["daemon"] = .object(daemon)
        #expect(throws: WireError(path: ["daemon", "startedAt", "epochMillis"], reason: "expected an integer, got a string")) {
            _ = try Wire.State(json: .object(state))
        }
    }

    /// The daemon's actual replies (its own server, two simulated meters that synced) decode into
    /// the wire types and re-encode to the same JSON.
    @Test func theDaemonsRepliesRoundTrip() async throws {
        try await withAPIServer { f in
            let client = try f.client()
            defer { client.close() }
            try self.roundTrip(Wire.StatusReply.self, try await client.call(api + "GetStatus"))
            try self.roundTrip(Wire.MetersReply.self, try await client.call(api + "ListMeters"))
            try self.roundTrip(Wire.SessionsReply.self, try await client.call(api + "ListSyncSessions"))
            let readings = try await client.call(api + "ListReadings")
            #expect(try Wire.ReadingsReply(json: .object(readings)).readings.count > 0)
            try self.roundTrip(Wire.ReadingsReply.self, readings)
            let sync = try await client.call(api + "Sync", ["meter": .string(meterA.id.rawValue), "force": true])
            #expect(try Wire.SyncReply(json: .object(sync)).sessions?.isEmpty == false)
            try self.roundTrip(Wire.SyncReply.self, sync)
            let progress = try await collect(
                client.callMore(api + "Sync", ["meter": .string(meterA.id.rawValue), "force": true]))
            for reply in progress { try self.roundTrip(Wire.SyncReply.self, reply) }

            let error = await remoteError { _ = try await client.call(api + "Forget", ["meter": "00:00:00:00:00:00"]) }
            if let error {
                let failure = try #require(try Wire.Failure(name: error.name, parameters: error.parameters))
                #expect(failure.member == "MeterNotFound")
                #expect(failure.parameters == error.parameters)
            }

            let watcher = try f.client()
            let guardTask = closing(watcher)
            defer {
                guardTask.cancel()
                watcher.close()
            }
            var replies = watcher.callMore(api + "Watch").makeAsyncIterator()
            let snapshot = try #require(try await replies.next())
            try self.roundTrip(Wire.WatchReply.self, snapshot)
            // A snapshot of the view model carries every field: it decodes as a whole State.
            let fields = try Wire.WatchReply(json: .object(snapshot)).fields
            #expect(try Wire.State(json: .object(fields)).json.serialized() == JSONValue.object(fields).serialized())
            let watched = try Wire.WatchReply(json: .object(snapshot)).watchedFields()
            #expect(watched.map(\.name) == fields.keys)
            for field in watched {
                #expect(field.value.json.serialized() == fields[field.name]?.serialized(), "\(field.name)")
            }
            // Every stored reading decodes as a Wire.Reading and re-encodes to itself.
            let stored = try Wire.ReadingsReply(json: .object(readings)).storedReadings()
            #expect(stored.map { $0.json.serialized() } == (readings["readings"]?.arrayValue ?? []).map { $0.serialized() })
            #expect(stored.allSatisfy { $0.time.epochMillis > 0 && !$0.meter.isEmpty })
        }
    }

    // MARK: - Checks

    private func roundTrip(
        _ type: any WireValue.Type, _ reply: JSONObject, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        // Varlink treats an absent optional parameter and a null one alike; the wire types leave it out.
        let sent = JSONValue.object(JSONObject(reply.entries.filter { !$0.value.isNull }.map { ($0.key, $0.value) }))
        let decoded = try type.init(json: .object(reply))
        // Compared as bytes: the parser reads "151" as an integer, the wire type holds a float.
        #expect(decoded.json.serialized() == sent.serialized(), sourceLocation: sourceLocation)
    }

    /// Decodes a value with every field set and one with every optional field null; each must
    /// re-encode to exactly its input (so field names, order and kinds agree). Then each field
    /// alone is removed and mistyped: a required field must be reported by name, an optional one
    /// may be missing.
    private func checkFields(
        _ fields: [VarlinkField], of type: any WireValue.Type, what: String, omitsAbsent: Bool,
        in definition: VarlinkInterfaceDefinition = Self.definition
    ) throws {
        for full in [true, false] {
            let sample = self.object(fields, full: full, omitsAbsent: omitsAbsent, in: definition)
            let decoded = try type.init(json: sample)
            #expect(decoded.json == sample, "\(what) (\(full ? "every field set" : "optional fields empty"))")
        }
        let full = self.object(fields, full: true, omitsAbsent: omitsAbsent, in: definition)
        guard case .object(let object) = full else { return }
        for field in fields {
            let without = JSONObject(object.entries.filter { $0.key != field.name }.map { ($0.key, $0.value) })
            if case .optional = field.type {
                #expect(throws: Never.self, "\(what).\(field.name) is optional") { _ = try type.init(json: .object(without)) }
            } else {
                #expect(throws: WireError(path: [field.name], reason: "missing required field"), "\(what).\(field.name)") {
                    _ = try type.init(json: .object(without))
                }
            }
            var mistyped = object
            mistyped[field.name] = self.mistyped(field.type, in: definition)
            #expect(throws: WireError.self, "\(what).\(field.name) mistyped") { _ = try type.init(json: .object(mistyped)) }
            // Every case of an enum field decodes.
            if case .enumeration(let cases) = self.resolved(field.type, in: definition) {
                for name in cases {
                    var value = object
                    value[field.name] = .string(name)
                    #expect(throws: Never.self, "\(what).\(field.name) = \(name)") { _ = try type.init(json: .object(value)) }
                }
            }
        }
    }

    private func resolved(_ type: VarlinkType, in definition: VarlinkInterfaceDefinition) -> VarlinkType {
        switch type {
        case .named(let name): return definition.types[name].map { self.resolved($0, in: definition) } ?? type
        case .optional(let wrapped): return self.resolved(wrapped, in: definition)
        default: return type
        }
    }

    /// A value of the wrong kind for `type`.
    private func mistyped(_ type: VarlinkType, in definition: VarlinkInterfaceDefinition) -> JSONValue {
        switch self.resolved(type, in: definition) {
        case .string, .enumeration: return .int(1)
        default: return .string("wrong")
        }
    }

    private func object(
        _ fields: [VarlinkField], full: Bool, omitsAbsent: Bool, in definition: VarlinkInterfaceDefinition = Self.definition
    ) -> JSONValue {
        var object = JSONObject()
        for field in fields {
            let value = self.sample(field.type, full: full, in: definition)
            if omitsAbsent, value.isNull { continue }
            object[field.name] = value
        }
        return .object(object)
    }

    /// A value of `type` built from the interface description alone: optional values set (`full`) or null.
    private func sample(_ type: VarlinkType, full: Bool, in definition: VarlinkInterfaceDefinition = Self.definition) -> JSONValue {
        switch type {
        case .bool: return true
        case .int: return 7
        case .float: return 2.5
        case .string: return "text"
        case .object: return ["any": 1]
        case .named(let name): return definition.types[name].map { self.sample($0, full: full, in: definition) } ?? .null
        case .array(let element): return [self.sample(element, full: full, in: definition)]
        case .map(let element): return ["key": self.sample(element, full: full, in: definition)]
        case .optional(let wrapped): return full ? self.sample(wrapped, full: full, in: definition) : .null
        case .structure(let fields): return self.object(fields, full: full, omitsAbsent: false, in: definition)
        case .enumeration(let cases): return .string(cases.last ?? "")
        }
    }
}
