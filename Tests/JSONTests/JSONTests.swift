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
}
