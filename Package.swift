// swift-tools-version: 6.0
// sugard: a Linux daemon that turns Bluetooth LE blood-glucose meters into a dependable data source.
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "sugard",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "JSON", targets: ["JSON"]),
        .library(name: "HealthDataSync", targets: ["HealthDataSync"]),
    ],
    targets: [
        // C libraries, one importer each (see README "Architecture").
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CDBus", pkgConfig: "dbus-1", providers: [.apt(["libdbus-1-dev"])]),
        .systemLibrary(name: "CBlueZ", pkgConfig: "bluez", providers: [.apt(["libbluetooth-dev"])]),

        // Pure Swift (standard library only).
        .target(name: "JSON", swiftSettings: strict),
        .target(name: "HealthDataSync", dependencies: ["JSON"], swiftSettings: strict),

        // View-model fan-out benchmark (wired into sugar-bench by the integrator; Glibc for VmHWM only).
        .target(name: "ViewModelBenchmarks", dependencies: ["HealthDataSync", "JSON"], swiftSettings: strict),
        .executableTarget(name: "fanout-bench", dependencies: ["ViewModelBenchmarks", "HealthDataSync", "JSON"], swiftSettings: strict),

        .testTarget(name: "JSONTests", dependencies: ["JSON"], swiftSettings: strict),
        .testTarget(name: "HealthDataSyncTests", dependencies: ["HealthDataSync"], swiftSettings: strict),
    ]
)
