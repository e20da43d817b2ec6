/// A Glucose Measurement Context (0x2A34) record (GLS §4), linked to a measurement by sequence number.
///
/// Carbohydrate is in kg, medication in kg or L (flags bit 5), HbA1c in percent; the SFLOATs are kept as
/// received. Meal 6 is reserved in the spec but decodes normally (code 6, name `reserved`): i-SENS meters
/// use it to mark ketone records, and the sync engine needs to see it.
public struct MeasurementContext: Hashable, Sendable {
    /// Flags bit 0: carbohydrate ID and carbohydrate present.
    public static let carbohydratePresentFlag: UInt8 = 0x01
    /// Flags bit 1: meal present.
    public static let mealPresentFlag: UInt8 = 0x02
    /// Flags bit 2: tester-health byte present.
    public static let testerHealthPresentFlag: UInt8 = 0x04
    /// Flags bit 3: exercise duration and intensity present.
    public static let exercisePresentFlag: UInt8 = 0x08
    /// Flags bit 4: medication ID and medication present.
    public static let medicationPresentFlag: UInt8 = 0x10
    /// Flags bit 5: medication in liters (clear: kilograms).
    public static let medicationLitersFlag: UInt8 = 0x20
    /// Flags bit 6: HbA1c present.
    public static let hba1cPresentFlag: UInt8 = 0x40
    /// Flags bit 7: extended flags byte present.
    public static let extendedFlagsPresentFlag: UInt8 = 0x80

    /// Carbohydrate intake: what meal and how much.
    public struct Carbohydrate: Hashable, Sendable {
        /// Which meal the carbohydrate belongs to.
        public var id: CarbohydrateID
        /// Amount in kilograms (SFLOAT as received; 0xD072 = 0.114 kg).
        public var kilograms: SFloat
        /// An intake of `kilograms` for meal `id`.
        public init(id: CarbohydrateID, kilograms: SFloat) {
            self.id = id
            self.kilograms = kilograms
        }
    }

    /// Exercise before the measurement.
    public struct Exercise: Hashable, Sendable {
        /// Duration in seconds; 65535 means overrun.
        public var durationSeconds: UInt16
        /// Intensity in percent.
        public var intensityPercent: UInt8
        /// Exercise of `durationSeconds` at `intensityPercent`.
        public init(durationSeconds: UInt16, intensityPercent: UInt8) {
            self.durationSeconds = durationSeconds
            self.intensityPercent = intensityPercent
        }
    }

    /// Medication taken.
    public struct Medication: Hashable, Sendable {
        /// Which medication.
        public var id: MedicationID
        /// Amount in `unit` (SFLOAT as received; 0xA05D = 9.3 × 10⁻⁵ kg).
        public var amount: SFloat
        /// Whether `amount` is in kilograms or liters.
        public var unit: MedicationUnit
        /// A medication of `amount` in `unit`.
        public init(id: MedicationID, amount: SFloat, unit: MedicationUnit) {
            self.id = id
            self.amount = amount
            self.unit = unit
        }
    }

    /// Medication unit from flags bit 5.
    public enum MedicationUnit: Hashable, Sendable, CaseIterable {
        /// Flags bit 5 clear.
        case kilograms
        /// Flags bit 5 set.
        case liters
        /// `kg` or `L`.
        public var symbol: String {
            switch self {
            case .kilograms: "kg"
            case .liters: "L"
            }
        }
    }

    /// Record number of the measurement this context belongs to.
    public var sequenceNumber: UInt16
    /// Extended flags (all bits reserved), or nil when flags bit 7 is clear.
    public var extendedFlags: UInt8?
    /// Carbohydrate ID and amount (flags bit 0).
    public var carbohydrate: Carbohydrate?
    /// Meal (flags bit 1).
    public var meal: Meal?
    /// Tester, the low nibble of the tester-health byte (flags bit 2).
    public var tester: Tester?
    /// Health; present exactly when `tester` is (they share one byte).
    public var health: Health?
    /// Exercise duration and intensity (flags bit 3).
    public var exercise: Exercise?
    /// Medication ID and amount (flags bit 4).
    public var medication: Medication?
    /// HbA1c in percent.
    public var hba1cPercent: SFloat?
    /// Flags bit 5 as received when there is no medication (it then means nothing); kept for re-encoding.
    public var strayLitersFlag: Bool

    /// Builds a context record; flags follow from the fields that are set. A tester without health (or the
    /// reverse) encodes the missing nibble as 0.
    public init(
        sequenceNumber: UInt16, extendedFlags: UInt8? = nil, carbohydrate: Carbohydrate? = nil, meal: Meal? = nil,
        tester: Tester? = nil, health: Health? = nil, exercise: Exercise? = nil, medication: Medication? = nil,
        hba1cPercent: SFloat? = nil
    ) {
        self.sequenceNumber = sequenceNumber
        self.extendedFlags = extendedFlags
        self.carbohydrate = carbohydrate
        self.meal = meal
        self.tester = tester == nil && health != nil ? Tester(code: 0) : tester
        self.health = health == nil && tester != nil ? Health(code: 0) : health
        self.exercise = exercise
        self.medication = medication
        self.hba1cPercent = hba1cPercent
        self.strayLitersFlag = false
    }

    /// Decodes one context record from `reader`, leaving later bytes unread.
    /// Throws `truncated` naming the first field that is cut short.
    public init(parsing reader: inout ByteReader) throws(GlucoseProfileError) {
        let flags = try reader.readUInt8(field: "flags")
        self.sequenceNumber = try reader.readUInt16LE(field: "sequenceNumber")
        self.extendedFlags = flags & Self.extendedFlagsPresentFlag != 0 ? try reader.readUInt8(field: "extendedFlags") : nil
        if flags & Self.carbohydratePresentFlag != 0 {
            try reader.require(3, for: "carbohydrate")
            let id = CarbohydrateID(code: try reader.readUInt8(field: "carbohydrate"))
            self.carbohydrate = Carbohydrate(id: id, kilograms: try reader.readSFloat(field: "carbohydrate"))
        } else {
            self.carbohydrate = nil
        }
        self.meal = flags & Self.mealPresentFlag != 0 ? Meal(code: try reader.readUInt8(field: "meal")) : nil
        if flags & Self.testerHealthPresentFlag != 0 {
            let byte = try reader.readUInt8(field: "testerHealth")
            self.tester = Tester(code: byte & 0x0F)
            self.health = Health(code: byte >> 4)
        } else {
            self.tester = nil
            self.health = nil
        }
        if flags & Self.exercisePresentFlag != 0 {
            try reader.require(3, for: "exercise")
            let duration = try reader.readUInt16LE(field: "exercise")
            self.exercise = Exercise(durationSeconds: duration, intensityPercent: try reader.readUInt8(field: "exercise"))
        } else {
            self.exercise = nil
        }
        let liters = flags & Self.medicationLitersFlag != 0
        if flags & Self.medicationPresentFlag != 0 {
            try reader.require(3, for: "medication")
            let id = MedicationID(code: try reader.readUInt8(field: "medication"))
            let amount = try reader.readSFloat(field: "medication")
            self.medication = Medication(id: id, amount: amount, unit: liters ? .liters : .kilograms)
            self.strayLitersFlag = false
        } else {
            self.medication = nil
            self.strayLitersFlag = liters
        }
        self.hba1cPercent = flags & Self.hba1cPresentFlag != 0 ? try reader.readSFloat(field: "hba1c") : nil
    }

    /// Decodes exactly one context record; extra bytes are an error.
    public init(bytes: [UInt8]) throws(GlucoseProfileError) {
        var reader = ByteReader(bytes)
        try self.init(parsing: &reader)
        try reader.expectEnd(of: "context")
    }

    /// The flags byte this record encodes with.
    public var flags: UInt8 {
        var flags: UInt8 = 0
        if self.carbohydrate != nil { flags |= Self.carbohydratePresentFlag }
        if self.meal != nil { flags |= Self.mealPresentFlag }
        if self.tester != nil || self.health != nil { flags |= Self.testerHealthPresentFlag }
        if self.exercise != nil { flags |= Self.exercisePresentFlag }
        if let medication = self.medication {
            flags |= Self.medicationPresentFlag
            if medication.unit == .liters { flags |= Self.medicationLitersFlag }
        } else if self.strayLitersFlag {
            flags |= Self.medicationLitersFlag
        }
        if self.hba1cPercent != nil { flags |= Self.hba1cPresentFlag }
        if self.extendedFlags != nil { flags |= Self.extendedFlagsPresentFlag }
        return flags
    }

    /// Appends the wire encoding to `writer`.
    public func serialize(into writer: inout ByteWriter) {
        writer.writeUInt8(self.flags)
        writer.writeUInt16LE(self.sequenceNumber)
        if let extended = self.extendedFlags { writer.writeUInt8(extended) }
        if let carbohydrate = self.carbohydrate {
            writer.writeUInt8(carbohydrate.id.code)
            writer.writeSFloat(carbohydrate.kilograms)
        }
        if let meal = self.meal { writer.writeUInt8(meal.code) }
        if self.tester != nil || self.health != nil {
            writer.writeUInt8((self.tester?.code ?? 0) & 0x0F | (self.health?.code ?? 0) << 4)
        }
        if let exercise = self.exercise {
            writer.writeUInt16LE(exercise.durationSeconds)
            writer.writeUInt8(exercise.intensityPercent)
        }
        if let medication = self.medication {
            writer.writeUInt8(medication.id.code)
            writer.writeSFloat(medication.amount)
        }
        if let hba1c = self.hba1cPercent { writer.writeSFloat(hba1c) }
    }

    /// The wire encoding (3–17 bytes).
    public func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 17)
        self.serialize(into: &writer)
        return writer.bytes
    }

    /// True when meal is 6, which i-SENS (CareSens, ReliOn) meters use to mark a blood-ketone record.
    public var isKetoneMarker: Bool { self.meal?.code == 6 }
}

/// Carbohydrate ID (GLS §4). Names: 1 `breakfast`, 2 `lunch`, 3 `dinner`, 4 `snack`, 5 `drink`,
/// 6 `supper`, 7 `brunch`; others `reserved`.
public struct CarbohydrateID: Hashable, Sendable {
    /// The byte as received.
    public let code: UInt8
    /// The ID with this code (any value).
    public init(code: UInt8) { self.code = code }
    /// 1: breakfast.
    public static let breakfast = CarbohydrateID(code: 1)
    /// 2: lunch.
    public static let lunch = CarbohydrateID(code: 2)
    /// 3: dinner.
    public static let dinner = CarbohydrateID(code: 3)
    /// 4: snack.
    public static let snack = CarbohydrateID(code: 4)
    /// 5: drink.
    public static let drink = CarbohydrateID(code: 5)
    /// 6: supper.
    public static let supper = CarbohydrateID(code: 6)
    /// 7: brunch.
    public static let brunch = CarbohydrateID(code: 7)
    /// The stable name of the code; `reserved` for codes the spec leaves open.
    public var name: String {
        switch self.code {
        case 1: "breakfast"
        case 2: "lunch"
        case 3: "dinner"
        case 4: "snack"
        case 5: "drink"
        case 6: "supper"
        case 7: "brunch"
        default: "reserved"
        }
    }
}

/// Meal (GLS §4). Names: 1 `preprandial`, 2 `postprandial`, 3 `fasting`, 4 `casual`, 5 `bedtime`;
/// 0 and 6–255 `reserved` (6 is the i-SENS ketone marker, decoded like any other code).
public struct Meal: Hashable, Sendable {
    /// The byte as received.
    public let code: UInt8
    /// The meal with this code (any value).
    public init(code: UInt8) { self.code = code }
    /// 1: before a meal.
    public static let preprandial = Meal(code: 1)
    /// 2: after a meal.
    public static let postprandial = Meal(code: 2)
    /// 3: fasting.
    public static let fasting = Meal(code: 3)
    /// 4: casual (no relation to a meal).
    public static let casual = Meal(code: 4)
    /// 5: at bedtime.
    public static let bedtime = Meal(code: 5)
    /// The stable name of the code; `reserved` for codes the spec leaves open (6 too).
    public var name: String {
        switch self.code {
        case 1: "preprandial"
        case 2: "postprandial"
        case 3: "fasting"
        case 4: "casual"
        case 5: "bedtime"
        default: "reserved"
        }
    }
}

/// Tester, the low nibble of the tester-health byte (GLS §4). Names: 1 `self`, 2 `healthCareProfessional`,
/// 3 `labTest`, 15 `notAvailable`; others `reserved`.
public struct Tester: Hashable, Sendable {
    /// The nibble, 0–15.
    public let code: UInt8
    /// Only the low 4 bits are kept.
    public init(code: UInt8) { self.code = code & 0x0F }
    /// 1: the person tested themself.
    public static let selfTest = Tester(code: 1)
    /// 2: a health-care professional.
    public static let healthCareProfessional = Tester(code: 2)
    /// 3: a laboratory test.
    public static let labTest = Tester(code: 3)
    /// 15: tester value not available.
    public static let notAvailable = Tester(code: 15)
    /// The stable name of the code; `reserved` for codes the spec leaves open.
    public var name: String {
        switch self.code {
        case 1: "self"
        case 2: "healthCareProfessional"
        case 3: "labTest"
        case 15: "notAvailable"
        default: "reserved"
        }
    }
}

/// Health, the high nibble of the tester-health byte (GLS §4). Names: 1 `minorHealthIssues`,
/// 2 `majorHealthIssues`, 3 `duringMenses`, 4 `underStress`, 5 `noHealthIssues`, 15 `notAvailable`;
/// others `reserved`.
public struct Health: Hashable, Sendable {
    /// The nibble, 0–15.
    public let code: UInt8
    /// The nibble value 0–15 (not shifted); only the low 4 bits are kept.
    public init(code: UInt8) { self.code = code & 0x0F }
    /// 1: minor health issues.
    public static let minorHealthIssues = Health(code: 1)
    /// 2: major health issues.
    public static let majorHealthIssues = Health(code: 2)
    /// 3: during menses.
    public static let duringMenses = Health(code: 3)
    /// 4: under stress.
    public static let underStress = Health(code: 4)
    /// 5: no health issues.
    public static let noHealthIssues = Health(code: 5)
    /// 15: health value not available.
    public static let notAvailable = Health(code: 15)
    /// The stable name of the code; `reserved` for codes the spec leaves open.
    public var name: String {
        switch self.code {
        case 1: "minorHealthIssues"
        case 2: "majorHealthIssues"
        case 3: "duringMenses"
        case 4: "underStress"
        case 5: "noHealthIssues"
        case 15: "notAvailable"
        default: "reserved"
        }
    }
}

/// Medication ID (GLS §4). Names: 1 `rapidActingInsulin`, 2 `shortActingInsulin`,
/// 3 `intermediateActingInsulin`, 4 `longActingInsulin`, 5 `premixedInsulin`; others `reserved`.
public struct MedicationID: Hashable, Sendable {
    /// The byte as received.
    public let code: UInt8
    /// The ID with this code (any value).
    public init(code: UInt8) { self.code = code }
    /// 1: rapid-acting insulin.
    public static let rapidActingInsulin = MedicationID(code: 1)
    /// 2: short-acting insulin.
    public static let shortActingInsulin = MedicationID(code: 2)
    /// 3: intermediate-acting insulin.
    public static let intermediateActingInsulin = MedicationID(code: 3)
    /// 4: long-acting insulin.
    public static let longActingInsulin = MedicationID(code: 4)
    /// 5: pre-mixed insulin.
    public static let premixedInsulin = MedicationID(code: 5)
    /// The stable name of the code; `reserved` for codes the spec leaves open.
    public var name: String {
        switch self.code {
        case 1: "rapidActingInsulin"
        case 2: "shortActingInsulin"
        case 3: "intermediateActingInsulin"
        case 4: "longActingInsulin"
        case 5: "premixedInsulin"
        default: "reserved"
        }
    }
}

extension MeasurementContext: GlucoseProfileEncodable {}
