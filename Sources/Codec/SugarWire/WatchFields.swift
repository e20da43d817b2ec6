public import JSON

extension Wire {
    /// One field of a `Watch` reply's `fields`: a field of `State` (the view model) or of `Meter`
    /// (a meter model), by its name in the interface.
    public enum WatchedField: Sendable {
        // State
        /// `State.daemon`.
        case daemon(Daemon)
        /// `State.adapter`.
        case adapter(Adapter)
        /// `State.meters`.
        case meters([Meter])
        /// `State.lastReading`.
        case lastReading(LastReading?)
        /// `State.readingCount`.
        case readingCount(Int64)
        /// `State.sync` (an object), as opposed to a meter's `sync` phase.
        case syncOverview(SyncOverview)
        /// `State.errors`.
        case errors([ReportedError])
        // Meter
        /// `Meter.identity`.
        case identity(MeterIdentity)
        /// `Meter.link`.
        case link(Meter.Link)
        /// `Meter.sync` (a phase name).
        case syncPhase(SyncPhase)
        /// `Meter.progress`.
        case progress(Progress)
        /// `Meter.lastSync`.
        case lastSync(LastSync?)
        /// `Meter.highWater`.
        case highWater(Int64?)
        /// `Meter.pairing`.
        case pairing(PairingState)
        /// `Meter.lastError`.
        case lastError(ReportedError?)
        /// `Meter.nextAttempt`.
        case nextAttempt(Instant?)

        /// The field `name` with its value; `sync` is the view model's (an object) or a meter's (a phase name).
        public init(name: String, json: JSONValue) throws(WireError) {
            let f = try WireFields([name: json])
            switch name {
            case "daemon": self = .daemon(try f.required(name))
            case "adapter": self = .adapter(try f.required(name))
            case "meters": self = .meters(try f.array(name))
            case "lastReading": self = .lastReading(try f.optional(name))
            case "readingCount": self = .readingCount(try f.required(name))
            case "sync" where json.stringValue != nil: self = .syncPhase(try f.required(name))
            case "sync": self = .syncOverview(try f.required(name))
            case "errors": self = .errors(try f.array(name))
            case "identity": self = .identity(try f.required(name))
            case "link": self = .link(try f.required(name))
            case "progress": self = .progress(try f.required(name))
            case "lastSync": self = .lastSync(try f.optional(name))
            case "highWater": self = .highWater(try f.optional(name))
            case "pairing": self = .pairing(try f.required(name))
            case "lastError": self = .lastError(try f.optional(name))
            case "nextAttempt": self = .nextAttempt(try f.optional(name))
            default: throw WireError(path: [name], reason: "not a field of State or Meter")
            }
        }

        /// The field's value in its wire form (without its name).
        public var json: JSONValue {
            switch self {
            case .daemon(let value): return value.json
            case .adapter(let value): return value.json
            case .meters(let value): return .wire(value)
            case .lastReading(let value): return .wire(value)
            case .readingCount(let value): return value.json
            case .syncOverview(let value): return value.json
            case .errors(let value): return .wire(value)
            case .identity(let value): return value.json
            case .link(let value): return value.json
            case .syncPhase(let value): return value.json
            case .progress(let value): return value.json
            case .lastSync(let value): return .wire(value)
            case .highWater(let value): return .from(value)
            case .pairing(let value): return value.json
            case .lastError(let value): return .wire(value)
            case .nextAttempt(let value): return .wire(value)
            }
        }
    }
}

extension Wire.WatchReply {
    /// `fields` read field by field, in the order they came.
    public func watchedFields() throws(WireError) -> [(name: String, value: Wire.WatchedField)] {
        var result: [(name: String, value: Wire.WatchedField)] = []
        for entry in self.fields.entries {
            do throws(WireError) {
                result.append((entry.key, try Wire.WatchedField(name: entry.key, json: entry.value)))
            } catch {
                throw WireError(path: ["fields"] + error.path, reason: error.reason)
            }
        }
        return result
    }
}
