import GlucoseProfile

/// What a GATT characteristic supports, as far as the sync engine cares.
public struct CharacteristicProperties: OptionSet, Hashable, Sendable {
    /// The property bits as in the Characteristic Declaration.
    public var rawValue: UInt8
    /// Properties from their bits.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The value can be read (0x02).
    public static let read = CharacteristicProperties(rawValue: 0x02)
    /// The value can be written without a response (0x04).
    public static let writeWithoutResponse = CharacteristicProperties(rawValue: 0x04)
    /// The value can be written with a response (0x08).
    public static let write = CharacteristicProperties(rawValue: 0x08)
    /// The characteristic notifies (0x10).
    public static let notify = CharacteristicProperties(rawValue: 0x10)
    /// The characteristic indicates (0x20).
    public static let indicate = CharacteristicProperties(rawValue: 0x20)
}

/// One characteristic found on a connected meter.
public struct DiscoveredCharacteristic: Hashable, Sendable {
    /// The characteristic's UUID.
    public var uuid: BluetoothUUID
    /// The service it belongs to.
    public var service: BluetoothUUID
    /// What it supports.
    public var properties: CharacteristicProperties

    /// A characteristic of `service`.
    public init(uuid: BluetoothUUID, service: BluetoothUUID, properties: CharacteristicProperties) {
        self.uuid = uuid
        self.service = service
        self.properties = properties
    }
}

/// The GATT database of a connected meter, as far as the sync engine needs it.
///
/// Characteristics are addressed by UUID (never by handle or object path); when a UUID appears in
/// several services, the one inside the Glucose service wins.
public struct MeterServices: Hashable, Sendable {
    /// Every characteristic found, in discovery order.
    public var characteristics: [DiscoveredCharacteristic]

    /// A database of these characteristics.
    public init(characteristics: [DiscoveredCharacteristic]) { self.characteristics = characteristics }

    /// The characteristic with this UUID, preferring the one in the Glucose service; nil when absent.
    public func characteristic(_ uuid: BluetoothUUID) -> DiscoveredCharacteristic? {
        let matches = self.characteristics.filter { $0.uuid == uuid }
        return matches.first(where: { $0.service == .glucoseService }) ?? matches.first
    }

    /// Whether the meter has a characteristic with this UUID.
    public func has(_ uuid: BluetoothUUID) -> Bool { self.characteristic(uuid) != nil }
}

/// The Bluetooth adapter as the transport sees it.
public struct AdapterState: Hashable, Sendable {
    /// An adapter exists (and BlueZ is running).
    public var present: Bool
    /// The adapter is powered on.
    public var powered: Bool
    /// LE discovery is running.
    public var discovering: Bool
    /// `hci0`, or a description such as `replay`.
    public var name: String?
    /// The adapter's Bluetooth address, when known.
    public var address: String?

    /// An adapter state; name and address unknown unless given.
    public init(present: Bool, powered: Bool, discovering: Bool, name: String? = nil, address: String? = nil) {
        self.present = present
        self.powered = powered
        self.discovering = discovering
        self.name = name
        self.address = address
    }

    /// No adapter: not present, not powered, not discovering.
    public static let absent = AdapterState(present: false, powered: false, discovering: false)
}

/// A meter the transport can see (advertising, or known to BlueZ).
public struct MeterAdvertisement: Hashable, Sendable {
    /// The meter's address.
    public var id: MeterID
    /// The name it advertises, when known.
    public var name: String?
    /// Signal strength in dBm of the last advertisement; nil when not heard.
    public var rssi: Int?
    /// BlueZ already holds a bond for it.
    public var paired: Bool

    /// An advertisement; unknown facts stay nil, not paired unless said.
    public init(id: MeterID, name: String? = nil, rssi: Int? = nil, paired: Bool = false) {
        self.id = id
        self.name = name
        self.rssi = rssi
        self.paired = paired
    }
}

/// What a transport reports, in order, to its single consumer (the sync engine).
public enum TransportEvent: Hashable, Sendable {
    /// The adapter appeared, disappeared or changed power/discovery state.
    case adapter(AdapterState)
    /// A meter advertised or became known; it may be synced.
    case meterAppeared(MeterAdvertisement)
    /// A meter is no longer known (removed from BlueZ, or out of range for long).
    case meterDisappeared(MeterID)
    /// The link to a meter dropped (whether or not we asked).
    case disconnected(MeterID, reason: String?)
    /// A notification or indication value from a characteristic.
    case value(MeterID, BluetoothUUID, [UInt8])
    /// Pairing needs the passkey the meter shows; answer with ``MeterTransport/submitPasskey(_:for:)``.
    case passkeyRequested(MeterID)
}

/// Why a transport operation failed.
public struct TransportError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kinds of failure; the sync engine maps each to its own failure codes.
    public enum Code: String, Hashable, Sendable {
        /// No adapter, adapter off, or bluetoothd not running.
        case adapterUnavailable
        /// The meter is not known to the transport.
        case meterNotFound
        /// The operation needs a connection and there is none.
        case notConnected
        /// Connecting or resolving the services failed.
        case connectFailed
        /// The meter requires a bond that does not exist: pair it first.
        case authenticationRequired
        /// Pairing failed (wrong passkey, rejected).
        case authenticationFailed
        /// The meter lacks a required characteristic.
        case characteristicNotFound
        /// An ATT error response; see ``attError``.
        case attError
        /// The operation did not finish in time.
        case timeout
        /// The link dropped during the operation.
        case disconnected
        /// The operation was cancelled.
        case cancelled
        /// Anything else; the message says what.
        case other
    }

    /// What kind of failure it is.
    public var code: Code
    /// The ATT error code for ``Code/attError`` (e.g. 0x80, 0x81, 0xFD, 0xFE).
    public var attError: UInt8?
    /// One sentence for people.
    public var message: String

    /// An error of `code` saying `message`.
    public init(_ code: Code, _ message: String, attError: UInt8? = nil) {
        self.code = code
        self.message = message
        self.attError = attError
    }

    /// The message.
    public var description: String { self.message }
}

/// A way to reach meters: BlueZ over D-Bus, or a replayed capture.
///
/// The sync engine is the single consumer of ``events()``. Values from notifications and
/// indications may arrive before the reply of the write that triggered them (BlueZ and its
/// stand-ins do both), so the engine must not assume an order between a write's completion and
/// the values it causes.
///
/// Operations throw a ``TransportError`` whose code says why: no adapter, unknown meter, not
/// connected, a failed connect or pairing, a bond the meter requires, a missing characteristic, an
/// ATT error, a timeout, the link dropped, or cancellation.
public protocol MeterTransport: Sendable {
    /// The event stream. Called once; the stream ends when the transport shuts down.
    func events() -> AsyncStream<TransportEvent>
    /// Starts or stops looking for meters (LE discovery filtered on the Glucose service and the Verio service).
    func setDiscovery(_ enabled: Bool) async throws(TransportError)
    /// Connects and waits until the GATT services are resolved.
    func connect(_ meter: MeterID) async throws(TransportError) -> MeterServices
    /// Pairs (bonds) with the meter; a ``TransportEvent/passkeyRequested(_:)`` may come first.
    func pair(_ meter: MeterID) async throws(TransportError)
    /// Answers a passkey request (nil cancels the pairing).
    func submitPasskey(_ passkey: UInt32?, for meter: MeterID) async throws(TransportError)
    /// Reads the characteristic's value.
    func read(_ characteristic: BluetoothUUID, on meter: MeterID) async throws(TransportError) -> [UInt8]
    /// Enables or disables notifications, or indications where the characteristic only indicates.
    func setNotifications(_ enabled: Bool, for characteristic: BluetoothUUID, on meter: MeterID) async throws(TransportError)
    /// Writes with response (RACP).
    func write(_ value: [UInt8], to characteristic: BluetoothUUID, on meter: MeterID) async throws(TransportError)
    /// Disconnects; harmless when not connected.
    func disconnect(_ meter: MeterID) async
}
