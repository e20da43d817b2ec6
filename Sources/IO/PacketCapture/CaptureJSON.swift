import GlucoseProfile
import JSON

// JSON forms for tools (`sugarctl capture inspect --json`): instants as ISO 8601 and epoch milliseconds,
// enums as stable names plus their spec codes, bytes as lower-case hex.

extension CaptureTimestamp {
    /// Microseconds as ISO 8601 UTC and milliseconds since the Unix epoch.
    func json(into object: inout JSONObject, prefix: String) {
        object[prefix] = .string(self.description)
        object[prefix + "EpochMs"] = .int(self.unixMicroseconds / 1000)
    }
}

extension GATTAttribute {
    /// `{"handle": 18, "handleHex": "0x0012", "uuid": "2A18", "characteristic": "2A18", "service": "1808"}`.
    public var jsonValue: JSONValue {
        var object = JSONObject()
        object["handle"] = .int(Int64(self.handle))
        object["handleHex"] = .string(hex16(self.handle))
        object["uuid"] = self.uuid.map { .string($0.description) } ?? .null
        object["characteristic"] = self.characteristic.map { .string($0.description) } ?? .null
        object["service"] = self.service.map { .string($0.description) } ?? .null
        return .object(object)
    }
}

extension GATTEvent {
    /// One object per event; `kind` names the case, the other keys depend on it.
    public var jsonValue: JSONValue {
        var object = JSONObject()
        object["frame"] = .int(Int64(self.frame))
        self.timestamp.json(into: &object, prefix: "time")
        object["session"] = .int(Int64(self.session))
        object["controllerIndex"] = .int(Int64(self.controllerIndex))
        object["connectionHandle"] = .int(Int64(self.connectionHandle))
        object["peer"] = self.peer.map { .string($0.description) } ?? .null
        object["direction"] = .string(self.direction.description)
        func named(_ code: UInt8, _ name: String) -> JSONValue { .object(["code": .int(Int64(code)), "name": .string(name)]) }
        switch self.kind {
        case .connected(let peer, let addressType, let role):
            object["kind"] = "connected"
            object["peerAddress"] = peer.map { .string($0.description) } ?? .null
            object["addressType"] = addressType.map { named($0.rawValue, $0.description) } ?? .null
            object["role"] = role.map { .string($0.description) } ?? .null
        case .disconnected(let reason):
            object["kind"] = "disconnected"
            object["reason"] = .int(Int64(reason))
        case .mtuExchanged(let client, let server):
            object["kind"] = "mtuExchanged"
            object["clientMTU"] = .int(Int64(client))
            object["serverMTU"] = .int(Int64(server))
        case .read(let attribute, let value, let offset):
            object["kind"] = "read"
            object["attribute"] = attribute.jsonValue
            object["value"] = .string(hexBytes(value))
            object["offset"] = .int(Int64(offset))
        case .write(let attribute, let value, let withResponse):
            object["kind"] = "write"
            object["attribute"] = attribute.jsonValue
            object["value"] = .string(hexBytes(value))
            object["withResponse"] = .bool(withResponse)
        case .writeResponse(let attribute):
            object["kind"] = "writeResponse"
            object["attribute"] = attribute.jsonValue
        case .notification(let attribute, let value):
            object["kind"] = "notification"
            object["attribute"] = attribute.jsonValue
            object["value"] = .string(hexBytes(value))
        case .indication(let attribute, let value):
            object["kind"] = "indication"
            object["attribute"] = attribute.jsonValue
            object["value"] = .string(hexBytes(value))
        case .confirmation:
            object["kind"] = "confirmation"
        case .error(let request, let attribute, let code):
            object["kind"] = "error"
            object["request"] = named(request.rawValue, request.description)
            object["attribute"] = attribute.jsonValue
            object["error"] = named(code.rawValue, code.description)
        case .pairingRequested:
            object["kind"] = "pairingRequested"
        case .pairingFailed(let reason):
            object["kind"] = "pairingFailed"
            object["reason"] = .int(Int64(reason))
        case .encryptionChanged(let enabled, let status):
            object["kind"] = "encryptionChanged"
            object["enabled"] = .bool(enabled)
            object["status"] = .int(Int64(status))
        case .opaque(let opcode, let parameters):
            object["kind"] = "opaque"
            object["opcode"] = named(opcode.rawValue, opcode.description)
            object["parameters"] = .string(hexBytes(parameters))
        }
        return .object(object)
    }
}

extension CaptureAnomaly {
    /// `{"kind": "unknownHandle", "frame": 12, "session": 1, "attribute": {…}, "reason": "…"}`; absent
    /// frame, session and attribute are `null`.
    public var jsonValue: JSONValue {
        var object = JSONObject()
        object["kind"] = .string(self.kind.rawValue)
        object["frame"] = self.frame.map { .int(Int64($0)) } ?? .null
        object["session"] = self.session.map { .int(Int64($0)) } ?? .null
        object["attribute"] = self.attribute?.jsonValue ?? .null
        object["reason"] = .string(self.reason)
        return .object(object)
    }
}

extension GATTDatabase {
    /// Services and characteristics (with properties and descriptors) in handle order.
    public var jsonValue: JSONValue {
        let services: [JSONValue] = self.services.map { service in
            .object([
                "uuid": .string(service.uuid.description), "startHandle": .int(Int64(service.startHandle)),
                "endHandle": .int(Int64(service.endHandle)), "primary": .bool(service.isPrimary),
            ])
        }
        let characteristics: [JSONValue] = self.characteristics.map { item in
            .object([
                "uuid": .string(item.uuid.description),
                "service": item.service.map { .string($0.description) } ?? .null,
                "declarationHandle": .int(Int64(item.declarationHandle)),
                "valueHandle": .int(Int64(item.valueHandle)),
                "properties": item.properties.map { .string($0.description) } ?? .null,
                "descriptors": .array(item.descriptors.map {
                    .object(["handle": .int(Int64($0.handle)), "uuid": .string($0.uuid.description)])
                }),
            ])
        }
        return .object(["services": .array(services), "characteristics": .array(characteristics)])
    }
}

extension CaptureSession {
    /// The session's fields, its `start`/`end` instants (ISO 8601 and `…EpochMs`), `ended` (with
    /// `disconnectReason`), `discovery` (with `discoveryFromSession` when reused) and its `database`.
    public var jsonValue: JSONValue {
        var object = JSONObject()
        object["index"] = .int(Int64(self.index))
        object["controllerIndex"] = .int(Int64(self.controllerIndex))
        object["connectionHandle"] = .int(Int64(self.connectionHandle))
        object["peer"] = self.peer.map { .string($0.description) } ?? .null
        object["peerAddressType"] = self.peerAddressType.map { .string($0.description) } ?? .null
        object["role"] = self.role.map { .string($0.description) } ?? .null
        object["firstFrame"] = .int(Int64(self.firstFrame))
        object["lastFrame"] = .int(Int64(self.lastFrame))
        self.start.json(into: &object, prefix: "start")
        self.end.json(into: &object, prefix: "end")
        switch self.ended {
        case .disconnected(let reason):
            object["ended"] = "disconnected"
            object["disconnectReason"] = .int(Int64(reason))
        case .replaced: object["ended"] = "replaced"
        case .controllerRemoved: object["ended"] = "controllerRemoved"
        case .endOfCapture: object["ended"] = "endOfCapture"
        }
        object["mtu"] = .int(Int64(self.mtu))
        switch self.discovery {
        case .performed: object["discovery"] = "performed"
        case .reused(let session):
            object["discovery"] = "reused"
            object["discoveryFromSession"] = .int(Int64(session))
        case .provided: object["discovery"] = "provided"
        case .none: object["discovery"] = "none"
        }
        object["database"] = self.database.jsonValue
        object["eventCount"] = .int(Int64(self.eventCount))
        object["pairingFailed"] = .bool(self.pairingFailed)
        object["encrypted"] = .bool(self.encrypted)
        return .object(object)
    }
}
