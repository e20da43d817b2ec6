public import JSON

extension Wire {
    /// One stored reading as `ListReadings` and `FollowReadings` send it (`object` in the interface).
    ///
    /// The object carries every key of `sugarctl decode measurement --json` (the Glucose Profile's
    /// own form, kept as it came in ``object``) and the stored facts this type reads: `id`, `meter`,
    /// `epoch`, `mgdL`/`mmolL` (the daemon's conclusion), `ketoneMmolL`, `flags`, `time`, `storedAt`,
    /// `context` and `person`. It re-encodes to exactly the object it was read from.
    public struct Reading: WireValue, Hashable {
        /// The whole object as it came.
        public var object: JSONObject
        /// The store's id of the reading (stays the same when its person changes).
        public var id: Int64
        /// The meter's id.
        public var meter: String
        /// The meter's epoch the reading belongs to (a new one after each meter reset).
        public var epoch: Int64
        /// The meter's record number, unique within meter and epoch.
        public var sequenceNumber: Int64
        /// The daemon's conclusion in mg/dL; nil when the reading has no usable glucose value.
        public var mgdL: Double?
        /// The same in mmol/L.
        public var mmolL: Double?
        /// A ketone value in mmol/L, for meters that send one.
        public var ketoneMmolL: Double?
        /// Reading flag names (`controlSolution`, `hi`, `lo`, `timeFault`, `ketone`, …); see ``ReadingKind``.
        public var flags: [String]
        /// When it was measured and how that was concluded.
        public var time: ReadingTime
        /// When the daemon stored it.
        public var storedAt: Instant
        /// The decoded Measurement Context (`sugarctl decode context --json`), or nil.
        public var context: JSONObject?
        /// The measurement's sample type and location (`type`, `sampleLocation`), when it says.
        public var sampleType: Coded?
        /// The measurement's sample location, when it says.
        public var sampleLocation: Coded?
        /// The context's meal (`preprandial`, ...), when the context carries one.
        public var meal: Coded?
        /// The person the reading belongs to (by assignment or attribution); nil when nobody.
        public var person: String?
        /// Measured while its meter was shared, and nobody was given it yet (`awaitingAttribution`).
        public var awaitingAttribution: Bool

        /// The meal's name, when the context carries a meal.
        public var mealName: String? { self.meal?.name }

        /// A stored reading as the daemon sends it: `profile` is the Glucose Profile's own form of
        /// its measurement (with `sequenceNumber`), the stored facts are set on top of it in this
        /// order (`mgdL`, `mmolL` and `flags` replace the profile's values in place).
        public init(
            profile: JSONObject, id: Int64, meter: String, epoch: Int64, sequenceNumber: Int64, mgdL: Double?, mmolL: Double?,
            ketoneMmolL: Double?, flags: [String], time: ReadingTime, storedAt: Instant, person: String?, context: JSONObject?,
            awaitingAttribution: Bool = false
        ) {
            var object = profile
            object["sequenceNumber"] = .int(sequenceNumber)
            object["mgdL"] = .from(mgdL)
            object["mmolL"] = .from(mmolL)
            object["id"] = .int(id)
            object["meter"] = .string(meter)
            object["epoch"] = .int(epoch)
            object["ketoneMmolL"] = .from(ketoneMmolL)
            object["flags"] = .wire(flags)
            object["time"] = time.json
            object["storedAt"] = storedAt.json
            object["person"] = .from(person)
            object["context"] = .wire(context)
            object["awaitingAttribution"] = .bool(awaitingAttribution)
            self.object = object
            self.awaitingAttribution = awaitingAttribution
            self.id = id
            self.meter = meter
            self.epoch = epoch
            self.sequenceNumber = sequenceNumber
            self.mgdL = mgdL
            self.mmolL = mmolL
            self.ketoneMmolL = ketoneMmolL
            self.flags = flags
            self.time = time
            self.storedAt = storedAt
            self.context = context
            self.sampleType = try? WireFields(.object(profile)).optional("type")
            self.sampleLocation = try? WireFields(.object(profile)).optional("sampleLocation")
            self.meal = context.flatMap { try? Self.meal(in: $0) }
            self.person = person
        }

        /// Reads the stored facts from a reading object, keeping the whole object; throws when one is
        /// missing or mistyped.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.object = f.object
            self.id = try f.required("id")
            self.meter = try f.required("meter")
            self.epoch = try f.required("epoch")
            self.sequenceNumber = try f.required("sequenceNumber")
            self.mgdL = try f.optional("mgdL")
            self.mmolL = try f.optional("mmolL")
            self.ketoneMmolL = try f.optional("ketoneMmolL")
            self.flags = try f.array("flags")
            self.time = try f.required("time")
            self.storedAt = try f.required("storedAt")
            self.context = try f.optional("context")
            self.sampleType = try f.optional("type")
            self.sampleLocation = try f.optional("sampleLocation")
            self.person = try f.optional("person")
            self.awaitingAttribution = try f.optional("awaitingAttribution") ?? false
            if let context = self.context { self.meal = try Self.meal(in: context) }
        }

        /// The meal of a decoded Measurement Context, when it carries one.
        static func meal(in context: JSONObject) throws(WireError) -> Coded? {
            do throws(WireError) {
                return try WireFields(.object(context)).optional("meal")
            } catch {
                throw error.within("context")
            }
        }

        /// The reading as the object it came as (every key, not only the ones read here).
        public var json: JSONValue { .object(self.object) }

        /// Reading objects (`ListReadings`' `readings`) read in order.
        public static func list(_ objects: [JSONObject]) throws(WireError) -> [Reading] {
            var readings: [Reading] = []
            readings.reserveCapacity(objects.count)
            for (index, object) in objects.enumerated() {
                do throws(WireError) {
                    readings.append(try Reading(json: .object(object)))
                } catch {
                    throw error.within("[\(index)]")
                }
            }
            return readings
        }
    }

    /// A reading's `time`: when it was taken and how sugard concluded that.
    public struct ReadingTime: WireValue, Hashable {
        /// The instant in UTC, ISO 8601.
        public var iso: String
        /// The instant in milliseconds since the epoch.
        public var epochMillis: Int64
        /// ISO 8601 with the zone offset used.
        public var local: String
        /// The UTC offset of `zone` at that instant, in minutes.
        public var utcOffsetMinutes: Int64
        /// The zone the meter's wall-clock time was read in (IANA name, e.g. `Europe/Berlin`).
        public var zone: String
        /// How the instant was found.
        public var method: LastReading.TimeMethod
        /// The meter's own local time after quirks (base time + offset), without a zone.
        public var meterLocalTime: String
        /// Meter clock minus host clock at sync, in seconds; nil when the clock was not read.
        public var meterClockSkewSeconds: Int64?
        /// Vendor quirks applied to the time (names from the quirk table), in order.
        public var quirks: [String]

        /// A reading time with every field given.
        public init(
            iso: String, epochMillis: Int64, local: String, utcOffsetMinutes: Int64, zone: String,
            method: LastReading.TimeMethod, meterLocalTime: String, meterClockSkewSeconds: Int64?, quirks: [String]
        ) {
            self.iso = iso
            self.epochMillis = epochMillis
            self.local = local
            self.utcOffsetMinutes = utcOffsetMinutes
            self.zone = zone
            self.method = method
            self.meterLocalTime = meterLocalTime
            self.meterClockSkewSeconds = meterClockSkewSeconds
            self.quirks = quirks
        }

        /// Requires every field but `meterClockSkewSeconds`; throws ``WireError`` naming the
        /// missing or mistyped one.
        public init(json: JSONValue) throws(WireError) {
            let f = try WireFields(json)
            self.iso = try f.required("iso")
            self.epochMillis = try f.required("epochMillis")
            self.local = try f.required("local")
            self.utcOffsetMinutes = try f.required("utcOffsetMinutes")
            self.zone = try f.required("zone")
            self.method = try f.required("method")
            self.meterLocalTime = try f.required("meterLocalTime")
            self.meterClockSkewSeconds = try f.optional("meterClockSkewSeconds")
            self.quirks = try f.array("quirks")
        }

        /// The time object with every field; `meterClockSkewSeconds` is null when the clock was not read.
        public var json: JSONValue {
            [
                "iso": .string(self.iso), "epochMillis": .int(self.epochMillis), "local": .string(self.local),
                "utcOffsetMinutes": .int(self.utcOffsetMinutes), "zone": .string(self.zone), "method": self.method.json,
                "meterLocalTime": .string(self.meterLocalTime), "meterClockSkewSeconds": .from(self.meterClockSkewSeconds),
                "quirks": .wire(self.quirks),
            ]
        }
    }

}
