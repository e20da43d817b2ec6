// fuzz-json: libFuzzer driver for FuzzTargets.json (see Fuzz/Package.swift and scripts/fuzz).
import CFuzz
import FuzzTargets
import Glibc

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
let status = LLVMFuzzerRunDriver(&argc, &argv) { data, size in
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    do {
        try FuzzTargets.json(bytes)
    } catch {
        // A broken property is a finding: trap so libFuzzer saves the input.
        fatalError("\(error)")
    }
    return 0
}
exit(status)
