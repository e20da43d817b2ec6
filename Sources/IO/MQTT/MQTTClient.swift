import CMosquitto
import Glibc
import Locking
import SystemIO

/// A retained or plain message the client sends, with the MQTT will as one use.
public struct MQTTMessage: Sendable, Hashable {
    /// The topic published to.
    public var topic: String
    /// The bytes published.
    public var payload: [UInt8]
    /// 0 (at most once) or 1 (at least once, acknowledged by a PUBACK).
    public var qos: Int32
    /// The broker keeps it as the topic's last value for later subscribers.
    public var retain: Bool

    /// A message; QoS 1 and not retained unless told.
    public init(topic: String, payload: [UInt8], qos: Int32 = 1, retain: Bool = false) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
    }
}

/// Where and how to connect.
public struct MQTTOptions: Sendable {
    /// The broker's host name or address.
    public var host: String
    /// The broker's port (1883, 8883 with TLS by convention).
    public var port: Int32
    /// The MQTT client identifier; a persistent session is found again by it.
    public var clientID: String
    /// User name sent with CONNECT, if any.
    public var username: String?
    /// Password sent with the user name.
    public var password: String?
    /// TLS with this CA file and certificate verification on (the host name is checked too).
    public var caFile: String?
    /// MQTT keep-alive: the broker drops the connection after 1.5 times this without a packet.
    public var keepAliveSeconds: Int32 = 30
    /// Published by the broker when the connection ends without a DISCONNECT.
    public var will: MQTTMessage?
    /// Topics subscribed (QoS 1) after each successful connect.
    public var subscriptions: [String] = []
    /// Reconnect delay after a lost connection or refused TCP connect: doubles from `retryMinimum`
    /// up to `retryMaximum` seconds; reset by a successful connect.
    public var retryMinimum: Double = 0.2
    /// The cap of the doubling reconnect delay, in seconds.
    public var retryMaximum: Double = 30
    /// Delay after a failure that retrying soon cannot fix (credentials, TLS, unknown host,
    /// a refused publish): never a tight loop.
    public var slowRetry: Double = 30
    /// A connect that has no CONNACK after this many seconds is given up and retried.
    public var connectTimeout: Double = 10
    /// At most this many QoS 1 publishes with a token are handed to the broker unacknowledged
    /// (0: no limit). The rest wait in the client, in order, and go out from the client's own
    /// thread as PUBACKs come in, without a round trip through the owner.
    public var maxInFlight = 0
    /// Clean start (the default): each connection begins a new session. False with a
    /// `sessionExpirySeconds` above 0 keeps the session at the broker across connections and
    /// crashes: its subscriptions, and the QoS 1 messages sent to it and not yet acknowledged,
    /// which the broker sends again after the next connect with the same `clientID`.
    public var cleanStart = true
    /// MQTT 5 Session Expiry Interval sent with CONNECT (0: the session ends with the connection).
    public var sessionExpirySeconds: UInt32 = 0
    /// Receives each message inside libmosquitto's message callback, on the client's thread,
    /// BEFORE the broker can learn it arrived. libmosquitto 2.0.11 (Debian 12's) queues the PUBACK
    /// of a QoS 1 message before it calls the message callback (lib/handle_publish.c,
    /// `handle__publish`, case 1); with `receive` set the client runs libmosquitto in its threaded mode, so a queued
    /// packet is written only by the client's own `mosquitto_loop_write`, after the callback
    /// returned. So whatever `receive` finished before returning true (a committed database
    /// transaction) happened before the PUBACK left; a process killed inside `receive` never
    /// acknowledged it, and the broker sends it again to the persistent session (see
    /// ``cleanStart``). Returning false withholds the PUBACK: the client shuts the socket down
    /// before the queued PUBACK is written, reports `disconnected` and reconnects; the broker sends
    /// the message again (MQTTClientTests `aMessageNotReceivedIsSentAgain`). With `receive` set,
    /// `MQTTEvent.message` is not reported.
    public var receive: (@Sendable (_ topic: String, _ payload: [UInt8], _ retained: Bool) -> Bool)?

    /// Options for `host:port` as `clientID`, every other field at its default.
    public init(host: String, port: Int32, clientID: String) {
        self.host = host
        self.port = port
        self.clientID = clientID
    }
}

/// What happens on the connection. Delivered on the client's own thread, in order.
public enum MQTTEvent: Sendable, Equatable {
    /// CONNACK success; `session` numbers connections (publishes name the session they are for).
    case connected(session: Int)
    /// A connect failed or the connection ended; the next attempt comes in `retryIn` seconds.
    /// `permanent` marks failures retrying soon cannot fix (credentials, TLS, unknown host).
    case disconnected(reason: String, permanent: Bool, retryIn: Double)
    /// PUBACKs for these publish tokens arrived (QoS 1), in arrival order. Reported in batches:
    /// when the client's thread has nothing else to do, or after 128 of them or 2 ms.
    case acknowledged(tokens: [Int64], session: Int)
    /// A message arrived on a subscription (only without ``MQTTOptions/receive``).
    case message(topic: String, payload: [UInt8])
}

/// An MQTT v5 client over libmosquitto, driven by one dedicated thread that polls the broker
/// socket and a wake-up pipe (no busy polling, no libmosquitto thread): it connects, reconnects
/// with capped backoff, publishes what ``publish(_:token:session:)`` queued, and reports
/// everything through `events`. Every libmosquitto call happens on that thread.
///
/// Each connection is a fresh libmosquitto handle with clean start, so nothing unacknowledged
/// survives a reconnect inside the library: the owner re-publishes what it still needs, in its
/// own order, after ``MQTTEvent/connected(session:)``.
public final class MQTTClient: Sendable {
    /// The thread's state and queue.
    private let core: Core

    /// A client that does nothing until ``start()``; `events` is called on the client's thread.
    public init(options: MQTTOptions, events: @escaping @Sendable (MQTTEvent) -> Void) {
        self.core = Core(options: options, events: events)
    }

    /// Starts the client's thread; it connects at once.
    public func start() throws(MQTTError) {
        guard mosquitto_lib_init() == MOSQ_ERR_SUCCESS.rawValue else { throw MQTTError("libmosquitto failed to initialise") }
        let core = self.core
        let rc = startDetachedThread { core.run() }
        guard rc == 0 else { throw MQTTError("cannot start the MQTT thread: \(String(cString: strerror(rc)))") }
    }

    /// Queues a publish for connection `session`; dropped when that connection is gone by then.
    /// A QoS 1 message with a non-negative `token` reports its PUBACK as that token.
    public func publish(_ message: MQTTMessage, token: Int64 = -1, session: Int) {
        self.core.submit(.publish(message, token: token, session: session))
    }

    /// Publishes `last` (when connected), disconnects cleanly and ends the thread; returns once it
    /// ended or after `timeout` seconds.
    public func stop(last: MQTTMessage? = nil, timeout: Double = 2) {
        self.core.submit(.stop(last))
        self.core.stopped.wait(seconds: timeout)
    }
}

/// The client could not start (libmosquitto or the thread).
public struct MQTTError: Error, Sendable, CustomStringConvertible {
    /// What failed, in one sentence.
    public var description: String
    /// An error worded as `description`.
    public init(_ description: String) { self.description = description }
}

/// A one-shot flag a thread can wait on with a timeout.
final class OneShot: Sendable {
    /// Whether ``fire()`` ran.
    private let fired = Lock(false)
    /// Closing the write end makes the read end readable: that is the signal.
    private let pipe: (read: Int32, write: Int32)

    /// Makes the pipe; not fired.
    init() {
        var fds: [Int32] = [-1, -1]
        _ = Glibc.pipe(&fds)
        self.pipe = (fds[0], fds[1])
    }

    /// Fires once; later calls do nothing.
    func fire() {
        let first = self.fired.withLock { f -> Bool in
            defer { f = true }
            return !f
        }
        if first { _ = Glibc.close(self.pipe.write) }
    }

    /// Returns once fired or after `seconds`.
    func wait(seconds: Double) {
        var fd = pollfd(fd: self.pipe.read, events: Int16(POLLIN), revents: 0)
        _ = Glibc.poll(&fd, 1, Int32(seconds * 1000))
    }
}

/// What the owner asks of the thread.
private enum Command: Sendable {
    /// Publish on connection `session`, reporting its PUBACK as `token`.
    case publish(MQTTMessage, token: Int64, session: Int)
    /// Publish a last message (when connected), disconnect and end the thread.
    case stop(MQTTMessage?)
}

/// A publish waiting for room in the in-flight window.
private struct Waiting {
    /// The message to publish.
    var message: MQTTMessage
    /// Its PUBACK token (negative: none).
    var token: Int64
}

/// The thread's state. `queue` is shared (locked); everything else belongs to the thread.
private final class Core: @unchecked Sendable {
    /// The options given at creation.
    let options: MQTTOptions
    /// The owner's event handler.
    let events: @Sendable (MQTTEvent) -> Void
    /// Commands from other threads, taken whole when the thread wakes.
    let queue = Lock<[Command]>([])
    /// The non-blocking wake-up pipe.
    let wake: (read: Int32, write: Int32)
    /// Fires when the thread ends.
    let stopped = OneShot()

    // Thread-only state (the @unchecked Sendable invariant: touched by run() and the callbacks it drives).
    /// The libmosquitto handle of the current connection attempt; nil between attempts.
    var mosq: OpaquePointer?
    /// Numbers successful connections.
    var session = 0
    /// CONNACK success arrived on this handle.
    var connected = false
    /// When the current attempt began (monotonic seconds), for ``MQTTOptions/connectTimeout``.
    var connectStarted = 0.0
    /// libmosquitto message id → publish token, for QoS 1 publishes in flight.
    var tokens: [Int32: Int64] = [:]
    /// Tokens acknowledged and not yet reported.
    var acked: [Int64] = []
    /// When `acked` was last reported (monotonic seconds).
    var ackedReported = 0.0
    /// Publishes of the current connection waiting for the window, oldest first from `waitingHead`
    /// (emptied when the connection ends).
    var waiting: [Waiting] = []
    /// The first publish in `waiting` not yet handed over.
    var waitingHead = 0
    /// Set when the connection failed; the loop tears the handle down at the end of the turn.
    var failure: (reason: String, permanent: Bool)?
    /// Messages received this turn, reported after it.
    var messages: [(String, [UInt8])] = []
    /// Failed connection attempts in a row (the reconnect delay doubles with each).
    var failures = 0

    /// Makes the wake-up pipe; nothing connects yet.
    init(options: MQTTOptions, events: @escaping @Sendable (MQTTEvent) -> Void) {
        self.options = options
        self.events = events
        var fds: [Int32] = [-1, -1]
        _ = Glibc.pipe(&fds)
        _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
        _ = fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK)
        self.wake = (fds[0], fds[1])
    }

    /// Queues a command from any thread and wakes the client's thread.
    func submit(_ command: Command) {
        // One wake-up per batch: the thread takes the whole queue when it wakes.
        let wasEmpty = self.queue.withLock { q -> Bool in
            defer { q.append(command) }
            return q.isEmpty
        }
        guard wasEmpty else { return }
        var byte: UInt8 = 1
        _ = Glibc.write(self.wake.write, &byte, 1)
    }

    /// Empties the wake-up pipe.
    private func drainWake() {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 256) { buffer in
            while Glibc.read(self.wake.read, buffer.baseAddress, buffer.count) > 0 {}
        }
    }

    /// Waits up to `seconds` for the wake pipe and, when connected, the broker socket.
    private func wait(seconds: Double) -> (wake: Bool, readable: Bool, writable: Bool) {
        var fds = [pollfd(fd: self.wake.read, events: Int16(POLLIN), revents: 0)]
        if let mosq = self.mosq {
            let sock = mosquitto_socket(mosq)
            if sock >= 0 {
                let events = Int16(POLLIN) | (mosquitto_want_write(mosq) ? Int16(POLLOUT) : 0)
                fds.append(pollfd(fd: sock, events: events, revents: 0))
            }
        }
        let n = Glibc.poll(&fds, nfds_t(fds.count), Int32(max(0, min(seconds, 3600)) * 1000))
        guard n > 0 else { return (false, false, false) }
        let wake = fds[0].revents != 0
        let sock = fds.count > 1 ? fds[1].revents : 0
        return (wake, sock & Int16(POLLIN | POLLERR | POLLHUP) != 0, sock & Int16(POLLOUT) != 0)
    }

    /// The thread body: connects (with backoff), then polls and runs libmosquitto's read, write and
    /// housekeeping steps, hands waiting publishes over, reports acknowledgements and messages, and
    /// tears down and schedules a retry on failure; returns after a stop command.
    func run() {
        defer { self.stopped.fire() }
        var nextAttempt = 0.0
        while true {
            if self.mosq == nil {
                let now = monotonicSeconds()
                if now < nextAttempt {
                    let woke = self.wait(seconds: nextAttempt - now).wake
                    if woke, self.handleCommands() { return }
                    continue
                }
                if self.handleCommands() { return }
                self.connect()
                if let failure = self.failure {
                    nextAttempt = monotonicSeconds() + self.teardown(failure)
                    continue
                }
            }
            // Acknowledgements are reported once nothing else is ready (a poll that would block),
            // or after 128 of them or 2 ms of continuous work: one event per burst, not per PUBACK.
            var ready = self.wait(seconds: self.acked.isEmpty ? 1 : 0)
            if !self.acked.isEmpty, !ready.wake, !ready.readable, !ready.writable {
                self.reportAcknowledged()
                ready = self.wait(seconds: 1)
            }
            guard let mosq = self.mosq else { continue }
            // What this turn writes goes out corked: libmosquitto writes each packet on its own,
            // the kernel sends them in full segments once released at the end of the turn (not
            // a segment per message, and on loopback the broker's receive path per message).
            // Released before the thread waits again.
            var corked: Int32 = -1
            if self.connected, self.options.caFile == nil {
                let sock = mosquitto_socket(mosq)
                if sock >= 0, cmosq_cork(sock, 1) == 0 { corked = sock }
            }
            defer { if corked >= 0 { _ = cmosq_cork(corked, 0) } }
            if ready.wake, self.handleCommands() { return }
            if self.failure == nil, ready.readable {
                let rc = mosquitto_loop_read(mosq, 256)
                if rc != MOSQ_ERR_SUCCESS.rawValue { self.noteLoopError(rc) }
            }
            // PUBACKs made room: the next waiting publishes go out now, from this thread.
            self.publishWaiting()
            if self.failure == nil, ready.writable || mosquitto_want_write(mosq) {
                let rc = mosquitto_loop_write(mosq, 256)
                if rc != MOSQ_ERR_SUCCESS.rawValue { self.noteLoopError(rc) }
            }
            if self.failure == nil {
                let rc = mosquitto_loop_misc(mosq)
                if rc != MOSQ_ERR_SUCCESS.rawValue { self.noteLoopError(rc) }
            }
            if self.acked.count >= 128 || (!self.acked.isEmpty && monotonicSeconds() - self.ackedReported >= 0.002) {
                self.reportAcknowledged()
            }
            for (topic, payload) in self.messages { self.events(.message(topic: topic, payload: payload)) }
            self.messages.removeAll()
            if self.failure == nil, !self.connected, monotonicSeconds() - self.connectStarted > self.options.connectTimeout {
                self.failure = ("no CONNACK from the broker within \(Int(self.options.connectTimeout)) s", false)
            }
            if let failure = self.failure {
                nextAttempt = monotonicSeconds() + self.teardown(failure)
            }
        }
    }

    /// Runs queued commands; true when asked to stop.
    private func handleCommands() -> Bool {
        self.drainWake()
        let commands = self.queue.withLock { q -> [Command] in
            defer { q.removeAll() }
            return q
        }
        for command in commands {
            switch command {
            case .publish(let message, let token, let session):
                guard self.mosq != nil, self.connected, session == self.session, self.failure == nil else { continue }
                self.waiting.append(Waiting(message: message, token: token))
            case .stop(let last):
                if let mosq = self.mosq, self.connected, self.failure == nil {
                    if let last {
                        _ = last.payload.withUnsafeBytes { bytes in
                            mosquitto_publish_v5(mosq, nil, last.topic, Int32(bytes.count), bytes.baseAddress, last.qos, last.retain, nil)
                        }
                    }
                    _ = mosquitto_disconnect_v5(mosq, 0, nil)
                    let deadline = monotonicSeconds() + 1
                    while mosquitto_want_write(mosq), monotonicSeconds() < deadline {
                        if mosquitto_loop_write(mosq, 16) != MOSQ_ERR_SUCCESS.rawValue { break }
                        if mosquitto_want_write(mosq) { _ = self.wait(seconds: 0.05) }
                    }
                }
                if let mosq = self.mosq { mosquitto_destroy(mosq) }
                self.mosq = nil
                return true
            }
        }
        self.publishWaiting()
        return false
    }

    /// Hands waiting publishes to libmosquitto, in order, while the window has room (a publish
    /// without a token or at QoS 0 takes no room, but waits its turn behind the ones before it).
    private func publishWaiting() {
        let limit = self.options.maxInFlight > 0 ? self.options.maxInFlight : Int.max
        while self.waitingHead < self.waiting.count, let mosq = self.mosq, self.failure == nil {
            let next = self.waiting[self.waitingHead]
            let counted = next.message.qos > 0 && next.token >= 0
            if counted, self.tokens.count >= limit { break }
            self.waitingHead += 1
            var mid: Int32 = 0
            let message = next.message
            let rc = message.payload.withUnsafeBytes { bytes in
                mosquitto_publish_v5(
                    mosq, &mid, message.topic, Int32(bytes.count), bytes.baseAddress, message.qos, message.retain, nil)
            }
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                self.noteLoopError(rc)
            } else if counted {
                self.tokens[mid] = next.token
            }
        }
        if self.waitingHead == self.waiting.count {
            self.waiting.removeAll(keepingCapacity: true)
            self.waitingHead = 0
        } else if self.waitingHead >= 1024, self.waitingHead * 2 >= self.waiting.count {
            self.waiting.removeFirst(self.waitingHead)
            self.waitingHead = 0
        }
    }

    /// Reports the acknowledged tokens as one event.
    private func reportAcknowledged() {
        self.ackedReported = monotonicSeconds()
        guard !self.acked.isEmpty else { return }
        self.events(.acknowledged(tokens: self.acked, session: self.session))
        self.acked.removeAll(keepingCapacity: true)
    }

    /// Starts a connection: a fresh handle (clean start as configured), callbacks, credentials, TLS
    /// with peer verification, the will, and a blocking TCP connect; sets ``failure`` when any step fails.
    private func connect() {
        let o = self.options
        let userdata = Unmanaged.passUnretained(self).toOpaque()
        guard let mosq = mosquitto_new(o.clientID, o.cleanStart, userdata) else {
            self.failure = ("libmosquitto could not create a client (out of memory or a bad client id)", true)
            return
        }
        self.mosq = mosq
        // With `receive`, packets libmosquitto queues are written only by this thread's
        // `mosquitto_loop_write`, never from inside `packet__queue`. libmosquitto 2.0.11 queues a
        // QoS 1 PUBACK before it calls the message callback and, in its unthreaded mode, writes it
        // at once: the broker would learn the message arrived before `receive` committed it.
        // Queued, the PUBACK leaves after `receive` returned true, or never (refused, killed): see
        // `receive`. A publisher keeps the unthreaded mode: each publish is written as it is made
        // (corked per turn); in the threaded mode the forwarder fell to 0.36 of the C publisher
        // (`sugar-bench forward`, BENCHMARKS.md).
        if o.receive != nil { _ = mosquitto_threaded_set(mosq, true) }
        self.connected = false
        self.tokens = [:]
        self.connectStarted = monotonicSeconds()
        _ = mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, CMOSQ_PROTOCOL_V5)
        // Each publish is a whole message: sent at once, not held by Nagle's algorithm until the
        // one before it is acknowledged (with delayed ACKs, tens of milliseconds for a reading).
        _ = mosquitto_int_option(mosq, MOSQ_OPT_TCP_NODELAY, 1)
        mosquitto_connect_v5_callback_set(mosq) { _, obj, rc, _, _ in
            guard let obj else { return }
            Unmanaged<Core>.fromOpaque(obj).takeUnretainedValue().onConnect(rc)
        }
        mosquitto_disconnect_v5_callback_set(mosq) { _, obj, rc, _ in
            guard let obj else { return }
            Unmanaged<Core>.fromOpaque(obj).takeUnretainedValue().onDisconnect(rc)
        }
        mosquitto_publish_v5_callback_set(mosq) { _, obj, mid, reason, _ in
            guard let obj else { return }
            Unmanaged<Core>.fromOpaque(obj).takeUnretainedValue().onPublish(mid, reason)
        }
        mosquitto_message_v5_callback_set(mosq) { _, obj, message, _ in
            guard let obj, let message else { return }
            let m = message.pointee
            let topic = m.topic.map { String(cString: $0) } ?? ""
            let payload: [UInt8] =
                m.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(m.payloadlen))) } ?? []
            Unmanaged<Core>.fromOpaque(obj).takeUnretainedValue().onMessage(topic, payload, retained: m.retain)
        }
        var rc = MOSQ_ERR_SUCCESS.rawValue
        if let username = o.username {
            rc = mosquitto_username_pw_set(mosq, username, o.password)
        }
        if rc == MOSQ_ERR_SUCCESS.rawValue, let ca = o.caFile {
            rc = mosquitto_tls_set(mosq, ca, nil, nil, nil, nil)
            if rc == MOSQ_ERR_SUCCESS.rawValue { rc = mosquitto_tls_opts_set(mosq, CMOSQ_SSL_VERIFY_PEER, nil, nil) }
            if rc == MOSQ_ERR_SUCCESS.rawValue { rc = mosquitto_tls_insecure_set(mosq, false) }
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                self.failure = ("TLS set-up with CA file \(ca) failed: \(Self.text(rc))", true)
                return
            }
        }
        if rc == MOSQ_ERR_SUCCESS.rawValue, let will = o.will {
            rc = will.payload.withUnsafeBytes { bytes in
                mosquitto_will_set_v5(mosq, will.topic, Int32(bytes.count), bytes.baseAddress, will.qos, will.retain, nil)
            }
        }
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            self.failure = ("cannot set up the MQTT client: \(Self.text(rc))", true)
            return
        }
        // Blocking TCP connect (and TLS handshake); the socket is non-blocking afterwards.
        var properties: OpaquePointer?
        if o.sessionExpirySeconds > 0 {
            _ = mosquitto_property_add_int32(&properties, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), o.sessionExpirySeconds)
        }
        rc = mosquitto_connect_bind_v5(mosq, o.host, o.port, o.keepAliveSeconds, nil, properties)
        mosquitto_property_free_all(&properties)
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            let code = errno
            self.failure = self.classify(rc, errno: code, connecting: true)
        }
    }

    /// libmosquitto's text for an error code.
    private static func text(_ rc: Int32) -> String { String(cString: mosquitto_strerror(rc)) }

    /// A failure's sentence, and whether it is permanent (an unknown host or TLS: retrying soon cannot help).
    private func classify(_ rc: Int32, errno code: Int32, connecting: Bool) -> (String, Bool) {
        let endpoint = "\(self.options.host):\(self.options.port)"
        switch rc {
        case MOSQ_ERR_EAI.rawValue: return ("unknown host \(self.options.host) (name lookup failed)", true)
        case MOSQ_ERR_TLS.rawValue: return ("TLS failure with \(endpoint) (certificate not trusted by the CA file, or no TLS there)", true)
        case MOSQ_ERR_ERRNO.rawValue:
            return ("\(connecting ? "cannot connect to" : "connection to") \(endpoint): \(String(cString: strerror(code)))", false)
        default: return ("\(connecting ? "cannot connect to" : "connection to") \(endpoint): \(Self.text(rc))", false)
        }
    }

    /// Records the first failure of a loop step.
    private func noteLoopError(_ rc: Int32) {
        if self.failure == nil { self.failure = self.classify(rc, errno: errno, connecting: false) }
    }

    /// Destroys the handle and reports the failure; returns the delay before the next attempt.
    private func teardown(_ failure: (reason: String, permanent: Bool)) -> Double {
        if let mosq = self.mosq { mosquitto_destroy(mosq) }
        self.mosq = nil
        let wasConnected = self.connected
        self.connected = false
        self.failure = nil
        self.tokens = [:]
        // What waited for the window belonged to the connection that ended: the owner sends it
        // again after the next `connected`. PUBACKs that did arrive are still reported first.
        self.waiting.removeAll()
        self.waitingHead = 0
        self.reportAcknowledged()
        let retry: Double
        if failure.permanent {
            retry = self.options.slowRetry
            self.failures = 0
        } else if wasConnected {
            retry = self.options.retryMinimum
            self.failures = 0
        } else {
            self.failures += 1
            retry = RetryBackoff.delay(failures: self.failures, initial: self.options.retryMinimum, max: self.options.retryMaximum)
        }
        self.events(.disconnected(reason: failure.reason, permanent: failure.permanent, retryIn: retry))
        return retry
    }

    // MARK: Callbacks (on this thread, inside loop_read/loop_write)

    /// CONNACK: success starts a new session and subscribes; a refusal for credentials,
    /// authorization, client id, protocol or a ban is permanent.
    func onConnect(_ rc: Int32) {
        guard rc == 0 else {
            let reason = String(cString: mosquitto_reason_string(rc))
            let permanent = [
                MQTT_RC_BAD_USERNAME_OR_PASSWORD, MQTT_RC_NOT_AUTHORIZED, MQTT_RC_CLIENTID_NOT_VALID,
                MQTT_RC_BAD_AUTHENTICATION_METHOD, MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION, MQTT_RC_BANNED,
            ].contains { Int32(bitPattern: $0.rawValue) == rc }
            self.failure = ("the broker refused the connection: \(reason)", permanent)
            return
        }
        self.connected = true
        self.session += 1
        self.failures = 0
        for topic in self.options.subscriptions {
            _ = mosquitto_subscribe_v5(self.mosq, nil, topic, 1, 0, nil)
        }
        self.events(.connected(session: self.session))
    }

    /// A message arrived: handed to ``MQTTOptions/receive`` (see there for when its PUBACK leaves), or
    /// kept for the event.
    func onMessage(_ topic: String, _ payload: [UInt8], retained: Bool) {
        guard let receive = self.options.receive else {
            self.messages.append((topic, payload))
            return
        }
        guard self.failure == nil else { return }
        if !receive(topic, payload, retained) {
            // No PUBACK may leave: libmosquitto queues it right after this returns, so the socket
            // is shut now and the write fails; the connection is torn down and the broker keeps
            // the message for the session.
            if let mosq = self.mosq {
                let sock = mosquitto_socket(mosq)
                if sock >= 0 { _ = Glibc.shutdown(sock, Int32(SHUT_RDWR)) }
            }
            self.failure = ("a received message could not be handled; not acknowledged, the broker sends it again", false)
        }
    }

    /// The connection ended; an unrequested end becomes the failure.
    func onDisconnect(_ rc: Int32) {
        if self.failure == nil, rc != 0 {
            // rc is a libmosquitto error for a lost connection, an MQTT reason code for a DISCONNECT.
            let why = rc < 0x80 ? Self.text(rc) : String(cString: mosquitto_reason_string(rc))
            self.failure = ("connection to \(self.options.host):\(self.options.port) lost: \(why)", false)
        }
    }

    /// A PUBACK: its token is acknowledged, or, with a reason code of 0x80 or more, the publish was
    /// refused (a permanent failure).
    func onPublish(_ mid: Int32, _ reason: Int32) {
        guard let token = self.tokens.removeValue(forKey: mid) else { return }
        if reason >= 0x80 {
            if self.failure == nil {
                self.failure = ("the broker refused a publish: \(String(cString: mosquitto_reason_string(reason)))", true)
            }
            return
        }
        self.acked.append(token)
    }
}
