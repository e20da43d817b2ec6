import JSON
import Testing

/// A value passed on as the text it came as (sugarctl's json and ndjson exports): its text read
/// without a tree, and indented as the tree would be.
@Suite struct ValueTextTests {
    static let samples: [JSONValue] = [
        .null, true, 0, -12, 5.550744909966918, 1e-05, "plain", #"a "quoted" {brace} [bracket], colon: \ back"#, "line\nbreak\u{1}",
        [], [:], [1, [], [:], ["a": []]],
        ["id": 7, "time": ["iso": "2024-03-31T06:00:00Z", "quirks": []], "context": .null, "flags": ["hi", "lo"], "é": "ünï"],
    ]

    @Test(arguments: ValueTextTests.samples)
    func readValueTextIsTheValuesText(_ value: JSONValue) throws {
        let text = Array(("[" + value.serialized() + ", 1]").utf8)
        var reader = JSONReader(text)
        try reader.beginArray()
        #expect(try reader.nextElement())
        let range = try reader.readValueText()
        var out: [UInt8] = []
        reader.appendText(range, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == value.serialized())
        #expect(try reader.nextElement())
        #expect(try reader.readInt() == 1)
    }

    @Test(arguments: ValueTextTests.samples)
    func compactTextIndentsAsTheTree(_ value: JSONValue) {
        for indent in [0, 1, 3] {
            var tree: [UInt8] = []
            value.writePretty(into: &tree, indent: indent)
            var text: [UInt8] = []
            let compact = Array(value.serialized().utf8)
            compact.withUnsafeBufferPointer { JSONValue.writePretty(compactText: $0, indent: indent, into: &text) }
            #expect(text == tree, "\(value) at \(indent)")
        }
    }

    @Test func aMalformedValueIsRefused() {
        for bad in ["{\"a\" 1}", "[1,]", "tru", "{\"a\":[1}"] {
            var reader = JSONReader(Array(bad.utf8))
            #expect(throws: JSONParseError.self) { _ = try reader.readValueText() }
        }
    }
}
