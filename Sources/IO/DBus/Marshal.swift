internal import CDBus

/// Conversion between `DBusValue` and libdbus message iterators (never the variadic functions).
enum Marshal {
    // MARK: Validation (libdbus aborts on malformed input, so everything is checked first)

    /// Checks that `value` can be marshalled: strings without NUL, valid paths and signatures, array
    /// elements and dictionary entries of the declared signatures, basic dictionary keys, non-empty
    /// structures. Throws ``DBusError/Kind/invalidArgument`` naming the first problem.
    static func validate(_ value: DBusValue) throws(DBusError) {
        switch value {
        case .byte, .bool, .int16, .uint16, .int32, .uint32, .int64, .uint64, .double, .bytes:
            return
        case .string(let s):
            guard !s.utf8.contains(0) else {
                throw DBusError.invalidArgument("A D-Bus string cannot contain a NUL character.")
            }
        case .objectPath(let p):
            try Validate.path(p)
        case .signature(let g):
            guard !g.utf8.contains(0), g.utf8.count <= 255, dbus_signature_validate(g, nil) != 0 else {
                throw DBusError.invalidArgument("\"\(g)\" is not a valid D-Bus signature.")
            }
        case .array(let element, let items):
            try Validate.singleSignature(element)
            for item in items {
                guard item.signature == element else {
                    throw DBusError.invalidArgument(
                        "An array of \(element) contains an element of type \(item.signature).")
                }
                try self.validate(item)
            }
        case .dict(let keySignature, let valueSignature, let entries):
            guard DBusValue.isBasicSignature(keySignature) else {
                throw DBusError.invalidArgument("A dictionary key must be a basic type, not \(keySignature).")
            }
            try Validate.singleSignature(valueSignature)
            for entry in entries {
                guard entry.key.signature == keySignature, entry.value.signature == valueSignature else {
                    throw DBusError.invalidArgument(
                        "A dictionary of {\(keySignature)\(valueSignature)} contains an entry of type "
                            + "{\(entry.key.signature)\(entry.value.signature)}.")
                }
                try self.validate(entry.key)
                try self.validate(entry.value)
            }
        case .variant(let inner):
            try self.validate(inner)
        case .structure(let fields):
            guard !fields.isEmpty else {
                throw DBusError.invalidArgument("A D-Bus structure needs at least one field.")
            }
            for field in fields { try self.validate(field) }
        }
    }

    // MARK: Appending

    /// Appends a validated value to a message iterator; `.bytes` goes in as one fixed array. Throws only
    /// when libdbus runs out of memory.
    static func append(_ value: DBusValue, to iter: inout DBusMessageIter) throws(DBusError) {
        var ok: dbus_bool_t = 1
        switch value {
        case .byte(var v): ok = dbus_message_iter_append_basic(&iter, CDBUS_TYPE_BYTE, &v)
        case .bool(let b):
            var v: dbus_bool_t = b ? 1 : 0
            ok = dbus_message_iter_append_basic(&iter, CDBUS_TYPE_BOOLEAN, &v)
        case .int16(var v): ok = dbus_message_iter_append_basic(&iter, CDBUS_TYPE_INT16, &v)
        case .uint16(var v): ok = dbus_message_iter_append_basic(&iter, CDBUS_TYPE_UINT16, &v)
        case .int32(var v): ok = dbus_message_iter_append_basic(&iter, CDBUS_TYPE_INT32, &v)
        case .uint32(var v): ok = dbus_message_iter_append_basic(&iter, CDBUS_TYPE_UINT32, &v)
        case .int64(var v): ok = dbus_message_iter_append_basic(&iter, CDBUS_TYPE_INT64, &v)
        case .uint64(var v): ok = dbus_message_iter_append_basic(&iter, CDBUS_TYPE_UINT64, &v)
        case .double(var v): ok = dbus_message_iter_append_basic(&iter, CDBUS_TYPE_DOUBLE, &v)
        case .string(let s): ok = self.appendString(s, type: CDBUS_TYPE_STRING, to: &iter)
        case .objectPath(let s): ok = self.appendString(s, type: CDBUS_TYPE_OBJECT_PATH, to: &iter)
        case .signature(let s): ok = self.appendString(s, type: CDBUS_TYPE_SIGNATURE, to: &iter)
        case .bytes(let bytes):
            try self.container(CDBUS_TYPE_ARRAY, "y", &iter) { (sub: inout DBusMessageIter) throws(DBusError) in
                guard !bytes.isEmpty else { return }
                let ok = bytes.withUnsafeBufferPointer { buffer -> dbus_bool_t in
                    var base = buffer.baseAddress
                    return dbus_message_iter_append_fixed_array(&sub, CDBUS_TYPE_BYTE, &base, Int32(buffer.count))
                }
                guard ok != 0 else { throw self.outOfMemory }
            }
        case .array(let element, let items):
            try self.container(CDBUS_TYPE_ARRAY, element, &iter) { (sub: inout DBusMessageIter) throws(DBusError) in
                for item in items { try self.append(item, to: &sub) }
            }
        case .dict(let keySignature, let valueSignature, let entries):
            let element = "{" + keySignature + valueSignature + "}"
            try self.container(CDBUS_TYPE_ARRAY, element, &iter) { (sub: inout DBusMessageIter) throws(DBusError) in
                for entry in entries {
                    try self.container(CDBUS_TYPE_DICT_ENTRY, nil, &sub) {
                        (pair: inout DBusMessageIter) throws(DBusError) in
                        try self.append(entry.key, to: &pair)
                        try self.append(entry.value, to: &pair)
                    }
                }
            }
        case .variant(let inner):
            try self.container(CDBUS_TYPE_VARIANT, inner.signature, &iter) {
                (sub: inout DBusMessageIter) throws(DBusError) in
                try self.append(inner, to: &sub)
            }
        case .structure(let fields):
            try self.container(CDBUS_TYPE_STRUCT, nil, &iter) { (sub: inout DBusMessageIter) throws(DBusError) in
                for field in fields { try self.append(field, to: &sub) }
            }
        }
        guard ok != 0 else { throw self.outOfMemory }
    }

    /// What an allocation failure inside libdbus is reported as.
    private static var outOfMemory: DBusError {
        DBusError.invalidArgument("libdbus ran out of memory while building a message.")
    }

    /// Appends a string-like basic value (`s`, `o` or `g`) as a C string.
    private static func appendString(_ s: String, type: Int32, to iter: inout DBusMessageIter) -> dbus_bool_t {
        s.withCString { pointer in
            var p: UnsafePointer<CChar>? = pointer
            return dbus_message_iter_append_basic(&iter, type, &p)
        }
    }

    /// Opens a container of `type` (with `signature` for arrays and variants), lets `body` fill it and
    /// closes it; abandons it when `body` throws, so the message stays consistent.
    private static func container(
        _ type: Int32, _ signature: String?, _ iter: inout DBusMessageIter,
        _ body: (inout DBusMessageIter) throws(DBusError) -> Void
    ) throws(DBusError) {
        var sub = DBusMessageIter()
        let opened: dbus_bool_t
        if let signature {
            opened = signature.withCString { dbus_message_iter_open_container(&iter, type, $0, &sub) }
        } else {
            opened = dbus_message_iter_open_container(&iter, type, nil, &sub)
        }
        guard opened != 0 else { throw self.outOfMemory }
        do {
            try body(&sub)
        } catch {
            dbus_message_iter_abandon_container(&iter, &sub)
            throw error
        }
        guard dbus_message_iter_close_container(&iter, &sub) != 0 else { throw self.outOfMemory }
    }

    // MARK: Reading

    /// Reads every remaining value at this iterator's level.
    static func readAll(_ iter: inout DBusMessageIter) throws(DBusError) -> [DBusValue] {
        var values: [DBusValue] = []
        while dbus_message_iter_get_arg_type(&iter) != CDBUS_TYPE_INVALID {
            values.append(try self.read(&iter))
            dbus_message_iter_next(&iter)
        }
        return values
    }

    /// The full signature of the value at the iterator (e.g. `a{sv}`).
    private static func signature(of iter: inout DBusMessageIter) -> String {
        guard let raw = dbus_message_iter_get_signature(&iter) else { return "" }
        defer { dbus_free(raw) }
        return String(cString: raw)
    }

    /// Reads the value at the iterator: `ay` becomes `.bytes`, arrays of dict entries `.dict`. Unix fds
    /// (`h`) are not supported and throw ``DBusError/Kind/invalidMessage``.
    static func read(_ iter: inout DBusMessageIter) throws(DBusError) -> DBusValue {
        let type = dbus_message_iter_get_arg_type(&iter)
        var basic = DBusBasicValue()
        switch type {
        case CDBUS_TYPE_BYTE:
            dbus_message_iter_get_basic(&iter, &basic)
            return .byte(basic.byt)
        case CDBUS_TYPE_BOOLEAN:
            dbus_message_iter_get_basic(&iter, &basic)
            return .bool(basic.bool_val != 0)
        case CDBUS_TYPE_INT16:
            dbus_message_iter_get_basic(&iter, &basic)
            return .int16(basic.i16)
        case CDBUS_TYPE_UINT16:
            dbus_message_iter_get_basic(&iter, &basic)
            return .uint16(basic.u16)
        case CDBUS_TYPE_INT32:
            dbus_message_iter_get_basic(&iter, &basic)
            return .int32(basic.i32)
        case CDBUS_TYPE_UINT32:
            dbus_message_iter_get_basic(&iter, &basic)
            return .uint32(basic.u32)
        case CDBUS_TYPE_INT64:
            dbus_message_iter_get_basic(&iter, &basic)
            return .int64(Int64(basic.i64))
        case CDBUS_TYPE_UINT64:
            dbus_message_iter_get_basic(&iter, &basic)
            return .uint64(UInt64(basic.u64))
        case CDBUS_TYPE_DOUBLE:
            dbus_message_iter_get_basic(&iter, &basic)
            return .double(basic.dbl)
        case CDBUS_TYPE_STRING, CDBUS_TYPE_OBJECT_PATH, CDBUS_TYPE_SIGNATURE:
            dbus_message_iter_get_basic(&iter, &basic)
            let text = basic.str.map { String(cString: $0) } ?? ""
            if type == CDBUS_TYPE_STRING { return .string(text) }
            if type == CDBUS_TYPE_OBJECT_PATH { return .objectPath(text) }
            return .signature(text)
        case CDBUS_TYPE_VARIANT:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            return .variant(try self.read(&sub))
        case CDBUS_TYPE_STRUCT:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            return .structure(try self.readAll(&sub))
        case CDBUS_TYPE_ARRAY:
            let full = self.signature(of: &iter)
            let element = String(full.dropFirst())
            var sub = DBusMessageIter()
            let elementType = dbus_message_iter_get_element_type(&iter)
            dbus_message_iter_recurse(&iter, &sub)
            if elementType == CDBUS_TYPE_BYTE {
                var base: UnsafePointer<UInt8>? = nil
                var count: Int32 = 0
                if dbus_message_iter_get_arg_type(&sub) == CDBUS_TYPE_BYTE {
                    dbus_message_iter_get_fixed_array(&sub, &base, &count)
                }
                guard let base, count > 0 else { return .bytes([]) }
                return .bytes(Array(UnsafeBufferPointer(start: base, count: Int(count))))
            }
            if elementType == CDBUS_TYPE_DICT_ENTRY {
                // element is "{kv...}": the key is one basic type code, the value is the rest.
                let inner = element.dropFirst().dropLast()
                let keySignature = String(inner.prefix(1))
                let valueSignature = String(inner.dropFirst())
                var entries: [DBusDictEntry] = []
                while dbus_message_iter_get_arg_type(&sub) == CDBUS_TYPE_DICT_ENTRY {
                    var pair = DBusMessageIter()
                    dbus_message_iter_recurse(&sub, &pair)
                    let key = try self.read(&pair)
                    guard dbus_message_iter_next(&pair) != 0 else {
                        throw DBusError.invalidMessage("A dictionary entry in a received message has no value.")
                    }
                    let value = try self.read(&pair)
                    entries.append(DBusDictEntry(key, value))
                    dbus_message_iter_next(&sub)
                }
                return .dict(keySignature: keySignature, valueSignature: valueSignature, entries)
            }
            return .array(elementSignature: element, try self.readAll(&sub))
        default:
            let code = UnicodeScalar(UInt8(truncatingIfNeeded: type))
            throw DBusError.invalidMessage("Received a D-Bus value of unsupported type '\(Character(code))'.")
        }
    }
}
