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
        .library(name: "Varlink", targets: ["Varlink"]),
    ],
    targets: [
        // C libraries, one importer each (see README "Architecture").
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CDBus", pkgConfig: "dbus-1", providers: [.apt(["libdbus-1-dev"])]),
        .systemLibrary(name: "CBlueZ", pkgConfig: "bluez", providers: [.apt(["libbluetooth-dev"])]),
        .systemLibrary(name: "CLinuxIO"),  // epoll and eventfd headers (glibc, nothing to link)

        // Pure Swift (standard library only).
        .target(name: "JSON", swiftSettings: strict),

        // Generic Varlink over Unix sockets (stdlib, Glibc, Synchronization, JSON).
        .target(name: "Varlink", dependencies: ["JSON", "CLinuxIO"], swiftSettings: strict),

        .testTarget(name: "VarlinkTests", dependencies: ["Varlink", "JSON", "CLinuxIO"], swiftSettings: strict),
        .testTarget(name: "JSONTests", dependencies: ["JSON"], swiftSettings: strict),
    ]
)
