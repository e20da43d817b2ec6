import CMicroHTTPD
import Glibc
import Locking

/// One request, as libmicrohttpd parsed it.
public struct HTTPRequest: Sendable {
    /// `GET`, `POST`, … as sent.
    public var method: String
    /// The path without the query (`/api/readings`).
    public var path: String
    /// The query arguments (decoded by libmicrohttpd); a repeated one keeps its first value.
    public var query: [String: String]
    /// The `Authorization` header, if any.
    public var authorization: String?
}

/// What to answer.
public struct HTTPResponse: Sendable {
    /// The HTTP status code.
    public var status: Int
    /// The `Content-Type` header.
    public var contentType: String
    /// The response body.
    public var body: [UInt8]
    /// Further headers, added after `Content-Type`, `Cache-Control: no-store` and `X-Content-Type-Options: nosniff`.
    public var headers: [(String, String)]

    /// A response with every field given.
    public init(status: Int, contentType: String, body: [UInt8], headers: [(String, String)] = []) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.headers = headers
    }

    /// A plain UTF-8 text response; a newline is appended to `text`.
    public static func text(_ status: Int, _ text: String) -> HTTPResponse {
        HTTPResponse(status: status, contentType: "text/plain; charset=utf-8", body: Array((text + "\n").utf8))
    }
}

/// The server could not start.
public struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    /// Why, in one sentence.
    public var description: String
    /// An error worded as `description`.
    public init(_ description: String) { self.description = description }
}

/// An HTTP/1.1 server through libmicrohttpd (its own polling thread; requests are answered on it
/// one at a time, so the handler needs no locking of its own for state only it touches).
public final class HTTPServer: Sendable {
    /// The handler, kept alive for libmicrohttpd's callback.
    private let box: Box
    /// The `MHD_Daemon*`; nil once stopped.
    private let daemon: Lock<OpaquePointer?>

    /// Carries the handler through libmicrohttpd's context pointer.
    final class Box: Sendable {
        /// The server's request handler.
        let handler: @Sendable (HTTPRequest) -> HTTPResponse
        init(_ handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse) { self.handler = handler }
    }

    /// Parses `HOST:PORT` (an IPv4 address or `localhost`; `[::1]:PORT` for IPv6).
    public static func parseListen(_ text: String) -> (host: String, port: UInt16)? {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host == "localhost" { host = "127.0.0.1" }
        var v4 = in_addr()
        var v6 = in6_addr()
        guard inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1 else { return nil }
        return (host, port)
    }

    /// Whether `host` (as ``parseListen(_:)`` returns it) is a loopback address.
    public static func isLoopback(_ host: String) -> Bool { host.hasPrefix("127.") || host == "::1" }

    /// Listens on `host:port` and answers every request with `handler`.
    public init(host: String, port: UInt16, handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse) throws(HTTPServerError) {
        let box = Box(handler)
        self.box = box
        let context = Unmanaged.passUnretained(box).toOpaque()
        var started: OpaquePointer?
        var v4 = sockaddr_in()
        var v6 = sockaddr_in6()
        if inet_pton(AF_INET, host, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = port.bigEndian
            started = withUnsafePointer(to: &v4) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { cmhd_start($0, accessHandler, context, 256, 30) }
            }
        } else if inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = port.bigEndian
            started = withUnsafePointer(to: &v6) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { cmhd_start($0, accessHandler, context, 256, 30) }
            }
        } else {
            throw HTTPServerError("not an IP address: \(host)")
        }
        guard let started else {
            throw HTTPServerError("cannot listen on \(host):\(port) (address in use or not available)")
        }
        self.daemon = Lock(started)
    }

    /// Stops listening and ends the server's thread.
    public func stop() {
        self.daemon.withLock { d in
            if let daemon = d { MHD_stop_daemon(daemon) }
            d = nil
        }
    }

    deinit { self.stop() }
}

/// libmicrohttpd's iterator over query arguments: keeps the first value of each name.
private func collect(
    _ cls: UnsafeMutableRawPointer?, _ kind: MHD_ValueKind, _ key: UnsafePointer<CChar>?, _ value: UnsafePointer<CChar>?
) -> MHD_Result {
    guard let cls, let key else { return .YES }
    let query = cls.assumingMemoryBound(to: [String: String].self)
    let name = String(cString: key)
    if query.pointee[name] == nil { query.pointee[name] = value.map { String(cString: $0) } ?? "" }
    return .YES
}

/// libmicrohttpd's request callback: skips any request body, builds the ``HTTPRequest``, calls the
/// handler and queues its answer with the fixed security headers.
private func accessHandler(
    _ cls: UnsafeMutableRawPointer?, _ connection: OpaquePointer?, _ url: UnsafePointer<CChar>?, _ method: UnsafePointer<CChar>?,
    _ version: UnsafePointer<CChar>?, _ uploadData: UnsafePointer<CChar>?, _ uploadSize: UnsafeMutablePointer<Int>?,
    _ state: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
) -> MHD_Result {
    guard let cls, let connection else { return .NO }
    let box = Unmanaged<HTTPServer.Box>.fromOpaque(cls).takeUnretainedValue()
    // A request body (none expected) is read and ignored before answering.
    if let uploadSize, uploadSize.pointee > 0 {
        uploadSize.pointee = 0
        return .YES
    }
    var query: [String: String] = [:]
    _ = withUnsafeMutablePointer(to: &query) { MHD_get_connection_values(connection, .GET_ARGUMENT_KIND, collect, $0) }
    let authorization = MHD_lookup_connection_value(connection, .HEADER_KIND, "Authorization").map { String(cString: $0) }
    let request = HTTPRequest(
        method: method.map { String(cString: $0) } ?? "GET", path: url.map { String(cString: $0) } ?? "/", query: query,
        authorization: authorization)
    let answer = box.handler(request)
    let response = answer.body.withUnsafeBytes { bytes in
        cmhd_copy_response(bytes.count, bytes.baseAddress)
    }
    guard let response else { return .NO }
    defer { MHD_destroy_response(response) }
    _ = MHD_add_response_header(response, "Content-Type", answer.contentType)
    _ = MHD_add_response_header(response, "Cache-Control", "no-store")
    _ = MHD_add_response_header(response, "X-Content-Type-Options", "nosniff")
    for (name, value) in answer.headers { _ = MHD_add_response_header(response, name, value) }
    return MHD_queue_response(connection, UInt32(answer.status), response)
}
