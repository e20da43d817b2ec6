import GlucoseStore
import GlucoseStoreFixtures
import HealthDataSync
import JSON
import Locking
import MQTT
import ProcessKit
import SugarForward
import SugarWire
import Varlink

#if canImport(Glibc)
import Glibc
#endif
import SystemIO

/// `sugar-bench forward N [--samples S] [--rounds R]`: sugard-forward against a local mosquitto,
/// side by side with a plain C libmosquitto publisher of the same payloads, in one run.
///
/// 1. N readings (4 synthetic meters) are committed to a fresh database; the built `sugard` (next
///    to sugar-bench) serves it, with one simulated meter that takes a reading a second.
/// 2. A forwarder run: the forwarder (SugarForward, in this process, following sugard with
///    FollowReadings after cursor 0) from the broker's CONNACK (as the C publisher's clock) to
///    the broker's PUBACK of the N-th reading (`forwarderSecondsFromStart`: from its start).
/// 3. A C publisher run: a C program built here with `cc … -lmosquitto` publishes the same N
///    payloads to the same topics (QoS 1, MQTT 5, libmosquitto's own thread), from its first
///    publish to its N-th PUBACK.
/// 4. R rounds (default 3) of both, in turn (the forwarder from cursor 0 each time, in a fresh
///    state directory): `forwarderReadingsPerSecond` and `cPublisherReadingsPerSecond` are the
///    medians, `ratio` = forwarder / C of the medians; `roundRatios` each round's. The machine's
///    speed drifts by ±25 % between runs a second apart; a median of alternate runs holds still.
/// 5. Latency (after the first forwarder run): the simulated meter's next S readings (default 20)
///    committed after the N-th PUBACK (one committed during the bulk waits behind it): from
///    sugard's commit (`storedAt`) to an MQTT subscriber in this process (subscribed to that
///    meter's reading topic only) receiving the reading message:
///    `commitToSubscriberMillis` p50 and p99 (the commit time has millisecond resolution).
/// 6. CPU per reading of each process in both runs, medians of the rounds
///    (`forwarderRunCpuMicrosPerReading`: this process (the forwarder), sugard and the broker;
///    `cPublisherRunCpuMicrosPerMessage`: the C publisher and the broker), less noisy than the
///    rates on two shared cores.
/// 7. `mqttClientAloneReadingsPerSecond`: the forwarder's MQTT client (``MQTTClient``, the forwarder's window)
///    publishing the C publisher's payloads, no feed: the client's share of the difference.
enum ForwardBenchmark {
    /// The simulated meter sugard runs (`simulate_meters = 1`): the latency samples.
    static let liveMeter = "D4:A0:5E:00:00:00"
    static let cSource = #"""
        #include <mosquitto.h>
        #include <pthread.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <time.h>

        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
        static int connected = 0, acked = 0, total = 0;

        static void on_connect(struct mosquitto *m, void *o, int rc, int f, const mosquitto_property *p) {
            pthread_mutex_lock(&lock); connected = rc == 0 ? 1 : -1; pthread_cond_broadcast(&changed); pthread_mutex_unlock(&lock);
        }
        static void on_publish(struct mosquitto *m, void *o, int mid, int rc, const mosquitto_property *p) {
            pthread_mutex_lock(&lock); acked++; if (acked == total) pthread_cond_broadcast(&changed); pthread_mutex_unlock(&lock);
        }
        static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

        int main(int argc, char **argv) {
            if (argc != 4) { fprintf(stderr, "usage: host port file\n"); return 64; }
            FILE *f = fopen(argv[3], "rb"); if (!f) { perror("open"); return 1; }
            fseek(f, 0, SEEK_END); long size = ftell(f); fseek(f, 0, SEEK_SET);
            char *text = malloc(size + 1); if (fread(text, 1, size, f) != (size_t)size) return 1; text[size] = 0; fclose(f);
            for (long i = 0; i < size; i++) if (text[i] == '\n') total++;
            char **topics = malloc(sizeof(char *) * total), **payloads = malloc(sizeof(char *) * total);
            char *line = text;
            for (int i = 0; i < total; i++) {
                char *end = strchr(line, '\n'); *end = 0; char *tab = strchr(line, '\t'); *tab = 0;
                topics[i] = line; payloads[i] = tab + 1; line = end + 1;
            }
            mosquitto_lib_init();
            struct mosquitto *m = mosquitto_new("sugar-bench-c-publisher", true, NULL);
            mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
            mosquitto_connect_v5_callback_set(m, on_connect);
            mosquitto_publish_v5_callback_set(m, on_publish);
            if (mosquitto_connect_bind_v5(m, argv[1], atoi(argv[2]), 30, NULL, NULL) != MOSQ_ERR_SUCCESS) return 1;
            mosquitto_loop_start(m);
            pthread_mutex_lock(&lock); while (connected == 0) pthread_cond_wait(&changed, &lock); pthread_mutex_unlock(&lock);
            if (connected < 0) return 1;
            double t0 = now();
            for (int i = 0; i < total; i++)
                mosquitto_publish_v5(m, NULL, topics[i], (int)strlen(payloads[i]), payloads[i], 1, false, NULL);
            pthread_mutex_lock(&lock); while (acked < total) pthread_cond_wait(&changed, &lock); pthread_mutex_unlock(&lock);
            double t1 = now();
            printf("{\"messages\": %d, \"seconds\": %.6f}\n", total, t1 - t0);
            mosquitto_disconnect(m); mosquitto_loop_stop(m, false); mosquitto_destroy(m);
            return 0;
        }
        """#

    struct BenchError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    static func run(count: Int, samples: Int, rounds: Int) async -> Int32 {
        guard let dir = makeScratchDirectory("sbench-fwd", for: "forward") else { return 1 }
        var children: [pid_t] = []
        defer {
            for pid in children {
                kill(pid, SIGTERM)
                var status: Int32 = 0
                var waited = 0
                while waitpid(pid, &status, WNOHANG) == 0 {
                    waited += 1
                    if waited == 500 { kill(pid, SIGKILL) }  // 5 s
                    usleep(10_000)
                }
            }
            // Everything in it is ours: the database, the broker's and forwarder's files, the C helper.
            _ = spawnAndWait("/bin/rm", ["-rf", dir])
        }
        do {
            let result = try await self.measure(count: count, samples: samples, rounds: rounds, dir: dir, children: &children)
            writeStdout(JSONValue.object(result).serialized() + "\n")
            return 0
        } catch {
            writeStderr("sugar-bench forward: \(error)\n")
            return 1
        }
    }

    static func measure(count: Int, samples: Int, rounds: Int, dir: String, children: inout [pid_t]) async throws -> JSONObject {
        // 1. The database and sugard.
        mkdir(dir + "/state", 0o700)
        let store = try SQLiteReadingStore(path: dir + "/state/sugard.sqlite")
        for batch in SyntheticIngest(readings: count, meters: 4, duplicateFraction: 0).batches() {
            _ = try await store.commit(batch)
        }
        await store.close()
        let here = String(CommandLine.arguments[0].prefix(upTo: CommandLine.arguments[0].lastIndex(of: "/") ?? CommandLine.arguments[0].startIndex))
        let sugard = (here.isEmpty ? "." : here) + "/sugard"
        let socket = dir + "/s"
        let now = Int64(time(nil))
        try writeText(dir + "/sugard.conf", """
            state_dir = \(dir)/state
            socket = \(socket)
            simulate_meters = 1
            simulate_start = \(now + 1)
            demo_interval = 1
            cooldown_seconds = 0
            timezone = UTC
            log_level = warning

            """)
        let sugardPID = try spawn(sugard, ["--config", dir + "/sugard.conf"], log: dir + "/sugard.log")
        children.append(sugardPID)
        try await waitFor(seconds: 30, "sugard's socket") { access(socket, F_OK) == 0 }

        // 2. The broker.
        let port = try freeLoopbackPort()
        let candidates: [String] = ["/usr/sbin/mosquitto", "/usr/bin/mosquitto"]
        let mosquitto = candidates.first { (path: String) in access(path, X_OK) == 0 }
        guard let mosquitto else { throw BenchError("mosquitto is not installed (scripts/install-deps)") }
        try writeText(dir + "/mosquitto.conf", "listener \(port) 127.0.0.1\nallow_anonymous true\npersistence false\n"
            + (getuid() == 0 ? "user root\n" : ""))
        let brokerPID = try spawn(mosquitto, ["-c", dir + "/mosquitto.conf"], log: dir + "/mosquitto.log")
        children.append(brokerPID)
        try await waitFor(seconds: 10, "mosquitto") { canConnect(port) }

        // 3. The latency subscriber (connected first, so it sees every reading message).
        let arrivals = Lock<[String: Int64]>([:])
        var subscriberOptions = MQTTOptions(host: "127.0.0.1", port: Int32(port), clientID: "sugar-bench-subscriber")
        // Only the simulated meter's topic: the latency needs nothing else, and a subscriber of every
        // bulk message would add the broker's fan-out and this process's parsing to both runs.
        subscriberOptions.subscriptions = ["sugard/bench/\(ForwardTopics.meterLevel(Self.liveMeter))/reading"]
        let subscribed = Lock(false)
        let subscriber = MQTTClient(options: subscriberOptions) { event in
            switch event {
            case .connected: subscribed.withLock { $0 = true }
            case .message(_, let payload):
                let at = wallMicros()
                if let id = (try? JSONValue(parsing: payload))?["id"]?.stringValue {
                    arrivals.withLock { if $0[id] == nil { $0[id] = at } }
                }
            default: break
            }
        }
        try subscriber.start()
        defer { subscriber.stop() }
        try await waitFor(seconds: 10, "the subscriber") { subscribed.withLock { $0 } }
        try await Task.sleep(for: .milliseconds(200))  // SUBACK

        // 4. Round 1: the forwarder, from cursor 0 to the N-th PUBACK.
        var config = ForwardConfig(gatewayID: "bench", socketPath: socket, stateDirectory: dir + "/fwd1")
        try config.apply(key: "mqtt_url", value: "mqtt://127.0.0.1:\(port)")
        config.homeAssistantDiscovery = false
        let pids = (sugard: sugardPID, broker: brokerPID)
        var forwarderRuns: [ForwarderRun] = []
        let first = try await Self.forwarderRun(config: config, count: count, pids: pids)
        forwarderRuns.append(first.run)
        let doneWall = wallMicros()

        // 5. Latency: the simulated meter's next readings, commit to subscriber. Only readings
        // committed after the bulk's last PUBACK count: one committed during the bulk waits behind
        // it (commit order), which measures the backlog, not the path.
        let liveBefore = arrivals.withLock { $0.keys.filter { $0.hasPrefix(Self.liveMeter) }.count }
        let liveMeter = Self.liveMeter
        do {
            try await waitFor(seconds: Double(samples) * 3 + 30, "\(samples) live readings") {
                arrivals.withLock { $0.keys.filter { $0.hasPrefix(liveMeter) }.count } >= liveBefore + samples + 1
            }
        } catch {
            try? await first.stop()
            throw error
        }
        let client = try VarlinkClient(socketPath: socket)
        defer { client.close() }
        var latencies: [Double] = []
        func list(_ parameters: JSONObject) async throws -> [Wire.Reading] {
            var out: [Wire.Reading] = []
            for try await reply in client.callMore("io.sugard.HealthDataSync.ListReadings", parameters) {
                out += try Wire.Reading.list(try Wire.ReadingsReply(json: .object(reply)).readings)
            }
            return out
        }
        // ListReadings returns at most 100 000 readings per call.
        let all = try await list(["limit": .int(Int64(min(count + 10_000, 100_000)))])
        let live = try await list(["meter": .string(liveMeter), "limit": 10_000])
        let seen = arrivals.withLock { $0 }
        for reading in live where reading.storedAt.epochMillis * 1000 > doneWall {
            guard let at = seen[ReadingExport.identifier(reading)] else { continue }
            latencies.append(Double(at - reading.storedAt.epochMillis * 1000) / 1000)
        }
        latencies.sort()
        func percentile(_ p: Double) -> Double {
            latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int((Double(latencies.count - 1) * p).rounded()))]
        }
        try await first.stop()

        // 6. The C publisher with the same payloads and topics.
        let topics = ForwardTopics(config: config)
        var lines = ""
        var messages: [MQTTMessage] = []
        for reading in all where reading.meter != liveMeter && messages.count < count {
            let message = MQTTMessage(topic: topics.reading(reading.meter), payload: try ForwardTopics.payloadBytes(Wire.CompactReading(reading)))
            lines += message.topic + "\t" + String(decoding: message.payload, as: UTF8.self) + "\n"
            messages.append(message)
        }
        try writeText(dir + "/payloads.txt", lines)
        try writeText(dir + "/publisher.c", cSource)
        let cc = spawnAndWait("/usr/bin/cc", ["-O2", "-o", dir + "/publisher", dir + "/publisher.c", "-lmosquitto", "-lpthread"])
        guard cc == 0 else { throw BenchError("cc could not build the C publisher (needs libmosquitto-dev)") }
        var cRuns = [try Self.cPublisherRun(dir: dir, port: port, broker: brokerPID)]

        // Further rounds, forwarder and C publisher in turn: the machine's speed drifts between
        // runs a second apart, so each side is the median of as many runs, taken alternately. The
        // forwarder starts from cursor 0 each round (a fresh state directory).
        if rounds > 1 {
            for round in 2...rounds {
                config.stateDirectory = dir + "/fwd\(round)"
                let next = try await Self.forwarderRun(config: config, count: count, pids: pids)
                try await next.stop()
                forwarderRuns.append(next.run)
                cRuns.append(try Self.cPublisherRun(dir: dir, port: port, broker: brokerPID))
            }
        }

        // 7. The forwarder's MQTT client alone with the same payloads (its window as the
        // forwarder has it): what the client costs without the feed.
        let cpuBeforeClient = (this: cpuMicros(getpid()), broker: cpuMicros(brokerPID))
        let clientSeconds = try await Self.clientOnly(messages, port: port)
        let cpuAfterClient = (this: cpuMicros(getpid()), broker: cpuMicros(brokerPID))

        func median(_ values: [Double]) -> Double {
            let sorted = values.sorted()
            return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        }
        let published = cRuns[0].messages
        let forwarderRates = forwarderRuns.map { Double(count) / $0.seconds }
        let cRates = cRuns.map { Double($0.messages) / $0.seconds }
        let forwarderRate = median(forwarderRates)
        let cRate = median(cRates)
        func rounded(_ x: Double, _ digits: Double = 1000) -> JSONValue { .double((x * digits).rounded() / digits) }
        func perReading(_ micros: [Int64], _ n: Int) -> JSONValue { rounded(median(micros.map { Double($0) / Double(max(1, n)) }), 100) }
        return [
            "benchmark": "forward", "readings": .int(Int64(count)), "rounds": .int(Int64(rounds)),
            "forwarderSeconds": rounded(first.run.seconds), "forwarderSecondsFromStart": rounded(first.run.secondsFromStart),
            "feedSeconds": rounded(first.run.feedSeconds), "forwarderReadingsPerSecond": rounded(forwarderRate, 1),
            "cPublisherMessages": .int(Int64(published)), "cPublisherSeconds": rounded(cRuns[0].seconds),
            "cPublisherReadingsPerSecond": rounded(cRate, 1), "ratio": rounded(forwarderRate / cRate),
            "roundRatios": .array(zip(forwarderRates, cRates).map { rounded($0 / $1) }),
            "roundForwarderReadingsPerSecond": .array(forwarderRates.map { rounded($0, 1) }),
            "roundCPublisherReadingsPerSecond": .array(cRates.map { rounded($0, 1) }),
            "mqttClientAloneReadingsPerSecond": rounded(Double(messages.count) / clientSeconds, 1),
            "latencySamples": .int(Int64(latencies.count)), "commitToSubscriberP50Millis": rounded(percentile(0.5)),
            "commitToSubscriberP99Millis": rounded(percentile(0.99)),
            // CPU time per reading (µs, user + system, from /proc/PID/stat in clock ticks; the median
            // of the rounds): where the two cores go in each run.
            "forwarderRunCpuMicrosPerReading": [
                "thisProcess": perReading(forwarderRuns.map(\.cpu.this), count),
                "sugard": perReading(forwarderRuns.map(\.cpu.sugard), count),
                "broker": perReading(forwarderRuns.map(\.cpu.broker), count),
            ],
            "cPublisherRunCpuMicrosPerMessage": [
                "publisher": perReading(cRuns.map(\.cpu.publisher), published),
                "broker": perReading(cRuns.map(\.cpu.broker), published),
            ],
            "mqttClientAloneRunCpuMicrosPerMessage": [
                "thisProcess": rounded(Double(cpuAfterClient.this - cpuBeforeClient.this) / Double(max(1, messages.count)), 100),
                "broker": rounded(Double(cpuAfterClient.broker - cpuBeforeClient.broker) / Double(max(1, messages.count)), 100),
            ],
        ]
    }

    /// One forwarder run: its seconds from the broker's CONNACK to the N-th PUBACK (as the C
    /// publisher's clock: the feed's connect to sugard and its first page are inside it, the MQTT
    /// connect is not), from its start, until the feed had handed it N readings; CPU time in µs.
    struct ForwarderRun {
        var seconds, secondsFromStart, feedSeconds: Double
        var cpu: (this: Int64, sugard: Int64, broker: Int64)
    }

    /// A forwarder following sugard from cursor 0 in `config.stateDirectory` until the N-th PUBACK;
    /// it goes on running (forwarding the live meter's readings) until `stop`.
    static func forwarderRun(config: ForwardConfig, count: Int, pids: (sugard: pid_t, broker: pid_t)) async throws
        -> (run: ForwarderRun, stop: () async throws -> Void)
    {
        mkdir(config.stateDirectory, 0o700)
        let forwarder = Forwarder(config: config, password: nil, logger: .disabled)
        let cpuBefore = (this: cpuMicros(getpid()), sugard: cpuMicros(pids.sugard), broker: cpuMicros(pids.broker))
        let started = ContinuousClock.now
        let task = Task { try await forwarder.run() }
        // The forwarder's progress, watched from a plain thread that sleeps 1 ms between looks (not
        // task timers on the cooperative pool the forwarder runs on: their wake-ups would be
        // counted as the forwarder's): when it connected, when the feed had handed it N readings,
        // when the N-th PUBACK moved the cursor. The bulk readings are cursors 1...N (a fresh
        // database); the live meter's come after them.
        struct Progress { var connected, feedDone, done: ContinuousClock.Instant?, stop = false }
        let progress = Lock(Progress())
        let watcher = startDetachedThread {
            var seen = Progress()
            while seen.done == nil, !progress.withLock({ $0.stop }) {
                let status = forwarder.status.withLock { $0 }
                let now = ContinuousClock.now
                if seen.connected == nil, status.state == .connected { seen.connected = now }
                if seen.feedDone == nil, status.received >= count { seen.feedDone = now }
                if status.cursor >= Int64(count) { seen.done = now }
                let found = seen
                progress.withLock { $0.connected = found.connected; $0.feedDone = found.feedDone; $0.done = found.done }
                if seen.done == nil { usleep(1000) }
            }
        }
        let stop: () async throws -> Void = {
            progress.withLock { $0.stop = true }
            forwarder.stop()
            try await task.value
        }
        do {
            guard watcher == 0 else { throw BenchError("cannot start the progress thread") }
            try await waitFor(seconds: 600, "the forwarder's \(count) PUBACKs", every: .milliseconds(20)) { progress.withLock { $0.done } != nil }
        } catch {
            try? await stop()
            throw error
        }
        let done = progress.withLock { $0.done } ?? ContinuousClock.now
        let cpuAfter = (this: cpuMicros(getpid()), sugard: cpuMicros(pids.sugard), broker: cpuMicros(pids.broker))
        let totalSeconds = seconds(started, done)
        let run = ForwarderRun(
            seconds: progress.withLock { $0.connected }.map { seconds($0, done) } ?? totalSeconds,
            secondsFromStart: totalSeconds,
            feedSeconds: progress.withLock { $0.feedDone }.map { seconds(started, $0) } ?? totalSeconds,
            cpu: (cpuAfter.this - cpuBefore.this, cpuAfter.sugard - cpuBefore.sugard, cpuAfter.broker - cpuBefore.broker))
        return (run, stop)
    }

    /// One run of the C publisher built in `dir`: its messages, seconds (first publish to last
    /// PUBACK) and CPU time (µs: the publisher's, the broker's).
    static func cPublisherRun(dir: String, port: Int, broker: pid_t) throws
        -> (messages: Int, seconds: Double, cpu: (publisher: Int64, broker: Int64))
    {
        let output = dir + "/publisher.out"
        let brokerBefore = cpuMicros(broker)
        let c = try spawn(dir + "/publisher", ["127.0.0.1", String(port), dir + "/payloads.txt"], log: output)
        var status: Int32 = 0
        var usage = rusage()
        _ = wait4(c, &status, 0, &usage)
        let brokerAfter = cpuMicros(broker)
        func micros(_ t: timeval) -> Int64 { Int64(t.tv_sec) * 1_000_000 + Int64(t.tv_usec) }
        guard status == 0, let result = try? JSONValue(parsing: String(decoding: try readFile(output), as: UTF8.self)),
            let seconds = result["seconds"]?.doubleValue, seconds > 0, let messages = result["messages"]?.intValue
        else { throw BenchError("the C publisher failed: \(String(decoding: (try? readFile(output)) ?? [], as: UTF8.self))") }
        return (Int(messages), seconds, (micros(usage.ru_utime) + micros(usage.ru_stime), brokerAfter - brokerBefore))
    }

    /// Publishes `messages` (QoS 1) through ``MQTTClient`` with the forwarder's window, from the
    /// CONNACK to the last PUBACK; returns the seconds.
    static func clientOnly(_ messages: [MQTTMessage], port: Int) async throws -> Double {
        struct Progress {
            var session: Int?
            var connectedAt: ContinuousClock.Instant?
            var acked = 0
            var doneAt: ContinuousClock.Instant?
        }
        let progress = Lock(Progress())
        var options = MQTTOptions(host: "127.0.0.1", port: Int32(port), clientID: "sugar-bench-client-alone")
        options.maxInFlight = Forwarder.defaultMaxInFlight
        let total = messages.count
        let client = MQTTClient(options: options) { event in
            switch event {
            case .connected(let session):
                progress.withLock {
                    $0.session = session
                    $0.connectedAt = ContinuousClock.now
                }
            case .acknowledged(let tokens, _):
                progress.withLock {
                    $0.acked += tokens.count
                    if $0.acked >= total, $0.doneAt == nil { $0.doneAt = ContinuousClock.now }
                }
            default: break
            }
        }
        try client.start()
        defer { client.stop() }
        try await waitFor(seconds: 10, "the client's CONNACK") { progress.withLock { $0.session != nil } }
        let session = progress.withLock { $0.session! }
        for (index, message) in messages.enumerated() { client.publish(message, token: Int64(index), session: session) }
        try await waitFor(seconds: 600, "the client's \(total) PUBACKs") { progress.withLock { $0.doneAt != nil } }
        let (from, to) = progress.withLock { ($0.connectedAt!, $0.doneAt!) }
        return seconds(from, to)
    }

    // MARK: Helpers

    /// User + system CPU time of process `pid` (all its threads, ended ones included), in µs;
    /// /proc/PID/stat counts clock ticks.
    static func cpuMicros(_ pid: pid_t) -> Int64 {
        guard let bytes = try? readFile("/proc/\(pid)/stat") else { return 0 }
        let text = String(decoding: bytes, as: UTF8.self)
        // After the command's closing parenthesis: state is field 3, utime 14 and stime 15.
        guard let close = text.lastIndex(of: ")") else { return 0 }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Int64(fields[11]), let system = Int64(fields[12]) else { return 0 }
        return (user + system) * 1_000_000 / Int64(sysconf(Int32(_SC_CLK_TCK)))
    }

    static func seconds(_ from: ContinuousClock.Instant, _ to: ContinuousClock.Instant) -> Double {
        let x = to - from
        return Double(x.components.seconds) + Double(x.components.attoseconds) / 1e18
    }

    static func waitFor(seconds: Double, _ what: String, every interval: Duration = .milliseconds(2), _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while !condition() {
            if ContinuousClock.now > deadline { throw BenchError("no \(what) within \(Int(seconds)) s") }
            try await Task.sleep(for: interval)
        }
    }

    static func writeText(_ path: String, _ text: String) throws { try writeFile(path, Array(text.utf8)) }

    static func spawn(_ path: String, _ arguments: [String], log: String) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let environment: [String] = ["PATH=/usr/bin:/bin", "TZ=UTC"]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for p in argv { free(p) }
            for p in envp { free(p) }
        }
        // The children get default signal handling and no blocked signals, whatever this process has.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for sig in [SIGTERM, SIGINT, SIGHUP, SIGPIPE] { sigaddset(&defaults, sig) }
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        guard rc == 0 else { throw BenchError("cannot start \(path): \(String(cString: strerror(rc)))") }
        return pid
    }

    static func spawnAndWait(_ path: String, _ arguments: [String]) -> Int32 {
        guard let pid = try? spawn(path, arguments, log: "/dev/null") else { return -1 }
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        return status
    }

    static func freeLoopbackPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { throw BenchError("cannot bind a loopback port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func canConnect(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    static func wallMicros() -> Int64 { wallClockMicroseconds() }
}
