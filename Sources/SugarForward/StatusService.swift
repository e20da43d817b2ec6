import JSON
import Locking
import Varlink

/// The forwarder's own small Varlink interface, `io.sugard.Forward`, which `sugarctl status`
/// reads to show the sink. Served on `<runtime or state dir>/io.sugard.Forward`.
public enum ForwardStatusService {
    public static let socketName = "io.sugard.Forward"
    public static let interfaceName = "io.sugard.Forward"

    public static let interfaceDescription = """
        # sugard-forward: every reading sugard stores, to an MQTT broker.
        interface io.sugard.Forward

        # One sink. state: connected, retrying (a transient failure, retried with backoff) or
        # failing (credentials, TLS, unknown host: retried slowly); reason says why it is not
        # connected. pending: readings held and not yet acknowledged by the broker.
        # lastDeliveryMillis: when the last acknowledgement moved the saved cursor.
        type Sink (
          name: string,
          broker: string,
          state: (connected, retrying, failing),
          reason: ?string,
          pending: int,
          lastDeliveryMillis: ?int,
          cursor: int,
          delivered: int,
          feedConnected: bool,
          feedReason: ?string
        )

        # The forwarder's sinks and their delivery state.
        method GetStatus() -> (sinks: []Sink)
        """

    static let definition: VarlinkInterfaceDefinition = {
        do {
            return try VarlinkInterfaceDefinition(description: interfaceDescription)
        } catch {
            fatalError("io.sugard.Forward description does not parse: \(error)")
        }
    }()

    /// A server answering `GetStatus` from `status`. The socket is 0660 for the process's group.
    public static func makeServer(path: String, status: Lock<SinkStatus>, version: String) throws(VarlinkServerError)
        -> VarlinkServer
    {
        var configuration = VarlinkServerConfiguration(listen: .path(path))
        configuration.socketMode = 0o660
        configuration.vendor = "sugard"
        configuration.product = "sugard-forward"
        configuration.version = version
        configuration.url = "https://github.com/sugard/sugard"
        configuration.maxConnections = 64
        configuration.maxConnectionsPerUID = 16
        let interface = VarlinkInterface(Self.definition) { call, replier throws(VarlinkError) in
            guard call.methodName == "GetStatus" else { throw .methodNotImplemented(call.method) }
            let sink = status.withLock { $0 }
            replier.reply(["sinks": .array([sink.json])])
        }
        return try VarlinkServer(configuration: configuration, handlers: [interface])
    }
}
