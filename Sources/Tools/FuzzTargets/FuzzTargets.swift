import GlucoseProfile
import HealthDataSync
import PacketCapture
import Varlink

/// A property a fuzz target checks did not hold for one input.
///
/// The fuzz executables trap on it (so libFuzzer records the input as a crash); the regression
/// tests report it as a failed expectation.
public struct FuzzFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// Which target found it (`glucose-profile`, `json`, `config`, ...).
    public var target: String
    /// What went wrong, in one sentence.
    public var message: String

    public init(target: String, _ message: String) {
        self.target = target
        self.message = message
    }

    public var description: String { "fuzz-\(self.target): \(self.message)" }
}

/// The "one input" logic of every fuzz target, shared by the libFuzzer executables in `Fuzz/` and by
/// `FuzzRegressionTests`, so a crash found by the fuzzer replays as a test by dropping the input file into
/// `Fuzz/regressions/<target>/`.
///
/// Each function must accept any bytes without trapping; a trap or a thrown ``FuzzFailure`` is a finding.
public enum FuzzTargets {
    /// A fuzz target: consumes one input, throws when a checked property does not hold.
    public typealias Body = @Sendable ([UInt8]) throws(FuzzFailure) -> Void

    /// Every target by its name (the name is also the corpus and regressions folder name).
    public static let all: [(name: String, body: Body)] = [
        ("glucose-profile", { bytes throws(FuzzFailure) in try glucoseProfile(bytes) }),
        ("json", { bytes throws(FuzzFailure) in try json(bytes) }),
        ("config", { bytes throws(FuzzFailure) in try config(bytes) }),
        ("varlink", { bytes throws(FuzzFailure) in try varlink(bytes) }),
        ("btsnoop", { bytes throws(FuzzFailure) in try btsnoop(bytes) }),
    ]

    /// The target called `name`, or nil.
    public static func target(named name: String) -> Body? {
        self.all.first(where: { $0.name == name })?.body
    }
}
