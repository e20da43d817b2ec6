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
        .library(name: "PacketCapture", targets: ["PacketCapture"]),
    ],
    targets: [
        // C libraries, one importer each (see README "Architecture").
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CDBus", pkgConfig: "dbus-1", providers: [.apt(["libdbus-1-dev"])]),
        .systemLibrary(name: "CBlueZ", pkgConfig: "bluez", providers: [.apt(["libbluetooth-dev"])]),

        // Pure Swift (standard library only).
        .target(name: "JSON", swiftSettings: strict),

        // btsnoop / HCI / L2CAP / ATT / GATT capture reading (Glibc for streaming file I/O).
        .target(name: "PacketCapture", dependencies: ["JSON"], swiftSettings: strict),

        .executableTarget(name: "capture-bench", dependencies: ["PacketCapture"], swiftSettings: strict),

        .testTarget(name: "JSONTests", dependencies: ["JSON"], swiftSettings: strict),
        .testTarget(name: "PacketCaptureTests", dependencies: ["PacketCapture"], swiftSettings: strict),
    ]
)
