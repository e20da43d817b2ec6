public import JSON

extension Wire {
    /// An error reply of `io.sugard.HealthDataSync` with its parameters, one case per `error`
    /// declaration.
    public enum Failure: Sendable, Hashable {
        /// `MeterNotFound`: no meter with this id is known.
        case meterNotFound(meter: String, message: String?)
        /// `PersonNotFound`: no person with this name is known.
        case personNotFound(person: String, message: String?)
        /// `AdapterUnavailable`: no usable Bluetooth adapter (absent, powered off, or BlueZ not running).
        case adapterUnavailable(message: String?)
        /// `PermissionDenied`: the caller may not call `method` (read methods need the socket group,
        /// mutating ones the admin group or root).
        case permissionDenied(method: String, message: String?)
        /// `SyncInProgress`: a sync of this meter (or of every meter) is already running.
        case syncInProgress(meter: String?, message: String?)
        /// `StorageError`: the database could not be read or written.
        case storageError(code: String?, message: String?)
        /// `InvalidParameter`: a parameter has the right type but a value the method cannot use.
        case invalidParameter(parameter: String, message: String?)
        /// `PairingFailed`: pairing was refused, timed out, or the passkey was wrong.
        case pairingFailed(meter: String?, message: String?)
        /// `SyncFailed`: the sync failed; readings received before the failure were kept.
        case syncFailed(meter: String?, message: String?)
        /// `SlowConsumer`: a watcher fell too far behind; call `Watch` again for a fresh snapshot.
        case slowConsumer(message: String?)
        /// `ShuttingDown`: the daemon is stopping.
        case shuttingDown(message: String?)
        /// A file given to `Restore` is not a sound sugard database; nothing was changed.
        case invalidDatabase(message: String)

        /// The interface the errors belong to.
        public static let interface = "io.sugard.HealthDataSync"

        /// The error `name` (fully qualified, or the member name alone) with its parameters; nil for
        /// an error this interface does not declare (e.g. `org.varlink.service.MethodNotFound`).
        public init?(name: String, parameters: JSONObject) throws(WireError) {
            var member = Substring(name)
            if name.hasPrefix(Self.interface + ".") { member = name.dropFirst(Self.interface.count + 1) }
            let f = try WireFields(.object(parameters))
            let message: String? = try f.optional("message")
            switch member {
            case "MeterNotFound": self = .meterNotFound(meter: try f.required("meter"), message: message)
            case "PersonNotFound": self = .personNotFound(person: try f.required("person"), message: message)
            case "AdapterUnavailable": self = .adapterUnavailable(message: message)
            case "PermissionDenied": self = .permissionDenied(method: try f.required("method"), message: message)
            case "SyncInProgress": self = .syncInProgress(meter: try f.optional("meter"), message: message)
            case "StorageError": self = .storageError(code: try f.optional("code"), message: message)
            case "InvalidParameter": self = .invalidParameter(parameter: try f.required("parameter"), message: message)
            case "PairingFailed": self = .pairingFailed(meter: try f.optional("meter"), message: message)
            case "SyncFailed": self = .syncFailed(meter: try f.optional("meter"), message: message)
            case "SlowConsumer": self = .slowConsumer(message: message)
            case "ShuttingDown": self = .shuttingDown(message: message)
            case "InvalidDatabase": self = .invalidDatabase(message: try f.required("message"))
            default: return nil
            }
        }

        /// The member name, e.g. `MeterNotFound`.
        public var member: String {
            switch self {
            case .meterNotFound: return "MeterNotFound"
            case .personNotFound: return "PersonNotFound"
            case .adapterUnavailable: return "AdapterUnavailable"
            case .permissionDenied: return "PermissionDenied"
            case .syncInProgress: return "SyncInProgress"
            case .storageError: return "StorageError"
            case .invalidParameter: return "InvalidParameter"
            case .pairingFailed: return "PairingFailed"
            case .syncFailed: return "SyncFailed"
            case .slowConsumer: return "SlowConsumer"
            case .shuttingDown: return "ShuttingDown"
            case .invalidDatabase: return "InvalidDatabase"
            }
        }

        /// The one sentence the daemon sent, if any.
        public var message: String? {
            switch self {
            case .meterNotFound(_, let message), .personNotFound(_, let message), .adapterUnavailable(let message), .permissionDenied(_, let message),
                .syncInProgress(_, let message), .storageError(_, let message), .invalidParameter(_, let message),
                .pairingFailed(_, let message), .syncFailed(_, let message), .slowConsumer(let message),
                .shuttingDown(let message):
                return message
            case .invalidDatabase(let message):
                return message
            }
        }

        /// The error's parameters as the daemon sends them: every declared one, null when absent.
        public var parameters: JSONObject {
            let pairs: [(String, JSONValue)]
            switch self {
            case .meterNotFound(let meter, let message): pairs = [("meter", .string(meter)), ("message", .from(message))]
            case .personNotFound(let person, let message): pairs = [("person", .string(person)), ("message", .from(message))]
            case .permissionDenied(let method, let message): pairs = [("method", .string(method)), ("message", .from(message))]
            case .invalidParameter(let parameter, let message):
                pairs = [("parameter", .string(parameter)), ("message", .from(message))]
            case .syncInProgress(let meter, let message), .pairingFailed(let meter, let message), .syncFailed(let meter, let message):
                pairs = [("meter", .from(meter)), ("message", .from(message))]
            case .storageError(let code, let message): pairs = [("code", .from(code)), ("message", .from(message))]
            case .adapterUnavailable(let message), .slowConsumer(let message), .shuttingDown(let message):
                pairs = [("message", .from(message))]
            case .invalidDatabase(let message):
                pairs = [("message", .string(message))]
            }
            return JSONObject(pairs)
        }
    }
}
