import DBus
import GlucoseProfile
import HealthDataSync

/// A copy of BlueZ's object tree (`GetManagedObjects` plus the ObjectManager and Properties signals),
/// with variant wrappers removed from property values. Pure data: the transport keeps it behind a lock.
struct ObjectMirror {
    /// BlueZ's adapter interface.
    static let adapterInterface = "org.bluez.Adapter1"
    /// BlueZ's device interface.
    static let deviceInterface = "org.bluez.Device1"
    /// BlueZ's GATT service interface.
    static let serviceInterface = "org.bluez.GattService1"
    /// BlueZ's GATT characteristic interface.
    static let characteristicInterface = "org.bluez.GattCharacteristic1"

    /// path -> interface -> property -> value
    private(set) var objects: [String: [String: [String: DBusValue]]] = [:]

    /// Forgets every object (BlueZ went away).
    mutating func removeAll() {
        self.objects = [:]
    }

    /// Loads a `GetManagedObjects` reply (`a{oa{sa{sv}}}`).
    mutating func load(_ reply: DBusValue) {
        self.objects = [:]
        for (path, interfaces) in reply.dictionary ?? [:] {
            self.add(path: path, interfaces: interfaces)
        }
    }

    /// Adds interfaces (an `a{sa{sv}}` value) to the object at `path`.
    mutating func add(path: String, interfaces: DBusValue) {
        for (interface, properties) in interfaces.dictionary ?? [:] {
            var current = self.objects[path]?[interface] ?? [:]
            for (name, value) in properties.dictionary ?? [:] { current[name] = value.unwrapped }
            self.objects[path, default: [:]][interface] = current
        }
    }

    /// Applies InterfacesRemoved: drops the interfaces, and the object once none is left.
    mutating func remove(path: String, interfaces: [String]) {
        for interface in interfaces { self.objects[path]?.removeValue(forKey: interface) }
        if self.objects[path]?.isEmpty == true { self.objects.removeValue(forKey: path) }
    }

    /// Applies a PropertiesChanged; returns false when the object or interface is unknown.
    @discardableResult
    mutating func update(path: String, interface: String, changed: [String: DBusValue], invalidated: [String]) -> Bool {
        guard self.objects[path]?[interface] != nil else { return false }
        for (name, value) in changed { self.objects[path]?[interface]?[name] = value.unwrapped }
        for name in invalidated { self.objects[path]?[interface]?.removeValue(forKey: name) }
        return true
    }

    /// The properties of one interface of the object at `path`; nil when it has none.
    func properties(_ path: String, _ interface: String) -> [String: DBusValue]? {
        self.objects[path]?[interface]
    }

    // MARK: Adapters

    /// The adapter to use: the configured one (`hci0`), else the first powered one in path order,
    /// else the first one.
    func adapterPath(preferred name: String?) -> String? {
        if let name {
            let path = "/org/bluez/" + name
            return self.objects[path]?[Self.adapterInterface] != nil ? path : nil
        }
        let adapters = self.objects.keys.filter { self.objects[$0]?[Self.adapterInterface] != nil }.sorted()
        return adapters.first { self.objects[$0]?[Self.adapterInterface]?["Powered"]?.bool == true } ?? adapters.first
    }

    /// The chosen adapter's presence, power, discovery, name (the path's last element, `hci0`) and address.
    func adapterState(preferred name: String?) -> AdapterState {
        guard let path = self.adapterPath(preferred: name), let props = self.properties(path, Self.adapterInterface)
        else { return .absent }
        return AdapterState(
            present: true, powered: props["Powered"]?.bool ?? false, discovering: props["Discovering"]?.bool ?? false,
            name: String(path.split(separator: "/").last ?? ""), address: props["Address"]?.string)
    }

    // MARK: Devices

    /// The services that make a device a meter: the Glucose service, and OneTouch Verio's vendor service.
    static let meterServices = [BluetoothUUID.glucoseService.uuidString, Verio.service.uuidString]

    /// Devices below the chosen adapter that offer the Glucose service or the Verio service.
    func meterPaths(adapter: String?) -> [String] {
        self.objects.keys.filter { path in
            guard let props = self.properties(path, Self.deviceInterface) else { return false }
            if let adapter, props["Adapter"]?.string != adapter { return false }
            return Self.isGlucoseMeter(props)
        }.sorted()
    }

    /// Whether a device's `UUIDs` list one of ``meterServices``.
    static func isGlucoseMeter(_ device: [String: DBusValue]) -> Bool {
        device["UUIDs"]?.strings?.contains(where: Self.meterServices.contains) == true
    }

    /// The device object of the meter's address below `adapter` (any adapter when nil); the first in
    /// path order when several match.
    func devicePath(for meter: MeterID, adapter: String?) -> String? {
        self.objects.keys.sorted().first { path in
            guard let props = self.properties(path, Self.deviceInterface),
                let address = props["Address"]?.string
            else { return false }
            if let adapter, props["Adapter"]?.string != adapter { return false }
            return MeterID(rawValue: address) == meter
        }
    }

    /// The device at `path` as an advertisement: address, `Alias` (else `Name`), RSSI, paired.
    func advertisement(_ path: String) -> MeterAdvertisement? {
        guard let props = self.properties(path, Self.deviceInterface), let address = props["Address"]?.string else {
            return nil
        }
        return MeterAdvertisement(
            id: MeterID(rawValue: address), name: props["Alias"]?.string ?? props["Name"]?.string,
            rssi: props["RSSI"]?.integer.map { Int($0) }, paired: props["Paired"]?.bool ?? false)
    }

    // MARK: GATT

    /// A characteristic object and what it is.
    struct Characteristic {
        /// Its object path.
        var path: String
        /// Its UUID, service and properties.
        var info: DiscoveredCharacteristic
    }

    /// The characteristics of a device, with their object paths.
    func characteristics(ofDevice device: String) -> [Characteristic] {
        var services: [String: BluetoothUUID] = [:]
        for (path, interfaces) in self.objects {
            guard let props = interfaces[Self.serviceInterface], props["Device"]?.string == device,
                let text = props["UUID"]?.string, let uuid = BluetoothUUID(string: text)
            else { continue }
            services[path] = uuid
        }
        var result: [Characteristic] = []
        for (path, interfaces) in self.objects {
            guard let props = interfaces[Self.characteristicInterface], let service = props["Service"]?.string,
                let serviceUUID = services[service], let text = props["UUID"]?.string,
                let uuid = BluetoothUUID(string: text)
            else { continue }
            result.append(
                Characteristic(
                    path: path,
                    info: DiscoveredCharacteristic(
                        uuid: uuid, service: serviceUUID, properties: Self.properties(props["Flags"]?.strings ?? []))))
        }
        return result.sorted { $0.path < $1.path }
    }

    /// The object path of a characteristic; inside the Glucose service first when the UUID repeats.
    func characteristicPath(_ uuid: BluetoothUUID, ofDevice device: String) -> String? {
        let matches = self.characteristics(ofDevice: device).filter { $0.info.uuid == uuid }
        return (matches.first { $0.info.service == .glucoseService } ?? matches.first)?.path
    }

    /// (device path, characteristic UUID) of a characteristic object.
    func owner(ofCharacteristic path: String) -> (device: String, uuid: BluetoothUUID)? {
        guard let props = self.properties(path, Self.characteristicInterface), let service = props["Service"]?.string,
            let device = self.properties(service, Self.serviceInterface)?["Device"]?.string,
            let text = props["UUID"]?.string, let uuid = BluetoothUUID(string: text)
        else { return nil }
        return (device, uuid)
    }

    /// BlueZ's `Flags` strings as properties; flags other than read, write(-without-response),
    /// notify and indicate are ignored.
    static func properties(_ flags: [String]) -> CharacteristicProperties {
        var result: CharacteristicProperties = []
        for flag in flags {
            switch flag {
            case "read": result.insert(.read)
            case "write-without-response": result.insert(.writeWithoutResponse)
            case "write": result.insert(.write)
            case "notify": result.insert(.notify)
            case "indicate": result.insert(.indicate)
            default: break
            }
        }
        return result
    }
}
