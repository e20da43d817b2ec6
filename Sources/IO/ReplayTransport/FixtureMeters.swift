import GlucoseProfile
import HealthDataSync
import JSON
import PacketCapture

/// The meter personalities behind `fixtures/*.btsnoop`, each modelled on behaviour described in
/// glucose-profile.md §8 (captures, maintained implementations). Identities are made up; no value is
/// from a real person. `capture()` is deterministic: the same build writes the same bytes.
public enum FixtureMeter: String, CaseIterable, Sendable {
    /// Roche Accu-Chek Guide: kg/L (mg/dL scale), contexts, Date Time 0x2A08 clock, +60 min offset on
    /// every record, sequence numbers from 4, a LO (−INF, status bit 6), a control-solution test
    /// (location 4), passkey pairing (a wrong PIN first), MTU 23, a vendor 128-bit service.
    case accuChekGuide = "accu-chek-guide-mgdl-mtu23"
    /// Ascensia Contour Next One: mol/L (mmol/L scale), time offsets +60, −120, 0, −30, CTS clock, MTU
    /// 247 over 27-byte ACL buffers (discovery and long DIS strings fragment), just-works bonding.
    case contour = "contour-mmol-large-mtu"
    /// Sequence numbers 65533, 65534, 65535, 65535 (sent twice in a row), 0, 1.
    case wrap = "wrap-65535"
    /// Good records with a truncated measurement, an orphan context, a reserved SFLOAT, an undecodable
    /// RACP indication and an announced context that never comes among them.
    case malformed = "malformed-among-good"
    /// i-SENS CareSens N Premier: no clock, Base Time month 13 (firmware bug), a ketone record (context
    /// meal 6), just-works bonding.
    case isensMonth13 = "isens-month13"
    /// LifeScan OneTouch Verio Reflect over its vendor service (no Glucose service): bonding on the
    /// first refused command, records 37–42 with a HI, a LO, a record that is not blood glucose and
    /// one without a value.
    case verioReflect = "onetouch-verio-reflect"
    /// A Glucose Profile meter whose writable Current Time (CTS 0x1805) is 12 min 30 s fast: the
    /// download, then the clock write and its read-back.
    case ctsClockFast = "cts-clock-fast"

    /// The passkey the passkey meter shows.
    public static let accuChekPasskey: UInt32 = 246_810

    /// Whether the fixture is a OneTouch Verio (records in ``verioRecords``, not ``records``).
    public var isVerio: Bool { self == .verioReflect }

    /// Central European Time (UTC+1, November): the zone the clock-setting capture was recorded in.
    public static let recordingZoneCET = TimeZoneRules(
        fixed: ZoneOffset(utcOffsetSeconds: 3600, isDST: false, abbreviation: "CET"), identifier: "CET")
    /// 2025-11-24T16:00:00Z, the first frame of every capture (``CaptureBuilder``'s start).
    public static let captureStart = Instant(epochMillis: 1_764_000_000_000)

    public var personality: MeterPersonality {
        switch self {
        case .accuChekGuide:
            return MeterPersonality(
                address: BluetoothAddress(rawValue: 0x60_77_71_8A_0B_14), name: "meter+06512345", manufacturer: "Roche",
                model: "Accu-Chek Guide", serialNumber: "92500012345", firmware: "v1.03.00",
                feature: GlucoseFeature(rawValue: 0x0403), hasContext: true,
                clock: .dateTime(DateTime(year: 2025, month: 11, day: 24, hours: 17, minutes: 0, seconds: 42)),
                pairing: .passkey(Self.accuChekPasskey), mtu: 23, aclBufferSize: 27, startHandle: 1, glucoseGap: 3,
                vendorService: BluetoothUUID(string: "5ab1e000-8c2d-4e1a-9b0f-726f63686501"))
        case .contour:
            return MeterPersonality(
                address: BluetoothAddress(rawValue: 0xC0_26_DA_11_22_33), name: "Contour7830H6123456",
                manufacturer: "Ascensia Diabetes Care", model: "Contour Next One", serialNumber: "7830H6123456789012",
                firmware: "04.07.00 build 2319 (bootloader 1.02)",
                feature: [.lowBatteryDetection, .sensorMalfunctionDetection, .sampleSize, .stripInsertionErrorDetection,
                          .resultHighLowDetection, .temperatureHighLowDetection, .generalDeviceFault, .multipleBond],
                hasContext: true,
                clock: .currentTime(DateTime(year: 2025, month: 11, day: 24, hours: 16, minutes: 58, seconds: 10)),
                pairing: .justWorks, mtu: 247, aclBufferSize: 27, startHandle: 1, glucoseGap: 0x10,
                vendorService: BluetoothUUID(string: "00000000-0002-11e2-9e96-0800200c9a66"))
        case .wrap:
            return MeterPersonality(
                address: BluetoothAddress(rawValue: 0xD4_A0_01_00_FF_FF), name: "WRAP-1", manufacturer: "sugard simulator",
                model: "wrap-65535", serialNumber: "W65535", firmware: "1.0",
                hasContext: false,
                clock: .currentTime(DateTime(year: 2025, month: 11, day: 24, hours: 17, minutes: 1, seconds: 0)),
                mtu: 23, startHandle: 0x0020)
        case .malformed:
            return MeterPersonality(
                address: BluetoothAddress(rawValue: 0xD4_A0_02_00_00_BA), name: "ODD-1", manufacturer: "sugard simulator",
                model: "malformed-among-good", serialNumber: "BAD0001", firmware: "0.9",
                hasContext: true,
                clock: .currentTime(DateTime(year: 2025, month: 11, day: 24, hours: 17, minutes: 2, seconds: 0)),
                mtu: 23, startHandle: 1, glucoseGap: 1)
        case .isensMonth13:
            return MeterPersonality(
                address: BluetoothAddress(rawValue: 0x00_09_1F_12_34_56), name: "CareSens 0123", manufacturer: "i-SENS",
                model: "CareSens N Premier", serialNumber: "GN12345678", firmware: "1.4.0",
                feature: [.lowBatteryDetection, .resultHighLowDetection], hasContext: true, clock: .none,
                pairing: .justWorks, mtu: 23, startHandle: 1, glucoseGap: 5)
        case .verioReflect:
            var personality = MeterPersonality.verio(
                address: BluetoothAddress(rawValue: 0xC8_FD_19_3A_0E_07), name: "OneTouch 0E07", serialNumber: "C2MXD0G1",
                clock: DateTime(year: 2025, month: 11, day: 24, hours: 17, minutes: 0, seconds: 20), pairing: .justWorks)
            personality.model = "OneTouch Verio Reflect"
            return personality
        case .ctsClockFast:
            return MeterPersonality(
                address: BluetoothAddress(rawValue: 0xD4_A0_04_00_0C_75), name: "CTS-FAST", manufacturer: "sugard simulator",
                model: "cts-clock-fast", serialNumber: "CTS0001", firmware: "2.1", hasContext: false,
                clock: .currentTime(DateTime(year: 2025, month: 11, day: 24, hours: 17, minutes: 12, seconds: 30)),
                mtu: 23, startHandle: 1, clockWritable: true)
        }
    }

    /// The meter's stored records.
    public var records: [SimulatedRecord] {
        func at(_ y: UInt16, _ mo: UInt8, _ d: UInt8, _ h: UInt8, _ mi: UInt8, _ s: UInt8 = 0) -> DateTime {
            DateTime(year: y, month: mo, day: d, hours: h, minutes: mi, seconds: s)
        }
        func mgdl(_ value: Int) -> SFloat { SFloat(rawValue: 0xB000 | UInt16(value & 0x0FFF)) }
        func mmol(_ tenths: Int) -> SFloat { SFloat(rawValue: 0xC000 | UInt16(tenths & 0x0FFF)) }  // tenths × 10⁻⁴ mol/L
        func kgdl(_ seq: UInt16, _ time: DateTime, _ value: SFloat, offset: Int16? = nil,
                  location: SampleLocation = .finger, type: SampleType = .capillaryPlasma,
                  status: SensorStatus? = nil) -> GlucoseMeasurement {
            GlucoseMeasurement(
                sequenceNumber: seq, baseTime: time, timeOffsetMinutes: offset, concentration: value,
                unit: .kilogramsPerLiter, type: type, sampleLocation: location, sensorStatus: status)
        }
        func meal(_ code: UInt8) -> MeasurementContext { MeasurementContext(sequenceNumber: 0, meal: Meal(code: code)) }
        switch self {
        case .accuChekGuide:
            var breakfast = meal(1)
            breakfast.carbohydrate = .init(id: .breakfast, kilograms: SFloat(rawValue: 0xD02D))  // 45 g
            var dinner = meal(2)
            dinner.tester = .selfTest
            dinner.health = .noHealthIssues
            return [
                SimulatedRecord(kgdl(4, at(2025, 11, 23, 6, 10), mgdl(88), offset: 60), context: breakfast),
                SimulatedRecord(kgdl(5, at(2025, 11, 23, 10, 2), .negativeInfinity, offset: 60, status: .resultTooLow)),
                SimulatedRecord(kgdl(6, at(2025, 11, 23, 11, 30), mgdl(105), offset: 60, location: .controlSolution)),
                SimulatedRecord(kgdl(7, at(2025, 11, 23, 18, 45, 10), mgdl(142), offset: 60), context: dinner),
                SimulatedRecord(kgdl(8, at(2025, 11, 24, 5, 58), mgdl(97), offset: 60), context: meal(3)),
            ]
        case .contour:
            func molar(_ seq: UInt16, _ time: DateTime, _ tenths: Int, offset: Int16) -> GlucoseMeasurement {
                GlucoseMeasurement(
                    sequenceNumber: seq, baseTime: time, timeOffsetMinutes: offset, concentration: mmol(tenths),
                    unit: .molesPerLiter, type: .capillaryPlasma, sampleLocation: .finger, sensorStatus: [])
            }
            return [
                SimulatedRecord(molar(1, at(2025, 11, 20, 7, 0), 54, offset: 60), context: meal(1)),
                SimulatedRecord(molar(2, at(2025, 11, 20, 13, 15), 79, offset: 60)),
                SimulatedRecord(molar(3, at(2025, 11, 21, 9, 40), 32, offset: -120), context: meal(3)),
                SimulatedRecord(molar(4, at(2025, 11, 22, 21, 5), 116, offset: 0)),
                SimulatedRecord(molar(5, at(2025, 11, 24, 16, 30), 61, offset: -30)),
            ]
        case .wrap:
            let items: [(UInt16, DateTime, Int)] = [
                (65533, at(2025, 11, 22, 8, 0), 101), (65534, at(2025, 11, 22, 20, 0), 133),
                (65535, at(2025, 11, 23, 8, 0), 96), (0, at(2025, 11, 23, 20, 0), 152), (1, at(2025, 11, 24, 8, 0), 110),
            ]
            var records = items.map { SimulatedRecord(kgdl($0.0, $0.1, mgdl($0.2), type: .capillaryWholeBlood)) }
            records.insert(records[2], at: 3)  // 65535 sent twice in a row
            return records
        case .malformed:
            var announced = kgdl(25, at(2025, 11, 24, 9, 0), mgdl(121))
            announced.contextFollows = true
            return [
                SimulatedRecord(kgdl(20, at(2025, 11, 23, 7, 0), mgdl(92)), context: meal(1)),
                // 0x2A18 that says offset + concentration follow, cut after 3 bytes of base time.
                .stray(.measurement([0x03, 0x15, 0x00, 0xE9, 0x07, 0x0B])),
                SimulatedRecord(kgdl(22, at(2025, 11, 23, 12, 0), mgdl(118)), context: meal(2)),
                // A context for record 99, which the meter never sends.
                .stray(.context([0x02, 0x63, 0x00, 0x04])),
                SimulatedRecord(kgdl(23, at(2025, 11, 23, 18, 0), SFloat(rawValue: 0x0801))),
                // A RACP indication cut after the request op code (no response code).
                .stray(.racpIndication([0x06, 0x00, 0x01])),
                SimulatedRecord(kgdl(24, at(2025, 11, 23, 22, 30), mgdl(134))),
                SimulatedRecord(sequenceNumber: 25, packets: [.measurement(announced.encoded())]),
            ]
        case .isensMonth13:
            return [
                SimulatedRecord(kgdl(30, at(2024, 12, 31, 23, 50), mgdl(110), type: .capillaryWholeBlood)),
                SimulatedRecord(kgdl(31, at(2024, 13, 1, 0, 20), mgdl(97), type: .capillaryWholeBlood)),
                SimulatedRecord(kgdl(32, at(2025, 1, 2, 8, 0), mgdl(14), type: .capillaryWholeBlood), context: meal(6)),
                SimulatedRecord(kgdl(33, at(2025, 1, 2, 12, 0), mgdl(145), type: .capillaryWholeBlood), context: meal(2)),
            ]
        case .verioReflect:
            return []
        case .ctsClockFast:
            return [
                SimulatedRecord(kgdl(11, at(2025, 11, 23, 8, 0), mgdl(112))),
                SimulatedRecord(kgdl(12, at(2025, 11, 23, 13, 0), mgdl(148))),
                SimulatedRecord(kgdl(13, at(2025, 11, 24, 7, 40), mgdl(95))),
                SimulatedRecord(kgdl(14, at(2025, 11, 24, 12, 15), mgdl(131))),
            ]
        }
    }

    /// A Verio fixture's stored records (number, record), oldest first; empty for the others.
    public var verioRecords: [(number: UInt16, record: VerioRecord)] {
        guard self == .verioReflect else { return [] }
        func record(_ d: UInt8, _ h: UInt8, _ mi: UInt8, _ mgdL: UInt16, trailer: [UInt8] = [0, 0, 0, 0, 0]) -> VerioRecord {
            let time = DateTime(year: 2025, month: 11, day: d, hours: h, minutes: mi)
            return VerioRecord(meterSeconds: Verio.meterSeconds(time) ?? 0, mgdL: mgdL, trailer: trailer)
        }
        return [
            (37, record(22, 7, 45, 104)),
            (38, record(22, 12, 30, 612)),  // HI: above the 20–600 mg/dL the meter measures
            (39, record(22, 19, 10, 12)),  // LO
            (40, record(23, 7, 50, 126, trailer: [0x01, 0, 0, 0, 0])),  // byte 6 set: not blood glucose
            (41, record(23, 13, 5, 0)),  // no value
            (42, record(24, 7, 20, 98)),
        ]
    }

    /// A fresh simulator of this meter.
    public var simulator: MeterSimulator {
        var meter = MeterSimulator(personality: self.personality, records: self.records)
        if self.isVerio { meter.setVerioRecords(self.verioRecords, highest: UInt32(self.verioRecords.last?.number ?? 0)) }
        return meter
    }

    /// How the fixture capture was made, for `fixtures/README.md`.
    public var note: String {
        switch self {
        case .accuChekGuide:
            "Roche Accu-Chek Guide personality: passkey pairing, in two sync attempts as the daemon makes them: "
                + "connection 1 enters the wrong PIN 123456 (SMP Pairing Failed; the sync ends as pairingFailed and "
                + "disconnects), connection 2 enters 246810, bonds and downloads. Date Time 0x2A08 "
                + "clock in the Glucose service, vendor 128-bit service, MTU 23. Records 4–8 in kg/L with +60 min "
                + "offsets: 88 mg/dL with a breakfast context, a LO (−INF, status bit 6), a control-solution test "
                + "(location 4), 142 mg/dL with a postprandial context, 97 mg/dL fasting."
        case .contour:
            "Ascensia Contour Next One personality: just-works bonding, Current Time 0x2A2B clock, vendor service "
                + "00000000-0002-11e2-9e96-0800200c9a66, MTU 247 over 27-byte ACL buffers (discovery and long DIS "
                + "strings are fragmented). Records 1–5 in mol/L (5.4–11.6 mmol/L) with offsets +60, +60, −120, 0, −30."
        case .wrap:
            "Generic meter whose sequence numbers wrap: 65533, 65534, 65535, 65535 again (sent twice in a row), 0, 1; "
                + "no contexts; Current Time clock; handles start at 0x0020."
        case .malformed:
            "Generic meter sending odd packets among good records 20, 22, 23, 24, 25: a truncated measurement, an "
                + "orphan context (record 99), record 23 with the reserved SFLOAT 0x0801, an undecodable RACP "
                + "indication (06 00 01), and record 25 announcing a context that never comes."
        case .isensMonth13:
            "i-SENS CareSens N Premier personality: no clock, just-works bonding. Records 30–33: 2024-12-31 23:50, "
                + "Base Time 2024-13-01 00:20 (the month-13 firmware bug), a ketone record (context meal 6, 1.4 mmol/L "
                + "sent as 14 mg/dL) and 145 mg/dL postprandial."
        case .verioReflect:
            "LifeScan OneTouch Verio Reflect personality over the Verio vendor service af9df7a1-e595-11e3-96b4-0002a5d5c51b "
                + "(no Glucose service; docs/verio-protocol.md): the first command (read clock `20 02`) is refused "
                + "\"not allowed\" until the client bonds (just works); then clock 2025-11-24 17:00:20, highest record "
                + "number 42, 6 records held, records 37–42 one at a time (`b3 nn nn`), each acknowledged `81`: "
                + "104 mg/dL, 612 mg/dL (HI: above the 20–600 the meter measures), 12 mg/dL (LO), a record whose byte 6 "
                + "is set (not blood glucose, skipped by a sync), 0 (no value) and 98 mg/dL."
        case .ctsClockFast:
            "Generic Glucose Profile meter with a writable Current Time (0x2A2B in CTS 0x1805) that shows 2025-11-24 "
                + "17:12:30 when the capture starts (16:00:00 UTC, 17:00:00 in the recording client's zone, CET): "
                + "12 min 30 s fast. Records 11–14 in kg/L, no contexts. After the RACP report's success the client "
                + "writes 17:00:00 (adjust reason manual update) and reads the clock back; the write comes after the "
                + "download, never before."
        }
    }

    /// The zone the recording client resolves clocks in and the instant it thinks it is: CET at the
    /// capture's start for the meter whose clock it sets (so the write is what sugard in Berlin would
    /// write); UTC at the Unix epoch for the others (their clocks are only read, never set).
    public var recordingClock: (zone: TimeZoneRules, now: Instant) {
        self == .ctsClockFast ? (Self.recordingZoneCET, Self.captureStart) : (.utc, Instant(epochMillis: 0))
    }

    /// Passkeys the recording client enters, in order.
    public var passkeysEntered: [UInt32] {
        self == .accuChekGuide ? [123_456, Self.accuChekPasskey] : []
    }

    /// The fixture capture: ``SimulatedClient``'s sync attempts (one per passkey entered until one bonds;
    /// the last one counts all and reports all), H4 format.
    public func capture() -> [UInt8] {
        var meter = self.simulator
        meter.startRecording(format: .h4)
        let clock = self.recordingClock
        SimulatedClient.download(&meter, passkeys: self.passkeysEntered, zone: clock.zone, now: clock.now)
        return meter.stopRecording()?.image ?? []
    }
}

/// The committed `fixtures/` directory, generated: per fixture `<name>.btsnoop` and
/// `<name>.expected.json` (the `sugarctl capture inspect --json` output), and `README.md`.
public enum FixtureFiles {
    /// The command that regenerates the directory.
    public static let command = "swift run sugar-bench make-fixtures fixtures"

    /// File name and content of every fixture file, in a fixed order.
    public static func generate() -> [(name: String, bytes: [UInt8])] {
        var files: [(name: String, bytes: [UInt8])] = []
        for meter in FixtureMeter.allCases {
            let capture = meter.capture()
            files.append((meter.rawValue + ".btsnoop", capture))
            let json: String
            do {
                json = try CaptureInspector.inspect(bytes: capture).jsonValue.prettySerialized()
            } catch {
                json = "{\"error\": \"\(error.message)\"}"
            }
            files.append((meter.rawValue + ".expected.json", Array((json + "\n").utf8)))
        }
        files.append(("README.md", Array(Self.readme().utf8)))
        return files
    }

    /// `fixtures/README.md`.
    public static func readme() -> String {
        var text = """
            # Fixtures

            Bluetooth captures (btsnoop, H4 datalink 1002, as Android writes them) of simulated glucose meters,
            each with its expected decode: `<name>.expected.json` is exactly what
            `sugarctl capture inspect <name>.btsnoop --json` prints.

            How they are made: `\(Self.command)` builds each meter personality (`FixtureMeter` in
            `Sources/IO/ReplayTransport/FixtureMeters.swift`), runs the production sync (`SyncStateMachine`) against the `MeterSimulator`
            with `SimulatedClient` (connect, MTU 517, discovery, Glucose Feature, pairing when the meter asks, DIS
            strings, clock, CCCDs, RACP `04 01` count, RACP `01 01` report, the clock write when the meter's clock
            can be set and is off, disconnect; a rejected passkey ends that attempt and the next connection enters
            the next passkey; a OneTouch Verio gets the Verio procedure instead of RACP: clock, highest record
            number, count, then the records one at a time) while recording every
            frame with `CaptureBuilder`, and writes the capture and its inspection. The output is deterministic:
            a test regenerates the directory and fails when a byte differs, and another replays every capture
            through the real sync engine into SQLite. Identities and values are invented.

            GLS records are in the inspection's `records`; a Verio's are in its session's `verio.records`, and
            clock writes in each session's `clockWrites`.

            """
        for meter in FixtureMeter.allCases {
            text += "\n## \(meter.rawValue)\n\n\(meter.note)\n\nFiles: `\(meter.rawValue).btsnoop`, "
                + "`\(meter.rawValue).expected.json`.\n"
        }
        return text
    }
}
