import JSON

extension FuzzTargets {
    /// Parses the bytes as JSON text.
    ///
    /// Checks: the parser never traps (deep nesting is refused by `maxDepth`, not by the stack); an error's
    /// offset lies inside the input; for accepted text, compact serialization is a fixed point after one
    /// round (parse → serialize → parse → serialize gives the same text; the first round may turn `1.0`
    /// into `1`), the pretty form parses to the same value as the compact form, and `write(into:)` appends
    /// the compact bytes.
    public static func json(_ bytes: [UInt8]) throws(FuzzFailure) {
        func fail(_ message: String) -> FuzzFailure {
            FuzzFailure(target: "json", "\(message); input \(hexString(bytes))")
        }
        // The server's kind of limits (a small element bound here, so the fuzzer reaches it): a text
        // within them parses to the same value as without; over them, the refusal names the bound.
        let bounded = Result { () throws(JSONParseError) -> JSONValue in
            try JSONValue(parsing: bytes, limits: JSONParseLimits(maxDepth: 64, maxElements: 64, cpuBudget: .seconds(10)))
        }
        let value: JSONValue
        do {
            value = try JSONValue(parsing: bytes)
        } catch {
            if error.offset < 0 || error.offset > bytes.count {
                throw fail("error offset \(error.offset) is outside the \(bytes.count)-byte input: \(error)")
            }
            if error.reason.isEmpty { throw fail("error with an empty reason at byte \(error.offset)") }
            if case .success = bounded { throw fail("accepted within limits but refused without: \(error)") }
            return
        }
        switch bounded {
        case .success(let limited):
            if limited != value { throw fail("the bounded parse gave \(limited.serialized()), not \(value.serialized())") }
        case .failure(let error):
            if !error.reason.contains("values and keys") { throw fail("a valid text was refused within the limits: \(error)") }
        }
        let first = value.serialized()
        let reparsed: JSONValue
        do {
            reparsed = try JSONValue(parsing: first)
        } catch {
            throw fail("serialized text \(first) does not parse back: \(error)")
        }
        let second = reparsed.serialized()
        if second != first { throw fail("serialization is not stable: \(first) then \(second)") }

        let pretty: JSONValue
        do {
            pretty = try JSONValue(parsing: value.prettySerialized())
        } catch {
            throw fail("pretty form does not parse back: \(error)")
        }
        if pretty.serialized() != first { throw fail("pretty form reads back as \(pretty.serialized()), not \(first)") }

        var appended: [UInt8] = [0x2A]
        value.write(into: &appended)
        if appended.count != first.utf8.count + 1 || !appended.dropFirst().elementsEqual(first.utf8) {
            throw fail("write(into:) differs from serialized()")
        }

        // Lookups on whatever came out must not trap.
        if let object = value.objectValue, let key = object.keys.first { _ = value[key] }
        _ = value.intValue
        _ = value.doubleValue
    }
}
