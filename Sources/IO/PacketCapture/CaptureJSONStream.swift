import GlucoseProfile
import JSON
import SugarWire

#if canImport(Glibc)
internal import Glibc
#endif
internal import SystemIO

/// Compact JSON text appended to a byte buffer without a value tree: numbers and strings are formatted
/// in place (no allocation per value). Its bytes are exactly `JSONValue.serialized()`'s for the same
/// value (`JSONTextBufferTests` compares its strings).
struct JSONTextBuffer: TextOutputStream {
    let bytes: ByteStore
    /// Texts that depend on a few bits only (a concentration and its unit, a sample type's code), made once.
    let memo = RecordTextMemo()

    init(capacity: Int = 1 << 17) { self.bytes = ByteStore(capacity: capacity) }

    mutating func write(_ string: String) { self.bytes.append(contentsOf: string.utf8) }

    /// The standard library hands a Double's digits here from its stack buffer (no String made).
    mutating func _writeASCII(_ buffer: UnsafeBufferPointer<UInt8>) { self.bytes.append(contentsOf: buffer) }

    /// A literal (every caller passes ASCII literals, which have a pointer representation).
    @inline(__always)
    mutating func raw(_ text: StaticString) {
        self.bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Decimal digits, zero-padded to `width` (at most 20), formatted on the stack and appended once.
    mutating func int(_ value: Int64, width: Int = 1) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 24) { digits in
            var magnitude = value.magnitude
            var at = 24
            repeat {
                at -= 1
                digits[at] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            while 24 - at < min(width, 20) {
                at -= 1
                digits[at] = UInt8(ascii: "0")
            }
            if value < 0 {
                at -= 1
                digits[at] = UInt8(ascii: "-")
            }
            self.bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[at...]))
        }
    }

    mutating func int<T: BinaryInteger>(_ value: T) { self.int(Int64(value)) }

    mutating func int<T: BinaryInteger>(_ value: T?) {
        if let value { self.int(Int64(value)) } else { self.raw("null") }
    }

    mutating func bool(_ value: Bool) { value ? self.raw("true") : self.raw("false") }

    /// As `JSONValue.from(Double?)` serialized: null for nil and non-finite values, integral values
    /// without a fraction, others in Swift's shortest round-trip form.
    mutating func double(_ value: Double?) {
        guard let d = value, d.isFinite else { return self.raw("null") }
        if d.rounded() == d, abs(d) < 9.007_199_254_740_992e15 { return self.int(Int64(d)) }
        d.write(to: &self)
    }

    mutating func string(_ s: String?) {
        guard var s else { return self.raw("null") }
        // Most strings need no escape: one append for the whole text.
        let plain = s.withUTF8 { text -> Bool in
            guard !text.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else { return false }
            self.bytes.append(UInt8(ascii: "\""))
            self.bytes.append(contentsOf: text)
            self.bytes.append(UInt8(ascii: "\""))
            return true
        }
        guard !plain else { return }
        // A string with something to escape: the JSON module's one escaper (quotes included).
        var escaped: [UInt8] = []
        JSONValue.write(stringUTF8: Array(s.utf8), into: &escaped)
        self.bytes.append(contentsOf: escaped)
    }

    mutating func value(_ value: JSONValue) {
        var text: [UInt8] = []
        value.write(into: &text)
        self.bytes.append(contentsOf: text)
    }

    /// `"2019-02-27T11:10:30"` as `DateTime.json`.
    mutating func dateTime(_ t: DateTime?) {
        guard let t else { return self.raw("null") }
        guard t.year < 10000, max(t.month, t.day, t.hours, t.minutes, t.seconds) < 100 else {
            return self.dateTimeByField(t)
        }
        self.bytes.appendInPlace(capacity: 21) { out in
            @inline(__always) func pair(_ value: UInt8, _ at: Int) {
                out[at] = UInt8(ascii: "0") + UInt8(value / 10)
                out[at + 1] = UInt8(ascii: "0") + UInt8(value % 10)
            }
            let year = Int(t.year)
            out[0] = UInt8(ascii: "\"")
            pair(UInt8(year / 100), 1)
            pair(UInt8(year % 100), 3)
            out[5] = UInt8(ascii: "-")
            pair(t.month, 6)
            out[8] = UInt8(ascii: "-")
            pair(t.day, 9)
            out[11] = UInt8(ascii: "T")
            pair(t.hours, 12)
            out[14] = UInt8(ascii: ":")
            pair(t.minutes, 15)
            out[17] = UInt8(ascii: ":")
            pair(t.seconds, 18)
            out[20] = UInt8(ascii: "\"")
            return 21
        }
    }

    /// The same through the calendar's writer (a year above 9999 or a field above 99 is written whole).
    private mutating func dateTimeByField(_ t: DateTime) {
        self.bytes.appendInPlace(capacity: CivilCalendar.isoStringMaxBytes + 2) { out in
            out[0] = UInt8(ascii: "\"")
            let n = CivilCalendar.writeISOString(
                year: Int(t.year), month: Int(t.month), day: Int(t.day), hour: Int(t.hours), minute: Int(t.minutes),
                second: Int(t.seconds), into: UnsafeMutableBufferPointer(start: out + 1, count: CivilCalendar.isoStringMaxBytes))
            out[n + 1] = UInt8(ascii: "\"")
            return n + 2
        }
    }

    mutating func codeName(_ code: UInt8, _ name: String) {
        self.raw("{\"code\":")
        self.int(code)
        self.raw(",\"name\":")
        self.string(name)
        self.raw("}")
    }

    /// `InspectedRecord.jsonValue`, written directly.
    mutating func record(_ record: InspectedRecord) {
        let m = record.measurement
        self.raw("{\"characteristic\":\"2a18\",\"flags\":")
        self.int(m.flags)
        self.raw(",\"reservedFlags\":")
        self.int(m.reservedFlags)
        self.raw(",\"sequenceNumber\":")
        self.int(m.sequenceNumber)
        self.raw(",\"baseTime\":")
        self.dateTime(m.baseTime)
        self.raw(",\"timeOffsetMinutes\":")
        self.int(m.timeOffsetMinutes)
        self.raw(",\"userFacingTime\":")
        self.dateTime(m.userFacingTime)
        self.raw(",\"concentration\":")
        if let c = m.concentration, let unit = m.unit {
            // A pure function of the SFLOAT and the unit: formatted once per distinct value.
            let key = Int(c.rawValue) << 1 | (unit == .kilogramsPerLiter ? 0 : 1)
            if !self.memo.concentration(key, into: self.bytes) {
                let start = self.bytes.count
                self.concentration(m)
                self.memo.remember(concentration: key, from: self.bytes, start: start)
            }
        } else {
            self.concentration(m)
        }
        self.raw(",\"type\":")
        if let type = m.type {
            self.memo.codeName(type: true, type.code, into: self) { $0.codeName(type.code, type.name) }
        } else {
            self.raw("null")
        }
        self.raw(",\"sampleLocation\":")
        if let location = m.sampleLocation {
            self.memo.codeName(type: false, location.code, into: self) { $0.codeName(location.code, location.name) }
        } else {
            self.raw("null")
        }
        self.raw(",\"sensorStatus\":")
        if let status = m.sensorStatus {
            self.raw("{\"bits\":")
            self.int(status.rawValue)
            self.raw(",\"names\":")
            if status.rawValue == 0 {
                self.raw("[]")
            } else {
                var first = true
                for bit in 0..<16 where status.rawValue & (1 << bit) != 0 {
                    self.bytes.append(first ? UInt8(ascii: "[") : UInt8(ascii: ","))
                    first = false
                    self.string(SensorStatus.bitNames[bit])
                }
                self.raw("]")
            }
            self.raw("}")
        } else {
            self.raw("null")
        }
        self.raw(",\"contextFollows\":")
        self.bool(m.contextFollows)
        self.raw(",\"frame\":")
        self.int(record.frame)
        self.raw(",\"session\":")
        self.int(record.session)
        self.raw(",\"context\":")
        if let context = record.context { self.value(context.json) } else { self.raw("null") }
        self.raw("}")
    }

    /// The concentration object (or null) and `mgdL` and `mmolL`, as `GlucoseMeasurement.json` has them.
    private mutating func concentration(_ m: GlucoseMeasurement) {
        if let c = m.concentration {
            self.raw("{\"raw\":")
            self.int(c.rawValue)
            self.raw(",\"mantissa\":")
            self.int(c.mantissa)
            self.raw(",\"exponent\":")
            self.int(c.exponent)
            self.raw(",\"unit\":")
            self.string(m.unit?.symbol)
            self.raw(",\"value\":")
            self.double(c.value)
            self.raw(",\"special\":")
            self.string(c.special?.name)
            self.raw("}")
        } else {
            self.raw("null")
        }
        self.raw(",\"mgdL\":")
        self.double(m.mgdL)
        self.raw(",\"mmolL\":")
        self.double(m.mmolL)
    }

    /// `InspectionAnomaly.jsonValue`, written directly.
    mutating func anomaly(_ anomaly: InspectionAnomaly) {
        self.raw("{\"frame\":")
        self.int(anomaly.frame)
        self.raw(",\"characteristic\":")
        self.string(anomaly.characteristicText)
        self.raw(",\"reason\":")
        self.string(anomaly.reason)
        self.raw("}")
    }
}

/// Record texts made once and copied after: per concentration (SFLOAT and unit; a direct-mapped table of
/// 4096 slots, so its memory is fixed) and per sample type and location code (16 each).
final class RecordTextMemo {
    /// Slots of the concentration table (the key's low bits pick one).
    private static let slots = 4096
    /// Room per slot; a longer text is not remembered.
    private static let slotBytes = 160
    /// Per slot: the key (−1 when empty) and the text's length; made on the first text remembered.
    private var keys: UnsafeMutablePointer<Int>?
    /// (See ``keys``.)
    private var lengths: UnsafeMutablePointer<Int>?
    /// The texts, `slotBytes` per slot.
    private var arena: UnsafeMutablePointer<UInt8>?
    /// Sample type (0–15) and location (16–31) objects, made on first use.
    private var codeNames: [[UInt8]?] = Array(repeating: nil, count: 32)

    deinit {
        self.keys?.deallocate()
        self.lengths?.deallocate()
        self.arena?.deallocate()
    }

    /// Appends the text remembered for `key`; false when there is none.
    @inline(__always)
    func concentration(_ key: Int, into bytes: ByteStore) -> Bool {
        let slot = key & (Self.slots - 1)
        guard let keys = self.keys, keys[slot] == key, let arena = self.arena, let lengths = self.lengths else { return false }
        bytes.append(contentsOf: UnsafeBufferPointer(start: arena + slot * Self.slotBytes, count: lengths[slot]))
        return true
    }

    /// Remembers what `bytes` holds from `start` on as the text of `key`.
    func remember(concentration key: Int, from bytes: ByteStore, start: Int) {
        let count = bytes.count - start
        guard count <= Self.slotBytes else { return }
        if self.keys == nil {
            let keys = UnsafeMutablePointer<Int>.allocate(capacity: Self.slots)
            keys.initialize(repeating: -1, count: Self.slots)
            let lengths = UnsafeMutablePointer<Int>.allocate(capacity: Self.slots)
            lengths.initialize(repeating: 0, count: Self.slots)
            self.keys = keys
            self.lengths = lengths
            self.arena = .allocate(capacity: Self.slots * Self.slotBytes)
        }
        guard let keys = self.keys, let lengths = self.lengths, let arena = self.arena else { return }
        let slot = key & (Self.slots - 1)
        bytes.withUnsafeBytes { text in
            (arena + slot * Self.slotBytes).update(
                from: text.baseAddress!.assumingMemoryBound(to: UInt8.self) + start, count: count)
        }
        keys[slot] = key
        lengths[slot] = count
    }

    /// Appends the `{"code","name"}` object of a sample type (or location) code, made by `make` once.
    @inline(__always)
    func codeName(type: Bool, _ code: UInt8, into buffer: JSONTextBuffer, make: (inout JSONTextBuffer) -> Void) {
        let index = Int(code & 0x0F) | (type ? 0 : 16)
        if let text = self.codeNames[index] {
            text.withUnsafeBufferPointer { buffer.bytes.append(contentsOf: $0) }
            return
        }
        var scratch = JSONTextBuffer(capacity: 64)
        make(&scratch)
        let text = scratch.bytes.withUnsafeBytes { Array($0) }
        self.codeNames[index] = text
        text.withUnsafeBufferPointer { buffer.bytes.append(contentsOf: $0) }
    }
}

/// A growable byte buffer whose appends are a capacity check and a copy (an Array's generic
/// `append(contentsOf:)` costs more than the JSON text it appends, per call).
final class ByteStore {
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private(set) var count = 0

    init(capacity: Int) {
        self.capacity = max(capacity, 64)
        self.base = .allocate(capacity: self.capacity)
    }

    deinit { self.base.deallocate() }

    var isEmpty: Bool { self.count == 0 }

    @inline(__always)
    private func reserve(_ extra: Int) {
        if self.count + extra > self.capacity { self.grow(self.count + extra) }
    }

    private func grow(_ needed: Int) {
        let capacity = max(needed, self.capacity * 2)
        let base = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
        base.update(from: self.base, count: self.count)
        self.base.deallocate()
        self.base = base
        self.capacity = capacity
    }

    @inline(__always)
    func append(_ byte: UInt8) {
        self.reserve(1)
        self.base[self.count] = byte
        self.count += 1
    }

    @inline(__always)
    func append(contentsOf bytes: UnsafeBufferPointer<UInt8>) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        let count = bytes.count
        self.reserve(count)
        let target = self.base + self.count
        if count >= 8 && count <= 16 {
            // Most appends are short literals and digits: two overlapping 8-byte moves, no memmove call.
            let raw = UnsafeRawPointer(source)
            let head = raw.loadUnaligned(as: UInt64.self)
            let tail = raw.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
            UnsafeMutableRawPointer(target).storeBytes(of: head, as: UInt64.self)
            UnsafeMutableRawPointer(target).storeBytes(of: tail, toByteOffset: count - 8, as: UInt64.self)
        } else if count < 8 {
            for offset in 0..<count { target[offset] = source[offset] }
        } else {
            target.update(from: source, count: count)
        }
        self.count += count
    }

    /// Lets `body` write up to `capacity` bytes at the end; it returns how many it wrote.
    @inline(__always)
    func appendInPlace(capacity: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Int) {
        self.reserve(capacity)
        self.count += body(self.base + self.count)
    }

    func append(contentsOf bytes: some Collection<UInt8>) {
        if bytes.withContiguousStorageIfAvailable({ self.append(contentsOf: $0) }) != nil { return }
        for byte in bytes { self.append(byte) }
    }

    func removeAll(keepingCapacity: Bool) { self.count = 0 }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        body(UnsafeRawBufferPointer(start: self.base, count: self.count))
    }
}

/// A JSON array's elements spilled to an anonymous temporary file as they are decided.
final class SpilledArray {
    /// The anonymous temporary file (`tmpfile`), removed by the system when closed.
    private var file: UnsafeMutablePointer<FILE>?
    /// Elements not yet written to the file.
    var buffer = JSONTextBuffer()
    /// Elements started.
    private(set) var count = 0

    /// Opens the temporary file; throws `.io` when none can be made.
    init() throws(CaptureError) {
        guard let file = tmpfile() else {
            throw CaptureError(.io, "Cannot create a temporary file: \(String(cString: strerror(errno))).")
        }
        self.file = file
    }

    deinit { if let file { fclose(file) } }

    /// Starts the next element (the comma).
    func element() {
        if self.count > 0 { self.buffer.bytes.append(UInt8(ascii: ",")) }
        self.count += 1
    }

    /// Writes the buffer out once it holds 64 KiB or more.
    func flushIfFull() throws(CaptureError) {
        if self.buffer.bytes.count >= 1 << 16 { try self.flush() }
    }

    /// `flushIfFull` where no error can be thrown: a failure is thrown by the next `flush`.
    func flushIfFullDeferringError() {
        guard self.deferredError == nil, self.buffer.bytes.count >= 1 << 16 else { return }
        do throws(CaptureError) { try self.flush() } catch { self.deferredError = error }
    }

    /// A write failure of ``flushIfFullDeferringError()``, thrown by the next ``flush()``.
    private var deferredError: CaptureError?

    /// Throws a deferred write failure, else writes the buffer to the file (`.io` when the write falls short).
    func flush() throws(CaptureError) {
        if let error = self.deferredError { throw error }
        guard !self.buffer.bytes.isEmpty else { return }
        let written = self.buffer.bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, self.file) }
        guard written == self.buffer.bytes.count else {
            throw CaptureError(.io, "Writing a temporary file failed: \(String(cString: strerror(errno))).")
        }
        self.buffer.bytes.removeAll(keepingCapacity: true)
    }

    /// Copies everything written so far to `out`: in the kernel (`sendfile`) when `out`'s descriptor takes
    /// it, else through a buffer.
    func copy(to out: inout OutputStream) throws(CaptureError) {
        try self.flush()
        if fflush(self.file) == 0 {
            let total = Int(ftello(self.file))
            try out.flush()
            var offset = off_t(0)
            while Int(offset) < total {
                let sent = retryingInterrupted { sendfile(out.fd, fileno(self.file), &offset, total - Int(offset)) }
                if sent <= 0 { break }
            }
            if Int(offset) == total { return }
            guard offset == 0 else {
                throw CaptureError(.io, "Writing the output failed: \(String(cString: strerror(errno))).")
            }
        }
        rewind(self.file)
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let got = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, self.file) }
            if got == 0 { break }
            try out.write(chunk[0..<got])
        }
        guard ferror(self.file) == 0 else {
            throw CaptureError(.io, "Reading a temporary file failed: \(String(cString: strerror(errno))).")
        }
    }
}

/// Buffered writes to a file descriptor.
struct OutputStream {
    /// The descriptor written to (not owned).
    let fd: Int32
    /// Bytes not yet written.
    var buffer = JSONTextBuffer()

    /// Buffers bytes, writing out at 64 KiB.
    mutating func write(_ bytes: some Collection<UInt8>) throws(CaptureError) {
        self.buffer.bytes.append(contentsOf: bytes)
        if self.buffer.bytes.count >= 1 << 16 { try self.flush() }
    }

    /// Writes the buffer to the descriptor; throws `.io` on failure.
    mutating func flush() throws(CaptureError) {
        let code = self.buffer.bytes.withUnsafeBytes { writeAll(self.fd, $0) }
        if code != 0 { throw CaptureError(.io, "Writing the output failed: \(String(cString: strerror(code))).") }
        self.buffer.bytes.removeAll(keepingCapacity: true)
    }
}

/// Where a streaming inspection puts sessions, records and anomalies as they are decided: each array
/// spilled to its own temporary file in the document's order, so memory does not grow with the capture
/// (only with what is still pending: records that may get a context, anomalies an open session may still
/// precede, sessions that ended before an earlier one). The document's bytes are those of
/// `CaptureInspection.jsonValue.serialized()`.
final class CaptureJSONStream {
    /// The `sessions` array's elements.
    let sessions: SpilledArray
    /// The `records` array's elements.
    let records: SpilledArray
    /// The `anomalies` array's elements.
    let anomalies: SpilledArray
    /// Ended sessions waiting for an earlier one (sessions are written in the reader's order, 1, 2, …).
    private var pendingSessions: [Int: InspectedSession] = [:]
    /// The reader's number of the next session to write.
    private var nextSession = 1
    /// Final records not written yet (another open session may still hold earlier ones).
    private var pendingRecords: [InspectedRecord] = []
    /// Anomalies with a frame, not written yet, with their arrival number (ties keep arrival order).
    private var pendingAnomalies: [(order: Int, anomaly: InspectionAnomaly)] = []
    /// Anomalies without a frame: they sort last, in arrival order.
    private var framelessAnomalies: [InspectionAnomaly] = []
    /// Anomalies added so far, their arrival numbers.
    private var arrivals = 0
    /// `pendingCount` at which the next flush is due (doubles while what is pending cannot be written).
    private var flushThreshold = 4096

    /// A stream with its three spill files open.
    init() throws(CaptureError) {
        self.sessions = try SpilledArray()
        self.records = try SpilledArray()
        self.anomalies = try SpilledArray()
    }

    /// Records and anomalies held because an earlier one may still come.
    var pendingCount: Int { self.pendingRecords.count + self.pendingAnomalies.count + self.framelessAnomalies.count }

    /// The most records and anomalies held at once, waiting for an earlier frame to be decided.
    private(set) var peakPendingCount = 0

    /// Enough is held for a ``flush(recordsBelow:anomaliesBelow:)`` to be worth it.
    var needsFlush: Bool { self.pendingCount >= self.flushThreshold }

    /// A final record; `final` also says no record still to come has an earlier frame, so it is written
    /// now unless earlier ones wait.
    func add(record: InspectedRecord, final: Bool) {
        if final && self.pendingRecords.isEmpty {
            self.records.element()
            var buffer = self.records.buffer
            buffer.record(record)
            self.records.flushIfFullDeferringError()
        } else {
            self.pendingRecords.append(record)
            self.peakPendingCount = max(self.peakPendingCount, self.pendingCount)
        }
    }

    /// Holds an anomaly until no earlier frame can come (frameless ones go last).
    func add(anomaly: InspectionAnomaly) {
        self.arrivals += 1
        if anomaly.frame == nil {
            self.framelessAnomalies.append(anomaly)
        } else {
            self.pendingAnomalies.append((self.arrivals, anomaly))
        }
        self.peakPendingCount = max(self.peakPendingCount, self.pendingCount)
    }

    /// Writes the session, and the ones after it that ended before it, in the reader's order; its
    /// position is the number of sessions before it (as ``CaptureInspector/finish()`` numbers them).
    func add(session: InspectedSession) {
        self.pendingSessions[session.capture.index] = session
        while let next = self.pendingSessions.removeValue(forKey: self.nextSession) {
            self.write(session: next)
            self.nextSession += 1
        }
    }

    /// Writes one session's element, numbered by its place in the array.
    private func write(session: InspectedSession) {
        var session = session
        session.position = self.sessions.count
        self.sessions.element()
        self.sessions.buffer.value(session.jsonValue)
    }

    /// Writes the records before `recordsBelow` and the anomalies before `anomaliesBelow`: nothing that
    /// arrives later can have a smaller frame.
    func flush(recordsBelow: Int, anomaliesBelow: Int) throws(CaptureError) {
        try self.sessions.flushIfFull()
        try self.records.flushIfFull()
        if !self.pendingRecords.isEmpty {
            self.pendingRecords.sort { $0.frame < $1.frame }
            let ready = self.pendingRecords.partitioningIndex { $0.frame >= recordsBelow }
            var buffer = self.records.buffer
            for index in 0..<ready {
                self.records.element()
                buffer.record(self.pendingRecords[index])
                try self.records.flushIfFull()
            }
            self.pendingRecords.removeSubrange(..<ready)
        }
        if !self.pendingAnomalies.isEmpty {
            self.pendingAnomalies.sort { ($0.anomaly.frame ?? Int.max, $0.order) < ($1.anomaly.frame ?? Int.max, $1.order) }
            let ready = self.pendingAnomalies.partitioningIndex { $0.anomaly.frame ?? Int.max >= anomaliesBelow }
            for item in self.pendingAnomalies[..<ready] {
                self.anomalies.element()
                self.anomalies.buffer.anomaly(item.anomaly)
                try self.anomalies.flushIfFull()
            }
            self.pendingAnomalies.removeSubrange(..<ready)
        }
        self.flushThreshold = max(4096, 2 * self.pendingCount)
    }

    /// The whole document (and a newline) to `fd`, once the capture is read.
    func finish(to fd: Int32) throws(CaptureError) {
        try self.flush(recordsBelow: Int.max, anomaliesBelow: Int.max)
        for anomaly in self.framelessAnomalies {
            self.anomalies.element()
            self.anomalies.buffer.anomaly(anomaly)
        }
        self.framelessAnomalies = []
        // The reader ends every session it numbers, so none is left; kept in order should one be.
        for index in self.pendingSessions.keys.sorted() { self.write(session: self.pendingSessions[index]!) }
        self.pendingSessions = [:]
        var out = OutputStream(fd: fd)
        out.buffer.raw("{\"sessions\":[")
        try self.sessions.copy(to: &out)
        out.buffer.raw("],\"records\":[")
        try self.records.copy(to: &out)
        out.buffer.raw("],\"anomalies\":[")
        try self.anomalies.copy(to: &out)
        out.buffer.raw("]}\n")
        try out.flush()
    }
}

extension Array {
    /// The first index whose element satisfies `belongs` (which must be false, then true, along the array).
    fileprivate func partitioningIndex(where belongs: (Element) -> Bool) -> Int {
        var low = 0
        var high = self.count
        while low < high {
            let middle = (low + high) / 2
            if belongs(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}

extension CaptureInspector {
    /// `sugarctl capture inspect FILE --json`: reads the capture once and writes the document of
    /// ``CaptureInspection/jsonValue`` (and a newline) to `fd`, streaming: records and anomalies go to
    /// temporary files as they are decided, and nothing reaches `fd` unless the whole capture was read.
    /// - Throws: `CaptureError` as ``inspect(path:handleOverrides:options:)``, or `.io` for the output.
    @discardableResult
    public static func writeJSON(
        path: String, handleOverrides: [HandleOverride] = [], to fd: Int32
    ) throws(CaptureError) -> StreamStatistics {
        let reader = try GATTEventReader(path: path, options: Self.readerOptions(handleOverrides))
        return try Self.writeJSON(reader, to: fd)
    }

    /// The same for a capture image held in memory.
    @discardableResult
    public static func writeJSON(
        bytes: [UInt8], handleOverrides: [HandleOverride] = [], to fd: Int32
    ) throws(CaptureError) -> StreamStatistics {
        let reader = try GATTEventReader(bytes: bytes, options: Self.readerOptions(handleOverrides))
        return try Self.writeJSON(reader, to: fd)
    }

    /// What a streaming inspection held at most, besides its output files.
    public struct StreamStatistics: Sendable {
        /// Records held at once because a context might still come for them (the open sessions' windows).
        public var peakHeldRecords = 0
        /// Final records and anomalies held at once until no earlier one could still come.
        public var peakPendingItems = 0
    }

    /// Inspects every item of `reader`, streaming decided records and anomalies to the spill files and
    /// the document to `fd` at the end; what it held at most.
    @discardableResult
    private static func writeJSON(_ reader: GATTEventReader, to fd: Int32) throws(CaptureError) -> StreamStatistics {
        let stream = try CaptureJSONStream()
        var inspector = CaptureInspector(options: Options(keepRecords: false))
        inspector.stream = stream
        var firstCorrupt: CaptureAnomaly?
        while let item = try reader.next() {
            if case .anomaly(let anomaly) = item, anomaly.kind == .corruptRecord, firstCorrupt == nil { firstCorrupt = anomaly }
            inspector.consume(item)
            if case .sessionEnded = item {
                try Self.flush(stream, inspector, reader)
            } else if stream.needsFlush {
                try Self.flush(stream, inspector, reader)
            }
        }
        try Self.checkReadable(reader.statistics, firstCorrupt)
        try Self.flush(stream, inspector, reader)
        try stream.finish(to: fd)
        return StreamStatistics(peakHeldRecords: inspector.peakHeldRecords, peakPendingItems: stream.peakPendingCount)
    }

    private static func flush(
        _ stream: CaptureJSONStream, _ inspector: CaptureInspector, _ reader: GATTEventReader
    ) throws(CaptureError) {
        try stream.flush(
            recordsBelow: min(inspector.earliestPendingRecordFrame, reader.statistics.frames),
            anomaliesBelow: min(inspector.earliestPendingAnomalyFrame, reader.statistics.frames))
    }
}
