import GlucoseProfile
import JSON
import SugarWire

/// One glucose record found in a capture: a Glucose Measurement (0x2A18) joined with the Measurement
/// Context (0x2A34) of the same sequence number in the same session.
public struct InspectedRecord: Hashable, Sendable {
    /// 1-based frame number of the measurement notification (the frame that completed its PDU).
    public var frame: Int
    /// Position of the record's session in ``CaptureInspection/sessions`` (0-based).
    public var session: Int
    /// The measurement packet exactly as captured.
    public var measurementBytes: [UInt8]
    /// Decoded leniently: an out-of-range base time (month 13) is kept; trailing bytes are ignored.
    public var measurement: GlucoseMeasurement
    /// Frame of the joined context, if one came.
    public var contextFrame: Int?
    /// The context packet exactly as captured.
    public var contextBytes: [UInt8]?
    /// The joined context, decoded; nil when none came (or it did not decode).
    public var context: MeasurementContext?

    /// A record with every field given.
    public init(
        frame: Int, session: Int, measurementBytes: [UInt8], measurement: GlucoseMeasurement, contextFrame: Int? = nil,
        contextBytes: [UInt8]? = nil, context: MeasurementContext? = nil
    ) {
        self.frame = frame
        self.session = session
        self.measurementBytes = measurementBytes
        self.measurement = measurement
        self.contextFrame = contextFrame
        self.contextBytes = contextBytes
        self.context = context
    }

    /// The `sugarctl decode measurement --json` object plus `frame`, `session` and `context`.
    public var jsonValue: JSONValue {
        guard case .object(var object) = self.measurement.json else { return .null }
        object["frame"] = .int(Int64(self.frame))
        object["session"] = .int(Int64(self.session))
        object["context"] = self.context?.json ?? .null
        return .object(object)
    }
}

/// Something odd about one packet (or the capture itself). Never hides the records around it.
public struct InspectionAnomaly: Hashable, Sendable, CustomStringConvertible {
    /// 1-based frame number, when the anomaly is about one frame.
    public var frame: Int?
    /// Position of the session in ``CaptureInspection/sessions`` (0-based), when known.
    public var session: Int?
    /// The characteristic the packet belongs to, when known.
    public var characteristic: BluetoothUUID?
    /// One human sentence.
    public var reason: String

    /// An anomaly with every field given.
    public init(frame: Int?, session: Int?, characteristic: BluetoothUUID?, reason: String) {
        self.frame = frame
        self.session = session
        self.characteristic = characteristic
        self.reason = reason
    }

    /// `2a18` for 16-bit UUIDs, the lower-case 128-bit form otherwise, nil when unknown.
    public var characteristicText: String? { self.characteristic.map(\.shortString) }

    /// `{"frame", "characteristic", "reason"}`.
    public var jsonValue: JSONValue {
        .object([
            "frame": self.frame.map { .int(Int64($0)) } ?? .null,
            "characteristic": self.characteristicText.map { .string($0) } ?? .null,
            "reason": .string(self.reason),
        ])
    }

    /// `frame N [2a18]: reason` (`capture: reason` when no frame is concerned).
    public var description: String {
        (self.frame.map { "frame \($0)" } ?? "capture") + (self.characteristicText.map { " [\($0)]" } ?? "") + ": "
            + self.reason
    }
}

/// One RACP request and its answer, as seen in a capture.
public struct RACPExchange: Hashable, Sendable {
    /// Frame of the Write Request, nil for an indication nobody asked for.
    public var requestFrame: Int?
    /// The RACP value written, as captured.
    public var requestBytes: [UInt8]?
    /// Nil when there was no request or it did not decode.
    public var request: RACPMessage?
    /// An ATT Error Response to the write (0x80 procedure already in progress, 0x81 CCCD…).
    public var writeError: ATTErrorCode?
    /// Frame of the answering indication.
    public var responseFrame: Int?
    /// The indication's value, as captured.
    public var responseBytes: [UInt8]?
    /// The decoded `05` or `06` indication that answered the request.
    public var response: RACPMessage?
    /// Glucose Measurement notifications between the request and the response.
    public var measurements: Int

    /// An exchange with every field given.
    public init(
        requestFrame: Int? = nil, requestBytes: [UInt8]? = nil, request: RACPMessage? = nil,
        writeError: ATTErrorCode? = nil, responseFrame: Int? = nil, responseBytes: [UInt8]? = nil,
        response: RACPMessage? = nil, measurements: Int = 0
    ) {
        self.requestFrame = requestFrame
        self.requestBytes = requestBytes
        self.request = request
        self.writeError = writeError
        self.responseFrame = responseFrame
        self.responseBytes = responseBytes
        self.response = response
        self.measurements = measurements
    }

    /// A request (not an abort) with neither a response nor a write error yet.
    var awaitsResponse: Bool {
        self.request != nil && self.response == nil && self.writeError == nil && self.request?.opCode != .abortOperation
    }

    /// Every field: frames as numbers, bytes as hex text, messages as `RACPMessage.json`, the write
    /// error as `{"code","name"}`; absent ones `null`.
    public var jsonValue: JSONValue {
        var object = JSONObject()
        object["requestFrame"] = .from(self.requestFrame)
        object["requestBytes"] = self.requestBytes.map { .string(hexBytes($0)) } ?? .null
        object["request"] = self.request?.json ?? .null
        object["writeError"] = self.writeError.map {
            .object(["code": .int(Int64($0.rawValue)), "name": .string($0.description)])
        } ?? .null
        object["responseFrame"] = .from(self.responseFrame)
        object["responseBytes"] = self.responseBytes.map { .string(hexBytes($0)) } ?? .null
        object["response"] = self.response?.json ?? .null
        object["measurements"] = .int(Int64(self.measurements))
        return .object(object)
    }
}

/// Device Information strings (0x180A) and the GAP device name, as read in a session.
public struct DeviceInformation: Hashable, Sendable {
    /// GAP Device Name (0x2A00).
    public var deviceName: String?
    /// Manufacturer Name String (0x2A29).
    public var manufacturer: String?
    /// Model Number String (0x2A24).
    public var model: String?
    /// Serial Number String (0x2A25).
    public var serialNumber: String?
    /// Hardware Revision String (0x2A27).
    public var hardware: String?
    /// Firmware Revision String (0x2A26).
    public var firmware: String?
    /// Software Revision String (0x2A28).
    public var software: String?

    /// Device information with the strings given (none by default).
    public init(
        deviceName: String? = nil, manufacturer: String? = nil, model: String? = nil, serialNumber: String? = nil,
        hardware: String? = nil, firmware: String? = nil, software: String? = nil
    ) {
        self.deviceName = deviceName
        self.manufacturer = manufacturer
        self.model = model
        self.serialNumber = serialNumber
        self.hardware = hardware
        self.firmware = firmware
        self.software = software
    }

    /// True when no string was read.
    public var isEmpty: Bool { self == DeviceInformation() }

    /// Every string under its field name; unread ones `null`.
    public var jsonValue: JSONValue {
        .object([
            "deviceName": .from(self.deviceName), "manufacturer": .from(self.manufacturer), "model": .from(self.model),
            "serialNumber": .from(self.serialNumber), "hardware": .from(self.hardware),
            "firmware": .from(self.firmware), "software": .from(self.software),
        ])
    }
}

/// The meter clock as read in a session: Current Time 0x2A2B or Date Time 0x2A08.
public struct InspectedClock: Hashable, Sendable {
    /// 0x2A2B Current Time or 0x2A08 Date Time.
    public var characteristic: BluetoothUUID
    /// Frame of the read response.
    public var frame: Int
    /// When the value was read (the capture's clock), so a replay can keep the meter's skew.
    public var timestamp: CaptureTimestamp
    /// The value as read.
    public var bytes: [UInt8]
    /// The clock's local date and time (nil when the value did not decode).
    public var dateTime: DateTime?
    /// The whole Current Time value, for 0x2A2B.
    public var currentTime: CurrentTime?

    /// `characteristic`, `frame`, `bytes` (hex), `dateTime` and `currentTime` (`null` when undecoded).
    public var jsonValue: JSONValue {
        .object([
            "characteristic": .string(self.characteristic.shortString), "frame": .int(Int64(self.frame)),
            "bytes": .string(hexBytes(self.bytes)), "dateTime": self.dateTime?.json ?? .null,
            "currentTime": self.currentTime?.json ?? .null,
        ])
    }
}

/// One meter session (an LE connection) with what the inspector learned about the meter in it.
public struct InspectedSession: Hashable, Sendable {
    /// Position in ``CaptureInspection/sessions`` (0-based); `capture.index` is the reader's 1-based number.
    public var position: Int
    /// The reader's account of the connection.
    public var capture: CaptureSession
    /// Strings read in the session.
    public var deviceInformation = DeviceInformation()
    /// Glucose Feature (0x2A51) as read.
    public var feature: GlucoseFeature?
    /// The meter clock as read, if it was.
    public var clock: InspectedClock?
    /// CCCD writes in order: characteristic and the written value (`01 00` notify, `02 00` indicate).
    public var subscriptions: [(frame: Int, characteristic: BluetoothUUID?, value: [UInt8])] = []
    /// RACP exchanges in request order.
    public var racp: [RACPExchange] = []
    /// Measurements decoded in this session.
    public var recordCount = 0
    /// SMP Pairing Requests seen, and the reasons of SMP Pairing Failed (0x04: wrong passkey).
    public var pairingRequests = 0
    /// SMP Pairing Failed reasons, in order.
    public var pairingFailures: [UInt8] = []
    /// Writes to the meter's clock (Current Time 0x2A2B, i-SENS 0xFFF1), in order.
    public var clockWrites: [InspectedClockWrite] = []
    /// The OneTouch Verio download, when the session used the Verio service.
    public var verio: InspectedVerio?

    /// A session at `position` with nothing learned yet.
    init(position: Int, capture: CaptureSession) {
        self.position = position
        self.capture = capture
    }

    /// Equal when every field is (subscriptions compared element by element: tuples are not Equatable).
    public static func == (lhs: InspectedSession, rhs: InspectedSession) -> Bool {
        lhs.position == rhs.position && lhs.capture == rhs.capture && lhs.deviceInformation == rhs.deviceInformation
            && lhs.feature == rhs.feature && lhs.clock == rhs.clock && lhs.racp == rhs.racp
            && lhs.recordCount == rhs.recordCount && lhs.pairingRequests == rhs.pairingRequests
            && lhs.pairingFailures == rhs.pairingFailures && lhs.clockWrites == rhs.clockWrites && lhs.verio == rhs.verio
            && lhs.subscriptions.elementsEqual(rhs.subscriptions) {
                $0.frame == $1.frame && $0.characteristic == $1.characteristic && $0.value == $1.value
            }
    }

    /// Hashes position, capture and record count (consistent with `==`).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.position)
        hasher.combine(self.capture)
        hasher.combine(self.recordCount)
    }

    /// The characteristics of the glucose service, Device Information, Current Time and Roche's Date Time,
    /// with handles, from the session's layout (discovered, reused or provided).
    public var meterCharacteristics: [GATTCharacteristic] {
        let services: Set<BluetoothUUID> = [
            .glucoseService, .deviceInformationService, .currentTimeService, Verio.service,
        ]
        return self.capture.database.characteristics.filter { item in
            if let service = item.service { return services.contains(service) }
            return [
                BluetoothUUID.glucoseMeasurement, .glucoseMeasurementContext, .glucoseFeature,
                .recordAccessControlPoint, .dateTime,
            ].contains(item.uuid)
        }
    }

    /// The glucose service's handle range, when discovered.
    public var glucoseService: GATTService? {
        self.capture.database.services.first { $0.uuid == .glucoseService }
    }

    /// The session's reader fields (without its database and event count), its glucose service range,
    /// the meter's characteristics with handles, and what was read in it.
    public var jsonValue: JSONValue {
        var object = JSONObject()
        object["index"] = .int(Int64(self.position))
        object["captureSession"] = .int(Int64(self.capture.index))
        if case .object(let connection) = self.capture.jsonValue {
            for entry in connection.entries where !["index", "database", "eventCount"].contains(entry.key) {
                object[entry.key] = entry.value
            }
        }
        object["glucoseService"] = self.glucoseService.map {
            .object(["startHandle": .int(Int64($0.startHandle)), "endHandle": .int(Int64($0.endHandle))])
        } ?? .null
        object["handles"] = .array(self.meterCharacteristics.map { item in
            .object([
                "characteristic": .string(item.uuid.shortString),
                "service": item.service.map { .string($0.shortString) } ?? .null,
                "valueHandle": .int(Int64(item.valueHandle)),
                "cccdHandle": item.cccdHandle.map { .int(Int64($0)) } ?? .null,
                "properties": item.properties.map { .string($0.description) } ?? .null,
            ])
        })
        object["deviceInformation"] = self.deviceInformation.jsonValue
        object["feature"] = self.feature?.json ?? .null
        object["clock"] = self.clock?.jsonValue ?? .null
        object["clockWrites"] = .array(self.clockWrites.map(\.jsonValue))
        object["subscriptions"] = .array(self.subscriptions.map { item in
            .object([
                "frame": .int(Int64(item.frame)),
                "characteristic": item.characteristic.map { .string($0.shortString) } ?? .null,
                "value": .string(hexBytes(item.value)),
            ])
        })
        object["racp"] = .array(self.racp.map(\.jsonValue))
        object["records"] = .int(Int64(self.recordCount))
        object["pairing"] = .object([
            "requests": .int(Int64(self.pairingRequests)),
            "failures": .array(self.pairingFailures.map { .int(Int64($0)) }),
        ])
        object["verio"] = self.verio?.jsonValue ?? .null
        return .object(object)
    }
}

/// The result of inspecting a capture: sessions, records and anomalies (`sugarctl capture inspect`).
public struct CaptureInspection: Hashable, Sendable {
    /// Every LE connection, in order of its first frame.
    public var sessions: [InspectedSession] = []
    /// Records in frame order (empty when the inspector was told not to keep them).
    public var records: [InspectedRecord] = []
    /// Measurements decoded, kept or not.
    public var recordCount = 0
    /// Capture-level and glucose-level anomalies in frame order.
    public var anomalies: [InspectionAnomaly] = []
    /// The reader's counters over the whole capture.
    public var statistics = CaptureStatistics()

    /// An empty inspection.
    public init() {}

    /// `{"sessions": [...], "records": [...], "anomalies": [...]}`.
    public var jsonValue: JSONValue {
        .object([
            "sessions": .array(self.sessions.map(\.jsonValue)),
            "records": .array(self.records.map(\.jsonValue)),
            "anomalies": .array(self.anomalies.map(\.jsonValue)),
        ])
    }
}

/// Folds the reader's stream into meter sessions, glucose records and anomalies.
///
/// Values are decoded by characteristic UUID: 0x2A18, 0x2A34, 0x2A51, 0x2A52, the DIS strings, 0x2A2B and
/// 0x2A08. A context joins the measurement with the same sequence number in the same session, whether it
/// comes after the measurement (as GLS says) or before it. Undecodable packets, contexts without a
/// measurement, announced contexts that never come and reserved values are anomalies; the measurement of
/// a record with an odd field is still a record.
///
/// Memory: per open session the records that may still get a context (at most ``contextWindow``: a context
/// joins one of the session's last `contextWindow` measurements), the session's summary (RACP exchanges,
/// subscriptions), plus the kept output. With `keepRecords` false only counts are kept; `writeJSON`
/// (CaptureJSONStream.swift) writes sessions, records and anomalies out as they are decided.
///
/// `inspect` and `writeJSON` read with `skipCorruptRecords`: a damaged record is an anomaly with its frame
/// number and the records after it are still inspected; they throw `.corruptRecord` only when no record at
/// all was readable.
public struct CaptureInspector {
    /// Knobs.
    public struct Options: Sendable {
        /// Keep decoded records in ``CaptureInspection/records`` (off: count only, memory flat).
        public var keepRecords: Bool

        /// Options keeping the records unless told.
        public init(keepRecords: Bool = true) { self.keepRecords = keepRecords }
    }

    /// How many later measurements of its session a record waits for its context before it is final.
    /// GLS sends a context right after its measurement; a window (not the whole session) keeps memory flat
    /// in the session's length. A context that comes later than this is an anomaly and joins nothing.
    public static let contextWindow = 4096

    /// What the inspector holds for a session still open.
    private struct OpenSession {
        /// The records that may still get a context (the last `contextWindow` of the session): a ring of
        /// `contextWindow + 1` slots, the record of ordinal `o` (its position among the session's records)
        /// in slot `o % ringSize`, pending from ordinal `headOrdinal` to `tailOrdinal` (exclusive).
        var window: [InspectedRecord] = []
        /// The ordinal of the oldest pending record.
        var headOrdinal = 0
        /// The ordinal the next record gets.
        var tailOrdinal = 0
        /// Sequence number → ordinal of the session's newest record with it (a record with an ordinal
        /// before the window's has left it: its number's context comes too late).
        var newestBySequence = SequenceIndex()
        /// Per window record: the ordinal of the session's previous record with the same number, or −1.
        var previousSameSequence: [Int] = []
        /// Contexts that came before any measurement with their sequence number.
        var earlyContexts: [UInt16: (frame: Int, bytes: [UInt8], context: MeasurementContext)] = [:]
        /// The last measurement seen, to report one repeated byte for byte.
        var lastMeasurement: (frame: Int, bytes: [UInt8])?
        /// Device name and DIS strings read so far, by UUID (long values joined from Read Blob parts).
        var deviceValues: [UInt16: [UInt8]] = [:]
        /// Glucose Feature as read.
        var feature: GlucoseFeature?
        /// The meter clock as read last.
        var clock: InspectedClock?
        /// CCCD writes, in order.
        var subscriptions: [(frame: Int, characteristic: BluetoothUUID?, value: [UInt8])] = []
        /// RACP exchanges, in request order.
        var racp: [RACPExchange] = []
        /// Index in `racp` of the exchange waiting for its answer.
        var openExchange: Int?
        /// Measurements decoded in the session.
        var recordCount = 0
        /// SMP Pairing Requests seen.
        var pairingRequests = 0
        /// SMP Pairing Failed reasons.
        var pairingFailures: [UInt8] = []
        var clockWrites: [InspectedClockWrite] = []
        var verio: InspectedVerio?

        /// Slots of the ring: the window and one more.
        static let ringSize = CaptureInspector.contextWindow + 1

        /// Records in the window.
        var pendingCount: Int { self.tailOrdinal - self.headOrdinal }

        /// The earliest frame a record of this session not yet final has (Int.max when none).
        var earliestPendingRecordFrame: Int { self.pendingCount > 0 ? self[ordinal: self.headOrdinal].frame : Int.max }

        /// The earliest frame an anomaly this session may still report has: a pending record (a context
        /// that never came), an early context (an orphan), an unanswered RACP request.
        var earliestPendingAnomalyFrame: Int {
            var earliest = self.earliestPendingRecordFrame
            for early in self.earlyContexts.values { earliest = min(earliest, early.frame) }
            for exchange in self.racp where exchange.awaitsResponse { earliest = min(earliest, exchange.requestFrame ?? 0) }
            if let pending = self.verio?.pending { earliest = min(earliest, pending.frame) }
            return earliest
        }

        /// The window's record of `ordinal`.
        subscript(ordinal ordinal: Int) -> InspectedRecord {
            get { self.window[ordinal % Self.ringSize] }
            set { self.window[ordinal % Self.ringSize] = newValue }
        }

        /// Adds a record at the window's end (the window must have room: `pendingCount < contextWindow + 1`).
        mutating func append(_ record: InspectedRecord) {
            let ordinal = self.tailOrdinal
            let previous = self.newestBySequence.update(record.measurement.sequenceNumber, to: ordinal) ?? -1
            if self.window.count < Self.ringSize {
                if self.window.count == self.window.capacity {
                    self.window.reserveCapacity(min(Self.ringSize, max(1024, 2 * self.window.count)))
                    self.previousSameSequence.reserveCapacity(self.window.capacity)
                }
                self.window.append(record)
                self.previousSameSequence.append(previous)
            } else {
                self[ordinal: ordinal] = record
                self.previousSameSequence[ordinal % Self.ringSize] = previous
            }
            self.tailOrdinal += 1
        }

        /// The newest window record with number `seq` that has no context yet: `.none` when there is no
        /// window record with that number, `.tooLate` when its records left the window, `.allJoined` when
        /// every one in the window has a context.
        func joinTarget(_ seq: UInt16) -> JoinTarget {
            guard var ordinal = self.newestBySequence[seq] else { return .none }
            let head = self.headOrdinal
            guard ordinal >= head else { return .tooLate }
            while ordinal >= head {
                if self[ordinal: ordinal].context == nil { return .record(ordinal) }
                ordinal = self.previousSameSequence[ordinal % Self.ringSize]
            }
            return .allJoined
        }

        /// Takes the oldest pending record out of the window (its slot is reused by a later record).
        mutating func takeOldest() -> InspectedRecord {
            let record = self[ordinal: self.headOrdinal]
            self.headOrdinal += 1
            return record
        }
    }

    /// Sequence number → the newest record ordinal with it: 16 flat tables of 4096 slots, each made when a
    /// number in its range first comes, so a lookup is two loads, not a hash.
    fileprivate final class SequenceIndex {
        /// Per 4096 numbers, a table of ordinal + 1 (0: none); nil until a number in it comes.
        private var chunks = [UnsafeMutablePointer<UInt32>?](repeating: nil, count: 16)

        deinit { for chunk in self.chunks { chunk?.deallocate() } }

        /// The newest ordinal with `seq`, if any.
        subscript(seq: UInt16) -> Int? {
            guard let chunk = self.chunks[Int(seq >> 12)] else { return nil }
            let value = chunk[Int(seq & 0x0FFF)]
            return value == 0 ? nil : Int(value) - 1
        }

        /// Sets the ordinal of `seq`; the one it had before, if any.
        func update(_ seq: UInt16, to ordinal: Int) -> Int? {
            let chunk: UnsafeMutablePointer<UInt32>
            if let existing = self.chunks[Int(seq >> 12)] {
                chunk = existing
            } else {
                chunk = .allocate(capacity: 4096)
                chunk.initialize(repeating: 0, count: 4096)
                self.chunks[Int(seq >> 12)] = chunk
            }
            let previous = chunk[Int(seq & 0x0FFF)]
            chunk[Int(seq & 0x0FFF)] = UInt32(truncatingIfNeeded: ordinal + 1)
            return previous == 0 ? nil : Int(previous) - 1
        }
    }

    /// Where a context goes (see ``OpenSession/joinTarget(_:)``).
    private enum JoinTarget {
        /// No record has the number; its records left the window; every one in the window has a context.
        case none, tooLate, allJoined
        /// The ordinal of the record the context joins.
        case record(Int)
    }

    /// What to keep.
    public let options: Options
    /// Open sessions by the reader's session number, except the ``hot`` one.
    private var open: [Int: OpenSession] = [:]
    /// The open session of the last event (not in `open`).
    private var hot: (key: Int, state: OpenSession)?
    /// Sessions that ended, in the order they did.
    private var finished: [InspectedSession] = []
    /// Final records (when kept).
    private var records: [InspectedRecord] = []
    /// Anomalies, in the order they were found.
    private var anomalies: [InspectionAnomaly] = []
    /// Measurements decoded in all.
    private var recordCount = 0
    /// Set by `writeJSON`: records and anomalies go there as they are decided instead of being kept.
    var stream: CaptureJSONStream?

    /// An inspector with nothing seen yet.
    public init(options: Options = Options()) {
        self.options = options
    }

    /// Reads a whole capture file and inspects it (streaming; the file is never loaded whole).
    /// - Throws: `CaptureError` when the file cannot be read or is corrupt.
    public static func inspect(
        path: String, handleOverrides: [HandleOverride] = [], options: Options = Options()
    ) throws(CaptureError) -> CaptureInspection {
        let reader = try GATTEventReader(path: path, options: Self.readerOptions(handleOverrides))
        return try Self.inspect(reader, options: options)
    }

    /// Inspects a capture image held in memory.
    /// - Throws: `CaptureError` when the image is not a readable capture.
    public static func inspect(
        bytes: [UInt8], handleOverrides: [HandleOverride] = [], options: Options = Options()
    ) throws(CaptureError) -> CaptureInspection {
        let reader = try GATTEventReader(bytes: bytes, options: Self.readerOptions(handleOverrides))
        return try Self.inspect(reader, options: options)
    }

    /// A damaged record is an anomaly with its frame number; the records around it are still inspected.
    static func readerOptions(_ handleOverrides: [HandleOverride]) -> GATTEventReader.Options {
        GATTEventReader.Options(handleOverrides: handleOverrides, skipCorruptRecords: true)
    }

    /// Inspects every item of `reader`, with its statistics; throws when damage left nothing readable.
    private static func inspect(_ reader: GATTEventReader, options: Options) throws(CaptureError) -> CaptureInspection {
        var inspector = CaptureInspector(options: options)
        var firstCorrupt: CaptureAnomaly?
        while let item = try reader.next() {
            if case .anomaly(let anomaly) = item, anomaly.kind == .corruptRecord, firstCorrupt == nil { firstCorrupt = anomaly }
            inspector.consume(item)
        }
        try Self.checkReadable(reader.statistics, firstCorrupt)
        var result = inspector.finish()
        result.statistics = reader.statistics
        return result
    }

    /// Throws `.corruptRecord` when damage left nothing readable (no good record at all).
    static func checkReadable(_ statistics: CaptureStatistics, _ firstCorrupt: CaptureAnomaly?) throws(CaptureError) {
        guard statistics.frames == 0, let corrupt = firstCorrupt else { return }
        throw CaptureError(
            .corruptRecord, frame: corrupt.frame, "No record of the capture is readable: \(corrupt.reason)")
    }

    /// Feeds one reader item.
    public mutating func consume(_ item: CaptureItem) {
        switch item {
        case .event(let event): self.event(event)
        case .anomaly(let anomaly):
            self.add(InspectionAnomaly(
                frame: anomaly.frame, session: anomaly.session.map { $0 - 1 }, characteristic: anomaly.characteristic,
                reason: anomaly.reason))
        case .sessionEnded(let session): self.sessionEnded(session)
        }
    }

    /// The inspection so far; sessions still open are not included (the reader closes every session at the
    /// end of the capture, so after the reader returned nil there are none).
    public func finish() -> CaptureInspection {
        var result = CaptureInspection()
        result.sessions = self.finished.sorted { $0.capture.index < $1.capture.index }
        // Sessions are numbered by the reader from 1 in order of their first frame: position = index − 1.
        for index in result.sessions.indices { result.sessions[index].position = index }
        result.records = self.records.sorted { $0.frame < $1.frame }
        result.recordCount = self.recordCount
        result.anomalies = self.anomalies.enumerated().sorted {
            ($0.element.frame ?? Int.max, $0.offset) < ($1.element.frame ?? Int.max, $1.offset)
        }.map(\.element)
        return result
    }

    // MARK: - Events

    /// Applies an event to its session's state (taken out of the table and put back as the hot one).
    private mutating func event(_ event: GATTEvent) {
        let key = event.session
        var state = self.takeSession(key)
        self.apply(event, position: key - 1, &state)
        self.hot = (key, state)
    }

    /// The session's state, moved out (its arrays stay uniquely referenced: no copy per append). The last
    /// event's session waits in `hot`, outside the dictionary: the next event is most likely its too.
    private mutating func takeSession(_ key: Int) -> OpenSession {
        var hot: (key: Int, state: OpenSession)?
        swap(&hot, &self.hot)
        if let hot {
            if hot.key == key { return hot.state }
            self.open[hot.key] = hot.state
        }
        return self.open.removeValue(forKey: key) ?? OpenSession()
    }

    /// The least of `frame` over the open sessions (Int.max when none is open).
    private func earliest(_ frame: (OpenSession) -> Int) -> Int {
        var earliest = self.hot.map { frame($0.state) } ?? Int.max
        for state in self.open.values { earliest = min(earliest, frame(state)) }
        return earliest
    }

    /// Routes an event: glucose values to the measurement and context decoders, RACP values to the
    /// exchanges, reads of the peer's own attributes to the device facts, CCCD and RACP writes, RACP
    /// write errors and SMP pairing.
    private mutating func apply(_ event: GATTEvent, position: Int, _ state: inout OpenSession) {
        switch event.kind {
        case .notification(let attribute, let value):
            guard let uuid = attribute.uuid else { return }
            if uuid == .glucoseMeasurement {
                self.measurement(value, frame: event.frame, position: position, &state)
            } else if uuid == .glucoseMeasurementContext {
                self.context(value, frame: event.frame, position: position, &state)
            } else if uuid == .recordAccessControlPoint {
                self.racpIndication(value, frame: event.frame, position: position, &state)
            } else if uuid == Verio.replyCharacteristic {
                var verio = state.verio ?? InspectedVerio()
                if let reason = verio.notified(value, frame: event.frame, timestamp: event.timestamp, session: position) {
                    self.note(event.frame, position, uuid, reason)
                }
                state.verio = verio
            }
        case .indication(let attribute, let value):
            guard let uuid = attribute.uuid else { return }
            if uuid == .recordAccessControlPoint {
                self.racpIndication(value, frame: event.frame, position: position, &state)
            } else if uuid == .glucoseMeasurement {
                self.measurement(value, frame: event.frame, position: position, &state)
            } else if uuid == .glucoseMeasurementContext {
                self.context(value, frame: event.frame, position: position, &state)
            }
        case .read(let attribute, let value, let offset):
            // Only the peer's own attributes describe it: a meter that is also a GATT client reads the
            // capturing phone's Device Name and clock, and those answers come from the phone.
            guard let uuid = attribute.uuid, attribute.isCharacteristicValue, event.attributeServedByPeer else { return }
            self.read(uuid, value, offset: offset, frame: event.frame, timestamp: event.timestamp, position: position, &state)
        case .write(let attribute, let value, _):
            if attribute.isCCCD {
                state.subscriptions.append((event.frame, attribute.characteristic, value))
            } else if attribute.uuid == .recordAccessControlPoint {
                self.racpRequest(value, frame: event.frame, position: position, &state)
            } else if attribute.uuid == Verio.commandCharacteristic {
                var verio = state.verio ?? InspectedVerio()
                if let reason = verio.written(value, frame: event.frame) {
                    self.note(event.frame, position, Verio.commandCharacteristic, reason)
                }
                state.verio = verio
            } else if let uuid = attribute.uuid, uuid == .currentTime || uuid == .isensTime {
                let write = InspectedClockWrite(characteristic: uuid, frame: event.frame, bytes: value)
                if uuid == .currentTime, write.dateTime == nil {
                    self.note(event.frame, position, uuid, "Current Time write of \(value.count) bytes does not decode.")
                }
                state.clockWrites.append(write)
            }
        case .error(let request, let attribute, let code):
            if request == .writeRequest, let uuid = attribute.uuid, uuid == .currentTime || uuid == .isensTime,
                let last = state.clockWrites.indices.last, state.clockWrites[last].characteristic == uuid
            {
                state.clockWrites[last].error = code
                return
            }
            guard request == .writeRequest, attribute.uuid == .recordAccessControlPoint, let index = state.openExchange
            else { return }
            state.racp[index].writeError = code
            state.openExchange = nil
        case .pairingRequested:
            state.pairingRequests += 1
        case .pairingFailed(let reason):
            state.pairingFailures.append(reason)
        default:
            break
        }
    }

    /// Reports an anomaly about a packet of session `position`.
    private mutating func note(
        _ frame: Int, _ position: Int, _ characteristic: BluetoothUUID?, _ reason: String
    ) {
        self.add(InspectionAnomaly(frame: frame, session: position, characteristic: characteristic, reason: reason))
    }

    /// Keeps the anomaly, or writes it to the JSON stream.
    private mutating func add(_ anomaly: InspectionAnomaly) {
        if let stream = self.stream { stream.add(anomaly: anomaly) } else { self.anomalies.append(anomaly) }
    }

    /// No record reported later has a frame before this one (Int.max when no session holds one).
    var earliestPendingRecordFrame: Int { self.earliest(\.earliestPendingRecordFrame) }

    /// No anomaly reported later (but the reader's own, about frames still to come) has a frame before this.
    var earliestPendingAnomalyFrame: Int { self.earliest(\.earliestPendingAnomalyFrame) }

    /// Records held because a context may still come for them, over all open sessions, and the most at once.
    private(set) var heldRecords = 0
    private(set) var peakHeldRecords = 0

    /// A record that can no longer change: its late-context anomaly, then to the stream or the kept records.
    private mutating func finalize(_ record: InspectedRecord) {
        self.heldRecords -= 1
        if record.measurement.contextFollows && record.context == nil {
            self.note(record.frame, record.session, .glucoseMeasurement, "Record \(record.measurement.sequenceNumber) "
                + "announces a context that never came; the record is kept without it.")
        }
        if let stream = self.stream {
            // Its session is out of `open` now: written at once when no other session holds an earlier record.
            stream.add(record: record, final: record.frame < self.earliest(\.earliestPendingRecordFrame))
        } else if self.options.keepRecords {
            self.records.append(record)
        }
    }

    /// Decodes a measurement leniently and adds its record to the window (joining an early context),
    /// reporting what is odd about it: trailing bytes, a bad base time, reserved flags or values, a
    /// repeat of the previous measurement. One that does not decode is an anomaly, not a record.
    private mutating func measurement(_ bytes: [UInt8], frame: Int, position: Int, _ state: inout OpenSession) {
        let measurement: GlucoseMeasurement
        var reader = ByteReader(bytes)
        do throws(GlucoseProfileError) {
            measurement = try GlucoseMeasurement(parsing: &reader, options: .lenientDateTime)
        } catch {
            self.note(frame, position, .glucoseMeasurement, "Glucose Measurement of \(bytes.count) bytes does not decode "
                + "(\(error.description)); no record.")
            return
        }
        let seq = measurement.sequenceNumber
        if reader.readableBytes > 0 {
            self.note(frame, position, .glucoseMeasurement, "Record \(seq) has \(reader.readableBytes) trailing byte(s) "
                + "after its last field; they are ignored.")
        }
        do throws(GlucoseProfileError) {
            try measurement.baseTime.validate(field: "baseTime", offset: 3)
        } catch {
            self.note(frame, position, .glucoseMeasurement, "Record \(seq) base time is out of range "
                + "(\(error.description)); the record is kept as sent.")
        }
        if measurement.reservedFlags != 0 {
            self.note(frame, position, .glucoseMeasurement, "Record \(seq) sets reserved flag bits "
                + "0x\(hexByte(measurement.reservedFlags)); they are ignored.")
        }
        if measurement.concentration?.special == .reserved {
            self.note(frame, position, .glucoseMeasurement, "Record \(seq) concentration is the reserved SFLOAT "
                + "0x0801; the record has no value.")
        }
        if let type = measurement.type, type.name == "reserved" {
            self.note(frame, position, .glucoseMeasurement, "Record \(seq) sample type \(type.code) is reserved.")
        }
        if let location = measurement.sampleLocation, location.name == "reserved" {
            self.note(frame, position, .glucoseMeasurement, "Record \(seq) sample location \(location.code) is reserved.")
        }
        if let last = state.lastMeasurement, last.bytes == bytes {
            self.note(frame, position, .glucoseMeasurement, "Record \(seq) repeats the measurement of frame "
                + "\(last.frame) byte for byte; a sync keeps one.")
        }
        state.lastMeasurement = (frame, bytes)
        // Streaming JSON never prints the bytes: a session's pending records stay small.
        var record = InspectedRecord(
            frame: frame, session: position, measurementBytes: self.stream == nil ? bytes : [], measurement: measurement)
        if let early = state.earlyContexts.removeValue(forKey: seq) {
            record.contextFrame = early.frame
            record.contextBytes = early.bytes
            record.context = early.context
        }
        state.append(record)
        self.heldRecords += 1
        self.peakHeldRecords = max(self.peakHeldRecords, self.heldRecords)
        state.recordCount += 1
        if state.pendingCount > Self.contextWindow { self.finalize(state.takeOldest()) }
        self.recordCount += 1
        if let index = state.openExchange, state.racp[index].request?.opCode == .reportStoredRecords {
            state.racp[index].measurements += 1
        }
    }

    /// Joins a context to the newest window record with its number that has none, or keeps it for a
    /// measurement still to come; a second, a late or an undecodable context is an anomaly.
    private mutating func context(_ bytes: [UInt8], frame: Int, position: Int, _ state: inout OpenSession) {
        let context: MeasurementContext
        do throws(GlucoseProfileError) {
            context = try MeasurementContext(bytes: bytes)
        } catch {
            self.note(frame, position, .glucoseMeasurementContext, "Measurement Context of \(bytes.count) bytes does not "
                + "decode (\(error.description)).")
            return
        }
        let seq = context.sequenceNumber
        // The newest record with this number that has no context yet.
        switch state.joinTarget(seq) {
        case .record(let ordinal):
            state[ordinal: ordinal].context = context
            state[ordinal: ordinal].contextFrame = frame
            state[ordinal: ordinal].contextBytes = bytes
            return
        case .allJoined:
            self.note(frame, position, .glucoseMeasurementContext, "Record \(seq) already has a context; this "
                + "second one is ignored.")
            return
        case .tooLate:
            self.note(frame, position, .glucoseMeasurementContext, "Context for record \(seq) comes more than "
                + "\(Self.contextWindow) records after its measurement; it is ignored.")
            return
        case .none:
            break
        }
        if state.earlyContexts[seq] != nil {
            self.note(frame, position, .glucoseMeasurementContext, "A second context for record \(seq) came before its "
                + "measurement; it is ignored.")
            return
        }
        state.earlyContexts[seq] = (frame, bytes, context)
    }

    /// Keeps a read value of the peer: device name and DIS strings (long ones from their parts),
    /// Glucose Feature, and the clock (Current Time or Date Time).
    private mutating func read(
        _ uuid: BluetoothUUID, _ value: [UInt8], offset: Int, frame: Int, timestamp: CaptureTimestamp, position: Int,
        _ state: inout OpenSession
    ) {
        guard let short = uuid.uuid16 else { return }
        switch uuid {
        case _ where short == 0x2A00 || (0x2A24...0x2A29).contains(short):
            if offset == 0 {
                state.deviceValues[short] = value
            } else if state.deviceValues[short]?.count == offset {
                state.deviceValues[short]?.append(contentsOf: value)
            }
        case .glucoseFeature:
            do throws(GlucoseProfileError) {
                state.feature = try GlucoseFeature(bytes: value)
            } catch {
                self.note(frame, position, uuid, "Glucose Feature does not decode (\(error.description)).")
            }
        case .currentTime:
            var clock = InspectedClock(characteristic: uuid, frame: frame, timestamp: timestamp, bytes: value)
            do throws(GlucoseProfileError) {
                let time = try CurrentTime(bytes: value)
                clock.currentTime = time
                clock.dateTime = time.dateTime
            } catch {
                self.note(frame, position, uuid, "Current Time does not decode (\(error.description)).")
            }
            Self.clockRead(clock, &state)
        case .dateTime:
            var clock = InspectedClock(characteristic: uuid, frame: frame, timestamp: timestamp, bytes: value)
            do throws(GlucoseProfileError) {
                clock.dateTime = try DateTime(bytes: value)
            } catch {
                self.note(frame, position, uuid, "Date Time does not decode (\(error.description)).")
            }
            Self.clockRead(clock, &state)
        default:
            break
        }
    }

    /// The session's clock is the first read (the one a download resolves its times with); a read after
    /// a clock write is that write's read-back.
    private static func clockRead(_ clock: InspectedClock, _ state: inout OpenSession) {
        if let last = state.clockWrites.indices.last, state.clockWrites[last].readBack == nil,
            state.clockWrites[last].error == nil
        {
            state.clockWrites[last].readBack = clock.dateTime
        } else if state.clock == nil {
            state.clock = clock
        }
    }

    /// Opens an exchange for a RACP write; a request while another is unanswered is an anomaly (aborts aside).
    private mutating func racpRequest(_ bytes: [UInt8], frame: Int, position: Int, _ state: inout OpenSession) {
        var exchange = RACPExchange(requestFrame: frame, requestBytes: bytes)
        do throws(GlucoseProfileError) {
            exchange.request = try RACPMessage(bytes: bytes)
        } catch {
            self.note(frame, position, .recordAccessControlPoint, "RACP request does not decode (\(error.description)).")
        }
        if let open = state.openExchange, state.racp[open].request?.opCode != .abortOperation,
            exchange.request?.opCode != .abortOperation
        {
            self.note(frame, position, .recordAccessControlPoint, "A RACP request was written while the one of frame "
                + "\(state.racp[open].requestFrame ?? 0) was still unanswered.")
        }
        state.racp.append(exchange)
        state.openExchange = state.racp.count - 1
    }

    /// Answers the exchange a RACP response belongs to (matched by op code, so an abort's answer may
    /// overtake); a request indicated, a reserved code or an answer nobody waits for is an anomaly.
    private mutating func racpIndication(_ bytes: [UInt8], frame: Int, position: Int, _ state: inout OpenSession) {
        let message: RACPMessage
        do throws(GlucoseProfileError) {
            message = try RACPMessage(bytes: bytes)
        } catch {
            self.note(frame, position, .recordAccessControlPoint, "RACP indication does not decode "
                + "(\(error.description)); it is ignored.")
            return
        }
        guard message.opCode == .responseCode || message.opCode == .numberOfStoredRecordsResponse else {
            self.note(frame, position, .recordAccessControlPoint, "The meter indicated a RACP request "
                + "(\(message.opCode.name)) instead of a response.")
            return
        }
        if let (_, code) = message.response, code.isReserved {
            self.note(frame, position, .recordAccessControlPoint, "RACP response code 0x\(hexByte(code.rawValue)) is reserved.")
        }
        // An answer to our abort may overtake the answer of the aborted request: match by op code.
        var target = state.openExchange
        if let (request, _) = message.response {
            if let match = state.racp.indices.last(where: {
                state.racp[$0].response == nil && state.racp[$0].writeError == nil
                    && state.racp[$0].request?.opCode == request
            }) {
                target = match
            }
        }
        guard let index = target, state.racp[index].response == nil else {
            self.note(frame, position, .recordAccessControlPoint, "RACP response with no request waiting for it.")
            state.racp.append(RACPExchange(responseFrame: frame, responseBytes: bytes, response: message))
            return
        }
        state.racp[index].response = message
        state.racp[index].responseFrame = frame
        state.racp[index].responseBytes = bytes
        if state.openExchange == index { state.openExchange = nil }
    }

    /// Closes a session: orphan contexts and unanswered requests are anomalies, its records are final,
    /// and its summary is kept (or written to the JSON stream).
    private mutating func sessionEnded(_ capture: CaptureSession) {
        let state = self.takeSession(capture.index)
        let position = capture.index - 1
        for (seq, early) in state.earlyContexts.sorted(by: { $0.value.frame < $1.value.frame }) {
            self.note(early.frame, position, .glucoseMeasurementContext, "Context for record \(seq) has no measurement "
                + "in this session (orphan).")
        }
        for ordinal in state.headOrdinal..<state.tailOrdinal { self.finalize(state[ordinal: ordinal]) }
        for exchange in state.racp where exchange.awaitsResponse {
            self.note(exchange.requestFrame ?? capture.lastFrame, position, .recordAccessControlPoint,
                      "RACP \(exchange.request!.opCode.name) got no response before the session ended.")
        }
        if let pending = state.verio?.pending {
            self.note(pending.frame, position, Verio.commandCharacteristic,
                      "Verio \(pending.command.name) got no reply before the session ended.")
        }
        var session = InspectedSession(position: position, capture: capture)
        func text(_ uuid: BluetoothUUID) -> String? {
            uuid.uuid16.flatMap { state.deviceValues[$0] }.flatMap(deviceString)
        }
        session.deviceInformation = DeviceInformation(
            deviceName: text(BluetoothUUID(0x2A00)), manufacturer: text(.manufacturerName),
            model: text(.modelNumber), serialNumber: text(.serialNumber), hardware: text(BluetoothUUID(0x2A27)),
            firmware: text(.firmwareRevision), software: text(BluetoothUUID(0x2A28)))
        session.feature = state.feature
        session.clock = state.clock
        session.subscriptions = state.subscriptions
        session.racp = state.racp
        session.recordCount = state.recordCount
        session.pairingRequests = state.pairingRequests
        session.pairingFailures = state.pairingFailures
        session.clockWrites = state.clockWrites
        session.verio = state.verio
        if let stream = self.stream { stream.add(session: session) } else { self.finished.append(session) }
    }
}

/// A DIS string: UTF-8 up to the first NUL, surrounding spaces trimmed; nil when empty.
func deviceString(_ bytes: [UInt8]) -> String? {
    let text = String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
    let trimmed = text.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed()
    return trimmed.isEmpty ? nil : String(trimmed)
}

