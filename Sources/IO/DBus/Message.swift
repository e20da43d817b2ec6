internal import CDBus

/// Owns one `DBusMessage*` reference and unrefs it in `deinit`.
///
/// `@unchecked Sendable` invariant: a message has exactly one holder at a time. It is built (and
/// validated) on the caller's thread, then handed over to the event-loop thread, which is its only
/// user afterwards. libdbus message reference counts are atomic (`dbus_threads_init_default`).
final class OwnedMessage: @unchecked Sendable {
    /// The `DBusMessage*`, valid while this object lives.
    let pointer: OpaquePointer

    /// Takes over one existing reference.
    init(adopting pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        dbus_message_unref(self.pointer)
    }

    /// A method call with `arguments`; names and path are validated first.
    /// - Throws: ``DBusError/Kind/invalidArgument`` for an invalid name, path or argument.
    static func methodCall(
        destination: String?, path: String, interface: String?, member: String, arguments: [DBusValue]
    ) throws(DBusError) -> OwnedMessage {
        if let destination { try Validate.busName(destination) }
        try Validate.path(path)
        if let interface { try Validate.interface(interface) }
        try Validate.member(member)
        guard let raw = dbus_message_new_method_call(destination, path, interface, member) else {
            throw DBusError.invalidArgument("Out of memory creating a call of \(member) on \(path).")
        }
        let message = OwnedMessage(adopting: raw)
        try message.append(arguments)
        return message
    }

    /// A signal from `path`; names and path are validated first.
    static func signal(path: String, interface: String, member: String, arguments: [DBusValue]) throws(DBusError)
        -> OwnedMessage
    {
        try Validate.path(path)
        try Validate.interface(interface)
        try Validate.member(member)
        guard let raw = dbus_message_new_signal(path, interface, member) else {
            throw DBusError.invalidArgument("Out of memory creating the signal \(interface).\(member).")
        }
        let message = OwnedMessage(adopting: raw)
        try message.append(arguments)
        return message
    }

    /// The reply to the call with serial `replySerial` from `destination` (its sender).
    static func methodReturn(destination: String?, replySerial: UInt32, arguments: [DBusValue]) throws(DBusError)
        -> OwnedMessage
    {
        guard let raw = dbus_message_new(DBUS_MESSAGE_TYPE_METHOD_RETURN) else {
            throw DBusError.invalidArgument("Out of memory creating a method reply.")
        }
        let message = OwnedMessage(adopting: raw)
        message.address(to: destination, replySerial: replySerial)
        try message.append(arguments)
        return message
    }

    /// An error reply `name` with `text` as its one string argument.
    static func errorReply(destination: String?, replySerial: UInt32, name: String, text: String) throws(DBusError)
        -> OwnedMessage
    {
        try Validate.errorName(name)
        guard let raw = dbus_message_new(DBUS_MESSAGE_TYPE_ERROR) else {
            throw DBusError.invalidArgument("Out of memory creating an error reply.")
        }
        let message = OwnedMessage(adopting: raw)
        _ = dbus_message_set_error_name(raw, name)
        message.address(to: destination, replySerial: replySerial)
        try message.append([.string(text)])
        return message
    }

    /// Makes the message a reply: its serial, its destination, and no reply expected to it.
    private func address(to destination: String?, replySerial: UInt32) {
        _ = dbus_message_set_reply_serial(self.pointer, replySerial)
        if let destination { _ = dbus_message_set_destination(self.pointer, destination) }
        dbus_message_set_no_reply(self.pointer, 1)
    }

    /// Appends `arguments`, all validated before the first is written (a bad one leaves the message untouched).
    func append(_ arguments: [DBusValue]) throws(DBusError) {
        for argument in arguments { try Marshal.validate(argument) }
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(self.pointer, &iter)
        for argument in arguments { try Marshal.append(argument, to: &iter) }
    }
}

/// Header fields and arguments copied out of a received message.
struct ReceivedMessage {
    /// `DBUS_MESSAGE_TYPE_*`: call, return, error or signal.
    var type: Int32
    /// The unique bus name of the sender (`:1.42`); nil on a peer-to-peer connection.
    var sender: String?
    /// The bus name it was sent to, if any.
    var destination: String?
    /// The object path (calls and signals).
    var path: String?
    /// The interface (calls and signals; optional on calls).
    var interface: String?
    /// The method or signal name.
    var member: String?
    /// The error name of an error reply.
    var errorName: String?
    /// The sender's serial, which a reply refers to.
    var serial: UInt32
    /// The caller asked for no reply.
    var noReply: Bool

    /// Copies the header fields of `message` (which stays owned by the caller).
    init(_ message: OpaquePointer) {
        self.type = dbus_message_get_type(message)
        self.sender = dbus_message_get_sender(message).map { String(cString: $0) }
        self.destination = dbus_message_get_destination(message).map { String(cString: $0) }
        self.path = dbus_message_get_path(message).map { String(cString: $0) }
        self.interface = dbus_message_get_interface(message).map { String(cString: $0) }
        self.member = dbus_message_get_member(message).map { String(cString: $0) }
        self.errorName = dbus_message_get_error_name(message).map { String(cString: $0) }
        self.serial = dbus_message_get_serial(message)
        self.noReply = dbus_message_get_no_reply(message) != 0
    }

    /// Decodes every argument of `message`; throws ``DBusError/Kind/invalidMessage`` when one cannot be read.
    static func arguments(of message: OpaquePointer) throws(DBusError) -> [DBusValue] {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(message, &iter) != 0 else { return [] }
        return try Marshal.readAll(&iter)
    }
}

/// Checks names against the D-Bus rules before they reach libdbus, whose own checks abort the process.
enum Validate {
    /// An object path: `/` or `/`-separated non-empty elements of `[A-Za-z0-9_]`.
    static func path(_ path: String) throws(DBusError) {
        guard !path.utf8.contains(0), dbus_validate_path(path, nil) != 0 else {
            throw DBusError.invalidArgument("\"\(path)\" is not a valid D-Bus object path.")
        }
    }

    /// An interface name: two or more dot-separated elements, none starting with a digit.
    static func interface(_ name: String) throws(DBusError) {
        guard !name.utf8.contains(0), dbus_validate_interface(name, nil) != 0 else {
            throw DBusError.invalidArgument("\"\(name)\" is not a valid D-Bus interface name.")
        }
    }

    /// A method or signal name: `[A-Za-z_][A-Za-z0-9_]*`.
    static func member(_ name: String) throws(DBusError) {
        guard !name.utf8.contains(0), dbus_validate_member(name, nil) != 0 else {
            throw DBusError.invalidArgument("\"\(name)\" is not a valid D-Bus member name.")
        }
    }

    /// A well-known (`org.bluez`) or unique (`:1.42`) bus name.
    static func busName(_ name: String) throws(DBusError) {
        guard !name.utf8.contains(0), dbus_validate_bus_name(name, nil) != 0 else {
            throw DBusError.invalidArgument("\"\(name)\" is not a valid D-Bus bus name.")
        }
    }

    /// An error name: the rules of an interface name.
    static func errorName(_ name: String) throws(DBusError) {
        guard !name.utf8.contains(0), dbus_validate_error_name(name, nil) != 0 else {
            throw DBusError.invalidArgument("\"\(name)\" is not a valid D-Bus error name.")
        }
    }

    /// Exactly one complete type (`a{sv}`, not `ss`).
    static func singleSignature(_ signature: String) throws(DBusError) {
        guard !signature.utf8.contains(0), dbus_signature_validate_single(signature, nil) != 0 else {
            throw DBusError.invalidArgument("\"\(signature)\" is not a single complete D-Bus type signature.")
        }
    }
}
