import JSON
import Testing

@Suite struct JSONTests {
    @Test func roundTripKeepsKeyOrder() throws {
        let text = #"{"b":1,"a":[true,false,null],"c":{"x":"y\n\"z\"","n":-1.5e-3}}"#
        let value = try JSONValue(parsing: text)
        #expect(value.serialized() == #"{"b":1,"a":[true,false,null],"c":{"x":"y\n\"z\"","n":-0.0015}}"#)
        #expect(value["c"]?["x"]?.stringValue == "y\n\"z\"")
        #expect(value["b"]?.intValue == 1)
    }

    @Test func integralDoublesPrintWithoutFraction() {
        #expect(JSONValue.double(88).serialized() == "88")
        #expect(JSONValue.double(10.1).serialized() == "10.1")
        #expect(JSONValue.from(Double.nan).serialized() == "null")
    }

    @Test func unicodeEscapes() throws {
        let value = try JSONValue(parsing: #""\u00e9\ud83d\ude00\u0001""#)
        #expect(value.stringValue == "é😀\u{01}")
        #expect(value.serialized() == "\"é😀\\u0001\"")
    }

    @Test(arguments: [
        ("", 0), ("{", 1), (#"{"a" 1}"#, 5), ("[1,]", 3), ("01", 1), ("1.", 2), ("tru", 0), (#""abc"#, 0),
        (#"{"a":1,"a":2}"#, 7), ("[1] x", 4), (#""\ud800""#, 7), ("-", 0), ("1e", 2),
    ])
    func rejectsInvalidInputWithOffset(text: String, offset: Int) {
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: text) }
        do {
            _ = try JSONValue(parsing: text)
        } catch {
            #expect(error.offset == offset, "\(text): \(error)")
        }
    }

    @Test func depthIsLimited() {
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: deep) }
        let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect((try? JSONValue(parsing: ok)) != nil)
    }

    @Test func rejectsInvalidUTF8() {
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: [0x22, 0xFF, 0x22]) }
    }

    @Test func largeIntegersFallBackToDouble() throws {
        #expect(try JSONValue(parsing: "9223372036854775807") == .int(Int64.max))
        #expect(try JSONValue(parsing: "9223372036854775808").doubleValue == 9_223_372_036_854_775_808)
    }

    /// Short decimals are read from their digits (one division by an exact power of ten): each
    /// must be the double `Double(text)` (strtod) gives, sign of zero included.
    @Test func shortDecimalsAreTheNearestDouble() throws {
        var generator = SystemRandomNumberGenerator()
        var texts = ["0.0", "-0.0", "0.1", "0.2", "0.3", "104.5", "-5.83", "5.551115123125783", "999999999999999.9",
            "0.000000000000000000001", "123456789012345.0", "1.7976931348623157", "9007199254740.993", "4.35", "18.015"]
        for _ in 0..<20_000 {
            let digits = Int.random(in: 1...15, using: &generator)
            var text = ""
            for i in 0..<digits { text += String(Int.random(in: i == 0 ? 1...9 : 0...9, using: &generator)) }
            let point = Int.random(in: 0..<digits, using: &generator)
            let whole = String(text.prefix(point == 0 ? 1 : point))
            let fraction = String(text.dropFirst(point == 0 ? 1 : point))
            texts.append((Bool.random(using: &generator) ? "-" : "") + whole + "." + (fraction.isEmpty ? "0" : fraction))
            texts.append("0." + String(repeating: "0", count: Int.random(in: 0...6, using: &generator)) + text)
        }
        for text in texts {
            let parsed = try #require(try JSONValue(parsing: text).doubleValue, "\(text)")
            let expected = try #require(Double(text))
            #expect(parsed.bitPattern == expected.bitPattern, "\(text): \(parsed) != \(expected)")
        }
    }

    /// `readRepeatedString` reads what `readString` reads (escapes, non-ASCII, empty) and the
    /// same errors; a repeat is the same value.
    @Test func repeatedStringsReadAsStrings() throws {
        let text = #"["c026da013a7f","c026da013a7f","","caf\u00e9","café","a\"b","c026da013a7f",""]"#
        var plain = JSONReader(Array(text.utf8))
        var repeated = JSONReader(Array(text.utf8))
        var a: [String] = []
        var b: [String] = []
        try plain.beginArray()
        while try plain.nextElement() { a.append(try plain.readString()) }
        try repeated.beginArray()
        while try repeated.nextElement() { b.append(try repeated.readRepeatedString()) }
        #expect(a == b)
        #expect(b == ["c026da013a7f", "c026da013a7f", "", "café", "café", "a\"b", "c026da013a7f", ""])
        for bad in [#"["abc"#, "[\"a\u{01}b\"]", #"[1]"#, #"["\x"]"#] {
            var one = JSONReader(Array(bad.utf8))
            var two = JSONReader(Array(bad.utf8))
            var first: JSONParseError?
            var second: JSONParseError?
            do {
                try one.beginArray()
                _ = try one.nextElement()
                _ = try one.readString()
            } catch { first = error }
            do {
                try two.beginArray()
                _ = try two.nextElement()
                _ = try two.readRepeatedString()
            } catch { second = error }
            #expect(first != nil && "\(String(describing: first))" == "\(String(describing: second))", "\(bad)")
        }
    }

    /// `readStringText` and `readNumberText` accept and reject what `readString` and `readDouble`
    /// do (the same errors), and give the value's own text: a number's value is not computed
    /// unless its text alone cannot tell it is in range (`1e999` is still rejected).
    @Test func valueTextsReadAsValues() throws {
        func outcome<T>(_ text: String, _ read: (inout JSONReader) throws(JSONParseError) -> T) -> Result<T, JSONParseError> {
            var reader = JSONReader(Array(text.utf8))
            do throws(JSONParseError) {
                try reader.beginArray()
                _ = try reader.nextElement()
                return .success(try read(&reader))
            } catch { return .failure(error) }
        }
        let numbers = ["[95]", "[ -5.273207664468572]", "[0.1]", "[1e3]", "[1E-3]", "[1e999]", "[-]", "[01]", "[1.]", "[1e]", "[\"1\"]", "[]", "[" + String(repeating: "9", count: 400) + "]"]
        for text in numbers {
            let value = outcome(text) { (r: inout JSONReader) throws(JSONParseError) in try r.readDouble() }
            let range = outcome(text) { (r: inout JSONReader) throws(JSONParseError) in try r.readNumberText() }
            switch (value, range) {
            case (.success(let value), .success(let range)):
                let bytes = Array(text.utf8)[range]
                #expect(Double(String(decoding: bytes, as: UTF8.self)) == value, "\(text)")
            case (.failure(let a), .failure(let b)):
                #expect("\(a)" == "\(b)", "\(text)")
            default:
                Issue.record("\(text): readDouble \(value), readNumberText \(range)")
            }
        }
        let strings = [#"["caf\u00e9"]"#, #"["plain"]"#, #"["a\"b"]"#, #"[""]"#, #"["abc"#, "[\"a\u{01}b\"]", "[1]", #"["\x"]"#]
        for text in strings {
            let value = outcome(text) { (r: inout JSONReader) throws(JSONParseError) in try r.readString() }
            let range = outcome(text) { (r: inout JSONReader) throws(JSONParseError) in try r.readStringText() }
            switch (value, range) {
            case (.success(let value), .success(let range)):
                var out: [UInt8] = []
                let reader = JSONReader(Array(text.utf8))
                reader.appendText(range, to: &out)
                #expect(try JSONValue(parsing: out) == .string(value), "\(text)")
            case (.failure(let a), .failure(let b)):
                #expect("\(a)" == "\(b)", "\(text)")
            default:
                Issue.record("\(text): readString \(value), readStringText \(range)")
            }
        }
    }
}
