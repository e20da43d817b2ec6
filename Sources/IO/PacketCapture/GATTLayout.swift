import GlucoseProfile

/// A GATT server's handle layout, for building captures and for simulators.
public struct GATTLayout: Hashable, Sendable {
    /// What a characteristic should look like; handles are assigned by `GATTLayout.init`.
    public struct CharacteristicSpec: Hashable, Sendable {
        /// The characteristic type.
        public var uuid: BluetoothUUID
        /// Its properties; `notify` or `indicate` adds a CCCD.
        public var properties: CharacteristicProperties
        /// Descriptors besides the CCCD (which is added for notify/indicate).
        public var extraDescriptors: [BluetoothUUID]

        /// A characteristic of `uuid` with `properties` and any descriptors besides the CCCD.
        public init(_ uuid: BluetoothUUID, _ properties: CharacteristicProperties, extraDescriptors: [BluetoothUUID] = []) {
            self.uuid = uuid
            self.properties = properties
            self.extraDescriptors = extraDescriptors
        }
    }

    /// What a service should look like.
    public struct ServiceSpec: Hashable, Sendable {
        /// The service type.
        public var uuid: BluetoothUUID
        /// Its characteristics, laid out in this order.
        public var characteristics: [CharacteristicSpec]
        /// Unused handles left before this service starts (meters have gaps).
        public var gapBefore: UInt16

        /// A service of `uuid` starting `gapBefore` handles after the previous one ends.
        public init(_ uuid: BluetoothUUID, gapBefore: UInt16 = 0, _ characteristics: [CharacteristicSpec]) {
            self.uuid = uuid
            self.characteristics = characteristics
            self.gapBefore = gapBefore
        }
    }

    /// Services with their handle ranges, in handle order.
    public private(set) var services: [GATTService] = []
    /// Characteristics with handles and descriptors, in handle order.
    public private(set) var characteristics: [GATTCharacteristic] = []

    /// Lays out services from `startHandle` on: service declaration, then per characteristic its declaration,
    /// value, CCCD (when it can notify or indicate) and extra descriptors.
    public init(startHandle: UInt16 = 1, services: [ServiceSpec]) {
        var handle = startHandle
        for spec in services {
            handle += spec.gapBefore
            let start = handle
            handle += 1
            for item in spec.characteristics {
                let declaration = handle
                let value = handle + 1
                handle += 2
                var descriptors: [GATTDescriptor] = []
                if !item.properties.isDisjoint(with: [.notify, .indicate]) {
                    descriptors.append(GATTDescriptor(handle: handle, uuid: .clientCharacteristicConfiguration))
                    handle += 1
                }
                for uuid in item.extraDescriptors {
                    descriptors.append(GATTDescriptor(handle: handle, uuid: uuid))
                    handle += 1
                }
                self.characteristics.append(GATTCharacteristic(
                    uuid: item.uuid, declarationHandle: declaration, valueHandle: value, properties: item.properties,
                    service: spec.uuid, descriptors: descriptors))
            }
            self.services.append(GATTService(uuid: spec.uuid, startHandle: start, endHandle: handle - 1))
        }
    }

    /// A layout with exactly these handles (e.g. learned from a capture's discovery). Characteristics are
    /// sorted by declaration handle; their `service` is filled from the enclosing service when missing.
    public init(services: [GATTService], characteristics: [GATTCharacteristic]) {
        self.services = services.sorted { $0.startHandle < $1.startHandle }
        self.characteristics = characteristics.sorted { $0.declarationHandle < $1.declarationHandle }.map { item in
            var copy = item
            if copy.service == nil {
                copy.service = services.last {
                    $0.startHandle <= item.declarationHandle && item.declarationHandle <= $0.endHandle
                }?.uuid
            }
            return copy
        }
    }

    /// The layout a capture revealed (see `CaptureSession.database`).
    public init(database: GATTDatabase) {
        self.init(services: database.services, characteristics: database.characteristics)
    }

    /// A typical Bluetooth glucose meter: GAP (0x1800), Glucose (0x1808: 0x2A18, 0x2A34, 0x2A51, 0x2A52) and
    /// Device Information (0x180A), starting at `startHandle` so tests can vary the layout.
    public static func glucoseMeter(startHandle: UInt16 = 1, withContext: Bool = true) -> GATTLayout {
        var glucose: [CharacteristicSpec] = [.init(.glucoseMeasurement, .notify)]
        if withContext { glucose.append(.init(.glucoseMeasurementContext, .notify)) }
        glucose += [.init(.glucoseFeature, .read), .init(.recordAccessControlPoint, [.write, .indicate])]
        return GATTLayout(startHandle: startHandle, services: [
            ServiceSpec(BluetoothUUID(0x1800), [.init(BluetoothUUID(0x2A00), .read), .init(BluetoothUUID(0x2A01), .read)]),
            ServiceSpec(.glucoseService, gapBefore: 3, glucose),
            ServiceSpec(.deviceInformationService, [.init(BluetoothUUID(0x2A29), .read), .init(BluetoothUUID(0x2A24), .read)]),
        ])
    }

    /// The value handle of the first characteristic with `uuid`.
    public func valueHandle(_ uuid: BluetoothUUID) -> UInt16? {
        self.characteristics.first { $0.uuid == uuid }?.valueHandle
    }

    /// The CCCD handle of the first characteristic with `uuid`.
    public func cccdHandle(_ uuid: BluetoothUUID) -> UInt16? {
        self.characteristics.first { $0.uuid == uuid }?.cccdHandle
    }

    /// The last handle of the characteristic at `index` (before the next declaration or the service end).
    func characteristicEnd(_ index: Int) -> UInt16 {
        let item = self.characteristics[index]
        let serviceEnd = self.services.first { $0.startHandle <= item.declarationHandle && item.declarationHandle <= $0.endHandle }?
            .endHandle ?? 0xFFFF
        if index + 1 < self.characteristics.count {
            return min(serviceEnd, self.characteristics[index + 1].declarationHandle - 1)
        }
        return serviceEnd
    }
}
