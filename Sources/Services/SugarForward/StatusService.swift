import JSON
import SugarWire
import Varlink

/// The forwarder's own small Varlink interface, `io.sugard.Forward`, which `sugarctl status`
/// reads to show the sink. Served on `<runtime or state dir>/io.sugard.Forward`.
public enum ForwardStatusService {
    /// The socket's file name in the runtime or state directory.
    public static let socketName = "io.sugard.Forward"
    /// `io.sugard.Forward`.
    public static let interfaceName = "io.sugard.Forward"

    /// The interface in Varlink's interface definition language (what `GetInterfaceDescription` returns).
    public static let interfaceDescription = """
        # sugard-forward: every reading sugard stores, to an MQTT broker and to Nightscout sites.
        interface io.sugard.Forward

        # One sink. name: "mqtt" for the MQTT sink, the section's name for a Nightscout sink
        # ("nightscout" for the keys before any section); kind says which. broker: the MQTT sink's
        # mqtt_url; url: a Nightscout sink's site; person: the one person whose readings the sink
        # takes (null: every reading, unassigned meters' too).
        # state: connected, retrying (a transient failure, retried with backoff) or failing
        # (credentials, TLS, unknown host, a refused API secret, a batch the site will not take:
        # retried slowly); reason says why it is not connected (for Nightscout: "Nightscout refused
        # the API secret", or the site's message). nightscoutState: a Nightscout sink's own state
        # (idle, delivering, retrying, refused, paused). pending: readings held and not yet
        # acknowledged by the broker or the site. lastDeliveryMillis: when the last acknowledgement
        # moved the saved cursor. feedConnected, feedReason: the sink's feed of sugard's readings.
        # databaseId: the sugard database the cursor is a position in; databaseReset: the last time
        # that database changed (recreated or restored) and the sink started over from its beginning.
        type Sink (
          name: string,
          kind: (mqtt, nightscout),
          broker: ?string,
          url: ?string,
          person: ?string,
          state: (connected, retrying, failing),
          nightscoutState: ?(idle, delivering, retrying, refused, paused),
          reason: ?string,
          pending: int,
          lastDeliveryMillis: ?int,
          cursor: int,
          delivered: int,
          feedConnected: bool,
          feedReason: ?string,
          databaseId: ?string,
          databaseReset: ?DatabaseReset
        )

        # sugard's database changed: at (epoch ms) the sink noticed that its cursor belonged to
        # previousDatabaseId and started over from the beginning of databaseId (receivers drop
        # readings they have by their id, so nothing is lost and nothing is skipped).
        type DatabaseReset (atMillis: int, previousDatabaseId: string, databaseId: string)

        # One alert event, as on the MQTT alert topic: id names the episode (its firing and its
        # resolved event share it); rule: low, urgent_low, high, sync_overdue, gateway_failed;
        # reading: the reading's id (<meter>/<epoch>/<sequence>) or null; time: ISO 8601 UTC
        # (timeMillis the same in epoch ms); value: the reading's mg/dL (null for LO, HI, the
        # meter and gateway rules).
        type Alert (
          id: string,
          rule: (low, urgent_low, high, sync_overdue, gateway_failed),
          state: (firing, resolved),
          person: ?string,
          meter: ?string,
          reading: ?string,
          time: string,
          timeMillis: int,
          value: ?float,
          message: string
        )

        # enabled: false with alerts = off; active: the firing alerts (each its firing event).
        type AlertsSummary (enabled: bool, active: []Alert)

        # One [webhook NAME]: idle (all delivered), delivering, or retrying (reason: the last failure);
        # pending: alert events not delivered yet.
        type Webhook (
          name: string,
          url: string,
          format: string,
          state: (idle, delivering, retrying),
          reason: ?string,
          pending: int,
          lastDeliveryMillis: ?int
        )

        # The forwarder's sinks and their delivery state: the MQTT sink first (when it runs), then
        # the Nightscout sinks in the order of the config file; and the alerts firing.
        method GetStatus() -> (sinks: []Sink, alerts: ?AlertsSummary)

        # The alerts firing, the recent alert events (oldest first) and the webhooks.
        method GetAlerts() -> (enabled: bool, active: []Alert, recent: []Alert, webhooks: []Webhook)
        """

    /// ``interfaceDescription`` parsed.
    static let definition: VarlinkInterfaceDefinition = {
        do {
            return try VarlinkInterfaceDefinition(description: interfaceDescription)
        } catch {
            fatalError("io.sugard.Forward description does not parse: \(error)")
        }
    }()

    /// A server answering `GetStatus` with `sinks()` (each a `Sink` object) and the alerts'
    /// summary, and `GetAlerts` with `alerts()`. The socket is 0660 for the process's group.
    public static func makeServer(
        path: String, sinks: @escaping @Sendable () -> [Wire.ForwardSink],
        alerts: @escaping @Sendable () -> Wire.ForwardAlertsReply? = { nil }, version: String
    )
        throws(VarlinkServerError)
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
            switch call.methodName {
            case "GetStatus":
                let summary = alerts().map { Wire.ForwardAlertsSummary(enabled: $0.enabled, active: $0.active) }
                replier.reply(Wire.ForwardStatusReply(sinks: sinks(), alerts: summary).json.objectValue ?? [:])
            case "GetAlerts":
                let reply = alerts() ?? Wire.ForwardAlertsReply(enabled: false, active: [], recent: [], webhooks: [])
                replier.reply(reply.json.objectValue ?? [:])
            default:
                throw .methodNotImplemented(call.method)
            }
        }
        return try VarlinkServer(configuration: configuration, handlers: [interface])
    }
}
