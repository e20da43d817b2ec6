extension Wire {
    /// What a reading means: the one place that decides it, from the facts the daemon stored
    /// (its `flags` and whether it has a glucose value). Every sink renders this and nothing else:
    /// only ``glucose`` feeds a numeric glucose state; ``lo`` and ``hi`` are never turned into a
    /// number and never dropped.
    ///
    /// A control-solution test is ``controlSolution`` whatever its value (a control test reading
    /// LO is still not the person's glucose); a ketone record is ``ketone`` (its HI included);
    /// then LO, HI, a reading without a value (``noValue``), and otherwise ``glucose``.
    public enum ReadingKind: String, WireEnum, Hashable {
        /// `glucose`: a value; `lo`/`hi`: below or above the meter's range; `controlSolution`: a control
        /// test; `ketone`: a ketone record; `noValue`: a record without a usable value.
        case glucose, lo, hi, controlSolution, ketone, noValue

        /// The kind of a reading with these flag names (`ReadingFlags` names) and, when
        /// `hasValue`, a glucose value (`mgdL` not null).
        public init(flags: some Sequence<String>, hasValue: Bool) {
            var facts = Facts()
            for name in flags { facts.note(name) }
            self.init(facts, hasValue: hasValue)
        }

        /// The flags that decide a kind, gathered one name at a time (the byte decoder notes
        /// them as it reads the `flags` array, without making the strings).
        public struct Facts: Sendable, Hashable {
            /// `controlSolution` was noted.
            public var controlSolution = false
            /// `ketone` was noted.
            public var ketone = false
            /// `lo` was noted.
            public var lo = false
            /// `hi` was noted.
            public var hi = false
            /// `noValue` was noted.
            public var noValue = false

            /// No flag noted yet.
            public init() {}

            /// Notes one flag name (names that decide nothing are ignored).
            public mutating func note(_ name: String) {
                switch name {
                case "controlSolution": self.controlSolution = true
                case "ketone": self.ketone = true
                case "lo": self.lo = true
                case "hi": self.hi = true
                case "noValue": self.noValue = true
                default: break
                }
            }
        }

        /// The kind the noted flags decide, in the order the type describes: control solution, ketone,
        /// LO, HI, no value (also when `hasValue` is false), glucose.
        public init(_ facts: Facts, hasValue: Bool) {
            if facts.controlSolution {
                self = .controlSolution
            } else if facts.ketone {
                self = .ketone
            } else if facts.lo {
                self = .lo
            } else if facts.hi {
                self = .hi
            } else if facts.noValue || !hasValue {
                self = .noValue
            } else {
                self = .glucose
            }
        }

        /// Whether the reading says where the person's glucose is: a value, LO or HI (what a
        /// glucose state, a low or a high follows).
        public var isGlucoseLevel: Bool { self == .glucose || self == .lo || self == .hi }

        /// The Home Assistant event type of the reading's event (`control_solution` for
        /// ``controlSolution``); nil for ``noValue``, which fires no event.
        public var eventType: String? {
            switch self {
            case .glucose: "glucose"
            case .lo: "lo"
            case .hi: "hi"
            case .controlSolution: "control_solution"
            case .ketone: "ketone"
            case .noValue: nil
            }
        }
    }
}

extension Wire.CompactReading {
    /// What the reading means (``Wire/ReadingKind``).
    public var kind: Wire.ReadingKind { Wire.ReadingKind(flags: self.flags, hasValue: self.mgdL != nil) }
}

extension Wire.Reading {
    /// What the reading means (``Wire/ReadingKind``).
    public var kind: Wire.ReadingKind { Wire.ReadingKind(flags: self.flags, hasValue: self.mgdL != nil) }
}
