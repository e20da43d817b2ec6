import JSON
@testable import PacketCapture
import Testing

/// The capture inspector's streamed JSON writes a string as `JSONValue.serialized()` does: plain
/// text in one append, and text with quotes, backslashes or control characters through the JSON
/// module's escaper.
@Suite struct JSONTextBufferTests {
    @Test(arguments: ["Accu-Chek Guide", "say \"hi\"", "back\\slash", "tab\tnew\nline\rcr", "bell\u{07}nul\u{00}", "Zoë 血糖", ""])
    func stringsAreWrittenAsTheJSONModuleWritesThem(_ text: String) {
        var buffer = JSONTextBuffer(capacity: 64)
        buffer.string(text)
        buffer.string(nil)
        let written = buffer.bytes.withUnsafeBytes { Array($0) }
        #expect(written == Array((JSONValue.string(text).serialized() + "null").utf8))
    }
}
