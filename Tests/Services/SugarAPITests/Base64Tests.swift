import SugarWire
import Testing

/// `Backup` and `RestoreUpload` carry a database's bytes as base64 (RFC 4648 §4).
@Suite struct Base64Tests {
    @Test func rfc4648Vectors() {
        let vectors = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors {
            #expect(Base64.encode(Array(plain.utf8)) == encoded)
            #expect(Base64.decode(encoded) == Array(plain.utf8))
        }
    }

    @Test func everyLengthAndByteRoundTrips() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<300 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(Base64.decode(Base64.encode(bytes)) == bytes, "length \(length)")
        }
        let all = Array(0...255).map(UInt8.init)
        #expect(Base64.decode(Base64.encode(all)) == all)
        #expect(Base64.decode(Base64.encode(all[3...])) == Array(all[3...]))
    }

    @Test func malformedTextIsRefused() {
        for bad in ["Zg=", "Zm9", "Z===", "Zm9v\n", "Zm 9v", "Zm9v!A==", "====", "Zg==Zg=="] {
            #expect(Base64.decode(bad) == nil, "\(bad)")
        }
    }
}
