/// SHA-1 (FIPS 180-4) in pure Swift: the name-based UUIDs of the FHIR export (RFC 4122 version 5)
/// and Nightscout's `api-secret` header (the hex digest of the secret). SHA-1 is used here only
/// where those formats prescribe it, never to protect anything.
public struct SHA1: Sendable {
    private var state: (UInt32, UInt32, UInt32, UInt32, UInt32) = (0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0)
    private var buffer: [UInt8] = []
    private var length: UInt64 = 0

    public init() {}

    /// Adds bytes to the message.
    public mutating func update<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        for byte in bytes {
            self.buffer.append(byte)
            self.length &+= 1
            if self.buffer.count == 64 {
                self.compress(self.buffer)
                self.buffer.removeAll(keepingCapacity: true)
            }
        }
    }

    /// The 20-byte digest of everything added.
    public func finalize() -> [UInt8] {
        var copy = self
        let bitLength = self.length &* 8
        var padding: [UInt8] = [0x80]
        while (copy.buffer.count + padding.count) % 64 != 56 { padding.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) { padding.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
        let message = copy.buffer + padding
        for start in stride(from: 0, to: message.count, by: 64) { copy.compress(Array(message[start..<start + 64])) }
        let (a, b, c, d, e) = copy.state
        return [a, b, c, d, e].flatMap { word in (0..<4).map { UInt8(truncatingIfNeeded: word >> UInt32(24 - 8 * $0)) } }
    }

    /// The digest of `bytes`.
    public static func digest<Bytes: Sequence>(_ bytes: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        var hash = SHA1()
        hash.update(bytes)
        return hash.finalize()
    }

    /// The digest of the UTF-8 of `text` as 40 lowercase hex digits (`sha1sum`'s form).
    public static func hex(_ text: String) -> String {
        let digits = Array("0123456789abcdef")
        return String(self.digest(text.utf8).flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] })
    }

    private mutating func compress(_ block: [UInt8]) {
        var w = [UInt32](repeating: 0, count: 80)
        for i in 0..<16 {
            w[i] = UInt32(block[4 * i]) << 24 | UInt32(block[4 * i + 1]) << 16 | UInt32(block[4 * i + 2]) << 8 | UInt32(block[4 * i + 3])
        }
        for i in 16..<80 {
            let x = w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]
            w[i] = x << 1 | x >> 31
        }
        var (a, b, c, d, e) = self.state
        for i in 0..<80 {
            let f: UInt32
            let k: UInt32
            switch i {
            case 0..<20: (f, k) = ((b & c) | (~b & d), 0x5A82_7999)
            case 20..<40: (f, k) = (b ^ c ^ d, 0x6ED9_EBA1)
            case 40..<60: (f, k) = ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC)
            default: (f, k) = (b ^ c ^ d, 0xCA62_C1D6)
            }
            let t = (a << 5 | a >> 27) &+ f &+ e &+ k &+ w[i]
            e = d
            d = c
            c = b << 30 | b >> 2
            b = a
            a = t
        }
        self.state = (self.state.0 &+ a, self.state.1 &+ b, self.state.2 &+ c, self.state.3 &+ d, self.state.4 &+ e)
    }
}

/// A name-based UUID, RFC 4122 §4.3 version 5 (SHA-1): the same namespace and name always give the
/// same UUID, so an exported reading keeps its `urn:uuid:` across exports.
public struct NameUUID: Hashable, Sendable, CustomStringConvertible {
    /// The 16 bytes, network order.
    public let bytes: [UInt8]

    /// RFC 4122 Appendix C `NameSpace_URL` (6ba7b811-9dad-11d1-80b4-00c04fd430c8).
    public static let urlNamespace = NameUUID(
        bytes: [0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8])

    init(bytes: [UInt8]) { self.bytes = bytes }

    /// The version-5 UUID of `name` (UTF-8) in `namespace`.
    public init(namespace: NameUUID, name: String) {
        var digest = Array(SHA1.digest(namespace.bytes + Array(name.utf8)).prefix(16))
        digest[6] = (digest[6] & 0x0F) | 0x50  // version 5
        digest[8] = (digest[8] & 0x3F) | 0x80  // RFC 4122 variant
        self.bytes = digest
    }

    /// `xxxxxxxx-xxxx-5xxx-yxxx-xxxxxxxxxxxx`, lowercase.
    public var description: String {
        let digits = Array("0123456789abcdef")
        var out = ""
        for (index, byte) in self.bytes.enumerated() {
            if [4, 6, 8, 10].contains(index) { out += "-" }
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return out
    }

    /// `urn:uuid:` + the UUID (RFC 4122 §3).
    public var urn: String { "urn:uuid:" + self.description }
}
