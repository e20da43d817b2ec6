/// Hostile JSON texts for benchmarks, fuzz seeds and tests: what a peer could send to make a parser
/// slow. Not used by the parser itself.
public enum JSONWorstCase {
    /// A Varlink-call-shaped object of at most `limit` bytes (default 1 MiB, the server's message
    /// cap) built to be expensive: `keys` distinct short keys in one object (a parser that looks keys
    /// up linearly does n²/2 comparisons), a 60-deep nest of arrays and objects, 1 000 small arrays,
    /// and a long string with escapes filling the rest.
    public static func request(keys: Int = 130_000, limit: Int = 1 << 20) -> [UInt8] {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(limit)
        out += Array(#"{"method":"io.sugard.HealthDataSync.GetStatus","parameters":{"#.utf8)
        for index in 0..<keys {
            // Base-62 names, shortest first: 3 characters cover 238 328 keys.
            var n = index
            var name: [UInt8] = []
            repeat {
                name.append(alphabet[n % alphabet.count])
                n /= alphabet.count
            } while n > 0
            out.append(UInt8(ascii: "\""))
            out += name
            out += Array(#"":0,"#.utf8)
        }
        out += Array(#""deep":"#.utf8)
        for level in 0..<60 { out += Array((level % 2 == 0 ? "[" : #"{"d":"#).utf8) }
        out += Array("0".utf8)
        for level in (0..<60).reversed() { out += Array((level % 2 == 0 ? "]" : "}").utf8) }
        out += Array(#","arrays":["#.utf8)
        for index in 0..<1000 { out += Array((index == 0 ? "[0]" : ",[0]").utf8) }
        out += Array(#"],"long":""#.utf8)
        let tail = Array(#""}}"#.utf8)
        let escape = Array(#"\n\u00e9"#.utf8)
        while out.count + escape.count + tail.count <= limit { out += escape }
        while out.count + tail.count < limit { out.append(UInt8(ascii: "a")) }
        out += tail
        return out
    }
}
