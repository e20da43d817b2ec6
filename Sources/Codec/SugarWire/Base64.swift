/// Base64 (RFC 4648 §4, with padding): how `Backup` and `RestoreUpload` carry a database file's
/// bytes inside JSON.
public enum Base64 {
    /// The standard alphabet (not the URL-safe one).
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Each byte's 6-bit value; 0xFF for bytes outside the alphabet.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xff, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    /// `bytes` as padded base64, without line breaks.
    public static func encode<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var iterator = bytes.makeIterator()
        while let a = iterator.next() {
            let b = iterator.next()
            let c = iterator.next()
            out.append(alphabet[Int(a >> 2)])
            out.append(alphabet[Int((a & 0x03) << 4 | (b ?? 0) >> 4)])
            out.append(b.map { alphabet[Int(($0 & 0x0f) << 2 | (c ?? 0) >> 6)] } ?? UInt8(ascii: "="))
            out.append(c.map { alphabet[Int($0 & 0x3f)] } ?? UInt8(ascii: "="))
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of `text`, or nil when it is not padded base64 (no whitespace allowed).
    public static func decode(_ text: String) -> [UInt8]? {
        let input = Array(text.utf8)
        guard input.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(input.count / 4 * 3)
        var index = 0
        while index < input.count {
            let last = index + 4 == input.count
            let pad = last ? (input[index + 3] == UInt8(ascii: "=") ? (input[index + 2] == UInt8(ascii: "=") ? 2 : 1) : 0) : 0
            var quad: UInt32 = 0
            for offset in 0..<4 {
                let byte = input[index + offset]
                let value: UInt8
                if offset >= 4 - pad {
                    value = 0
                } else {
                    value = values[Int(byte)]
                    guard value != 0xff else { return nil }
                }
                quad = quad << 6 | UInt32(value)
            }
            out.append(UInt8(quad >> 16))
            if pad < 2 { out.append(UInt8(quad >> 8 & 0xff)) }
            if pad < 1 { out.append(UInt8(quad & 0xff)) }
            index += 4
        }
        return out
    }
}
