import Glibc
import JSON
import Locking
import SystemIO

/// One interface a server offers: its description and the code behind its methods.
public protocol VarlinkInterfaceHandler: Sendable {
    /// The parsed interface description. Calls are validated against it before `handle` runs.
    var definition: VarlinkInterfaceDefinition { get }
    /// Member names of methods that must be called with `more: true`; others get
    /// `org.varlink.service.ExpectedMore`. Default: none.
    var methodsRequiringMore: Set<String> { get }
    /// Handles one validated call. Reply through `replier`; throwing sends the error as the final reply.
    /// Returning without a final reply sends `org.varlink.service.MethodNotImplemented`.
    ///
    /// The task is cancelled when the client disconnects or the server stops.
    func handle(_ call: VarlinkCall, replier: VarlinkReplier) async throws(VarlinkError)
}

extension VarlinkInterfaceHandler {
    /// No method requires `more`.
    public var methodsRequiringMore: Set<String> { [] }
}

/// A `VarlinkInterfaceHandler` made from a closure.
public struct VarlinkInterface: VarlinkInterfaceHandler {
    /// The interface description calls are validated against.
    public let definition: VarlinkInterfaceDefinition
    /// Member names of methods answered with `ExpectedMore` unless called with `more: true`.
    public let methodsRequiringMore: Set<String>
    /// The closure that handles every method of the interface.
    private let body: @Sendable (VarlinkCall, VarlinkReplier) async throws(VarlinkError) -> Void

    /// An interface whose every method `handler` handles (it switches on ``VarlinkCall/methodName``).
    public init(
        _ definition: VarlinkInterfaceDefinition, methodsRequiringMore: Set<String> = [],
        handler: @escaping @Sendable (VarlinkCall, VarlinkReplier) async throws(VarlinkError) -> Void
    ) {
        self.definition = definition
        self.methodsRequiringMore = methodsRequiringMore
        self.body = handler
    }

    /// Runs the closure.
    public func handle(_ call: VarlinkCall, replier: VarlinkReplier) async throws(VarlinkError) {
        try await self.body(call, replier)
    }
}

/// How and where a `VarlinkServer` listens, what it says about itself, and its limits.
public struct VarlinkServerConfiguration: Sendable {
    /// Where the listening socket comes from.
    public enum Listen: Sendable, Equatable {
        /// Bind a new socket at this path. A stale socket file is removed first; a path where a live server
        /// answers is refused. The file is removed again when the server stops.
        case path(String)
        /// Serve on an already bound and listening socket, e.g. fd 3 from systemd socket activation. The
        /// server closes it when it stops but never unlinks anything.
        case fileDescriptor(Int32)
    }

    /// The socket to serve on.
    public var listen: Listen
    /// Permission bits of a socket file the server creates. Default 0660.
    public var socketMode: UInt32 = 0o660
    /// Group to give a socket file the server creates; nil keeps the process's group.
    public var socketGroup: UInt32?

    /// `org.varlink.service.GetInfo` fields.
    public var vendor: String = ""
    /// `GetInfo` `product`.
    public var product: String = ""
    /// `GetInfo` `version`.
    public var version: String = ""
    /// `GetInfo` `url`.
    public var url: String = ""

    /// Open connections, in total. Default 4096 (as sd-varlink).
    public var maxConnections = 4096
    /// Open connections per peer uid, except `privilegedUIDs`. Default 1024 (as sd-varlink).
    public var maxConnectionsPerUID = 1024
    /// The per-uid cap is at most this share of the connections left to unprivileged peers (the
    /// total cap, after the open-files limit, minus `reservedConnections`), at least 1: with a share
    /// below 1, no single user can take every connection. Default 1 (no lowering).
    public var maxConnectionsPerUIDShare = 1.0
    /// What a peer refused by a connection cap can do (the end of the `hint` parameter of
    /// `org.varlink.protocol.TooManyConnections`; its start says who holds the connections).
    public var connectionCapAdvice = Self.defaultConnectionCapAdvice
    /// The advice used unless a service words its own.
    public static let defaultConnectionCapAdvice =
        "close connections you no longer need and try again, or ask the service's administrator to raise its connection limits"
    /// Largest message accepted, without its NUL. Bigger ones get `org.varlink.protocol.MessageTooLarge` and the
    /// connection is closed. Default 1 MiB.
    public var maxMessageBytes = 1 << 20
    /// Unread reply bytes a connection may hold before it counts as a slow reader. Default 1 MiB.
    public var maxPendingOutputBytes = 1 << 20
    /// A connection that stays over `maxPendingOutputBytes` this long is closed. Default 5 s.
    public var slowClientTimeout: Duration = .seconds(5)
    /// Unread reply bytes at which a connection is closed at once. Default 16 MiB (sd-varlink's buffer limit).
    public var hardMaxPendingOutputBytes = 16 << 20
    /// A connection with no call in progress and none received for this long is closed; `.zero` = never.
    /// Default 10 minutes.
    public var idleTimeout: Duration = .seconds(600)
    /// Bytes all connections together may hold in buffered input, unsent replies and messages being
    /// handled. Over it, the connection holding the most (more than its fair share) is closed, never
    /// the server. Default 16 MiB.
    public var memoryBudgetBytes = 16 << 20
    /// Connections, of `maxConnections`, kept for `privilegedUIDs` (which the per-uid cap does not
    /// limit either), so no other user can lock them out. Default 16.
    public var reservedConnections = 16
    /// Root and the server's own effective uid, by default.
    public var privilegedUIDs: Set<UInt32> = [0, geteuid()]
    /// Descriptors kept free for the process's own files (database, bus, logs): `run()` lowers
    /// `maxConnections` to the open-files limit (`RLIMIT_NOFILE`) minus this. Default 64.
    public var reservedDescriptors = 64
    /// Limits on parsing one message: nesting, values and keys, CPU time. Default: depth 64, 4 096
    /// values and keys (a call has a few dozen), 50 ms of CPU.
    public var parseLimits = JSONParseLimits(maxDepth: 64, maxElements: 4096, cpuBudget: .milliseconds(50))
    /// Peers that may call no method at all (decided once, at accept, from their credentials). Their
    /// messages are capped at `restrictedMessageBytes`; a bigger one gets `PermissionDenied` and the
    /// connection closes, so a refused peer cannot make the server parse a big payload. nil: nobody.
    public var isRestricted: (@Sendable (VarlinkPeer) -> Bool)?
    /// Largest message from a peer `isRestricted` selects. Default 4 KiB.
    public var restrictedMessageBytes = 4096
    /// Receives one line whenever a cap or the memory budget refuses or drops a connection (at most one
    /// line per kind per second, with a count of the ones held back). nil: silent.
    public var log: (@Sendable (String) -> Void)?

    /// A configuration with every default above, listening on `listen`.
    public init(listen: Listen) {
        self.listen = listen
    }

    /// The socket systemd passed (fd 3) when `LISTEN_PID` is this process and `LISTEN_FDS` ≥ 1, else nil.
    /// Unsets both variables so child processes do not inherit them.
    public static func systemdListeningSocket() -> Int32? {
        guard let pidText = getenv("LISTEN_PID"), let fdsText = getenv("LISTEN_FDS"),
            let pid = Int32(String(cString: pidText)), pid == getpid(),
            let count = Int(String(cString: fdsText)), count >= 1
        else { return nil }
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        let fd: Int32 = 3
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return fd
    }
}

/// Why a server could not start or stopped.
public enum VarlinkServerError: Error, Sendable, CustomStringConvertible {
    /// Another server answers on the socket path.
    case addressInUse(path: String)
    /// The configuration cannot work (e.g. the path does not fit a Unix socket address).
    case invalidConfiguration(String)
    /// `run()` was called a second time.
    case alreadyRunning
    /// A system call failed (bind, listen, epoll, thread start), with its errno.
    case system(VarlinkSystemError)

    /// One sentence for logs and the command line.
    public var description: String {
        switch self {
        case .addressInUse(let path): return "another Varlink server is already listening on \(path)"
        case .invalidConfiguration(let reason): return "invalid Varlink server configuration: \(reason)"
        case .alreadyRunning: return "the Varlink server is already running"
        case .system(let error): return error.description
        }
    }
}

/// A Varlink service over a Unix stream socket.
///
/// Concurrency: one dedicated I/O thread runs an epoll loop that owns the listening socket, every connection
/// and their buffers; it never blocks on a client. Each complete message goes to `run()`, which handles it in
/// a child task of its task group (at most one call in flight per connection, so replies stay in order).
/// Handlers reply through a `VarlinkReplier`, which queues bytes and wakes the loop through an eventfd. The
/// loop sleeps in `epoll_wait` with no timeout unless a deadline (slow reader, idle connection) is pending.
public final class VarlinkServer: Sendable {
    /// The listening socket before `run()` took it (`ready`) and after (`taken`); a second `run()`
    /// finds it taken.
    private enum ListenerState {
        /// The socket is bound and waits for `run()`.
        case ready(fd: Int32)
        /// `run()` took it (and closes it when it ends).
        case taken
    }

    /// The configuration the server was made with.
    public let configuration: VarlinkServerConfiguration
    /// Handlers by interface name (without `org.varlink.service`, which the server answers itself).
    private let handlers: [String: any VarlinkInterfaceHandler]
    /// `org.varlink.service` followed by the handlers' interfaces in registration order, for `GetInfo`.
    private let interfaceNames: [String]
    /// The parsed `org.varlink.service` description.
    private let service: VarlinkInterfaceDefinition
    /// The listening socket, until `run()` takes it.
    private let listener: Lock<ListenerState>
    /// The socket file this server bound, which it removes when it stops; nil for an adopted fd.
    private let createdPath: String?
    /// When a refused message was last logged (monotonic ns), and how many were not since.
    private let parseRefusals = Lock<(at: Int64, held: Int)>((0, 0))

    /// The path clients connect to, when the server bound one.
    public var socketPath: String? { self.createdPath }

    /// Creates the server and binds its socket (or adopts the given fd), so clients may connect (and wait in
    /// the backlog) as soon as this returns. Nothing is served until `run()`.
    public init(configuration: VarlinkServerConfiguration, handlers: [any VarlinkInterfaceHandler])
        throws(VarlinkServerError)
    {
        self.configuration = configuration
        var table: [String: any VarlinkInterfaceHandler] = [:]
        var names = [VarlinkServer.serviceInterface.name]
        for handler in handlers {
            let name = handler.definition.name
            guard name != VarlinkServer.serviceInterface.name, table[name] == nil else {
                throw .invalidConfiguration("interface \(name) is registered twice")
            }
            for method in handler.methodsRequiringMore where handler.definition.methods[method] == nil {
                throw .invalidConfiguration("interface \(name) has no method \(method) to require 'more' for")
            }
            table[name] = handler
            names.append(name)
        }
        self.handlers = table
        self.interfaceNames = names
        self.service = VarlinkServer.serviceInterface
        guard configuration.maxMessageBytes > 0, configuration.maxConnections > 0,
            configuration.maxConnectionsPerUID > 0, configuration.maxPendingOutputBytes > 0,
            configuration.hardMaxPendingOutputBytes >= configuration.maxPendingOutputBytes
        else {
            throw .invalidConfiguration("limits must be positive and the hard output limit at least the soft one")
        }
        switch configuration.listen {
        case .fileDescriptor(let fd):
            self.listener = Lock(.ready(fd: fd))
            self.createdPath = nil
        case .path(let path):
            let fd = try Self.bind(path: path, mode: configuration.socketMode, group: configuration.socketGroup)
            self.listener = Lock(.ready(fd: fd))
            self.createdPath = path
        }
    }

    deinit {
        if case .ready(let fd) = self.listener.withLock({ $0 }) {
            close(fd)
            if let path = self.createdPath { unlink(path) }
        }
    }

    /// Binds and listens on a new non-blocking socket at `path` with `mode` and `group`. A socket file
    /// nobody answers on is replaced; one a live server answers on throws ``VarlinkServerError/addressInUse(path:)``.
    private static func bind(path: String, mode: UInt32, group: UInt32?) throws(VarlinkServerError) -> Int32 {
        guard let address = Sys.unixAddress(path) else {
            throw .invalidConfiguration("socket path '\(path)' is empty or longer than 107 bytes")
        }
        // A socket file may be left over from a crash; remove it only if nobody answers on it.
        switch Sys.connectUnix(path) {
        case .success(let probe):
            close(probe)
            throw .addressInUse(path: path)
        case .failure(let error) where error.errno == ECONNREFUSED:
            var info = stat()
            if lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFSOCK { unlink(path) }
        case .failure:
            break
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw .system(VarlinkSystemError(call: "socket", subject: path, errno: errno)) }
        func fail(_ call: String) -> VarlinkServerError {
            let error = VarlinkSystemError(call: call, subject: path, errno: errno)
            close(fd)
            return .system(error)
        }
        guard Sys.withAddress(address, { Glibc.bind(fd, $0, $1) }) == 0 else { throw fail("bind") }
        guard chmod(path, mode_t(mode)) == 0 else {
            let error = fail("chmod")
            unlink(path)
            throw error
        }
        if let group {
            guard chown(path, uid_t.max, gid_t(group)) == 0 else {
                let error = fail("chown")
                unlink(path)
                throw error
            }
        }
        guard listen(fd, SOMAXCONN) == 0 else {
            let error = fail("listen")
            unlink(path)
            throw error
        }
        return fd
    }

    /// The soft open-files limit, when it can be read and is finite.
    static func openFilesLimit() -> Int? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else { return nil }
        return Int(clamping: limit.rlim_cur)
    }

    /// `maxConnections`, lowered so connections never use the descriptors the process needs itself.
    static func connectionCap(_ configuration: VarlinkServerConfiguration) -> Int {
        guard let files = self.openFilesLimit() else { return configuration.maxConnections }
        return max(1, min(configuration.maxConnections, files - configuration.reservedDescriptors))
    }

    /// The caps `run()` enforces with the open-files limit as it is now: connections in total, and
    /// per uid other than `privilegedUIDs`.
    public var connectionCaps: (total: Int, perUID: Int) {
        let total = Self.connectionCap(self.configuration)
        return (total, Self.perUIDCap(self.configuration, connectionCap: total))
    }

    /// `maxConnectionsPerUID`, lowered to `maxConnectionsPerUIDShare` of the connections unprivileged
    /// peers may use.
    static func perUIDCap(_ configuration: VarlinkServerConfiguration, connectionCap: Int) -> Int {
        let shared = connectionCap - min(configuration.reservedConnections, connectionCap / 2)
        let share = min(1, max(0, configuration.maxConnectionsPerUIDShare))
        return max(1, min(configuration.maxConnectionsPerUID, Int(Double(shared) * share)))
    }

    /// A duration in whole nanoseconds, as the loop keeps its deadlines.
    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// Serves until the calling task is cancelled; then closes every connection (handlers see their
    /// repliers close and their tasks cancelled), waits for running handlers, closes the listening socket and
    /// removes the socket file the server created. Returns normally after a cancellation; throws if the
    /// socket could not be served (e.g. `epoll_wait` failed).
    public func run() async throws(VarlinkServerError) {
        let fd = try self.listener.withLock { state throws(VarlinkServerError) -> Int32 in
            guard case .ready(let fd) = state else { throw .alreadyRunning }
            state = .taken
            return fd
        }
        let configuration = self.configuration
        let connectionCap = Self.connectionCap(configuration)
        if connectionCap < configuration.maxConnections {
            configuration.log?(
                "serving at most \(connectionCap) connections, not \(configuration.maxConnections): the open-files limit is \(Self.openFilesLimit() ?? 0) and \(configuration.reservedDescriptors) descriptors are kept for the service's own files")
        }
        let perUIDCap = Self.perUIDCap(configuration, connectionCap: connectionCap)
        var limits = LoopLimits(
            maxConnections: connectionCap,
            maxConnectionsPerUID: perUIDCap,
            maxMessageBytes: configuration.maxMessageBytes,
            maxPendingOutputBytes: configuration.maxPendingOutputBytes,
            slowClientTimeout: Self.nanoseconds(configuration.slowClientTimeout),
            idleTimeout: Self.nanoseconds(configuration.idleTimeout))
        limits.memoryBudget = configuration.memoryBudgetBytes
        limits.reservedConnections = min(configuration.reservedConnections, connectionCap / 2)
        limits.privilegedUIDs = configuration.privilegedUIDs
        limits.isRestricted = configuration.isRestricted
        limits.restrictedMessageBytes = configuration.restrictedMessageBytes
        limits.log = configuration.log
        limits.connectionCapAdvice = configuration.connectionCapAdvice
        let loop: EventLoop
        do {
            loop = try EventLoop(listenFD: fd, unlinkPath: self.createdPath, limits: limits)
        } catch {
            close(fd)
            if let path = self.createdPath { unlink(path) }
            throw .system(error)
        }
        let (stream, continuation) = HandOffStream.makeStream(of: IncomingMessage.self)
        do {
            try startThread { loop.run(deliver: continuation) }
        } catch {
            throw .system(error)
        }
        await withDiscardingTaskGroup { group in
            await withTaskCancellationHandler {
                for await message in stream {
                    group.addTask { await self.dispatch(message, loop: loop) }
                }
            } onCancel: {
                loop.requestStop()
            }
            loop.requestStop()
            group.cancelAll()
        }
        await loop.stopped.wait(cancellable: false)
        if let failure = loop.failure.withLock({ $0 }) { throw .system(failure) }
    }

    // MARK: Calls

    /// Handles one complete message from the loop: parses it within ``VarlinkServerConfiguration/parseLimits``,
    /// checks the envelope (`method`, `parameters`, the `more`/`oneway`/`upgrade` flags) and routes the call.
    /// A malformed envelope gets `org.varlink.protocol.InvalidMessage` and the connection is closed. `more`
    /// is ignored on a `oneway` call.
    private func dispatch(_ message: IncomingMessage, loop: EventLoop) async {
        let hard = self.configuration.hardMaxPendingOutputBytes
        func reject(_ reason: String) {
            let replier = VarlinkReplier(
                connection: message.connection, loop: loop, more: false, oneway: false, hardOutputLimit: hard)
            replier.abort(VarlinkError(VarlinkError.ProtocolError.invalidMessage, ["reason": .string(reason)]))
        }
        let value: JSONValue
        do {
            value = try JSONValue(parsing: message.bytes, limits: self.configuration.parseLimits)
        } catch {
            if error.reason.contains("values and keys") || error.reason.contains("CPU budget") || error.reason.contains("nesting") {
                self.logParseRefusal(error, peer: message.connection.peer)
            }
            return reject("the message is not valid JSON (\(error))")
        }
        guard case .object(let object) = value else { return reject("the message is not a JSON object") }
        guard case .string(let method)? = object["method"] else {
            return reject("the message has no \"method\" string")
        }
        var parameters = JSONObject()
        switch object["parameters"] {
        case nil, .null?: break
        case .object(let given)?: parameters = given
        default: return reject("\"parameters\" must be an object")
        }
        var flags: [Bool] = []
        for key in ["more", "oneway", "upgrade"] {
            switch object[key] {
            case nil, .null?: flags.append(false)
            case .bool(let flag)?: flags.append(flag)
            default: return reject("\"\(key)\" must be a boolean")
            }
        }
        let (more, oneway, upgrade) = (flags[0], flags[1], flags[2])
        let replier = VarlinkReplier(
            connection: message.connection, loop: loop, more: more && !oneway, oneway: oneway, hardOutputLimit: hard)
        defer { replier.complete(method: method) }
        let call = VarlinkCall(
            method: method, parameters: parameters, more: more && !oneway, oneway: oneway,
            peer: message.connection.peer)
        do throws(VarlinkError) {
            try await self.route(call, upgrade: upgrade, replier: replier)
        } catch {
            replier.fail(error)
        }
    }

    /// Logs a message refused by `parseLimits`, at most once a second.
    private func logParseRefusal(_ error: JSONParseError, peer: VarlinkPeer) {
        guard let log = self.configuration.log else { return }
        let now = monotonicNanoseconds()
        let held = self.parseRefusals.withLock { state -> Int? in
            guard now - state.at >= 1_000_000_000 || state.at == 0 else {
                state.held += 1
                return nil
            }
            defer { state = (now, 0) }
            return state.held
        }
        guard let held else { return }
        log("refused a message from uid \(peer.uid) (pid \(peer.pid)) over the parse limits: \(error)" + (held > 0 ? " (and \(held) more like it)" : ""))
    }

    /// Sends a validated call to `org.varlink.service` or to its interface's handler. Throws
    /// `MethodNotFound`, `InterfaceNotFound`, `InvalidParameter`, `ExpectedMore`, or
    /// `MethodNotImplemented` for an `upgrade` (not supported).
    private func route(_ call: VarlinkCall, upgrade: Bool, replier: VarlinkReplier) async throws(VarlinkError) {
        guard let dot = call.method.lastIndex(of: "."), dot != call.method.startIndex else {
            throw .methodNotFound(call.method)
        }
        let interface = call.interface
        let member = call.methodName
        if interface == self.service.name {
            try self.validate(call, member: member, in: self.service)
            return self.serviceCall(member: member, call.parameters, replier: replier)
        }
        guard let handler = self.handlers[interface] else { throw .interfaceNotFound(interface) }
        try self.validate(call, member: member, in: handler.definition)
        if handler.methodsRequiringMore.contains(member) && !call.more && !call.oneway { throw .expectedMore }
        // Protocol upgrades hand the raw connection to the handler; this server does not support them.
        if upgrade { throw .methodNotImplemented(call.method) }
        try await Self.runCancellable(handler, call, replier)
    }

    /// Throws `MethodNotFound` for an undeclared method, `InvalidParameter` (naming the top-level
    /// parameter) when the parameters do not match its input.
    private func validate(_ call: VarlinkCall, member: String, in definition: VarlinkInterfaceDefinition)
        throws(VarlinkError)
    {
        guard definition.methods[member] != nil else { throw .methodNotFound(call.method) }
        do {
            try definition.validateCall(method: member, parameters: call.parameters)
        } catch {
            throw .invalidParameter(error.parameter)
        }
    }

    /// Runs the handler in a child task that is cancelled as soon as the connection closes.
    private static func runCancellable(
        _ handler: any VarlinkInterfaceHandler, _ call: VarlinkCall, _ replier: VarlinkReplier
    ) async throws(VarlinkError) {
        let outcome = await withTaskGroup(of: VarlinkError?.self) { group -> VarlinkError? in
            group.addTask {
                do throws(VarlinkError) {
                    try await handler.handle(call, replier: replier)
                    return nil
                } catch {
                    return error
                }
            }
            group.addTask {
                await replier.waitClosed()
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            var result = first
            while let next = await group.next() {
                if result == nil { result = next }
            }
            return result
        }
        if let outcome { throw outcome }
    }

    /// Answers `GetInfo` and `GetInterfaceDescription` from the configuration and the registered interfaces.
    private func serviceCall(member: String, _ parameters: JSONObject, replier: VarlinkReplier) {
        switch member {
        case "GetInfo":
            replier.reply([
                "vendor": .string(self.configuration.vendor),
                "product": .string(self.configuration.product),
                "version": .string(self.configuration.version),
                "url": .string(self.configuration.url),
                "interfaces": .array(self.interfaceNames.map { .string($0) }),
            ])
        case "GetInterfaceDescription":
            let name = parameters["interface"]?.stringValue ?? ""
            if name == self.service.name {
                replier.reply(["description": .string(self.service.text)])
            } else if let handler = self.handlers[name] {
                replier.reply(["description": .string(handler.definition.text)])
            } else {
                replier.fail(.interfaceNotFound(name))
            }
        default:
            replier.fail(.methodNotImplemented("\(self.service.name).\(member)"))
        }
    }

    /// The `org.varlink.service` interface every server provides.
    public static let serviceInterface: VarlinkInterfaceDefinition = {
        do {
            return try VarlinkInterfaceDefinition(description: serviceDescription)
        } catch {
            fatalError("built-in org.varlink.service description does not parse: \(error)")
        }
    }()

    /// The `org.varlink.service` description text, as the Varlink specification words it.
    static let serviceDescription = """
        # The Varlink Service Interface is provided by every varlink service. It
        # describes the service and the interfaces it implements.
        interface org.varlink.service

        # Get a list of all the interfaces a service provides and information
        # about the implementation.
        method GetInfo() -> (
          vendor: string,
          product: string,
          version: string,
          url: string,
          interfaces: []string
        )

        # Get the description of an interface that is implemented by this service.
        method GetInterfaceDescription(interface: string) -> (description: string)

        # The requested interface was not found.
        error InterfaceNotFound (interface: string)

        # The requested method was not found
        error MethodNotFound (method: string)

        # The interface defines the requested method, but the service does not
        # implement it.
        error MethodNotImplemented (method: string)

        # One of the passed parameters is invalid.
        error InvalidParameter (parameter: string)

        # Client is denied access
        error PermissionDenied ()

        # Method is expected to be called with 'more' set to true, but wasn't
        error ExpectedMore ()

        """
}
