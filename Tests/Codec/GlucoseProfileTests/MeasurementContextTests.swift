import GlucoseProfile
import JSON
import SugarWire
import Testing

@Suite struct MeasurementContextTests {
    @Test func decodesEveryField() throws {
        let c = try MeasurementContext(bytes: SpecExamples.fullContext)
        #expect(c.flags == 0xFF)
        #expect(c.sequenceNumber == 1)
        #expect(c.extendedFlags == 0)
        #expect(c.carbohydrate?.id == .breakfast)
        #expect(c.carbohydrate?.kilograms.value == 0.114)  // JDRF: 0xD072 = 114 g
        #expect(c.meal == .postprandial)
        // 0x12: tester is the LOW nibble (2, health-care professional), health the high one (1, minor issues).
        #expect(c.tester == .healthCareProfessional)
        #expect(c.health == .minorHealthIssues)
        #expect(c.exercise == .init(durationSeconds: 60, intensityPercent: 50))
        #expect(c.medication?.id == .rapidActingInsulin)
        #expect(c.medication?.amount.value == 9.3e-5)  // JDRF: 0xA05D = 93 mg
        #expect(c.medication?.unit == .liters)
        #expect(c.hba1cPercent?.value == 4.2)
    }

    @Test func medicationInKilograms() throws {
        let c = try MeasurementContext(bytes: SpecExamples.medicationKilograms)
        #expect(c.medication?.unit == .kilograms)
        #expect(c.json["medication"]?["unit"]?.stringValue == "kg")
        #expect(c.json["medication"]?["value"]?.doubleValue == 9.3e-5)
        #expect(c.carbohydrate == nil && c.meal == nil && c.tester == nil && c.hba1cPercent == nil)
    }

    @Test func asymmetricTesterHealthNibbles() throws {
        let c = try MeasurementContext(bytes: hex("04 0300 f8"))
        #expect(c.tester?.code == 8)
        #expect(c.tester?.name == "reserved")
        #expect(c.health?.code == 15)
        #expect(c.health?.name == "notAvailable")
        let d = try MeasurementContext(bytes: hex("04 0300 5f"))
        #expect(d.tester == .notAvailable && d.health == .noHealthIssues)
    }

    @Test func mealSixIsTheKetoneMarkerNotAnError() throws {
        let c = try MeasurementContext(bytes: hex("02 0900 06"))
        #expect(c.meal?.code == 6)
        #expect(c.meal?.name == "reserved")
        #expect(c.isKetoneMarker)
        #expect(c.json["meal"] == ["code": 6, "name": "reserved"])
    }

    @Test func everyPrefixFailsAtTheRightOffset() {
        let packet = SpecExamples.fullContext
        let groups: [(start: Int, size: Int, field: String)] = [
            (0, 1, "flags"), (1, 2, "sequenceNumber"), (3, 1, "extendedFlags"), (4, 3, "carbohydrate"), (7, 1, "meal"),
            (8, 1, "testerHealth"), (9, 3, "exercise"), (12, 3, "medication"), (15, 2, "hba1c"),
        ]
        for length in 0..<packet.count {
            let group = groups.first { $0.start <= length && length < $0.start + $0.size }!
            let expected = GlucoseProfileError(
                offset: group.start, field: group.field, reason: .truncated(needed: group.size, available: length - group.start))
            #expect(throws: expected, "prefix of \(length) bytes") { try MeasurementContext(bytes: Array(packet.prefix(length))) }
        }
        #expect(throws: GlucoseProfileError(offset: 17, field: "context", reason: .trailingBytes(count: 1))) {
            try MeasurementContext(bytes: packet + [0])
        }
    }

    @Test func encodeThenDecodeRoundTrips() throws {
        let records = [
            MeasurementContext(sequenceNumber: 0),
            MeasurementContext(
                sequenceNumber: 513, extendedFlags: 0x80,
                carbohydrate: .init(id: .brunch, kilograms: SFloat(rawValue: 0xD072)), meal: .bedtime,
                tester: .labTest, health: .underStress, exercise: .init(durationSeconds: 65535, intensityPercent: 100),
                medication: .init(id: .premixedInsulin, amount: SFloat(rawValue: 0xD00A), unit: .liters),
                hba1cPercent: SFloat(rawValue: 0xF03A)),
            MeasurementContext(sequenceNumber: 2, health: .duringMenses),
        ]
        for record in records {
            let bytes = record.encoded()
            #expect(try MeasurementContext(bytes: bytes) == record)
        }
        for packet in [SpecExamples.fullContext, SpecExamples.medicationKilograms, hex("20 0100"), hex("04 0300 f8")] {
            #expect(try MeasurementContext(bytes: packet).encoded() == packet)
        }
    }

    @Test func jsonHasExactlyTheContractKeysInOrder() throws {
        let json = try MeasurementContext(bytes: SpecExamples.fullContext).json
        #expect(json.objectValue?.keys == [
            "characteristic", "flags", "sequenceNumber", "extendedFlags", "carbohydrate", "meal", "tester", "health",
            "exercise", "medication", "hba1cPercent",
        ])
        #expect(json["characteristic"]?.stringValue == "2a34")
        #expect(json["carbohydrate"] == ["id": ["code": 1, "name": "breakfast"], "kg": 0.114])
        #expect(json["exercise"] == ["durationSeconds": 60, "intensityPercent": 50])
        #expect(json["medication"]?.objectValue?.keys == ["id", "value", "unit"])
        #expect(json["medication"]?["unit"]?.stringValue == "L")
        #expect(json["tester"] == ["code": 2, "name": "healthCareProfessional"])
        #expect(json["health"] == ["code": 1, "name": "minorHealthIssues"])
        let empty = try MeasurementContext(bytes: hex("00 0100")).json
        for key in ["extendedFlags", "carbohydrate", "meal", "tester", "health", "exercise", "medication", "hba1cPercent"] {
            #expect(empty[key]?.isNull == true, "\(key) should be null")
        }
    }
}
