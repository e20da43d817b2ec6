import GlucoseProfile
import JSON
import SugarWire

extension FuzzTargets {
    /// Feeds the bytes to every Glucose Profile decoder (0x2A18 strict and lenient, 0x2A34, 0x2A51, 0x2A52,
    /// Date Time, Current Time) and the vendor ones (OneTouch Verio command and reply, i-SENS time).
    ///
    /// Checks: no decoder traps; an error's offset lies inside the input and its text is not empty; a
    /// successful decode re-encodes to exactly the input; decoding from a reader with trailing bytes reads
    /// the same value and stops where the exact decode ended; the derived values (user-facing time,
    /// mg/dL, mmol/L) and the `sugarctl decode --json` object compute without trapping, and that JSON
    /// text parses back.
    public static func glucoseProfile(_ bytes: [UInt8]) throws(FuzzFailure) {
        let check = Checker(target: "glucose-profile", bytes: bytes)

        if let m = try check.decode("measurement", { b throws(GlucoseProfileError) in try GlucoseMeasurement(bytes: b) }) {
            try check.reencodes("measurement", m.encoded())
            try check.exercise(m.json)
            _ = m.userFacingTime?.isoString
            _ = m.mgdL
            _ = m.mmolL
            _ = m.isControlSolution
        }
        if let m = try check.decode("measurement (lenient)", { b throws(GlucoseProfileError) in
            try GlucoseMeasurement(bytes: b, options: .lenientDateTime)
        }) {
            try check.reencodes("measurement (lenient)", m.encoded())
            try check.exercise(m.json)
            _ = m.userFacingTime
        }
        try check.prefix("measurement") { r throws(GlucoseProfileError) in try GlucoseMeasurement(parsing: &r) }
        if let c = try check.decode("context", { b throws(GlucoseProfileError) in try MeasurementContext(bytes: b) }) {
            try check.reencodes("context", c.encoded())
            try check.exercise(c.json)
            _ = c.isKetoneMarker
        }
        try check.prefix("context") { r throws(GlucoseProfileError) in try MeasurementContext(parsing: &r) }
        if let f = try check.decode("feature", { b throws(GlucoseProfileError) in try GlucoseFeature(bytes: b) }) {
            try check.reencodes("feature", f.encoded())
            try check.exercise(f.json)
        }
        if let r = try check.decode("RACP", { b throws(GlucoseProfileError) in try RACPMessage(bytes: b) }) {
            try check.reencodes("RACP", r.encoded())
            try check.exercise(r.json)
        }
        if let d = try check.decode("date time", { b throws(GlucoseProfileError) in try DateTime(bytes: b) }) {
            try check.reencodes("date time", d.encoded())
            // Date arithmetic across month and year ends, by an amount the input picks.
            let minutes = bytes.count > 7 ? Int(Int16(bitPattern: UInt16(bytes[7]) | UInt16(bytes[bytes.count - 1]) << 8)) : 0
            _ = d.adding(minutes: minutes * 60)?.isoString
        }
        if let d = try check.decode("date time (lenient)", { b throws(GlucoseProfileError) in
            try DateTime(bytes: b, options: .lenientDateTime)
        }) {
            try check.reencodes("date time (lenient)", d.encoded())
            _ = d.isoString
            _ = d.adding(minutes: -1)
        }
        if let t = try check.decode("current time", { b throws(GlucoseProfileError) in try CurrentTime(bytes: b) }) {
            try check.reencodes("current time", t.encoded())
            try check.exercise(t.json)
        }
        // OneTouch Verio packets (docs/verio-protocol.md) and the i-SENS vendor time value.
        if let c = try check.decode("Verio command", { b throws(GlucoseProfileError) in try VerioCommand(bytes: b) }) {
            try check.reencodes("Verio command", c.encoded())
        }
        if let r = try check.decode("Verio reply", { b throws(GlucoseProfileError) in try VerioReply(bytes: b) }) {
            // Any byte with bits 0x81 set is an acknowledgement; only 0x81 itself re-encodes exactly.
            if r != .acknowledgement || bytes == Verio.acknowledgement { try check.reencodes("Verio reply", r.encoded()) }
            if case .data(let payload) = r {
                let commands: [VerioCommand] = [.readClock, .highestRecordNumber, .recordCount, .record(number: 1)]
                for command in commands {
                    if let answer = try? command.answer(payload: payload), answer.payload() != payload {
                        throw check.fail("Verio \(command.name) answer re-encoded differently")
                    }
                }
            }
        }
        if let t = try check.decode("i-SENS time", { b throws(GlucoseProfileError) in try ISensTime(bytes: b) }) {
            try check.reencodes("i-SENS time", t.encoded())
        }
        // SFLOAT has no invalid bit patterns: every 16-bit value must describe and convert.
        if bytes.count >= 2 {
            let value = SFloat(rawValue: UInt16(bytes[0]) | UInt16(bytes[1]) << 8)
            _ = value.description
            _ = value.value(shiftingExponentBy: Int(Int8(bitPattern: bytes.count >= 3 ? bytes[2] : 0)))
            if let double = value.value, double.isFinite { _ = SFloat(double) }
        }
    }
}

/// The checks shared by the decoders of one input.
private struct Checker {
    let target: String
    let bytes: [UInt8]

    func fail(_ message: String) -> FuzzFailure {
        FuzzFailure(target: self.target, "\(message); input \(hexString(self.bytes))")
    }

    /// The decoded value, or nil after checking that the error points inside the input.
    func decode<T>(_ what: String, _ decode: ([UInt8]) throws(GlucoseProfileError) -> T) throws(FuzzFailure) -> T? {
        do {
            return try decode(self.bytes)
        } catch {
            try self.checkError(error, what)
            return nil
        }
    }

    /// A successful decode must re-encode to exactly the input.
    func reencodes(_ what: String, _ encoded: [UInt8]) throws(FuzzFailure) {
        if encoded != self.bytes {
            throw self.fail("\(what) decoded but re-encoded as \(hexString(encoded))")
        }
    }

    /// Decoding from a reader with two trailing bytes reads the same prefix as the exact decode.
    func prefix<T: Equatable>(_ what: String, _ parse: (inout ByteReader) throws(GlucoseProfileError) -> T) throws(FuzzFailure) {
        var exact = ByteReader(self.bytes)
        let exactValue: T
        do { exactValue = try parse(&exact) } catch { return }
        var padded = ByteReader(self.bytes + [0xA5, 0x5A])
        let paddedValue: T
        do {
            paddedValue = try parse(&padded)
        } catch {
            throw self.fail("\(what) decoded from the exact bytes but not with trailing bytes: \(error)")
        }
        if paddedValue != exactValue || padded.offset != exact.offset {
            throw self.fail("\(what) decoded differently with trailing bytes (read \(padded.offset), not \(exact.offset))")
        }
    }

    func checkError(_ error: GlucoseProfileError, _ what: String) throws(FuzzFailure) {
        if error.offset < 0 || error.offset > self.bytes.count {
            throw self.fail("\(what) error offset \(error.offset) is outside the \(self.bytes.count)-byte input: \(error)")
        }
        if error.description.isEmpty { throw self.fail("\(what) error has an empty description") }
    }

    /// The JSON a decoder produces must serialize and parse back.
    func exercise(_ value: JSONValue) throws(FuzzFailure) {
        let text = value.serialized()
        do {
            _ = try JSONValue(parsing: text)
        } catch {
            throw self.fail("decoder JSON \(text) does not parse back: \(error)")
        }
    }
}

/// Lowercase hex, two digits per byte, no separators.
func hexString(_ bytes: [UInt8]) -> String {
    let digits: [Character] = Array("0123456789abcdef")
    var out = ""
    out.reserveCapacity(bytes.count * 2)
    for byte in bytes {
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 0x0F)])
    }
    return out
}
