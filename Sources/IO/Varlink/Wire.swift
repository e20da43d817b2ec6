import JSON

/// Encoding of Varlink messages: compact JSON followed by a NUL byte.
enum VarlinkWire {
    /// A reply message carrying `parameters`, with `"continues": true` when `continues`.
    static func reply(_ parameters: JSONObject, continues: Bool) -> [UInt8] {
        self.reply(continues: continues) { JSONValue.object(parameters).write(into: &$0) }
    }

    /// A reply whose parameters `write` appends (one JSON object).
    static func reply(continues: Bool, writingParameters write: (inout [UInt8]) -> Void) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        out.append(contentsOf: #"{"parameters":"#.utf8)
        write(&out)
        if continues { out.append(contentsOf: #","continues":true"#.utf8) }
        out.append(contentsOf: [UInt8(ascii: "}"), 0])
        return out
    }

    /// An error reply: `{"error":name,"parameters":{…}}` and the NUL.
    static func error(_ error: VarlinkError) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        out.append(contentsOf: #"{"error":"#.utf8)
        JSONValue.string(error.name).write(into: &out)
        out.append(contentsOf: #","parameters":"#.utf8)
        JSONValue.object(error.parameters).write(into: &out)
        out.append(contentsOf: [UInt8(ascii: "}"), 0])
        return out
    }

    /// A call message; the `more` and `oneway` flags are written only when true.
    static func call(_ method: String, _ parameters: JSONObject, more: Bool, oneway: Bool) -> [UInt8] {
        var message: JSONObject = ["method": .string(method), "parameters": .object(parameters)]
        if more { message["more"] = true }
        if oneway { message["oneway"] = true }
        var out: [UInt8] = []
        JSONValue.object(message).write(into: &out)
        out.append(0)
        return out
    }
}
