import GlucoseProfile
import JSON
import SugarWire
import Testing

@Suite struct GlucoseFeatureTests {
    @Test func decodesBitsAndNames() throws {
        // NCL/JDRF-style: 0x0403 = low battery, sensor malfunction, multiple bond.
        let feature = try GlucoseFeature(bytes: hex("0304"))
        #expect(feature == [.lowBatteryDetection, .sensorMalfunctionDetection, .multipleBond])
        #expect(feature.names == ["lowBatteryDetection", "sensorMalfunctionDetection", "multipleBond"])
        #expect(feature.json == ["characteristic": "2a51", "bits": 0x0403, "names": ["lowBatteryDetection", "sensorMalfunctionDetection", "multipleBond"]])
        #expect(try GlucoseFeature(bytes: hex("ff07")).names.count == 11)
        #expect(try GlucoseFeature(bytes: hex("0080")).names == ["reserved15"])
    }

    @Test func requiresExactlyTwoBytes() {
        #expect(throws: GlucoseProfileError(offset: 0, field: "feature", reason: .truncated(needed: 2, available: 0))) {
            try GlucoseFeature(bytes: [])
        }
        #expect(throws: GlucoseProfileError(offset: 0, field: "feature", reason: .truncated(needed: 2, available: 1))) {
            try GlucoseFeature(bytes: [0x01])
        }
        #expect(throws: GlucoseProfileError(offset: 2, field: "feature", reason: .trailingBytes(count: 1))) {
            try GlucoseFeature(bytes: [0x01, 0x02, 0x03])
        }
    }

    @Test func roundTrips() throws {
        for raw: UInt16 in [0, 0x0001, 0x0400, 0x07FF, 0xFFFF, 0x8421] {
            let feature = GlucoseFeature(rawValue: raw)
            #expect(try GlucoseFeature(bytes: feature.encoded()) == feature)
        }
    }
}
