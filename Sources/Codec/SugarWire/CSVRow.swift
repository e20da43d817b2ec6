import JSON

extension ReadingExport {
    /// The values of one row of the CSV export (the columns of ``ReadingExport/csvColumns``, in
    /// order): what a client reads from a ``Wire/Reading`` and what the daemon reads from a stored
    /// row when it writes the rows itself (`ListReadings` with `csv`). Both go through
    /// ``ReadingExport/writeCSVRow(_:into:)``, so the bytes are the same either way.
    public struct CSVRow: Sendable, Hashable {
        /// `meter`, and the first part of `reading_id` (`<meter>/<epoch>/<sequence>`).
        public var meter: String
        /// The meter's epoch (a new one after each meter reset); only in `reading_id`.
        public var epoch: Int64
        /// `sequence`: the meter's record number, unique within meter and epoch.
        public var sequenceNumber: Int64
        /// `measured_at_utc` (the reading's `time.iso`).
        public var iso: String
        /// `epoch_millis`: the instant as milliseconds since 1970 UTC.
        public var epochMillis: Int64
        /// The meter's own clock reading, ISO 8601 without a zone (`time.meterLocalTime`).
        public var meterLocalTime: String
        /// `utc_offset_minutes`: the UTC offset of the reading's zone at that instant.
        public var utcOffsetMinutes: Int64
        /// `value_mg_dl`, written as a whole number; nil (an empty cell) without a glucose value.
        public var mgdL: Double?
        /// mmol/L as stored: written exactly (the shortest text that reads back as the same number).
        public var mmolL: Double?
        /// `ketone_mmol_l`, written exactly; nil for meters that send none.
        public var ketoneMmolL: Double?
        /// The names of the measurement's sample type and location, and of its context's meal.
        public var sampleType: String?
        /// The sample location's name (`sample_location`).
        public var sampleLocation: String?
        /// The meal's name (`meal`).
        public var meal: String?
        /// The reading's flag names: `flags`, space-separated, and `control_solution` (`true` when
        /// `controlSolution` is among them).
        public var flags: [String]
        /// `person`: whom the reading belongs to; nil (empty) when nobody.
        public var person: String?

        /// A row from the values as they are; `writeCSVRow(_:into:)` formats and quotes them.
        public init(
            meter: String, epoch: Int64, sequenceNumber: Int64, iso: String, epochMillis: Int64, meterLocalTime: String,
            utcOffsetMinutes: Int64, mgdL: Double?, mmolL: Double?, ketoneMmolL: Double?, sampleType: String?,
            sampleLocation: String?, meal: String?, flags: [String], person: String?
        ) {
            self.meter = meter
            self.epoch = epoch
            self.sequenceNumber = sequenceNumber
            self.iso = iso
            self.epochMillis = epochMillis
            self.meterLocalTime = meterLocalTime
            self.utcOffsetMinutes = utcOffsetMinutes
            self.mgdL = mgdL
            self.mmolL = mmolL
            self.ketoneMmolL = ketoneMmolL
            self.sampleType = sampleType
            self.sampleLocation = sampleLocation
            self.meal = meal
            self.flags = flags
            self.person = person
        }

        /// The row of a reading as `ListReadings` sends it.
        public init(_ r: Wire.Reading) {
            self.init(
                meter: r.meter, epoch: r.epoch, sequenceNumber: r.sequenceNumber, iso: r.time.iso, epochMillis: r.time.epochMillis,
                meterLocalTime: r.time.meterLocalTime, utcOffsetMinutes: r.time.utcOffsetMinutes, mgdL: r.mgdL, mmolL: r.mmolL,
                ketoneMmolL: r.ketoneMmolL, sampleType: r.sampleType?.name, sampleLocation: r.sampleLocation?.name,
                meal: r.mealName, flags: r.flags, person: r.person)
        }
    }

    /// Appends one CSV row (RFC 4180, CRLF): mg/dL as a whole number, mmol/L and ketone exact, a
    /// field quoted only when it holds a comma, a quote or a line break.
    public static func writeCSVRow(_ r: CSVRow, into out: inout [UInt8]) {
        let comma = UInt8(ascii: ",")
        if Self.isPlainCSV(r.meter) {
            // The identifier `<meter>/<epoch>/<sequence>` needs quotes only when the meter does.
            out.append(contentsOf: r.meter.utf8)
            out.append(UInt8(ascii: "/"))
            Self.writeInteger(r.epoch, into: &out)
            out.append(UInt8(ascii: "/"))
            Self.writeInteger(r.sequenceNumber, into: &out)
        } else {
            Self.writeCSVField(self.identifier(meter: r.meter, epoch: r.epoch, sequenceNumber: r.sequenceNumber), into: &out)
        }
        out.append(comma)
        Self.writeCSVField(r.meter, into: &out)
        out.append(comma)
        Self.writeInteger(r.sequenceNumber, into: &out)
        out.append(comma)
        Self.writeCSVField(r.iso, into: &out)
        out.append(comma)
        Self.writeInteger(r.epochMillis, into: &out)
        out.append(comma)
        Self.writeCSVField(r.meterLocalTime, into: &out)
        out.append(comma)
        Self.writeInteger(r.utcOffsetMinutes, into: &out)
        out.append(comma)
        out.append(contentsOf: self.number(r.mgdL, digits: 0).utf8)
        out.append(comma)
        if let mmolL = r.mmolL { JSONValue.double(mmolL).write(into: &out) }
        out.append(comma)
        if let ketone = r.ketoneMmolL { JSONValue.double(ketone).write(into: &out) }
        out.append(comma)
        if let name = r.sampleType { Self.writeCSVField(name, into: &out) }
        out.append(comma)
        if let name = r.sampleLocation { Self.writeCSVField(name, into: &out) }
        out.append(comma)
        if let name = r.meal { Self.writeCSVField(name, into: &out) }
        out.append(comma)
        out.append(contentsOf: (r.flags.contains("controlSolution") ? "true" : "false").utf8)
        out.append(comma)
        if r.flags.allSatisfy(Self.isPlainCSV) {
            for (index, flag) in r.flags.enumerated() {
                if index > 0 { out.append(UInt8(ascii: " ")) }
                out.append(contentsOf: flag.utf8)
            }
        } else {
            Self.writeCSVField(r.flags.joined(separator: " "), into: &out)
        }
        out.append(comma)
        if let person = r.person { Self.writeCSVField(person, into: &out) }
        out.append(contentsOf: "\r\n".utf8)
    }

    /// A field as it is, or quoted with its quotes doubled when it holds a comma, a quote or a line break.
    static func writeCSVField(_ s: String, into out: inout [UInt8]) {
        guard !Self.isPlainCSV(s) else { return out.append(contentsOf: s.utf8) }
        out.append(UInt8(ascii: "\""))
        for byte in s.utf8 {
            if byte == UInt8(ascii: "\"") { out.append(byte) }
            out.append(byte)
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Whether a field goes into the CSV without quotes.
    static func isPlainCSV(_ s: String) -> Bool {
        func special(_ byte: UInt8) -> Bool { byte == UInt8(ascii: ",") || byte == UInt8(ascii: "\"") || byte == 0x0A || byte == 0x0D }
        return s.utf8.withContiguousStorageIfAvailable { !$0.contains(where: special) } ?? !s.utf8.contains(where: special)
    }

    /// An integer's decimal digits (what `String(value)` spells): JSON writes integers the same way.
    static func writeInteger(_ value: Int64, into out: inout [UInt8]) {
        JSONValue.int(value).write(into: &out)
    }
}
