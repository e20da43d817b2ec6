internal import CCurl
import Locking

/// One HTTP request for ``HTTPClient/send(_:)``.
public struct HTTPRequest: Sendable {
    /// `GET` (default), `POST`, or any other method (sent as a custom request).
    public var method: String
    /// An `http` or `https` URL.
    public var url: String
    /// Header lines as `(name, value)`.
    public var headers: [(name: String, value: String)]
    /// The request body; sent for POST (also when empty) and whenever not empty.
    public var body: [UInt8]
    /// The whole transfer's limit (connecting included).
    public var timeoutMilliseconds: Int
    /// A PEM file of CA certificates to trust instead of the system's (a private CA).
    public var caFile: String?

    /// A request; `GET` with a 30 s limit and the system's CA certificates unless told.
    public init(
        method: String = "GET", url: String, headers: [(name: String, value: String)] = [], body: [UInt8] = [],
        timeoutMilliseconds: Int = 30_000, caFile: String? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeoutMilliseconds = timeoutMilliseconds
        self.caFile = caFile
    }
}

/// What the server answered (any status: the caller decides what a status means).
public struct HTTPResponse: Sendable {
    /// The HTTP status code.
    public var status: Int
    /// The response body, at most 4 MiB (a longer one fails the transfer).
    public var body: [UInt8]

    /// The body as UTF-8 text (invalid bytes replaced).
    public var text: String { String(decoding: self.body, as: UTF8.self) }
}

/// Why no answer came.
public struct HTTPError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure, for callers that retry some and report others.
    public enum Kind: String, Sendable {
        /// Connection refused, host unknown or unreachable.
        case couldNotConnect
        /// The transfer's time limit passed.
        case timedOut
        /// The certificate did not verify, or the TLS handshake failed.
        case tls
        /// The calling task was cancelled.
        case cancelled
        /// Anything else (a bad URL, an unsupported protocol, libcurl itself).
        case other
    }

    /// What kind of failure.
    public var kind: Kind
    /// libcurl's explanation (never contains the request's headers or body).
    public var message: String

    /// libcurl's explanation.
    public var description: String { self.message }
}

/// HTTP and HTTPS through libcurl (the only importer of `CCurl`). Certificates are always
/// verified (peer and host name); only `http` and `https` URLs are followed, and redirects are
/// not. Each transfer runs on a thread of its own (libcurl's easy interface blocks), so callers'
/// tasks never block Swift's cooperative pool; cancelling the calling task aborts the transfer.
public enum HTTPClient {
    /// libcurl's one-time global set-up, run on first use.
    private static let globalInit: CURLcode = curl_global_init(SUGARD_CURL_GLOBAL_DEFAULT)

    /// Performs `request` and returns the response, whatever its status.
    /// - Throws: ``HTTPError`` when no response came (refused, timed out, TLS, cancelled).
    public static func send(_ request: HTTPRequest) async throws(HTTPError) -> HTTPResponse {
        guard Self.globalInit == CURLE_OK else { throw HTTPError(kind: .other, message: "libcurl did not initialise") }
        let cancel = CancelFlag()
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<HTTPResponse, HTTPError>, Never>) in
                let rc = startDetachedThread { continuation.resume(returning: Self.perform(request, cancel: cancel)) }
                if rc != 0 { continuation.resume(returning: .failure(HTTPError(kind: .other, message: "cannot start a thread (\(rc))"))) }
            }
        } onCancel: {
            cancel.set()
        }
        return try result.get()
    }

    /// The blocking transfer. The corresponding C function is `curl_easy_perform`.
    static func perform(_ request: HTTPRequest, cancel: CancelFlag) -> Result<HTTPResponse, HTTPError> {
        guard let curl = curl_easy_init() else { return .failure(HTTPError(kind: .other, message: "curl_easy_init failed")) }
        defer { curl_easy_cleanup(curl) }
        var headers: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headers) }
        var buffer = sugard_curl_buffer(data: nil, length: 0, capacity: 0, limit: 4 << 20)
        defer { free(buffer.data) }
        let errorText = UnsafeMutablePointer<CChar>.allocate(capacity: Int(SUGARD_CURL_ERROR_SIZE))
        errorText.initialize(repeating: 0, count: Int(SUGARD_CURL_ERROR_SIZE))
        defer { errorText.deallocate() }

        var rc = CURLE_OK
        func set(_ option: CURLoption, _ value: Int) { if rc == CURLE_OK { rc = sugard_curl_setopt_long(curl, option, value) } }
        func set(_ option: CURLoption, _ value: String) { if rc == CURLE_OK { rc = sugard_curl_setopt_string(curl, option, value) } }
        set(CURLOPT_NOSIGNAL, 1)
        if rc == CURLE_OK { rc = sugard_curl_setopt_pointer(curl, CURLOPT_ERRORBUFFER, errorText) }
        set(CURLOPT_URL, request.url)
        set(CURLOPT_PROTOCOLS_STR, "http,https")
        set(CURLOPT_FOLLOWLOCATION, 0)
        set(CURLOPT_SSL_VERIFYPEER, 1)
        set(CURLOPT_SSL_VERIFYHOST, 2)
        if let caFile = request.caFile { set(CURLOPT_CAINFO, caFile) }
        set(CURLOPT_TIMEOUT_MS, max(1, request.timeoutMilliseconds))
        set(CURLOPT_CONNECTTIMEOUT_MS, max(1, min(request.timeoutMilliseconds, 10_000)))
        set(CURLOPT_USERAGENT, "sugard")
        for (name, value) in request.headers { headers = curl_slist_append(headers, "\(name): \(value)") }
        if request.body.isEmpty == false && !request.headers.contains(where: { $0.name.lowercased() == "expect" }) {
            headers = curl_slist_append(headers, "Expect:")  // no 100-continue round trip
        }
        if rc == CURLE_OK { rc = sugard_curl_setopt_slist(curl, CURLOPT_HTTPHEADER, headers) }
        switch request.method {
        case "GET": set(CURLOPT_HTTPGET, 1)
        case "POST": set(CURLOPT_POST, 1)
        default: set(CURLOPT_CUSTOMREQUEST, request.method)
        }
        if !request.body.isEmpty || request.method == "POST" {
            set(CURLOPT_POSTFIELDSIZE, request.body.count)
            // COPYPOSTFIELDS copies exactly POSTFIELDSIZE bytes (set first), NULs included.
            request.body.withUnsafeBufferPointer { bytes in
                if rc == CURLE_OK {
                    rc = sugard_curl_setopt_pointer(curl, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress ?? UnsafePointer(bitPattern: 1)!))
                }
            }
        }
        if rc == CURLE_OK { rc = sugard_curl_collect_body(curl, &buffer) }
        if rc == CURLE_OK { rc = cancel.withPointer { sugard_curl_cancel_on(curl, $0) } }
        guard rc == CURLE_OK else { return .failure(Self.error(rc, errorText)) }

        rc = curl_easy_perform(curl)
        guard rc == CURLE_OK else { return .failure(Self.error(rc, errorText)) }
        var status = 0
        _ = sugard_curl_getinfo_long(curl, CURLINFO_RESPONSE_CODE, &status)
        let body = buffer.data.map { Array(UnsafeRawBufferPointer(start: $0, count: buffer.length).bindMemory(to: UInt8.self)) } ?? []
        return .success(HTTPResponse(status: status, body: body))
    }

    /// The error for a libcurl result: its error buffer's text (or `curl_easy_strerror`), and the kind
    /// the code maps to.
    static func error(_ code: CURLcode, _ text: UnsafeMutablePointer<CChar>) -> HTTPError {
        let detail = String(cString: text)
        let message = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
        let kind: HTTPError.Kind
        switch code {
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_RECV_ERROR,
            CURLE_SEND_ERROR, CURLE_GOT_NOTHING:
            kind = .couldNotConnect
        case CURLE_OPERATION_TIMEDOUT: kind = .timedOut
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM:
            kind = .tls
        case CURLE_ABORTED_BY_CALLBACK: kind = .cancelled
        default: kind = .other
        }
        return HTTPError(kind: kind, message: message)
    }
}

/// A flag libcurl's progress callback reads from the transfer thread. Invariant that makes the
/// @unchecked Sendable sound: the int is only touched through the shim's atomic load and store,
/// and it lives as long as the box, which both the transfer and the cancel handler retain.
final class CancelFlag: @unchecked Sendable {
    /// The shared int: 0 until ``set()``.
    private let flag: UnsafeMutablePointer<CInt>

    /// An unset flag.
    init() {
        self.flag = .allocate(capacity: 1)
        self.flag.initialize(to: 0)
    }

    deinit { self.flag.deallocate() }

    /// Asks the transfer to abort (its progress callback sees it).
    func set() { sugard_curl_set_flag(self.flag) }

    /// Lends the int to the shim that installs the progress callback.
    func withPointer<T>(_ body: (UnsafeMutablePointer<CInt>) -> T) -> T { body(self.flag) }
}
