// fuzz-varlink: libFuzzer driver for FuzzTargets.varlink (see Fuzz/Package.swift and scripts/fuzz).
import CFuzz
import FuzzTargets
import Glibc

// Start the shared Varlink server before fuzzing, with leak reports off for what that allocates. The server
// and its parsed interface descriptions live until exit, and Swift keeps a pointer to an `indirect enum`
// case's box with the case tag in the pointer's spare bits, which LeakSanitizer does not recognise, so
// libFuzzer's per-input leak check would blame those live boxes on whichever input ran first. Descriptions
// parsed per input and then released are still checked (and do not leak).
__lsan_disable()
FuzzTargets.prepareVarlink()
__lsan_enable()

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
let status = LLVMFuzzerRunDriver(&argc, &argv) { data, size in
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    do {
        try FuzzTargets.varlink(bytes)
    } catch {
        // A broken property is a finding: trap so libFuzzer saves the input.
        fatalError("\(error)")
    }
    return 0
}
exit(status)
