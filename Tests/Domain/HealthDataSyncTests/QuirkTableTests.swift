import HealthDataSync
import Testing

@Suite struct QuirkTableTests {
    func profile(_ manufacturer: String?, _ model: String? = nil, name: String? = nil) -> MeterProfile {
        QuirkTable.builtIn.profile(for: MeterIdentity(id: MeterID("AA:BB:CC:DD:EE:FF"), name: name, manufacturer: manufacturer, model: model))
    }

    @Test func everyRowHasASourceAndEveryQuirkIsDocumented() {
        for row in QuirkTable.builtIn.rows {
            #expect(!row.source.isEmpty, "\(row.name)")
            #expect(!row.quirks.isEmpty, "\(row.name)")
            for q in row.quirks { #expect(!q.source.isEmpty && !q.handling.isEmpty, "\(q.id)") }
        }
        for q in QuirkTable.general { #expect(!q.source.isEmpty) }
        // Every quirk name is used somewhere in the table.
        let used = Set(QuirkTable.builtIn.rows.flatMap { $0.quirks.map(\.id) } + QuirkTable.general.map(\.id))
        #expect(used == Set(QuirkID.allCases))
    }

    @Test func rocheMatchesByManufacturerPrefix() {
        let p = self.profile("Roche", "Accu-Chek Guide")
        #expect(p.name == "Roche Accu-Chek")
        #expect(p.has(.dateTimeClock) && p.has(.hiLo) && p.has(.controlSolution))
        #expect(p.timeOffsetPolicy == .apply)
        #expect(p.requestPolicy == .fromHighWater)
    }

    @Test func iSensIsMatchedCaseInsensitivelyAndIgnoresTimeOffset() {
        let p = self.profile("i-SENS, Inc.", "CareSens N Premier")
        #expect(p.name == "i-SENS CareSens")
        #expect(p.has(.monthThirteen) && p.has(.ketoneMeal6))
        #expect(p.timeOffsetPolicy == .ignore)
        #expect(self.profile("ISENS").name == "i-SENS CareSens")
        #expect(self.profile(nil, name: "CareSens 0123").name == "i-SENS CareSens")
    }

    @Test func reliOnNeedsItsModelToBeISens() {
        #expect(self.profile("ReliOn", "2395").name == "ReliOn (i-SENS OEM)")
        #expect(self.profile("ReliOn", "Platinum").name == "Standard GLS meter")
    }

    @Test func foraMatchesOnItsAdvertisedNameWhenDISIsAPlaceholder() {
        let p = self.profile("Manufacturer name", "Model Number", name: "FORA TNG VOICE")
        #expect(p.name == "Fora TN'G Voice")
        #expect(p.has(.bogus2037) && p.has(.fullDownload))
        #expect(p.requestPolicy == .always)
    }

    @Test func taiDocNeedsItsModel() {
        let p = self.profile("TaiDoc", "DM30b")
        #expect(p.has(.reversedSequence) && p.requestPolicy == .always)
        #expect(self.profile("TaiDoc", "TD-3261").name == "Standard GLS meter")
    }

    @Test func unknownMetersGetOnlyTheGeneralRules() {
        let p = self.profile("Ascensia Diabetes Care", "Contour Next One")
        #expect(p.name == "Standard GLS meter")
        #expect(p.quirks.map(\.id) == [.controlSolution, .hiLo, .repeatedRecord])
        #expect(self.profile(nil).name == "Standard GLS meter")
        #expect(self.profile("").name == "Standard GLS meter")
    }

    /// The named capabilities each built-in row decides from its quirks (what the sync machine,
    /// the reading builder and the time resolver ask).
    @Test func eachRowsCapabilitiesAreDecidedFromItsQuirks() {
        let standard = self.profile("Ascensia Diabetes Care", "Contour Next One")
        #expect(standard.sequenceOrder == .oldestFirst && standard.clock == .standard && !standard.downloadsEverything)
        #expect(!standard.monthThirteenIsNextJanuary && !standard.ketoneInMeal6 && !standard.bogus2037WhenFull)
        #expect(self.profile("Roche", "Accu-Chek Guide").clock == .dateTimeFirst)
        for p in [self.profile("i-SENS, Inc.", "CareSens N Premier"), self.profile("ReliOn", "2395")] {
            #expect(p.clock == .vendorISENS && p.monthThirteenIsNextJanuary && p.ketoneInMeal6, "\(p.name)")
            #expect(p.sequenceOrder == .oldestFirst && !p.downloadsEverything, "\(p.name)")
        }
        let fora = self.profile("Fora", name: "FORA TNG VOICE")
        #expect(fora.downloadsEverything && fora.bogus2037WhenFull && fora.sequenceOrder == .oldestFirst)
        let taidoc = self.profile("TaiDoc", "DM30b")
        #expect(taidoc.sequenceOrder == .newestFirst && taidoc.downloadsEverything)
        let verio = QuirkTable.builtIn.profile(for: MeterIdentity(id: MeterID("AA:BB:CC:DD:EE:FF")), procedure: .verio)
        #expect(verio.procedure == .verio && verio.clock == .standard && verio.sequenceOrder == .oldestFirst)
    }

    /// A row changed after it was built (a quirk added) decides its capabilities again.
    @Test func capabilitiesFollowAChangedRow() {
        var row = QuirkTable.standard
        #expect(row.sequenceOrder == .oldestFirst)
        row.quirks.append(VendorQuirk(id: .reversedSequence, handling: "test", source: "test"))
        #expect(row.sequenceOrder == .newestFirst)
        row.requestPolicy = .always
        #expect(row.downloadsEverything)
    }
}
