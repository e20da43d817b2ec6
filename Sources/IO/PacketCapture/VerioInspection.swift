import GlucoseProfile
import JSON

// What `sugarctl capture inspect` shows of the OneTouch Verio vendor protocol (docs/verio-protocol.md)
// and of clock writes (Current Time 0x2A2B, i-SENS 0xFFF1).

/// One OneTouch Verio record found in a capture: the data reply to a record command (`b3 nn nn`).
public struct InspectedVerioRecord: Hashable, Sendable {
    /// 1-based frame number of the reply notification.
    public var frame: Int
    /// Position of the record's session in ``CaptureInspection/sessions`` (0-based).
    public var session: Int
    /// The record number the command asked for (the sequence number a sync stores).
    public var number: UInt16
    public var record: VerioRecord

    public init(frame: Int, session: Int, number: UInt16, record: VerioRecord) {
        self.frame = frame
        self.session = session
        self.number = number
        self.record = record
    }

    /// `{"frame", "session", "number", "bytes", "meterSeconds", "dateTime", "mgdL", "meaning"}`: `mgdL` is
    /// the value field as sent, `meaning` what it is (`glucose`, `lo`, `hi`, `noValue`, `notBloodGlucose`).
    public var jsonValue: JSONValue {
        .object([
            "frame": .int(Int64(self.frame)), "session": .int(Int64(self.session)), "number": .int(Int64(self.number)),
            "bytes": .string(hexBytes(self.record.encoded())), "meterSeconds": .int(Int64(self.record.meterSeconds)),
            "dateTime": .string(self.record.dateTime.isoString), "mgdL": .int(Int64(self.record.mgdL)),
            "meaning": .string(self.record.meaning.rawValue),
        ])
    }
}

/// A Verio command the meter refused (status 0x07 not allowed, 0x08 not supported, 0x09 not understood).
public struct InspectedVerioRefusal: Hashable, Sendable {
    public var frame: Int
    /// The refused command's name (``VerioCommand/name``), nil when no command was waiting.
    public var command: String?
    public var status: VerioStatus

    public var jsonValue: JSONValue {
        .object([
            "frame": .int(Int64(self.frame)), "command": .from(self.command),
            "status": .object(["code": .int(Int64(self.status.rawValue)), "name": .string(self.status.name)]),
        ])
    }
}

/// What one session shows of a OneTouch Verio download: commands written to `af9df7a2-…` and the
/// replies notified on `af9df7a3-…`, paired in order (replies carry no command code).
public struct InspectedVerio: Hashable, Sendable {
    /// Commands written (the host's `81` acknowledgements not counted).
    public var commands = 0
    /// The host's `81` acknowledgements.
    public var acknowledgements = 0
    /// The first clock reply: its frame, when it came, and the meter's seconds since 2000-01-01 (local).
    public var clock: (frame: Int, timestamp: CaptureTimestamp, meterSeconds: UInt32)?
    public var highestRecordNumber: UInt32?
    public var recordCount: UInt16?
    /// Record replies in frame order.
    public var records: [InspectedVerioRecord] = []
    public var refusals: [InspectedVerioRefusal] = []
    /// The command waiting for its reply.
    var pending: (frame: Int, command: VerioCommand)?

    public init() {}

    public static func == (lhs: InspectedVerio, rhs: InspectedVerio) -> Bool {
        lhs.commands == rhs.commands && lhs.acknowledgements == rhs.acknowledgements
            && lhs.clock?.frame == rhs.clock?.frame && lhs.clock?.meterSeconds == rhs.clock?.meterSeconds
            && lhs.highestRecordNumber == rhs.highestRecordNumber && lhs.recordCount == rhs.recordCount
            && lhs.records == rhs.records && lhs.refusals == rhs.refusals
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.commands)
        hasher.combine(self.records)
    }

    /// One write to the command characteristic. - Returns: an anomaly sentence, or nil.
    mutating func written(_ bytes: [UInt8], frame: Int) -> String? {
        if bytes == Verio.acknowledgement {
            self.acknowledgements += 1
            return nil
        }
        let command: VerioCommand
        do throws(GlucoseProfileError) {
            command = try VerioCommand(bytes: bytes)
        } catch {
            return "Verio command of \(bytes.count) bytes does not decode (\(error.description))."
        }
        self.commands += 1
        let overlap = self.pending.map {
            "A Verio command (\(command.name)) was written while \($0.command.name) of frame \($0.frame) was still unanswered."
        }
        self.pending = (frame, command)
        return overlap
    }

    /// One notification from the reply characteristic. - Returns: an anomaly sentence, or nil.
    mutating func notified(_ bytes: [UInt8], frame: Int, timestamp: CaptureTimestamp, session: Int) -> String? {
        let reply: VerioReply
        do throws(GlucoseProfileError) {
            reply = try VerioReply(bytes: bytes)
        } catch {
            return "Verio reply of \(bytes.count) bytes does not decode (\(error.description))."
        }
        switch reply {
        case .acknowledgement:
            return nil
        case .refused(let status):
            self.refusals.append(InspectedVerioRefusal(frame: frame, command: self.pending?.command.name, status: status))
            self.pending = nil
            return nil
        case .data(let payload):
            guard let (_, command) = self.pending else { return "Verio data reply with no command waiting for it." }
            self.pending = nil
            let answer: VerioAnswer
            do throws(GlucoseProfileError) {
                answer = try command.answer(payload: payload)
            } catch {
                return "Verio reply to \(command.name) does not decode (\(error.description))."
            }
            switch answer {
            case .clock(let seconds): if self.clock == nil { self.clock = (frame, timestamp, seconds) }
            case .highestRecordNumber(let highest): self.highestRecordNumber = highest
            case .recordCount(let count): self.recordCount = count
            case .record(let number, let record):
                self.records.append(InspectedVerioRecord(frame: frame, session: session, number: number, record: record))
            }
            return nil
        }
    }

    /// `{"commands", "acknowledgements", "clock", "highestRecordNumber", "recordCount", "records", "refusals"}`.
    public var jsonValue: JSONValue {
        .object([
            "commands": .int(Int64(self.commands)), "acknowledgements": .int(Int64(self.acknowledgements)),
            "clock": self.clock.map { clock in
                .object([
                    "frame": .int(Int64(clock.frame)), "meterSeconds": .int(Int64(clock.meterSeconds)),
                    "dateTime": .string(Verio.dateTime(meterSeconds: clock.meterSeconds).isoString),
                ])
            } ?? .null,
            "highestRecordNumber": self.highestRecordNumber.map { .int(Int64($0)) } ?? .null,
            "recordCount": self.recordCount.map { .int(Int64($0)) } ?? .null,
            "records": .array(self.records.map(\.jsonValue)),
            "refusals": .array(self.refusals.map(\.jsonValue)),
        ])
    }
}

/// A write to a meter's clock: Current Time 0x2A2B (10 bytes) or the i-SENS vendor time 0xFFF1 (11 bytes).
public struct InspectedClockWrite: Hashable, Sendable {
    public var characteristic: BluetoothUUID
    public var frame: Int
    public var bytes: [UInt8]
    /// The local date and time written (nil when the value does not decode).
    public var dateTime: DateTime?
    /// The ATT Error Response the write got, if any.
    public var error: ATTErrorCode?
    /// The clock as read back after the write in the same session, if it was.
    public var readBack: DateTime?

    public init(characteristic: BluetoothUUID, frame: Int, bytes: [UInt8]) {
        self.characteristic = characteristic
        self.frame = frame
        self.bytes = bytes
        do throws(GlucoseProfileError) {
            self.dateTime = characteristic == .currentTime
                ? try CurrentTime(bytes: bytes).dateTime : try ISensTime(bytes: bytes).dateTime
        } catch {
            self.dateTime = nil
        }
    }

    public var jsonValue: JSONValue {
        .object([
            "characteristic": .string(self.characteristic.shortString), "frame": .int(Int64(self.frame)),
            "bytes": .string(hexBytes(self.bytes)), "dateTime": self.dateTime.map { .string($0.isoString) } ?? .null,
            "writeError": self.error.map { .object(["code": .int(Int64($0.rawValue)), "name": .string($0.description)]) }
                ?? .null,
            "readBack": self.readBack.map { .string($0.isoString) } ?? .null,
        ])
    }
}

extension CaptureInspection {
    /// Every session's Verio records, in frame order.
    public var verioRecords: [InspectedVerioRecord] {
        self.sessions.flatMap { $0.verio?.records ?? [] }.sorted { $0.frame < $1.frame }
    }
}
