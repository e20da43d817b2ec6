public import JSON

/// The credentials of the process on the other end of a connection, as the kernel reported them when it
/// connected (`SO_PEERCRED`), plus its supplementary groups when they could be read.
public struct VarlinkPeer: Sendable, Hashable {
    /// The peer's process id when it connected (the process may have exited since).
    public var pid: Int32
    /// The peer's effective user id: what authorisation decides on.
    public var uid: UInt32
    /// The peer's effective primary group id.
    public var gid: UInt32
    /// Supplementary group ids (`SO_PEERGROUPS`, else the `Groups:` line of `/proc/<pid>/status`); empty
    /// when neither was available. Best effort: authorise on `uid`/`gid` first.
    public var groups: [UInt32]

    /// Credentials with every field given.
    public init(pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32]) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.groups = groups
    }

    /// True when `gid` is the peer's primary group or one of its supplementary groups.
    public func isMember(ofGroup gid: UInt32) -> Bool {
        self.gid == gid || self.groups.contains(gid)
    }
}

/// A Varlink error reply: a fully qualified error name (`org.example.ping.Busy`) and its parameters.
public struct VarlinkError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The fully qualified error name, e.g. `org.varlink.service.InvalidParameter`.
    public var name: String
    /// The error's parameters, sent as the reply's `parameters` object (empty: `{}`).
    public var parameters: JSONObject

    /// An error `name` with `parameters` (none by default).
    public init(_ name: String, _ parameters: JSONObject = [:]) {
        self.name = name
        self.parameters = parameters
    }

    /// The name, followed by the parameters as compact JSON when there are any.
    public var description: String {
        self.parameters.count == 0 ? self.name : "\(self.name) \(JSONValue.object(self.parameters).serialized())"
    }

    /// `org.varlink.service.InterfaceNotFound(interface)`.
    public static func interfaceNotFound(_ interface: String) -> VarlinkError {
        VarlinkError("org.varlink.service.InterfaceNotFound", ["interface": .string(interface)])
    }

    /// `org.varlink.service.MethodNotFound(method)`; `method` is fully qualified.
    public static func methodNotFound(_ method: String) -> VarlinkError {
        VarlinkError("org.varlink.service.MethodNotFound", ["method": .string(method)])
    }

    /// `org.varlink.service.MethodNotImplemented(method)`; `method` is fully qualified.
    public static func methodNotImplemented(_ method: String) -> VarlinkError {
        VarlinkError("org.varlink.service.MethodNotImplemented", ["method": .string(method)])
    }

    /// `org.varlink.service.InvalidParameter(parameter)`.
    public static func invalidParameter(_ parameter: String) -> VarlinkError {
        VarlinkError("org.varlink.service.InvalidParameter", ["parameter": .string(parameter)])
    }

    /// `org.varlink.service.PermissionDenied()`.
    public static let permissionDenied = VarlinkError("org.varlink.service.PermissionDenied")

    /// `org.varlink.service.ExpectedMore()`: the method must be called with `more: true`.
    public static let expectedMore = VarlinkError("org.varlink.service.ExpectedMore")

    /// Errors this library sends when a connection breaks the protocol or a server limit, right before it
    /// closes the connection. They are not part of `org.varlink.service`; each carries a `reason` string.
    public enum ProtocolError {
        /// The bytes received were not a Varlink call (invalid JSON, not an object, no `method`, bad flags).
        public static let invalidMessage = "org.varlink.protocol.InvalidMessage"
        /// A message grew past the server's size limit before its terminating NUL.
        public static let messageTooLarge = "org.varlink.protocol.MessageTooLarge"
        /// The server is at its total or per-user connection limit.
        public static let tooManyConnections = "org.varlink.protocol.TooManyConnections"
    }
}

/// One method call, as a handler receives it. Parameters have already been checked against the interface
/// description.
public struct VarlinkCall: Sendable {
    /// The fully qualified method name, e.g. `org.example.ping.Ping`.
    public var method: String
    /// The call's parameters, already checked against the method's input type in the interface.
    public var parameters: JSONObject
    /// The client asked for several replies (`more: true`).
    public var more: Bool
    /// The client wants no reply (`oneway: true`); the server drops whatever the handler replies.
    public var oneway: Bool
    /// Who made the call: the credentials of the connection it arrived on.
    public var peer: VarlinkPeer

    /// A call with every field given.
    public init(method: String, parameters: JSONObject, more: Bool, oneway: Bool, peer: VarlinkPeer) {
        self.method = method
        self.parameters = parameters
        self.more = more
        self.oneway = oneway
        self.peer = peer
    }

    /// The interface part of `method` (`org.example.ping`).
    public var interface: String {
        guard let dot = self.method.lastIndex(of: ".") else { return "" }
        return String(self.method[..<dot])
    }

    /// The member part of `method` (`Ping`).
    public var methodName: String {
        guard let dot = self.method.lastIndex(of: ".") else { return self.method }
        return String(self.method[self.method.index(after: dot)...])
    }
}
