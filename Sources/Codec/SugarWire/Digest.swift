/// SHA-1 (FIPS 180-4) in pure Swift: the name-based UUIDs of the FHIR export (RFC 4122 version 5)
/// and Nightscout's `api-secret` header (the hex digest of the secret). SHA-1 is used here only
/// where those formats prescribe it, never to protect anything.
public struct SHA1: Sendable {
    /// The five working words H0–H4, starting at the standard's initial values.
    private var state: (UInt32, UInt32, UInt32, UInt32, UInt32) = (0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0)
    /// The bytes not yet compressed, and the message length.
    private var blocks = DigestBlocks()

    /// An empty message.
    public init() {}

    /// Adds bytes to the message.
    public mutating func update<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        for byte in bytes { if let block = self.blocks.append(byte) { self.compress(block) } }
    }

    /// The 20-byte digest of everything added.
    public func finalize() -> [UInt8] {
        var copy = self
        for block in self.blocks.finalBlocks() { copy.compress(block) }
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

    /// Processes one 64-byte block (FIPS 180-4 §6.1.2).
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

    /// A UUID of exactly these 16 bytes.
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

/// SHA-256 (FIPS 180-4) in pure Swift, and HMAC-SHA256 (RFC 2104): the signature header of the
/// forwarder's webhooks (`X-Sugard-Signature: sha256=<hex>`), which receivers check with the
/// shared secret.
public struct SHA256: Sendable {
    /// The 64 round constants (FIPS 180-4 §4.2.2).
    private static let k: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]
    /// The eight working words, starting at the standard's initial values.
    private var state: [UInt32] = [
        0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19,
    ]
    /// The bytes not yet compressed, and the message length.
    private var blocks = DigestBlocks()

    /// An empty message.
    public init() {}

    /// Adds bytes to the message.
    public mutating func update<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        for byte in bytes { if let block = self.blocks.append(byte) { self.compress(block) } }
    }

    /// The 32-byte digest of everything added.
    public func finalize() -> [UInt8] {
        var copy = self
        for block in self.blocks.finalBlocks() { copy.compress(block) }
        return copy.state.flatMap { word in (0..<4).map { UInt8(truncatingIfNeeded: word >> UInt32(24 - 8 * $0)) } }
    }

    /// The 32-byte digest of `bytes`.
    public static func digest<Bytes: Sequence>(_ bytes: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        var hash = SHA256()
        hash.update(bytes)
        return hash.finalize()
    }

    /// HMAC-SHA256 of `message` with `key`.
    public static func hmac(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var block = key.count > 64 ? Self.digest(key) : key
        block += [UInt8](repeating: 0, count: 64 - block.count)
        var inner = SHA256()
        inner.update(block.map { $0 ^ 0x36 })
        inner.update(message)
        var outer = SHA256()
        outer.update(block.map { $0 ^ 0x5c })
        outer.update(inner.finalize())
        return outer.finalize()
    }

    /// Lower-case hex of `bytes`.
    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef")
        return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] })
    }

    /// Processes one 64-byte block (FIPS 180-4 §6.2.2).
    private mutating func compress(_ block: [UInt8]) {
        var w = [UInt32](repeating: 0, count: 64)
        for i in 0..<16 {
            w[i] = UInt32(block[4 * i]) << 24 | UInt32(block[4 * i + 1]) << 16 | UInt32(block[4 * i + 2]) << 8 | UInt32(block[4 * i + 3])
        }
        func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { x >> n | x << (32 - n) }
        for i in 16..<64 {
            let s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3)
            let s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10)
            w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
        }
        var (a, b, c, d, e, f, g, h) = (state[0], state[1], state[2], state[3], state[4], state[5], state[6], state[7])
        for i in 0..<64 {
            let s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
            let ch = (e & f) ^ (~e & g)
            let t1 = h &+ s1 &+ ch &+ Self.k[i] &+ w[i]
            let s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
            let maj = (a & b) ^ (a & c) ^ (b & c)
            let t2 = s0 &+ maj
            (h, g, f, e, d, c, b, a) = (g, f, e, d &+ t1, c, b, a, t1 &+ t2)
        }
        for (i, v) in [a, b, c, d, e, f, g, h].enumerated() { self.state[i] = self.state[i] &+ v }
    }
}

/// The 64-byte blocks SHA-1 and SHA-256 share (FIPS 180-4, 5.1.1 and 5.2.1): the message cut into
/// blocks, then padded with 0x80, zeros and its length in bits (big-endian, 64 bits).
struct DigestBlocks: Sendable {
    /// Bytes of the block being filled.
    private var buffer: [UInt8] = []
    /// Bytes added in all.
    private var length: UInt64 = 0

    /// Adds one byte; the block it completes, if it does.
    mutating func append(_ byte: UInt8) -> [UInt8]? {
        self.buffer.append(byte)
        self.length &+= 1
        guard self.buffer.count == 64 else { return nil }
        defer { self.buffer.removeAll(keepingCapacity: true) }
        return self.buffer
    }

    /// The last one or two blocks: what is left, padded.
    func finalBlocks() -> [[UInt8]] {
        let bitLength = self.length &* 8
        var message = self.buffer + [0x80]
        while message.count % 64 != 56 { message.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) { message.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
        return stride(from: 0, to: message.count, by: 64).map { Array(message[$0..<$0 + 64]) }
    }
}
