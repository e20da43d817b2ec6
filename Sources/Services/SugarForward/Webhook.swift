import HTTPClient
import JSON
import Locking
import NightscoutSink
import ProcessKit
import SugarWire
import SystemIO

/// One `[webhook NAME]` section: where alert events are POSTed and how.
///
/// Keys: `url` (http:// or https://; certificates always verified), `format` (`json`, the
/// default: the MQTT alert payload; `ntfy`: the message as plain text with `Title`, `Priority`
/// and `Tags` headers; `gotify`: `{"title","message","priority"}`), `secret_file` (a file holding
/// a shared secret: every request carries `X-Sugard-Signature: sha256=<hex HMAC-SHA256 of the
/// body>`), `token_file` (a file holding an access token: `X-Gotify-Key` for gotify, else
/// `Authorization: Bearer`), `ca_file` (PEM CA certificates for a private CA).
public struct WebhookConfig: Sendable, Equatable {
    /// The request body: the MQTT alert JSON, an ntfy plain-text message, or a gotify JSON message.
    public enum Format: String, Sendable, CaseIterable { case json, ntfy, gotify }

    /// The section's NAME (`[webhook NAME]`), unique in the file.
    public var name: String
    /// Where alert events are POSTed (`url`, required); `http://` or `https://`.
    public var url = ""
    /// The body and headers of each request (`format`, `json` by default).
    public var format = Format.json
    /// A file holding the shared secret that signs each body as `X-Sugard-Signature` (`secret_file`).
    public var secretFile: String?
    /// A file holding the access token sent with each request (`token_file`).
    public var tokenFile: String?
    /// PEM CA certificates for a site behind a private CA (`ca_file`).
    public var caFile: String?

    /// A webhook named `name` with no URL yet.
    public init(name: String) { self.name = name }

    /// The keys of a `[webhook NAME]` section, declared once (parsing, `--help`, the man page, the
    /// example file and the docs read this table).
    public static let keys: [ConfigKey<WebhookConfig>] = [
        ConfigKey("url", "[webhook NAME]: where alert events are POSTed, http:// or https:// (certificates are always verified)", example: "https://ntfy.sh/ward-3-glucose-7f3a", {
            $0.url
        }) {
            let lower = $1.value.lowercased()
            guard lower.hasPrefix("https://") || lower.hasPrefix("http://"), $1.value.count > 8, !$1.value.contains(" ") else {
                throw ConfigError("url must be an http:// or https:// address, not \"\($1.value)\"")
            }
            $0.url = $1.value
        },
        ConfigKey(
            "format",
            "[webhook NAME]: json (default: the MQTT alert payload), ntfy (text with Title, Priority, Tags headers) or gotify ({\"title\",\"message\",\"priority\"})",
            { $0.format.rawValue }
        ) {
            guard let format = Format(rawValue: $1.value.lowercased()) else {
                throw ConfigError("format must be json, ntfy or gotify, not \"\($1.value)\"")
            }
            $0.format = format
        },
        ConfigKey(
            "secret_file", "[webhook NAME]: file holding a shared secret; each request carries X-Sugard-Signature: sha256=<HMAC-SHA256 of the body, hex>",
            example: "/etc/sugard/webhook.secret", { $0.secretFile ?? "" }
        ) { $0.secretFile = $1.optional },
        ConfigKey(
            "token_file", "[webhook NAME]: file holding an access token, sent as X-Gotify-Key (gotify) or Authorization: Bearer (json, ntfy)",
            example: "/etc/sugard/ntfy.token", { $0.tokenFile ?? "" }
        ) { $0.tokenFile = $1.optional },
        ConfigKey("ca_file", "[webhook NAME]: PEM CA certificates for a receiver behind a private CA", example: "/etc/sugard/home-ca.pem", {
            $0.caFile ?? ""
        }) { $0.caFile = $1.optional },
    ]

    /// The sink's name in the alert state's delivery progress.
    var sinkName: String { "webhook " + self.name }

    mutating func apply(key: String, value: String) throws(ConfigError) {
        guard let entry = Self.keys.key(key) else {
            throw ConfigError("a [webhook \(self.name)] section takes \(Self.keys.map(\.key).joined(separator: ", ")), not \(key)")
        }
        try entry.apply(value, to: &self)
    }

    /// The first line of `path` (a secret or token file), surrounding white space removed.
    static func firstLine(_ path: String, key: String) throws(ConfigError) -> String {
        guard let text = try ConfigFile.readText(path) else { throw ConfigError(file: path, "no such file (\(key))") }
        let line = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }).first ?? ""
        let value = line.trimmingSpaces()
        guard !value.isEmpty else { throw ConfigError(file: path, "\(key) is empty") }
        return value
    }

    /// The secret and token, read once at start.
    func credentials() throws(ConfigError) -> WebhookCredentials {
        WebhookCredentials(
            secret: try self.secretFile.map { (p: String) throws(ConfigError) in try Self.firstLine(p, key: "secret_file") },
            token: try self.tokenFile.map { (p: String) throws(ConfigError) in try Self.firstLine(p, key: "token_file") })
    }
}

struct WebhookCredentials: Sendable {
    var secret: String?
    var token: String?
}

extension WebhookConfig {
    /// The HTTP request that delivers `alert`.
    func request(for alert: Wire.ForwardAlert, gateway: String, credentials: WebhookCredentials) -> HTTPRequest {
        var headers: [(name: String, value: String)] = []
        let body: [UInt8]
        let urgent = alert.state == .firing && (alert.rule == .urgentLow || alert.rule == .gatewayFailed)
        let title = AlertStateMachine.title(alert.rule) + (alert.state == .resolved ? " resolved" : "")
        switch self.format {
        case .json:
            headers.append(("Content-Type", "application/json"))
            body = Array(Self.payload(alert, gateway: gateway).serialized().utf8)
        case .ntfy:
            headers.append(("Content-Type", "text/plain; charset=utf-8"))
            headers.append(("Title", title))
            // ntfy: 5 = urgent, 4 = high, 3 = default.
            headers.append(("Priority", alert.state == .resolved ? "3" : urgent ? "5" : "4"))
            headers.append(("Tags", alert.state == .resolved ? "white_check_mark,\(alert.rule.rawValue)" : "warning,\(alert.rule.rawValue)"))
            body = Array(alert.message.utf8)
        case .gotify:
            headers.append(("Content-Type", "application/json"))
            // Gotify: 8 and above are high priority.
            let priority: Int64 = alert.state == .resolved ? 4 : urgent ? 10 : 8
            body = Array(JSONValue.object(["title": .string(title), "message": .string(alert.message), "priority": .int(priority)]).serialized().utf8)
        }
        if let token = credentials.token {
            headers.append(self.format == .gotify ? ("X-Gotify-Key", token) : ("Authorization", "Bearer " + token))
        }
        if let secret = credentials.secret {
            headers.append(("X-Sugard-Signature", "sha256=" + SHA256.hex(SHA256.hmac(key: Array(secret.utf8), message: body))))
        }
        headers.append(("X-Sugard-Alert", alert.id))
        return HTTPRequest(method: "POST", url: self.url, headers: headers, body: body, timeoutMilliseconds: 20_000, caFile: self.caFile)
    }

    /// The alert payload (the MQTT `alert` topic's and a json webhook's): `id`, `rule`, `state`,
    /// `person`, `meter`, `reading`, `time`, `value`, `message`, `gateway`.
    static func payload(_ alert: Wire.ForwardAlert, gateway: String) -> JSONValue {
        [
            "id": .string(alert.id), "rule": alert.rule.json, "state": alert.state.json, "person": .from(alert.person),
            "meter": .from(alert.meter), "reading": .from(alert.reading), "time": .string(alert.time),
            "value": alert.value.map { JSONValue.double($0) } ?? .null, "message": .string(alert.message), "gateway": .string(gateway),
        ]
    }
}

/// Delivers the alert log to one webhook, in order, each event once: an event counts as delivered
/// when the receiver answered 2xx, and the progress is saved (``Alerter``) before the next one is
/// sent. Any other answer or no answer is retried with the doubling backoff (``RetryBackoff``),
/// the same event again, so nothing is skipped or reordered. Runs until its task is cancelled.
struct WebhookWorker: Sendable {
    let config: WebhookConfig
    let credentials: WebhookCredentials
    let gateway: String
    let logger: Logger
    let status: Lock<Wire.ForwardWebhook>
    var retryInitial: Duration = .seconds(1)
    var retryMax: Duration = .seconds(120)
    /// The events after `seq` (waits until there are some).
    let next: @Sendable (_ after: Int64) async -> [LoggedAlert]
    /// Waits before the next attempt: `wait`, or less when told to try now (SIGHUP).
    let pause: @Sendable (_ wait: Duration) async -> Void
    /// The receiver has every event up to `seq` (returns once that is saved).
    let delivered: @Sendable (_ seq: Int64) async -> Void

    func run(after start: Int64) async {
        var done = start
        var failures = 0
        while !Task.isCancelled {
            let pending = await self.next(done)
            self.status.withLock { $0.pending = Int64(pending.count) }
            guard let event = pending.first else { continue }
            self.status.withLock { if $0.state == .idle { $0.state = .delivering } }
            let failure: String?
            do {
                let response = try await HTTPClient.send(
                    self.config.request(for: event.alert, gateway: self.gateway, credentials: self.credentials))
                failure = (200..<300).contains(response.status) ? nil : "HTTP \(response.status)"
            } catch {
                if Task.isCancelled { return }
                failure = error.message
            }
            if let failure {
                failures += 1
                let wait = RetryBackoff.delay(failures: failures, initial: self.retryInitial, max: self.retryMax)
                let changed = self.status.withLock { s -> Bool in
                    defer {
                        s.state = .retrying
                        s.reason = failure
                    }
                    return s.reason != failure
                }
                if changed || failures == 1 {
                    self.logger.warning("webhook \(self.config.name): \(failure); retrying (\(event.alert.rule.rawValue) \(event.alert.state.rawValue) waits)")
                }
                await self.pause(wait)
                continue
            }
            if failures > 0 { self.logger.notice("webhook \(self.config.name): delivering again") }
            failures = 0
            await self.delivered(event.seq)
            done = event.seq
            let now = wallClockMilliseconds()
            self.status.withLock { s in
                s.state = pending.count > 1 ? .delivering : .idle
                s.reason = nil
                s.pending = Int64(pending.count - 1)
                s.lastDeliveryMillis = now
            }
            self.logger.info("webhook \(self.config.name): delivered \(event.alert.rule.rawValue) \(event.alert.state.rawValue)")
        }
    }
}
