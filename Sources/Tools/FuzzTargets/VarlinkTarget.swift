import Glibc
import JSON
import SystemIO
import Varlink

extension FuzzTargets {
    /// Varlink: the first byte picks what the rest feeds. Even: the rest is a client's byte stream, sent
    /// over a real Unix socket to a `VarlinkServer` (framing at NUL, JSON decoding, call validation against
    /// an interface, dispatch, replies, `more` streams, errors). Odd: the rest is an interface description
    /// for `VarlinkInterfaceDefinition(description:)` and its validators.
    ///
    /// Checks (stream): the server answers and closes within 5 s once the client has sent everything and
    /// half-closed; every reply frame is a JSON object whose `error` is a string and whose `parameters`
    /// is an object; it never sends more replies than calls could ask for. Checks (description): errors
    /// carry a line that exists and a column ≥ 1; an accepted description re-parses from its own `text`
    /// to the same members; the validators never trap on any value.
    public static func varlink(_ bytes: [UInt8]) throws(FuzzFailure) {
        guard let selector = bytes.first else { return }
        let rest = Array(bytes.dropFirst())
        if selector & 1 == 0 {
            _ = try VarlinkStream.exchange(rest, input: bytes)
        } else {
            try varlinkDescription(rest, input: bytes)
        }
    }

    /// The replies the fuzz server sends for a client byte stream (what `varlink` checks for inputs whose first
    /// byte is even), for tests that make sure the stream really reaches a server.
    public static func varlinkReplies(toStream bytes: [UInt8]) throws(FuzzFailure) -> [JSONValue] {
        try VarlinkStream.exchange(bytes, input: [0] + bytes)
    }

    /// Starts the shared server that `varlink` sends byte streams to (it would otherwise start on the first
    /// such input). Failures surface on that first input.
    public static func prepareVarlink() {
        _ = VarlinkStream.shared
    }

    private static func varlinkDescription(_ bytes: [UInt8], input: [UInt8]) throws(FuzzFailure) {
        func fail(_ message: String) -> FuzzFailure {
            FuzzFailure(target: "varlink", "\(message); input \(hexString(input))")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { return }
        let definition: VarlinkInterfaceDefinition
        do {
            definition = try VarlinkInterfaceDefinition(description: text)
        } catch {
            let lines = bytes.lazy.filter { $0 == 0x0A }.count + 1
            if error.line < 1 || error.line > lines || error.column < 1 {
                throw fail("description error at line \(error.line), column \(error.column) outside the \(lines)-line text: \(error)")
            }
            if error.reason.isEmpty { throw fail("description error with an empty reason") }
            return
        }
        let again: VarlinkInterfaceDefinition
        do {
            again = try VarlinkInterfaceDefinition(description: definition.text)
        } catch {
            throw fail("an accepted description is rejected when parsed from its own text: \(error)")
        }
        if again.name != definition.name || again.memberOrder != definition.memberOrder
            || again.methods != definition.methods || again.types != definition.types
        {
            throw fail("the description parses differently the second time")
        }
        for (name, method) in definition.methods {
            for value in Self.sampleObjects(for: method) {
                try? definition.validateCall(method: name, parameters: value)
                try? definition.validateReply(method: name, parameters: value)
            }
        }
        for name in definition.errors.keys { try? definition.validateError(name: name, parameters: [:]) }
        for type in definition.types.values {
            for value in Self.sampleValues { try? definition.validate(value, as: type) }
        }
        _ = definition.types.values.map(\.description)
    }

    private static let sampleValues: [JSONValue] = [
        .null, .bool(true), .int(-1), .double(0.5), .string("a"), .array([]), .array([.int(1), .string("b")]),
        .object([:]), .object(["a": .int(1), "b": .array([.null]), "c": .object(["d": .string("e")])]),
    ]

    /// Empty parameters, all-null ones, and each field set to each sample value.
    private static func sampleObjects(for method: VarlinkMethod) -> [JSONObject] {
        var objects: [JSONObject] = [[:]]
        for fields in [method.input, method.output] {
            objects.append(JSONObject(fields.map { ($0.name, JSONValue.null) }))
            for value in self.sampleValues {
                objects.append(JSONObject(fields.map { ($0.name, value) }))
            }
        }
        return objects
    }
}

/// One `VarlinkServer` per process, serving a test interface on an abstract Unix socket (nothing on disk).
/// It runs for the life of the fuzzing process; its task is kept here and never needs cancelling.
private final class VarlinkStream: Sendable {
    static let description = """
        # Exercises every kind of type the validator knows.
        interface org.sugard.fuzz

        type Reading (
          mgdL: float,
          when: string,
          tags: []string,
          meta: [string]int,
          kind: (low, normal, high),
          note: ?string,
          extra: object,
          nested: ?(a: bool, b: ?[]?int)
        )

        method Echo(reading: ?Reading, n: ?int, flag: ?bool) -> (reading: ?Reading, n: ?int, flag: ?bool)
        method Stream(count: int) -> (index: int)
        method Fail(reason: string) -> ()
        method Silent() -> ()

        error Failed (reason: string)
        """

    /// Most replies one call can cause (Stream is capped at this many).
    static let maxRepliesPerCall = 3

    static let shared: Result<VarlinkStream, FuzzFailure> = Result { () throws(FuzzFailure) in try VarlinkStream() }

    let address: [UInt8]
    let task: Task<Void, Never>

    private init() throws(FuzzFailure) {
        func fail(_ message: String) -> FuzzFailure { FuzzFailure(target: "varlink", "cannot start the server: \(message)") }
        let definition: VarlinkInterfaceDefinition
        do { definition = try VarlinkInterfaceDefinition(description: Self.description) } catch {
            throw fail("\(error)")
        }
        let interface = VarlinkInterface(definition, methodsRequiringMore: ["Stream"]) { call, replier throws(VarlinkError) in
            switch call.methodName {
            case "Echo":
                replier.reply(call.parameters)
            case "Stream":
                let count = max(0, min(Int(call.parameters["count"]?.intValue ?? 0), Self.maxRepliesPerCall))
                if count == 0 { throw VarlinkError("org.sugard.fuzz.Failed", ["reason": "count must be positive"]) }
                for index in 0..<count { replier.reply(["index": .int(Int64(index))], continues: index < count - 1) }
            case "Fail":
                throw VarlinkError("org.sugard.fuzz.Failed", ["reason": call.parameters["reason"] ?? .null])
            default:
                break  // Silent: the server must answer MethodNotImplemented by itself
            }
        }
        // An abstract socket address: leading NUL, then a name unique to this process.
        self.address = [0] + Array("sugard-fuzz-varlink-\(getpid())".utf8)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw fail("socket: errno \(errno)") }
        let bound = Self.withAddress(self.address) { bind(fd, $0, $1) }
        guard bound == 0, listen(fd, 64) == 0 else {
            close(fd)
            throw fail("bind/listen: errno \(errno)")
        }
        var configuration = VarlinkServerConfiguration(listen: .fileDescriptor(fd))
        configuration.maxMessageBytes = 64 << 10
        let server: VarlinkServer
        do { server = try VarlinkServer(configuration: configuration, handlers: [interface]) } catch {
            throw fail("\(error)")
        }
        self.task = Task { try? await server.run() }
    }

    static func withAddress<R>(_ name: [UInt8], _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: name.prefix($0.count)) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + min(name.count, MemoryLayout.size(ofValue: address.sun_path)))
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }

    /// Sends `bytes` on a new connection, half-closes, and reads every reply until the server closes.
    static func exchange(_ bytes: [UInt8], input: [UInt8]) throws(FuzzFailure) -> [JSONValue] {
        func fail(_ message: String) -> FuzzFailure {
            FuzzFailure(target: "varlink", "\(message); input \(hexString(input))")
        }
        let stream = try Self.shared.get()
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw fail("socket: errno \(errno)") }
        defer { close(fd) }
        guard Self.withAddress(stream.address, { connect(fd, $0, $1) }) == 0 else {
            throw fail("connect: errno \(errno)")
        }
        var received: [UInt8] = []
        var sent = 0
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let deadline = Int(monotonicMilliseconds()) + 5_000
        var halfClosed = false
        if bytes.isEmpty {
            shutdown(fd, Int32(SHUT_WR))
            halfClosed = true
        }
        reading: while true {
            let left = deadline - Int(monotonicMilliseconds())
            if left <= 0 {
                throw fail("the server neither answered nor closed within 5 s (sent \(sent) of \(bytes.count) bytes)")
            }
            var events = Int16(POLLIN)
            if !halfClosed { events |= Int16(POLLOUT) }
            var poller = pollfd(fd: fd, events: events, revents: 0)
            let ready = retryingInterrupted { poll(&poller, 1, Int32(max(0, deadline - Int(monotonicMilliseconds())))) }
            if ready < 0 {
                throw fail("poll: errno \(errno)")
            }
            if ready == 0 { continue }
            if poller.revents & Int16(POLLOUT) != 0 && !halfClosed {
                let n = bytes[sent...].withUnsafeBytes { raw in retryingInterrupted { send(fd, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL)) } }
                if n > 0 { sent += n }
                if n < 0 && errno != EAGAIN {
                    halfClosed = true  // the server closed (e.g. a message over the limit); read what it said
                }
                if sent == bytes.count {
                    shutdown(fd, Int32(SHUT_WR))
                    halfClosed = true
                }
            }
            if poller.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                let n = chunk.withUnsafeMutableBytes { raw in retryingInterrupted { recv(fd, raw.baseAddress, raw.count, Int32(MSG_DONTWAIT)) } }
                if n > 0 {
                    received.append(contentsOf: chunk[0..<n])
                } else if n == 0 || errno != EAGAIN {
                    break reading
                }
            }
        }

        // Every frame the server sent must be a well-formed reply.
        let calls = bytes[..<sent].lazy.filter { $0 == 0 }.count
        var parsed: [JSONValue] = []
        for frame in received.split(separator: 0, omittingEmptySubsequences: false).dropLast() {
            let replies = parsed.count + 1
            let reply: JSONValue
            do { reply = try JSONValue(parsing: frame) } catch {
                throw fail("reply \(replies) is not JSON: \(error)")
            }
            guard let object = reply.objectValue else { throw fail("reply \(replies) is not an object") }
            if let error = object["error"], error.stringValue == nil { throw fail("reply \(replies) has a non-string error") }
            if let parameters = object["parameters"], parameters.objectValue == nil {
                throw fail("reply \(replies) has non-object parameters")
            }
            parsed.append(reply)
        }
        if received.last.map({ $0 != 0 }) ?? false { throw fail("the server closed in the middle of a reply") }
        // One reply per call (Stream: up to three), plus one protocol error before closing.
        if parsed.count > calls * Self.maxRepliesPerCall + 1 {
            throw fail("\(parsed.count) replies to \(calls) calls")
        }
        return parsed
    }
}
