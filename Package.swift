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
        .library(name: "GlucoseProfile", targets: ["GlucoseProfile"]),
        .library(name: "PacketCapture", targets: ["PacketCapture"]),
        .library(name: "HealthDataSync", targets: ["HealthDataSync"]),
        .library(name: "GlucoseReport", targets: ["GlucoseReport"]),
        .library(name: "GlucoseStore", targets: ["GlucoseStore"]),
        .library(name: "ReplayTransport", targets: ["ReplayTransport"]),
        .library(name: "Varlink", targets: ["Varlink"]),
        .library(name: "DBus", targets: ["DBus"]),
        .library(name: "BlueZTransport", targets: ["BlueZTransport"]),
        .library(name: "SugarAPI", targets: ["SugarAPI"]),
        .library(name: "ProcessKit", targets: ["ProcessKit"]),
        .library(name: "SugarWire", targets: ["SugarWire"]),
        .library(name: "SugarDaemon", targets: ["SugarDaemon"]),
        .library(name: "HTTPClient", targets: ["HTTPClient"]),
        .library(name: "NightscoutSink", targets: ["NightscoutSink"]),
        .executable(name: "sugard", targets: ["sugard"]),
        // The per-input logic of the fuzz targets, for the nested fuzz package in Fuzz/.
        .library(name: "FuzzTargets", targets: ["FuzzTargets"]),
        .executable(name: "sugarctl", targets: ["sugarctl"]),
        .executable(name: "sugar-bench", targets: ["sugar-bench"]),
        .library(name: "MQTT", targets: ["MQTT"]),
        .library(name: "SugarForward", targets: ["SugarForward"]),
        .executable(name: "sugard-forward", targets: ["sugard-forward"]),
        .library(name: "HubStore", targets: ["HubStore"]),
        .library(name: "HTTPServer", targets: ["HTTPServer"]),
        .library(name: "SugarHub", targets: ["SugarHub"]),
        .executable(name: "sugard-hub", targets: ["sugard-hub"]),
    ],
    targets: [
        // C libraries, one importer each (see README "Architecture").
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CDBus", pkgConfig: "dbus-1", providers: [.apt(["libdbus-1-dev"])]),
        .systemLibrary(name: "CBlueZ", pkgConfig: "bluez", providers: [.apt(["libbluetooth-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CMosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),
        .systemLibrary(name: "CPostgres", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CLinuxIO"),  // epoll and eventfd headers (glibc, nothing to link)
        // Counts malloc calls for sugar-bench (interposes the allocator; linked into sugar-bench only).
        .target(name: "CMallocCounter"),
        // Plain C yardsticks that sugar-bench runs beside the Swift code in the same process (sugar-bench only).
        // ingest.c includes sqlite3.h and links sqlite3 itself: no Swift module imports CSQLite but GlucoseStore.
        .target(name: "CBenchYardsticks", linkerSettings: [.linkedLibrary("sqlite3")]),

        // A pthread-backed lock ThreadSanitizer can see (Synchronization.Mutex is invisible to it on Linux).
        .target(name: "Locking", swiftSettings: strict),
        // EINTR retry, whole writes, whole-file reads and the wall clock (Glibc only).
        .target(name: "SystemIO", swiftSettings: strict),

        // What every program shares about its process: the logger and its stderr sink, signals, config
        // files read through declared key tables, sd_notify (sugard, sugard-forward, sugard-hub).
        .target(name: "ProcessKit", dependencies: ["Locking", "SystemIO"], swiftSettings: strict),

        // Pure Swift (standard library only).
        .target(name: "JSON", swiftSettings: strict),
        .target(name: "GlucoseProfile", swiftSettings: strict),
        .target(name: "HealthDataSync", dependencies: ["Locking", "GlucoseProfile", "ProcessKit"], swiftSettings: strict),
        // The glucose report's figures and its self-contained HTML page (sugarctl report).
        .target(name: "GlucoseReport", dependencies: ["JSON", "GlucoseProfile", "SugarWire"], swiftSettings: strict),

        // btsnoop / HCI / L2CAP / ATT / GATT capture reading (Glibc for streaming file I/O).
        .target(name: "PacketCapture", dependencies: ["GlucoseProfile", "JSON", "SugarWire", "SystemIO"], swiftSettings: strict),
        // Meter simulator and the MeterTransport that plays captures or simulators as live meters.
        .target(
            name: "ReplayTransport", dependencies: ["Locking", "PacketCapture", "HealthDataSync", "GlucoseProfile", "JSON", "SystemIO"],
            swiftSettings: strict),
        // SQLite storage: the only importer of CSQLite.
        .target(name: "GlucoseStore", dependencies: ["HealthDataSync", "GlucoseProfile", "CSQLite", "Locking", "SystemIO"], swiftSettings: strict),
        // Synthetic ingests and the ingest benchmark: tests, the crash test's writer and sugar-bench only.
        .target(name: "GlucoseStoreFixtures", dependencies: ["GlucoseStore", "HealthDataSync", "GlucoseProfile"], swiftSettings: strict),
        // Generic Varlink over Unix sockets (stdlib, Glibc, Synchronization, JSON).
        .target(name: "Varlink", dependencies: ["Locking", "JSON", "CLinuxIO", "SystemIO"], swiftSettings: strict),
        // The io.sugard.HealthDataSync value types and their JSON form (sugarctl reads replies through them).
        .target(name: "SugarWire", dependencies: ["JSON", "GlucoseProfile"], swiftSettings: strict),

        // libdbus wrapper: the only importer of CDBus (Glibc allowed, no Foundation).
        .target(name: "DBus", dependencies: ["Locking", "CDBus", "SystemIO"], swiftSettings: strict),
        // libbluetooth at work: the only importer of CBlueZ (HCI socket probe, adapters, monitor channel).
        .target(name: "BluetoothHost", dependencies: ["CBlueZ", "PacketCapture", "SystemIO"], swiftSettings: strict),
        // MeterTransport over BlueZ: object manager mirror, GATT, pairing agent, bluetoothd restarts.
        .target(name: "BlueZTransport", dependencies: ["Locking", "DBus", "HealthDataSync", "GlucoseProfile", "ProcessKit"], swiftSettings: strict),

        // The io.sugard.HealthDataSync interface: its description, types, handlers and exports.
        .target(
            name: "SugarAPI", dependencies: ["Locking", "GlucoseProfile", "HealthDataSync", "JSON", "Varlink", "SugarWire", "SystemIO", "ProcessKit"],
            exclude: ["io.sugard.HealthDataSync.varlink"], swiftSettings: strict),

        // sugard's settings: the config keys, the file and the command line (no daemon parts).
        .target(name: "SugarConfig", dependencies: ["HealthDataSync", "SugarAPI", "SugarWire", "GlucoseProfile", "SystemIO", "ProcessKit"], swiftSettings: strict),
        // Composition: config, services, signals, sd_notify, logging.
        .target(
            name: "SugarDaemon",
            dependencies: ["SugarConfig", "Locking", 
                "HealthDataSync", "JSON", "SugarAPI", "GlucoseStore", "Varlink", "ReplayTransport", "BlueZTransport",
                "GlucoseProfile", "PacketCapture",
                "SystemIO", "ProcessKit",
            ], swiftSettings: strict),

        // HTTP(S) through libcurl: the only importer of CCurl.
        .target(name: "HTTPClient", dependencies: ["Locking", "CCurl"], swiftSettings: strict),
        // Readings to Nightscout (entries, BG Check treatments), one site per person, durable cursor.
        .target(
            name: "NightscoutSink", dependencies: ["Locking", "JSON", "ProcessKit", "SugarWire", "GlucoseProfile", "HTTPClient", "SystemIO"],
            swiftSettings: strict),
        // MQTT v5 over libmosquitto: the only importer of CMosquitto.
        .target(name: "MQTT", dependencies: ["Locking", "CMosquitto", "SystemIO"], swiftSettings: strict),
        // sugard-forward: every stored reading (FollowReadings) to an MQTT broker and Home Assistant.
        .target(
            name: "SugarForward", dependencies: ["Locking", "MQTT", "JSON", "Varlink", "ProcessKit", "SugarWire", "GlucoseProfile", "NightscoutSink", "HTTPClient", "SystemIO"],
            swiftSettings: strict),
        .executableTarget(name: "sugard-forward", dependencies: ["SugarForward", "SystemIO"], swiftSettings: strict),

        // sugard-hub's PostgreSQL store through libpq: the only importer of CPostgres.
        .target(name: "HubStore", dependencies: ["Locking", "CPostgres"], swiftSettings: strict),
        // An HTTP server through libmicrohttpd: the only importer of CMicroHTTPD.
        .target(name: "HTTPServer", dependencies: ["Locking", "CMicroHTTPD"], swiftSettings: strict),
        // sugard-hub: the gateways' MQTT streams into PostgreSQL, the fleet page and its JSON API.
        .target(
            name: "SugarHub",
            dependencies: ["Locking", "MQTT", "JSON", "HubStore", "HTTPServer", "ProcessKit", "GlucoseReport", "GlucoseProfile", "SugarWire", "SystemIO"],
            swiftSettings: strict),
        .executableTarget(name: "sugard-hub", dependencies: ["SugarHub", "SystemIO"], swiftSettings: strict),

        // Benchmark bodies (Glibc for VmHWM only), run by sugar-bench.
        .target(name: "ViewModelBenchmarks", dependencies: ["Locking", "GlucoseStoreFixtures", "HealthDataSync", "GlucoseProfile", "JSON"], swiftSettings: strict),

        // One-input logic of each fuzz target, shared by Fuzz/ (libFuzzer) and FuzzRegressionTests.
        .target(
            name: "FuzzTargets",
            dependencies: ["GlucoseProfile", "HealthDataSync", "JSON", "PacketCapture", "SugarAPI", "SugarConfig", "SugarWire", "SystemIO", "Varlink", "ProcessKit"],
            swiftSettings: strict),
        .executableTarget(name: "sugard", dependencies: ["SugarDaemon", "SystemIO", "ProcessKit"], swiftSettings: strict),
        .executableTarget(
            name: "sugarctl", dependencies: ["GlucoseProfile", "JSON", "Varlink", "SugarWire", "PacketCapture", "BluetoothHost", "DBus", "GlucoseReport", "SystemIO"],
            swiftSettings: strict),
        .executableTarget(
            name: "sugar-bench",
            dependencies: ["Locking", 
                "GlucoseProfile", "JSON", "CMallocCounter", "CBenchYardsticks", "PacketCapture", "GlucoseStore", "GlucoseStoreFixtures", "ViewModelBenchmarks",
                "SugarAPI", "Varlink", "HealthDataSync", "ReplayTransport", "SugarDaemon", "SugarForward", "SugarWire", "MQTT",
                "SystemIO", "HubStore", "ProcessKit",
            ],
            swiftSettings: strict),
        // Ingests into a DB file; the crash test SIGKILLs it at random points.
        .executableTarget(
            name: "store-killtest-writer", dependencies: ["GlucoseStore", "GlucoseStoreFixtures", "HealthDataSync"], swiftSettings: strict),

        // What the tests that run the built programs share: child processes, the BlueZ stand-in rig,
        // random Varlink clients. Tests only (nothing in Sources depends on it).
        .target(
            name: "TestSupport",
            dependencies: ["Locking", "DBus", "Varlink", "JSON", "GlucoseProfile", "GlucoseStoreFixtures"],
            path: "Tests/TestSupport",
            swiftSettings: strict),

        .testTarget(name: "JSONTests", dependencies: ["JSON"], swiftSettings: strict),
        .testTarget(name: "GlucoseProfileTests", dependencies: ["GlucoseProfile", "JSON", "SugarWire", "TestSupport"], swiftSettings: strict),
        .testTarget(
            name: "PacketCaptureTests", dependencies: ["PacketCapture", "GlucoseProfile", "JSON", "TestSupport"],
            swiftSettings: strict),
        .testTarget(
            name: "ReplayTransportTests",
            dependencies: ["ReplayTransport", "PacketCapture", "HealthDataSync", "GlucoseProfile", "JSON"],
            swiftSettings: strict),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "Locking", "ReplayTransport", "GlucoseStore", "HealthDataSync", "PacketCapture", "GlucoseProfile", "JSON",
                "TestSupport",
            ],
            swiftSettings: strict),
        .testTarget(
            name: "HealthDataSyncTests", dependencies: ["Locking", "HealthDataSync", "GlucoseProfile", "TestSupport"],
            swiftSettings: strict),
        .testTarget(
            name: "GlucoseStoreTests", dependencies: ["GlucoseStore", "GlucoseStoreFixtures", "HealthDataSync", "GlucoseProfile", "store-killtest-writer", "TestSupport"],
            swiftSettings: strict),
        .testTarget(
            name: "VarlinkTests", dependencies: ["Locking", "Varlink", "JSON", "CLinuxIO", "TestSupport"], swiftSettings: strict),
        .testTarget(
            name: "DBusTests", dependencies: ["DBus", "Locking", "BlueZTransport", "HealthDataSync", "GlucoseProfile", "TestSupport"], swiftSettings: strict),
        .testTarget(
            name: "SugarAPITests",
            dependencies: [
                "Locking", "SugarAPI", "SugarDaemon", "ReplayTransport", "PacketCapture", "GlucoseProfile", "GlucoseStore",
                "HealthDataSync", "JSON", "Varlink", "sugarctl", "TestSupport", "GlucoseReport", "NightscoutSink", "HTTPClient",
                "SugarWire", "SugarForward", "ProcessKit",
            ],
            swiftSettings: strict),
        .testTarget(name: "SugarDaemonTests", dependencies: ["SugarDaemon", "SugarAPI", "SystemIO", "ProcessKit"], swiftSettings: strict),
        // The built sugard and sugarctl against the BlueZ stand-in on a private bus.
        .testTarget(
            name: "BlueZDaemonTests",
            dependencies: [
                "sugard", "sugarctl", "DBus", "Varlink", "JSON", "GlucoseProfile", "GlucoseStore", "HealthDataSync",
                "Locking", "TestSupport",
            ],
            swiftSettings: strict),
        // Runs the built sugard (and sugarctl) as child processes: sd_notify, signals, reload, logs, idleness.
        .testTarget(
            name: "DaemonTests",
            dependencies: [
                "sugard", "sugarctl", "Varlink", "JSON", "GlucoseStore", "GlucoseStoreFixtures", "HealthDataSync",
                "ReplayTransport", "PacketCapture", "GlucoseProfile", "Locking", "TestSupport",
            ],
            swiftSettings: strict),
        // The soaks: the built sugard under random kills and client churn, on simulated meters (default
        // 150 s) and over the BlueZ stand-in with bluetoothd restarts (default 90 s); SUGARD_SOAK_SECONDS.
        .testTarget(
            name: "SoakTests",
            dependencies: [
                "SugarDaemon", "GlucoseProfile", "GlucoseStore", "HealthDataSync", "JSON", "Varlink", "DBus", "sugard",
                "TestSupport",
            ],
            swiftSettings: strict),
        .testTarget(name: "BluetoothHostTests", dependencies: ["BluetoothHost", "PacketCapture"], swiftSettings: strict),
        // The built sugard-forward against a real mosquitto broker and the built sugard.
        .testTarget(
            name: "ForwardTests",
            dependencies: [
                "GlucoseStoreFixtures",
                "sugard", "sugard-forward", "sugarctl", "SugarForward", "JSON", "Varlink", "Locking", "TestSupport",
                "GlucoseStore", "HealthDataSync", "HTTPClient", "SugarAPI", "GlucoseProfile",
                "SugarWire", "MQTT", "ProcessKit",
            ],
            swiftSettings: strict),
        // The built sugard-hub against a throwaway PostgreSQL cluster and a real mosquitto broker.
        .testTarget(
            name: "HubTests",
            dependencies: [
                "sugard-hub", "SugarHub", "SugarAPI", "HealthDataSync", "HubStore", "MQTT", "JSON", "Locking", "TestSupport", "SugarForward",
                "SugarWire", "ProcessKit",
            ],
            swiftSettings: strict),
        .testTarget(name: "FuzzRegressionTests", dependencies: ["FuzzTargets", "JSON", "PacketCapture"], swiftSettings: strict),
    ]
)

// The layers, lowest first: each target lives in Sources/<layer>/<name> (tests in Tests/<layer>/<name>).
// What each layer may use: Sources/README.md and docs/module-map.txt (checked by scripts/check-imports).
let layers: [(folder: String, targets: [String])] = [
    ("Sources/CLibraries", ["CSQLite", "CDBus", "CBlueZ", "CCurl", "CMosquitto", "CPostgres", "CMicroHTTPD", "CLinuxIO"]),
    ("Sources/Base", ["Locking", "SystemIO", "ProcessKit"]),
    ("Sources/Codec", ["JSON", "GlucoseProfile", "SugarWire", "GlucoseReport"]),
    ("Sources/Domain", ["HealthDataSync"]),
    ("Sources/IO", ["GlucoseStore", "HubStore", "PacketCapture", "ReplayTransport", "BlueZTransport", "BluetoothHost", "DBus", "Varlink", "MQTT", "HTTPClient", "HTTPServer"]),
    ("Sources/Services", ["SugarAPI", "SugarConfig", "SugarDaemon", "SugarForward", "SugarHub", "NightscoutSink"]),
    ("Sources/Executables", ["sugard", "sugarctl", "sugard-forward", "sugard-hub"]),
    ("Sources/Tools", ["sugar-bench", "ViewModelBenchmarks", "FuzzTargets", "GlucoseStoreFixtures", "store-killtest-writer", "CBenchYardsticks", "CMallocCounter"]),
    ("Tests/Codec", ["JSONTests", "GlucoseProfileTests"]),
    ("Tests/Domain", ["HealthDataSyncTests"]),
    ("Tests/IO", ["PacketCaptureTests", "ReplayTransportTests", "GlucoseStoreTests", "VarlinkTests", "DBusTests", "BluetoothHostTests", "IntegrationTests"]),
    ("Tests/Services", ["SugarAPITests", "SugarDaemonTests", "ForwardTests", "HubTests"]),
    ("Tests/Executables", ["DaemonTests", "BlueZDaemonTests", "SoakTests"]),
    ("Tests/Tools", ["FuzzRegressionTests"]),
]
for target in package.targets where target.path == nil {
    guard let layer = layers.first(where: { $0.targets.contains(target.name) }) else {
        fatalError("Package.swift: target \(target.name) is in no layer of `layers`")
    }
    target.path = "\(layer.folder)/\(target.name)"
}
