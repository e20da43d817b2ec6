/// An error from a D-Bus operation: either an error reply from the peer (its D-Bus error name and
/// message, e.g. `org.bluez.Error.AuthenticationFailed`) or a local failure.
public struct DBusError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is; `name` carries the exact D-Bus error name.
    public enum Kind: Sendable, Hashable {
        /// The peer (or the bus) answered with an error reply.
        case remote
        /// No reply came within the call's timeout.
        case timeout
        /// The connection to the bus is gone (or was closed).
        case disconnected
        /// The calling task was cancelled.
        case cancelled
        /// Connecting to the bus failed.
        case connectionFailed
        /// A name, path, signature or value cannot be sent on D-Bus.
        case invalidArgument
        /// A message arrived that cannot be decoded.
        case invalidMessage
        /// The request is not valid in the current state (e.g. a path already exported).
        case invalidState
    }

    /// What kind of failure this is, for callers that branch on it (a timeout is retried, a remote error reported).
    public var kind: Kind
    /// The D-Bus error name, e.g. `org.bluez.Error.NotPermitted`.
    public var name: String
    /// The human-readable message that came with the error.
    public var message: String

    /// An error of `kind` with its D-Bus `name` and `message`.
    public init(kind: Kind, name: String, message: String) {
        self.kind = kind
        self.name = name
        self.message = message
    }

    /// `name: message`.
    public var description: String { "\(self.name): \(self.message)" }

    /// An error reply with this name and message (the form a `DBusIncomingCall` replies with).
    public static func remote(_ name: String, _ message: String) -> DBusError {
        DBusError(kind: .remote, name: name, message: message)
    }

    /// `what` (e.g. "Calling Connect") failed because the connection is closed.
    static func disconnected(_ what: String) -> DBusError {
        DBusError(
            kind: .disconnected, name: Names.disconnected,
            message: "\(what) failed because the D-Bus connection is closed.")
    }

    /// `what` was given up because the calling task was cancelled.
    static func cancelled(_ what: String) -> DBusError {
        DBusError(kind: .cancelled, name: Names.cancelled, message: "\(what) was cancelled.")
    }

    /// Something this side wanted to send breaks the D-Bus rules; caught before libdbus sees it.
    static func invalidArgument(_ message: String) -> DBusError {
        DBusError(kind: .invalidArgument, name: Names.invalidArgs, message: message)
    }

    /// A received message (or its arguments) could not be decoded.
    static func invalidMessage(_ message: String) -> DBusError {
        DBusError(kind: .invalidMessage, name: Names.invalidMessage, message: message)
    }

    /// Well-known D-Bus error names.
    public enum Names {
        /// The generic failure.
        public static let failed = "org.freedesktop.DBus.Error.Failed"
        /// No reply within the timeout (what ``Kind/timeout`` carries).
        public static let noReply = "org.freedesktop.DBus.Error.NoReply"
        /// The connection is closed.
        public static let disconnected = "org.freedesktop.DBus.Error.Disconnected"
        /// Arguments of the wrong type or value.
        public static let invalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
        /// The object has no such method (also our reply to a call of an unexported interface member).
        public static let unknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"
        /// No object at that path.
        public static let unknownObject = "org.freedesktop.DBus.Error.UnknownObject"
        /// Nobody owns the destination name (e.g. bluetoothd is not running).
        public static let serviceUnknown = "org.freedesktop.DBus.Error.ServiceUnknown"
        /// The name has no owner (from `GetNameOwner`).
        public static let nameHasNoOwner = "org.freedesktop.DBus.Error.NameHasNoOwner"
        /// Local (not sent on the wire): the calling task was cancelled.
        public static let cancelled = "io.sugard.DBus.Error.Cancelled"
        /// Local (not sent on the wire): an incoming message could not be decoded.
        public static let invalidMessage = "io.sugard.DBus.Error.InvalidMessage"
        /// Local (not sent on the wire): the request is not valid in the current state.
        public static let invalidState = "io.sugard.DBus.Error.InvalidState"
    }
}
