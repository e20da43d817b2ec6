import GlucoseProfile

/// What to download from a OneTouch Verio meter, decided one answer at a time.
///
/// The second procedure beside the Glucose Profile's RACP: ``SyncStateMachine`` runs it for a meter
/// that offers the Verio vendor service, and keeps everything around it (timeouts and the one retry,
/// pairing, the link, chunked commits, the contiguous mark, the session). This value only says which
/// command comes next and what an answer means; it performs no I/O.
///
/// Order: read clock (`20 02`) → highest record number (`27 00`) → number of records (`0a 02 06`) →
/// [the record at the stored high-water mark, `b3 <hw>`] → records `from … highest`, one at a time.
/// The meter holds the newest `count` records, numbered `highest − count + 1 … highest`, and numbers
/// keep rising across downloads, so the record number is the sequence number.
///
/// Resets follow the Glucose Profile rule: the record at the stored high-water mark gone or different
/// means the meter was reset, and everything it holds is downloaded into a new epoch. "Gone" is
/// read from the numbers: a highest number below the mark (the counter started again) is a reset;
/// a mark below the oldest held number (the memory wrapped past it) is not: the meter only dropped
/// old records, and the download continues from the oldest one it holds.
public struct VerioProcedure: Hashable, Sendable {
    /// The step after an answer.
    public enum Next: Hashable, Sendable {
        /// Send this command (after acknowledging the reply that led here).
        case send(VerioCommand)
        /// Nothing more to read: the download is complete.
        case done
        /// The download cannot go on (one sentence, no reading values).
        case fail(String)
    }

    /// The stored high-water mark and the payload of the record stored at it.
    public let highWater: UInt16?
    public let highWaterRecord: [UInt8]?
    public let fullDownload: Bool

    /// The meter's answers so far.
    public private(set) var highest: UInt32?
    public private(set) var count: UInt16?
    /// The record at the mark was gone or different: everything is downloaded into a new epoch.
    public private(set) var resetDetected = false
    /// The records to download, `from … through`.
    public private(set) var from: UInt16?
    public private(set) var through: UInt16?

    public init(highWater: UInt16?, highWaterRecord: [UInt8]?, fullDownload: Bool) {
        self.highWater = highWater
        self.highWaterRecord = highWaterRecord
        self.fullDownload = fullDownload
    }

    /// The first command.
    public static let first = VerioCommand.readClock

    /// How many records the download asks for (nil before the count).
    public var expected: Int? {
        guard let from = self.from, let through = self.through else { return self.count == 0 ? 0 : nil }
        return from <= through ? Int(through - from) + 1 : 0
    }

    /// The command after `command` was answered (``VerioAnswer``) or refused (nil answer).
    public mutating func next(after command: VerioCommand, answer: VerioAnswer?) -> Next {
        switch command {
        case .readClock:
            // A clock the meter refuses leaves the times unverified; the download goes on.
            return .send(.highestRecordNumber)
        case .highestRecordNumber:
            guard case .highestRecordNumber(let highest)? = answer else {
                return .fail("the meter refused the highest record number (27 00)")
            }
            guard highest <= UInt32(UInt16.max) else {
                return .fail("the meter's record number \(highest) is beyond the 16-bit sequence numbers sugard stores")
            }
            self.highest = highest
            return .send(.recordCount)
        case .recordCount:
            guard case .recordCount(let count)? = answer, let highest = self.highest else {
                return .fail("the meter refused the number of records (0a 02 06)")
            }
            self.count = count
            return self.plan(highest: UInt16(highest), count: count)
        case .record(let number):
            if number == self.highWater, self.from == nil {
                // The check of the high-water record.
                guard case .record(_, let record)? = answer else {
                    // Not given back: not checked (like GLS), the download continues after the mark.
                    return self.download(from: number &+ 1)
                }
                if record.encoded() == self.highWaterRecord { return self.download(from: number &+ 1) }
                self.resetDetected = true
                return self.download(from: self.oldest)
            }
            guard let through = self.through, number < through else { return .done }
            return .send(.record(number: number + 1))
        }
    }

    /// Whether `number` is the reset check rather than a record of the download.
    public func isCheck(_ number: UInt16) -> Bool { self.from == nil && number == self.highWater }

    private var oldest: UInt16 {
        guard let highest = self.highest, let count = self.count, count > 0 else { return 1 }
        return UInt16(max(0, Int(highest) - Int(count) + 1))
    }

    private mutating func plan(highest: UInt16, count: UInt16) -> Next {
        guard count > 0 else {
            if let mark = self.highWater, highest < mark { self.resetDetected = true }
            self.from = 1
            self.through = 0
            return .done
        }
        guard let mark = self.highWater, !self.fullDownload else { return self.download(from: self.oldest) }
        if highest < mark {
            self.resetDetected = true  // the counter started again
            return self.download(from: self.oldest)
        }
        if mark < self.oldest { return self.download(from: self.oldest) }  // wrapped past the mark: not a reset
        if self.highWaterRecord != nil { return .send(.record(number: mark)) }
        return self.download(from: mark &+ 1)
    }

    private mutating func download(from: UInt16) -> Next {
        let through = UInt16(self.highest ?? 0)
        self.from = from
        self.through = through
        guard from <= through else { return .done }
        return .send(.record(number: from))
    }
}
