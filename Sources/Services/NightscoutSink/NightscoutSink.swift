import Glibc
import HTTPClient
import JSON
import Locking
import SugarWire
import SystemIO

/// A reading as a sink receives it: its position in sugard's commit order and the reading (the
/// compact form `FollowReadings` sends, with `person`).
public struct SinkReading: Sendable, Hashable {
    /// The reading's position in sugard's commit order; the sink's saved cursor is the last one delivered.
    public var cursor: Int64
    /// The reading, with its meter's person when the meter is assigned.
    public var reading: Wire.CompactReading

    /// A reading at `cursor`.
    public init(cursor: Int64, reading: Wire.CompactReading) {
        self.cursor = cursor
        self.reading = reading
    }
}

/// Where a sink's readings come from (sugard-forward's feed, or `ListReadings`).
public protocol NightscoutReadingSource: Sendable {
    /// Up to `limit` readings with a cursor above `cursor`, in cursor order. Waits while there is
    /// none; throws when sugard cannot be reached (the sink retries).
    func readings(after cursor: Int64, limit: Int) async throws -> [SinkReading]
}

/// How long the sink waits before trying again.
public struct NightscoutTiming: Sendable, Hashable {
    /// Refused connections, timeouts and 5xx: the first wait, doubled per failure up to `retryMax`.
    public var retryInitial: Duration = .seconds(1)
    /// The longest wait between retries after repeated failures.
    public var retryMax: Duration = .seconds(60)
    /// 401/403: the secret is wrong; retried this slowly until it is fixed.
    public var refusedRetry: Duration = .seconds(300)
    /// Another 4xx: the server will not take the batch as it is; the sink pauses this long (or
    /// until ``NightscoutSink/resume()``, e.g. on reload) and then offers the same batch again.
    public var pausedRetry: Duration = .seconds(1800)
    /// How long one HTTP request may take before it counts as a timeout (retried), in milliseconds.
    public var requestTimeoutMilliseconds = 30_000

    /// The production timings (tests shorten them).
    public init() {}
}

/// What `sugarctl status` shows about a sink.
public struct NightscoutStatus: Sendable, Hashable {
    /// The interface's Nightscout sink states.
    public typealias State = Wire.ForwardSink.NightscoutState

    /// The sink's name (`nightscout`, or the section's NAME).
    public var name: String
    /// The site's address.
    public var url: String
    /// The person whose readings the sink takes; nil: every reading.
    public var person: String?
    /// Delivering, retrying, refused or paused.
    public var state: State = .idle
    /// Why the sink is not delivering (the server's message for `paused`).
    public var reason: String?
    /// The highest reading cursor delivered (saved durably).
    public var cursor: Int64 = 0
    /// Entries and treatments delivered since the sink started.
    public var delivered = 0
    /// Readings held, not yet delivered.
    public var pending = 0
    /// When the site last accepted entries or treatments, epoch milliseconds; nil before the first.
    public var lastDeliveryMillis: Int64?

    /// The message shown for 401/403.
    public static let refusedMessage = "Nightscout refused the API secret"
}

/// Sends readings to one Nightscout site: `POST <url>/api/v1/entries` (and, with
/// `nightscout_treatments`, `POST <url>/api/v1/treatments`), in cursor order, in batches of at
/// most 100. The cursor moves (durably, in `<state>/nightscout-<name>.cursor`) only after the site
/// answered 2xx, so nothing is skipped: a refused connection, timeout or 5xx is retried with
/// capped backoff; 401/403 shows ``NightscoutStatus/refusedMessage`` and retries slowly; another
/// 4xx shows the server's message and pauses the sink (``NightscoutTiming/pausedRetry``).
/// Readings of another person (or, for a sink with a person, of an unassigned meter) move the
/// cursor without being sent. LO and HI (no number, so no entry) go as `Note` treatments saying
/// so, always; control-solution tests, ketone records and readings without a value are not sent.
/// Every treatment carries a stable `identifier` (``ReadingExport/nightscoutIdentifier(_:)``).
///
/// Entry point: create it with the sink's configuration and the state directory, then
/// `await sink.run(source:)` in a task the owner cancels; read ``status`` for `sugarctl status`.
public final class NightscoutSink: Sendable {
    /// The most readings read from the source, and so sent, in one batch.
    public static let batchLimit = 100

    /// The sink's configuration, validated.
    public let config: NightscoutSinkConfig
    /// The retry and timeout intervals.
    public let timing: NightscoutTiming
    let cursorFile: SinkCursorFile
    let secretHeader: String?
    private let state: Lock<NightscoutStatus>
    private let wake = Lock(false)

    /// Reads the secret file and the saved cursor.
    /// - Throws: ``NightscoutConfigError`` for a bad configuration, an unreadable secret or cursor.
    public init(config: NightscoutSinkConfig, stateDirectory: String, timing: NightscoutTiming = NightscoutTiming())
        throws(NightscoutConfigError)
    {
        try config.validate()
        self.config = config
        self.timing = timing
        self.secretHeader = try config.apiSecretHeader()
        self.cursorFile = SinkCursorFile(path: stateDirectory + "/nightscout-" + config.name + ".cursor")
        var status = NightscoutStatus(name: config.name, url: config.url, person: config.person)
        status.cursor = try self.cursorFile.load()
        self.state = Lock(status)
    }

    /// A snapshot of the sink's state for `sugarctl status`.
    public var status: NightscoutStatus { self.state.withLock { $0 } }

    /// Moves the delivered cursor back to 0, durably: sugard's database changed (recreated,
    /// restored) and its readings are delivered from the beginning (the site deduplicates).
    public func restartFromBeginning() {
        do throws(NightscoutConfigError) {
            try self.cursorFile.save(0)
        } catch {
            self.update(.retrying, error.message)
        }
        self.state.withLock { $0.cursor = 0 }
    }

    /// Ends a pause or a slow retry now (call it on reload).
    public func resume() { self.wake.withLock { $0 = true } }

    /// Whether this sink takes the reading (its person, or any reading for a sink without one).
    public func accepts(_ reading: Wire.CompactReading) -> Bool {
        guard let person = self.config.person else { return true }
        return reading.person == person
    }

    /// Delivers readings from `source` until the task is cancelled.
    public func run(source: some NightscoutReadingSource) async {
        var failures = 0
        while !Task.isCancelled {
            let cursor = self.status.cursor
            let batch: [SinkReading]
            do {
                batch = try await source.readings(after: cursor, limit: Self.batchLimit)
            } catch {
                if Task.isCancelled { return }
                self.update(.retrying, "sugard's readings are not reachable: \(error)")
                failures += 1
                await self.pause(self.backoff(failures))
                continue
            }
            failures = 0
            guard let last = batch.last else { continue }
            self.state.withLock { $0.pending = batch.count }
            let mine = batch.map(\.reading).filter(self.accepts)
            let entries = mine.compactMap(ReadingExport.nightscoutEntry)
            // LO and HI always go as notes (they cannot be entries); glucose values also as BG
            // Checks with nightscout_treatments.
            let unit = self.config.treatmentUnit
            let treatments = mine.compactMap {
                ReadingExport.nightscoutRangeNote($0) ?? (self.config.treatments ? ReadingExport.nightscoutTreatment($0, unit: unit) : nil)
            }
            if !entries.isEmpty, !(await self.deliver(entries, to: "/api/v1/entries")) { return }
            if !treatments.isEmpty, !(await self.deliver(treatments, to: "/api/v1/treatments")) { return }
            do throws(NightscoutConfigError) {
                try self.cursorFile.save(last.cursor)
            } catch {
                // The site has the batch; if the cursor cannot be saved, a restart sends it again
                // (Nightscout deduplicates entries on date and type).
                self.update(.retrying, error.message)
            }
            self.state.withLock { s in
                s.cursor = last.cursor
                s.pending = 0
                s.delivered += entries.count + treatments.count
                if !entries.isEmpty || !treatments.isEmpty { s.lastDeliveryMillis = wallClockMilliseconds() }
                s.state = .idle
                s.reason = nil
            }
        }
    }

    /// Posts one JSON array until the site takes it (2xx). False only when the task was cancelled.
    func deliver(_ documents: [JSONValue], to path: String) async -> Bool {
        var failures = 0
        let body = Array(JSONValue.array(documents).serialized().utf8)
        while !Task.isCancelled {
            self.state.withLock { if $0.state == .idle { $0.state = .delivering } }
            var url = self.config.url + path
            if let token = self.config.token { url += "?token=" + percentEncoded(token) }
            var headers: [(name: String, value: String)] = [("Content-Type", "application/json"), ("Accept", "application/json")]
            if let secret = self.secretHeader { headers.append(("api-secret", secret)) }
            let request = HTTPRequest(
                method: "POST", url: url, headers: headers, body: body,
                timeoutMilliseconds: self.timing.requestTimeoutMilliseconds, caFile: self.config.caFile)
            let wait: Duration
            do throws(HTTPError) {
                let response = try await HTTPClient.send(request)
                switch response.status {
                case 200..<300:
                    return true
                case 401, 403:
                    self.update(.refused, NightscoutStatus.refusedMessage)
                    wait = self.timing.refusedRetry
                case 408, 429, 500..<600:
                    failures += 1
                    self.update(.retrying, "Nightscout answered \(response.status): \(Self.message(response))")
                    wait = self.backoff(failures)
                default:
                    self.update(.paused, "Nightscout did not take the readings (\(response.status)): \(Self.message(response))")
                    wait = self.timing.pausedRetry
                }
            } catch {
                if error.kind == .cancelled || Task.isCancelled { return false }
                failures += 1
                self.update(.retrying, "Nightscout is not reachable: \(error.message)")
                wait = self.backoff(failures)
            }
            await self.pause(wait)
        }
        return false
    }

    /// The server's own words: Nightscout's `message`/`description`, else the start of the body.
    static func message(_ response: HTTPResponse) -> String {
        if let json = try? JSONValue(parsing: response.text) {
            let parts = [json["message"]?.stringValue, json["description"]?.stringValue].compactMap { $0 }.filter { !$0.isEmpty }
            if !parts.isEmpty { return parts.joined(separator: ": ") }
        }
        let text = response.text.trimmed
        return text.isEmpty ? "no message" : String(text.prefix(200))
    }

    func backoff(_ failures: Int) -> Duration { RetryBackoff.delay(failures: failures, initial: self.timing.retryInitial, max: self.timing.retryMax) }

    func update(_ state: NightscoutStatus.State, _ reason: String?) {
        self.state.withLock { s in
            s.state = state
            s.reason = reason
        }
    }

    /// Sleeps `duration`, or less when ``resume()`` is called or the task is cancelled.
    func pause(_ duration: Duration) async {
        self.wake.withLock { $0 = false }
        let end = ContinuousClock.now + duration
        while ContinuousClock.now < end, !Task.isCancelled {
            if self.wake.withLock({ $0 }) { return }
            try? await Task.sleep(for: min(.milliseconds(250), end - ContinuousClock.now))
        }
    }
}

func percentEncoded(_ text: String) -> String {
    var out = ""
    for byte in text.utf8 {
        let c = Character(UnicodeScalar(byte))
        if c.isASCII && (c.isLetter || c.isNumber || "-._~".contains(c)) {
            out.append(c)
        } else {
            let digits = Array("0123456789ABCDEF")
            out += "%" + String(digits[Int(byte >> 4)]) + String(digits[Int(byte & 0x0F)])
        }
    }
    return out
}

/// A sink's delivered cursor, one decimal number in a file, replaced atomically and durably
/// (temporary file, fsync, rename, fsync of the directory): a crash leaves the old or the new one.
struct SinkCursorFile: Sendable {
    let path: String

    func load() throws(NightscoutConfigError) -> Int64 {
        guard let text = readSmallFile(self.path) else {
            if errno == ENOENT { return 0 }
            throw NightscoutConfigError("cannot read the cursor \(self.path): \(String(cString: strerror(errno)))")
        }
        guard let cursor = Int64(text.trimmed), cursor >= 0 else {
            throw NightscoutConfigError("the cursor file \(self.path) is damaged; delete it to send everything again")
        }
        return cursor
    }

    func save(_ cursor: Int64) throws(NightscoutConfigError) {
        let temporary = self.path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o640)
        guard fd >= 0 else { throw self.failure("create \(temporary)") }
        let bytes = Array("\(cursor)\n".utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd)
        close(fd)
        guard written == bytes.count, synced == 0 else { throw self.failure("write \(temporary)") }
        guard rename(temporary, self.path) == 0 else { throw self.failure("rename \(temporary)") }
        let directory = String(self.path[..<(self.path.lastIndex(of: "/") ?? self.path.startIndex)])
        let dfd = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 {
            fsync(dfd)
            close(dfd)
        }
    }

    private func failure(_ what: String) -> NightscoutConfigError {
        NightscoutConfigError("cannot \(what): \(String(cString: strerror(errno)))")
    }
}
