import GlucoseProfile

/// The local device's link-layer role on an LE connection.
public enum LinkRole: UInt8, Hashable, Sendable, CustomStringConvertible {
    /// The capturing device initiated the connection (a phone or PC talking to a meter).
    case central = 0
    /// The capturing device was the peripheral (e.g. a meter simulator's own capture).
    case peripheral = 1

    /// `central` or `peripheral`.
    public var description: String { self == .central ? "central" : "peripheral" }
}

/// One high-level GATT happening on an LE connection, in capture order.
///
/// Reads carry the value of the response, located at the frame of the response; writes are reported at
/// the request (with `.writeResponse` when the server acknowledges). `frame` is the frame that completed
/// the L2CAP PDU (its last ACL fragment).
public struct GATTEvent: Hashable, Sendable {
    /// 1-based frame number.
    public var frame: Int
    /// The capture time of that frame.
    public var timestamp: CaptureTimestamp
    /// 1-based session number (see `CaptureSession.index`).
    public var session: Int
    /// Controller index (0 for H4 captures).
    public var controllerIndex: UInt16
    /// HCI connection handle.
    public var connectionHandle: UInt16
    /// The peer's address, when the connection event was captured.
    public var peer: BluetoothAddress?
    /// Direction of the PDU that produced the event.
    public var direction: Direction
    /// What happened.
    public var kind: GATTEventKind

    /// An event with every field given (the decoder's, and tests').
    public init(
        frame: Int, timestamp: CaptureTimestamp, session: Int, controllerIndex: UInt16, connectionHandle: UInt16,
        peer: BluetoothAddress?, direction: Direction, kind: GATTEventKind
    ) {
        self.frame = frame
        self.timestamp = timestamp
        self.session = session
        self.controllerIndex = controllerIndex
        self.connectionHandle = connectionHandle
        self.peer = peer
        self.direction = direction
        self.kind = kind
    }
}

extension GATTEvent {
    /// True when the attribute of this event lives in the peer's GATT server (the capturing host is the
    /// client on this exchange), false when it lives in the capturing host's own server (the peer acts as
    /// a GATT client, e.g. a meter reading the phone's Device Name). Either side may be client and
    /// server on one connection, whatever its link-layer role: the side that answers a request, or that
    /// notifies, is the server. Connection-level events (no attribute) report true.
    public var attributeServedByPeer: Bool {
        switch self.kind {
        // Requests and commands travel client → server.
        case .write: self.direction == .sent
        // Responses, errors, notifications and indications travel server → client.
        case .read, .writeResponse, .error, .notification, .indication: self.direction == .received
        // Confirmations travel client → server.
        case .confirmation: self.direction == .sent
        default: true
        }
    }
}

/// What happened. Attributes carry the UUIDs learned from discovery (or reuse, or overrides) at that point.
public enum GATTEventKind: Hashable, Sendable {
    /// An LE connection was established (HCI LE (Enhanced) Connection Complete), or traffic appeared on a
    /// handle whose connection event is not in the capture (`peer` nil then).
    case connected(peer: BluetoothAddress?, addressType: AddressType?, role: LinkRole?)
    /// HCI Disconnection Complete; the reason is an HCI error code (0x13 remote user, 0x16 local host…).
    case disconnected(reason: UInt8)
    /// Exchange MTU completed: both proposals; the effective ATT MTU is the smaller one.
    case mtuExchanged(client: UInt16, server: UInt16)
    /// A Read, Read Blob (offset > 0) or Read By Type response value for one attribute.
    case read(GATTAttribute, value: [UInt8], offset: Int)
    /// A Write Request (`withResponse`), Write Command or Signed Write Command.
    case write(GATTAttribute, value: [UInt8], withResponse: Bool)
    /// The server acknowledged a Write Request.
    case writeResponse(GATTAttribute)
    /// Handle Value Notification (also each entry of a Multiple Handle Value Notification).
    case notification(GATTAttribute, value: [UInt8])
    /// Handle Value Indication.
    case indication(GATTAttribute, value: [UInt8])
    /// Handle Value Confirmation.
    case confirmation
    /// An ATT Error Response to `request` on `attribute`. Routine "Attribute Not Found" answers that end
    /// a discovery procedure are not reported.
    case error(request: ATTOpcode, GATTAttribute, code: ATTErrorCode)
    /// SMP Pairing Request seen (in `direction`).
    case pairingRequested
    /// SMP Pairing Failed with its reason (0x04 confirm value failed = wrong passkey, 0x05 not supported…).
    case pairingFailed(reason: UInt8)
    /// HCI Encryption Change: `status` 0 and `enabled` true means the link is now encrypted.
    case encryptionChanged(enabled: Bool, status: UInt8)
    /// Any other ATT PDU (prepare/execute write, read multiple, unknown opcodes), undecoded.
    case opaque(opcode: ATTOpcode, parameters: [UInt8])
}

/// Something in the capture that could not be taken at face value. Never fatal.
public struct CaptureAnomaly: Hashable, Sendable, CustomStringConvertible {
    /// The category, for filtering.
    public enum Kind: String, Hashable, Sendable {
        /// The file ends inside a record.
        case truncatedCapture
        /// A record stores fewer bytes than the packet had (snap length), or its lengths disagree.
        case snappedFrame
        /// The capturing tool lost packets (cumulative drop counter grew).
        case droppedPackets
        /// An HCI packet is shorter than its own header says.
        case malformedHCI
        /// ACL fragments do not add up to an L2CAP PDU.
        case reassembly
        /// An ATT PDU is too short or inconsistent.
        case malformedATT
        /// A response without a matching request.
        case unmatchedResponse
        /// A GATT value on a handle whose UUID is unknown (no discovery, no reuse, no override).
        case unknownHandle
        /// ATT traffic on a handle whose connection event is not in the capture.
        case missingConnectionEvent
        /// A connection handle was reused without a Disconnection Complete.
        case connectionReplaced
        /// A record header is impossible (absurd length); reading went on at the next plausible record.
        case corruptRecord
    }

    /// What sort of anomaly it is.
    public var kind: Kind
    /// 1-based frame number, when the anomaly is about one frame.
    public var frame: Int?
    /// 1-based session number, when the anomaly belongs to a connection.
    public var session: Int?
    /// The attribute involved, when known.
    public var attribute: GATTAttribute?
    /// One human sentence.
    public var reason: String

    /// An anomaly of `kind` with its sentence.
    public init(kind: Kind, frame: Int?, session: Int? = nil, attribute: GATTAttribute? = nil, reason: String) {
        self.kind = kind
        self.frame = frame
        self.session = session
        self.attribute = attribute
        self.reason = reason
    }

    /// The characteristic involved, when known.
    public var characteristic: BluetoothUUID? { self.attribute?.characteristic }

    /// `frame N: reason`, or the reason alone.
    public var description: String {
        (self.frame.map { "frame \($0): " } ?? "") + self.reason
    }
}

/// How a session came to know its peer's handle layout.
public enum DiscoverySource: Hashable, Sendable, CustomStringConvertible {
    /// The session ran service or characteristic discovery itself.
    case performed
    /// No discovery in this session; the layout learned earlier in the file for the same peer was reused.
    case reused(fromSession: Int)
    /// No discovery; the layout came from `GATTEventReader.Options.knownDatabases`.
    case provided
    /// No discovery and nothing to reuse; only handle overrides (if any) name the handles.
    case none

    /// `performed`, `reused from session N`, `provided` or `none`.
    public var description: String {
        switch self {
        case .performed: "performed"
        case .reused(let session): "reused from session \(session)"
        case .provided: "provided"
        case .none: "none"
        }
    }
}

/// Why a session ended.
public enum SessionEnd: Hashable, Sendable {
    /// HCI Disconnection Complete with this reason.
    case disconnected(reason: UInt8)
    /// The handle appeared in a new connection event without a disconnection.
    case replaced
    /// The controller index was closed or removed (monitor captures).
    case controllerRemoved
    /// The capture ended with the connection still open.
    case endOfCapture
}

/// One LE connection (a "session") as seen in the capture. Reported when it ends.
public struct CaptureSession: Hashable, Sendable {
    /// 1-based, in order of the connection's first frame.
    public var index: Int
    /// Controller index (0 for H4 captures).
    public var controllerIndex: UInt16
    /// The HCI connection handle.
    public var connectionHandle: UInt16
    /// The peer's address; nil when the connection event is not in the capture.
    public var peer: BluetoothAddress?
    /// How the peer's address was given.
    public var peerAddressType: AddressType?
    /// The capturing device's role.
    public var role: LinkRole?
    /// The frame that opened the session.
    public var firstFrame: Int
    /// The last frame that carried something of it.
    public var lastFrame: Int
    /// When the session opened.
    public var start: CaptureTimestamp
    /// When its last frame was captured.
    public var end: CaptureTimestamp
    /// Why it ended.
    public var ended: SessionEnd
    /// Effective ATT MTU at the end (23 unless exchanged).
    public var mtu: Int
    /// How the session knew its peer's handles.
    public var discovery: DiscoverySource
    /// What the session discovered itself (peer's GATT server).
    public var discovered: GATTDatabase
    /// The layout the session used: discovered, completed with reused or provided knowledge
    /// (overrides not included).
    public var database: GATTDatabase
    /// GATT events reported for this session.
    public var eventCount: Int
    /// True when SMP pairing failed at least once.
    public var pairingFailed: Bool
    /// True when the link became encrypted (HCI Encryption Change, enabled).
    public var encrypted: Bool
}

/// One item of the reader's output stream.
public enum CaptureItem: Hashable, Sendable {
    /// A GATT happening.
    case event(GATTEvent)
    /// Something not to be taken at face value.
    case anomaly(CaptureAnomaly)
    /// A session ended (disconnect, handle replaced, controller removed, end of capture).
    case sessionEnded(CaptureSession)
}

/// Counters over the whole read.
public struct CaptureStatistics: Hashable, Sendable {
    /// Records read.
    public var frames = 0
    /// Bytes read, record headers (24 each) included.
    public var bytes = 0
    /// ACL data packets.
    public var aclFrames = 0
    /// HCI event packets.
    public var hciEvents = 0
    /// Complete L2CAP PDUs on ATT or SMP channels.
    public var l2capPDUs = 0
    /// ATT PDUs among them.
    public var attPDUs = 0
    /// The last cumulative drop counter seen.
    public var droppedPackets = 0
    /// Damaged records skipped (``GATTEventReader/Options/skipCorruptRecords``).
    public var corruptRecords = 0
    /// All counters zero.
    public init() {}
}
