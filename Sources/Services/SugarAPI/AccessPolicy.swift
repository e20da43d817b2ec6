import Glibc
public import Varlink

/// Who may call what on the `io.sugard.HealthDataSync` socket, decided per call from the peer's
/// credentials (`SO_PEERCRED`, plus its supplementary groups from `SO_PEERGROUPS`).
///
/// - Read methods: root, the daemon's own uid, or a member of ``socketGroup``.
/// - Mutating methods: root, the daemon's own uid, or a member of ``adminGroup``.
///
/// A nil group grants nothing: only root and the daemon's uid pass that level.
public struct AccessPolicy: Sendable, Hashable {
    /// What a method needs.
    public enum Level: String, Sendable, Hashable {
        /// GetStatus, Watch, ListReadings, ListMeters, ListSyncSessions.
        case read
        /// Sync, Forget, Pair, SubmitPasskey.
        case admin
    }

    /// Members may call read methods (the group that owns the socket file).
    public var socketGroup: UInt32?
    /// Members may call mutating methods.
    public var adminGroup: UInt32?
    /// The uid the daemon runs as; its own processes may call everything.
    public var daemonUID: UInt32

    /// A policy with these groups, for a daemon running as `daemonUID`.
    public init(socketGroup: UInt32?, adminGroup: UInt32?, daemonUID: UInt32) {
        self.socketGroup = socketGroup
        self.adminGroup = adminGroup
        self.daemonUID = daemonUID
    }

    /// A policy for the running process: its effective uid is the daemon's uid.
    public static func currentProcess(socketGroup: UInt32?, adminGroup: UInt32?) -> AccessPolicy {
        AccessPolicy(socketGroup: socketGroup, adminGroup: adminGroup, daemonUID: geteuid())
    }

    /// Whether `peer` may call methods that need `level`.
    public func allows(_ peer: VarlinkPeer, _ level: Level) -> Bool {
        if peer.uid == 0 || peer.uid == self.daemonUID { return true }
        let group: UInt32?
        switch level {
        case .read: group = self.socketGroup
        case .admin: group = self.adminGroup
        }
        guard let group else { return false }
        return peer.isMember(ofGroup: group)
    }
}
