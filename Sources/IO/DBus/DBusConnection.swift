internal import CDBus
import Glibc
import Synchronization
import Locking

/// Which bus to connect to.
public enum DBusBus: Sendable, Hashable {
    /// The system bus (honours `DBUS_SYSTEM_BUS_ADDRESS`).
    case system
    /// The session bus (honours `DBUS_SESSION_BUS_ADDRESS`).
    case session
    /// A message bus at an explicit address such as `unix:path=/run/dbus/system_bus_socket`.
    case address(String)
}

/// A signal received from the bus.
public struct DBusSignal: Sendable, Hashable {
    /// The sender's unique name (e.g. `:1.42`).
    public var sender: String?
    /// The object path that emitted the signal.
    public var path: String
    /// The signal's interface, e.g. `org.freedesktop.DBus.Properties`.
    public var interface: String
    /// The signal's name, e.g. `PropertiesChanged`.
    public var member: String
    /// The signal's arguments, decoded.
    public var arguments: [DBusValue]
}

/// Which signals a subscription receives. Every field that is set must match; the bus filters with the
/// same rule and the connection filters again locally (a well-known `sender` is resolved to its current
/// owner, so signals from an earlier owner or an impostor are dropped).
public struct DBusMatchRule: Sendable, Hashable {
    /// Only signals from this bus name; a well-known name is resolved to its current owner.
    public var sender: String?
    /// Only signals from exactly this object path (not together with `pathNamespace`).
    public var path: String?
    /// Matches this path and every path below it.
    public var pathNamespace: String?
    /// Only signals of this interface.
    public var interface: String?
    /// Only signals of this name.
    public var member: String?
    /// Matches when the first argument is this string.
    public var arg0: String?

    /// A rule from the fields given; nil fields match anything.
    public init(
        sender: String? = nil, path: String? = nil, pathNamespace: String? = nil, interface: String? = nil,
        member: String? = nil, arg0: String? = nil
    ) {
        self.sender = sender
        self.path = path
        self.pathNamespace = pathNamespace
        self.interface = interface
        self.member = member
        self.arg0 = arg0
    }

    /// The rule in the bus's `AddMatch` syntax.
    public var ruleString: String {
        var parts = ["type='signal'"]
        func add(_ key: String, _ value: String?) {
            guard let value else { return }
            // Inside quotes only the apostrophe needs escaping: close, escaped quote, reopen.
            let escaped = value.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''")
            parts.append("\(key)='\(escaped)'")
        }
        add("sender", self.sender)
        add("path", self.path)
        add("path_namespace", self.pathNamespace)
        add("interface", self.interface)
        add("member", self.member)
        add("arg0", self.arg0)
        return parts.joined(separator: ",")
    }

    /// Throws ``DBusError/Kind/invalidArgument`` for an invalid name or path, a NUL in `arg0`, or both
    /// `path` and `pathNamespace`.
    func validate() throws(DBusError) {
        if let sender { try Validate.busName(sender) }
        if let path { try Validate.path(path) }
        if let pathNamespace { try Validate.path(pathNamespace) }
        if let interface { try Validate.interface(interface) }
        if let member { try Validate.member(member) }
        if let arg0, arg0.utf8.contains(0) {
            throw DBusError.invalidArgument("A match rule's arg0 cannot contain a NUL character.")
        }
        if self.path != nil && self.pathNamespace != nil {
            throw DBusError.invalidArgument("A match rule cannot have both path and path_namespace.")
        }
    }

    /// The local check of path, path namespace, interface and member (sender and `arg0` are checked
    /// by the loop, which knows the owners and the arguments).
    func matchesHeader(path: String, interface: String, member: String) -> Bool {
        if let expected = self.path, expected != path { return false }
        if let namespace = self.pathNamespace, namespace != "/", path != namespace,
            !path.hasPrefix(namespace + "/")
        {
            return false
        }
        if let expected = self.interface, expected != interface { return false }
        if let expected = self.member, expected != member { return false }
        return true
    }

    /// Whether the sender is a well-known name that has to be resolved to its unique owner.
    var needsOwnerTracking: Bool {
        guard let sender = self.sender else { return false }
        return !sender.hasPrefix(":") && sender != "org.freedesktop.DBus"
    }
}

/// A method call that arrived at an exported object. Reply exactly once with `reply(_:)` or
/// `reply(error:)`; a call dropped without a reply is answered with `org.freedesktop.DBus.Error.Failed`.
public final class DBusIncomingCall: Sendable {
    /// The caller's unique name.
    public let sender: String?
    /// The object path that was called.
    public let path: String
    /// The interface the caller named (optional in D-Bus calls).
    public let interface: String?
    /// The method name.
    public let member: String
    /// The call's arguments, decoded.
    public let arguments: [DBusValue]
    /// Whether the sender was, when the call arrived, the current owner of the name the object was
    /// exported for (`exportObject(at:trustedCaller:)`); true when the export names none.
    public let isFromTrustedCaller: Bool

    /// The loop that sends the reply.
    private let handle: LoopHandle
    /// The call's serial, which the reply refers to.
    private let serial: UInt32
    /// The caller asked for no reply: replies are counted but not sent.
    private let noReply: Bool
    /// Set by the first reply; later ones are ignored.
    private let replied = Atomic<Bool>(false)

    init(
        handle: LoopHandle, sender: String?, path: String, interface: String?, member: String,
        arguments: [DBusValue], serial: UInt32, noReply: Bool, isFromTrustedCaller: Bool
    ) {
        self.handle = handle
        self.isFromTrustedCaller = isFromTrustedCaller
        self.sender = sender
        self.path = path
        self.interface = interface
        self.member = member
        self.arguments = arguments
        self.serial = serial
        self.noReply = noReply
    }

    deinit {
        if !self.replied.load(ordering: .acquiring) {
            self.sendError(name: DBusError.Names.failed, message: "The object at \(self.path) did not answer \(self.member).")
        }
    }

    /// Replies with these return values. Throws (and does not count as a reply) if a value cannot be sent.
    public func reply(_ values: [DBusValue] = []) throws(DBusError) {
        let message = try OwnedMessage.methodReturn(
            destination: self.sender, replySerial: self.serial, arguments: values)
        guard self.replied.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        guard !self.noReply else { return }
        self.handle.enqueue { core in core?.send(message) }
    }

    /// Replies with a D-Bus error (`error.name` and `error.message`); an invalid name becomes
    /// `org.freedesktop.DBus.Error.Failed`.
    public func reply(error: DBusError) {
        guard self.replied.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        self.sendError(name: error.name, message: error.message)
    }

    /// Sends an error reply, falling back to `org.freedesktop.DBus.Error.Failed` when `name` is invalid.
    private func sendError(name: String, message text: String) {
        guard !self.noReply else { return }
        let message =
            (try? OwnedMessage.errorReply(destination: self.sender, replySerial: self.serial, name: name, text: text))
            ?? (try? OwnedMessage.errorReply(
                destination: self.sender, replySerial: self.serial, name: DBusError.Names.failed, text: text))
        guard let message else { return }
        self.handle.enqueue { core in core?.send(message) }
    }
}

/// An object path this connection answers method calls at. Iterate `calls` and reply to each one; the
/// object stays exported until `unexport()`, until this handle is released, or until `calls` is dropped.
public final class DBusExportedObject: Sendable {
    /// The object path served.
    public let path: String
    /// Incoming method calls at `path`, in arrival order; finishes when unexported or disconnected.
    public let calls: HandOffStream<DBusIncomingCall>
    /// Finishing it unexports the object (on the loop thread).
    private let continuation: HandOffStream<DBusIncomingCall>.Continuation

    init(path: String, calls: HandOffStream<DBusIncomingCall>, continuation: HandOffStream<DBusIncomingCall>.Continuation)
    {
        self.path = path
        self.calls = calls
        self.continuation = continuation
    }

    /// Stops answering calls at `path` (further calls get `UnknownMethod` from libdbus).
    public func unexport() {
        self.continuation.finish()
    }

    deinit {
        self.continuation.finish()
    }
}

/// A private connection to a D-Bus message bus, driven by its own event-loop thread.
///
/// All libdbus calls on the connection happen on that one thread (it polls the connection's file
/// descriptors and an eventfd that other threads use to hand it work); this object only enqueues work.
/// When the bus goes away the connection ends (the process never exits): every call in flight fails with
/// `DBusError.Kind.disconnected`, every stream finishes and `waitUntilDisconnected()` returns. To
/// reconnect, connect again.
public final class DBusConnection: Sendable {
    /// The event loop's job queue.
    private let handle: LoopHandle
    /// Connected or not, and the unique name.
    private let state: ConnectionState
    /// Ids for subscriptions and exports.
    private let nextID = Atomic<UInt64>(0)

    private init(handle: LoopHandle, state: ConnectionState) {
        self.handle = handle
        self.state = state
    }

    deinit {
        self.close()
    }

    /// Connects to a bus and registers (`Hello`), on a new event-loop thread.
    public static func connect(to bus: DBusBus = .system) async throws(DBusError) -> DBusConnection {
        let handle = try LoopHandle()
        let state = ConnectionState()
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, DBusError>, Never>) in
            LoopThread.start(core: LoopCore(handle: handle, state: state), bus: bus) { result in
                continuation.resume(returning: result)
            }
        }
        try result.get()
        return DBusConnection(handle: handle, state: state)
    }

    /// This connection's unique name on the bus (e.g. `:1.7`).
    public var uniqueName: String { self.state.uniqueName }

    /// Whether the connection is still up.
    public var isConnected: Bool { self.state.isConnected }

    /// Returns once the connection has ended (bus gone or `close()`); immediately if it already has.
    public func waitUntilDisconnected() async {
        await self.state.waitUntilDisconnected()
    }

    /// Closes the connection; calls in flight fail with `.disconnected`. Safe to call more than once.
    public func close() {
        self.handle.enqueue { core in core?.requestStop() }
    }

    // MARK: Calls

    /// Calls a method and returns its reply's values.
    ///
    /// - Parameters:
    ///   - destination: the bus name to call (nil only on peer-to-peer links).
    ///   - timeout: how long to wait for the reply; nil means libdbus's default (25 s).
    /// - Throws: `DBusError` with kind `.remote` and the peer's error name for error replies, `.timeout`,
    ///   `.disconnected`, `.cancelled` (the task was cancelled; the reply is then ignored) or `.invalidArgument`.
    public func call(
        destination: String?, path: String, interface: String?, method: String, arguments: [DBusValue] = [],
        timeout: Duration? = nil
    ) async throws(DBusError) -> [DBusValue] {
        let message = try OwnedMessage.methodCall(
            destination: destination, path: path, interface: interface, member: method, arguments: arguments)
        let what = "Calling \(interface.map { $0 + "." } ?? "")\(method) on \(destination ?? "peer") \(path)"
        return try await self.send(message, timeout: timeout, call: CallState(what: what)).get()
    }

    /// Sends a call through the loop and waits for its outcome; cancelling the task finishes the call
    /// with `.cancelled` at once and forgets the reply.
    private func send(_ message: OwnedMessage, timeout: Duration?, call: CallState) async -> CallState.Outcome {
        let milliseconds = Self.milliseconds(timeout)
        let handle = self.handle
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<CallState.Outcome, Never>) in
                call.install(continuation)
                handle.enqueue { core in
                    guard let core else {
                        call.finish(.failure(.disconnected(call.what)))
                        return
                    }
                    core.startCall(message, timeoutMilliseconds: milliseconds, state: call)
                }
            }
        } onCancel: {
            call.finish(.failure(.cancelled(call.what)))
            handle.enqueue { core in core?.cancelCall(call) }
        }
    }

    /// A timeout in whole milliseconds for libdbus; nil is libdbus's default.
    private static func milliseconds(_ timeout: Duration?) -> Int32 {
        guard let timeout else { return CDBUS_TIMEOUT_USE_DEFAULT }
        let (seconds, attoseconds) = timeout.components
        let total = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return Int32(clamping: max(0, min(total, Int64(CDBUS_TIMEOUT_INFINITE - 1))))
    }

    /// Calls a method of the bus daemon (`org.freedesktop.DBus`); `loopHook` sees the outcome on the
    /// loop thread, in order with signals.
    private func callBus(_ method: String, _ arguments: [DBusValue], loopHook: (@Sendable (LoopCore, CallState.Outcome) -> Void)? = nil)
        async -> CallState.Outcome
    {
        let message: OwnedMessage
        do {
            message = try OwnedMessage.methodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus", member: method, arguments: arguments)
        } catch {
            return .failure(error)
        }
        let call = CallState(what: "Calling org.freedesktop.DBus.\(method)", loopHook: loopHook)
        return await self.send(message, timeout: nil, call: call)
    }

    // MARK: Signals

    /// Subscribes to signals: adds the match rule on the bus (returning once the bus accepted it, so no
    /// signal sent afterwards is missed) and yields matching signals in arrival order. The match is removed
    /// when the stream is dropped or cancelled; the stream finishes when the connection ends.
    public func signals(matching rule: DBusMatchRule) async throws(DBusError) -> HandOffStream<DBusSignal> {
        try rule.validate()
        var trackedName: String?
        if rule.needsOwnerTracking, let name = rule.sender {
            try await self.trackOwner(name)
            trackedName = name
        }
        let id = self.nextID.wrappingAdd(1, ordering: .relaxed).newValue
        let (stream, continuation) = HandOffStream.makeStream(of: DBusSignal.self)
        let handle = self.handle
        handle.enqueue { [trackedName] core in
            guard let core else {
                continuation.finish()
                return
            }
            core.subscriptions[id] = LoopCore.Subscription(
                rule: rule, trackedName: trackedName, deliver: { continuation.yield($0) }, deliverOwner: nil,
                finish: { continuation.finish() })
        }
        continuation.onTermination = { _ in handle.enqueue { core in core?.removeSubscription(id) } }
        if case .failure(let error) = await self.callBus("AddMatch", [.string(rule.ruleString)]) {
            continuation.finish()
            throw error
        }
        return stream
    }

    /// Keeps the loop's owner cache for `name` current: the match for its NameOwnerChanged first, then the
    /// current owner, recorded on the loop thread in order with the signals.
    private func trackOwner(_ name: String) async throws(DBusError) {
        let first = await self.handle.onLoop { core in core?.retainOwner(name) }
        guard let first else { throw DBusError.disconnected("Watching the owner of \(name)") }
        guard first else { return }
        let rule = LoopCore.ownerMatchRule(for: name).ruleString
        if case .failure(let error) = await self.callBus("AddMatch", [.string(rule)]) {
            self.handle.enqueue { core in core?.releaseOwner(name) }
            throw error
        }
        _ = await self.callBus("GetNameOwner", [.string(name)]) { core, outcome in
            if case .success(let values) = outcome, let owner = values.first?.string {
                core.setOwner(name, owner)
            }
        }
    }

    /// Watches a bus name's owner: yields the current owner (nil when nobody owns it) and then every
    /// change, e.g. nil when bluetoothd exits and its new unique name when it comes back.
    public func nameOwnerChanges(of name: String) async throws(DBusError) -> HandOffStream<String?> {
        try Validate.busName(name)
        let rule = LoopCore.ownerMatchRule(for: name)
        let id = self.nextID.wrappingAdd(1, ordering: .relaxed).newValue
        let (stream, continuation) = HandOffStream.makeStream(of: String?.self)
        let handle = self.handle
        handle.enqueue { core in
            guard let core else {
                continuation.finish()
                return
            }
            // Signals and the GetNameOwner reply both arrive here in bus order; only changes are yielded.
            final class Last { var owner: String?? = .none }
            let last = Last()
            let yieldOwner: (String?) -> Void = { owner in
                if case .some(let previous) = last.owner, previous == owner { return }
                last.owner = .some(owner)
                continuation.yield(owner)
            }
            core.subscriptions[id] = LoopCore.Subscription(
                rule: rule, trackedName: nil,
                deliver: { signal in
                    guard signal.arguments.count == 3, let owner = signal.arguments[2].string else { return }
                    yieldOwner(owner.isEmpty ? nil : owner)
                },
                deliverOwner: yieldOwner,
                finish: { continuation.finish() })
        }
        continuation.onTermination = { _ in handle.enqueue { core in core?.removeSubscription(id) } }
        if case .failure(let error) = await self.callBus("AddMatch", [.string(rule.ruleString)]) {
            continuation.finish()
            throw error
        }
        let outcome = await self.callBus("GetNameOwner", [.string(name)]) { core, outcome in
            let owner: String?
            switch outcome {
            case .success(let values): owner = values.first?.string
            case .failure: owner = nil
            }
            core.subscriptions[id]?.deliverOwner?(owner)
        }
        if case .failure(let error) = outcome, error.kind != .remote {
            continuation.finish()
            throw error
        }
        return stream
    }

    // MARK: Exporting and emitting

    /// Starts answering method calls at `path`. Throws `.invalidState` if the path is already exported on
    /// this connection.
    ///
    /// - Parameter trustedCaller: a well-known name (`org.bluez`) whose owner is followed from now on;
    ///   each call's `isFromTrustedCaller` says whether its sender was that name's current owner when
    ///   the call arrived (decided on the loop thread, in order with the owner changes, so a call from
    ///   a former owner or an impostor is never taken for the owner's). The object's user rejects the rest.
    public func exportObject(at path: String, trustedCaller: String? = nil) async throws(DBusError) -> DBusExportedObject {
        try Validate.path(path)
        if let trustedCaller {
            try Validate.busName(trustedCaller)
            guard !trustedCaller.hasPrefix(":") else {
                throw DBusError.invalidArgument("A trusted caller is a well-known name, not the unique name \(trustedCaller).")
            }
            try await self.trackOwner(trustedCaller)
        }
        let id = self.nextID.wrappingAdd(1, ordering: .relaxed).newValue
        let (stream, continuation) = HandOffStream.makeStream(of: DBusIncomingCall.self)
        let added = await self.handle.onLoop { core -> Bool? in
            guard let core, core.connection != nil else { return nil }
            guard core.exports[path] == nil else { return false }
            core.exports[path] = LoopCore.Export(id: id, continuation: continuation, trustedCaller: trustedCaller)
            return true
        }
        guard let added, added else {
            if let trustedCaller { self.handle.enqueue { core in core?.releaseOwner(trustedCaller) } }
            guard added != nil else { throw DBusError.disconnected("Exporting an object at \(path)") }
            throw DBusError(
                kind: .invalidState, name: DBusError.Names.invalidState,
                message: "An object is already exported at \(path) on this connection.")
        }
        let handle = self.handle
        continuation.onTermination = { _ in
            handle.enqueue { core in
                guard let core, core.exports[path]?.id == id else { return }
                core.exports.removeValue(forKey: path)
                if let trustedCaller { core.releaseOwner(trustedCaller) }
            }
        }
        return DBusExportedObject(path: path, calls: stream, continuation: continuation)
    }

    /// Emits a signal from this connection.
    public func emitSignal(path: String, interface: String, member: String, arguments: [DBusValue] = [])
        async throws(DBusError)
    {
        let message = try OwnedMessage.signal(path: path, interface: interface, member: member, arguments: arguments)
        let sent = await self.handle.onLoop { core -> Bool in
            guard let core, core.connection != nil, !core.disconnected else { return false }
            core.send(message)
            return true
        }
        guard sent else { throw DBusError.disconnected("Emitting \(interface).\(member)") }
    }

    /// Asks the bus for a well-known name (without queueing). Returns true if this connection now owns it.
    public func requestName(_ name: String) async throws(DBusError) -> Bool {
        try Validate.busName(name)
        let values = try await self.callBus("RequestName", [.string(name), .uint32(4)]).get()
        // 1 = primary owner, 4 = already owner.
        let code = values.first?.integer ?? 0
        return code == 1 || code == 4
    }
}

/// Starts the event-loop thread.
enum LoopThread {
    /// What the new thread needs, passed through `pthread_create`'s argument.
    private final class Start {
        let core: LoopCore
        let bus: DBusBus
        let ready: @Sendable (Result<Void, DBusError>) -> Void

        init(core: LoopCore, bus: DBusBus, ready: @escaping @Sendable (Result<Void, DBusError>) -> Void) {
            self.core = core
            self.bus = bus
            self.ready = ready
        }
    }

    /// `core` is handed over to the new thread, which is its only user from then on.
    static func start(
        core: LoopCore, bus: DBusBus, ready: @escaping @Sendable (Result<Void, DBusError>) -> Void
    ) {
        let argument = Unmanaged.passRetained(Start(core: core, bus: bus, ready: ready)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread, nil,
            { argument in
                let start = Unmanaged<Start>.fromOpaque(argument!).takeRetainedValue()
                cdbus_name_current_thread("sugard-dbus")
                start.core.main(bus: start.bus, ready: start.ready)
                return nil
            }, argument)
        guard result == 0 else {
            let start = Unmanaged<Start>.fromOpaque(argument).takeRetainedValue()
            for job in start.core.handle.closeQueue() { job(nil) }
            close(start.core.handle.wakeFD)
            ready(
                .failure(
                    DBusError(
                        kind: .connectionFailed, name: DBusError.Names.failed,
                        message: "Starting the D-Bus event-loop thread failed (error \(result)).")))
            return
        }
        pthread_detach(thread)
    }
}
