import GlucoseProfile
import HealthDataSync
import JSON
import SugarAPI
import SugarForward
import SugarWire
import Testing

/// The FollowReadings compact path written and read without JSON trees: `Wire.CompactReading`
/// written by the daemon's byte writer and read by the forwarder's byte decoder, against the
/// production tree forms (`ReadingJSON.object`, the JSON serializer, `ForwardTopics.payloadBytes`
/// of the full object), and the decoder's errors for malformed input.
@Suite struct CompactWireTests {
    /// The samples of ``CompactReadingTests`` and a person whose name needs escapes.
    static func samples() throws -> [StoredReading] {
        try CompactReadingTests.samples() + [
            CompactReadingTests.stored(10, sequence: 10, concentration: try SFloat(mantissa: 77, exponent: -5), meal: 1, person: "Zoë \"Z\" \\ O'Brien")
        ]
    }

    static func bytes(_ value: Wire.CompactReading) -> [UInt8] {
        var out: [UInt8] = []
        value.write(into: &out)
        return out
    }

    @Test func theByteWriterWritesTheTreeFormsBytes() throws {
        for stored in try Self.samples() {
            let value = Wire.CompactReading(stored)
            let written = Self.bytes(value)
            var serialized: [UInt8] = []
            ReadingJSON.compact(stored).write(into: &serialized)
            #expect(written == serialized, "reading \(stored.id)")
            // What was written is, key by key, what the full ListReadings object says.
            let parsed = try JSONValue(parsing: written)
            Self.expectSameText(parsed, in: ReadingJSON.object(stored), path: "reading \(stored.id)")
        }
    }

    @Test func theDecoderReadsBackWhatWasWritten() throws {
        for stored in try Self.samples() {
            let value = Wire.CompactReading(stored)
            var reader = JSONReader(Self.bytes(value))
            #expect(try Wire.CompactReading(reading: &reader) == value, "reading \(stored.id)")
            #expect(try Wire.CompactReading(json: ReadingJSON.compact(stored)) == value)
        }
    }

    @Test func theTypedPayloadIsThePayloadOfTheFullObject() throws {
        for stored in try Self.samples() {
            let typed = try ForwardTopics.payloadBytes(Wire.CompactReading(stored))
            #expect(typed == (try ForwardTopics.payloadBytes(Wire.CompactReading(try Wire.Reading(json: ReadingJSON.object(stored))))), "reading \(stored.id)")
        }
    }

    /// The MQTT payload is made from the reply's text (`Wire.CompactReading.Text`, values copied
    /// as sugard wrote them): read back, each key holds the typed reading's value.
    @Test func thePayloadFromTheTextHoldsTheReadingsValues() throws {
        let samples = try Self.samples()
        var out: [UInt8] = []
        Wire.CompactFollowReply.write(cursors: samples.map(\.id), into: &out) { index, out in
            Wire.CompactReading(samples[index]).write(into: &out)
        }
        var reader = JSONReader(out)
        let texts = try Wire.CompactFollowReply.texts(&reader)
        #expect(texts.map(\.cursor) == samples.map(\.id))
        for ((_, text), stored) in zip(texts, samples) {
            let r = Wire.CompactReading(stored)
            let payload = try JSONValue(parsing: ForwardTopics.payload(text, from: reader))
            let expected: JSONObject = [
                "id": .string(ReadingExport.identifier(r)), "meter": .string(r.meter), "sequenceNumber": .int(r.sequenceNumber),
                "time": .string(r.time.iso), "epochMillis": .int(r.time.epochMillis),
                // What people read: mg/dL an integer, mmol/L one decimal.
                "mgdL": r.mgdL.map { .int(Int64($0.rounded())) } ?? .null, "mmolL": r.mmolL.map { .double(($0 * 10).rounded() / 10) } ?? .null,
                "flags": .array(r.flags.map { .string($0) }), "sampleType": .from(r.type?.name),
                "sampleLocation": .from(r.sampleLocation?.name), "meal": .from(r.meal?.name),
                "controlSolution": .bool(r.flags.contains("controlSolution")), "person": .from(r.person),
                "kind": .string(r.kind.rawValue), "measuredAt": .string(r.time.local),
            ]
            // As text: the same keys in the same order (kind and measuredAt last), each value
            // written as the typed value writes (95, not 95.0).
            #expect(payload.serialized() == JSONValue.object(expected).serialized(), "reading \(stored.id)")
            #expect(text.meter == r.meter && text.epochMillis == r.time.epochMillis)
        }
    }

    @Test func aBatchedReplyReadsBackAndHasTheInterfaceShape() throws {
        let samples = try Self.samples()
        var out: [UInt8] = []
        Wire.CompactFollowReply.write(cursors: samples.map(\.id), into: &out) { index, out in
            Wire.CompactReading(samples[index]).write(into: &out)
        }
        let reply = try Wire.CompactFollowReply(bytes: out)
        #expect(reply.cursor == samples.last?.id)
        #expect(reply.readings.map(\.cursor) == samples.map(\.id))
        #expect(reply.readings.map(\.reading) == samples.map { Wire.CompactReading($0) })
        // The interface's general FollowReadings reply type reads the same text.
        let general = try Wire.FollowReply(json: try JSONValue(parsing: out))
        #expect(general.followed.map(\.cursor) == samples.map(\.id))
        // An unbatched reply (`reading`) reads as one reading with the reply's cursor.
        var single = Array(#"{"cursor":7,"reading":"#.utf8)
        Wire.CompactReading(samples[0]).write(into: &single)
        single.append(UInt8(ascii: "}"))
        let one = try Wire.CompactFollowReply(bytes: single)
        #expect(one.readings.count == 1 && one.readings[0].cursor == 7 && one.readings[0].reading == Wire.CompactReading(samples[0]))
    }

    /// One valid compact reading's text with `change` applied to its tree.
    static func text(_ change: (inout JSONObject) -> Void) throws -> [UInt8] {
        guard case .object(var object) = ReadingJSON.compact(try Self.samples()[0]) else { return [] }
        change(&object)
        var out: [UInt8] = []
        JSONValue.object(object).write(into: &out)
        return out
    }

    /// Why the typed reader rejects `bytes` (nil: it reads them); the text reader the MQTT sink
    /// uses (`Wire.CompactReading.Text`, which the typed reader runs first) must reject them the
    /// same way: the typed reader adds no error of its own when it makes the values.
    static func failure(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) -> WireError? {
        func failure(_ read: (inout JSONReader) throws -> Void) -> WireError? {
            var reader = JSONReader(bytes)
            do {
                try read(&reader)
                try reader.end()
                return nil
            } catch let error as WireError {
                return error
            } catch {
                return WireError(path: [], reason: "\(error)")
            }
        }
        let typed = failure { reader in _ = try Wire.CompactReading(reading: &reader) }
        let text = failure { reader in _ = try Wire.CompactReading.Text(reading: &reader) }
        #expect(
            text?.path == typed?.path && text?.reason == typed?.reason,
            "\(String(decoding: bytes, as: UTF8.self)): text reader \(String(describing: text)), typed \(String(describing: typed))",
            sourceLocation: sourceLocation)
        return typed
    }

    @Test func everyMalformedShapeIsAClearError() throws {
        func expectError(_ bytes: [UInt8], path: [String], _ reason: String, sourceLocation: SourceLocation = #_sourceLocation) {
            let error = Self.failure(bytes)
            #expect(error?.path == path, "\(String(decoding: bytes, as: UTF8.self)): \(String(describing: error))", sourceLocation: sourceLocation)
            #expect(error?.reason.contains(reason) == true, "\(String(describing: error)) should say \(reason)", sourceLocation: sourceLocation)
        }
        #expect(Self.failure(try Self.text { _ in }) == nil)
        // Not JSON, or not an object.
        expectError(Array(#"{"id":1,"#.utf8), path: [], "invalid JSON at byte 8")
        expectError(Array("[]".utf8), path: [], "expected an object, got an array")
        expectError(Array("".utf8), path: [], "expected an object, got the end of input")
        expectError(Array(#"{"id" 1}"#.utf8), path: [], "expected ':'")
        expectError(Array(#"{"id":1 "meter":"x"}"#.utf8), path: [], "expected ',' or '}'")
        // Missing, null or mistyped fields, at their path.
        expectError(try Self.text { $0["meter"] = nil }, path: ["meter"], "missing required field")
        expectError(try Self.text { $0["epoch"] = JSONValue.null }, path: ["epoch"], "missing required field")
        expectError(try Self.text { $0["id"] = "1" }, path: ["id"], "expected a number, got a string")
        expectError(try Self.text { $0["id"] = 1.5 }, path: ["id"], "expected an integer")
        expectError(try Self.text { $0["mgdL"] = true }, path: ["mgdL"], "expected a number, got a boolean")
        expectError(try Self.text { $0["person"] = 3 }, path: ["person"], "expected a string, got a number")
        expectError(try Self.text { $0["time"] = "2024" }, path: ["time"], "expected an object, got a string")
        expectError(try Self.text { $0["time"] = ["iso": "x", "epochMillis": "1", "local": "y", "utcOffsetMinutes": 0] }, path: ["time", "epochMillis"], "expected a number")
        expectError(try Self.text { $0["time"] = ["iso": "x", "epochMillis": 1, "local": "y"] }, path: ["time", "utcOffsetMinutes"], "missing required field")
        expectError(try Self.text { $0["flags"] = "hi" }, path: ["flags"], "expected an array, got a string")
        expectError(try Self.text { $0["flags"] = ["hi", 2] }, path: ["flags"], "expected a string, got a number")
        expectError(try Self.text { $0["type"] = ["code": 1] }, path: ["type", "name"], "missing required field")
        expectError(try Self.text { $0["context"] = ["meal": ["code": "1", "name": "x"]] }, path: ["context", "meal", "code"], "expected a number")
        // A key twice, and text after the object.
        var twice = try Self.text { _ in }
        twice.removeLast()
        twice += Array(#","id":2}"#.utf8)
        expectError(twice, path: ["id"], "duplicate key")
        expectError(try Self.text { _ in } + Array(" x".utf8), path: [], "unexpected data after the value")
        // Keys are matched on their bytes: a key spelled with an escape is the same key (so twice
        // is still a duplicate), an unknown key twice is a duplicate too, and a key with a control
        // character is malformed JSON as in the tree parser.
        var noPerson = try Self.text { $0["person"] = nil }
        noPerson.removeLast()
        var spelled = JSONReader(noPerson + Array(#","pers\u006fn":"Ann"}"#.utf8))
        #expect(try Wire.CompactReading(reading: &spelled).person == "Ann")
        var escaped = try Self.text { _ in }
        escaped.removeLast()
        expectError(escaped + Array(#","\u0069d":2}"#.utf8), path: ["id"], "duplicate key")
        expectError(escaped + Array(#","later":1,"later":2}"#.utf8), path: ["later"], "duplicate key")
        expectError(escaped + Array(",\"me\u{01}ter\":2}".utf8), path: [], "control character in string")
        // Near misses of known keys are other keys, skipped.
        #expect(Self.failure(escaped + Array(#","idd":2,"i":3,"meterx":4,"sampleLocatio":5,"":6}"#.utf8)) == nil)
        // A key this version does not know is skipped; a context without a meal is no meal.
        #expect(Self.failure(try Self.text { $0["later"] = ["any": [1, 2]] }) == nil)
        var reader = JSONReader(try Self.text { $0["context"] = ["carbohydrate": 1] })
        #expect(try Wire.CompactReading(reading: &reader).meal == nil)
    }

    @Test func aMalformedReplyIsAClearError() throws {
        func replyError(_ text: String) -> WireError? {
            do {
                _ = try Wire.CompactFollowReply(bytes: Array(text.utf8))
                return nil
            } catch {
                return error
            }
        }
        let reading = String(decoding: try Self.text { _ in }, as: UTF8.self)
        #expect(replyError(#"{"cursor":1,"readings":[{"cursor":1,"reading":\#(reading)}]}"#) == nil)
        #expect(replyError(#"{"cursor":1}"#)?.reason.contains("without reading or readings") == true)
        #expect(replyError(#"{"readings":[]}"#)?.path == ["cursor"])
        #expect(replyError(#"{"cursor":2,"readings":[{"cursor":1,"reading":\#(reading)},{"cursor":2}]}"#)?.path == ["readings", "[1]", "reading"])
        #expect(replyError(#"{"cursor":1,"readings":{}}"#)?.path == ["readings"])
        #expect(replyError(#"{"cursor":1,"reading":{"id":1}}"#)?.path == ["reading", "meter"])
    }

    /// Every leaf of `compact` has the same JSON text as the leaf at its path in `full`.
    static func expectSameText(_ compact: JSONValue, in full: JSONValue?, path: String, sourceLocation: SourceLocation = #_sourceLocation) {
        if case .object(let object) = compact {
            for entry in object.entries {
                Self.expectSameText(entry.value, in: full?[entry.key], path: path + "." + entry.key, sourceLocation: sourceLocation)
            }
        } else {
            #expect(compact.serialized() == full?.serialized(), "\(path)", sourceLocation: sourceLocation)
        }
    }
}
