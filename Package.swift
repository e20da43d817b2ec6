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
        .library(name: "DBus", targets: ["DBus"]),
    ],
    targets: [
        // C libraries, one importer each (see README "Architecture").
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CDBus", pkgConfig: "dbus-1", providers: [.apt(["libdbus-1-dev"])]),
        .systemLibrary(name: "CBlueZ", pkgConfig: "bluez", providers: [.apt(["libbluetooth-dev"])]),

        // Pure Swift (standard library only).
        .target(name: "JSON", swiftSettings: strict),

        // libdbus wrapper: the only importer of CDBus (Glibc allowed, no Foundation).
        .target(name: "DBus", dependencies: ["CDBus"], swiftSettings: strict),

        .testTarget(name: "JSONTests", dependencies: ["JSON"], swiftSettings: strict),
        .testTarget(name: "DBusTests", dependencies: ["DBus"], swiftSettings: strict),
    ]
)
