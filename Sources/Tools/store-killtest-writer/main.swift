// Crash-test writer: commits every batch of a synthetic ingest into a database file, from the
// first batch on (already stored records are dropped as duplicates), printing the number of
// batches committed after each commit, then "done".
// The GlucoseStore crash test SIGKILLs it at random points and runs it again.
//
//   store-killtest-writer DB READINGS METERS BATCH_SIZE SEED INTERRUPTED_EVERY
import GlucoseStore
import GlucoseStoreFixtures
import HealthDataSync

#if canImport(Glibc)
import Glibc
#endif

func printError(_ text: String) {
    var text = text
    text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 6, let readings = Int(arguments[1]), let meters = Int(arguments[2]),
    let batchSize = Int(arguments[3]), let seed = UInt64(arguments[4]), let interruptedEvery = Int(arguments[5])
else {
    printError("usage: store-killtest-writer DB READINGS METERS BATCH_SIZE SEED INTERRUPTED_EVERY\n")
    exit(64)
}
let plan = SyntheticIngest(
    readings: readings, meters: meters, batchSize: batchSize, interruptedEvery: interruptedEvery, seed: seed)
do {
    let store = try SQLiteReadingStore(path: arguments[0], options: StoreOptions(quickCheckOnOpen: false))
    var committed = 0
    for batch in plan.batches() {
        _ = try await store.commit(batch)
        committed += 1
        // Unbuffered progress line: the crash test picks its kill points from these.
        var line = "\(committed)\n"
        line.withUTF8 { _ = write(1, $0.baseAddress, $0.count) }
    }
    await store.close()
    print("done \(committed)")
} catch {
    printError("store-killtest-writer: \(error)\n")
    exit(1)
}
