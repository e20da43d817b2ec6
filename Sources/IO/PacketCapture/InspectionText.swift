import GlucoseProfile

// The readable form of `sugarctl capture inspect` (without --json).

extension CaptureInspection {
    /// Sessions, then records (one line each), then anomalies, for people.
    public var readableText: String {
        var out = ""
        let verio = self.sessions.reduce(0) { $0 + ($1.verio?.records.count ?? 0) }
        out += "Frames: \(self.statistics.frames)  sessions: \(self.sessions.count)  records: \(self.recordCount)  "
            + (verio > 0 ? "Verio records: \(verio)  " : "") + "anomalies: \(self.anomalies.count)\n"
        for session in self.sessions { out += "\n" + session.readableText }
        out += "\nRecords (\(self.records.count)):\n"
        if !self.records.isEmpty {
            out += "  frame   sess    seq  base time            offset  value            type/location"
                + "                   status  context\n"
        }
        for record in self.records { out += "  " + record.readableLine + "\n" }
        out += "\nAnomalies (\(self.anomalies.count)):\n"
        for anomaly in self.anomalies { out += "  \(anomaly)\n" }
        return out
    }
}

extension InspectedSession {
    /// A paragraph about one session.
    public var readableText: String {
        let c = self.capture
        var out = "Session \(self.position): peer \(c.peer.map { "\($0)" } ?? "unknown")"
        if let type = c.peerAddressType { out += " (\(type))" }
        out += ", connection handle \(hex16(c.connectionHandle)), frames \(c.firstFrame)–\(c.lastFrame)\n"
        let ended: String =
            switch c.ended {
            case .disconnected(let reason): "disconnected (reason 0x\(hexByte(reason)))"
            case .replaced: "handle replaced"
            case .controllerRemoved: "controller removed"
            case .endOfCapture: "still open at the end of the capture"
            }
        out += "  MTU \(c.mtu), discovery \(c.discovery), encrypted \(c.encrypted ? "yes" : "no"), \(ended)\n"
        if self.pairingRequests > 0 || !self.pairingFailures.isEmpty {
            let failures = self.pairingFailures.map { "0x" + hexByte($0) }.joined(separator: ", ")
            out += "  Pairing: \(self.pairingRequests) request(s)" + (failures.isEmpty ? "" : ", failed: \(failures)") + "\n"
        }
        if let service = self.glucoseService {
            out += "  Glucose service \(hex16(service.startHandle))–\(hex16(service.endHandle))\n"
        }
        for item in self.meterCharacteristics {
            out += "    \(item.uuid.shortString) value \(hex16(item.valueHandle))"
            if let cccd = item.cccdHandle { out += " cccd \(hex16(cccd))" }
            if let properties = item.properties { out += " [\(properties)]" }
            out += "\n"
        }
        let info = self.deviceInformation
        let fields: [(String, String?)] = [
            ("name", info.deviceName), ("manufacturer", info.manufacturer), ("model", info.model),
            ("serial", info.serialNumber), ("hardware", info.hardware), ("firmware", info.firmware),
            ("software", info.software),
        ]
        let present = fields.compactMap { name, value in value.map { "\(name) \"\($0)\"" } }
        if !present.isEmpty { out += "  Device information: " + present.joined(separator: ", ") + "\n" }
        if let feature = self.feature {
            out += "  Feature: 0x\(hexByte(UInt8(feature.rawValue >> 8)))\(hexByte(UInt8(feature.rawValue & 0xFF))) ("
                + (feature.names.isEmpty ? "none" : feature.names.joined(separator: ", ")) + ")\n"
        }
        if let clock = self.clock {
            out += "  Clock (\(clock.characteristic.shortString)): \(clock.dateTime?.isoString ?? hexBytes(clock.bytes))\n"
        }
        for write in self.clockWrites {
            out += "  Clock write (\(write.characteristic.shortString)) frame \(write.frame): "
                + (write.dateTime?.isoString ?? hexBytes(write.bytes))
            if let error = write.error { out += " → ATT error 0x\(hexByte(error.rawValue)) (\(error))" }
            if let readBack = write.readBack { out += ", read back \(readBack.isoString)" }
            out += "\n"
        }
        for exchange in self.racp { out += "  RACP " + exchange.readableLine + "\n" }
        out += "  Records: \(self.recordCount)\n"
        if let verio = self.verio { out += verio.readableText }
        return out
    }
}

extension RACPExchange {
    /// `frame 80: reportStoredRecords ≥ seq 5 → 6 records → frame 120: success`.
    public var readableLine: String {
        var out = ""
        if let frame = self.requestFrame {
            out += "frame \(frame): "
            if let request = self.request {
                out += request.opCode.name + " " + request.operator.name
                if case .sequenceNumber(let min, let max)? = request.filter {
                    if let min { out += " seq≥\(min)" }
                    if let max { out += " seq≤\(max)" }
                }
            } else {
                out += "undecodable request " + hexBytes(self.requestBytes ?? [])
            }
        } else {
            out += "(no request)"
        }
        if let error = self.writeError { return out + " → ATT error 0x\(hexByte(error.rawValue)) (\(error))" }
        if self.request?.opCode == .reportStoredRecords { out += " → \(self.measurements) measurement(s)" }
        if let response = self.response, let frame = self.responseFrame {
            out += " → frame \(frame): "
            if let count = response.numberOfRecords {
                out += "\(count) record(s)"
            } else if let (request, code) = response.response {
                out += "\(request.name) \(code.name)"
            }
        } else {
            out += " → no response"
        }
        return out
    }
}

extension InspectedRecord {
    /// One table line.
    public var readableLine: String {
        let m = self.measurement
        func pad(_ text: String, _ width: Int, left: Bool = false) -> String {
            let fill = String(repeating: " ", count: max(0, width - text.count))
            return left ? fill + text : text + fill
        }
        var value = "—"
        if let c = m.concentration {
            if let special = c.special {
                value = special.name
            } else if m.unit == .molesPerLiter, let mmol = m.mmolL {
                value = "\(rounded(mmol, 2)) mmol/L"
            } else if let mg = m.mgdL {
                value = "\(rounded(mg, 1)) mg/dL"
            }
        }
        let typeLocation = m.type.map { "\($0.name)/\(m.sampleLocation?.name ?? "—")" } ?? "—"
        let status = m.sensorStatus.map { "0x" + hexByte(UInt8($0.rawValue >> 8)) + hexByte(UInt8($0.rawValue & 0xFF)) } ?? "—"
        var context = "—"
        if let ctx = self.context {
            var parts: [String] = []
            if let meal = ctx.meal { parts.append("meal \(meal.name)(\(meal.code))") }
            if let carbs = ctx.carbohydrate, let kg = carbs.kilograms.value { parts.append("carbs \(rounded(kg * 1000, 1)) g") }
            if let tester = ctx.tester { parts.append("tester \(tester.name)") }
            if let health = ctx.health { parts.append("health \(health.name)") }
            if ctx.medication != nil { parts.append("medication") }
            if ctx.exercise != nil { parts.append("exercise") }
            if ctx.hba1cPercent != nil { parts.append("HbA1c") }
            context = parts.isEmpty ? "(empty)" : parts.joined(separator: ", ")
        } else if m.contextFollows {
            context = "(announced, missing)"
        }
        return pad(String(self.frame), 7, left: true) + " " + pad(String(self.session), 5, left: true) + " "
            + pad(String(m.sequenceNumber), 6, left: true) + "  " + pad(m.baseTime.isoString, 20) + " "
            + pad(m.timeOffsetMinutes.map { String($0) } ?? "—", 6, left: true) + "  " + pad(value, 16) + " "
            + pad(typeLocation, 31) + " " + pad(status, 6) + "  " + context
    }
}

/// `value` rounded to `digits` decimals, without a trailing `.0` for whole numbers.
private func rounded(_ value: Double, _ digits: Int) -> String {
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let r = (value * scale).rounded() / scale
    if r == r.rounded() { return String(Int(r)) }
    return String(r)
}

extension InspectedVerio {
    /// The Verio part of a session paragraph: counts, clock, then one line per record and refusal.
    public var readableText: String {
        var out = "  Verio: \(self.commands) command(s), \(self.acknowledgements) acknowledgement(s)"
        if let clock = self.clock { out += ", clock \(Verio.dateTime(meterSeconds: clock.meterSeconds).isoString)" }
        if let highest = self.highestRecordNumber { out += ", highest record \(highest)" }
        if let count = self.recordCount { out += ", \(count) held" }
        out += "\n"
        for refusal in self.refusals {
            out += "    frame \(refusal.frame): \(refusal.command ?? "(no command)") refused: \(refusal.status.name)\n"
        }
        out += "  Verio records: \(self.records.count)\n"
        for item in self.records { out += "    " + item.readableLine + "\n" }
        return out
    }
}

extension InspectedVerioRecord {
    /// `frame 41  record 3  2025-11-20T07:00:00  123 mg/dL`, with HI/LO and the rest named.
    public var readableLine: String {
        let r = self.record
        let value: String =
            switch r.meaning {
            case .glucose: "\(r.mgdL) mg/dL"
            case .lo: "LO (\(r.mgdL) mg/dL sent)"
            case .hi: "HI (\(r.mgdL) mg/dL sent)"
            case .noValue: "no value (0)"
            case .notBloodGlucose: "not blood glucose (bytes 6–10 \(hexBytes(r.trailer)))"
            }
        return "frame \(self.frame)  record \(self.number)  \(r.dateTime.isoString)  \(value)"
    }
}
