// libFuzzer's driver entry point, declared for Swift. The definition comes from the libFuzzer runtime
// that `-sanitize=fuzzer` links in, so this module builds only with that flag (hence the nested package).
//
// SwiftPM links executables with `--defsym main=<module>_main`, so libFuzzer's own `main` never runs and
// a target that only defines `LLVMFuzzerTestOneInput` would silently exit 0. Each fuzz executable's
// main.swift calls this driver instead.
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*UserCb)(const uint8_t *Data, size_t Size));
