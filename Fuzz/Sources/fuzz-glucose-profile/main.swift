// fuzz-glucose-profile: libFuzzer driver for FuzzTargets.glucoseProfile (see Fuzz/Package.swift and scripts/fuzz).
import CFuzz
import FuzzTargets
import Glibc

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
let status = LLVMFuzzerRunDriver(&argc, &argv) { data, size in
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    do {
        try FuzzTargets.glucoseProfile(bytes)
    } catch {
        // A broken property is a finding: trap so libFuzzer saves the input.
        fatalError("\(error)")
    }
    return 0
}
exit(status)
