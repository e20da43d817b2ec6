import GlucoseProfile
import HealthDataSync
import JSON
import ProcessKit
import SugarAPI
import SugarForward
import SugarWire
import Testing

/// What a reading means (`Wire.ReadingKind`) and how each sink renders it, for readings made by the
/// production `ReadingBuilder` (CompactReadingTests' samples: glucose in mg/dL and mmol/L, HI, LO, a
/// control-solution test, a ketone record, readings without a value; Berlin summer time, +02:00).
@Suite struct ReadingMeaningTests {
    static let kinds: [Wire.ReadingKind] = [.glucose, .glucose, .hi, .lo, .controlSolution, .ketone, .noValue, .noValue, .glucose]

    @Test func theKindIsDecidedOnceAndTheByteReaderAgrees() throws {
        let samples = try CompactReadingTests.samples()
        var out: [UInt8] = []
        Wire.CompactFollowReply.write(cursors: samples.map(\.id), into: &out) { index, out in
            Wire.CompactReading(samples[index]).write(into: &out)
        }
        var reader = JSONReader(out)
        let texts = try Wire.CompactFollowReply.texts(&reader)
        for (index, stored) in samples.enumerated() {
            let compact = Wire.CompactReading(stored)
            let full = try Wire.Reading(json: ReadingJSON.object(stored))
            #expect(compact.kind == Self.kinds[index], "reading \(stored.id): \(compact.flags)")
            #expect(full.kind == compact.kind)
            #expect(texts[index].reading.kind == compact.kind, "the byte reader decides the same for reading \(stored.id)")
        }
        // Order of precedence: a control test reading LO is a control test, a ketone HI a ketone.
        #expect(Wire.ReadingKind(flags: ["lo", "controlSolution"], hasValue: false) == .controlSolution)
        #expect(Wire.ReadingKind(flags: ["ketone", "hi"], hasValue: false) == .ketone)
        #expect(Wire.ReadingKind(flags: ["clockUnverified"], hasValue: true) == .glucose)
        #expect(Wire.ReadingKind(flags: [], hasValue: false) == .noValue)
    }

    @Test func thePayloadCarriesKindMeasuredAtAndValuesAsPeopleReadThem() throws {
        let samples = try CompactReadingTests.samples()
        for (index, stored) in samples.enumerated() {
            let bytes = try ForwardTopics.payloadBytes(Wire.CompactReading(stored))
            let text = String(decoding: bytes, as: UTF8.self)
            let payload = try JSONValue(parsing: text)
            #expect(payload["kind"] == .string(Self.kinds[index].rawValue), "\(text)")
            // The reading's own offset (Berlin, summer), not UTC.
            #expect(payload["measuredAt"]?.stringValue?.hasSuffix("+02:00") == true, "\(text)")
            #expect(payload["measuredAt"] == .string(Wire.CompactReading(stored).time.local))
            // Every key there was before is still there.
            for key in ["id", "meter", "sequenceNumber", "time", "epochMillis", "mgdL", "mmolL", "flags", "sampleType",
                        "sampleLocation", "meal", "controlSolution", "person"] {
                #expect(payload[key] != nil, "\(key) in \(text)")
            }
            if let mgdL = stored.reading.mgdL {
                #expect(text.contains(#""mgdL":\#(Int64(mgdL.rounded())),"#), "mg/dL is an integer: \(text)")
            } else {
                #expect(payload["mgdL"] == .null && payload["mmolL"] == .null)
            }
            if let mmolL = stored.reading.mmolL {
                #expect(text.contains(#""mmolL":\#(ReadingExport.formatted(mmolL, digits: 1)),"#), "mmol/L has one decimal: \(text)")
            }
        }
    }

    @Test func nightscoutGetsLOAndHIAsNotesAndEveryTreatmentAnIdentifier() throws {
        let samples = try CompactReadingTests.samples().map { Wire.CompactReading($0) }
        var identifiers: Set<String> = []
        for (index, r) in samples.enumerated() {
            let kind = Self.kinds[index]
            let entry = ReadingExport.nightscoutEntry(r)
            let check = ReadingExport.nightscoutTreatment(r, unit: .mmol)
            let note = ReadingExport.nightscoutRangeNote(r)
            // Only glucose values are entries and BG Checks; never a control test or a ketone record.
            #expect((entry != nil) == (kind == .glucose), "reading \(r.id)")
            #expect((check != nil) == (kind == .glucose), "reading \(r.id)")
            #expect((note != nil) == (kind == .lo || kind == .hi), "reading \(r.id)")
            if let note {
                #expect(note["eventType"] == "Note")
                #expect(note["glucose"] == nil && note["mbg"] == nil, "no invented number: \(note.serialized())")
                #expect(note["notes"]?.stringValue?.hasPrefix(kind == .lo ? "LO" : "HI") == true)
                #expect(note["created_at"] == .string(r.time.local))
            }
            if let check {
                // mmol/L treatments are rounded to one decimal.
                let value = try #require(check["glucose"]?.doubleValue)
                #expect(value == ((r.mmolL ?? 0) * 10).rounded() / 10)
                #expect(ReadingExport.nightscoutTreatment(r, unit: .mgdl)?["glucose"] == .int(Int64((r.mgdL ?? 0).rounded())))
            }
            for treatment in [check, note].compactMap({ $0 }) {
                let identifier = try #require(treatment["identifier"]?.stringValue)
                #expect(identifier == ReadingExport.nightscoutIdentifier(r), "stable: made from the reading's id")
                #expect(identifier.count == 36 && identifier.split(separator: "-").count == 5, "a UUID: \(identifier)")
                identifiers.insert(identifier)
            }
        }
        #expect(identifiers.count == 5, "one identifier per reading with a treatment (3 glucose, HI, LO)")
        // Two meters' readings at the same second stay two treatments.
        var other = samples[0]
        other.meter = "C0:26:DA:00:00:01"
        #expect(ReadingExport.nightscoutIdentifier(other) != ReadingExport.nightscoutIdentifier(samples[0]))
    }

    @Test func homeAssistantDiscoveryHasEveryEntityAndKeepsTheGlucoseSensor() throws {
        var config = ForwardConfig(gatewayID: "gw1", socketPath: "/tmp/s", stateDirectory: "/tmp")
        config.unit = .mmol
        let topics = ForwardTopics(config: config)
        let configs = topics.meterDiscovery(meter: "C0:26:DA:01:3A:7F", identity: nil)
        let byTopic = Dictionary(uniqueKeysWithValues: configs.map { ($0.topic, $0.config) })
        // The glucose sensor keeps its topic and unique_id.
        let glucose = try #require(byTopic["homeassistant/sensor/gw1_c026da013a7f/glucose/config"])
        #expect(glucose["unique_id"] == "sugard_gw1_c026da013a7f_glucose")
        #expect(glucose["suggested_display_precision"] == .int(1))
        #expect(glucose["state_topic"] == "sugard/gw1/c026da013a7f/state")
        #expect(glucose["json_attributes_template"]?.stringValue?.contains("measured_at") == true)
        #expect(glucose["device"]?["via_device"] == "sugard_gw1")
        let expected: [(String, String, String?)] = [
            ("homeassistant/binary_sensor/gw1_c026da013a7f/glucose_low/config", "sugard_gw1_c026da013a7f_glucose_low", nil),
            ("homeassistant/binary_sensor/gw1_c026da013a7f/glucose_high/config", "sugard_gw1_c026da013a7f_glucose_high", nil),
            ("homeassistant/event/gw1_c026da013a7f/reading/config", "sugard_gw1_c026da013a7f_reading", nil),
            ("homeassistant/sensor/gw1_c026da013a7f/last_synced/config", "sugard_gw1_c026da013a7f_last_synced", "timestamp"),
            ("homeassistant/binary_sensor/gw1_c026da013a7f/sync_overdue/config", "sugard_gw1_c026da013a7f_sync_overdue", "problem"),
        ]
        for (topic, uniqueID, deviceClass) in expected {
            let entity = try #require(byTopic[topic], "\(topic)")
            #expect(entity["unique_id"] == .string(uniqueID))
            #expect(entity["device_class"]?.stringValue == deviceClass)
            #expect(entity["device"] == glucose["device"], "one device per meter")
            #expect(entity["availability_topic"] == "sugard/gw1/status")
        }
        let event = try #require(byTopic["homeassistant/event/gw1_c026da013a7f/reading/config"])
        #expect(event["event_types"] == ["glucose", "lo", "hi", "control_solution", "ketone"])
        #expect(event["state_topic"] == "sugard/gw1/c026da013a7f/event")
        let adapter = try #require(topics.gatewayDiscovery().first)
        #expect(adapter.topic == "homeassistant/binary_sensor/gw1/adapter/config")
        #expect(adapter.config["device_class"] == "problem" && adapter.config["unique_id"] == "sugard_gw1_adapter")
        #expect(adapter.config["device"]?["identifiers"] == ["sugard_gw1"])
        // mg/dL: no decimals.
        #expect(ForwardTopics(config: ForwardConfig(gatewayID: "gw1", socketPath: "/tmp/s", stateDirectory: "/tmp"))
            .discoveryConfig(meter: "C0:26:DA:01:3A:7F", identity: nil)["suggested_display_precision"] == .int(0))
    }

    @Test func aPersonsTopicLevelIsReadableAndNeverShared() {
        #expect(ForwardTopics.personLevel("Mia") == "mia_3aa067")
        #expect(ForwardTopics.personLevel("mia") != ForwardTopics.personLevel("Mia"))
        #expect(ForwardTopics.personLevel("Zoë \"Z\" O'Brien").hasPrefix("zo___z__o_brien_"))
        let configs = ForwardTopics(config: ForwardConfig(gatewayID: "gw1", socketPath: "/tmp/s", stateDirectory: "/tmp"))
            .personDiscovery(person: "Mia")
        #expect(configs.map(\.topic) == [
            "homeassistant/sensor/gw1_person_mia_3aa067/glucose/config",
            "homeassistant/binary_sensor/gw1_person_mia_3aa067/glucose_low/config",
            "homeassistant/binary_sensor/gw1_person_mia_3aa067/glucose_high/config",
            "homeassistant/event/gw1_person_mia_3aa067/reading/config",
        ])
        #expect(configs.allSatisfy { $0.config["device"]?["name"] == "Mia" && $0.config["device"]?["via_device"] == "sugard_gw1" })
    }

    @Test func lowAndHighFollowLOHIAndTheThresholds() {
        var config = ForwardConfig(gatewayID: "gw1", socketPath: "/tmp/s", stateDirectory: "/tmp")
        let topics = ForwardTopics(config: config)
        #expect(topics.levels(kind: .lo, mgdL: nil) == (true, false))
        #expect(topics.levels(kind: .hi, mgdL: nil) == (false, true))
        #expect(topics.levels(kind: .glucose, mgdL: 69) == (true, false))
        #expect(topics.levels(kind: .glucose, mgdL: 70) == (false, false))
        #expect(topics.levels(kind: .glucose, mgdL: 251) == (false, true))
        #expect(topics.levels(kind: .controlSolution, mgdL: 40) == (false, false))
        config.glucoseLowMgdL = 80
        #expect(ForwardTopics(config: config).levels(kind: .glucose, mgdL: 75) == (true, false))
    }

    @Test func theThresholdKeysAreCheckedAsTheyAreRead() throws {
        var config = ForwardConfig(gatewayID: "gw1", socketPath: "/tmp/s", stateDirectory: "/tmp")
        try config.apply(key: "glucose_low_mgdl", value: "65")
        try config.apply(key: "glucose_high_mgdl", value: "300")
        try config.apply(key: "sync_overdue_hours", value: "12")
        #expect(config.glucoseLowMgdL == 65 && config.glucoseHighMgdL == 300 && config.syncOverdueHours == 12)
        #expect(throws: ConfigError.self) { try config.apply(key: "glucose_low_mgdl", value: "low") }
        #expect(throws: ConfigError.self) { try config.apply(key: "sync_overdue_hours", value: "0") }
        config.glucoseLowMgdL = 300
        #expect(throws: ConfigError.self) { try config.validate(file: nil) }
    }
}
