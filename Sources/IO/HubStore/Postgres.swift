import CPostgres
import Glibc

/// A PostgreSQL failure: libpq's message and, for a statement, its SQLSTATE.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    /// libpq's message, trailing newlines removed.
    public var message: String
    /// The SQLSTATE of a failed statement (`23505` unique violation, …); nil for a connection failure.
    public var sqlState: String?
    /// An error with its message and, for a statement, its SQLSTATE.
    public init(_ message: String, sqlState: String? = nil) {
        self.message = message
        self.sqlState = sqlState
    }
    /// The message, with `(SQLSTATE …)` when there is one.
    public var description: String { self.sqlState.map { "\(self.message) (SQLSTATE \($0))" } ?? self.message }
}

/// The rows of one statement, as text (libpq's text format); nil is SQL NULL.
public struct PostgresRows: Sendable {
    /// Column names, in order.
    public var columns: [String]
    /// Each row's cells in column order, as text.
    public var rows: [[String?]]

    /// The first column of the first row (nil when there is none or it is NULL).
    public var scalar: String? { self.rows.first.flatMap { $0.first ?? nil } }
}

/// One libpq connection (`PGconn`). Not shared between threads: each thread that talks to
/// PostgreSQL owns one (the hub's MQTT thread has its own, the HTTP server another behind a lock).
public final class PostgresConnection {
    /// The `PGconn*`; nil when connecting failed.
    private var conn: OpaquePointer?
    /// The connection URI it was made with (it may hold a password: never log it).
    public let url: String

    /// Connects to a libpq connection URI (`postgresql://user@host:port/db?...`).
    public init(url: String) throws(PostgresError) {
        self.url = url
        let conn = PQconnectdb(url)
        self.conn = conn
        guard let conn, PQstatus(conn) == CONNECTION_OK else {
            let message = conn.map { Self.text(PQerrorMessage($0)) } ?? "out of memory"
            if let conn { PQfinish(conn) }
            self.conn = nil
            throw PostgresError("cannot connect to PostgreSQL: \(message)")
        }
    }

    deinit { if let conn = self.conn { PQfinish(conn) } }

    /// A libpq message as a Swift string without its trailing newlines.
    private static func text(_ p: UnsafePointer<CChar>?) -> String {
        guard let p else { return "" }
        var s = String(cString: p)
        while s.hasSuffix("\n") { s.removeLast() }
        return s
    }

    /// Whether the connection is usable; a broken one is reset once (reconnect) first.
    public func ensureConnected() throws(PostgresError) {
        guard let conn = self.conn else { throw PostgresError("no PostgreSQL connection") }
        if PQstatus(conn) != CONNECTION_OK { PQreset(conn) }
        guard PQstatus(conn) == CONNECTION_OK else {
            throw PostgresError("PostgreSQL connection lost: \(Self.text(PQerrorMessage(conn)))")
        }
    }

    /// Runs one statement with `$1...` text parameters; returns its rows (none for a command).
    @discardableResult
    public func execute(_ sql: String, _ parameters: [String?] = []) throws(PostgresError) -> PostgresRows {
        try self.ensureConnected()
        let conn = self.conn
        // The parameters as C strings that live until PQexecParams returns.
        let cStrings: [UnsafeMutablePointer<CChar>?] = parameters.map { $0.map { strdup($0) } ?? nil }
        defer { for p in cStrings { free(p) } }
        let result: OpaquePointer? = cStrings.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: UnsafePointer<CChar>?.self) { values in
                PQexecParams(conn, sql, Int32(parameters.count), nil, values.baseAddress, nil, nil, 0)
            }
        }
        guard let result else { throw PostgresError("PostgreSQL: \(Self.text(PQerrorMessage(conn)))") }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            throw PostgresError(Self.text(PQresultErrorMessage(result)), sqlState: state)
        }
        let fields = Int(PQnfields(result))
        let count = Int(PQntuples(result))
        var columns: [String] = []
        for f in 0..<fields { columns.append(String(cString: PQfname(result, Int32(f)))) }
        var rows: [[String?]] = []
        rows.reserveCapacity(count)
        for r in 0..<count {
            var row: [String?] = []
            row.reserveCapacity(fields)
            for f in 0..<fields {
                if PQgetisnull(result, Int32(r), Int32(f)) != 0 {
                    row.append(nil)
                } else {
                    row.append(String(cString: PQgetvalue(result, Int32(r), Int32(f))))
                }
            }
            rows.append(row)
        }
        return PostgresRows(columns: columns, rows: rows)
    }
}
