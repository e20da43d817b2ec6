internal import CDBus
import Glibc
import SystemIO
import Locking

/// Everything the event-loop thread owns: the `DBusConnection*`, its watches and timeouts, signal
/// subscriptions, exported objects and calls in flight. Only ever used on that one thread (C callbacks
/// from libdbus run there too, because only that thread calls into the connection).
final class LoopCore {
    /// One signal subscription: its match rule and where matching signals (and owner changes) go.
    struct Subscription {
        /// The rule the bus was asked to route (`AddMatch`); matched again here, per subscription.
        var rule: DBusMatchRule
        /// The well-known sender name whose owner this subscription tracks, if any.
        var trackedName: String?
        /// Receives each matching signal, on the loop thread.
        var deliver: (DBusSignal) -> Void
        /// Receives the tracked name's new owner (nil: none).
        var deliverOwner: ((String?) -> Void)?
        /// Ends the subscriber's stream when the connection closes.
        var finish: () -> Void
    }

    /// An object path served here: incoming calls go to its stream.
    struct Export {
        /// Tells this export from a later one at the same path, so an old unexport cannot remove a new one.
        var id: UInt64
        /// Where calls to the path are yielded.
        var continuation: HandOffStream<DBusIncomingCall>.Continuation
        /// The well-known name whose current owner alone is a trusted caller (its owner is tracked).
        var trustedCaller: String?
    }

    /// A tracked well-known name: how many subscriptions or exports use it, and its current owner.
    struct OwnerEntry {
        /// Subscriptions and exports that need the name tracked.
        var references: Int
        /// The name's current owner (a unique name); nil when unowned or not known yet.
        var owner: String?
    }

    /// A libdbus timeout and its next deadline (monotonic ns); nil while disabled.
    private struct Timeout {
        /// The `DBusTimeout*`, owned by libdbus.
        var timeout: OpaquePointer
        /// When it fires next (monotonic ns); nil while disabled.
        var deadline: UInt64?
    }

    /// The job queue other threads use.
    let handle: LoopHandle
    /// What other threads may read about the connection.
    let state: ConnectionState
    /// The private `DBusConnection*`; nil before connecting and after shutdown.
    private(set) var connection: OpaquePointer?
    /// The file descriptors libdbus wants polled.
    private var watches: [OpaquePointer] = []
    /// The timers libdbus asked for.
    private var timeouts: [Timeout] = []
    /// `close()` asked the loop to end.
    private var stopRequested = false
    /// libdbus reported the link lost (`org.freedesktop.DBus.Local.Disconnected`).
    private(set) var disconnected = false
    /// Signal subscriptions by id, delivered in id order.
    var subscriptions: [UInt64: Subscription] = [:]
    /// Exported objects by path.
    var exports: [String: Export] = [:]
    /// Method calls waiting for their reply.
    private var calls: [ObjectIdentifier: CallState] = [:]
    /// Well-known names whose owner is tracked (for sender checks), kept current by `NameOwnerChanged`.
    private var owners: [String: OwnerEntry] = [:]

    /// A loop that has not connected yet.
    init(handle: LoopHandle, state: ConnectionState) {
        self.handle = handle
        self.state = state
    }

    /// The loop behind the user-data pointer of a libdbus callback.
    static func from(_ data: UnsafeMutableRawPointer?) -> LoopCore {
        Unmanaged<LoopCore>.fromOpaque(data!).takeUnretainedValue()
    }

    // MARK: Thread body

    /// The loop thread's whole life: connects to `bus`, reports the outcome through `ready`, runs until
    /// stopped or disconnected, then fails everything pending. Jobs queued after the end run with nil.
    func main(bus: DBusBus, ready: @Sendable (Result<Void, DBusError>) -> Void) {
        switch self.open(bus) {
        case .failure(let error):
            ready(.failure(error))
            if let connection = self.connection {
                // Connected but the loop could not be set up: this connection is still ours to free.
                self.connection = nil
                dbus_connection_close(connection)
                dbus_connection_unref(connection)
            }
            self.finishQueue()
        case .success(let uniqueName):
            self.state.markConnected(uniqueName: uniqueName)
            ready(.success(()))
            self.run()
            self.shutdown()
        }
    }

    /// Opens a private connection (registered with the bus for an address) and installs the watch,
    /// timeout and filter callbacks; returns the unique name.
    private func open(_ bus: DBusBus) -> Result<String, DBusError> {
        _ = dbus_threads_init_default()
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        var connection: OpaquePointer?
        let what: String
        switch bus {
        case .system:
            what = "the system bus"
            connection = dbus_bus_get_private(DBUS_BUS_SYSTEM, &error)
        case .session:
            what = "the session bus"
            connection = dbus_bus_get_private(DBUS_BUS_SESSION, &error)
        case .address(let address):
            what = "the bus at \(address)"
            connection = dbus_connection_open_private(address, &error)
            if let opened = connection {
                dbus_connection_set_exit_on_disconnect(opened, 0)
                if dbus_bus_register(opened, &error) == 0 {
                    dbus_connection_close(opened)
                    dbus_connection_unref(opened)
                    connection = nil
                }
            }
        }
        guard let connection else {
            let name = error.name.map { String(cString: $0) } ?? DBusError.Names.failed
            let message = error.message.map { String(cString: $0) } ?? "unknown error"
            return .failure(
                DBusError(kind: .connectionFailed, name: name, message: "Connecting to \(what) failed: \(message)"))
        }
        dbus_connection_set_exit_on_disconnect(connection, 0)
        self.connection = connection

        // Each registration holds its own reference to self, released by libdbus's free function when the
        // connection is finalized.
        let watchesOK = dbus_connection_set_watch_functions(
            connection,
            { watch, data in
                LoopCore.from(data).watches.append(watch!)
                return 1
            },
            { watch, data in LoopCore.from(data).watches.removeAll { $0 == watch } },
            { _, _ in },  // the enabled flag is read when building the poll set
            Unmanaged.passRetained(self).toOpaque(),
            { data in Unmanaged<LoopCore>.fromOpaque(data!).release() })
        let timeoutsOK = dbus_connection_set_timeout_functions(
            connection,
            { timeout, data in
                let core = LoopCore.from(data)
                core.timeouts.append(Timeout(timeout: timeout!, deadline: LoopCore.deadline(of: timeout!)))
                return 1
            },
            { timeout, data in LoopCore.from(data).timeouts.removeAll { $0.timeout == timeout } },
            { timeout, data in
                let core = LoopCore.from(data)
                if let index = core.timeouts.firstIndex(where: { $0.timeout == timeout }) {
                    core.timeouts[index].deadline = LoopCore.deadline(of: timeout!)
                }
            },
            Unmanaged.passRetained(self).toOpaque(),
            { data in Unmanaged<LoopCore>.fromOpaque(data!).release() })
        let filterOK = dbus_connection_add_filter(
            connection,
            { _, message, data in LoopCore.from(data).handle(message: message!) },
            Unmanaged.passRetained(self).toOpaque(),
            { data in Unmanaged<LoopCore>.fromOpaque(data!).release() })
        guard watchesOK != 0, timeoutsOK != 0, filterOK != 0 else {
            return .failure(
                DBusError(
                    kind: .connectionFailed, name: DBusError.Names.failed,
                    message: "Setting up the event loop for \(what) failed (out of memory)."))
        }
        let unique = dbus_bus_get_unique_name(connection).map { String(cString: $0) } ?? ""
        return .success(unique)
    }

    /// Runs jobs, dispatches messages, and polls the eventfd and libdbus's watches until a stop request
    /// or a lost connection.
    private func run() {
        var fds: [pollfd] = []
        var polled: [OpaquePointer] = []
        while true {
            for job in self.handle.takeJobs() { job(self) }
            if self.stopRequested { return }
            guard let connection = self.connection else { return }
            while dbus_connection_dispatch(connection) == DBUS_DISPATCH_DATA_REMAINS {}
            if self.disconnected || dbus_connection_get_is_connected(connection) == 0 { return }

            fds.removeAll(keepingCapacity: true)
            polled.removeAll(keepingCapacity: true)
            fds.append(pollfd(fd: self.handle.wakeFD, events: Int16(POLLIN), revents: 0))
            for watch in self.watches where dbus_watch_get_enabled(watch) != 0 {
                let flags = dbus_watch_get_flags(watch)
                var events: Int16 = 0
                if flags & DBUS_WATCH_READABLE.rawValue != 0 { events |= Int16(POLLIN) }
                if flags & DBUS_WATCH_WRITABLE.rawValue != 0 { events |= Int16(POLLOUT) }
                fds.append(pollfd(fd: dbus_watch_get_unix_fd(watch), events: events, revents: 0))
                polled.append(watch)
            }
            let ready = retryingInterrupted { poll(&fds, nfds_t(fds.count), self.pollTimeout()) }
            if ready < 0 {
                // poll only fails like this for programming errors (EFAULT/EINVAL) or ENOMEM: give up the link.
                return
            }
            if fds[0].revents != 0 {
                var counter: UInt64 = 0
                _ = read(self.handle.wakeFD, &counter, MemoryLayout<UInt64>.size)
            }
            for (index, watch) in polled.enumerated() {
                let revents = fds[index + 1].revents
                guard revents != 0, self.watches.contains(watch) else { continue }
                var flags: UInt32 = 0
                if revents & Int16(POLLIN) != 0 { flags |= DBUS_WATCH_READABLE.rawValue }
                if revents & Int16(POLLOUT) != 0 { flags |= DBUS_WATCH_WRITABLE.rawValue }
                if revents & Int16(POLLERR) != 0 { flags |= DBUS_WATCH_ERROR.rawValue }
                if revents & Int16(POLLHUP) != 0 { flags |= DBUS_WATCH_HANGUP.rawValue }
                _ = dbus_watch_handle(watch, flags)
            }
            self.fireTimeouts()
        }
    }

    /// Makes the loop end after the current round of jobs.
    func requestStop() {
        self.stopRequested = true
    }

    /// Marks the connection down, fails every call in flight with `Disconnected`, ends every
    /// subscription and export stream, frees the connection and drains the job queue.
    private func shutdown() {
        self.state.markDisconnected()
        if let connection = self.connection { dbus_connection_close(connection) }
        for call in self.calls.values {
            if let pending = call.pending {
                dbus_pending_call_cancel(pending)
                dbus_pending_call_unref(pending)
                call.pending = nil
            }
            call.finish(.failure(.disconnected(call.what)))
        }
        self.calls = [:]
        let subscriptions = self.subscriptions
        self.subscriptions = [:]
        for subscription in subscriptions.values { subscription.finish() }
        let exports = self.exports
        self.exports = [:]
        for export in exports.values { export.continuation.finish() }
        self.owners = [:]
        if let connection = self.connection {
            self.connection = nil
            dbus_connection_unref(connection)
        }
        self.finishQueue()
    }

    /// Closes the job queue and its eventfd, then runs the jobs left with nil (so their callers fail).
    private func finishQueue() {
        let remaining = self.handle.closeQueue()
        close(self.handle.wakeFD)
        for job in remaining { job(nil) }
    }

    // MARK: Timeouts

    /// When `timeout` fires next, from now and its interval; nil while it is disabled.
    private static func deadline(of timeout: OpaquePointer) -> UInt64? {
        guard dbus_timeout_get_enabled(timeout) != 0 else { return nil }
        return UInt64(monotonicNanoseconds()) + UInt64(max(0, dbus_timeout_get_interval(timeout))) * 1_000_000
    }

    /// Milliseconds until the earliest timeout (rounded up), or -1 for none.
    private func pollTimeout() -> Int32 {
        guard let earliest = self.timeouts.compactMap(\.deadline).min() else { return -1 }
        let now = UInt64(monotonicNanoseconds())
        guard earliest > now else { return 0 }
        return Int32(min((earliest - now + 999_999) / 1_000_000, UInt64(Int32.max)))
    }

    /// Handles every due timeout and rearms it (libdbus timeouts repeat).
    private func fireTimeouts() {
        let now = UInt64(monotonicNanoseconds())
        let due = self.timeouts.filter { ($0.deadline ?? .max) <= now }.map(\.timeout)
        for timeout in due {
            guard let index = self.timeouts.firstIndex(where: { $0.timeout == timeout }) else { continue }
            // libdbus timeouts repeat until removed or disabled.
            self.timeouts[index].deadline = LoopCore.deadline(of: timeout)
            _ = dbus_timeout_handle(timeout)
        }
    }

    // MARK: Sending

    /// Sends a message that expects no reply; dropped silently when disconnected.
    func send(_ message: OwnedMessage) {
        guard let connection = self.connection, !self.disconnected else { return }
        _ = dbus_connection_send(connection, message.pointer, nil)
    }

    /// Sends a call and registers `call` for its reply; finishes it with `Disconnected` at once when the
    /// link is down. A call already finished (cancelled before it reached the loop) is not sent.
    func startCall(_ message: OwnedMessage, timeoutMilliseconds: Int32, state call: CallState) {
        guard !call.isFinished else { return }
        guard let connection = self.connection, !self.disconnected else {
            call.finish(.failure(.disconnected(call.what)))
            return
        }
        var pending: OpaquePointer?
        guard dbus_connection_send_with_reply(connection, message.pointer, &pending, timeoutMilliseconds) != 0,
            let pending
        else {
            call.finish(.failure(.disconnected(call.what)))
            return
        }
        call.pending = pending
        call.core = self
        self.calls[ObjectIdentifier(call)] = call
        let registered = dbus_pending_call_set_notify(
            pending,
            { _, data in
                let call = Unmanaged<CallState>.fromOpaque(data!).takeUnretainedValue()
                call.core?.completeCall(call)
            },
            Unmanaged.passRetained(call).toOpaque(),
            { data in Unmanaged<CallState>.fromOpaque(data!).release() })
        if registered == 0 {
            self.cancelCall(call)
            call.finish(.failure(DBusError.invalidArgument("Out of memory registering a reply handler.")))
        }
    }

    /// libdbus's reply notification: turns the reply into an outcome, runs the loop hook, resumes the caller.
    private func completeCall(_ call: CallState) {
        guard let pending = call.pending else { return }
        let reply = dbus_pending_call_steal_reply(pending)
        dbus_pending_call_unref(pending)
        call.pending = nil
        self.calls.removeValue(forKey: ObjectIdentifier(call))
        let outcome: CallState.Outcome
        if let reply {
            outcome = self.outcome(of: reply, what: call.what)
            dbus_message_unref(reply)
        } else {
            outcome = .failure(.disconnected(call.what))
        }
        call.loopHook?(self, outcome)
        call.finish(outcome)
    }

    /// Forgets an unfinished call (cancellation or timeout on the caller's side); its reply will be ignored.
    func cancelCall(_ call: CallState) {
        guard let pending = call.pending else { return }
        dbus_pending_call_cancel(pending)
        dbus_pending_call_unref(pending)
        call.pending = nil
        self.calls.removeValue(forKey: ObjectIdentifier(call))
    }

    /// The reply's arguments, or its error: libdbus's own `NoReply` becomes a timeout (or `Disconnected`
    /// when the link is gone), any other error reply a remote error.
    private func outcome(of reply: OpaquePointer, what: String) -> CallState.Outcome {
        let header = ReceivedMessage(reply)
        if header.type == DBUS_MESSAGE_TYPE_ERROR {
            let name = header.errorName ?? DBusError.Names.failed
            let text = (try? ReceivedMessage.arguments(of: reply))?.first?.string ?? ""
            // libdbus itself synthesizes NoReply (no sender) when the timeout expires or the link drops.
            if header.sender == nil && (name == DBusError.Names.noReply || name == DBusError.Names.disconnected) {
                let connected = self.connection.map { dbus_connection_get_is_connected($0) != 0 } ?? false
                if !connected || self.disconnected {
                    return .failure(.disconnected(what))
                }
                return .failure(DBusError(kind: .timeout, name: name, message: "\(what) got no reply in time: \(text)"))
            }
            return .failure(DBusError(kind: .remote, name: name, message: text))
        }
        do {
            return .success(try ReceivedMessage.arguments(of: reply))
        } catch {
            return .failure(error)
        }
    }

    // MARK: Name owners (for subscriptions whose sender is a well-known name)

    /// The `NameOwnerChanged` match rule for `name`.
    static func ownerMatchRule(for name: String) -> DBusMatchRule {
        DBusMatchRule(
            sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "NameOwnerChanged", arg0: name)
    }

    /// Starts tracking `name`'s owner; returns true when this is the first reference (the caller then
    /// adds the match rule and asks for the current owner).
    func retainOwner(_ name: String) -> Bool {
        if var entry = self.owners[name] {
            entry.references += 1
            self.owners[name] = entry
            return false
        }
        self.owners[name] = OwnerEntry(references: 1, owner: nil)
        return true
    }

    /// Records the current owner of a tracked name.
    func setOwner(_ name: String, _ owner: String?) {
        self.owners[name]?.owner = owner
    }

    /// Drops one reference to a tracked name; the last one removes its match rule from the bus.
    func releaseOwner(_ name: String) {
        guard var entry = self.owners[name] else { return }
        entry.references -= 1
        if entry.references > 0 {
            self.owners[name] = entry
            return
        }
        self.owners.removeValue(forKey: name)
        self.sendBusNoReply("RemoveMatch", [.string(LoopCore.ownerMatchRule(for: name).ruleString)])
    }

    /// Calls a bus daemon method (`AddMatch`, `RemoveMatch`) without waiting for the reply.
    func sendBusNoReply(_ method: String, _ arguments: [DBusValue]) {
        guard
            let message = try? OwnedMessage.methodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus", member: method, arguments: arguments)
        else { return }
        dbus_message_set_no_reply(message.pointer, 1)
        self.send(message)
    }

    /// Ends subscription `id`: removes its match rule and releases its tracked name.
    func removeSubscription(_ id: UInt64) {
        guard let subscription = self.subscriptions.removeValue(forKey: id) else { return }
        self.sendBusNoReply("RemoveMatch", [.string(subscription.rule.ruleString)])
        if let name = subscription.trackedName { self.releaseOwner(name) }
    }

    // MARK: Incoming messages

    /// The connection's filter: notes the local `Disconnected` signal, dispatches other signals, and
    /// turns method calls to an exported path into ``DBusIncomingCall``s (undecodable arguments get an
    /// `InvalidArgs` error reply). Calls to other paths are left to libdbus (which answers `UnknownObject`).
    private func handle(message: OpaquePointer) -> DBusHandlerResult {
        let header = ReceivedMessage(message)
        switch header.type {
        case DBUS_MESSAGE_TYPE_SIGNAL:
            if header.interface == "org.freedesktop.DBus.Local" && header.member == "Disconnected" {
                self.disconnected = true
                return DBUS_HANDLER_RESULT_HANDLED
            }
            self.dispatchSignal(header, message)
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        case DBUS_MESSAGE_TYPE_METHOD_CALL:
            guard let path = header.path, let export = self.exports[path], let member = header.member else {
                return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
            }
            let arguments: [DBusValue]
            do {
                arguments = try ReceivedMessage.arguments(of: message)
            } catch {
                if !header.noReply,
                    let reply = try? OwnedMessage.errorReply(
                        destination: header.sender, replySerial: header.serial, name: DBusError.Names.invalidArgs,
                        text: error.message)
                {
                    self.send(reply)
                }
                return DBUS_HANDLER_RESULT_HANDLED
            }
            // Decided here, in bus order with the NameOwnerChanged signals that keep the owner current.
            let trusted = export.trustedCaller.map { name in
                header.sender != nil && self.owners[name]?.owner == header.sender
            }
            let call = DBusIncomingCall(
                handle: self.handle, sender: header.sender, path: path, interface: header.interface, member: member,
                arguments: arguments, serial: header.serial, noReply: header.noReply, isFromTrustedCaller: trusted ?? true)
            export.continuation.yield(call)
            return DBUS_HANDLER_RESULT_HANDLED
        default:
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        }
    }

    /// Updates tracked owners from `NameOwnerChanged`, then delivers the signal to every subscription
    /// whose rule matches (a sender given as a well-known name must be that name's current owner).
    /// Arguments are decoded once, only when some subscription needs them.
    private func dispatchSignal(_ header: ReceivedMessage, _ message: OpaquePointer) {
        guard let path = header.path, let interface = header.interface, let member = header.member else { return }
        var arguments: [DBusValue]?
        func decoded() -> [DBusValue]? {
            if arguments == nil { arguments = try? ReceivedMessage.arguments(of: message) }
            return arguments
        }
        if header.sender == "org.freedesktop.DBus" && member == "NameOwnerChanged"
            && interface == "org.freedesktop.DBus", let args = decoded(), args.count == 3,
            let name = args[0].string, let newOwner = args[2].string, self.owners[name] != nil
        {
            self.setOwner(name, newOwner.isEmpty ? nil : newOwner)
        }
        guard !self.subscriptions.isEmpty else { return }
        var signal: DBusSignal?
        for id in self.subscriptions.keys.sorted() {
            guard let subscription = self.subscriptions[id] else { continue }
            let rule = subscription.rule
            guard rule.matchesHeader(path: path, interface: interface, member: member) else { continue }
            if let sender = rule.sender {
                if let tracked = subscription.trackedName {
                    guard let owner = self.owners[tracked]?.owner, owner == header.sender else { continue }
                } else if sender != header.sender {
                    continue
                }
            }
            guard let args = decoded() else { continue }
            if let arg0 = rule.arg0 {
                guard let first = args.first, case .string(let value) = first, value == arg0 else { continue }
            }
            if signal == nil {
                signal = DBusSignal(
                    sender: header.sender, path: path, interface: interface, member: member, arguments: args)
            }
            subscription.deliver(signal!)
        }
    }
}
