import GlucoseProfile
import HealthDataSync
import JSON
import SugarAPI
import SugarWire
import Testing

/// The daemon's domain values as the wire values it sends (SugarAPI's WireFromDomain.swift): the
/// view model's state, a watch message, a stored reading, and every enum case by its name.
@Suite struct WireFromDomainTests {
    static let meterA = MeterID("C0:26:DA:00:00:0A")

    static func viewModel() -> ViewModel {
        let daemon = DaemonInfo(
            version: "0.1.0", startedAt: Instant(epochMillis: 1_700_000_000_000),
            storage: StorageHealth(status: .ok, path: "/var/lib/sugard/readings.sqlite"))
        return ViewModel(ViewState(daemon: daemon))
    }

    /// A record whose packet (one byte) does not decode: the reading object falls back to its raw facts.
    static func reading(sequence: UInt16, mgdL: Double) -> Reading {
        Reading(
            meter: meterA, sequenceNumber: sequence, measurementBytes: [0x03], contextBytes: nil,
            baseTime: LocalDateTime(year: 2023, month: 11, day: 14, hour: 23, minute: 23, second: 20),
            timeOffsetMinutes: 0, concentrationRaw: nil, unit: .kilogramsPerLiter, sampleType: 1, sampleLocation: 1,
            sensorStatus: nil, meal: nil, instant: Instant(epochMillis: 1_700_000_600_000),
            time: TimeResolution(
                method: .meterClock, zone: "Europe/Berlin", utcOffsetSeconds: 3600, meterClockSkewSeconds: 4,
                meterLocalTime: LocalDateTime(year: 2023, month: 11, day: 15, hour: 0, minute: 23, second: 20)),
            mgdL: mgdL, mmolL: nil, flags: [])
    }

    @Test func stateAndMessagesRenderWithBridgeConventions() async throws {
        let store = ModelStore(viewModel: Self.viewModel())
        let meter = store.model(for: MeterIdentity(id: Self.meterA, manufacturer: "Roche", model: "Guide"))
        meter.update {
            $0.link = .connected
            $0.sync = .receiving
            $0.pairing = .waitingForPasskey
            $0.progress = SyncProgress(received: 2, expected: 9)
            $0.highWater = 41
            $0.lastError = ReportedError(
                code: "attError", message: "The meter refused the request.", hint: "Try again.",
                at: Instant(epochMillis: 1_551_265_830_042), specCode: 0x81)
        }
        let stored = StoredReading(
            id: 17, epoch: 0, storedAt: Instant(epochMillis: 1_700_000_700_000),
            reading: Self.reading(sequence: 42, mgdL: 180.156))
        store.viewModel.update {
            $0.lastReading = ReadingSummary(stored)
            $0.readingCount = 1
        }
        let json = Wire.State(store.viewModel.state).json
        #expect(json.objectValue?.keys == StateField.allCases.map(\.rawValue))

        let daemon = try #require(json["daemon"])
        #expect(daemon["startedAt"] == ["iso": "2023-11-14T22:13:20Z", "epochMillis": 1_700_000_000_000])
        #expect(daemon["storage"]?["status"] == "ok")

        let reading = try #require(json["lastReading"])
        #expect(reading["instant"] == ["iso": "2023-11-14T22:23:20Z", "epochMillis": 1_700_000_600_000])
        #expect(reading["glucose"]?["mgdL"]?.doubleValue == 180.156)
        let mmol = try #require(reading["glucose"]?["mmolL"]?.doubleValue)
        #expect(abs(mmol - 10.0) < 1e-9)
        #expect(reading["sampleType"] == ["name": "capillaryWholeBlood", "code": 1])
        #expect(reading["sampleLocation"] == ["name": "finger", "code": 1])
        #expect(reading["flags"] == [])
        #expect(reading["meterLocalTime"] == "2023-11-15T00:23:20")
        #expect(reading["timeMethod"] == "meterClock")
        #expect(reading["storeID"] == 17)
        #expect(reading["storedAt"]?["epochMillis"] == 1_700_000_700_000)

        let meterJSON = try #require(json["meters"]?.arrayValue?.first)
        #expect(meterJSON.objectValue?.keys == ["id"] + MeterField.allCases.map(\.rawValue))
        #expect(meterJSON["id"] == "C0:26:DA:00:00:0A")
        #expect(meterJSON["link"] == "connected")
        #expect(meterJSON["sync"] == "receiving")
        #expect(meterJSON["pairing"] == "waitingForPasskey")
        #expect(meterJSON["progress"] == ["received": 2, "expected": 9])
        #expect(meterJSON["highWater"] == 41)
        #expect(meterJSON["lastSync"] == .null)
        #expect(meterJSON["identity"]?["displayName"] == "Roche Guide")
        #expect(meterJSON["lastError"]?["at"] == ["iso": "2019-02-27T11:10:30.042Z", "epochMillis": 1_551_265_830_042])
        #expect(meterJSON["lastError"]?["specCode"] == 0x81)
        #expect(json["sync"] == ["phase": "syncing", "activeMeters": ["C0:26:DA:00:00:0A"], "lastResult": nil])
        #expect(json["errors"]?.arrayValue?.first?["meter"] == "C0:26:DA:00:00:0A")

        // Serialized text parses back to the same text (integral doubles come back as integers).
        #expect(try JSONValue(parsing: json.serialized()).serialized() == json.serialized())

        // GetStatus reads the state with its revisions at once: the same state, and the revisions a
        // snapshot of every field carries.
        let (state, revision, revisions) = store.viewModel.stateWithRevisions()
        let all = store.viewModel.snapshot()
        #expect(Wire.WatchReply(all).json["fields"] == Wire.State(state).json, "the state's and its fields' wire forms agree")
        #expect(revision == all.globalRevision)
        #expect(WireMap(revisions: ViewState.Field.allCases.map { ($0, revisions[$0] ?? 0) }).json == WireMap(revisionsOf: all).json)

        // A watch message: only its fields, with revisions.
        let watcher = store.viewModel.watch(fields: [.readingCount, .lastReading])
        let snapshot = try #require(await watcher.next())
        let message = Wire.WatchReply(snapshot).json
        #expect(message.objectValue?.keys == ["generation", "revision", "snapshot", "fields", "revisions"])
        #expect(message["generation"] == 1)
        #expect(message["snapshot"] == true)
        #expect(message["revision"]?.intValue == Int64(store.viewModel.revision))
        #expect(message["fields"]?.objectValue?.keys == ["lastReading", "readingCount"])
        #expect(message["fields"]?["lastReading"] == reading)
        #expect(message["revisions"]?["readingCount"]?.intValue == Int64(store.viewModel.revision(of: .readingCount)))
        #expect(Wire.WatchReply(snapshot, meter: Self.meterA.rawValue).json["meter"] == "C0:26:DA:00:00:0A")
        watcher.cancel()
    }

    /// A reading whose packet does not decode still shows its raw facts, the stored facts on top
    /// in a fixed order, and reads back as the same value.
    @Test func aStoredReadingIsItsRawFactsWithTheStoredFactsOnTop() throws {
        let stored = StoredReading(
            id: 9, epoch: 2, storedAt: Instant(epochMillis: 5), reading: Self.reading(sequence: 7, mgdL: 101), person: "Ada")
        let reading = Wire.Reading(stored)
        #expect(
            reading.object.keys == [
                "characteristic", "sequenceNumber", "baseTime", "timeOffsetMinutes", "mgdL", "mmolL", "id", "meter", "epoch",
                "ketoneMmolL", "flags", "time", "storedAt", "person", "context", "awaitingAttribution",
            ])
        #expect(reading.json["baseTime"] == "2023-11-14T23:23:20")
        #expect(reading.json["mmolL"] == .null)
        #expect(reading.json["time"]?["meterClockSkewSeconds"] == 4)
        #expect(reading.json["time"]?["local"] == "2023-11-14T23:23:20+01:00")
        #expect(try Wire.Reading(json: reading.json) == reading)
        #expect(ReadingJSON.object(stored) == reading.json)
    }

    /// Each domain enum case goes out under its own name.
    @Test func enumCasesKeepTheirNames() throws {
        for state in PairingState.allCases { #expect(Wire.PairingState(state).rawValue == state.rawValue) }
        for link in LinkPhase.allCases { #expect(Wire.Meter.Link(link).rawValue == link.rawValue) }
        for result in Wire.SyncResult.allCases {
            #expect(Wire.SyncResult(try #require(SyncResult(rawValue: result.rawValue))) == result)
        }
        for method in Wire.LastReading.TimeMethod.allCases {
            #expect(Wire.LastReading.TimeMethod(try #require(TimeResolution.Method(rawValue: method.rawValue))) == method)
        }
        let phases: [SyncPhase] = [
            .idle, .connecting, .pairing, .readingDeviceInfo, .readingClock, .subscribing, .counting, .receiving,
            .waitingToRetry, .committing, .disconnecting, .done(.success),
        ]
        for phase in phases { #expect(Wire.SyncPhase(phase).rawValue == phase.name) }
        // The one unit type's names are the interface's `type Unit (mgdl, mmol)`, both ways.
        #expect(GlucoseUnit.allCases.map(\.json) == [.string("mgdl"), .string("mmol")])
        for unit in GlucoseUnit.allCases { #expect(try Wire.Unit(json: unit.json) == unit) }
    }
}
