/// The one error type of PacketCapture: what went wrong, where (frame number when known), in one sentence.
public struct CaptureError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure. New codes may be added; match the ones you handle.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Raw: Hashable, Sendable {
            case io, notBTSnoop, unsupportedVersion, unsupportedDatalink, corruptRecord, invalidArgument
        }
        private let raw: Raw
        private init(_ raw: Raw) { self.raw = raw }

        /// Opening, reading or writing a file failed.
        public static let io = Code(.io)
        /// The file does not start with the btsnoop magic.
        public static let notBTSnoop = Code(.notBTSnoop)
        /// The btsnoop version is not 1.
        public static let unsupportedVersion = Code(.unsupportedVersion)
        /// The datalink type is not 1001, 1002 or 2001.
        public static let unsupportedDatalink = Code(.unsupportedDatalink)
        /// A record header is impossible (absurd length); reading cannot continue past it.
        public static let corruptRecord = Code(.corruptRecord)
        /// A caller-supplied value (address, UUID, handle override, builder call) is invalid.
        public static let invalidArgument = Code(.invalidArgument)

        /// The code's name, e.g. `corruptRecord`.
        public var description: String { "\(self.raw)" }
    }

    /// What kind of failure it is, for callers that branch on it.
    public let code: Code
    /// The 1-based frame number the error is about, when it is about one.
    public let frame: Int?
    /// One human sentence.
    public let message: String

    /// An error of `code`, about `frame` when given, worded as `message`.
    public init(_ code: Code, frame: Int? = nil, _ message: String) {
        self.code = code
        self.frame = frame
        self.message = message
    }

    /// The message alone (the frame, when known, is already in it where it matters).
    public var description: String { self.message }
}
