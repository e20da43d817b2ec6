import Glibc
import GlucoseStoreFixtures
import HubStore
import JSON
import Locking
import MQTT
import SystemIO

/// `sugar-bench hub [--gateways G] [--records N] [--rate R]`: the built sugard-hub (next to
/// sugar-bench) against a local mosquitto and a throwaway PostgreSQL cluster (initdb/pg_ctl, as
/// nobody when run as root), fed by a load generator publishing the forwarder's reading contract
/// (`<prefix>/<gateway>/<meter>/reading`, QoS 1, its payload keys) for G gateways:
/// 1. throughput, one and then two hub instances: N readings published at once (in-flight window
///    of 500), seconds until the last row is committed: `readingsPerSecond` each, and the ratio;
/// 2. latency, two instances: readings published at R a second (default 1000) for N / R seconds;
///    each payload carries its publish time (an extra key, which the hub ignores and keeps) and the
///    row its commit-side `stored_at`: p50/p99 publish-to-committed-row microseconds;
/// 3. each hub's peak RSS (VmHWM).
enum HubBenchmark {
    typealias BenchError = ForwardBenchmark.BenchError

    static func run(gateways: Int, records: Int, rate: Int) async -> Int32 {
        var template = Array("/tmp/sugar-bench-hub.XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else { return 1 }
        let dir = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        chmod(dir, 0o755)
        var children: [pid_t] = []
        var postgres: (bin: String, data: String)?
        defer {
            for pid in children { kill(pid, SIGKILL); var s: Int32 = 0; _ = waitpid(pid, &s, 0) }
            if let postgres { _ = Self.asPostgres(postgres.bin + "/pg_ctl", ["-D", postgres.data, "-m", "immediate", "-w", "stop"]) }
            _ = ForwardBenchmark.spawnAndWait("/bin/rm", ["-rf", dir])
        }
        do {
            let result = try await Self.measure(gateways: gateways, records: records, rate: rate, dir: dir, children: &children, postgres: &postgres)
            writeStdout(JSONValue.object(result).prettySerialized() + "\n")
            return 0
        } catch {
            writeStderr("sugar-bench hub: \(error)\n")
            return 1
        }
    }

    /// Runs a PostgreSQL tool (as nobody when root); its exit status.
    static func asPostgres(_ tool: String, _ arguments: [String]) -> Int32 {
        if getuid() == 0 {
            return ForwardBenchmark.spawnAndWait("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--", tool] + arguments)
        }
        return ForwardBenchmark.spawnAndWait(tool, arguments)
    }

    static func measure(
        gateways: Int, records: Int, rate: Int, dir: String, children: inout [pid_t], postgres: inout (bin: String, data: String)?
    ) async throws -> JSONObject {
        let hub = siblingProgram("sugard-hub")
        guard access(hub, X_OK) == 0 else { throw BenchError("\(hub) is not built (swift build --product sugard-hub)") }
        guard let bin = [17, 16, 15, 14, 13].map({ "/usr/lib/postgresql/\($0)/bin" }).first(where: { access($0 + "/initdb", X_OK) == 0 }) else {
            throw BenchError("PostgreSQL is not installed (scripts/install-deps: postgresql)")
        }
        let data = dir + "/pg"
        mkdir(data, 0o700)
        if getuid() == 0 { chown(data, 65534, 65534) }
        guard Self.asPostgres(bin + "/initdb", ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"]) == 0 else {
            throw BenchError("initdb failed")
        }
        let pgPort = try ForwardBenchmark.freeLoopbackPort()
        guard
            Self.asPostgres(
                bin + "/pg_ctl",
                ["-D", data, "-l", data + "/server.log", "-w", "-t", "60", "-o", "-p \(pgPort) -k \(data) -c listen_addresses=127.0.0.1", "start"]) == 0
        else { throw BenchError("pg_ctl start failed (see \(data)/server.log)") }
        postgres = (bin, data)
        let url = "postgresql://postgres@127.0.0.1:\(pgPort)/postgres"

        let mqttPort = try ForwardBenchmark.freeLoopbackPort()
        let candidates: [String] = ["/usr/sbin/mosquitto", "/usr/bin/mosquitto"]
        guard let mosquitto = candidates.first(where: { access($0, X_OK) == 0 }) else {
            throw BenchError("mosquitto is not installed (scripts/install-deps)")
        }
        try ForwardBenchmark.writeText(
            dir + "/mosquitto.conf",
            "listener \(mqttPort) 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 1000000\nmax_inflight_messages 0\n"
                + (getuid() == 0 ? "user root\n" : ""))
        children.append(try ForwardBenchmark.spawn(mosquitto, ["-c", dir + "/mosquitto.conf"], log: dir + "/mosquitto.log"))
        try await ForwardBenchmark.waitFor(seconds: 10, "mosquitto") { ForwardBenchmark.canConnect(mqttPort) }

        func startHub(_ name: String, group: String) async throws -> pid_t {
            try ForwardBenchmark.writeText(
                dir + "/\(name).conf",
                "mqtt_url = mqtt://127.0.0.1:\(mqttPort)\nmqtt_client_id = \(name)\nshare_group = \(group)\ndatabase_url = \(url)\nlisten = 127.0.0.1:\(try ForwardBenchmark.freeLoopbackPort())\nlog_level = notice\n")
            chmod(dir + "/\(name).conf", 0o600)
            let pid = try ForwardBenchmark.spawn(hub, ["--config", dir + "/\(name).conf"], log: dir + "/\(name).log")
            children.append(pid)
            try await ForwardBenchmark.waitFor(seconds: 30, "\(name) connected", every: .milliseconds(20)) {
                (try? readWholeFile(dir + "/\(name).log")).map { String(decoding: $0, as: UTF8.self).contains("connected to") } ?? false
            }
            return pid
        }
        func stop(_ pid: pid_t) {
            kill(pid, SIGTERM)
            var s: Int32 = 0
            _ = waitpid(pid, &s, 0)
            children.removeAll { $0 == pid }
        }
        let store = try HubStore(url: url)

        var result: JSONObject = ["gateways": .int(Int64(gateways)), "records": .int(Int64(records))]
        // 1. Throughput: one instance, then two (fresh table, fresh group each time).
        var rates: [Double] = []
        var rss: [String: JSONValue] = [:]
        for instances in [1, 2] {
            let group = "bench\(instances)"
            var pids: [pid_t] = []
            for i in 0..<instances { pids.append(try await startHub("hub-\(instances)-\(i)", group: group)) }
            try store.db.execute("TRUNCATE reading")
            let messages = Self.messages(gateways: gateways, records: records, run: instances, stamp: false)
            let start = ContinuousClock.now
            let publisher = try Self.publisher(port: mqttPort)
            for (i, m) in messages.enumerated() { publisher.client.publish(m, token: Int64(i), session: publisher.session) }
            try await ForwardBenchmark.waitFor(seconds: 600, "all rows committed", every: .milliseconds(20)) {
                (try? store.db.execute("SELECT count(*) FROM reading").scalar) == String(records)
            }
            let seconds = ForwardBenchmark.seconds(start, ContinuousClock.now)
            publisher.client.stop()
            rates.append(Double(records) / seconds)
            for (i, pid) in pids.enumerated() { rss["hub\(instances)x-\(i)PeakRSSBytes"] = .from(peakResidentSetBytes(pid: pid)) }
            result[instances == 1 ? "oneInstanceReadingsPerSecond" : "twoInstancesReadingsPerSecond"] = .double((Double(records) / seconds).rounded())
            if instances == 1 { for pid in pids { stop(pid) } }
        }
        result["twoOverOne"] = .double((rates[1] / rates[0] * 100).rounded() / 100)

        // 2. Latency at `rate` a second, the two instances still running.
        try store.db.execute("TRUNCATE reading")
        let paced = Self.messages(gateways: gateways, records: records, run: 3, stamp: true)
        let publisher = try Self.publisher(port: mqttPort)
        let tick = 10  // milliseconds
        let perTick = max(1, rate * tick / 1000)
        var index = 0
        var next = ContinuousClock.now
        while index < paced.count {
            for m in paced[index..<min(paced.count, index + perTick)] {
                var stamped = m
                stamped.payload.removeLast()
                stamped.payload += Array(",\"benchSentMicros\":\(wallClockMicroseconds())}".utf8)
                publisher.client.publish(stamped, token: Int64(index), session: publisher.session)
                index += 1
            }
            next = next.advanced(by: .milliseconds(tick))
            try await Task.sleep(until: next, clock: .continuous)
        }
        try await ForwardBenchmark.waitFor(seconds: 120, "paced rows committed", every: .milliseconds(20)) {
            (try? store.db.execute("SELECT count(*) FROM reading").scalar) == String(records)
        }
        publisher.client.stop()
        let latency = try store.db.execute(
            """
            SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY l), percentile_cont(0.99) WITHIN GROUP (ORDER BY l), max(l) FROM (
                SELECT extract(epoch FROM stored_at) * 1000000 - (payload->>'benchSentMicros')::bigint AS l FROM reading) x
            """).rows.first ?? []
        result["pacedReadingsPerSecond"] = .int(Int64(rate))
        result["p50PublishToCommittedMicros"] = .from(latency.first.flatMap { $0.flatMap { Double($0) }?.rounded() })
        result["p99PublishToCommittedMicros"] = .from(latency.dropFirst().first.flatMap { $0.flatMap { Double($0) }?.rounded() })
        result["maxPublishToCommittedMicros"] = .from(latency.dropFirst(2).first.flatMap { $0.flatMap { Double($0) }?.rounded() })
        for (key, value) in rss.sorted(by: { $0.key < $1.key }) { result[key] = value }
        return result
    }

    /// The reading payloads of `records` readings spread over `gateways`, in the forwarder's shape.
    static func messages(gateways: Int, records: Int, run: Int, stamp: Bool) -> [MQTTMessage] {
        (0..<records).map { i in
            let g = i % gateways
            let sequence = i / gateways + 1
            let meter = "C0:26:DA:\(format2(g / 256)):\(format2(g % 256)):01"
            let level = meter.lowercased().filter { $0 != ":" }
            let mgdl = 70 + (i * 37) % 150
            let payload = """
                {"id":"\(meter)/\(run)/\(sequence)","meter":"\(meter)","sequenceNumber":\(sequence),"time":"2026-12-01T08:00:00Z",\
                "epochMillis":\(1_796_000_000_000 + Int64(i) * 1000),"mgdL":\(mgdl),"mmolL":\(Double(mgdl * 10 / 18) / 10),"flags":[],\
                "sampleType":"capillaryWholeBlood","sampleLocation":"finger","meal":null,"controlSolution":false,"person":"person-\(g)"}
                """
            return MQTTMessage(topic: "sugard/gateway-\(g)/\(level)/reading", payload: Array(payload.utf8))
        }
    }

    static func format2(_ n: Int) -> String {
        let hex = Array("0123456789ABCDEF")
        return String([hex[(n >> 4) & 15], hex[n & 15]])
    }

    /// A connected load-generator client (in-flight window 500).
    static func publisher(port: Int) throws -> (client: MQTTClient, session: Int) {
        var options = MQTTOptions(host: "127.0.0.1", port: Int32(port), clientID: "sugar-bench-hub-\(UInt32.random(in: 0...UInt32.max))")
        options.maxInFlight = 500
        let connected = Lock(0)
        let client = MQTTClient(options: options) { event in
            if case .connected(let s) = event { connected.withLock { $0 = s } }
        }
        do { try client.start() } catch { throw BenchError("\(error)") }
        let deadline = wallClockMilliseconds() + 10_000
        while connected.withLock({ $0 }) == 0 {
            guard wallClockMilliseconds() < deadline else { throw BenchError("the load generator could not connect") }
            usleep(5000)
        }
        return (client, connected.withLock { $0 })
    }
}
