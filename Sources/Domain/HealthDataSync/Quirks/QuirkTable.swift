/// One vendor (or general) behaviour the sync engine corrects for, by name.
///
/// The raw value is the stable name recorded in ``TimeResolution/quirks`` when the quirk changed a
/// reading, and shown in `sugarctl` and the README.
public enum QuirkID: String, Hashable, Sendable, CaseIterable {
    /// Type 10 or sample location 4 marks a control-solution test: stored, flagged, not counted.
    case controlSolution = "gls.controlSolution"
    /// +INF with status bit 5 is HI, −INF with status bit 6 is LO: flagged, never a number, never dropped.
    case hiLo = "gls.hiLo"
    /// A record sent twice in a row (same sequence number) is kept once.
    case repeatedRecord = "gls.repeatedRecord"
    /// i-SENS firmware writes Base Time month 13 for January of the next year.
    case monthThirteen = "isens.month13"
    /// i-SENS marks blood-ketone records with context meal 6; the value is mmol/L × 10 sent as mg/dL.
    case ketoneMeal6 = "isens.ketoneMeal6"
    /// i-SENS Base Time is already the user-facing time; Time Offset is not added.
    case timeOffsetIgnored = "isens.timeOffsetIgnored"
    /// i-SENS meters take their clock through the vendor time characteristic 0xFFF1 (service 0xFFF0).
    case isensVendorClock = "isens.vendorClock"
    /// Roche puts the meter clock in Date Time 0x2A08 inside the Glucose service instead of CTS.
    case dateTimeClock = "roche.dateTimeClock"
    /// Fora appends a bogus record dated 2037 when its memory (450 records) is full.
    case bogus2037 = "fora.bogus2037"
    /// Fora's "≥ sequence number" downloads are unreliable: always download everything.
    case fullDownload = "fora.fullDownload"
    /// TaiDoc numbers records newest-first (seq 0 = newest): sequence numbers are renumbered.
    case reversedSequence = "taidoc.reversedSequence"
    /// OneTouch Verio meters have no Glucose service: records are read over LifeScan's vendor service.
    case verioProcedure = "lifescan.verioProcedure"
    /// Verio records whose bytes 6–10 are not zero are not blood-glucose results: skipped, never guessed.
    case verioNonGlucose = "lifescan.nonGlucoseRecord"
}

/// How a meter's records are downloaded.
public enum MeterProcedure: String, Hashable, Sendable, CaseIterable {
    /// The Bluetooth Glucose Profile: Glucose service 0x1808, RACP.
    case gls
    /// LifeScan's OneTouch Verio vendor service (`af9df7a1-…`), see docs/verio-protocol.md.
    case verio
}

/// A quirk with the reason we believe in it.
public struct VendorQuirk: Hashable, Sendable {
    public var id: QuirkID
    /// What the engine does about it, in one sentence.
    public var handling: String
    /// Where the behaviour was seen (capture, maintained implementation, issue).
    public var source: String

    public init(id: QuirkID, handling: String, source: String) {
        self.id = id
        self.handling = handling
        self.source = source
    }
}

/// How the engine asks a meter for records.
public enum RecordRequestPolicy: String, Hashable, Sendable {
    /// `≥ high-water + 1` when a high-water mark is stored, all records for a new meter.
    case fromHighWater
    /// Always all records; the store's deduplication drops what it already has.
    case always
}

/// The order a meter numbers its records in.
public enum SequenceOrder: String, Hashable, Sendable {
    /// Sequence numbers rise with each new record and identify it (GLS).
    case oldestFirst
    /// Sequence 0 is the newest record (TaiDoc): numbers identify nothing and are renumbered.
    case newestFirst
}

/// Where a meter's clock is read, and through what it can be set.
public enum MeterClock: String, Hashable, Sendable {
    /// Read from Current Time 0x2A2B, else Date Time 0x2A08; set through a writable Current Time.
    case standard
    /// Read from Date Time 0x2A08 first (Roche), else Current Time; set as standard.
    case dateTimeFirst
    /// Read as standard; set through a writable Current Time, else the i-SENS vendor time 0xFFF1.
    case vendorISENS
}

/// One row of the quirk table: which meters it matches and how they are handled.
///
/// The row a meter gets (``QuirkTable/profile(for:procedure:)``) is its profile: the sync machine,
/// the ``ReadingBuilder`` and the time resolver ask it named questions (``sequenceOrder``,
/// ``clock``, ``downloadsEverything``...), decided from the row's quirks in one place
/// (``decideCapabilities()``); nothing else asks whether a row has a quirk.
public struct MeterProfile: Hashable, Sendable {
    /// `i-SENS CareSens`, or `Standard GLS meter` for the fallback.
    public var name: String
    /// Case-insensitive prefixes of the DIS Manufacturer Name (0x2A29); any one matches.
    public var manufacturerPrefixes: [String]
    /// Case-insensitive prefixes of the DIS Model Number (0x2A24); empty: any model.
    public var modelPrefixes: [String]
    /// Case-insensitive prefixes of the advertised name, for meters whose DIS strings are empty or
    /// placeholders (Fora sends "Manufacturer name"); used when the manufacturer does not match.
    public var advertisedNamePrefixes: [String]
    /// Vendor quirks, in the order they are applied.
    public var quirks: [VendorQuirk] { didSet { self.decideCapabilities() } }
    public var timeOffsetPolicy: TimeOffsetPolicy
    public var requestPolicy: RecordRequestPolicy { didSet { self.decideCapabilities() } }
    /// Where the matching strings come from.
    public var source: String
    /// The download procedure the row is for: a meter offering the Verio service gets a Verio row.
    public var procedure: MeterProcedure

    public init(
        name: String, manufacturerPrefixes: [String], modelPrefixes: [String] = [], advertisedNamePrefixes: [String] = [],
        quirks: [VendorQuirk], timeOffsetPolicy: TimeOffsetPolicy = .apply,
        requestPolicy: RecordRequestPolicy = .fromHighWater, procedure: MeterProcedure = .gls, source: String
    ) {
        self.procedure = procedure
        self.name = name
        self.manufacturerPrefixes = manufacturerPrefixes
        self.modelPrefixes = modelPrefixes
        self.advertisedNamePrefixes = advertisedNamePrefixes
        self.quirks = quirks
        self.timeOffsetPolicy = timeOffsetPolicy
        self.requestPolicy = requestPolicy
        self.source = source
        self.decideCapabilities()
    }

    // MARK: Capabilities (decided from the quirks, see decideCapabilities)

    /// How the meter numbers its records (``QuirkID/reversedSequence``: newest first).
    public private(set) var sequenceOrder = SequenceOrder.oldestFirst
    /// Where the clock is read and set (``QuirkID/dateTimeClock``, ``QuirkID/isensVendorClock``).
    public private(set) var clock = MeterClock.standard
    /// Every sync asks for all records, whatever mark is stored (``RecordRequestPolicy/always``:
    /// Fora's unreliable delta downloads, TaiDoc's shifting numbers); deduplication keeps it safe.
    public private(set) var downloadsEverything = false
    /// Base Time month 13 means January of the next year (``QuirkID/monthThirteen``).
    public private(set) var monthThirteenIsNextJanuary = false
    /// Context meal 6 marks a blood-ketone record, its value mmol/L × 10 (``QuirkID/ketoneMeal6``).
    public private(set) var ketoneInMeal6 = false
    /// A record dated 2037 or later from a full memory (450+) is bogus (``QuirkID/bogus2037``).
    public private(set) var bogus2037WhenFull = false

    /// The one place a row's quirks become its capabilities (run whenever the quirks or the
    /// request policy change).
    private mutating func decideCapabilities() {
        self.sequenceOrder = self.has(.reversedSequence) ? .newestFirst : .oldestFirst
        self.clock = self.has(.dateTimeClock) ? .dateTimeFirst : self.has(.isensVendorClock) ? .vendorISENS : .standard
        self.downloadsEverything = self.requestPolicy == .always
        self.monthThirteenIsNextJanuary = self.has(.monthThirteen)
        self.ketoneInMeal6 = self.has(.ketoneMeal6)
        self.bogus2037WhenFull = self.has(.bogus2037)
    }

    /// Whether the row lists the quirk (the table's tests and ``decideCapabilities()``; code that
    /// acts on a quirk asks the named capability instead).
    public func has(_ quirk: QuirkID) -> Bool { self.quirks.contains(where: { $0.id == quirk }) }

    /// Whether this row describes the meter.
    public func matches(_ identity: MeterIdentity) -> Bool {
        func hasPrefix(_ value: String?, _ prefixes: [String]) -> Bool {
            guard let value = value?.lowercased(), !value.isEmpty else { return false }
            return prefixes.contains(where: { value.hasPrefix($0.lowercased()) })
        }
        let modelOK = self.modelPrefixes.isEmpty || hasPrefix(identity.model, self.modelPrefixes)
        if hasPrefix(identity.manufacturer, self.manufacturerPrefixes) && modelOK { return true }
        return hasPrefix(identity.name, self.advertisedNamePrefixes)
    }
}

/// Vendor policy, outside the parser: which meters need what, keyed by DIS manufacturer/model.
///
/// The general GLS rules (control solution, HI/LO, repeated records) apply to every meter; a
/// matching row adds its vendor quirks. The first matching row wins, so specific rows go first.
public struct QuirkTable: Hashable, Sendable {
    public var rows: [MeterProfile]

    public init(rows: [MeterProfile]) { self.rows = rows }

    /// Rules every GLS meter gets.
    public static let general: [VendorQuirk] = [
        VendorQuirk(
            id: .controlSolution,
            handling: "flag as controlSolution when type is 10 or sample location is 4; store it, exclude it from statistics",
            source: "GLS 0x2A18 XML type/location tables; Tidepool ble-glucose skips Accu-Chek location-4 records"),
        VendorQuirk(
            id: .hiLo,
            handling: "+INF/status bit 5 is HI and -INF/status bit 6 is LO: flagged, no number, always stored",
            source: "Roche Accu-Chek Guide capture (LO = 0x0802 with status bit 6); GLS status bits 5/6"),
        VendorQuirk(
            id: .repeatedRecord,
            handling: "a measurement with the same sequence number as the previous one is skipped",
            source: "Tidepool ble-glucose \"skip double entries\""),
    ]

    /// The fallback row for meters no vendor row matches.
    public static let standard = MeterProfile(
        name: "Standard GLS meter", manufacturerPrefixes: [], quirks: [], source: "Glucose Service 1.0.1")

    /// The built-in table (see README "Supported meters").
    public static let builtIn = QuirkTable(rows: [
        MeterProfile(
            name: "Roche Accu-Chek", manufacturerPrefixes: ["Roche"],
            quirks: [
                VendorQuirk(
                    id: .dateTimeClock,
                    handling: "read the meter clock from Date Time 0x2A08 in the Glucose service, before CTS",
                    source: "xDrip+ (Roche manufacturer check); Accu-Chek Guide capture"),
            ],
            source: "DIS manufacturer \"Roche\" in the Accu-Chek Guide capture and xDrip+"),
        MeterProfile(
            name: "i-SENS CareSens", manufacturerPrefixes: ["i-SENS", "isens", "CareSens"],
            advertisedNamePrefixes: ["CareSens"],
            quirks: [
                VendorQuirk(
                    id: .monthThirteen,
                    handling: "Base Time month 13 is read as January of the next year and flagged quirkApplied",
                    source: "Tidepool ble-glucose (maps month 13 to 1, without the year carry we add)"),
                VendorQuirk(
                    id: .ketoneMeal6,
                    handling: "context meal 6 marks a blood-ketone record: flagged ketone, mg/dL value ÷ 10 as mmol/L, never glucose",
                    source: "Tidepool ble-glucose and xDrip+ i-SENS handling"),
                VendorQuirk(
                    id: .timeOffsetIgnored,
                    handling: "Base Time is taken as the user-facing time; Time Offset is kept but not added",
                    source: "Tidepool ble-glucose 2025-02 \"time offset not used in device time\" (contradicts GLS intent)"),
                VendorQuirk(
                    id: .isensVendorClock,
                    handling: "the meter clock is set through 0xFFF1 in service 0xFFF0 (c0 03 01 00, year LE, month, day, h, m, s) after a download",
                    source: "xDrip+ caresens/TimeTx.java"),
            ],
            timeOffsetPolicy: .ignore,
            source: "i-SENS CareSens N Premier / Dual; ReliOn 2395/0015 are i-SENS OEM"),
        MeterProfile(
            name: "ReliOn (i-SENS OEM)", manufacturerPrefixes: ["ReliOn", "Arkray"], modelPrefixes: ["2395", "0015"],
            quirks: [
                VendorQuirk(
                    id: .monthThirteen,
                    handling: "Base Time month 13 is read as January of the next year and flagged quirkApplied",
                    source: "Tidepool ble-glucose (i-SENS firmware)"),
                VendorQuirk(
                    id: .ketoneMeal6,
                    handling: "context meal 6 marks a blood-ketone record, never glucose",
                    source: "Tidepool ble-glucose and xDrip+ i-SENS handling"),
                VendorQuirk(
                    id: .timeOffsetIgnored,
                    handling: "Base Time is taken as the user-facing time",
                    source: "Tidepool ble-glucose 2025-02"),
                VendorQuirk(
                    id: .isensVendorClock,
                    handling: "the meter clock is set through 0xFFF1 in service 0xFFF0 after a download",
                    source: "xDrip+ caresens/TimeTx.java (i-SENS firmware)"),
            ],
            timeOffsetPolicy: .ignore,
            source: "Tidepool ble-glucose device list (ReliOn 2395/0015 built by i-SENS)"),
        MeterProfile(
            name: "TaiDoc Diamond Mobile Mini", manufacturerPrefixes: ["TaiDoc"], modelPrefixes: ["DM30", "TD-4"],
            advertisedNamePrefixes: ["DM30", "Diamond Mobile"],
            quirks: [
                VendorQuirk(
                    id: .reversedSequence,
                    handling: "always download everything; drop records already stored by content and number new ones after the stored maximum",
                    source: "xDrip+ (DM30b fw 1.2.4: seq 0 is the newest record)"),
            ],
            requestPolicy: .always,
            source: "xDrip+ TaiDoc handling"),
        MeterProfile(
            name: "Fora TN'G Voice", manufacturerPrefixes: ["Fora", "ForaCare"], advertisedNamePrefixes: ["FORA", "TNG"],
            quirks: [
                VendorQuirk(
                    id: .bogus2037,
                    handling: "when the meter holds 450 or more records, a record dated 2037 or later is flagged suspect and gets no value",
                    source: "Tidepool ble-glucose (keeps only the first 450 records of a full Fora)"),
                VendorQuirk(
                    id: .fullDownload,
                    handling: "always download everything and rely on deduplication",
                    source: "Tidepool ble-glucose (delta downloads unreliable on Fora)"),
            ],
            requestPolicy: .always,
            source: "Tidepool ble-glucose Fora handling; DIS strings may be empty or placeholders"),
        QuirkTable.verio,
    ])

    /// The row every meter offering the OneTouch Verio service gets (whatever its DIS strings say).
    public static let verio = MeterProfile(
        name: "LifeScan OneTouch Verio", manufacturerPrefixes: ["LifeScan"], advertisedNamePrefixes: ["OneTouch"],
        quirks: [
            VendorQuirk(
                id: .verioProcedure,
                handling: "no Glucose service: clock, highest record number, record count and records are read over the vendor service af9df7a1-e595-11e3-96b4-0002a5d5c51b; the record number is the sequence number",
                source: "xDrip+ VerioHelper.java; glucometer-protocols lifescan pages (docs/verio-protocol.md)"),
            VendorQuirk(
                id: .verioNonGlucose,
                handling: "a record whose bytes 6-10 are not all zero is skipped (counted as an anomaly), never read as glucose",
                source: "xDrip+ VerioHelper.java (\"failed sanity test\")"),
        ],
        procedure: .verio,
        source: "OneTouch Verio Flex / Verio Reflect; tested only against sugard's simulation and BlueZ stand-in")

    /// The row for a meter, or ``standard``, with the general rules in front of its quirks.
    /// - Parameter procedure: how the meter is downloaded; a Verio meter gets the first Verio row
    ///   that matches it, else the first Verio row.
    public func profile(for identity: MeterIdentity, procedure: MeterProcedure = .gls) -> MeterProfile {
        var row: MeterProfile
        if procedure == .verio {
            let verioRows = self.rows.filter { $0.procedure == .verio }
            row = verioRows.first(where: { $0.matches(identity) }) ?? verioRows.first ?? QuirkTable.verio
        } else {
            row = self.rows.first(where: { $0.procedure == .gls && $0.matches(identity) }) ?? QuirkTable.standard
        }
        row.quirks = QuirkTable.general + row.quirks
        return row
    }
}
