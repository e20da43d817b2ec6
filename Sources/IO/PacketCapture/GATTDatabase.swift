import GlucoseProfile

/// A service learned from discovery (Read By Group Type or Find By Type Value responses).
public struct GATTService: Hashable, Sendable {
    /// The service type, e.g. 0x1808 Glucose.
    public var uuid: BluetoothUUID
    /// Handle of the service declaration.
    public var startHandle: UInt16
    /// Last handle of the service's group.
    public var endHandle: UInt16
    /// Primary (0x2800) or secondary (0x2801) service.
    public var isPrimary: Bool

    /// A service covering `startHandle...endHandle`.
    public init(uuid: BluetoothUUID, startHandle: UInt16, endHandle: UInt16, isPrimary: Bool = true) {
        self.uuid = uuid
        self.startHandle = startHandle
        self.endHandle = endHandle
        self.isPrimary = isPrimary
    }
}

/// A descriptor learned from Find Information responses.
public struct GATTDescriptor: Hashable, Sendable {
    /// The descriptor's handle.
    public var handle: UInt16
    /// The descriptor type, e.g. 0x2902 CCCD.
    public var uuid: BluetoothUUID

    /// A descriptor of type `uuid` at `handle`.
    public init(handle: UInt16, uuid: BluetoothUUID) {
        self.handle = handle
        self.uuid = uuid
    }
}

/// A characteristic learned from a characteristic declaration (0x2803) or from a handle override.
public struct GATTCharacteristic: Hashable, Sendable {
    /// The characteristic type, e.g. 0x2A18 Glucose Measurement.
    public var uuid: BluetoothUUID
    /// Handle of the declaration attribute (value handle − 1 for overrides).
    public var declarationHandle: UInt16
    /// Handle of the value attribute: what reads, writes and notifications refer to.
    public var valueHandle: UInt16
    /// Nil when the characteristic came from an override or Find Information, not a declaration.
    public var properties: CharacteristicProperties?
    /// The enclosing service, when it was discovered.
    public var service: BluetoothUUID?
    /// Descriptors between the value and the next declaration, in handle order.
    public var descriptors: [GATTDescriptor]

    /// A characteristic with every field given.
    public init(
        uuid: BluetoothUUID, declarationHandle: UInt16, valueHandle: UInt16, properties: CharacteristicProperties?,
        service: BluetoothUUID? = nil, descriptors: [GATTDescriptor] = []
    ) {
        self.uuid = uuid
        self.declarationHandle = declarationHandle
        self.valueHandle = valueHandle
        self.properties = properties
        self.service = service
        self.descriptors = descriptors
    }

    /// The CCCD (0x2902) handle, when discovered.
    public var cccdHandle: UInt16? {
        self.descriptors.first { $0.uuid == .clientCharacteristicConfiguration }?.handle
    }
}

/// What is known about one attribute handle: its type and what it belongs to.
public struct GATTAttribute: Hashable, Sendable, CustomStringConvertible {
    /// The attribute handle.
    public var handle: UInt16
    /// The attribute type: the characteristic UUID for a value handle, the descriptor UUID for a descriptor.
    /// Nil when discovery never covered this handle and no override names it.
    public var uuid: BluetoothUUID?
    /// The characteristic this handle belongs to (itself for a value handle, the owner for a descriptor).
    public var characteristic: BluetoothUUID?
    /// The enclosing service, when known.
    public var service: BluetoothUUID?

    /// An attribute with what is known about it.
    public init(handle: UInt16, uuid: BluetoothUUID? = nil, characteristic: BluetoothUUID? = nil,
                service: BluetoothUUID? = nil) {
        self.handle = handle
        self.uuid = uuid
        self.characteristic = characteristic
        self.service = service
    }

    /// Fills unknown fields from what `database` knows about the same handle.
    mutating func fill(from database: GATTDatabase) {
        guard self.uuid == nil || self.characteristic == nil || self.service == nil, !database.isEmpty else { return }
        let other = database.attribute(at: self.handle)
        if self.uuid == nil { self.uuid = other.uuid }
        if self.characteristic == nil { self.characteristic = other.characteristic }
        if self.service == nil { self.service = other.service }
    }

    /// True when this is a characteristic value handle (its type is its characteristic).
    public var isCharacteristicValue: Bool { self.uuid != nil && self.uuid == self.characteristic }
    /// True when this is a Client Characteristic Configuration descriptor.
    public var isCCCD: Bool { self.uuid == .clientCharacteristicConfiguration }

    /// The handle in hex with its type, and the owning characteristic for a descriptor:
    /// `0x0013 (2902 of 2a18)`.
    public var description: String {
        var text = hex16(self.handle)
        if let uuid = self.uuid {
            text += " (\(uuid.description)"
            if let owner = self.characteristic, owner != uuid { text += " of \(owner.description)" }
            text += ")"
        }
        return text
    }
}

/// A GATT server's attribute layout as far as a capture revealed it. Handles differ per meter model, so
/// this is always learned, never assumed.
public struct GATTDatabase: Hashable, Sendable {
    /// Services sorted by start handle.
    public private(set) var services: [GATTService] = []
    /// Declarations sorted by declaration handle (descriptors are attached on read-out).
    private var declarations: [GATTCharacteristic] = []
    /// Attribute types learned from Find Information and Read By Type responses, and overrides.
    private var types: [UInt16: BluetoothUUID] = [:]

    /// An empty layout.
    public init() {}

    /// Builds a database from handle overrides (`0x0012=2a18`): a non-descriptor UUID becomes a
    /// characteristic value, a 0x29xx UUID a descriptor of the characteristic below it.
    public init(overrides: [HandleOverride]) {
        for item in overrides { self.apply(item) }
    }

    /// True when nothing is known.
    public var isEmpty: Bool { self.services.isEmpty && self.declarations.isEmpty && self.types.isEmpty }

    /// Characteristics in handle order, each with its descriptors and service.
    public var characteristics: [GATTCharacteristic] {
        self.declarations.enumerated().map { index, declaration in
            var characteristic = declaration
            let end = self.characteristicEnd(at: index)
            characteristic.service = characteristic.service ?? self.service(containing: declaration.valueHandle)?.uuid
            characteristic.descriptors = self.types
                .filter { $0.key > declaration.valueHandle && $0.key <= end && $0.value != .characteristic }
                .map { GATTDescriptor(handle: $0.key, uuid: $0.value) }
                .sorted { $0.handle < $1.handle }
            return characteristic
        }
    }

    /// The first characteristic with this UUID.
    public func characteristic(_ uuid: BluetoothUUID) -> GATTCharacteristic? {
        self.characteristics.first { $0.uuid == uuid }
    }

    /// Everything known about `handle`.
    public func attribute(at handle: UInt16) -> GATTAttribute {
        var result = GATTAttribute(handle: handle)
        result.service = self.service(containing: handle)?.uuid
        if let index = self.ownerIndex(of: handle) {
            let owner = self.declarations[index]
            if handle == owner.valueHandle {
                result.uuid = owner.uuid
                result.characteristic = owner.uuid
            } else if handle == owner.declarationHandle {
                result.uuid = .characteristic
                result.characteristic = owner.uuid
            } else if handle <= self.characteristicEnd(at: index) {
                result.characteristic = owner.uuid
            }
        }
        if result.uuid == nil, let type = self.types[handle] {
            result.uuid = type
            if result.characteristic == nil, !Self.isDescriptorOrDeclaration(type) { result.characteristic = type }
        }
        if result.uuid == nil, let service = self.services.first(where: { $0.startHandle == handle }) {
            result.uuid = service.isPrimary ? .primaryService : .secondaryService
        }
        return result
    }

    /// `attribute(at:)` from this database, with unknown fields filled from `first`, then `second`.
    func attribute(at handle: UInt16, fallback first: GATTDatabase, _ second: GATTDatabase) -> GATTAttribute {
        var result = self.attribute(at: handle)
        result.fill(from: first)
        result.fill(from: second)
        return result
    }

    /// Adds or replaces a service.
    public mutating func addService(_ service: GATTService) {
        if let index = self.services.firstIndex(where: { $0.startHandle == service.startHandle }) {
            self.services[index] = service
        } else {
            let position = self.services.firstIndex { $0.startHandle > service.startHandle } ?? self.services.count
            self.services.insert(service, at: position)
        }
    }

    /// Adds or replaces a characteristic declaration.
    public mutating func addCharacteristic(_ characteristic: GATTCharacteristic) {
        var stored = characteristic
        stored.descriptors = []
        if let index = self.declarations.firstIndex(where: { $0.declarationHandle == stored.declarationHandle }) {
            self.declarations[index] = stored
        } else {
            let position = self.declarations.firstIndex { $0.declarationHandle > stored.declarationHandle }
                ?? self.declarations.count
            self.declarations.insert(stored, at: position)
        }
    }

    /// Records the type of one attribute (Find Information, Read By Type).
    public mutating func setType(_ uuid: BluetoothUUID, at handle: UInt16) {
        self.types[handle] = uuid
    }

    /// Applies one override.
    public mutating func apply(_ item: HandleOverride) {
        if Self.isDescriptorOrDeclaration(item.uuid) {
            self.setType(item.uuid, at: item.handle)
        } else {
            self.addCharacteristic(GATTCharacteristic(
                uuid: item.uuid, declarationHandle: item.handle &- 1, valueHandle: item.handle, properties: nil))
        }
    }

    /// Adds everything `other` knows that this database does not.
    mutating func absorb(_ other: GATTDatabase) {
        for service in other.services where !self.services.contains(where: { $0.startHandle == service.startHandle }) {
            self.addService(service)
        }
        for declaration in other.declarations
        where !self.declarations.contains(where: { $0.declarationHandle == declaration.declarationHandle }) {
            self.addCharacteristic(declaration)
        }
        for (handle, type) in other.types where self.types[handle] == nil { self.types[handle] = type }
    }

    /// True when services or characteristic declarations were learned (not only attribute types).
    var hasServiceOrCharacteristicDiscovery: Bool { !self.services.isEmpty || !self.declarations.isEmpty }

    /// A 0x28xx declaration type or a 0x29xx descriptor type (not a characteristic value).
    private static func isDescriptorOrDeclaration(_ uuid: BluetoothUUID) -> Bool {
        guard let short = uuid.uuid16 else { return false }
        return (0x2800...0x28FF).contains(short) || (0x2900...0x29FF).contains(short)
    }

    /// The service whose range covers `handle`.
    private func service(containing handle: UInt16) -> GATTService? {
        // Innermost (latest-starting) service that covers the handle.
        self.services.last { $0.startHandle <= handle && handle <= $0.endHandle }
    }

    /// Index of the declaration with the greatest declaration handle ≤ `handle`, within the same service.
    private func ownerIndex(of handle: UInt16) -> Int? {
        var low = 0
        var high = self.declarations.count
        while low < high {
            let middle = (low + high) / 2
            if self.declarations[middle].declarationHandle <= handle { low = middle + 1 } else { high = middle }
        }
        guard low > 0 else {
            // An override declaration at value − 1 may sit above a handle equal to its value (handle 0).
            return nil
        }
        let index = low - 1
        if let service = self.service(containing: handle),
            self.declarations[index].declarationHandle < service.startHandle
        {
            return nil
        }
        return index
    }

    /// The last handle of the characteristic at `index`: before the next declaration, within its service.
    private func characteristicEnd(at index: Int) -> UInt16 {
        let declaration = self.declarations[index]
        var end: UInt16 = 0xFFFF
        if index + 1 < self.declarations.count { end = self.declarations[index + 1].declarationHandle &- 1 }
        if let service = self.service(containing: declaration.valueHandle) { end = min(end, service.endHandle) }
        return max(end, declaration.valueHandle)
    }
}

/// A user-supplied handle → UUID mapping for captures without discovery, e.g. `0x0012=2a18`, optionally
/// limited to one peer: `AA:BB:CC:DD:EE:FF/0x0012=2a18`.
public struct HandleOverride: Hashable, Sendable, CustomStringConvertible {
    /// Only for this peer; nil: every peer.
    public var peer: BluetoothAddress?
    /// The attribute handle (1…0xFFFF).
    public var handle: UInt16
    /// Its type: a characteristic UUID names a value handle, a 0x29xx UUID a descriptor.
    public var uuid: BluetoothUUID

    /// An override of `handle` to `uuid`, for `peer` or every peer.
    public init(peer: BluetoothAddress? = nil, handle: UInt16, uuid: BluetoothUUID) {
        self.peer = peer
        self.handle = handle
        self.uuid = uuid
    }

    /// Parses `0x0012=2a18`, `18=2a18` (decimal) or `AA:BB:CC:DD:EE:FF/0x0012=<128-bit uuid>`.
    /// - Throws: `CaptureError` `.invalidArgument` naming the bad part.
    public init(parsing text: String) throws(CaptureError) {
        var rest = Substring(text)
        var peer: BluetoothAddress?
        if let slash = rest.firstIndex(of: "/") {
            peer = try BluetoothAddress(parsing: String(rest[..<slash]))
            rest = rest[rest.index(after: slash)...]
        }
        guard let equals = rest.firstIndex(of: "=") else {
            throw CaptureError(.invalidArgument, "Handle override “\(text)” needs the form 0x0012=2a18.")
        }
        let handleText = rest[..<equals]
        let parsed: UInt16? =
            if handleText.hasPrefix("0x") || handleText.hasPrefix("0X") {
                UInt16(handleText.dropFirst(2), radix: 16)
            } else {
                UInt16(handleText)
            }
        guard let handle = parsed, handle != 0 else {
            throw CaptureError(.invalidArgument, "Handle override “\(text)” has no valid handle (1…0xFFFF).")
        }
        self.init(peer: peer, handle: handle, uuid: try BluetoothUUID(parsing: String(rest[rest.index(after: equals)...])))
    }

    /// The form `init(parsing:)` reads: `[AA:BB:…/]0x0012=2a18`.
    public var description: String {
        (self.peer.map { "\($0)/" } ?? "") + "\(hex16(self.handle))=\(self.uuid.description)"
    }
}
