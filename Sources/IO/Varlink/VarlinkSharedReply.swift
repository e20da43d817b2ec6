/// A continuing reply (`"continues": true`) encoded once and sent on many calls: one change fanned
/// out to a thousand watchers costs one encoding, and every watcher's output holds the same bytes.
public struct VarlinkSharedReply: Sendable {
    /// The parameters object as JSON text.
    let parameters: [UInt8]
    /// The whole message, NUL-terminated.
    let message: [UInt8]

    /// - Parameter write: appends the parameters as JSON text (one object).
    public init(writingParameters write: (inout [UInt8]) -> Void) {
        var parameters: [UInt8] = []
        write(&parameters)
        self.parameters = parameters
        self.message = VarlinkWire.reply(continues: true) { $0.append(contentsOf: parameters) }
    }

    /// The size of the message on the wire.
    public var byteCount: Int { self.message.count }
}
