import GlucoseProfile

/// Reads a btsnoop capture and streams high-level GATT events, anomalies and finished sessions.
///
/// Pipeline: btsnoop records → HCI (events, ACL) → L2CAP reassembly per controller, handle and direction →
/// ATT (CID 0x0004) and SMP (CID 0x0006) → GATT discovery tracking → `CaptureItem`s. Memory stays flat:
/// only open connections and their discovered layouts are kept.
///
/// ```swift
/// let reader = try GATTEventReader(path: "btsnoop_hci.log")
/// while let item = try reader.next() {
///     if case .event(let event) = item, case .notification(let attribute, let value) = event.kind,
///         attribute.uuid == BluetoothUUID(0x2A18) { … }
/// }
/// ```
///
/// Not thread-safe: one reader, one owner.
public final class GATTEventReader {
    /// Knobs for reading.
    public struct Options: Sendable {
        /// Handle → UUID mappings used when the capture does not reveal a handle's UUID.
        public var handleOverrides: [HandleOverride]
        /// Layouts known in advance (e.g. from another capture), keyed by peer address; used like a layout
        /// learned earlier in the file.
        public var knownDatabases: [BluetoothAddress: GATTDatabase]
        /// Included lengths above this are treated as file corruption.
        public var maxRecordLength: Int
        /// A damaged record (impossible header) becomes a `.corruptRecord` anomaly with its frame number and
        /// reading goes on at the next plausible record, instead of `next()` throwing.
        public var skipCorruptRecords: Bool

        /// Options with no overrides, no known layouts, the default record cap, and errors on corrupt records.
        public init(
            handleOverrides: [HandleOverride] = [], knownDatabases: [BluetoothAddress: GATTDatabase] = [:],
            maxRecordLength: Int = BTSnoopReader.defaultMaxRecordLength, skipCorruptRecords: Bool = false
        ) {
            self.handleOverrides = handleOverrides
            self.knownDatabases = knownDatabases
            self.maxRecordLength = maxRecordLength
            self.skipCorruptRecords = skipCorruptRecords
        }
    }

    /// The datalink of the capture.
    public let datalink: BTSnoopDatalink
    /// Counters so far.
    public var statistics: CaptureStatistics { self.pipeline.core.statistics }
    /// The layout learned per peer so far (from finished sessions).
    public var learnedDatabases: [BluetoothAddress: GATTDatabase] {
        self.pipeline.core.learned.mapValues(\.database)
    }

    // All mutable state sits in one struct: one exclusivity check per item, not one per field and record.
    /// The cursor and the decoder.
    private var pipeline: Pipeline

    /// Opens a capture file.
    /// - Throws: `CaptureError` when the file cannot be opened or is not a supported btsnoop file.
    public convenience init(path: String, options: Options = Options()) throws(CaptureError) {
        try self.init(path: path, bytes: [], options: options)
    }

    /// Reads a capture image held in memory.
    /// - Throws: `CaptureError` when the image is not a supported btsnoop file.
    public convenience init(bytes: [UInt8], options: Options = Options()) throws(CaptureError) {
        try self.init(path: nil, bytes: bytes, options: options)
    }

    /// Opens the file at `path`, or reads `bytes` when `path` is nil, and checks its header.
    private init(path: String?, bytes: [UInt8], options: Options) throws(CaptureError) {
        let (cursor, datalink) = try RecordCursor.open(path: path, bytes: bytes, maxRecordLength: options.maxRecordLength)
        self.datalink = datalink
        self.pipeline = Pipeline(cursor: cursor, core: DecoderCore(datalink: datalink, options: options))
    }

    /// The next item, or nil when the capture is exhausted (open sessions are reported as ended first).
    ///
    /// - Throws: `CaptureError` `.corruptRecord` (with the frame number) when a record header is impossible,
    ///   or `.io`. After an error, further calls return the remaining session ends, then nil.
    public func next() throws(CaptureError) -> CaptureItem? {
        try self.pipeline.next()
    }

    /// Reads a whole capture into memory-friendly lists (convenience for tools and tests).
    /// - Throws: `CaptureError` as `next()`.
    public static func readAll(path: String, options: Options = Options()) throws(CaptureError) -> CaptureSummary {
        try GATTEventReader(path: path, options: options).drain()
    }

    /// Reads a whole in-memory capture.
    /// - Throws: `CaptureError` as `next()`.
    public static func readAll(bytes: [UInt8], options: Options = Options()) throws(CaptureError) -> CaptureSummary {
        try GATTEventReader(bytes: bytes, options: options).drain()
    }

    /// Reads every item into a summary.
    private func drain() throws(CaptureError) -> CaptureSummary {
        var summary = CaptureSummary(datalink: self.datalink)
        while let item = try self.next() {
            switch item {
            case .event(let event): summary.events.append(event)
            case .anomaly(let anomaly): summary.anomalies.append(anomaly)
            case .sessionEnded(let session): summary.sessions.append(session)
            }
        }
        summary.statistics = self.statistics
        return summary
    }
}


/// Records from the cursor through the decoder, items out one at a time.
struct Pipeline {
    /// Where records come from.
    var cursor: RecordCursor
    /// What turns them into items.
    var core: DecoderCore
    /// The next item of `core.queue` to hand out.
    var queueHead = 0

    /// The next item, decoding records until one is queued. A corrupt record is skipped (resynchronizing
    /// on the next plausible header) when the options say so; otherwise it ends the sessions and throws.
    mutating func next() throws(CaptureError) -> CaptureItem? {
        while self.queueHead == self.core.queue.count {
            self.core.queue.removeAll(keepingCapacity: true)
            self.queueHead = 0
            if self.core.finished { return nil }
            do {
                if let (record, payload) = try self.cursor.next() {
                    self.core.process(record, payload)
                } else {
                    self.core.finish(truncatedTail: self.cursor.truncatedTail)
                }
            } catch {
                if error.code == .corruptRecord, self.core.options.skipCorruptRecords, let frame = error.frame {
                    let skipped = try self.cursor.resynchronize(datalink: self.core.datalink)
                    self.core.corruptRecord(frame: frame, reason: skipped.map {
                        "\(error.message.prefix { $0 != ";" }); \($0) byte(s) skipped to the next plausible record."
                    } ?? "\(error.message.prefix { $0 != ";" }); no plausible record follows, the rest is unreadable.")
                    if skipped == nil { self.core.finish(truncatedTail: nil) }
                    continue
                }
                self.core.finish(truncatedTail: nil)
                throw error
            }
        }
        defer { self.queueHead += 1 }
        return self.core.queue[self.queueHead]
    }
}


/// Everything a capture produced, collected (see `GATTEventReader.readAll`).
public struct CaptureSummary: Hashable, Sendable {
    /// The capture's datalink.
    public var datalink: BTSnoopDatalink
    /// Every GATT event, in capture order.
    public var events: [GATTEvent] = []
    /// Every anomaly, in capture order.
    public var anomalies: [CaptureAnomaly] = []
    /// Sessions in the order they ended.
    public var sessions: [CaptureSession] = []
    /// The counters at the end.
    public var statistics = CaptureStatistics()

    /// An empty summary of a `datalink` capture.
    public init(datalink: BTSnoopDatalink) { self.datalink = datalink }
}
