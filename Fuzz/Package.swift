// swift-tools-version: 6.0
// libFuzzer targets for sugard. A separate package because the fuzz executables link only with
// `-sanitize=fuzzer` (LLVMFuzzerRunDriver lives in the libFuzzer runtime), and the main package's plain
// `swift build` builds every product. Build and run with scripts/fuzz; the per-input logic lives in the
// main package's FuzzTargets library so FuzzRegressionTests can replay findings.
import PackageDescription

let targets = ["glucose-profile", "json", "config", "varlink", "btsnoop"]

let package = Package(
    name: "sugard-fuzz",
    platforms: [.macOS(.v15)],
    products: targets.map { .executable(name: "fuzz-\($0)", targets: ["fuzz-\($0)"]) },
    dependencies: [.package(name: "sugard", path: "..")],
    targets: [
        // Header-only: declares LLVMFuzzerRunDriver.
        .systemLibrary(name: "CFuzz")
    ] + targets.map {
        .executableTarget(
            name: "fuzz-\($0)",
            dependencies: ["CFuzz", .product(name: "FuzzTargets", package: "sugard")])
    }
)
