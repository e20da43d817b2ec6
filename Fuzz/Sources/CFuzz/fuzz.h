// libFuzzer's driver entry point, declared for Swift. The definition comes from the libFuzzer runtime
// that `-sanitize=fuzzer` links in, so this module builds only with that flag (hence the nested package).
//
// SwiftPM links executables with `--defsym main=<module>_main`, so libFuzzer's own `main` never runs and
// a target that only defines `LLVMFuzzerTestOneInput` would silently exit 0. Each fuzz executable's
// main.swift calls this driver instead.
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*UserCb)(const uint8_t *Data, size_t Size));

// LeakSanitizer's interface (the fuzz build always links ASan). Allocations made between these calls on
// the calling thread are never reported; see fuzz-varlink/main.swift for why it needs them.
void __lsan_disable(void);
void __lsan_enable(void);
